"""The controllers record Volcano's controller metrics (pkg/controllers/metrics, .../job/state/metrics.go) where
Volcano's do: a pod created, a Job reaching Completed, a Queue's PodGroup counts synced, and drop a deleted
object's series."""

from __future__ import annotations

from typing import Any

from fake_api import FakeApi

from scheduler import metrics
from scheduler.api.timestamps import rfc3339
from scheduler.controllers.job import JobController
from scheduler.controllers.queue import QueueController

NOW = 1_800_000_000.0


class StampingApi(FakeApi):
    """Creation timestamps, as the apiserver sets them: 2 s after the Job for every pod."""

    def create(self, obj: Any) -> Any:
        created = super().create(obj)
        if created is not None:
            created["metadata"]["creationTimestamp"] = rfc3339(NOW + 2.0)
        return created


def sample(name: str, **labels: str) -> float:
    return metrics.controllers().registry.get_sample_value(name, labels) or 0.0


def test_a_job_that_creates_pods_and_completes_is_counted() -> None:
    api = StampingApi()
    container = {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
    task = {"name": "w", "replicas": 2, "template": {"spec": {"containers": [container]}}}
    api.put("Job", {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                    "metadata": {"name": "done", "namespace": "ns", "uid": "u1", "creationTimestamp": rfc3339(NOW)},
                    "spec": {"schedulerName": "volcano-py", "queue": "q1",
                             "tasks": [task]}})
    ctl = JobController(api, clock=lambda: NOW + 10.0)  # type: ignore[arg-type]
    latency = "volcano_controller_job_to_pod_creation_latency_milliseconds"
    before = sample(f"{latency}_count"), sample(f"{latency}_sum")
    ctl.reconcile("ns", "done")
    (pg,) = api.of_kind("PodGroup").values()
    pg["status"] = {"phase": "Inqueue"}  # the scheduler admits it
    ctl.reconcile("ns", "done")
    assert sample(f"{latency}_count") - before[0] == 2
    assert sample(f"{latency}_sum") - before[1] == 4000.0  # 2 s each
    for pod in api.of_kind("Pod").values():
        pod["status"] = {"phase": "Succeeded"}
    for _ in range(3):  # Running -> Completing -> Completed, one step a reconcile
        ctl.reconcile("ns", "done")
    assert api.objects[("Job", "ns", "done")]["status"]["state"]["phase"] == "Completed"
    assert sample("volcano_job_completed_phase_count", job_name="ns/done", queue_name="q1") == 1
    ctl.on_job("DELETED", api.objects[("Job", "ns", "done")])
    assert metrics.controllers().registry.get_sample_value(
        "volcano_job_completed_phase_count", {"job_name": "ns/done", "queue_name": "q1"}) is None


class QueueApi:
    def __init__(self) -> None:
        self.status: dict[str, Any] = {"state": "Open"}

    def queue(self, name: str) -> dict[str, Any]:
        return {"metadata": {"name": name}, "spec": {}, "status": dict(self.status)}

    def patch_queue_status(self, name: str, status: dict[str, Any]) -> None:
        self.status = {**self.status, **status}


def test_a_queues_podgroup_counts_are_exported_and_leave_with_the_queue() -> None:
    ctl = QueueController(QueueApi())  # type: ignore[arg-type]
    for name, phase in (("a", "Inqueue"), ("b", "Running"), ("c", "Running")):
        ctl.on_podgroup("ADDED", {"metadata": {"name": name, "namespace": "ns"}, "spec": {"queue": "qm"},
                                  "status": {"phase": phase}})
    assert sample("volcano_queue_pod_group_running_count", queue_name="qm") == 2
    assert sample("volcano_queue_pod_group_inqueue_count", queue_name="qm") == 1
    assert metrics.controllers().registry.get_sample_value(
        "volcano_queue_pod_group_pending_count", {"queue_name": "qm"}) == 0
    ctl.on_queue("DELETED", {"metadata": {"name": "qm"}})
    assert metrics.controllers().registry.get_sample_value(
        "volcano_queue_pod_group_running_count", {"queue_name": "qm"}) is None
