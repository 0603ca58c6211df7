"""Minimum runtime on the real apiserver (issue 35): a high-priority gang does not evict a job younger than its
minimum runtime, and does once it is older.

Volcano's gang-eviction conf (examples/sim/gang-eviction.conf) with volcano-py's `minruntime` plugin added to the
first tier, no arguments: only a job that asks for a minimum runtime (its pods' `volcano-py.io/min-runtime`), or
whose Queue does (its `volcano-py.io/preempt-min-runtime`), is protected. The scheduler and the Job controller
run as processes; kwok runs the pods.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from controlplane import wait_for
from vcjob_cluster import (
    SCHED,
    TIMEOUT,
    evicted_uids,
    pods_of,
    scheduler_events,
    started_at,
    task,
    vcjob_cluster,
    wait_running,
)

from scheduler.api import reasons as R
from scheduler.api.decision import REASONS_ANNOTATION, Status
from scheduler.api.min_runtime import QUEUE_PREEMPT_MIN_RUNTIME
from scheduler.api.timestamps import parse_time
from scheduler.plugins.minruntime import ANNOTATION

__all__ = ["vcjob_cluster"]  # the fixture
REPO = Path(__file__).resolve().parents[2]
MIN_RUNTIME = 20.0  # seconds: long enough for the scheduler to be seen refusing, short for the test
CONF = (REPO / "examples" / "sim" / "gang-eviction.conf").read_text().replace(
    "  - name: conformance\n", "  - name: conformance\n  - name: minruntime\n", 1)


def protected_reason(custom, namespace: str, job: str) -> R.MinRuntimeProtected | None:
    """The MinRuntimeProtected reason the scheduler published on the job's PodGroup, if any."""
    for pg in custom.list_namespaced_custom_object(SCHED, "v1beta1", namespace, "podgroups")["items"]:
        if any(o.get("name") == job for o in pg["metadata"].get("ownerReferences") or ()):
            text = (pg["metadata"].get("annotations") or {}).get(REASONS_ANNOTATION)
            if not text:
                return None
            status = Status.from_json(json.loads(text))
            return next((r for r in status.reasons if isinstance(r, R.MinRuntimeProtected)), None)
    return None


@pytest.mark.scheduler_conf(CONF)
def test_a_high_priority_gang_waits_for_a_young_jobs_minimum_runtime_then_evicts_it(
    vcjob_cluster, core_v1, custom, namespace
):
    """1 node x 2 GPUs held by `young` (2 x 1 GPU, minAvailable 2, priority 10, min-runtime 20s). `urgent` (2 x 1
    GPU, minAvailable 2, priority 1000) arrives at once: gangpreempt would take young's whole bundle, but young
    has not run 20 s, so the scheduler evicts nothing and says why on urgent's PodGroup. Once young is 20 s old,
    its pods are evicted and urgent runs."""
    vcjob_cluster.nodes(1, gpus=2)
    queue = vcjob_cluster.queue("minrt")
    low, high = (vcjob_cluster.priority_class(n, v) for n, v in (("low", 10), ("high", 1000)))
    vcjob_cluster.job("young", queue, [task("worker", 2, annotations={ANNOTATION: f"{MIN_RUNTIME:g}s"})], 2,
                      priorityClassName=low)
    young = wait_running(core_v1, namespace, "young", 2)
    start = started_at(pods_of(core_v1, namespace, "young"))

    vcjob_cluster.job("urgent", queue, [task("worker", 2)], 2, priorityClassName=high)
    reason = wait_for(lambda: protected_reason(custom, namespace, "urgent"), TIMEOUT, interval=0.2,
                      what="urgent's PodGroup saying young is within its minimum runtime")
    assert evicted_uids(core_v1, namespace) == set(), "no pod of young is evicted within its minimum runtime"
    assert reason.job.startswith(f"{namespace}/young"), reason  # the Job controller's PodGroup of young
    assert reason.source == R.MIN_RUNTIME_JOB and reason.min_runtime_seconds == MIN_RUNTIME
    assert 0 < reason.remaining_seconds <= MIN_RUNTIME

    wait_running(core_v1, namespace, "urgent", 2)
    victims = wait_for(lambda: (v := evicted_uids(core_v1, namespace)) and len(v) >= 2 and v, TIMEOUT,
                       interval=0.2, what="2 Evict events")
    assert victims == set(young), "young's whole bundle, once it is old enough"
    evicted_at = min(parse_time(e.get("eventTime") or e.get("firstTimestamp"))
                     for e in scheduler_events(core_v1, namespace, "Evict"))
    assert evicted_at >= start + MIN_RUNTIME, (evicted_at - start, MIN_RUNTIME)


@pytest.mark.scheduler_conf(CONF)
def test_a_queues_own_minimum_runtime_annotation_keeps_its_young_job_then_lets_it_go(
    vcjob_cluster, core_v1, custom, namespace
):
    """The same, with the minimum set on the Queue (`volcano-py.io/preempt-min-runtime: 20s`, gangpreempt being an
    eviction inside the queue; api/min_runtime.py) and no annotation on the pods: the scheduler reads it from the
    Queue object, says so (source `queue-annotation`), and evicts young once it is 20 s old."""
    vcjob_cluster.nodes(1, gpus=2)
    queue = vcjob_cluster.queue("minrtq", annotations={QUEUE_PREEMPT_MIN_RUNTIME: f"{MIN_RUNTIME:g}s"})
    low, high = (vcjob_cluster.priority_class(n, v) for n, v in (("low", 10), ("high", 1000)))
    vcjob_cluster.job("young", queue, [task("worker", 2)], 2, priorityClassName=low)
    young = wait_running(core_v1, namespace, "young", 2)
    start = started_at(pods_of(core_v1, namespace, "young"))

    vcjob_cluster.job("urgent", queue, [task("worker", 2)], 2, priorityClassName=high)
    reason = wait_for(lambda: protected_reason(custom, namespace, "urgent"), TIMEOUT, interval=0.2,
                      what="urgent's PodGroup saying young is within its queue's minimum runtime")
    assert evicted_uids(core_v1, namespace) == set()
    assert reason.source == R.MIN_RUNTIME_QUEUE_ANNOTATION and reason.min_runtime_seconds == MIN_RUNTIME

    wait_running(core_v1, namespace, "urgent", 2)
    victims = wait_for(lambda: (v := evicted_uids(core_v1, namespace)) and len(v) >= 2 and v, TIMEOUT,
                       interval=0.2, what="2 Evict events")
    assert victims == set(young)
    evicted_at = min(parse_time(e.get("eventTime") or e.get("firstTimestamp"))
                     for e in scheduler_events(core_v1, namespace, "Evict"))
    assert evicted_at >= start + MIN_RUNTIME, (evicted_at - start, MIN_RUNTIME)
