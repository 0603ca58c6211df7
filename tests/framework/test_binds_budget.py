"""Allocate's budget of binds per cycle (`maxBindsPerCycle`, scheduler/actions/allocate.py step 5): a cycle stops
taking jobs once it has committed that many binds, never splits a gang, leaves the untried jobs alone (no
condition, no later action), and the next cycle starts at once and goes on from there, so the budget changes when
pods are bound and not where."""

from __future__ import annotations

import logging
import random
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.api.snapshot import ClusterSnapshot, CycleResult
from scheduler.cache.runner import ConfWatcher, SchedulerLoop
from scheduler.cli import bench_module
from scheduler.conf_check import action_warnings
from scheduler.cycle import builtin_default_conf, conf_from_text, run_cycle
from scheduler.framework.conf import SchedulerConf
from scheduler.metrics import sample_cycle
from scheduler.testing import ClusterBuilder, cluster, conf_text_from_tiers


def budgeted(budget: Any, conf: SchedulerConf | None = None) -> SchedulerConf:
    conf = conf or builtin_default_conf()
    return replace(conf, configurations={**conf.configurations, "allocate": {"maxBindsPerCycle": budget}})


def binds(result: CycleResult) -> int:
    return sum(len(g.binds) for g in result.binds)


def random_cluster(seed: int) -> ClusterBuilder:
    rnd = random.Random(seed)
    c = cluster()
    for i in range(rnd.randint(2, 12)):
        c.node(f"n{i}", gpu=rnd.choice([0, 4, 8]), cpu=str(rnd.choice([8, 16, 32])), memory="64Gi")
    c.queue("q1", weight=rnd.randint(1, 3)).queue("q2", weight=rnd.randint(1, 3))
    for j in range(rnd.randint(1, 25)):
        size = rnd.choice([1, 1, 2, 3, 4, 8])
        c.job(f"j{j}", queue=rnd.choice(["q1", "q2", "default"]), replicas=size, min_available=rnd.randint(1, size),
              gpu=rnd.choice([0, 1, 2]), cpu=str(rnd.choice([1, 2, 4])), memory="1Gi")
    return c


def placements(c: ClusterBuilder) -> dict[str, str]:
    return {key: pod.task.node_name for key, pod in c.sim.pods.items()}


@pytest.mark.parametrize("budget", [1, 3])
def test_on_random_clusters_the_budget_changes_when_pods_are_bound_never_where(budget: int) -> None:
    """Seeded random clusters (2 queues of random weights, gangs of 1-8 with random minAvailable): cycles with the
    budget until quiet end with every pod where cycles without it put it; every cycle that deferred a job bound
    at least the budget, and every gang a cycle bound is ready after it (never split)."""
    deferring = 0
    for seed in range(40):
        free, bounded = random_cluster(seed), random_cluster(seed)
        for _ in range(40):
            free.cycle()
        conf = budgeted(budget)
        for _ in range(40):
            result = bounded.cycle(conf)
            if result.deferred:
                deferring += 1
                assert binds(result) >= budget, (seed, binds(result))
            for gang in result.binds:
                group = bounded.sim.podgroups[gang.job].manifest
                assert len(bounded.sim.bound(group["metadata"]["name"])) >= group["spec"]["minMember"], seed
        assert placements(bounded) == placements(free), seed
    assert deferring >= 20, "the budget was hardly ever reached: the workloads test nothing"


def test_a_gang_larger_than_the_budget_is_bound_whole_in_one_cycle() -> None:
    c = cluster().nodes("n", 3, gpu=8).job("big", replicas=8, gpu=2).job("small", replicas=1, gpu=1)
    first = c.cycle(budgeted(3))
    assert binds(first) == 8 and [g.job for g in first.binds] == ["default/big"]
    assert first.deferred == ("default/small",)  # it had no turn
    assert binds(c.cycle(budgeted(3))) == 1


def test_a_deferred_job_gets_no_condition_and_no_event() -> None:
    """Not tried is not unschedulable: its PodGroup keeps what it had, and no FailedScheduling event is sent."""
    c = cluster().nodes("n", 1, gpu=8).job("a", replicas=1, gpu=1).job("b", replicas=1, gpu=1)
    result = c.cycle(budgeted(1))
    assert binds(result) == 1 and len(result.deferred) == 1
    deferred = "default/b" if c.sim.bound("a") else "default/a"
    assert result.deferred == (deferred,)
    assert c.sim.condition(deferred.split("/")[1]) is None
    assert not [e for e in result.events if e.key.startswith(deferred)]
    assert not [s for s in result.podgroups if s.job == deferred and any(
        cond.type == "Unschedulable" for cond in s.conditions)]


def test_a_deferred_job_is_not_counted_as_an_unschedulable_attempt() -> None:
    """volcano_schedule_attempts_total: `huge` (high priority, so tried first) fits nowhere and counts as an
    unschedulable attempt; `a` is bound; `b`, which the budget of 1 left untried, counts as no attempt."""
    c = cluster().priority_class("high", 100).nodes("n", 1, gpu=8)
    c.job("huge", replicas=1, gpu=16, priority_class="high").job("a", replicas=1, gpu=1).job("b", replicas=1, gpu=1)
    snapshot = c.sim.snapshot()
    result = run_cycle(snapshot, budgeted(1), memo=c.memo)
    assert [g.job for g in result.binds] == ["default/a"] and result.deferred == ("default/b",)
    assert sample_cycle(result, 0.1, snapshot).attempts == {"scheduled": 1, "unschedulable": 1}


def test_preempt_does_not_evict_for_a_job_the_budget_left_untried() -> None:
    """Two high-priority jobs, room for both on n0, n1 full of low-priority pods: the first cycle binds one and
    defers the other, and preempt must not take the deferred one up (it was never tried on the free room; binpack
    scores the full n1 first, where preempt would evict a victim for it): nothing is evicted, and the next cycle
    binds it on n0."""
    plain = conf_from_text(conf_text_from_tiers(["priority", "gang", "conformance"],
                                                ["drf", "predicates", "proportion", "binpack"],
                                                actions="enqueue, allocate, preempt, backfill"))
    conf = budgeted(1, plain)
    c = (cluster().priority_class("high", 1000).priority_class("low", 1)
         .node("n0", gpu=8, cpu="16", memory="64Gi").node("n1", gpu=8, cpu="16", memory="64Gi"))
    c.job("victims", replicas=8, min_available=1, gpu=1, cpu="1", memory="1Gi", priority_class="low",
          node_selector={"kubernetes.io/hostname": "n1"})
    c.cycle(plain)
    assert len(c.sim.bound("victims")) == 8
    c.job("h1", replicas=1, gpu=1, cpu="1", memory="1Gi", priority_class="high")
    c.job("h2", replicas=1, gpu=1, cpu="1", memory="1Gi", priority_class="high")
    first = c.cycle(conf)
    assert binds(first) == 1 and len(first.deferred) == 1
    assert first.evictions == []
    second = c.cycle(conf)
    assert binds(second) == 1 and second.evictions == [] and second.deferred == ()
    assert set(c.sim.bound("h1").values()) == set(c.sim.bound("h2").values()) == {"n0"}


@pytest.mark.parametrize("raw", [0, -5, "many", 2.5, True, 10**12])
def test_a_budget_that_is_not_a_whole_number_in_range_is_no_bound_and_conf_check_names_it(raw: Any) -> None:
    c = cluster().nodes("n", 1, gpu=8).job("a", replicas=1, gpu=1).job("b", replicas=1, gpu=1)
    result = c.cycle(budgeted(raw))
    assert binds(result) == 2 and result.deferred == ()
    warnings = action_warnings(budgeted(raw))
    assert [(w.action, w.key) for w in warnings] == [("allocate", "maxBindsPerCycle")]
    assert warnings[0].using == "allocate uses no bound (the default)"


class SimCache:
    """The scheduler loop's cache on the in-memory cluster: its snapshot, its apply (binds land at once)."""

    ours_early: list[object] = []

    def __init__(self, c: ClusterBuilder) -> None:
        self.c = c
        self.applied: list[CycleResult] = []
        self.quiet = threading.Event()

    def start(self) -> None:
        pass

    def wait_synced(self, timeout: float) -> bool:
        return True

    def ensure_queue(self, name: str) -> None:
        pass

    def snapshot(self) -> ClusterSnapshot:
        return self.c.sim.snapshot()

    def __getattr__(self, name: str) -> Any:  # what else the loop reads of its cache (bound_at, ...): the sim's
        return getattr(self.c.sim, name)

    def apply(self, result: CycleResult) -> None:
        self.c.sim.apply(result)
        self.c.sim.start_bound_pods()
        self.applied.append(result)
        if not result.deferred:
            self.quiet.set()


def test_the_loop_starts_the_next_cycle_at_once_while_jobs_are_deferred(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A 600 s period: with a budget of 2 binds, 5 one-pod jobs are bound in 3 cycles back to back; each cycle's
    log line says what it left and its CPU, as `make bench-shards` reads it."""
    caplog.set_level(logging.INFO, logger="volcano_py.scheduler")
    doc = yaml.safe_load(conf_text_from_tiers(["priority", "gang", "conformance"],
                                              ["drf", "predicates", "proportion", "nodeorder"],
                                              configurations={"allocate": {"maxBindsPerCycle": 2}}))
    path = tmp_path / "volcano-scheduler.conf"
    path.write_text(yaml.safe_dump(doc))
    c = cluster().nodes("n", 1, gpu=8)
    for i in range(5):
        c.job(f"j{i}", replicas=1, gpu=1)
    cache = SimCache(c)
    loop = SchedulerLoop(cache, ConfWatcher(str(path)), period=600.0)  # type: ignore[arg-type]
    runner = threading.Thread(target=loop.run, daemon=True)
    runner.start()
    assert cache.quiet.wait(30), "the deferred jobs waited for the 600 s period"  # (the third cycle's apply)
    loop.stop()
    runner.join(10)
    assert not runner.is_alive()
    assert [binds(r) for r in cache.applied] == [2, 2, 1]  # no fourth cycle: nothing deferred, the period holds
    assert [len(r.deferred) for r in cache.applied] == [3, 1, 0]
    assert "3 jobs left for the next cycle (maxBindsPerCycle)" in caplog.text
    bench_module("shards")  # bench/ on sys.path
    from shards_report import binding_cycles

    read = binding_cycles(caplog.text)
    assert read["binding_cycles"] == 3 and 0 <= read["binding_cycle_cpu_p95_s"] <= read["binding_cycle_cpu_max_s"]
