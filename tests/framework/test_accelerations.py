"""Every plugin with and without its accelerations makes the same decisions (`scheduler/framework/runtime.py`).

A plugin's accelerations (`job_order_key`, `task_order_key`, `allocatable_count`, `job_ready_bound`,
`batch_node_order_one`/`_static`, `on_allocate_many`) let the scheduler take faster paths: keyed sorts, bulk
placement of a gang's identical pods. They must not change a decision. Each of 200 seeded random workloads (gangs
with runs of at least 8 identical pods, queues with capabilities, priorities, taints, zones, a running gang to
evict) runs three cycles under one of four confs covering every plugin that has an acceleration (priority, gang,
drf, predicates, proportion, capacity with and without its hierarchy, nodeorder, binpack) and the eviction actions,
once as the scheduler runs and once with `accelerate=False` (the plain methods alone); every cycle's decisions must
be equal. A counter checks that the accelerated path (a bulk run that placed pods) was taken in at least half of
the workloads, so the comparison is not of the plain path with itself.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from scheduler import cycle
from scheduler.actions import ACTIONS, bulk as bulk_module
from scheduler.actions.allocate import Allocate
from scheduler.api.snapshot import CycleResult
from scheduler.cycle import builtin_default_conf, conf_from_text
from scheduler.framework.conf import SchedulerConf
from scheduler.testing import ClusterBuilder, cluster, conf_from_tiers

ROOT = Path(__file__).resolve().parents[2]
WORKLOADS = 200
CONFS: dict[str, SchedulerConf] = {
    "default (proportion)": builtin_default_conf(),
    "gang eviction (capacity)": conf_from_text((ROOT / "examples/sim/gang-eviction.conf").read_text(),
                                               source="gang-eviction.conf"),
    "capacity hierarchy, legacy preempt and reclaim": conf_from_tiers(
        ("priority", "gang", "conformance"),
        ("drf", "predicates", {"name": "capacity", "arguments": {"enableHierarchy": True}}, "nodeorder",
         {"name": "binpack", "arguments": {"binpack.weight": 3}}),
        actions="enqueue, allocate, preempt, reclaim, backfill"),
    "most requested, proportion, sla": conf_from_tiers(
        ("priority", "gang", "conformance", "sla"),
        ("drf", "predicates", "proportion",
         {"name": "nodeorder", "arguments": {"mostrequested.weight": 2, "leastrequested.weight": 0}}, "binpack"),
        actions="enqueue, allocate, backfill"),
}


def workload(seed: int) -> ClusterBuilder:
    rng = random.Random(seed)
    c = cluster()
    c.priority_class("low", 10).priority_class("high", 1000)
    for i in range(rng.randint(2, 8)):
        taint = rng.choice([None, None, "PreferNoSchedule", "NoSchedule"])
        c.node(f"n{i:02d}", cpu=str(rng.choice([8, 16, 32])), memory=rng.choice(["32Gi", "128Gi"]),
               gpu=rng.choice([0, 4, 8]), pods=rng.randint(8, 40), labels={"zone": rng.choice("ab")},
               taints=[{"key": "dedicated", "value": "x", "effect": taint}] if taint else [])
    queues = [f"q{i}" for i in range(rng.randint(1, 3))]
    for name in queues:
        capability = rng.choice([None, {"cpu": "24"}, {"cpu": "40", "nvidia.com/gpu": "10"}])
        c.queue(name, weight=rng.randint(1, 4), capability=capability, parent="root" if rng.random() < 0.5 else None)
    if rng.random() < 0.5:  # a low-priority gang already running, for the evicting actions to take from
        c.job("running", replicas=4, cpu="2", memory="4Gi", priority_class="low", phase="Running", queue=queues[0])
        for i, uid in enumerate(sorted(c.sim.pods)):
            c.sim.pods[uid].manifest["spec"]["nodeName"] = f"n{i % 2:02d}"
            c.sim.pods[uid].manifest["status"]["phase"] = "Running"
    for g in range(rng.randint(1, 5)):
        replicas = rng.randint(8, 16)  # a run of at least 8 identical pods
        c.sim.now += 1
        c.job(f"g{g}", replicas=replicas, min_available=rng.randint(1, replicas), queue=rng.choice(queues),
              priority_class=rng.choice([None, "low", "high"]), cpu=rng.choice(["500m", "1", "2"]),
              memory=rng.choice(["1Gi", "4Gi"]), gpu=rng.choice([0, 0, 1]),
              tolerations=[{"key": "dedicated", "operator": "Exists"}] if rng.random() < 0.5 else [],
              node_selector={"zone": rng.choice("ab")} if rng.random() < 0.2 else None)
    return c


def decisions(result: CycleResult) -> tuple[Any, ...]:
    """Everything a cycle decided, in order, but its timings."""
    return (result.binds, result.evictions, result.events, result.podgroups, result.queues, result.counters,
            result.annotations)


def run(seed: int, conf: SchedulerConf, *, accelerate: bool, cycles: int = 3) -> list[tuple[Any, ...]]:
    c = workload(seed)
    out = []
    for _ in range(cycles):
        result = cycle.run_cycle(c.sim.snapshot(), conf, accelerate=accelerate)
        c.sim.apply(result)
        c.sim.start_bound_pods()
        c.sim.now += 1.0
        out.append(decisions(result))
    return out


def test_every_plugin_decides_the_same_with_and_without_its_accelerations(monkeypatch: pytest.MonkeyPatch) -> None:
    placed_in_runs: list[int] = []
    original = bulk_module.BulkPlacer.place_run

    def counting(self: bulk_module.BulkPlacer, *args: Any) -> tuple[int, bool]:
        placed, ready = original(self, *args)
        placed_in_runs.append(placed)
        return placed, ready

    monkeypatch.setattr(bulk_module.BulkPlacer, "place_run", counting)
    names = sorted(CONFS)
    accelerated = 0
    for seed in range(WORKLOADS):
        name = names[seed % len(names)]
        placed_in_runs.clear()
        fast = run(seed, CONFS[name], accelerate=True)
        took_fast_path = sum(placed_in_runs) > 0
        placed_in_runs.clear()
        plain = run(seed, CONFS[name], accelerate=False)
        assert not placed_in_runs, "accelerate=False must not place in bulk runs"
        assert fast == plain, f"seed {seed} under {name}: decisions differ with the accelerations"
        accelerated += took_fast_path
    assert accelerated >= WORKLOADS // 2, f"the accelerated path was taken in {accelerated} of {WORKLOADS}"


class _Forgetful(dict[str, Any]):
    """A map that keeps nothing: allocate sorts a ready job's pending tasks afresh at each of its turns."""

    def __setitem__(self, key: str, value: Any) -> None:
        pass

    def get(self, key: str, default: Any = None) -> Any:
        return default


class SortEachTurn(Allocate):
    def allocate_job(self, *args: Any) -> None:
        self._ready = _Forgetful()
        super().allocate_job(*args)


@pytest.mark.parametrize("seed", range(40))
def test_sorting_a_ready_jobs_tasks_once_decides_as_sorting_at_each_turn(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """allocate sorts a ready (elastic) job's tasks once and skips the placed ones at its later turns
    (`actions/allocate.py`, `_ReadyOrder`): the same decisions as sorting again at every turn."""
    conf = CONFS[sorted(CONFS)[seed % len(CONFS)]]
    once = run(seed, conf, accelerate=True)
    monkeypatch.setitem(ACTIONS, "allocate", SortEachTurn)
    assert run(seed, conf, accelerate=True) == once
