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
        "the lowest-priority victims go first, down to their job's minAvailable",
        (("lowest", 3, "low", {}), ("middle", 1, "mid", {})),
        2,
        frozenset({"default/lowest-2", "default/lowest-1"}),
        2,
    ),
    Case(
        "each job keeps its minAvailable, so victims come from several jobs (Volcano's gang plugin)",
        (("lowest", 2, "low", {}), ("middle", 2, "mid", {})),
        2,
        frozenset({"default/lowest-1", "default/middle-1"}),
        2,
    ),
    Case(
        "a lone pod is not offered by gang, so drf in the second tier decides, and lets it go (Volcano's tiers)",
        (("solo", 1, "low", {}), ("peer", 3, "high", {})),
        1,
        frozenset({"default/solo-0"}),
        1,
    ),
    Case(
        "nothing is evicted when the preemptor would still not fit",
        (("lowest", 2, "low", {}), ("middle", 2, "mid", {})),
        6,
    ),
    Case(
        "a non-preemptable pod is never evicted, even if that means evicting a higher-priority one",
        (("pinned", 2, "low", {"preemptable": False}), ("middle", 2, "mid", {})),
        1,
        frozenset({"default/middle-1"}),
        1,
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
        "an equal-priority job is offered no victim by priority, so the second tier's drf decides (Volcano's tiers)",
        (("peer", 4, "high", {}),),
        1,
        frozenset({"default/peer-3"}),
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
    assert {e.task for e in result.evictions} == {"default/lowest-2", "default/lowest-1"}
    assert all("preempted by default/high (priority 1000)" in e.reason for e in result.evictions)
    events = [e for _, e in c.sim.events if e.reason == "Preempted"]
    assert {e.key for e in events} == {"default/lowest-2", "default/lowest-1"}


def test_an_equal_priority_job_evicts_nothing_when_no_tier_offers_victims() -> None:
    """Volcano's CI conf turns drf's Preemptable off: priority offers no victim of equal priority, and no
    later tier answers, so nothing is evicted."""
    c = build(CASES[-1])
    ci = make_conf(second=("overcommit", {"name": "drf", "enablePreemptable": False}, "predicates", "proportion",
                           "nodeorder", "binpack"))
    c.job("high", replicas=1, gpu=1, priority_class="high")
    for _ in range(3):
        c.cycle(ci)
    assert c.sim.evicted == [] and c.sim.bound("high") == {}


def test_a_gang_at_its_minimum_is_protected_across_tiers_unless_gang_preemptable_is_off() -> None:
    """Deliberately past Volcano: there, gang offering no victim ends tier 1 and drf in tier 2 may break the gang
    below minAvailable. volcano-py keeps gang's guard across tiers; `enablePreemptable: false` on gang (as
    Volcano's CI conf has it) turns it off, and the gang then loses a pod as in Volcano."""
    case = next(x for x in CASES if x.name.startswith("a running gang is never broken"))
    c = build(case)
    c.job("high", replicas=1, gpu=1, priority_class="high")
    for _ in range(3):
        c.cycle(CONF)
    assert c.sim.evicted == []
    off = make_conf(first=("priority", {"name": "gang", "enablePreemptable": False}, "conformance"))
    c.cycle(off)
    assert c.sim.evicted == ["default/gang-3"]


def test_without_preempt_in_actions_nothing_is_evicted() -> None:
    c = build(CASES[0])
    c.job("high", replicas=2, gpu=1, priority_class="high")
    conf = make_conf("enqueue, allocate, backfill")
    for _ in range(3):
        c.cycle(conf)
    assert c.sim.evicted == [] and c.sim.bound("high") == {}
