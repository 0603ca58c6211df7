"""A scaled Job's svc hosts ConfigMap is written before its PodGroup and pods, as Volcano's syncJob does
(initOnJobUpdate: the plugins' OnJobUpdate, then createOrUpdatePodGroup, then the pods;
pkg/controllers/job/job_controller_actions.go): jobp's "Dynamic Job scale up and down" specs read the ConfigMap as
soon as the scaled job is ready, and the job is ready at once (it was running), so a controller that writes the
ConfigMap last loses that race (it lost it on 2026-12-07, twice in three runs)."""

from __future__ import annotations

import pytest
from fake_api import FakeApi

from scheduler.controllers.job import JobController
from scheduler.jobs.expand import normalize_job
from scheduler.jobs.plugins import svc_configmap_name, svc_hosts


def job(replicas: int) -> dict:
    container = {"name": "main", "image": "nginx", "resources": {"requests": {"cpu": "500m"}}}
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": "scale-down-job", "namespace": "ns", "uid": "u1"},
            "spec": {"schedulerName": "volcano-py", "queue": "default", "minAvailable": min(replicas, 2),
                     "plugins": {"svc": []},
                     "tasks": [{"name": "default", "replicas": replicas, "minAvailable": min(replicas, 2),
                                "template": {"spec": {"containers": [container]}}}]}}


@pytest.mark.parametrize("sizes", [(2, 1), (2, 0), (2, 0, 2), (1, 3)])
def test_a_scaled_jobs_hosts_configmap_is_written_before_its_podgroup_and_pods(sizes: tuple[int, ...]) -> None:
    api = FakeApi()
    api.put("Job", job(sizes[0]))
    ctl = JobController(api, clock=lambda: 1_800_000_000.0)  # type: ignore[arg-type]
    ctl.reconcile("ns", "scale-down-job")
    (pg,) = api.of_kind("PodGroup").values()
    pg["status"] = {"phase": "Running"}  # the scheduler's (its pods are created once it is not Pending)
    ctl.reconcile("ns", "scale-down-job")
    for size in sizes[1:]:
        for pod in api.of_kind("Pod").values():
            pod["status"] = {"phase": "Running"}
        ctl.reconcile("ns", "scale-down-job")
        (stored,) = api.of_kind("Job").values()
        stored["spec"] = job(size)["spec"]
        api.writes.clear()
        ctl.reconcile("ns", "scale-down-job")  # the scaled Job's event
        kinds = [kind for _, kind, _, _ in api.writes]
        assert "ConfigMap" in kinds and {"PodGroup", "Pod"} & set(kinds), api.writes
        assert kinds[0] == "ConfigMap", api.writes  # nothing of the job written before it
        name = svc_configmap_name(stored)
        assert api.objects[("ConfigMap", "ns", name)]["data"] == svc_hosts(normalize_job(stored))
