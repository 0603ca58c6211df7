"""preempt: within a queue, a higher-priority job evicts lower-priority tasks, or nothing."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from preemption_confs import make_conf

from scheduler.testing import ClusterBuilder, cluster, pod_object

CONF = make_conf()


def running(c: ClusterBuilder, *jobs: str) -> set[str]:
    return {name for job in jobs for name in c.sim.bound(job)}


@dataclass(frozen=True)
class Case:
    name: str
    low: tuple[tuple[str, int, str, dict[str, object]], ...]  # (job, replicas, priority class, extra job kwargs)
    high_replicas: int
    evicted: frozenset[str] = field(default_factory=frozenset)
    high_bound: int = 0


CASES = [
    Case(
        "the lowest-priority victims go first",
        (("lowest", 2, "low", {}), ("middle", 2, "mid", {})),
        2,
        frozenset({"default/lowest-0", "default/lowest-1"}),
        2,
    ),
    Case(
        "nothing is evicted when the preemptor would still not fit",
        (("lowest", 2, "low", {}), ("middle", 2, "mid", {})),
        6,
    ),
    Case(
        "a non-preemptable pod is never evicted, even if that means evicting a higher-priority one",
        (("pinned", 2, "low", {"preemptable": False}), ("middle", 2, "mid", {})),
        2,
        frozenset({"default/middle-0", "default/middle-1"}),
        2,
    ),
    Case(
        "nothing is evicted when the only victims are non-preemptable",
        (("pinned", 4, "low", {"preemptable": False}),),
        1,
    ),
    Case(
        "pods in kube-system are never evicted",
        (("system", 4, "low", {"namespace": "kube-system"}),),
        1,
    ),
    Case(
        "a running gang is never broken below its minAvailable",
        (("gang", 4, "low", {"min_available": 4}),),
        1,
    ),
    Case(
        "a gang above its minAvailable gives up only its extra tasks",
        (("elastic", 4, "low", {"min_available": 2}),),
        2,
        frozenset({"default/elastic-3", "default/elastic-2"}),
        2,
    ),
    Case(
        "an equal-priority job evicts nothing",
        (("peer", 4, "high", {}),),
        1,
    ),
]


def build(case: Case) -> ClusterBuilder:
    c = cluster().priority_class("low", 10).priority_class("mid", 100).priority_class("high", 1000).node("n1", gpu=4)
    for job, replicas, pc, extra in case.low:
        kwargs = dict(extra)
        namespace = str(kwargs.pop("namespace", "default"))
        preemptable = kwargs.pop("preemptable", True)
        c.sim.add_podgroup({"metadata": {"name": job, "namespace": namespace},
                            "spec": {"minMember": kwargs.get("min_available", 1), "priorityClassName": pc}})
        for i in range(replicas):
            pod = pod_object(f"{job}-{i}", namespace=namespace, group=job, gpu=1, priority_class=pc)
            if not preemptable:
                pod["metadata"]["annotations"]["volcano.sh/preemptable"] = "false"
            c.sim.add_pod(pod)
            c.sim.now += 1  # later pods are younger: evicted first among equals
    c.cycle(CONF)
    return c


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_preempt(case: Case) -> None:
    c = build(case)
    assert c.sim.used_gpus() == 4000, "the low-priority jobs fill the node first"
    c.job("high", replicas=case.high_replicas, gpu=1, priority_class="high")
    for _ in range(3):
        c.cycle(CONF)
    assert set(c.sim.evicted) == case.evicted
    assert len(c.sim.bound("high")) == case.high_bound
    assert c.sim.partially_bound_gangs() == []


def test_an_eviction_says_who_preempted_the_victim() -> None:
    c = build(CASES[0])
    c.job("high", replicas=2, gpu=1, priority_class="high")
    result = c.cycle(CONF)
    assert {e.task for e in result.evictions} == {"default/lowest-0", "default/lowest-1"}
    assert all("preempted by default/high (priority 1000)" in e.reason for e in result.evictions)
    events = [e for _, e in c.sim.events if e.reason == "Preempted"]
    assert {e.key for e in events} == {"default/lowest-0", "default/lowest-1"}


def test_without_preempt_in_actions_nothing_is_evicted() -> None:
    c = build(CASES[0])
    c.job("high", replicas=2, gpu=1, priority_class="high")
    conf = make_conf("enqueue, allocate, backfill")
    for _ in range(3):
        c.cycle(conf)
    assert c.sim.evicted == [] and c.sim.bound("high") == {}
