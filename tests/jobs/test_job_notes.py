"""What keeps a Job from progressing is said on it (issue 31): a refused pod create becomes a `FailedCreate`
Warning event and a Job condition, retried with backoff; a Job whose queue does not exist gets `QueueNotFound`."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from fake_api import FakeApi

from scheduler.cache.kube import KubeError
from scheduler.controllers.job import JobController
from scheduler.controllers.timers import Retries, Timers

GPU_INVALID = ('Pod "gpu-w-0" is invalid: spec.containers[0].resources.requests[nvidia.com/gpu]: Invalid value: '
               '"500m": must be an integer')


class ArmedTimers(Timers):
    """Timers that record what is armed and fire only when the test says so."""

    def __init__(self) -> None:
        super().__init__()
        self.armed: dict[tuple[str, str], tuple[float, Callable[[], None]]] = {}

    def arm(self, key: str, purpose: str, delay: float, action: Callable[[], None]) -> None:
        self.armed.setdefault((key, purpose), (delay, action))

    def fire(self, key: str, purpose: str) -> float:
        delay, action = self.armed.pop((key, purpose))
        action()
        return delay


class RefusingApi(FakeApi):
    """Pod creates answer 422 with Kubernetes' message while `refuse` is set."""

    refuse = True

    def create(self, obj: Any) -> Any:
        if obj["kind"] == "Pod" and self.refuse:
            body = json.dumps({"kind": "Status", "code": 422, "reason": "Invalid",
                               "message": GPU_INVALID.replace("gpu-w-0", obj["metadata"]["name"])}).encode()
            raise KubeError(422, "POST", "/api/v1/namespaces/ns/pods", body)
        return super().create(obj)


def gpu_job(replicas: int = 1) -> dict[str, Any]:
    container = {"name": "c", "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": "0.5"}}}
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": "gpu", "namespace": "ns", "uid": "u1"},
            "spec": {"schedulerName": "volcano-py", "queue": "default", "minAvailable": replicas,
                     "tasks": [{"name": "w", "replicas": replicas, "template": {"spec": {"containers": [container]}}}]}}


def controller(api: FakeApi) -> tuple[JobController, ArmedTimers]:
    ctl = JobController(api, clock=lambda: 1_800_000_000.0)  # type: ignore[arg-type]
    timers = ArmedTimers()
    ctl.retries = Retries(timers)
    return ctl, timers


def inqueue(api: FakeApi) -> None:
    (pg,) = api.of_kind("PodGroup").values()
    pg["status"] = {"phase": "Inqueue"}


def notes(api: FakeApi) -> list[tuple[str, str]]:
    return [(c["reason"], c["message"]) for c in api.job("ns", "gpu")["status"].get("conditions", [])  # type: ignore[index]
            if "reason" in c]


def test_a_refused_pod_create_is_a_failed_create_event_and_condition_retried_with_backoff() -> None:
    api = RefusingApi()
    api.put("Job", gpu_job())
    ctl, timers = controller(api)
    ctl.reconcile("ns", "gpu")
    inqueue(api)
    ctl.reconcile("ns", "gpu")
    said = f"Error creating pods: pod gpu-w-0: {GPU_INVALID}"
    assert [(e["type"], e["reason"], e["message"]) for e in api.events if e["reason"] == "FailedCreate"] == [
        ("Warning", "FailedCreate", said)]
    assert notes(api) == [("FailedCreate", said)]
    # backoff, not a hot loop: the retry is armed at 0.5 s, then 1 s; the same refusal is not said again
    assert timers.fire("ns/gpu", "retry") == 0.5
    assert timers.armed[("ns/gpu", "retry")][0] == 1.0
    assert [e["reason"] for e in api.events].count("FailedCreate") == 1 and len(notes(api)) == 1
    # once Kubernetes takes the pods (the template fixed), they are created and the failure is forgotten
    api.refuse = False
    timers.fire("ns/gpu", "retry")
    assert sorted(api.of_kind("Pod")) == ["gpu-w-0"]
    assert ("ns/gpu", "retry") not in timers.armed and ctl.retries.failures("ns/gpu") == 0


def test_the_failed_create_condition_is_not_repeated_after_a_restart() -> None:
    api = RefusingApi()
    api.put("Job", gpu_job())
    ctl, _ = controller(api)
    ctl.reconcile("ns", "gpu")
    inqueue(api)
    ctl.reconcile("ns", "gpu")
    again, _ = controller(api)  # a new process: nothing remembered but the Job's status
    again.reconcile("ns", "gpu")
    assert len(notes(api)) == 1


def test_a_job_whose_queue_does_not_exist_is_told_so_once() -> None:
    class NoQueues(FakeApi):
        def queue(self, name: str) -> dict[str, Any] | None:
            return None

    api = NoQueues()
    api.put("Job", gpu_job())
    ctl, _ = controller(api)
    ctl.reconcile("ns", "gpu")
    ctl.reconcile("ns", "gpu")
    message = "queue 'default' does not exist: none of the job's pods are created until a queue of that name does"
    assert notes(api) == [("QueueNotFound", message)]
    assert [(e["type"], e["reason"]) for e in api.events if e["reason"] == "QueueNotFound"] == [
        ("Warning", "QueueNotFound")]
    assert api.of_kind("Pod") == {}
    assert api.job("ns", "gpu")["status"]["state"]["phase"] == "Pending"  # type: ignore[index]


def test_a_note_whose_status_write_failed_is_written_on_the_retry() -> None:
    class NoQueues(FakeApi):
        def queue(self, name: str) -> dict[str, Any] | None:
            return None

    api = NoQueues()
    api.put("Job", gpu_job())
    ctl, timers = controller(api)
    ctl.reconcile("ns", "gpu")  # the first status write (phase Pending) succeeds
    api.objects[("Job", "ns", "gpu")]["status"].pop("conditions", None)
    ctl.notes._said.clear()  # as after a restart, with the note's write still to come
    api.failures[("patch", "JobStatus")] = 1
    ctl.reconcile("ns", "gpu")
    assert notes(api) == []
    timers.fire("ns/gpu", "retry")
    assert [reason for reason, _ in notes(api)] == ["QueueNotFound"]
