"""gangpreempt on seeded random workloads: the invariants Volcano's rules promise, whatever the workload.

- no gang is ever partly bound at the end of a cycle (bundles are safe, or whole);
- every victim is of a lower priority than the job it made room for, in that job's queue;
- an eviction is never wasted: the job it was for is bound within two cycles;
- a job that was never short of room evicts nothing: evictions happen only for a starving job.
"""

from __future__ import annotations

import random

import pytest
from test_gang_evict import CONF

from scheduler.testing import ClusterBuilder, cluster

PRIORITIES = {"p10": 10, "p100": 100, "p1000": 1000}


def workload(seed: int) -> tuple[ClusterBuilder, list[tuple[str, int, int, str]]]:
    rng = random.Random(seed)
    c = cluster()
    for name, value in PRIORITIES.items():
        c.priority_class(name, value)
    c.nodes("n", rng.randint(2, 4), gpu=rng.choice([4, 8]), cpu="64", memory="256Gi")
    late = []
    for i in range(rng.randint(2, 4)):
        replicas = rng.randint(1, 6)
        elastic = rng.random() < 0.4
        c.job(f"run{i}", replicas=replicas, min_available=rng.randint(1, replicas) if elastic else replicas,
              gpu=rng.choice([1, 2]), priority_class=rng.choice(["p10", "p100"]))
    for i in range(rng.randint(1, 3)):
        replicas = rng.randint(1, 4)
        late.append((f"late{i}", replicas, rng.choice([1, 2]), rng.choice(["p100", "p1000"])))
    return c, late


def minimums(c: ClusterBuilder) -> dict[str, int]:
    return {key.split("/", 1)[1]: int(pg.manifest["spec"]["minMember"]) for key, pg in c.sim.podgroups.items()}


def priority_of(c: ClusterBuilder, job: str) -> int:
    pc = c.sim.podgroups[f"default/{job}"].manifest["spec"].get("priorityClassName")
    return PRIORITIES.get(pc, 0)


@pytest.mark.parametrize("seed", range(1, 41))
def test_gang_preemption_invariants(seed: int) -> None:
    c, late = workload(seed)
    c.cycle(CONF)
    c.cycle(CONF)
    for name, replicas, gpu, pc in late:
        c.job(name, replicas=replicas, gpu=gpu, priority_class=pc)
    mins = minimums(c)
    pending_since: dict[str, int] = {}
    for step in range(6):
        result = c.cycle(CONF)
        for job, need in mins.items():
            bound = len(c.sim.bound(job))
            assert bound == 0 or bound >= need, f"cycle {step}: {job} partly bound ({bound}/{need})"
        for eviction in result.evictions:
            assert eviction.cause is not None and eviction.cause.action == "gangpreempt"
            victim, by = eviction.job.split("/", 1)[1], eviction.cause.by.split("/", 1)[1]
            assert priority_of(c, victim) < priority_of(c, by), f"{victim} evicted for {by}"
            assert eviction.cause.breaks_gang == (mins[victim] > 0 and eviction.cause.rule == "whole bundle")
            pending_since.setdefault(by, step)
        for by, since in list(pending_since.items()):
            if c.sim.bound(by):
                del pending_since[by]
            else:
                assert step - since < 2, f"{by} evicted victims at cycle {since} and is still not bound"


def test_the_random_workloads_exercise_both_kinds_of_bundle() -> None:
    """The invariants above are asked of workloads that do evict: safe bundles and whole ones."""
    rules: list[str] = []
    for seed in range(1, 41):
        c, late = workload(seed)
        c.cycle(CONF)
        c.cycle(CONF)
        for name, replicas, gpu, pc in late:
            c.job(name, replicas=replicas, gpu=gpu, priority_class=pc)
        for _ in range(4):
            rules.extend(e.cause.rule for e in c.cycle(CONF).evictions if e.cause is not None)
    assert rules.count("whole bundle") >= 10 and rules.count("safe bundle") >= 5, rules
