"""Layer `solver`: whole-gang placement with OR-Tools CP-SAT over the topology tree.

1. Score both greedy placers (`greedy.py`) with the shared evaluator; the better one is the hint and the floor.
   If it already meets the capacity lower bounds (`meets_lower_bounds`), it is optimal: stop.
2. A gang with more than MAX_GROUPS task shapes is merged by GPU request for the model (`coarsen`); the real
   tasks are seated afterwards on the nodes the model chose, or if they cannot be, with a few more nodes of
   the same racks (`refine`; some of the time limit is kept for it).
3. Choose the domain first: the lowest tier whose domains could hold the gang, by summed idle and by holes of
   the sizes its GPU tasks need (`packable`), and at it the domains whose parts one tier down could hold it in
   the fewest (the evaluator's next key; `by_fewest_parts`), tightest first among equals. Below the greedy's
   tier CP-SAT only has to find a placement greedy missed; at the greedy's tier it optimises in the best few
   domains, the greedy's own first among equals. When the gang must span sub-domains, only the fewest that
   could hold it plus a few spares go into the model, and as many more as its tasks' hole sizes need.
4. Inside a domain, identical nodes (same free GPUs, same other free resources capped at the gang's need,
   same feasible groups, same path of domains) form a class with a count. The model counts, per class, how many
   nodes take each packing pattern (tasks per group on one node), so 5,000 nodes are a few hundred classes.
5. Two staged solves, each warm-started: the domains touched per tier (top down), then, with that fixed, GPUs
   stranded on touched nodes and nodes used (the evaluator's order, see `evaluate.py`). Each stops at the time
   limit with the best answer found.
6. `solve` takes whichever of {CP-SAT's answer, both greedy answers} scores best, so it is never worse, and
   tries to improve it by moving single tasks inside the domains it already touches (`improve`).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
from ortools.sat.python import cp_model

from scheduler.solver.evaluate import (
    GPU_MILLI,
    UNPLACED,
    GangProblem,
    Group,
    Placement,
    Score,
    evaluate,
    used_nodes,
)
from scheduler.solver.greedy import feasible_domains, per_pod_binpack, topology_greedy
from scheduler.solver.topology import RACK, IntArray, Topology

DOMAINS_OPTIMISED = 3  # at the chosen tier, how many candidate domains CP-SAT may try
DOMAINS_PROBED_BELOW = 2  # below the greedy's tier, how many domains CP-SAT probes for a placement it missed
MAX_GROUPS = 4  # more task shapes than this are merged by GPU request (see `coarsen`)
MAX_PATTERNS = 20_000  # model size cap; beyond it the decomposition gives up and greedy answers stand
SEAT_MODEL_S = 0.05  # at most this long seating a merged answer's real tasks with CP-SAT
SEAT_SHARE = 0.2  # of the time limit, at most, kept back from the models of a merged gang for that seating
LOCAL_SHARE = 0.1  # of the time limit, at most, that the local search (`improve`) may run past it
SPARE_SUBDOMAINS = 2  # sub-domains kept beyond the fewest that could hold the gang
MIN_SUBDOMAINS = 4
BIG_DELTA = 1 << 40


@dataclass(slots=True)
class SolveStats:
    """What the CP-SAT part did, for benchmarks and traces."""

    status: str = "not run"
    objective: float | None = None
    bound: float | None = None
    models: int = 0
    unseated: int = 0  # model answers whose real tasks did not fit the merged slots (see `coarsen`)
    classes: int = 0
    patterns: int = 0

    @property
    def gap(self) -> float | None:
        if self.objective is None or self.bound is None:
            return None
        return max(0.0, self.objective - self.bound) / max(1.0, abs(self.objective))


@dataclass(slots=True)
class SolveResult:
    placement: Placement | None
    score: Score
    source: str  # "cpsat", "topology-greedy", "binpack-greedy" or "local-search" (see `improve`)
    scores: dict[str, Score] = field(default_factory=dict)
    stats: SolveStats = field(default_factory=SolveStats)
    elapsed_ms: float = 0.0


def solve(problem: GangProblem, time_limit_ms: float = 200, workers: int = 2) -> SolveResult:
    start = time.perf_counter()
    deadline = start + time_limit_ms / 1000
    answers: dict[str, Placement | None] = {
        "binpack-greedy": per_pod_binpack(problem),
        "topology-greedy": topology_greedy(problem),
    }
    scores = {name: evaluate(problem, p) for name, p in answers.items()}
    hint_name = min(scores, key=lambda n: scores[n])
    stats = SolveStats()
    if meets_lower_bounds(problem, scores[hint_name]):
        stats.status = "greedy meets the lower bounds"
        best = hint_name
        elapsed = (time.perf_counter() - start) * 1000
        scores["cpsat"] = UNPLACED
        return SolveResult(answers[best], scores[best], best, scores, stats, elapsed)
    coarse, members = coarsen(problem)
    hint = answers[hint_name]
    coarse_hint = None if hint is None else tuple(np.concatenate([hint[g] for g in m]) for m in members)

    def finish(found: Placement | None) -> tuple[Placement | None, Score]:
        real = None if found is None else refine(problem, members, found, deadline)
        if found is not None and real is None:
            stats.unseated += 1
        return real, evaluate(problem, real)

    # Merged answers are seated after each model: keep some of the time for the last one's seating.
    merged = any(len(m) > 1 for m in members)
    model_deadline = deadline - min(SEAT_MODEL_S, SEAT_SHARE * time_limit_ms / 1000) if merged else deadline
    placement = _search(coarse, coarse_hint, scores[hint_name], model_deadline, workers, stats, finish)
    answers["cpsat"] = placement
    scores["cpsat"] = evaluate(problem, placement)
    best = min(("cpsat", "topology-greedy", "binpack-greedy"), key=lambda n: scores[n])
    # A short local search on the winner, in what is left of the limit plus LOCAL_SHARE of it.
    improved = improve(problem, answers[best], max(deadline, time.perf_counter()) + LOCAL_SHARE * time_limit_ms / 1000)
    if improved is not None and (score := evaluate(problem, improved)) < scores[best]:
        best, answers["local-search"], scores["local-search"] = "local-search", improved, score
    elapsed = (time.perf_counter() - start) * 1000
    return SolveResult(answers[best], scores[best], best, scores, stats, elapsed)


def improve(
    problem: GangProblem, placement: Placement | None, deadline: float | None = None, passes: int = 3
) -> Placement | None:
    """A cheap local search on the chosen answer (CP-SAT's, or greedy's when CP-SAT found nothing better in
    time): move single tasks, largest first, to other nodes of the lowest non-redundant domains already touched
    (NVLink domains, else racks) while that strands fewer GPUs or, as many, uses fewer nodes (in the problem's
    order). It never touches a new domain there; it stops at `deadline`. None if no move helps; the caller
    re-scores."""
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
            first, second = (strand, nodes) if problem.stranded_first else (nodes, strand)
            b = int(np.lexsort((second, first))[0])
            if (first[b], second[b]) >= (0, 0):
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


def coarsen(problem: GangProblem) -> tuple[GangProblem, list[list[int]]]:
    """Merge the gang's groups by GPU request when there are more than MAX_GROUPS of them (trace gangs whose
    pods differ only in cpu and memory). A merged group asks for its members' mean request on any node one
    of them may use, so the model is a little optimistic; `refine` then seats the real tasks and gives up (the greedy
    answers stand) if they do not fit."""
    if len(problem.groups) <= MAX_GROUPS or problem.gpu_row is None:
        return problem, [[g] for g in range(len(problem.groups))]
    by_gpu: dict[int, list[int]] = {}
    for g, group in enumerate(problem.groups):
        by_gpu.setdefault(int(group.request[problem.gpu_row]), []).append(g)
    groups = []
    for members in by_gpu.values():
        weights = np.array([problem.groups[g].count for g in members], dtype=np.int64)
        stacked = np.array([problem.groups[g].request for g in members], dtype=np.int64)
        request = -(-(stacked * weights[:, None]).sum(axis=0) // weights.sum())  # the mean, rounded up
        allowed = np.unique(np.concatenate([problem.groups[g].candidates for g in members]))
        groups.append(Group(sum(problem.groups[g].count for g in members), request, allowed))
    merged = GangProblem(
        tuple(groups),
        problem.idle,
        problem.gpu_row,
        problem.topology,
        problem.max_tier,
        problem.hard,
        problem.stranded_first,
    )
    return merged, list(by_gpu.values())


def refine(
    problem: GangProblem, members: list[list[int]], placement: Placement, deadline: float | None = None
) -> Placement | None:
    """Seat the real tasks of merged groups (see `coarsen`) on the nodes the model chose. The model packs by
    mean requests, so its slots are often too tight for the real cpu and memory (on the openb trace about 40%
    of answers at 85-95% of the chosen nodes' cpu): first on the model's slots, then, if some task fits no
    slot, by vector bin packing over the same nodes (slots ignored), then with a small CP-SAT model over the
    same nodes until `deadline`. The same nodes give the same racks and the same stranded GPUs (or fewer, if
    one is left empty). Last, the tasks that do not fit spill onto other nodes of the same racks: more nodes
    and stranded GPUs than the model meant, often still fewer than greedy's (the caller scores it). None if
    even that fails."""
    if all(len(m) == 1 for m in members):
        return placement
    touched = used_nodes(placement)
    for seat in (_seat_on_slots, _seat_by_room):
        seated = seat(problem, members, placement, touched)
        if seated is not None:
            return seated
    if deadline is not None and time.perf_counter() < deadline:
        seated = _seat_by_model(problem, touched, min(SEAT_MODEL_S, deadline - time.perf_counter()))
        if seated is not None:
            return seated
    return _seat_with_spill(problem, touched)


def _seat_on_slots(
    problem: GangProblem, members: list[list[int]], placement: Placement, touched: IntArray
) -> Placement | None:
    """Each merged group's real tasks, largest cpu first, on its slot node with the most cpu left."""
    left = problem.idle.copy()
    out: list[list[int]] = [[] for _ in problem.groups]
    for merged, member_groups in zip(placement, members, strict=True):
        nodes, slots = np.unique(merged, return_counts=True)
        tasks = sorted(
            (g for g in member_groups for _ in range(problem.groups[g].count)),
            key=lambda g: tuple(-problem.groups[g].request),
        )
        allowed = {g: np.isin(nodes, problem.groups[g].candidates) for g in member_groups}
        for g in tasks:
            request = problem.groups[g].request
            ok = allowed[g] & (slots > 0) & (left[:, nodes] >= request[:, None]).all(axis=0)
            if not ok.any():
                return None
            room = np.where(ok, left[0, nodes], -1)
            i = int(np.argmax(room))
            slots[i] -= 1
            left[:, nodes[i]] -= request
            out[g].append(int(nodes[i]))
    return tuple(np.array(o, dtype=np.int64) for o in out)


def _seat_by_room(
    problem: GangProblem, members: list[list[int]], placement: Placement, touched: IntArray
) -> Placement | None:
    """Vector bin packing of every real task over the touched nodes: largest first (by summed share of the
    nodes' largest idle, then by cpu, then by memory, until one seats all), each on the node where the scarcest
    of its resources stays most plentiful after it; a task that fits nowhere swaps with one already seated."""
    dims = np.flatnonzero(problem.need())
    idle = problem.idle[np.ix_(dims, touched)]
    scale = np.maximum(idle.max(axis=1), 1).astype(np.float64)
    shares = [g.request[dims] / scale for g in problem.groups]
    tasks = [g for g, group in enumerate(problem.groups) for _ in range(group.count)]
    # Sizes: the summed share, then the first two resources' (cpu, memory).
    sizes = [np.array([-shares[g].sum() for g in range(len(shares))])]
    sizes += [np.array([-shares[g][d] for g in range(len(shares))]) for d in range(min(2, dims.size))]
    for size in sizes:
        seated = _pack(problem, dims, idle, scale, touched, sorted(tasks, key=lambda g: float(size[g])))
        if seated is not None:
            return seated
    return None


def _seat_with_spill(problem: GangProblem, touched: IntArray) -> Placement | None:
    """`_seat_by_room` over the touched nodes and, for tasks none of them holds, the other nodes of their racks
    (each such task to the one it leaves the fewest GPUs free on)."""
    topo = problem.topology
    tier = min(RACK, topo.top)
    union = np.unique(np.concatenate([g.candidates for g in problem.groups]))
    nodes = union[np.isin(topo.domain[tier, union], topo.domain[tier, touched])]
    dims = np.flatnonzero(problem.need())
    idle = problem.idle[np.ix_(dims, nodes)]
    scale = np.maximum(problem.idle[np.ix_(dims, touched)].max(axis=1), 1).astype(np.float64)
    tasks = sorted(
        (g for g, group in enumerate(problem.groups) for _ in range(group.count)),
        key=lambda g: -float((problem.groups[g].request[dims] / scale).sum()),
    )
    gpu = None if problem.gpu_row is None else int(np.flatnonzero(dims == problem.gpu_row)[0])
    return _pack(problem, dims, idle, scale, nodes, tasks, spare=~np.isin(nodes, touched), gpu=gpu)


def _pack(
    problem: GangProblem,
    dims: IntArray,
    idle: IntArray,
    scale: npt.NDArray[np.float64],
    nodes: IntArray,
    tasks: list[int],
    spare: npt.NDArray[np.bool_] | None = None,
    gpu: int | None = None,
) -> Placement | None:
    """Seat the tasks in order over `nodes`; `spare` nodes (with `gpu`, the row of GPUs in `dims`) take a
    task only when no other node holds it, the one with the fewest GPUs left after it."""
    left = idle.copy()
    requests = [g.request[dims] for g in problem.groups]
    allowed = [np.isin(nodes, g.candidates) for g in problem.groups]
    on: list[list[int]] = [[] for _ in range(nodes.size)]  # groups of the tasks seated per node
    preferred = np.ones(nodes.size, dtype=bool) if spare is None else ~spare

    def best(g: int, ok: npt.NDArray[np.bool_]) -> int:
        pick = ok & preferred
        if not pick.any():
            pick = ok
            if gpu is not None:
                return int(np.argmin(np.where(pick, left[gpu] - requests[g][gpu], np.iinfo(np.int64).max)))
        after = ((left - requests[g][:, None]) / scale[:, None]).min(axis=0)
        return int(np.argmax(np.where(pick, after, -np.inf)))

    for g in tasks:
        ok = allowed[g] & (left >= requests[g][:, None]).all(axis=0)
        if not (ok & preferred).any() and not _swap(g, requests, allowed, left, on, best) and not ok.any():
            return None
        ok = allowed[g] & (left >= requests[g][:, None]).all(axis=0)
        i = best(g, ok)
        left[:, i] -= requests[g]
        on[i].append(g)
    out: list[list[int]] = [[] for _ in problem.groups]
    for i, groups in enumerate(on):
        for g in groups:
            out[g].append(int(nodes[i]))
    return tuple(np.array(o, dtype=np.int64) for o in out)


def _swap(
    g: int,
    requests: list[IntArray],
    allowed: list[npt.NDArray[np.bool_]],
    left: IntArray,
    on: list[list[int]],
    best: Callable[[int, npt.NDArray[np.bool_]], int],
) -> bool:
    """Make room for task g: move one seated task h off a node where g then fits, to another node that holds
    h. False if no such move exists."""
    for i in np.flatnonzero(allowed[g]).tolist():
        for h in set(on[i]):
            if not (left[:, i] + requests[h] >= requests[g]).all():
                continue
            ok = allowed[h] & (left >= requests[h][:, None]).all(axis=0)
            ok[i] = False
            if ok.any():
                j = best(h, ok)
                on[i].remove(h)
                left[:, i] += requests[h]
                on[j].append(h)
                left[:, j] -= requests[h]
                return True
    return False


def _seat_by_model(problem: GangProblem, touched: IntArray, seconds: float) -> Placement | None:
    """Tasks per real group per touched node, every node's idle respected: a feasibility model."""
    model = cp_model.CpModel()
    dims = np.flatnonzero(problem.need())
    x: dict[tuple[int, int], cp_model.IntVar] = {}
    for g, group in enumerate(problem.groups):
        allowed = np.flatnonzero(np.isin(touched, group.candidates)).tolist()
        if not allowed:
            return None
        for i in allowed:
            x[g, i] = model.new_int_var(0, group.count, f"x{g}_{i}")
        model.add(sum(x[g, i] for i in allowed) == group.count)
    for i in range(touched.size):
        on = [(g, var) for (g, j), var in x.items() if j == i]
        for d in dims.tolist():
            model.add(sum(int(problem.groups[g].request[d]) * var for g, var in on) <= int(problem.idle[d, touched[i]]))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(0.005, seconds)
    solver.parameters.num_workers = 1
    if solver.solve(model) not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    out: list[list[int]] = [[] for _ in problem.groups]
    for (g, i), var in x.items():
        out[g].extend([int(touched[i])] * int(solver.value(var)))
    return tuple(np.array(o, dtype=np.int64) for o in out)


def _search(
    problem: GangProblem,
    hint: Placement | None,
    hint_score: Score,
    deadline: float,
    workers: int,
    stats: SolveStats,
    finish: Callable[[Placement | None], tuple[Placement | None, Score]],
) -> Placement | None:
    """The best placement found, domain first, lowest tier first; `finish` maps a model answer back to the
    real gang and scores it."""
    topo = problem.topology
    limit = min(problem.max_tier, topo.top)
    greedy_tier = hint_score.max_tier if hint_score.placed else limit + 1
    best: Placement | None = None
    best_score = UNPLACED
    for tier in range(1, min(greedy_tier, limit) + 1):
        domains = packable(problem, tier, feasible_domains(problem, tier)[0])
        if tier < greedy_tier:
            tries = [int(d) for d in by_fewest_parts(problem, tier, domains)[:DOMAINS_PROBED_BELOW]]
        else:
            own = int(topo.domain[tier, used_nodes(hint)[0]]) if hint is not None else -1
            if own >= 0 and own not in domains:
                domains = np.append(domains, own)
            tries = [int(d) for d in by_fewest_parts(problem, tier, domains, own)[:DOMAINS_OPTIMISED]]
        for domain in tries:
            if time.perf_counter() >= deadline:
                return best
            found, score = finish(_solve_domain(problem, tier, int(domain), hint, deadline, workers, stats))
            if score < best_score:
                best, best_score = found, score
        if best is not None:
            return best
    return best


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


# ---- one domain -----------------------------------------------------------------------------------------


def _relevant_nodes(problem: GangProblem, tier: int, domain: int) -> IntArray:
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


def _best_hint(problem: GangProblem, nodes: IntArray, hint: Placement | None) -> Placement | None:
    """The better of the given hint (if it lies inside these nodes) and per-pod greedy inside them."""
    within = np.zeros(problem.nodes, dtype=bool)
    within[nodes] = True
    options = [per_pod_binpack(problem, within)]
    if hint is not None and within[used_nodes(hint)].all():
        options.append(hint)
    return min(options, key=lambda p: evaluate(problem, p))


def _patterns(free: IntArray, requests: list[IntArray], limits: list[int]) -> Iterator[tuple[int, ...]]:
    """Every non-empty vector of tasks per group that fits in `free` (groups with limit 0 take none)."""

    def walk(g: int, room: IntArray, chosen: tuple[int, ...]) -> Iterator[tuple[int, ...]]:
        if g == len(requests):
            if any(chosen):
                yield chosen
            return
        k = 0
        while k <= limits[g]:
            yield from walk(g + 1, room, (*chosen, k))
            room = room - requests[g]
            if (room < 0).any():
                break
            k += 1

    yield from walk(0, free, ())


def _solve_domain(
    problem: GangProblem,
    tier: int,
    domain: int,
    hint: Placement | None,
    deadline: float,
    workers: int,
    stats: SolveStats,
) -> Placement | None:
    topo = problem.topology
    nodes = _relevant_nodes(problem, tier, domain)
    if nodes.size == 0:
        return None
    hint = _best_hint(problem, nodes, hint)
    groups = problem.groups
    need = problem.need()
    dims = np.flatnonzero(need)
    gpu = problem.gpu_row
    # 1. Classes of identical nodes.
    member = np.stack([np.isin(nodes, g.candidates) for g in groups]).astype(np.int64)
    capped = np.minimum(problem.idle[np.ix_(dims, nodes)], need[dims][:, None])
    gpu_free = problem.idle[gpu, nodes] if gpu is not None else np.zeros(nodes.size, dtype=np.int64)
    sub_tiers = [t for t in range(1, tier) if 1 < np.unique(topo.domain[t, nodes]).size < nodes.size]
    path = topo.domain[sub_tiers][:, nodes] if sub_tiers else np.zeros((0, nodes.size), dtype=np.int64)
    key = np.vstack([path, capped, gpu_free[None, :], member]).T
    classes, first, inverse, counts = np.unique(key, axis=0, return_index=True, return_inverse=True, return_counts=True)
    inverse = inverse.reshape(-1)
    # 2. Packing patterns per class.
    requests = [g.request[dims] for g in groups]
    gpu_requests = [int(g.request[gpu]) if gpu is not None else 0 for g in groups]
    patterns: list[list[tuple[int, ...]]] = []
    total = 0
    for c in range(classes.shape[0]):
        node = first[c]
        limits = [g.count if member[i, node] else 0 for i, g in enumerate(groups)]
        found = list(itertools.islice(_patterns(capped[:, node], requests, limits), MAX_PATTERNS - total + 1))
        total += len(found)
        if total > MAX_PATTERNS:
            stats.status = "too large"
            return None
        patterns.append(found)
    # 3. Model.
    model = cp_model.CpModel()
    y: dict[tuple[int, int], cp_model.IntVar] = {}
    stranded_of: dict[tuple[int, int], int] = {}
    for c, found in enumerate(patterns):
        n = int(counts[c])
        free_gpu = int(gpu_free[first[c]])
        for k, pattern in enumerate(found):
            y[c, k] = model.new_int_var(0, n, f"y{c}_{k}")
            taken = sum(p * r for p, r in zip(pattern, gpu_requests, strict=True))
            stranded_of[c, k] = (free_gpu - taken) // GPU_MILLI
        if found:
            model.add(sum(y[c, k] for k in range(len(found))) <= n)
    for i, g in enumerate(groups):
        terms = [
            pattern[i] * y[c, k] for c, found in enumerate(patterns) for k, pattern in enumerate(found) if pattern[i]
        ]
        if not terms:
            stats.status = "infeasible"
            return None
        model.add(sum(terms) == g.count)
    nodes_used = sum(y.values())
    stranded = sum(s * y[key_] for key_, s in stranded_of.items() if s)
    max_stranded = sum(
        int(counts[c]) * max((stranded_of[c, k] for k in range(len(f))), default=0) for c, f in enumerate(patterns)
    )
    max_nodes = int(counts.sum())
    if problem.stranded_first:
        packing = stranded * (max_nodes + 1) + nodes_used
    else:
        packing = nodes_used * (max_stranded + 1) + stranded
    domain_vars: dict[tuple[int, int], cp_model.IntVar] = {}
    spread_vars: list[cp_model.IntVar] = []
    spread_weights: list[int] = []
    scale = 1
    for row, t in enumerate(sub_tiers):  # lower tiers first, so higher tiers get the larger weights
        class_domain = classes[:, row]
        ids = np.unique(class_domain)
        for d in ids.tolist():
            in_d = [c for c in range(classes.shape[0]) if class_domain[c] == d]
            u = model.new_bool_var(f"u{t}_{d}")
            size = int(counts[in_d].sum())
            model.add(sum(y[c, k] for c in in_d for k in range(len(patterns[c]))) <= size * u)
            domain_vars[t, int(d)] = u
            spread_vars.append(u)
            spread_weights.append(scale)
        scale *= int(ids.size) + 1
    spread = cp_model.LinearExpr.weighted_sum(spread_vars, spread_weights)
    # 4. Staged solves, each warm-started: first the domains touched, then (with those fixed) nodes and
    # stranded GPUs. Two small objectives search far better than one weighted sum with huge coefficients.
    if hint is not None:
        _add_hint(model, y, patterns, nodes, inverse, hint, domain_vars, topo)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = workers
    stats.models += 1
    stats.classes += int(classes.shape[0])
    stats.patterns += total
    proven = True
    if domain_vars:
        model.minimize(spread)
        solver.parameters.max_time_in_seconds = max(0.005, (deadline - time.perf_counter()) * 0.4)
        status = solver.solve(model)
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            stats.status = solver.status_name(status)
            return None
        proven = status == cp_model.OPTIMAL
        model.add(spread <= int(round(solver.objective_value)))
        model.clear_hints()  # type: ignore[no-untyped-call]
        for var in (*y.values(), *domain_vars.values()):
            model.add_hint(var, solver.value(var))
    model.minimize(packing)
    solver.parameters.max_time_in_seconds = max(0.005, deadline - time.perf_counter())
    status = solver.solve(model)
    stats.status = solver.status_name(status)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    if status == cp_model.OPTIMAL and not proven:
        stats.status = "FEASIBLE"  # optimal packing, for domains not proven fewest
    stats.objective = solver.objective_value
    stats.bound = solver.best_objective_bound
    # 5. Decode: hand each class's nodes out to its chosen patterns.
    out: list[list[int]] = [[] for _ in groups]
    for c, found in enumerate(patterns):
        members = iter(nodes[inverse == c].tolist())
        for k, pattern in enumerate(found):
            for _ in range(int(solver.value(y[c, k]))):
                node = next(members)
                for i, p in enumerate(pattern):
                    out[i].extend([node] * p)
    return tuple(np.array(o, dtype=np.int64) for o in out)


def _add_hint(
    model: cp_model.CpModel,
    y: dict[tuple[int, int], cp_model.IntVar],
    patterns: list[list[tuple[int, ...]]],
    nodes: IntArray,
    inverse: npt.NDArray[np.int64],
    hint: Placement,
    domain_vars: dict[tuple[int, int], cp_model.IntVar],
    topo: Topology,
) -> None:
    position = {int(n): i for i, n in enumerate(nodes.tolist())}
    per_node: dict[int, list[int]] = {}
    for g, placed in enumerate(hint):
        for node in placed.tolist():
            if node not in position:
                return  # the hint lies outside this model
            per_node.setdefault(node, [0] * len(hint))[g] += 1
    index = [{p: k for k, p in enumerate(found)} for found in patterns]
    values: dict[tuple[int, int], int] = {}
    for node, vector in per_node.items():
        c = int(inverse[position[node]])
        k = index[c].get(tuple(vector))
        if k is None:
            return
        values[c, k] = values.get((c, k), 0) + 1
    for key, var in y.items():
        model.add_hint(var, values.get(key, 0))
    used = np.array(list(per_node), dtype=np.int64)
    domain = topo.domain
    for (t, d), var in domain_vars.items():
        model.add_hint(var, int(bool((domain[t, used] == d).any())))
