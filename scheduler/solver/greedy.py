"""Layer `solver`: the two greedy baselines the solver must beat, over the same `GangProblem`.

- `per_pod_binpack` is what Volcano does: each task, in order, to the fitting node with the fewest free GPUs
  left after it (ties to the higher node score, then the lowest node index), blind to topology. With
  `by_score` it is what allocate does pod by pod with the configured scorers: each task to the fitting node
  with the highest node score (ties to the fewest GPUs left); scores are as the cluster is before the gang.
- `topology_greedy` picks the lowest tier, and at that tier the domain with the fewest free GPUs left over
  that holds the whole gang, then packs inside it with `per_pod_binpack`.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from scheduler.solver.evaluate import GangProblem, Placement
from scheduler.solver.topology import IntArray

DOMAINS_TRIED_PER_TIER = 16


def per_pod_binpack(
    problem: GangProblem, within: npt.NDArray[np.bool_] | None = None, *, by_score: bool = False
) -> Placement | None:
    """Place task by task; None when some task fits nowhere. `within` restricts the nodes (a domain)."""
    free = problem.idle.copy()
    gpu = problem.gpu_row
    out: list[IntArray] = []
    for group in problem.groups:
        candidates = group.candidates if within is None else group.candidates[within[group.candidates]]
        dims = np.flatnonzero(group.request)
        request = group.request[dims][:, None]
        nodes = np.empty(group.count, dtype=np.int64)
        placed = 0
        while placed < group.count:
            room = free[np.ix_(dims, candidates)] if dims.size else None
            mask = (room >= request).all(axis=0) if room is not None else np.ones(candidates.size, dtype=bool)
            if not mask.any():
                return None
            fitting = candidates[mask]
            left = free[gpu, fitting] if gpu is not None else np.zeros(fitting.size, dtype=np.int64)
            if group.scores is None:
                node = int(fitting[int(np.argmin(left))])
            else:
                score = -group.scores[fitting]
                node = int(fitting[np.lexsort((left, score) if by_score else (score, left))[0]])
            # The chosen node stays first by both keys while it still holds a task (its score is fixed, its
            # GPUs left only fall), so the per-pod loop would put the next tasks there too: place them at once.
            copies = group.count - placed
            if dims.size:
                copies = min(copies, int((free[dims, node] // group.request[dims]).min()))
            nodes[placed : placed + copies] = node
            free[:, node] -= group.request * copies
            placed += copies
        out.append(nodes)
    return tuple(out)


def feasible_domains(problem: GangProblem, tier: int) -> tuple[IntArray, IntArray]:
    """Domains at `tier` whose summed idle covers the gang's need on its candidate nodes, tightest first,
    with the free GPUs each would have left over."""
    ids = problem.topology.domain[tier]
    union = np.unique(np.concatenate([g.candidates for g in problem.groups]))
    need = problem.need()
    count = int(ids.max()) + 1 if ids.size else 0
    ok = np.ones(count, dtype=bool)
    for dim in np.flatnonzero(need):
        total = np.bincount(ids[union], weights=problem.idle[dim, union].astype(np.float64), minlength=count)
        ok &= total >= need[dim]
    for group in problem.groups:  # each group needs at least `count` task slots' worth of feasible nodes
        ok &= np.bincount(ids[group.candidates], minlength=count) >= 1
    gpu_left = np.zeros(count, dtype=np.int64)
    if problem.gpu_row is not None:
        free = np.bincount(ids[union], weights=problem.idle[problem.gpu_row, union].astype(np.float64), minlength=count)
        gpu_left = (free - problem.need_gpu()).astype(np.int64)
    domains = np.flatnonzero(ok)
    order = np.lexsort((domains, gpu_left[domains]))
    return domains[order], gpu_left[domains[order]]


def topology_greedy(problem: GangProblem) -> Placement | None:
    topo = problem.topology
    for tier in range(0, min(problem.max_tier, topo.top) + 1):
        domains, _ = feasible_domains(problem, tier)
        for domain in domains[:DOMAINS_TRIED_PER_TIER]:
            placement = per_pod_binpack(problem, topo.domain[tier] == domain)
            if placement is not None:
                return placement
    return None
