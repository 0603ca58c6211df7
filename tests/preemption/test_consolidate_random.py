"""The consolidate action on seeded random workloads: whatever the cluster, no move is partial, the bounds hold,
only opted-in jobs past their minimum runtime move, and a committed plan comes true: the gang it was made for
is bound and every moved job is bound whole again on the nodes held for it.

Each seed: 4-8 nodes of 8 GPUs, running jobs of 1-2 pods of 1-4 GPUs spread over them (most marked movable,
some not; some within a minimum runtime), one or two pending gangs of 2 pods x 8 GPUs, random bounds.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass

import pytest
from consolidate_cases import conf, recreate, running

from scheduler.testing import ClusterBuilder, cluster

SEEDS = range(40)


@dataclass
class Case:
    c: ClusterBuilder
    per_cycle: int
    per_job: int
    unmarked: set[str]
    young: set[str]
    gangs: list[str]
    gpus: dict[str, int]  # job key -> GPUs per pod


def build(seed: int) -> Case:
    rng = random.Random(seed)
    c = cluster()
    count = rng.randint(4, 8)
    c.nodes("n", count, gpu=8)
    free = {f"n{i}": 8 for i in range(count)}
    unmarked: set[str] = set()
    young: set[str] = set()
    gpus: dict[str, int] = {}
    target = {n: rng.randint(2, 6) for n in free}  # each node about half used: the free GPUs are scattered
    for j in range(4 * count):
        gpu = rng.randint(1, 4)
        pods = rng.choice((1, 1, 1, 2))
        nodes = [n for n in sorted(free) if 8 - free[n] + gpu <= max(target[n], gpu)]
        if len(nodes) < pods:
            continue
        chosen = rng.sample(nodes, pods)
        for n in chosen:
            free[n] -= gpu
        name = f"r{j}"
        gpus[f"default/{name}"] = gpu
        marked = rng.random() < 0.8
        if not marked:
            unmarked.add(name)
        since = 3000.0 if rng.random() < 0.2 else None  # scheduled at 50 min: within a 15 min minimum runtime
        if since is not None:
            young.add(name)
        running(c, name, chosen, gpu, mark=None if marked else {}, since=since)
    gangs = [f"big{g}" for g in range(rng.choice((1, 1, 2)))]
    for name in gangs:
        c.job(name, replicas=2, gpu=8)
    c.sim.now = 3600.0
    return Case(c, rng.randint(1, 12), rng.randint(1, 8), unmarked, young, gangs, gpus)


def settings(case: Case) -> dict[str, object]:
    return {"maxEvictionsPerCycle": case.per_cycle, "maxEvictionsPerJob": case.per_job}


@pytest.mark.parametrize("seed", SEEDS)
def test_no_partial_move_bounds_held_and_a_committed_plan_comes_true(seed: int) -> None:
    case = build(seed)
    c = case.c
    # a 15 min minimum runtime: at 60 min, jobs scheduled at 50 min are young; the others run from their
    # creation (0) and may move
    the_conf = conf(consolidate=settings(case), minruntime={"minRuntime": "15m"})
    before = {key: dict(c.sim.bound(key)) for key in case.gpus}
    result = c.cycle(the_conf)
    evicted = Counter(e.job for e in result.evictions)
    by_preemptor = Counter(e.cause.by for e in result.evictions if e.cause is not None)
    assert len(result.evictions) <= case.per_cycle
    assert all(n <= case.per_job for n in by_preemptor.values())
    holds = c.memo.holds.holds
    for job, n in evicted.items():
        name = job.split("/")[1]
        assert n == len(before[job]), f"{job}: {n} of its {len(before[job])} pods moved"
        assert name not in case.unmarked and name not in case.young
        assert sorted(p.pod for p in holds[job].pods) == sorted(e.task for e in result.evictions if e.job == job)
    # the plan comes true: the gang is bound (the victims are gone at once in this cluster), then the recreated
    # pods of each moved job are bound on their held nodes
    c.cycle(the_conf)
    for preemptor in set(by_preemptor):
        assert len(c.sim.bound(preemptor.split("/")[1])) == 2, f"{preemptor} bound after its plan"
    held = {p.pod: p.node for h in holds.values() for p in h.pods}
    for e in result.evictions:
        recreate(c, e.task, case.gpus[e.job])
    c.cycle(the_conf)
    for job in evicted:
        bound = c.sim.bound(job.split("/")[1])
        assert {f"default/{pod}": node for pod, node in bound.items()} == {
            pod: node for pod, node in held.items() if pod.startswith(f"{job}-")}


def test_the_random_workloads_do_move_jobs() -> None:
    """The property above is not vacuous: most seeds move something, and bounds refuse some plans."""
    moved = refused = 0
    for seed in SEEDS:
        bounded = bool(build(seed).c.cycle(conf(consolidate=settings(build(seed)),
                                                minruntime={"minRuntime": "15m"})).evictions)
        free = bool(build(seed).c.cycle(conf(consolidate={"maxEvictionsPerCycle": 1000, "maxEvictionsPerJob": 1000},
                                             minruntime={"minRuntime": "15m"})).evictions)
        moved += bounded
        refused += free and not bounded
    assert moved >= len(SEEDS) // 4 and refused >= 1, (moved, refused)


def _bound(seed: int) -> int:
    return random.Random(10_000 + seed).randint(1, 6)  # GPU-hours; a move here costs 1-8 (GPUs x 1 h)


@pytest.mark.parametrize("seed", SEEDS)
def test_no_move_loses_more_work_than_its_bound(seed: int) -> None:
    # at 60 min every movable job has run since 0 (the young ones are kept by the minimum runtime): a move costs
    # its GPUs x 1 h
    case = build(seed)
    bound = _bound(seed)
    result = case.c.cycle(conf(consolidate={**settings(case), "maxLostGPUHoursPerMove": bound},
                               minruntime={"minRuntime": "15m"}))
    moved = Counter(e.job for e in result.evictions)
    for job, pods in moved.items():
        assert pods * case.gpus[job] <= bound, f"{job}: {pods} x {case.gpus[job]} GPUs x 1 h > {bound} GPU-hours"


def test_the_move_loss_bound_refuses_moves_on_some_seeds_and_allows_them_on_others() -> None:
    """The property above is not vacuous: with the bound, some seeds still move and some plans are refused."""
    moved = refused = 0
    for seed in SEEDS:
        case = build(seed)
        bounded = bool(build(seed).c.cycle(conf(consolidate={**settings(case), "maxLostGPUHoursPerMove": _bound(seed)},
                                                minruntime={"minRuntime": "15m"})).evictions)
        free = bool(case.c.cycle(conf(consolidate=settings(case), minruntime={"minRuntime": "15m"})).evictions)
        moved += bounded
        refused += free and not bounded
    assert moved >= 3 and refused >= 3, (moved, refused)
