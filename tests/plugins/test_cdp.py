"""cdp (cooldown protection): a Running pod is not preempted until its PodScheduled time plus its
`volcano.sh/cooldown-time`, as Volcano's cdp plugin (pkg/scheduler/plugins/cdp/cdp.go).

The value is a Go duration, read once when the pod is read: the label before the annotation (a label Go cannot
read is no cooldown, even beside a good annotation, with a reason); the PodScheduled time comes from the pod's
conditions. Then seeded random clusters whose low-priority jobs started at different times with different
cooldowns: with cdp, no pod is evicted within its cooldown; without it, some of the same clusters lose one.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from scheduler.api import fields as F
from scheduler.api.convert import task_from_pod
from scheduler.api.phases import TaskStatus
from scheduler.framework.conf import SchedulerConf
from scheduler.plugins.cdp import cooling_down
from scheduler.testing import ClusterBuilder, cluster, conf_from_tiers, pod_object

KEY = F.COOLDOWN


def _pod(labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
         scheduled: str | None = "2026-01-01T00:00:00Z") -> dict[str, Any]:
    pod = pod_object("p", namespace="ns", cpu="1")
    pod["metadata"]["labels"] = labels or {}
    pod["metadata"]["annotations"] = annotations or {}
    pod["spec"]["nodeName"] = "n"
    pod["status"] = {"phase": "Running"}
    if scheduled is not None:
        pod["status"]["conditions"] = [{"type": "PodScheduled", "status": "True", "lastTransitionTime": scheduled}]
    return pod


@pytest.mark.parametrize(("text", "seconds"), [
    ("90s", 90.0), ("1h30m", 5400.0), ("1.5h", 5400.0), ("300ms", 0.3), ("-5m", -300.0), ("0", 0.0),
    ("2h45m10.5s", 9910.5), ("1µs", 1e-6),
])
def test_a_go_duration_is_read_as_go_reads_it(text: str, seconds: float) -> None:
    sink: list[F.FieldInvalid] = []
    task = task_from_pod(_pod(annotations={KEY: text}), sink=sink)
    assert task.cooldown == pytest.approx(seconds) and sink == []


@pytest.mark.parametrize("text", ["90", "", "1d", "1h 30m", "abc", "1e3s", "١s", "9999999999999h"])
def test_a_value_go_refuses_is_no_cooldown_with_a_reason(text: str) -> None:
    sink: list[F.FieldInvalid] = []
    task = task_from_pod(_pod(annotations={KEY: text}), sink=sink)
    assert task.cooldown is None
    assert [(r.path, r.fallback) for r in sink] == [(f"metadata.annotations[{KEY}]", "no cooldown (not protected)")]


def test_the_label_comes_before_the_annotation_even_when_go_cannot_read_it() -> None:
    assert task_from_pod(_pod({KEY: "1h"}, {KEY: "1m"})).cooldown == 3600.0
    assert task_from_pod(_pod({"app": "x"}, {KEY: "1m"})).cooldown == 60.0
    sink: list[F.FieldInvalid] = []
    assert task_from_pod(_pod({KEY: "forever"}, {KEY: "1m"}), sink=sink).cooldown is None
    assert [r.path for r in sink] == [f"metadata.labels[{KEY}]"]


def test_the_podscheduled_time_is_read_for_a_pod_with_a_cooldown_or_on_a_node() -> None:
    task = task_from_pod(_pod(annotations={KEY: "1m"}))
    assert task.scheduled_at == 1_767_225_600.0  # 2026-01-01T00:00:00Z
    assert task_from_pod(_pod()).scheduled_at == 1_767_225_600.0  # on a node: minruntime measures from it
    pending = _pod()
    del pending["spec"]["nodeName"]
    assert task_from_pod(pending).scheduled_at is None
    assert task_from_pod(_pod(annotations={KEY: "1m"}, scheduled=None)).scheduled_at is None


def test_protection_ends_at_scheduled_plus_cooldown_and_needs_running() -> None:
    task = task_from_pod(_pod(annotations={KEY: "1m"}))
    start = 1_767_225_600.0
    assert cooling_down(task, start + 59.0)
    assert not cooling_down(task, start + 60.0)  # Volcano: protected while scheduled + cooldown is After(now)
    task.status = TaskStatus.BOUND
    assert not cooling_down(task, start)
    no_time = task_from_pod(_pod(annotations={KEY: "1m"}, scheduled=None))
    assert not cooling_down(no_time, 0.0)


# ---- seeded clusters -----------------------------------------------------------------------------------------

COOLDOWNS = ("30s", "2m", "10m", "1h", "-1m", "0", "soon", None)


def conf(*, cdp: bool) -> SchedulerConf:
    first: list[Any] = ["priority", {"name": "gang", "enablePreemptable": False}, "conformance"]  # lone pods go
    if cdp:
        first.append("cdp")
    return conf_from_tiers(first, [{"name": "drf", "enablePreemptable": False}, "predicates", "proportion",
                                   "nodeorder"], actions="enqueue, allocate, preempt, backfill")


def build(seed: int, *, cdp: bool) -> tuple[ClusterBuilder, dict[str, float | None]]:
    """One node of 4 GPUs filled by low-priority pods that start at different times, each with a random cooldown
    (label or annotation, some unreadable); returns when each pod's cooldown ends (None: never protected)."""
    rng = random.Random(seed)
    c = cluster().priority_class("low", 10).priority_class("high", 1000).node("n0", gpu=4)
    for j in range(4):
        c.sim.now = j * rng.choice((10, 60, 300))
        name = f"low{j}"
        c.sim.add_podgroup({"metadata": {"name": name, "namespace": "default"},
                            "spec": {"minMember": 1, "priorityClassName": "low"}})
        pod = pod_object(f"{name}-0", group=name, gpu=1, priority_class="low")
        cooldown = rng.choice(COOLDOWNS)
        if cooldown is not None:
            pod["metadata"]["labels" if rng.random() < 0.5 else "annotations"][KEY] = cooldown
        c.sim.add_pod(pod)
        c.cycle(conf(cdp=cdp))
    ends = {}
    for key, pod in c.sim.pods.items():
        task = pod.task
        assert task.scheduled_at == pod.bound_at or task.cooldown is None
        ends[key] = (task.scheduled_at + task.cooldown
                     if task.cooldown is not None and task.scheduled_at is not None else None)
    return c, ends


def preempt(seed: int, *, cdp: bool) -> tuple[float, dict[str, float | None], list[str]]:
    c, ends = build(seed, cdp=cdp)
    rng = random.Random(seed + 10_000)
    c.sim.now += rng.choice((5, 60, 400, 4000))
    c.job("high", gpu=rng.randint(1, 2), priority_class="high")
    c.cycle(conf(cdp=cdp))
    return c.sim.now, ends, list(c.sim.evicted)


SEEDS = range(40)


def test_with_cdp_no_pod_is_evicted_within_its_cooldown_and_without_it_some_are() -> None:
    within_without = 0
    for seed in SEEDS:
        now, ends, evicted = preempt(seed, cdp=True)
        for key in evicted:
            end = ends[key]
            assert end is None or end <= now, (seed, key, end, now)
        now, ends, evicted = preempt(seed, cdp=False)
        within_without += any((end := ends[key]) is not None and end > now for key in evicted)
    assert within_without >= 5, within_without


def _reclaim_conf(*, cdp: bool) -> SchedulerConf:
    # The starvation guard off: a gang waiting past its threshold would reserve (pipeline) instead of reclaiming.
    return conf_from_tiers(["priority", "gang", "conformance", *(["cdp"] if cdp else [])],
                           [{"name": "drf", "enablePreemptable": False}, "predicates",
                            {"name": "proportion", "enableReclaimable": False}, "nodeorder"],
                           actions="enqueue, allocate, reclaim, backfill",
                           configurations={"allocate": {"starvationThresholdSeconds": -1}})


def _filled(conf: SchedulerConf) -> ClusterBuilder:
    c = cluster().node("n0", gpu=4)
    c.queue("batch").queue("team")
    c.sim.add_podgroup({"metadata": {"name": "fill", "namespace": "default"},
                        "spec": {"minMember": 1, "queue": "batch"}})
    for i in range(4):
        pod = pod_object(f"fill-{i}", group="fill", gpu=1)
        pod["metadata"]["labels"] = {KEY: "1h"}
        c.sim.add_pod(pod)
    c.cycle(conf)
    return c


def test_reclaim_waits_for_the_cooldown_to_end() -> None:
    """A queue's pods, each with a one-hour cooldown (label): another queue's job arriving a minute after they
    were bound reclaims nothing with cdp until the hour is over; without cdp it reclaims at once."""
    c = _filled(_reclaim_conf(cdp=True))
    bound = c.sim.pods["default/fill-0"].bound_at
    assert bound is not None
    c.sim.now = bound + 60.0
    c.job("late", queue="team", replicas=2, min_available=2, gpu=1)
    c.cycles(3, _reclaim_conf(cdp=True))
    assert c.sim.evicted == []
    c.sim.now = bound + 3600.0  # scheduled + 1h is not after now: the cooldown is over
    c.cycle(_reclaim_conf(cdp=True))
    assert len(c.sim.evicted) == 2

    c = _filled(_reclaim_conf(cdp=False))
    c.sim.now += 60.0
    c.job("late", queue="team", replicas=2, min_available=2, gpu=1)
    c.cycle(_reclaim_conf(cdp=False))
    assert len(c.sim.evicted) == 2
