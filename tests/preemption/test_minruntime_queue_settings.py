"""minruntime: a queue's own minimum runtime, from its annotations (api/min_runtime.py; KAI-Scheduler's queue-level
`preempt-min-runtime` / `reclaim-min-runtime`), honoured by every evicting action through the one victim filter.

- read at the edge: a Go duration from 0s to 168h; a bad one gives a FieldInvalid reason, reads as not set, and is
  logged once;
- precedence: the job's pods' annotation > the queue's annotations (the eviction's own kind first: reclaim for
  another queue's evictions, preempt for the queue's own; then `min-runtime`) > the plugin's queueMinRuntime >
  its minRuntime; `0s` set on the queue means none for it;
- preempt, gangpreempt, reclaim, gangreclaim and consolidate each keep a job of an annotated queue within its
  minimum runtime, and take it once older; without the annotation the same victims go at once.
"""

from __future__ import annotations

import logging
import random
import threading
from typing import Any

import pytest
from consolidate_cases import conf as consolidate_conf, running

from scheduler.api import reasons as R
from scheduler.api.convert import queue_from_object
from scheduler.api.decision import Status
from scheduler.api.min_runtime import QUEUE_MIN_RUNTIME, QUEUE_PREEMPT_MIN_RUNTIME, QUEUE_RECLAIM_MIN_RUNTIME
from scheduler.api.reasons import FieldInvalid
from scheduler.cache.parse import ParseCache
from scheduler.framework.conf import SchedulerConf
from scheduler.plugins.minruntime import ANNOTATION as JOB_ANNOTATION
from scheduler.testing import ClusterBuilder, cluster, conf_from_tiers, pod_object

MINUTE = 60.0
GPU = "nvidia.com/gpu"
NO_STARVING = {"allocate": {"starvationThresholdSeconds": -1}}


def queue(name: str, annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if annotations:
        meta["annotations"] = dict(annotations)
    return {"metadata": meta, "spec": {"weight": 1, "reclaimable": True, **spec}, "status": {"state": "Open"}}


# ---- read at the edge -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "seconds"), [("10m", 600.0), ("0s", 0.0), ("0", 0.0), ("1h30m", 5400.0),
                                                ("168h", 604800.0)])
def test_a_readable_annotation_is_read_in_seconds(value: str, seconds: float) -> None:
    for key, attr in ((QUEUE_MIN_RUNTIME, "any"), (QUEUE_PREEMPT_MIN_RUNTIME, "preempt"),
                      (QUEUE_RECLAIM_MIN_RUNTIME, "reclaim")):
        sink: list[FieldInvalid] = []
        read = queue_from_object(queue("q", {key: value}), creation=0.0, sink=sink).min_runtime
        assert getattr(read, attr) == seconds and not sink


@pytest.mark.parametrize("value", ["-1m", "-1s", "169h", "168h0.001s", "1e9h", "2562048h", "soon", "10", "١٠m",
                                   "9" * 80, ""])
def test_a_bad_annotation_gives_a_reason_and_reads_as_not_set(value: str) -> None:
    sink: list[FieldInvalid] = []
    read = queue_from_object(queue("q", {QUEUE_MIN_RUNTIME: value, QUEUE_RECLAIM_MIN_RUNTIME: "5m"}),
                             creation=0.0, sink=sink).min_runtime
    assert (read.any, read.preempt, read.reclaim) == (None, None, 300.0)  # the good one next to it is kept
    assert [r.path for r in sink] == [f"metadata.annotations[{QUEUE_MIN_RUNTIME}]"]
    assert sink[0].fallback == "not set (the minruntime plugin's arguments)"


def test_a_bad_annotation_is_logged_once_not_every_cycle(caplog: pytest.LogCaptureFixture) -> None:
    cache = ParseCache(frozenset({"volcano-py"}), threading.Lock(), lambda *a: None)
    bad = queue("q", {QUEUE_PREEMPT_MIN_RUNTIME: "forever"})
    bad["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    with caplog.at_level(logging.WARNING):
        for version in range(3):  # new versions of the object, the same problem
            bad["metadata"]["resourceVersion"] = str(version + 1)
            (read,), _ = cache.queues([bad])
            assert read.min_runtime.preempt is None
    lines = [r for r in caplog.records if QUEUE_PREEMPT_MIN_RUNTIME in r.getMessage()]
    assert len(lines) == 1


# ---- precedence ---------------------------------------------------------------------------------------------------


def preempt_or_reclaim_conf(action: str, minruntime: dict[str, Any] | None) -> SchedulerConf:
    first: list[Any] = ["priority", {"name": "gang", "enablePreemptable": False}, "conformance"]
    if minruntime is not None:
        first.append({"name": "minruntime", "arguments": minruntime})
    return conf_from_tiers(first, [{"name": "drf", "enablePreemptable": False}, "predicates",
                                   {"name": "proportion", "enableReclaimable": False}, "nodeorder"],
                           actions=f"enqueue, allocate, {action}, backfill", configurations=NO_STARVING)


def gang_conf(minruntime: dict[str, Any] | None) -> SchedulerConf:
    first: list[Any] = ["priority", {"name": "gang", "enablePreemptable": False}, "conformance"]
    if minruntime is not None:
        first.append({"name": "minruntime", "arguments": minruntime})
    return conf_from_tiers(first, [{"name": "drf", "enablePreemptable": False}, "predicates", "capacity",
                                   "nodeorder", "binpack"],
                           actions="allocate, backfill, gangreclaim, gangpreempt", configurations=NO_STARVING)


def conf_for(action: str, minruntime: dict[str, Any] | None) -> SchedulerConf:
    return gang_conf(minruntime) if action.startswith("gang") else preempt_or_reclaim_conf(action, minruntime)


def filled(action: str, annotations: dict[str, str], job_annotation: str | None = None
           ) -> tuple[ClusterBuilder, str]:
    """8 GPUs held by one low-priority job `run` (8 pods of one GPU, minMember 1) in the victims' queue (annotated
    with `annotations`), bound at t=0; returns the builder and the queue a preemptor of `action` goes to."""
    c = cluster().priority_class("low", 10).priority_class("high", 1000)
    c.nodes("n", 2, gpu=4, cpu="64", memory="256Gi")
    if action in ("preempt", "gangpreempt"):
        victims = own = "default"
        c.sim.add_queue(queue("default", annotations))
    elif action == "reclaim":
        victims, own = "batch", "team"
        c.sim.add_queue(queue("batch", annotations))
        c.sim.add_queue(queue("team"))
    else:
        victims, own = "q2", "q1"
        c.sim.add_queue(queue("q1", deserved={GPU: "8", "cpu": "32", "memory": "128Gi"}))
        c.sim.add_queue(queue("q2", annotations, deserved={"cpu": "32", "memory": "128Gi"}))
    c.sim.add_podgroup({"metadata": {"name": "run", "namespace": "default"},
                        "spec": {"minMember": 1, "queue": victims, "priorityClassName": "low"}})
    for i in range(8):
        pod = pod_object(f"run-{i}", group="run", gpu=1, priority_class="low")
        if job_annotation is not None:
            pod["metadata"]["annotations"][JOB_ANNOTATION] = job_annotation
        c.sim.add_pod(pod)
    c.cycle(conf_for(action, None))
    assert len(c.sim.bound("run")) == 8
    return c, own


def urgent_at(action: str, at: float, annotations: dict[str, str], plugin: dict[str, Any] | None = None,
              job_annotation: str | None = None) -> tuple[list[str], list[R.MinRuntimeProtected]]:
    """The evictions (2 pods for preempt and reclaim; the gang actions take the job down to its minMember) when a
    high-priority job of 2 GPUs arrives `at` seconds after `run` started, and the
    MinRuntimeProtected reasons it is held with."""
    c, own = filled(action, annotations, job_annotation)
    c.sim.now = at
    c.job("urgent", queue=own, replicas=2, gpu=1, priority_class="high")
    result = c.cycle(conf_for(action, {} if plugin is None else plugin))
    protected = [r for s in result.podgroups if s.job == "default/urgent" and isinstance(s.decision, Status)
                 for r in s.decision.reasons if isinstance(r, R.MinRuntimeProtected)]
    return list(c.sim.evicted), protected


def expected_minimum(action: str, job: str | None, queue_any: str | None, queue_kind: dict[str, str],
                     plugin: dict[str, Any]) -> tuple[float, str]:
    """The documented rule, from the values the test drew (each a whole number of minutes, or 0s)."""
    def minutes(text: str) -> float:
        return 0.0 if text == "0s" else float(text.rstrip("m")) * MINUTE

    if job is not None:
        return minutes(job), R.MIN_RUNTIME_JOB
    own = queue_kind.get("reclaim" if action in ("reclaim", "gangreclaim") else "preempt")
    if own is not None:
        return minutes(own), R.MIN_RUNTIME_QUEUE_ANNOTATION
    if queue_any is not None:
        return minutes(queue_any), R.MIN_RUNTIME_QUEUE_ANNOTATION
    victims = {"preempt": "default", "gangpreempt": "default", "reclaim": "batch", "gangreclaim": "q2"}[action]
    if victims in plugin.get("queueMinRuntime", {}):
        return minutes(plugin["queueMinRuntime"][victims]), R.MIN_RUNTIME_QUEUE
    return minutes(plugin.get("minRuntime", "0s")), R.MIN_RUNTIME_DEFAULT


VALUES = (None, None, "0s", "20m", "30m", "40m")


@pytest.mark.parametrize("action", ["preempt", "reclaim", "gangpreempt", "gangreclaim"])
def test_job_over_queue_annotation_over_the_plugins_queue_setting_over_its_default(action: str) -> None:
    protected_seen = taken_seen = 0
    for seed in range(16):
        rng = random.Random(seed * 7 + len(action))
        job, queue_any = rng.choice(VALUES), rng.choice(VALUES)
        queue_kind = {k: v for k in ("preempt", "reclaim") if (v := rng.choice(VALUES)) is not None}
        victims = {"preempt": "default", "gangpreempt": "default", "reclaim": "batch", "gangreclaim": "q2"}[action]
        plugin: dict[str, Any] = {"minRuntime": rng.choice(("0s", "50m"))}
        if rng.random() < 0.5:
            plugin["queueMinRuntime"] = {victims: rng.choice(("0s", "45m"))}
        annotations = {**({QUEUE_MIN_RUNTIME: queue_any} if queue_any else {}),
                       **({QUEUE_PREEMPT_MIN_RUNTIME: queue_kind["preempt"]} if "preempt" in queue_kind else {}),
                       **({QUEUE_RECLAIM_MIN_RUNTIME: queue_kind["reclaim"]} if "reclaim" in queue_kind else {})}
        minimum, source = expected_minimum(action, job, queue_any, queue_kind, plugin)
        evicted, protected = urgent_at(action, 10 * MINUTE, annotations, plugin, job)
        if minimum > 10 * MINUTE:
            assert evicted == [], (seed, minimum, source)
            assert [(p.min_runtime_seconds, p.source) for p in protected] == [(minimum, source)], seed
            protected_seen += 1
        else:
            assert evicted and not protected, (seed, minimum, source)
            taken_seen += 1
    assert protected_seen >= 3 and taken_seen >= 3, (protected_seen, taken_seen)


# ---- each evicting action honours the queue's setting -------------------------------------------------------------


@pytest.mark.parametrize("action", ["preempt", "reclaim", "gangpreempt", "gangreclaim"])
def test_each_action_keeps_a_job_of_a_queue_with_a_minimum_runtime_and_takes_it_once_older(action: str) -> None:
    ten = {QUEUE_MIN_RUNTIME: "10m"}
    evicted, protected = urgent_at(action, 9 * MINUTE, ten)
    assert evicted == [] and [p.source for p in protected] == [R.MIN_RUNTIME_QUEUE_ANNOTATION]
    assert protected[0].remaining_seconds == pytest.approx(MINUTE)
    assert urgent_at(action, 10 * MINUTE, ten)[0]  # start + 10m is not after now
    assert urgent_at(action, 9 * MINUTE, {})[0]  # the same victims go at once without it


@pytest.mark.parametrize("action", ["preempt", "reclaim", "gangpreempt", "gangreclaim"])
def test_the_kind_specific_setting_is_read_for_its_own_evictions_only(action: str) -> None:
    cross = action in ("reclaim", "gangreclaim")
    mine, other = (QUEUE_RECLAIM_MIN_RUNTIME, QUEUE_PREEMPT_MIN_RUNTIME) if cross else \
        (QUEUE_PREEMPT_MIN_RUNTIME, QUEUE_RECLAIM_MIN_RUNTIME)
    assert urgent_at(action, 5 * MINUTE, {mine: "1h"})[0] == []
    assert urgent_at(action, 5 * MINUTE, {other: "1h"})[0]
    # the specific one, set to 0s, wins over min-runtime: none for this kind of eviction
    assert urgent_at(action, 5 * MINUTE, {mine: "0s", QUEUE_MIN_RUNTIME: "1h"})[0]
    assert urgent_at(action, 5 * MINUTE, {other: "0s", QUEUE_MIN_RUNTIME: "1h"})[0] == []


def scattered(annotations: dict[str, str]) -> ClusterBuilder:
    """consolidate's case: 4 nodes of 8 GPUs each half used by a movable 4-GPU job started at t=0 in the default
    queue (annotated), and a gang of 2 x 8 GPUs that fits only if two of them move."""
    c = cluster().nodes("n", 4, gpu=8)
    c.sim.add_queue(queue("default", annotations))
    for i in range(4):
        running(c, f"small{i}", [f"n{i}"], 4, since=0.0)
    c.job("big", replicas=2, gpu=8)
    c.sim.now = 30 * MINUTE
    return c


def test_consolidate_moves_no_job_of_a_queue_within_its_minimum_runtime() -> None:
    assert not scattered({QUEUE_MIN_RUNTIME: "1h"}).cycle(consolidate_conf(minruntime={})).evictions
    assert len(scattered({QUEUE_MIN_RUNTIME: "20m"}).cycle(consolidate_conf(minruntime={})).evictions) == 2
    # a move is neither a preemption nor a reclaim: only min-runtime is read for it
    for key in (QUEUE_PREEMPT_MIN_RUNTIME, QUEUE_RECLAIM_MIN_RUNTIME):
        assert len(scattered({key: "1h"}).cycle(consolidate_conf(minruntime={})).evictions) == 2
    assert len(scattered({}).cycle(consolidate_conf(minruntime={})).evictions) == 2
