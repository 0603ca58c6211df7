"""victimcost: when evictions are needed, the cheapest victims first (fewest gangs broken, then least work lost
since the last checkpoint or the start), and no more than the per-cycle and per-job bounds (a rule beyond Volcano's,
opt-in). Each scenario is run without the plugin too, where Volcano's order takes another victim."""

from __future__ import annotations

import sys
from typing import Any

import pytest
import yaml

from scheduler.api.timestamps import rfc3339
from scheduler.cycle import conf_from_text
from scheduler.framework.conf import SchedulerConf
from scheduler.framework.conf_values import ConfError
from scheduler.plugins.victimcost import (
    CHECKPOINT,
    DEFAULT_PER_CYCLE,
    DEFAULT_PER_JOB,
    LIMIT,
    VictimCostArgs,
    VictimCostPlugin,
)
from scheduler.testing import ClusterBuilder, cluster, conf_from_tiers, pod_object


def conf(victimcost: dict[str, Any] | None, *, actions: str = "enqueue, allocate, preempt, backfill") -> SchedulerConf:
    first: list[Any] = ["priority", {"name": "gang", "enablePreemptable": False}, "conformance"]
    if victimcost is not None:
        first.append({"name": "victimcost", "arguments": victimcost})
    second: list[Any] = [{"name": "drf", "enablePreemptable": False}, "predicates", "proportion", "nodeorder"]
    if "gangpreempt" in actions:
        second = [{"name": "drf", "enablePreemptable": False}, "predicates", "capacity", "nodeorder", "binpack"]
    return conf_from_tiers(first, second, actions=actions,
                           configurations={"allocate": {"starvationThresholdSeconds": -1}})


def add_job(c: ClusterBuilder, name: str, replicas: int, minimum: int, *, priority: str = "low",
            annotations: dict[str, str] | None = None) -> None:
    c.sim.add_podgroup({"metadata": {"name": name, "namespace": "default"},
                        "spec": {"minMember": minimum, "priorityClassName": priority}})
    for i in range(replicas):
        pod = pod_object(f"{name}-{i}", group=name, gpu=1, priority_class=priority)
        pod["metadata"]["annotations"].update(annotations or {})
        c.sim.add_pod(pod)


def victims_of(c: ClusterBuilder) -> set[str]:
    return {key.split("/", 1)[1].rsplit("-", 1)[0] for key in c.sim.evicted}


def two_jobs(gpus: int = 4) -> ClusterBuilder:
    return cluster().priority_class("low", 10).priority_class("high", 1000).node("n0", gpu=gpus)


@pytest.mark.parametrize("actions", ["enqueue, allocate, preempt, backfill",
                                     "allocate, backfill, gangreclaim, gangpreempt"])
def test_the_job_that_loses_the_least_work_since_its_checkpoint_goes_first(actions: str) -> None:
    """`old` started 3000 s ago but checkpointed a minute before `urgent` came; `fresh` started 2000 s before it
    and never did. By lost work `old` goes alone (60 s lost against 2000 s); Volcano's order takes `fresh` first
    (the newer job), and legacy preempt then a pod of `old` too, breaking both gangs."""
    def run(cost: dict[str, Any] | None) -> set[str]:
        c = two_jobs()
        add_job(c, "old", 2, 2, annotations={CHECKPOINT: rfc3339(c.sim.now + 2940)})
        c.cycle(conf(cost, actions=actions))
        c.sim.now += 1000
        add_job(c, "fresh", 2, 2)
        c.cycle(conf(cost, actions=actions))
        c.sim.now += 2000
        add_job(c, "urgent", 2, 2, priority="high")
        c.cycles(2, conf(cost, actions=actions))
        return victims_of(c)

    assert run(None) == ({"fresh", "old"} if "gangpreempt" not in actions else {"fresh"})
    assert run({}) == {"old"}


def test_a_job_that_stays_a_whole_gang_goes_before_one_that_would_break_whatever_the_work_lost() -> None:
    """`elastic` (3 pods, minAvailable 1) started long before `rigid` (2 pods, minAvailable 2): it loses more work,
    but taking 2 of its pods breaks no gang, so they go; Volcano's order takes a pod of the newer `rigid` first
    (breaking it), then one of `elastic`."""
    def run(cost: dict[str, Any] | None) -> set[str]:
        c = two_jobs(gpus=5)
        add_job(c, "elastic", 3, 1)
        c.cycle(conf(cost))
        c.sim.now += 3000
        add_job(c, "rigid", 2, 2)
        c.cycle(conf(cost))
        c.sim.now += 60
        add_job(c, "urgent", 2, 2, priority="high")
        c.cycles(2, conf(cost))
        return victims_of(c)

    assert run(None) == {"rigid", "elastic"}
    assert run({}) == {"elastic"}


def _singles(n: int) -> ClusterBuilder:
    c = two_jobs()
    for i in range(n):
        add_job(c, f"one{i}", 1, 1)
    c.cycle(conf(None))
    c.sim.now += 600
    return c


@pytest.mark.parametrize(("need", "evicted"), [(2, 2), (3, 0)])
def test_no_more_than_max_evictions_per_cycle(need: int, evicted: int) -> None:
    """Four one-pod jobs fill the node; a gang needing `need` GPUs with maxEvictionsPerCycle 2: at the bound it
    gets its two, one past it nothing (its plan would need three); without the bound it gets three."""
    c = _singles(4)
    add_job(c, "urgent", need, need, priority="high")
    c.cycle(conf({"maxEvictionsPerCycle": 2}))
    assert len(c.sim.evicted) == evicted
    c = _singles(4)
    add_job(c, "urgent", need, need, priority="high")
    c.cycle(conf({}))
    assert len(c.sim.evicted) == need


def test_no_more_than_max_evictions_per_job() -> None:
    """One elastic job holds the node (4 pods, minAvailable 1); a gang needs 2: with maxEvictionsPerJob 1 it
    may take one pod of that job, which is not enough, so nothing; with 2 (at the bound) it takes two."""
    for bound, evicted in ((1, 0), (2, 2)):
        c = two_jobs()
        add_job(c, "wide", 4, 1)
        c.cycle(conf(None))
        c.sim.now += 600
        add_job(c, "urgent", 2, 2, priority="high")
        c.cycle(conf({"maxEvictionsPerJob": bound}))
        assert len(c.sim.evicted) == evicted, bound


@pytest.mark.parametrize(("key", "value", "ok"), [
    ("maxEvictionsPerCycle", 0, False), ("maxEvictionsPerCycle", 1, True), ("maxEvictionsPerCycle", LIMIT, True),
    ("maxEvictionsPerCycle", LIMIT + 1, False), ("maxEvictionsPerJob", -1, False), ("maxEvictionsPerJob", "x", False),
])
def test_bounds_are_integers_from_1_to_the_limit(key: str, value: object, ok: bool) -> None:
    plugin = {"name": "victimcost", "arguments": {key: value}}
    text = yaml.safe_dump({"actions": "allocate, preempt", "tiers": [{"plugins": [{"name": "gang"}, plugin]}]})
    if ok:
        conf_from_text(text)
    else:
        with pytest.raises(ConfError, match=key):
            conf_from_text(text)


def test_the_defaults_are_the_documented_ones() -> None:
    doc = sys.modules[VictimCostPlugin.__module__].__doc__ or ""
    assert f"`maxEvictionsPerCycle` (default {DEFAULT_PER_CYCLE})" in doc
    assert f"`maxEvictionsPerJob` (default {DEFAULT_PER_JOB})" in doc
    text = yaml.safe_dump({"actions": "allocate, preempt", "tiers": [{"plugins": [{"name": "victimcost"}]}]})
    [option] = conf_from_text(text).tiers[0].plugins
    assert option.args == VictimCostArgs(DEFAULT_PER_CYCLE, DEFAULT_PER_JOB)
