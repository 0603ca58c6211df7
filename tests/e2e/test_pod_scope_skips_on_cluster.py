"""A replica's pod watch on a real kube-apiserver skips, undecoded, the events of another scheduler's pods bound
outside its scope (cache/scope.py `PodScope.skips`): the lines kube-apiserver writes have the shape the skip reads
(`{"type":"ADDED","object":...}`, compact, one nodeName and one schedulerName, a pod's metadata opening with its
name), so the skip is taken in production and not only against the simulated apiserver; the pods in the scope and
ours are kept, and the watch goes on."""

from __future__ import annotations

from controlplane import wait_for
from test_scheduler import TIMEOUT

from scheduler.cache.cluster_cache import ClusterCache
from scheduler.cache.scope import PodScope


def _pod(name: str, node: str | None, scheduler: str, labels: dict[str, str] | None = None) -> dict:
    spec: dict = {"schedulerName": scheduler, "containers": [{"name": "c", "image": "registry.invalid/x"}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": spec}


def test_a_real_apiservers_events_of_pods_outside_the_scope_are_skipped(control_plane, core_v1, namespace,
                                                                       node_set):
    here, there = node_set(0), node_set(0)
    api = control_plane.api_client()
    scope = PodScope(["volcano-py"])
    scope.nodes = frozenset({here})
    cache = ClusterCache(api, {"volcano-py"}, "default")
    cache.stores.pod_scope = scope
    skipped: list[bytes] = []
    real = scope.skips

    def skips(line: bytes, held) -> bool:
        if real(line, held):
            skipped.append(line)
            return True
        return False

    scope.skips = skips  # type: ignore[method-assign]
    cache.start()
    try:
        assert cache.wait_synced(TIMEOUT)
        core_v1.create_namespaced_pod(namespace, _pod("there", there, "other"))
        core_v1.create_namespaced_pod(namespace, _pod("decoy", here, "other", {"nodeName": there}))
        core_v1.create_namespaced_pod(namespace, _pod("here", here, "other"))
        core_v1.create_namespaced_pod(namespace, _pod("ours", there, "volcano-py"))
        core_v1.create_namespaced_pod(namespace, _pod("last", None, "volcano-py"))  # pending: read, and last
        wait_for(lambda: f"{namespace}/last" in cache.pods.objects, TIMEOUT, what="the cache reads the last pod")
        kept = {key.split("/")[1] for key in cache.pods.objects if key.startswith(f"{namespace}/")}
        assert kept == {"decoy", "here", "ours", "last"}
        mine = [line for line in skipped if f'"namespace":"{namespace}"'.encode() in line]
        assert mine and all(b'"name":"there"' in line for line in mine)  # "there" alone, never decoded
        for name in ("there", "here"):  # deleted: "there"'s delete skipped too (its key read from the line)
            core_v1.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
        core_v1.create_namespaced_pod(namespace, _pod("after", None, "volcano-py"))
        wait_for(lambda: f"{namespace}/after" in cache.pods.objects, TIMEOUT, what="the cache reads the pod after")
        assert f"{namespace}/here" not in cache.pods.objects  # in the scope: its delete read
        assert any(line.startswith(b'{"type":"DELETED",') and b'"name":"there"' in line for line in skipped)
        latest = core_v1.read_namespaced_pod("last", namespace).metadata.resource_version
        assert int(cache.pods.resource_version) >= int(latest)
    finally:
        cache.stop()
        api.close()
