"""The Job controller acts on a pod's deletion even when another event for the job arrives first.

Watch events for different objects reach the controller in any order: after the taint-eviction controller
deletes a pod, the PodGroup's status change can be handled before the pod's DELETED event. The controller is
driven here by hand, in-process, against the real apiserver, so that order is forced every time: without the
fix, that reconcile found the pod missing and recreated it (SyncJob) before PodEvicted -> RestartJob ran, and
the scheduler would bind a gang only to have it killed.
"""

from __future__ import annotations

import json

import pytest
from controlplane import wait_for
from kubernetes import client

from scheduler.cache.kube import Kube
from scheduler.controllers.client import Api
from scheduler.controllers.job import JobController

BATCH, SCHED = "batch.volcano.sh", "scheduling.volcano.sh"


@pytest.fixture
def controller(control_plane):
    api_client = control_plane.api_client()
    yield JobController(Api(Kube(api_client)))
    api_client.close()


def pods(core_v1, namespace: str) -> list[dict]:
    resp = core_v1.list_namespaced_pod(namespace, label_selector="volcano.sh/job-name=train", _preload_content=False)
    return json.loads(resp.data)["items"]


def job_status(custom, namespace: str) -> dict:
    return custom.get_namespaced_custom_object(BATCH, "v1alpha1", namespace, "jobs", "train").get("status") or {}


def test_a_deletion_seen_late_is_still_an_eviction_and_runs_the_policy_once(controller, custom, core_v1, namespace):
    try:  # the scheduler makes it when it starts; none runs here
        custom.create_cluster_custom_object(SCHED, "v1beta1", "queues", {
            "apiVersion": f"{SCHED}/v1beta1", "kind": "Queue", "metadata": {"name": "default"}, "spec": {"weight": 1}})
    except client.ApiException as exc:
        if exc.status != 409:
            raise
    container = {"name": "main", "image": "busybox"}
    made = custom.create_namespaced_custom_object(BATCH, "v1alpha1", namespace, "jobs", {
        "apiVersion": f"{BATCH}/v1alpha1", "kind": "Job", "metadata": {"name": "train"},
        "spec": {"schedulerName": "volcano-py", "policies": [{"event": "PodEvicted", "action": "RestartJob"}],
                 "tasks": [{"name": "worker", "replicas": 2, "template": {"spec": {"containers": [container]}}}]}})
    controller.reconcile(namespace, "train")  # creates the PodGroup, `<job>-<job uid>` as Volcano names it
    pg_name = f"train-{made['metadata']['uid']}"
    # Volcano's PodGroup CRD has no status subresource: status is written through the object.
    custom.patch_namespaced_custom_object(SCHED, "v1beta1", namespace, "podgroups", pg_name,
                                          {"status": {"phase": "Inqueue"}})
    controller.reconcile(namespace, "train")  # the scheduler admitted it: the pods are created
    made = wait_for(lambda: (found := pods(core_v1, namespace)) and len(found) == 2 and found, 30,
                    what="the two pods")
    for pod in made:
        controller.on_pod("ADDED", pod)  # the controller's watch saw them

    victim = made[0]
    core_v1.delete_namespaced_pod(victim["metadata"]["name"], namespace, grace_period_seconds=0)
    wait_for(lambda: len(pods(core_v1, namespace)) == 1, 30, what="the pod gone")
    podgroup = custom.get_namespaced_custom_object(SCHED, "v1beta1", namespace, "podgroups", pg_name)
    controller.on_podgroup("MODIFIED", podgroup)  # another event of the job, before the pod's DELETED

    status = job_status(custom, namespace)
    assert status["retryCount"] == 1 and status["version"] == 1, status  # RestartJob ran: a new run of the job
    assert "Restarting" in [c["status"] for c in status["conditions"]], status
    first_run = [p["metadata"]["name"] for p in pods(core_v1, namespace)
                 if p["metadata"]["annotations"].get("volcano.sh/job-version") == "0"
                 and not p["metadata"].get("deletionTimestamp")]
    assert first_run == [], "a pod of the evicted run was recreated or kept"

    controller.on_pod("DELETED", victim)  # the late DELETED event: not a second eviction
    assert job_status(custom, namespace)["retryCount"] == 1
