"""The job controller says which action it runs as Volcano's does: an `ExecuteAction` event whose message names
the action (pkg/controllers/job/job_controller.go), which Volcano's jobp spec "Checking Event Generation for
job" waits for (test/e2e/util/job.go WaitJobTerminateAction)."""

from __future__ import annotations

from typing import Any

from fake_api import FakeApi

from scheduler.controllers.job import EXECUTE_ACTION, JobController


class RecordingApi(FakeApi):
    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple[str, str]] = []

    def event(self, involved: Any, type_: str, reason: str, message: str, now: str) -> None:
        self.events.append((reason, message))


def test_a_policy_that_terminates_the_job_is_announced_as_volcano_announces_it() -> None:
    api = RecordingApi()
    container = {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
    api.put("Job", {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                    "metadata": {"name": "terminate-job", "namespace": "ns", "uid": "u1"},
                    "spec": {"schedulerName": "volcano-py", "queue": "default", "minAvailable": 1,
                             "policies": [{"event": "PodFailed", "action": "TerminateJob"}],
                             "tasks": [{"name": "complete", "replicas": 1, "template": {"spec": {
                                 "restartPolicy": "Never", "containers": [container]}}}]}})
    ctl = JobController(api, clock=lambda: 1_800_000_000.0)  # type: ignore[arg-type]
    ctl.reconcile("ns", "terminate-job")
    (pg,) = api.of_kind("PodGroup").values()
    pg["status"] = {"phase": "Running"}
    ctl.reconcile("ns", "terminate-job")
    (pod,) = api.of_kind("Pod").values()
    pod["status"] = {"phase": "Running"}
    ctl.reconcile("ns", "terminate-job")
    assert not [e for e in api.events if e[0] == EXECUTE_ACTION and "TerminateJob" in e[1]]
    pod["status"] = {"phase": "Failed", "containerStatuses": [
        {"name": "main", "state": {"terminated": {"exitCode": 127}}}]}
    ctl.on_pod("MODIFIED", pod)
    ctl.reconcile("ns", "terminate-job")
    assert (EXECUTE_ACTION, "Start to execute action TerminateJob ") in api.events

