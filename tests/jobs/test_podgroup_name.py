"""A Job's PodGroup is `<job>-<job uid>`, as Volcano's job controller names it (issue 16), and a PodGroup an older
controller named after the job is still the job's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from fake_api import FakeApi

from scheduler.cli.ctl.client import Client
from scheduler.controllers.job import JobController
from scheduler.jobs import podgroup_for, podgroup_lookup_names, podgroup_name, pods_for

GROUP = "scheduling.k8s.io/group-name"


def vcjob(uid: str | None = "1234") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "train", "namespace": "ns"}
    if uid:
        meta["uid"] = uid
    container = {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": meta,
            "spec": {"schedulerName": "volcano-py",
                     "tasks": [{"name": "worker", "replicas": 2, "template": {"spec": {"containers": [container]}}}]}}


@dataclass(frozen=True)
class NameCase:
    name: str
    uid: str | None
    podgroup: str
    lookup: tuple[str, ...]


NAME_CASES = [
    NameCase("a created job's PodGroup is <job>-<uid>", "1234", "train-1234", ("train-1234", "train")),
    NameCase("a job with no uid yet keeps the job name", None, "train", ("train",)),
]


@pytest.mark.parametrize("case", NAME_CASES, ids=[c.name for c in NAME_CASES])
def test_podgroup_name(case: NameCase) -> None:
    job = vcjob(case.uid)
    assert podgroup_name(job) == case.podgroup
    assert podgroup_lookup_names(job) == case.lookup
    assert podgroup_for(job)["metadata"]["name"] == case.podgroup
    assert {p["metadata"]["annotations"][GROUP] for p in pods_for(job)} == {case.podgroup}


def test_pods_join_the_podgroup_they_are_given() -> None:
    assert {p["metadata"]["annotations"][GROUP] for p in pods_for(vcjob(), podgroup="train")} == {"train"}


def owner(uid: str) -> list[dict[str, Any]]:
    return [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "train", "uid": uid,
             "controller": True}]


def controller_with(*podgroups: dict[str, Any]) -> tuple[JobController, FakeApi]:
    api = FakeApi()
    api.put("Job", vcjob())
    for pg in podgroups:
        api.put("PodGroup", pg)
    return JobController(api, clock=lambda: 1_000_000.0), api  # type: ignore[arg-type]


def admitted(name: str, uid: str) -> dict[str, Any]:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "ns", "ownerReferences": owner(uid)},
            "spec": {"minMember": 2}, "status": {"phase": "Inqueue"}}


def pod_groups(api: FakeApi) -> dict[str, str]:
    return {name: pod["metadata"]["annotations"][GROUP] for name, pod in api.of_kind("Pod").items()}


def test_the_controller_creates_job_uid_podgroup_and_its_pods_join_it() -> None:
    ctl, api = controller_with()
    ctl.reconcile("ns", "train")
    assert list(api.of_kind("PodGroup")) == ["train-1234"]
    api.objects[("PodGroup", "ns", "train-1234")]["status"] = {"phase": "Inqueue"}  # the scheduler admits it
    ctl.reconcile("ns", "train")
    assert pod_groups(api) == {"train-worker-0": "train-1234", "train-worker-1": "train-1234"}


def test_a_legacy_podgroup_named_after_the_job_is_still_the_jobs() -> None:
    ctl, api = controller_with(admitted("train", "1234"))
    ctl.reconcile("ns", "train")
    assert list(api.of_kind("PodGroup")) == ["train"]  # no second PodGroup
    assert pod_groups(api) == {"train-worker-0": "train", "train-worker-1": "train"}


def test_a_namesake_of_an_earlier_job_is_not_the_jobs_podgroup() -> None:
    ctl, api = controller_with(admitted("train", "an-earlier-job"))
    ctl.reconcile("ns", "train")
    assert sorted(api.of_kind("PodGroup")) == ["train", "train-1234"]
    assert api.of_kind("Pod") == {}  # its own PodGroup is still Pending


def test_both_names_present_the_uid_one_wins() -> None:
    ctl, api = controller_with(admitted("train", "1234"), admitted("train-1234", "1234"))
    ctl.reconcile("ns", "train")
    assert set(pod_groups(api).values()) == {"train-1234"}


class FakeKube:
    """What `ctl.client.Client` reads, served from a FakeApi."""

    def __init__(self, api: FakeApi):
        self.api = api

    def get_or_none(self, path: str) -> dict[str, Any] | None:
        if "/batch.volcano.sh/" in path:
            return self.api.job(*path.split("/")[-3::2])
        if "/podgroups/" in path:
            return self.api.podgroup(*path.split("/")[-3::2])
        return None

    def request(self, method: str, path: str, **_: Any) -> dict[str, Any]:
        return {"items": []}


@pytest.mark.parametrize("name", ["train-1234", "train"], ids=["the <job>-<uid> PodGroup", "a legacy one"])
def test_explain_finds_the_jobs_podgroup_by_either_name(name: str) -> None:
    _, api = controller_with(admitted(name, "1234"))
    facts = Client(FakeKube(api)).facts("ns", "train")  # type: ignore[arg-type]
    assert facts.podgroup is not None and facts.podgroup["metadata"]["name"] == name
