"""Layer `solver`: which domains and nodes could hold a gang, by capacity alone (no placement yet).

Necessary conditions and lower bounds the CP-SAT search (`cpsat.py`) prunes with: the GPUs a node can give the
gang in whole tasks, the fewest domains whose capacity reaches the gang's need, the holes of each GPU request
size a domain must have (`packable`), the order to try a tier's domains in (`by_fewest_parts`), the sub-domains
worth putting into one domain's model (`relevant_nodes`), and when a greedy answer is provably optimal already
(`meets_lower_bounds`).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from scheduler.solver.evaluate import GangProblem, Score
from scheduler.solver.greedy import feasible_domains
from scheduler.solver.topology import IntArray

SPARE_SUBDOMAINS = 2  # sub-domains kept beyond the fewest that could hold the gang
MIN_SUBDOMAINS = 4


def _usable_gpus(problem: GangProblem, nodes: IntArray) -> IntArray:
    """Per node, the GPUs it can give the gang in whole tasks of one group (an upper bound on its share)."""
    assert problem.gpu_row is not None
    free = problem.idle[problem.gpu_row, nodes]
    usable = np.zeros(nodes.size, dtype=np.int64)
    for group in problem.groups:
        gpu = int(group.request[problem.gpu_row])
        if gpu:
            member = np.isin(nodes, group.candidates)
            usable = np.maximum(usable, np.where(member, free // gpu * gpu, 0))
    return usable


def _fewest(capacity: npt.NDArray[np.float64], need: int) -> int:
    """How many of these capacities, largest first, it takes to reach `need` (a lower bound on domains)."""
    ordered = np.sort(capacity)[::-1]
    return int(np.searchsorted(np.cumsum(ordered), need)) + 1


def meets_lower_bounds(problem: GangProblem, score: Score) -> bool:
    """True when a placement is provably optimal already: no lower tier has a domain with room for the gang,
    and at every tier below it, and in nodes, it uses as few as capacity alone allows, stranding nothing."""
    need = problem.need_gpu()
    if not score.placed or need == 0 or score.stranded:
        return False
    for tier in range(score.max_tier):
        if feasible_domains(problem, tier)[0].size:
            return False
    union = np.unique(np.concatenate([g.candidates for g in problem.groups]))
    usable = _usable_gpus(problem, union).astype(np.float64)
    topo = problem.topology
    if score.nodes > _fewest(usable, need):
        return False
    for tier in range(1, score.max_tier):
        used = score.domains[topo.top - 1 - tier]
        if used > _fewest(np.bincount(topo.domain[tier, union], weights=usable).astype(np.float64), need):
            return False
    return True


def _hole_needs(problem: GangProblem) -> list[tuple[int, int, int]]:
    """Per GPU request size r of the gang (largest first): how many of its tasks ask r or more, and how many
    GPUs they take when the larger requests are multiples of r (1, 2, 4, 8 GPUs), else 0. A set of nodes holds
    the gang only if it has that many whole r-sized holes (free // r summed) with that many GPUs in them."""
    gpu = problem.gpu_row
    if gpu is None:
        return []
    requests = [(int(g.request[gpu]), g.count) for g in problem.groups if g.request[gpu] > 0]
    needs = []
    for r in sorted({r for r, _ in requests}, reverse=True):
        larger = [(q, n) for q, n in requests if q >= r]
        gpus = sum(q * n for q, n in larger) if all(q % r == 0 for q, _ in larger) else 0
        needs.append((r, sum(n for _, n in larger), gpus))
    return needs


def packable(problem: GangProblem, tier: int, domains: IntArray) -> IntArray:
    """The domains (order kept) that have the holes `_hole_needs` asks for, a necessary condition."""
    gpu = problem.gpu_row
    if gpu is None or domains.size == 0:
        return domains
    union = np.unique(np.concatenate([g.candidates for g in problem.groups]))
    free = problem.idle[gpu, union]
    ids = problem.topology.domain[tier, union]
    count = int(problem.topology.domain[tier].max()) + 1
    ok = np.ones(count, dtype=bool)
    for size, tasks, gpus in _hole_needs(problem):
        holes = np.bincount(ids, weights=(free // size).astype(np.float64), minlength=count)
        ok &= (holes >= tasks) & (holes * size >= gpus)
    kept: IntArray = domains[ok[domains]]
    return kept


def by_fewest_parts(problem: GangProblem, tier: int, domains: IntArray, first: int = -1) -> IntArray:
    """The domains ordered by how few of their parts one tier down (nodes at tier 1) could hold the gang by
    usable GPUs alone, the evaluator's next key and a lower bound on it; ties keep the given order (tightest
    first), with `first` ahead of its equals."""
    if problem.gpu_row is None or domains.size < 2:
        return domains
    topo = problem.topology
    union = np.unique(np.concatenate([g.candidates for g in problem.groups]))
    parts, inverse = np.unique(topo.domain[tier - 1, union], return_inverse=True)
    capacity = np.bincount(inverse.reshape(-1), weights=_usable_gpus(problem, union).astype(np.float64))
    owner = np.zeros(parts.size, dtype=np.int64)
    owner[inverse.reshape(-1)] = topo.domain[tier, union]
    order = np.lexsort((-capacity, owner))  # by domain, largest part first
    owner, capacity = owner[order], capacity[order]
    starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
    before = np.repeat(np.cumsum(capacity)[starts] - capacity[starts], np.diff(np.r_[starts, owner.size]))
    short = (np.cumsum(capacity) - before) < problem.need_gpu()  # parts still short of the gang, largest first
    fewest = np.bincount(owner[short], minlength=int(topo.domain[tier].max()) + 1)[domains] + 1
    order = np.lexsort((np.arange(domains.size), domains != first, fewest))
    ordered: IntArray = domains[order]
    return ordered


def relevant_nodes(problem: GangProblem, tier: int, domain: int) -> IntArray:
    """Candidate nodes inside the domain; when the gang must span several of its sub-domains, only the fewest
    sub-domains whose usable GPUs hold it plus a few more (largest first), so the model stays small."""
    topo = problem.topology
    union = np.unique(np.concatenate([g.candidates for g in problem.groups]))
    inside = union[topo.domain[tier, union] == domain]
    need = problem.need_gpu()
    inside_nodes: IntArray = inside
    if tier < 2 or problem.gpu_row is None or inside.size == 0 or need == 0:
        return inside_nodes
    sub = topo.domain[tier - 1, inside]
    ids, inverse = np.unique(sub, return_inverse=True)
    if ids.size <= MIN_SUBDOMAINS:
        return inside_nodes
    inverse = inverse.reshape(-1)
    usable = _usable_gpus(problem, inside)
    capacity = np.bincount(inverse, weights=usable.astype(np.float64))
    order = np.argsort(-capacity, kind="stable")
    fewest = int(np.searchsorted(np.cumsum(capacity[order]), need)) + 1
    keep = np.zeros(ids.size, dtype=bool)
    keep[order[: fewest + max(SPARE_SUBDOMAINS, fewest // 2)]] = True
    # The largest by usable GPUs may lack holes of some size (8-GPU tasks need empty nodes): add the
    # sub-domains with the most such holes until `packable`'s condition holds for every size.
    free = problem.idle[problem.gpu_row, inside]
    for size, tasks, gpus in _hole_needs(problem):
        holes = np.bincount(inverse, weights=(free // size).astype(np.float64), minlength=ids.size)
        while not keep.all() and (holes[keep].sum() < tasks or holes[keep].sum() * size < gpus):
            keep[int(np.argmax(np.where(keep, -1.0, holes)))] = True
    kept: IntArray = inside[keep[inverse]]
    return kept

