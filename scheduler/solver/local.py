"""Layer `solver`: a cheap local search on a chosen placement, moving single tasks inside the domains it
already touches (`improve`)."""

from __future__ import annotations

import time

import numpy as np

from scheduler.solver.evaluate import GPU_MILLI, GangProblem, Placement, packing_key, used_nodes

BIG_DELTA = 1 << 40


def improve(
    problem: GangProblem, placement: Placement | None, deadline: float | None = None, passes: int = 3
) -> Placement | None:
    """A cheap local search on the chosen answer (CP-SAT's, or greedy's when CP-SAT found nothing better in
    time): move single tasks, largest first, to other nodes of the lowest non-redundant domains already touched
    (NVLink domains, else racks) while that improves the placement's packing key (`packing_key`: fewer GPUs
    stranded, then a higher configured scorers' sum, then fewer nodes). It never touches a new domain there; it
    stops at `deadline`. None if no move helps; the caller re-scores."""
    gpu = problem.gpu_row
    if placement is None or gpu is None:
        return None
    topo = problem.topology
    tier = next((t for t in range(1, topo.top) if not topo.redundant(t)), topo.top)  # NVLink, else rack
    touched = used_nodes(placement)
    union = np.unique(np.concatenate([g.candidates for g in problem.groups]))
    pool = np.union1d(union[np.isin(topo.domain[tier, union], topo.domain[tier, touched])], touched)
    where = {int(n): i for i, n in enumerate(pool.tolist())}
    left = problem.idle[:, pool].copy()
    tasks_on = np.zeros(pool.size, dtype=np.int64)
    tasks: list[list[int]] = []  # per task: group, position in pool
    for g, nodes in enumerate(placement):
        for node in nodes.tolist():
            i = where[node]
            left[:, i] -= problem.groups[g].request
            tasks_on[i] += 1
            tasks.append([g, i])
    allowed = [np.isin(pool, g.candidates) for g in problem.groups]
    scores = [g.scores[pool] if g.scores is not None else np.zeros(pool.size) for g in problem.groups]
    tasks.sort(key=lambda t: -int(problem.groups[t[0]].request[gpu]))
    moved = False
    for _ in range(passes):
        changed = False
        for task in tasks:
            if deadline is not None and time.perf_counter() >= deadline:
                break
            g, a = task
            request = problem.groups[g].request
            whole = left[gpu] // GPU_MILLI
            alone = tasks_on[a] == 1
            # Stranded GPUs and nodes gained at a when the task leaves, then at each b when it arrives.
            from_a = -whole[a] if alone else (left[gpu, a] + request[gpu]) // GPU_MILLI - whole[a]
            fits = allowed[g] & (left >= request[:, None]).all(axis=0)
            fits[a] = False
            if not fits.any():
                continue
            to_b = (left[gpu] - request[gpu]) // GPU_MILLI - np.where(tasks_on > 0, whole, 0)
            strand = np.where(fits, from_a + to_b, BIG_DELTA)
            nodes = np.where(fits, (tasks_on == 0).astype(np.int64) - int(alone), BIG_DELTA)
            loss = np.where(fits, scores[g][a] - scores[g], np.inf)
            keys = packing_key(strand, nodes, loss, problem.stranded_first)
            b = int(np.lexsort(keys[::-1])[0])
            if tuple(key[b] for key in keys) >= (0, 0, 0):
                continue
            left[:, a] += request
            left[:, b] -= request
            tasks_on[a] -= 1
            tasks_on[b] += 1
            task[1] = b
            changed = moved = True
        if not changed:
            break
    if not moved:
        return None
    out: list[list[int]] = [[] for _ in problem.groups]
    for g, i in tasks:
        out[g].append(int(pool[i]))
    return tuple(np.array(o, dtype=np.int64) for o in out)

