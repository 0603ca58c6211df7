"""A Job past the pod limit (issue 31): refused before anything of it is built, with the field named."""

from __future__ import annotations

import time
from typing import Any

import pytest
from fake_api import FakeApi

from scheduler.controllers.job import JobController
from scheduler.jobs.expand import MAX_JOB_PODS, size_problems


def vcjob(*replicas: Any, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": "big", "namespace": "ns", "uid": "u1"},
            "spec": {"schedulerName": "volcano-py", "queue": "default", **spec,
                     "tasks": [{"name": f"t{i}", "replicas": n,
                                "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}}
                               for i, n in enumerate(replicas)]}}


def test_the_limit_is_kubernetes_indexed_job_parallelism() -> None:
    assert MAX_JOB_PODS == 100_000


@pytest.mark.parametrize(("job", "expected"), [
    (vcjob(1, 2147483647), ["spec.tasks[1].replicas: 2147483647 exceeds the limit of 100000 pods per Job"]),
    (vcjob(60_000, 60_000), ["spec.tasks: 120000 pods in all (the sum of the replicas of its tasks) exceed the limit "
                             "of 100000 pods per Job"]),
    (vcjob(1, minAvailable=200_000), ["spec.minAvailable: 200000 exceeds the limit of 100000 pods per Job"]),
    (vcjob("7"), ["spec.tasks[0].replicas: '7' is not an integer"]),
    (vcjob(True), ["spec.tasks[0].replicas: True is not an integer"]),
    (vcjob(50_000, 50_000), []),
    (vcjob(100_000), []),
])
def test_size_problems_name_the_field(job: dict[str, Any], expected: list[str]) -> None:
    assert size_problems(job) == expected


def test_a_lower_cap_applies_to_the_sum() -> None:
    assert size_problems(vcjob(6, 5), limit=10) == [
        "spec.tasks: 11 pods in all (the sum of the replicas of its tasks) exceed the limit of 10 pods per Job"]


def test_the_controller_fails_an_over_limit_job_at_once_and_builds_nothing() -> None:
    """With the webhook off, a Job with `replicas: 2147483647` reaches the controller: it must end Failed with the
    field named, a Warning event and a Failed condition, in well under a second (building its PodGroup would take
    hours), and a second sync writes nothing more (no retry loop)."""
    api = FakeApi()
    api.put("Job", vcjob(1, 2147483647))
    ctl = JobController(api, clock=lambda: 1_800_000_000.0)  # type: ignore[arg-type]
    started = time.monotonic()
    ctl.reconcile("ns", "big")
    assert time.monotonic() - started < 1.0
    assert api.of_kind("PodGroup") == {} and api.of_kind("Pod") == {}
    status = api.job("ns", "big")["status"]  # type: ignore[index]
    assert status["state"]["phase"] == "Failed"
    assert status["state"]["reason"] == "InvalidJob"
    assert status["state"]["message"] == "spec.tasks[1].replicas: 2147483647 exceeds the limit of 100000 pods per Job"
    assert [c["status"] for c in status["conditions"]] == ["Failed"]
    assert [(e["type"], e["reason"]) for e in api.events] == [("Warning", "InvalidJob")]
    ctl.reconcile("ns", "big")
    assert len(api.events) == 1 and [c["status"] for c in api.job("ns", "big")["status"]["conditions"]] == ["Failed"]  # type: ignore[index]


def test_the_controllers_cap_is_configurable() -> None:
    api = FakeApi()
    api.put("Job", vcjob(3))
    JobController(api, clock=lambda: 1_800_000_000.0, max_pods=2).reconcile("ns", "big")  # type: ignore[arg-type]
    assert api.job("ns", "big")["status"]["state"]["message"] == (  # type: ignore[index]
        "spec.tasks[0].replicas: 3 exceeds the limit of 2 pods per Job")
