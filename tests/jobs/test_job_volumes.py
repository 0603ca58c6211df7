"""The job controller makes the PersistentVolumeClaims a Job's `spec.volumes` describe, as Volcano's does
(pkg/controllers/job/job_controller_actions.go createJobIOIfNotExist): a `volumeClaim` becomes a claim named
`<job>-pvc-<12 characters>`, owned by the Job, whose name is written into the volume's `volumeClaimName` and
`status.controlledResources`; a named claim must exist before the job gets its PodGroup; the pods mount the claims;
the controller deletes none (the garbage collector removes the ones it made with their Job)."""

from __future__ import annotations

import itertools
import re
from typing import Any

from fake_api import FakeApi

from scheduler.controllers.claims import PVC_ERROR, RETRY_SECONDS
from scheduler.controllers.job import JobController

NOW = 1_800_000_000.0
CLAIM_SPEC = {
    "accessModes": ["ReadWriteOnce"],
    "storageClassName": "local",
    "resources": {"requests": {"storage": "1Gi"}},
}


def job_with(volumes: list[dict[str, Any]], replicas: int = 2) -> dict[str, Any]:
    containers = [{"name": "main", "image": "busybox"}, {"name": "side", "image": "busybox"}]
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": "ns", "uid": "job-uid", "resourceVersion": "1"},
        "spec": {
            "schedulerName": "volcano-py",
            "queue": "default",
            "minAvailable": replicas,
            "volumes": volumes,
            "tasks": [{"name": "w", "replicas": replicas, "template": {"spec": {"containers": containers}}}],
        },
    }


class Timers:
    """Stands in for the controller's timers: what was armed, run when the test says."""

    def __init__(self) -> None:
        self.armed: dict[tuple[str, str], tuple[float, Any]] = {}

    def arm(self, key: str, purpose: str, delay: float, action: Any) -> None:
        self.armed.setdefault((key, purpose), (delay, action))

    def fire(self, key: str, purpose: str) -> None:
        _, action = self.armed.pop((key, purpose))
        action()


def controller(api: FakeApi, suffixes: list[str] | None = None) -> tuple[JobController, Timers]:
    ctl = JobController(api, clock=lambda: NOW)  # type: ignore[arg-type]
    timers = Timers()
    ctl.volume_claims.arm = timers.arm
    if suffixes is not None:
        names = itertools.cycle(suffixes)
        ctl.volume_claims.suffix = lambda: next(names)
    return ctl, timers


def admit(api: FakeApi, ctl: JobController) -> None:
    """The scheduler moves the PodGroup to Inqueue; the next sync creates the pods."""
    (pg,) = api.of_kind("PodGroup").values()
    pg["status"] = {"phase": "Inqueue"}
    ctl.reconcile("ns", "train")


def test_a_volume_claim_becomes_a_claim_owned_by_the_job_that_every_pod_mounts() -> None:
    api = FakeApi()
    api.put("Job", job_with([{"mountPath": "/data", "volumeClaim": CLAIM_SPEC}]))
    ctl, _ = controller(api, ["abcdefghijkl"])
    ctl.reconcile("ns", "train")
    (name,) = api.of_kind("PersistentVolumeClaim")
    assert name == "train-pvc-abcdefghijkl"
    pvc = api.of_kind("PersistentVolumeClaim")[name]
    assert pvc["spec"] == CLAIM_SPEC
    assert pvc["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "name": "train",
            "uid": "job-uid",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    job = api.job("ns", "train")
    assert job is not None
    assert job["spec"]["volumes"] == [{"mountPath": "/data", "volumeClaim": CLAIM_SPEC, "volumeClaimName": name}]
    assert job["status"]["controlledResources"] == {f"volume-pvc-{name}": name}
    admit(api, ctl)
    for pod in api.of_kind("Pod").values():
        (vol,) = pod["spec"]["volumes"]
        assert vol["persistentVolumeClaim"] == {"claimName": name}
        assert [c["volumeMounts"] for c in pod["spec"]["containers"]] == [
            [{"name": vol["name"], "mountPath": "/data"}]
        ] * 2


def test_the_generated_name_is_kept_so_a_second_sync_makes_no_second_claim() -> None:
    api = FakeApi()
    api.put("Job", job_with([{"mountPath": "/data", "volumeClaim": CLAIM_SPEC}]))
    ctl, _ = controller(api)
    ctl.reconcile("ns", "train")
    ctl.reconcile("ns", "train")
    admit(api, ctl)
    (name,) = api.of_kind("PersistentVolumeClaim")
    assert re.fullmatch(r"train-pvc-[0-9a-z]{12}", name)
    assert [w for w in api.writes if w[1] == "PersistentVolumeClaim"] == [
        ("create", "PersistentVolumeClaim", "ns", name)
    ]


def test_a_generated_name_a_claim_already_has_is_not_used() -> None:
    api = FakeApi()
    api.put("PersistentVolumeClaim", {"metadata": {"name": "train-pvc-aaaaaaaaaaaa", "namespace": "ns"}, "spec": {}})
    api.put("Job", job_with([{"mountPath": "/data", "volumeClaim": CLAIM_SPEC}]))
    ctl, _ = controller(api, ["aaaaaaaaaaaa", "bbbbbbbbbbbb"])
    ctl.reconcile("ns", "train")
    assert sorted(api.of_kind("PersistentVolumeClaim")) == ["train-pvc-aaaaaaaaaaaa", "train-pvc-bbbbbbbbbbbb"]
    job = api.job("ns", "train")
    assert job is not None and job["spec"]["volumes"][0]["volumeClaimName"] == "train-pvc-bbbbbbbbbbbb"


def test_a_named_claim_that_exists_is_mounted_and_none_is_created() -> None:
    api = FakeApi()
    api.put("PersistentVolumeClaim", {"metadata": {"name": "shared", "namespace": "ns"}, "spec": CLAIM_SPEC})
    api.put("Job", job_with([{"mountPath": "/data", "volumeClaimName": "shared"}]))
    ctl, _ = controller(api)
    ctl.reconcile("ns", "train")
    admit(api, ctl)
    assert not [w for w in api.writes if w[1] == "PersistentVolumeClaim"]
    job = api.job("ns", "train")
    assert job is not None and job["status"]["controlledResources"] == {"volume-pvc-shared": "shared"}
    assert {p["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] for p in api.of_kind("Pod").values()} == {
        "shared"
    }


def test_a_named_claim_that_does_not_exist_keeps_the_job_pending_without_a_podgroup_until_it_does() -> None:
    api = FakeApi()
    api.put("Job", job_with([{"mountPath": "/data", "volumeClaimName": "later"}]))
    ctl, timers = controller(api)
    ctl.reconcile("ns", "train")
    ctl.reconcile("ns", "train")  # a second sync does not tell it twice
    assert api.of_kind("PodGroup") == {}
    job = api.job("ns", "train")
    assert job is not None and job["status"]["state"]["phase"] == "Pending"
    assert [(e["kind"], e["type"], e["reason"], e["message"]) for e in api.events] == [
        (
            "Job",
            "Warning",
            PVC_ERROR,
            "Failed to create PVC, err: pvc later is not found, the job will be "
            "in the Pending state until the PVC is created",
        )
    ]
    assert timers.armed[("ns/train", "claims")][0] == RETRY_SECONDS
    api.put("PersistentVolumeClaim", {"metadata": {"name": "later", "namespace": "ns"}, "spec": CLAIM_SPEC})
    timers.fire("ns/train", "claims")
    assert len(api.of_kind("PodGroup")) == 1


def test_a_claim_named_by_two_volumes_is_mounted_once() -> None:
    api = FakeApi()
    api.put("PersistentVolumeClaim", {"metadata": {"name": "shared", "namespace": "ns"}, "spec": CLAIM_SPEC})
    api.put(
        "Job",
        job_with([{"mountPath": "/a", "volumeClaimName": "shared"}, {"mountPath": "/b", "volumeClaimName": "shared"}]),
    )
    ctl, _ = controller(api)
    ctl.reconcile("ns", "train")
    admit(api, ctl)
    for pod in api.of_kind("Pod").values():
        assert len(pod["spec"]["volumes"]) == 1


def test_the_controller_deletes_no_claim_when_the_job_goes() -> None:
    api = FakeApi()
    api.put("Job", job_with([{"mountPath": "/data", "volumeClaim": CLAIM_SPEC}]))
    ctl, _ = controller(api)
    ctl.reconcile("ns", "train")
    job = api.job("ns", "train")
    assert job is not None
    del api.objects[("Job", "ns", "train")]
    ctl.on_job("DELETED", job)
    assert len(api.of_kind("PersistentVolumeClaim")) == 1
    assert not [w for w in api.writes if w[0] == "delete" and w[1] == "PersistentVolumeClaim"]
