"""Closing a queue that still runs a job, on the real apiserver (issue 22): the scheduler and the controllers as
processes, kwok finishing the pods.

The queue is `Closing` while a PodGroup in it is live (Volcano's controllers/queue/state/closing.go: Closing
until its PodGroup list is empty), then `Closed`. Meanwhile the scheduler admits nothing from it (enqueue: only
an Open queue's jobs leave Pending), so a job submitted to it gets no pods; its running job keeps its pods.
"""

from __future__ import annotations

import uuid

from controlplane import COMPLETE_ANNOTATION, wait_for
from vcjob_cluster import BATCH, SCHED, TIMEOUT, pods_of, queue_state, running, task, vcjob_cluster, wait_running

__all__ = ["vcjob_cluster"]  # the fixture
BUS = "bus.volcano.sh"


def close_queue(custom, namespace: str, queue: str) -> None:
    """A `CloseQueue` Command, as `vcctl queue operate -a close` writes it."""
    custom.create_namespaced_custom_object(BUS, "v1alpha1", namespace, "commands", {
        "apiVersion": f"{BUS}/v1alpha1", "kind": "Command", "metadata": {"name": f"close-{uuid.uuid4().hex[:6]}"},
        "action": "CloseQueue", "target": {"apiVersion": f"{SCHED}/v1beta1", "kind": "Queue", "name": queue}})


def queue_status(custom, queue: str) -> dict:
    return custom.get_cluster_custom_object(SCHED, "v1beta1", "queues", queue).get("status") or {}


def podgroup_of(custom, namespace: str, job: str) -> dict | None:
    items = custom.list_namespaced_custom_object(SCHED, "v1beta1", namespace, "podgroups")["items"]
    owned = [pg for pg in items if any(o.get("name") == job for o in pg["metadata"].get("ownerReferences") or ())]
    return owned[0] if owned else None


def job_phase(custom, namespace: str, job: str) -> str | None:
    status = custom.get_namespaced_custom_object(BATCH, "v1alpha1", namespace, "jobs", job).get("status") or {}
    return (status.get("state") or {}).get("phase")


def test_a_queue_closed_under_a_running_job_is_closing_until_it_finishes_and_admits_nothing_meanwhile(
    vcjob_cluster, core_v1, custom, namespace
):
    vcjob_cluster.nodes(1, gpus=4)
    queue = vcjob_cluster.queue("closing")
    vcjob_cluster.job("busy", queue, [task("worker", 2)], 2)
    busy = wait_running(core_v1, namespace, "busy", 2)

    close_queue(custom, namespace, queue)
    wait_for(lambda: queue_state(custom, queue) == "Closing", TIMEOUT, interval=0.2, what="queue Closing")

    # A job submitted now: the controller makes its PodGroup, the scheduler leaves it Pending, no pod is made
    # (the scheduler has seen it once it wrote the PodGroup's Unschedulable condition).
    vcjob_cluster.job("late", queue, [task("worker", 1)], 1)

    def held() -> dict | None:
        pg = podgroup_of(custom, namespace, "late")
        status = (pg or {}).get("status") or {}
        seen = any(c.get("type") == "Unschedulable" for c in status.get("conditions") or ())
        return status if seen else None

    status = wait_for(held, TIMEOUT, interval=0.2, what="late's PodGroup considered and held")
    assert status.get("phase", "Pending") == "Pending", status
    assert pods_of(core_v1, namespace, "late") == []
    assert set(running(core_v1, namespace, "busy")) == set(busy), "the running job keeps its pods"
    assert queue_state(custom, queue) == "Closing"

    # busy finishes; late's PodGroup is still in the queue, so the queue stays Closing (Volcano counts every
    # PodGroup of the queue) until late goes too.
    for pod in pods_of(core_v1, namespace, "busy"):
        core_v1.patch_namespaced_pod(pod["metadata"]["name"], namespace,
                                     {"metadata": {"annotations": {COMPLETE_ANNOTATION: "Succeeded"}}})
    wait_for(lambda: job_phase(custom, namespace, "busy") == "Completed", TIMEOUT, interval=0.2,
             what="busy Completed")
    counts = wait_for(lambda: (s := queue_status(custom, queue)) and s.get("running") == 0 and s, TIMEOUT,
                      interval=0.2, what="the queue counting no running PodGroup")
    assert (counts.get("state"), counts.get("pending")) == ("Closing", 1), counts
    assert pods_of(core_v1, namespace, "late") == []

    custom.delete_namespaced_custom_object(BATCH, "v1alpha1", namespace, "jobs", "late")
    wait_for(lambda: queue_state(custom, queue) == "Closed", TIMEOUT, interval=0.2, what="queue Closed")
    assert pods_of(core_v1, namespace, "late") == []
