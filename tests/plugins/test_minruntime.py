"""minruntime: a running job is no victim of any evicting action before it has run its minimum runtime.

A rule beyond Volcano's (KAI-Scheduler's minruntime; Volcano's cdp per pod): the minimum comes from the pods'
`volcano-py.io/min-runtime`, else the plugin's `queueMinRuntime` for the job's queue, else its `minRuntime`, and
runs from the job's start (its first pod's PodScheduled time). Each scenario is also run without the plugin, where
the same victim goes at once: the rule, not the scenario, keeps it.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from scheduler.api import reasons as R
from scheduler.api.decision import Status
from scheduler.cycle import conf_from_text
from scheduler.framework.conf import SchedulerConf
from scheduler.framework.conf_values import ConfError
from scheduler.plugins.minruntime import ANNOTATION
from scheduler.report.plain import plain
from scheduler.testing import ClusterBuilder, cluster, conf_from_tiers, pod_object

MINUTE = 60.0


def preempt_conf(minruntime: dict[str, Any] | None, *, actions: str = "enqueue, allocate, preempt, backfill",
                 second: tuple[Any, ...] = ("predicates", "proportion", "nodeorder")) -> SchedulerConf:
    first: list[Any] = ["priority", {"name": "gang", "enablePreemptable": False}, "conformance"]
    if minruntime is not None:
        first.append({"name": "minruntime", "arguments": minruntime})
    return conf_from_tiers(first, [{"name": "drf", "enablePreemptable": False}, *second], actions=actions,
                           configurations={"allocate": {"starvationThresholdSeconds": -1}})


def add_job(c: ClusterBuilder, name: str, replicas: int, *, queue: str = "default", priority: str = "low",
            annotations: dict[str, str] | None = None, gpu: int = 1) -> None:
    c.sim.add_podgroup({"metadata": {"name": name, "namespace": "default"},
                        "spec": {"minMember": replicas, "queue": queue, "priorityClassName": priority}})
    for i in range(replicas):
        pod = pod_object(f"{name}-{i}", group=name, gpu=gpu, priority_class=priority)
        pod["metadata"].setdefault("annotations", {}).update(annotations or {})
        c.sim.add_pod(pod)


def filled(conf: SchedulerConf, annotations: dict[str, str] | None = None) -> ClusterBuilder:
    """One node of 4 GPUs held by one low-priority gang `run` (4 pods, each annotated with `annotations`)."""
    c = cluster().priority_class("low", 10).priority_class("high", 1000).node("n0", gpu=4)
    add_job(c, "run", 4, annotations=annotations)
    c.cycle(conf)
    return c


def evict_after(conf: SchedulerConf, wait: float, annotations: dict[str, str] | None = None) -> list[str]:
    c = filled(conf, annotations)
    bound = c.sim.pods["default/run-0"].bound_at
    assert bound is not None
    c.sim.now = bound + wait
    add_job(c, "urgent", 2, priority="high")
    c.cycle(conf)
    return list(c.sim.evicted)


def test_a_job_within_the_default_minimum_runtime_is_no_victim_and_is_one_once_older() -> None:
    conf = preempt_conf({"minRuntime": "10m"})
    assert evict_after(conf, 9 * MINUTE) == []
    assert len(evict_after(conf, 10 * MINUTE)) == 2  # start + 10m is not after now: no longer protected
    assert len(evict_after(preempt_conf(None), 1 * MINUTE)) == 2  # the rule off: the same victims go at once


def test_the_queue_setting_overrides_the_default_and_the_job_annotation_overrides_both() -> None:
    queue_conf = preempt_conf({"minRuntime": "1m", "queueMinRuntime": {"default": "30m"}})
    assert evict_after(queue_conf, 20 * MINUTE) == []
    assert len(evict_after(queue_conf, 30 * MINUTE)) == 2
    # the job asks for 5m: it overrides the queue's 30m (both ways: shorter here)
    assert len(evict_after(queue_conf, 6 * MINUTE, {ANNOTATION: "5m"})) == 2
    # a job's value above maxMinRuntime is taken as maxMinRuntime
    capped = preempt_conf({"maxMinRuntime": "1h"})
    assert evict_after(capped, 59 * MINUTE, {ANNOTATION: "100h"}) == []
    assert len(evict_after(capped, 60 * MINUTE, {ANNOTATION: "100h"})) == 2


def test_listed_without_arguments_only_an_annotated_job_is_protected() -> None:
    conf = preempt_conf({})
    assert len(evict_after(conf, 1.0)) == 2
    assert evict_after(conf, 1.0, {ANNOTATION: "2m"}) == []


@pytest.mark.parametrize("value", ["soon", "-5m", "1d", "", "9" * 80])
def test_an_unreadable_or_negative_annotation_is_ignored_with_one_log_line(
        value: str, caplog: pytest.LogCaptureFixture) -> None:
    conf = preempt_conf({})
    assert len(evict_after(conf, 1.0, {ANNOTATION: value})) == 2
    assert sum("volcano-py.io/min-runtime" in r.getMessage() for r in caplog.records) == 1


def test_cdps_cooldown_annotation_is_a_minimum_runtime_per_pod() -> None:
    conf = preempt_conf({})
    cooled = {"volcano.sh/cooldown-time": "3m"}
    assert evict_after(conf, 2 * MINUTE, cooled) == []
    assert len(evict_after(conf, 3 * MINUTE, cooled)) == 2
    assert len(evict_after(preempt_conf({"cooldown": False}), 2 * MINUTE, cooled)) == 2


@pytest.mark.parametrize(("key", "value"), [
    ("minRuntime", "-1m"), ("minRuntime", "169h"), ("minRuntime", "ten minutes"), ("maxMinRuntime", "1000h"),
    ("queueMinRuntime", "5m"), ("queueMinRuntime", {"q": "forever"}),
])
def test_arguments_out_of_bounds_reject_the_conf(key: str, value: object) -> None:
    plugin = {"name": "minruntime", "arguments": {key: value}}
    text = yaml.safe_dump({"actions": "allocate, preempt", "tiers": [{"plugins": [{"name": "gang"}, plugin]}]})
    with pytest.raises(ConfError, match=key):
        conf_from_text(text)


def test_the_waiting_job_is_told_which_job_was_kept_and_for_how_long() -> None:
    conf = preempt_conf({"queueMinRuntime": {"default": "10m"}})
    c = filled(conf)
    bound = c.sim.pods["default/run-0"].bound_at
    assert bound is not None
    c.sim.now = bound + 4 * MINUTE
    add_job(c, "urgent", 2, priority="high")
    result = c.cycle(conf)
    assert c.sim.evicted == []
    [status] = [s for s in result.podgroups if s.job == "default/urgent"]
    assert isinstance(status.decision, Status)
    protected = [r for r in status.decision.reasons if isinstance(r, R.MinRuntimeProtected)]
    assert protected == [R.MinRuntimeProtected(1, "default/run", 6 * MINUTE, 10 * MINUTE, R.MIN_RUNTIME_QUEUE)]
    assert "minimum runtime of 600s; 360s were left" in plain(protected[0])
    assert R.from_json(protected[0].to_json()) == protected[0]


def _reclaim_conf(minruntime: dict[str, Any] | None) -> SchedulerConf:
    first: list[Any] = ["priority", "gang", "conformance"]
    if minruntime is not None:
        first.append({"name": "minruntime", "arguments": minruntime})
    return conf_from_tiers(first, [{"name": "drf", "enablePreemptable": False}, "predicates",
                                   {"name": "proportion", "enableReclaimable": False}, "nodeorder"],
                           actions="enqueue, allocate, reclaim, backfill",
                           configurations={"allocate": {"starvationThresholdSeconds": -1}})


def test_reclaim_spares_another_queues_job_within_its_queues_minimum_runtime() -> None:
    def reclaimed(conf: SchedulerConf, wait: float) -> list[str]:
        c = cluster().node("n0", gpu=4)
        c.queue("batch").queue("team")
        c.sim.add_podgroup({"metadata": {"name": "fill", "namespace": "default"},
                            "spec": {"minMember": 1, "queue": "batch"}})
        for i in range(4):
            c.sim.add_pod(pod_object(f"fill-{i}", group="fill", gpu=1))
        c.cycle(conf)
        bound = c.sim.pods["default/fill-0"].bound_at
        assert bound is not None
        c.sim.now = bound + wait
        c.job("late", queue="team", replicas=2, min_available=2, gpu=1)
        c.cycle(conf)
        return list(c.sim.evicted)

    conf = _reclaim_conf({"queueMinRuntime": {"batch": "15m"}})
    assert reclaimed(conf, 14 * MINUTE) == []
    assert len(reclaimed(conf, 15 * MINUTE)) == 2
    assert len(reclaimed(_reclaim_conf(None), 1 * MINUTE)) == 2
