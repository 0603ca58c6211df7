"""Evictions on the real apiserver (issue 31): the scheduler's Evictor, driven with the victim as its cache saw it,
never hits a pod recreated under the victim's name, and marks a victim it evicts `DisruptionTarget=True` (reason
`PreemptionByScheduler`) before deleting it.

The evictor runs as the scheduler's ServiceAccount under the RBAC the manifests give it. The victims are bound to a
node name no kubelet (and no kwok) serves: a graceful delete then leaves them terminating with their conditions
readable, and nothing else changes them while a test runs.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from controlplane import REPO_ROOT, wait_for
from kubernetes import client

from scheduler.cache.events import EventRecorder
from scheduler.cache.evictor import Evictor
from scheduler.cache.kube import Kube
from scheduler.cache.store import Stores

NOWHERE = "evict-uid-no-such-node"
GRACE = 30


class RacingKube(Kube):
    """The real client; `before_delete` runs (real API calls) just before the evictor's DELETE is sent."""

    before_delete: Any = None

    def request(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        if method == "DELETE" and self.before_delete is not None:
            hook, self.before_delete = self.before_delete, None
            hook()
        return super().request(method, path, **kwargs)


@pytest.fixture(scope="module")
def scheduler_client(control_plane):
    """An API client that is the scheduler's ServiceAccount, with manifests/01-rbac-scheduler.yaml (the chart's rules
    too) in force: the evictor's requests need no more than what is granted there."""
    control_plane.kubectl("apply", "-f", str(REPO_ROOT / "manifests" / "00-namespace.yaml"),
                          "-f", str(REPO_ROOT / "manifests" / "01-rbac-scheduler.yaml"))
    kubeconfig = control_plane.kubeconfig_for_service_account("volcano-py-system", "volcano-py-scheduler")
    wait_for(lambda: control_plane.kubectl("auth", "can-i", "patch", "pods", "--subresource=status",
                                           kubeconfig=kubeconfig, check=False).stdout.strip() == "yes",
             30, interval=0.5, what="the scheduler's RBAC in force")
    api = control_plane.api_client(kubeconfig)
    yield api
    api.close()


@pytest.fixture
def evictor(scheduler_client):
    kube = RacingKube(scheduler_client)
    stores = Stores()
    events = EventRecorder(kube, stores, lambda: 0.0, "e2e", threading.Event())  # queued, not sent: not looked at
    pool = ThreadPoolExecutor(1)
    yield Evictor(kube, stores, pool, events, lambda: True, GRACE)
    pool.shutdown()
    kube.close()


def create(core_v1, namespace: str, name: str) -> str:
    pod = core_v1.create_namespaced_pod(namespace, {"metadata": {"name": name}, "spec": {
        "schedulerName": "nobody", "nodeName": NOWHERE, "containers": [{"name": "main", "image": "busybox"}]}})
    return str(pod.metadata.uid)


def recreate(core_v1, namespace: str, name: str) -> str:
    """Delete the pod at once and create another under its name (a StatefulSet pod, a restarted Job pod)."""
    core_v1.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
    return create(core_v1, namespace, name)


def seen_by_cache(evictor: Evictor, namespace: str, name: str) -> dict[str, Any]:
    """Put the pod in the evictor's store as a watch would have delivered it: the copy the cycle decides for."""
    pod = evictor.kube.request("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
    with evictor.stores.lock:
        evictor.stores.pods.objects[f"{namespace}/{name}"] = pod
    return pod


def read(core_v1, namespace: str, name: str) -> Any:
    try:
        return core_v1.read_namespaced_pod(name, namespace)
    except client.ApiException as exc:
        assert exc.status == 404, exc
        return None


def disruption_target(pod: Any) -> Any:
    return next((c for c in (pod.status.conditions or []) if c.type == "DisruptionTarget"), None)


def force_delete_all(core_v1, namespace: str) -> None:
    for pod in core_v1.list_namespaced_pod(namespace).items:
        core_v1.delete_namespaced_pod(pod.metadata.name, namespace, grace_period_seconds=0)


def assert_marked_and_deleted(pod: Any, uid: str, reason: str) -> None:
    assert pod is not None and pod.metadata.uid == uid
    condition = disruption_target(pod)
    assert condition is not None, "no DisruptionTarget condition"
    assert (condition.status, condition.reason) == ("True", "PreemptionByScheduler")
    assert reason in condition.message
    assert pod.metadata.deletion_timestamp is not None
    assert pod.metadata.deletion_grace_period_seconds == GRACE


@pytest.mark.parametrize("cached_resource_version", [True, False], ids=["cached-rv", "uid-only"])
def test_a_pod_recreated_before_the_eviction_survives_and_a_plain_victim_is_marked_and_deleted(
        core_v1, namespace, evictor, cached_resource_version):
    try:
        plain_uid = create(core_v1, namespace, "plain")
        old_uid = create(core_v1, namespace, "reborn")
        seen_by_cache(evictor, namespace, "plain")
        cached = seen_by_cache(evictor, namespace, "reborn")
        if not cached_resource_version:  # the uid alone must hold the request off the new pod
            del cached["metadata"]["resourceVersion"]
        new_uid = recreate(core_v1, namespace, "reborn")
        assert new_uid != old_uid

        evictor.evict(f"{namespace}/plain", "preempted by e2e/high")
        evictor.evict(f"{namespace}/reborn", "preempted by e2e/high")

        assert_marked_and_deleted(read(core_v1, namespace, "plain"), plain_uid, "preempted by e2e/high")
        reborn = read(core_v1, namespace, "reborn")
        assert reborn is not None and reborn.metadata.uid == new_uid
        assert reborn.metadata.deletion_timestamp is None, "the recreated pod was deleted"
        assert disruption_target(reborn) is None, "the recreated pod was marked"
    finally:
        force_delete_all(core_v1, namespace)


def test_a_pod_recreated_between_the_condition_and_the_delete_survives(core_v1, namespace, evictor):
    try:
        old_uid = create(core_v1, namespace, "reborn")
        seen_by_cache(evictor, namespace, "reborn")
        uids: list[str] = []
        evictor.kube.before_delete = lambda: uids.append(recreate(core_v1, namespace, "reborn"))

        evictor.evict(f"{namespace}/reborn", "preempted by e2e/high")

        assert len(uids) == 1 and uids[0] != old_uid, "the race was not injected"
        reborn = read(core_v1, namespace, "reborn")
        assert reborn is not None and reborn.metadata.uid == uids[0]
        assert reborn.metadata.deletion_timestamp is None, "the recreated pod was deleted"
    finally:
        force_delete_all(core_v1, namespace)


def test_a_victim_whose_status_moved_on_since_the_cache_saw_it_is_still_marked_and_deleted(
        core_v1, namespace, evictor):
    """A 409 from the same pod (a newer resourceVersion, same uid) is read again and retried."""
    try:
        uid = create(core_v1, namespace, "busy")
        cached = seen_by_cache(evictor, namespace, "busy")
        core_v1.patch_namespaced_pod_status("busy", namespace, {"status": {"conditions": [
            {"type": "volcano-py.test/moved", "status": "True"}]}})
        assert read(core_v1, namespace, "busy").metadata.resource_version != cached["metadata"]["resourceVersion"]

        evictor.evict(f"{namespace}/busy", "reclaimed by e2e/q")

        assert_marked_and_deleted(read(core_v1, namespace, "busy"), uid, "reclaimed by e2e/q")
    finally:
        force_delete_all(core_v1, namespace)
