"""A PodGroup that turns Unknown raises the Job's `Unknown` event (Volcano's updatePodGroup handler,
pkg/controllers/job/job_controller_handler.go): jobseq's "Restart job when job is unschedulable" spec, where a
running gang loses a pod on tainted nodes and its `Unknown -> RestartJob` policy must restart it."""

from __future__ import annotations

from fake_api import FakeApi

from scheduler.controllers.job import JobController


def job(policies: list[dict[str, str]]) -> dict:
    container = {"name": "main", "image": "nginx", "resources": {"requests": {"cpu": "1"}}}
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": "restart-when-unschedulable", "namespace": "ns", "uid": "u1"},
            "spec": {"schedulerName": "volcano-py", "queue": "default", "minAvailable": 2, "policies": policies,
                     "tasks": [{"name": "test", "replicas": 2, "template": {"spec": {"containers": [container]}}}]}}


def running_job(policies: list[dict[str, str]]) -> tuple[FakeApi, JobController, dict]:
    api = FakeApi()
    api.put("Job", job(policies))
    ctl = JobController(api, clock=lambda: 1_800_000_000.0)  # type: ignore[arg-type]
    ctl.reconcile("ns", "restart-when-unschedulable")
    (pg,) = api.of_kind("PodGroup").values()
    pg["metadata"]["uid"] = "pg1"
    pg["status"] = {"phase": "Running"}
    ctl.on_podgroup(None, pg)  # the initial listing: no event
    for pod in api.of_kind("Pod").values():
        pod["status"] = {"phase": "Running"}
    ctl.reconcile("ns", "restart-when-unschedulable")
    return api, ctl, pg


def phase(api: FakeApi) -> str:
    (stored,) = api.of_kind("Job").values()
    return str(stored["status"]["state"]["phase"])


def test_a_podgroup_turning_unknown_runs_the_unknown_policy() -> None:
    api, ctl, pg = running_job([{"event": "Unknown", "action": "RestartJob"}])
    assert phase(api) == "Running"
    pg["status"] = {"phase": "Unknown"}
    ctl.on_podgroup("MODIFIED", pg)
    assert phase(api) == "Restarting"


def test_without_such_a_policy_or_on_the_initial_listing_nothing_happens() -> None:
    api, ctl, pg = running_job([])
    pg["status"] = {"phase": "Unknown"}
    ctl.on_podgroup("MODIFIED", pg)
    assert phase(api) == "Running"
    api, ctl, pg = running_job([{"event": "Unknown", "action": "RestartJob"}])
    pg["status"] = {"phase": "Unknown"}
    ctl.on_podgroup(None, pg)  # a restart's listing sees Unknown already: not a transition
    assert phase(api) == "Running"
