"""Layer `solver`: seating a merged gang's real tasks on the nodes a model chose.

A gang with more than MAX_GROUPS task shapes is merged by GPU request before the model (`coarsen`); the model
packs by mean requests, so its answer is a set of nodes with slots, and `refine` seats the real tasks there:
on the slots, then by vector bin packing over the same nodes, then with a small CP-SAT feasibility model, and
last by spilling onto other nodes of the same racks.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import numpy.typing as npt
from ortools.sat.python import cp_model

from scheduler.solver.evaluate import FloatArray, GangProblem, Group, Placement, used_nodes
from scheduler.solver.topology import RACK, IntArray

MAX_GROUPS = 4  # more task shapes than this are merged by GPU request (see `coarsen`)
SEAT_MODEL_S = 0.05  # at most this long seating a merged answer's real tasks with CP-SAT


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
        groups.append(Group(int(weights.sum()), request, allowed, _mean_scores(problem, members)))
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


def _mean_scores(problem: GangProblem, members: list[int]) -> FloatArray | None:
    """A merged group's node scores: its members' mean, weighted by their task counts."""
    scored = [(g.count, g.scores) for g in (problem.groups[m] for m in members) if g.scores is not None]
    if not scored:
        return None
    total = sum(count for count, _ in scored)
    mean: FloatArray = sum((scores * (count / total) for count, scores in scored), np.zeros(problem.nodes))
    return mean


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

