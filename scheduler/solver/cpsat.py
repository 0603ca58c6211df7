"""Layer `solver`: whole-gang placement with OR-Tools CP-SAT over the topology tree.

1. Score the greedy placers (`greedy.py`; with node scores, also pod by pod by those) with the shared
   evaluator; the best is the hint and the floor. If it already meets the capacity lower bounds
   (`meets_lower_bounds`), it is optimal in topology and packing: stop.
2. A gang with more than MAX_GROUPS task shapes is merged by GPU request for the model (`coarsen`); the real
   tasks are seated afterwards on the nodes the model chose, or if they cannot be, with a few more nodes of
   the same racks (`refine`, in `seating.py`; some of the time limit is kept for it).
3. Choose the domain first (the capacity bounds are in `domains.py`): the lowest tier whose domains could hold
   the gang, by summed idle and by holes of the sizes its GPU tasks need (`packable`), and at it the domains
   whose parts one tier down could hold it in the fewest (the evaluator's next key; `by_fewest_parts`),
   tightest first among equals. Below the greedy's
   tier CP-SAT only has to find a placement greedy missed; at the greedy's tier it optimises in the best few
   domains, the greedy's own first among equals. When the gang must span sub-domains, only the fewest that
   could hold it plus a few spares go into the model, and as many more as its tasks' hole sizes need.
4. Inside a domain, identical nodes (same free GPUs, same other free resources capped at the gang's need,
   same feasible groups, same path of domains) form a class with a count. The model counts, per class, how many
   nodes take each packing pattern (tasks per group on one node), so 5,000 nodes are a few hundred classes.
5. Two staged solves, each warm-started: the domains touched per tier (top down), then, with that fixed, GPUs
   stranded on touched nodes and nodes used (the evaluator's packing terms, see `evaluate.py`; the node scores
   are not in the model). Each stops at the time limit with the best answer found.
6. Decoding hands a class's nodes to its patterns by the node scores (the model cannot tell them apart).
   `solve` takes whichever of {CP-SAT's answer, the greedy answers} scores best, so it is never worse, and
   tries to improve it by moving single tasks inside the domains it already touches (`local.py`).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
from ortools.sat.python import cp_model

from scheduler.solver.domains import by_fewest_parts, meets_lower_bounds, packable, relevant_nodes
from scheduler.solver.evaluate import GPU_MILLI, UNPLACED, GangProblem, Group, Placement, Score, evaluate, used_nodes
from scheduler.solver.greedy import feasible_domains, per_pod_binpack, topology_greedy
from scheduler.solver.local import improve
from scheduler.solver.seating import SEAT_MODEL_S, coarsen, refine
from scheduler.solver.topology import IntArray, Topology

DOMAINS_OPTIMISED = 3  # at the chosen tier, how many candidate domains CP-SAT may try
DOMAINS_PROBED_BELOW = 2  # below the greedy's tier, how many domains CP-SAT probes for a placement it missed
MAX_PATTERNS = 20_000  # model size cap; beyond it the decomposition gives up and greedy answers stand
SEAT_SHARE = 0.2  # of the time limit, at most, kept back from the models of a merged gang for that seating
LOCAL_SHARE = 0.1  # of the time limit, at most, that the local search (`improve`) may run past it


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
    source: str  # "cpsat", "topology-greedy", "binpack-greedy", "scorer-greedy" or "local-search" (`improve`)
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
    if problem.scored:  # the gang as allocate would place it pod by pod with the configured scorers
        answers["scorer-greedy"] = per_pod_binpack(problem, by_score=True)
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
    best = min(("cpsat", *answers), key=lambda n: scores[n])
    # A short local search on the winner, in what is left of the limit plus LOCAL_SHARE of it.
    improved = improve(problem, answers[best], max(deadline, time.perf_counter()) + LOCAL_SHARE * time_limit_ms / 1000)
    if improved is not None and (score := evaluate(problem, improved)) < scores[best]:
        best, answers["local-search"], scores["local-search"] = "local-search", improved, score
    elapsed = (time.perf_counter() - start) * 1000
    return SolveResult(answers[best], scores[best], best, scores, stats, elapsed)


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


# ---- one domain -----------------------------------------------------------------------------------------


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


def _class_patterns(groups: Sequence[Group], dims: IntArray, capped: IntArray, member: IntArray, first: IntArray,
                    classes: int) -> list[list[tuple[int, ...]]] | None:
    """Per class of identical nodes, the ways one of its nodes can hold tasks of each group; None past
    MAX_PATTERNS in all."""
    requests = [g.request[dims] for g in groups]
    patterns: list[list[tuple[int, ...]]] = []
    total = 0
    for c in range(classes):
        node = first[c]
        limits = [g.count if member[i, node] else 0 for i, g in enumerate(groups)]
        found = list(itertools.islice(_patterns(capped[:, node], requests, limits), MAX_PATTERNS - total + 1))
        total += len(found)
        if total > MAX_PATTERNS:
            return None
        patterns.append(found)
    return patterns


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
    nodes = relevant_nodes(problem, tier, domain)
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
    gpu_requests = [int(g.request[gpu]) if gpu is not None else 0 for g in groups]
    patterns = _class_patterns(groups, dims, capped, member, first, classes.shape[0])
    if patterns is None:
        stats.status = "too large"
        return None
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
    stats.patterns += sum(len(found) for found in patterns)
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
        chosen = [pattern for k, pattern in enumerate(found) for _ in range(int(solver.value(y[c, k])))]
        for node, pattern in zip(_hand_out(problem, nodes[inverse == c], chosen), chosen, strict=False):
            for i, p in enumerate(pattern):
                out[i].extend([node] * p)
    return tuple(np.array(o, dtype=np.int64) for o in out)


def _hand_out(problem: GangProblem, members: IntArray, chosen: list[tuple[int, ...]]) -> list[int]:
    """Nodes of one class for the chosen patterns, in order. The model cannot tell a class's nodes apart, but
    the configured scorers can: the patterns with the most tasks first, each to the remaining node where its
    tasks score highest (with no scorer, the nodes in index order)."""
    if not problem.scored or not chosen:
        in_order: list[int] = members[: len(chosen)].tolist()
        return in_order
    per_group = np.stack([g.scores[members] if g.scores is not None else np.zeros(members.size)
                          for g in problem.groups])
    free = np.ones(members.size, dtype=bool)
    nodes = [0] * len(chosen)
    for j in sorted(range(len(chosen)), key=lambda j: -sum(chosen[j])):
        value = np.asarray(chosen[j], dtype=np.float64) @ per_group
        pick = int(np.argmax(np.where(free, value, -np.inf)))
        free[pick] = False
        nodes[j] = int(members[pick])
    return nodes


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
