"""A watch that expires with 410 Gone: the cache relists and loses nothing (issue 11).

A ClusterCache runs in-process against a real apiserver started with `--watch-cache=false`, so watches are served
by etcd itself (the apiserver's watch cache would replay old events from memory and hide the compaction). The
pod watch is cut and held down (a network partition: the reconnect blocks) while pods are created and deleted,
and etcd is compacted at its current revision. When the partition heals, the watch resumes from its last
resourceVersion, which etcd has compacted: 410 Gone. The cache relists, and its pods are exactly the
apiserver's: the ones created during the partition are there, the deleted ones are gone.
"""

from __future__ import annotations

import base64
import json
import threading
import urllib.request

import pytest
from chaos_helpers import TIMEOUT, list_pods
from controlplane import ControlPlane, wait_for

from scheduler.cache.cluster_cache import ClusterCache


def etcd_compact(etcd_url: str) -> int:
    """Compact etcd at its current revision (the gRPC gateway); returns that revision."""
    def post(path: str, body: dict) -> dict:
        req = urllib.request.Request(f"{etcd_url}{path}", json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read())

    revision = int(post("/v3/kv/range", {"key": base64.b64encode(b"/").decode()})["header"]["revision"])
    post("/v3/kv/compaction", {"revision": str(revision), "physical": True})
    return revision


def pod(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"schedulerName": "nobody", "containers": [{"name": "main", "image": "busybox"}]}}


@pytest.fixture(scope="module")
def etcd_watches(control_plane):
    """A second, small control plane whose watches go to etcd (no watch cache, no kwok, no controllers)."""
    with ControlPlane(controller_manager=False, kwok=False, apiserver_args=("--watch-cache=false",)) as cp:
        yield cp


def test_a_watch_from_a_compacted_revision_relists_and_loses_nothing(etcd_watches):
    from kubernetes import client

    control_plane = etcd_watches
    api = control_plane.api_client(connection_pool_maxsize=16)
    core_v1 = client.CoreV1Api(api)
    namespace = "gone"
    core_v1.create_namespace({"metadata": {"name": namespace}})
    cache = ClusterCache(api, {"volcano-py"}, "default", watch_timeout=20, request_timeout=15)
    lists: list[str] = []
    real_list, real_stream = cache.watcher._list, cache.kube.stream_lines

    def counting_list(w):
        lists.append(w.kind)
        real_list(w)

    partitioned, healed = threading.Event(), threading.Event()

    def stream(path, query, read_timeout):
        if path == cache.pods.path and partitioned.is_set():
            healed.wait(TIMEOUT)  # the reconnect goes through when the partition heals
        yield from real_stream(path, query, read_timeout)

    cache.watcher._list = counting_list  # type: ignore[method-assign]
    cache.kube.stream_lines = stream  # type: ignore[method-assign]  # (the watcher reads lines)
    cache.start()
    try:
        assert cache.wait_synced(TIMEOUT)
        for i in range(10):
            core_v1.create_namespaced_pod(namespace, pod(f"before-{i}"))
        wait_for(lambda: sum(k.startswith(f"{namespace}/") for k in cache.pods.objects) == 10, TIMEOUT,
                 what="the cache sees the first pods")
        pod_lists = lists.count("Pod")

        partitioned.set()
        cache.kube.close_streams()  # every watch reconnects; the pod watch now waits for the partition to heal
        for i in range(20):
            core_v1.create_namespaced_pod(namespace, pod(f"during-{i}"))
        for i in range(5):
            core_v1.delete_namespaced_pod(f"before-{i}", namespace, grace_period_seconds=0)
        stale = cache.pods.resource_version
        revision = etcd_compact(control_plane.etcd_url)
        assert stale is not None and int(stale) < revision
        healed.set()

        def relisted_and_converged():
            with cache.lock:
                cached = {k for k in cache.pods.objects if k.startswith(f"{namespace}/")}
            actual = {f"{namespace}/{p['metadata']['name']}" for p in list_pods(core_v1, namespace)}
            return lists.count("Pod") > pod_lists and cached == actual and cached

        cached = wait_for(relisted_and_converged, TIMEOUT, what="relist after 410 Gone; cache == apiserver")
        assert len(cached) == 25
        assert not any("/before-" + str(i) in k for i in range(5) for k in cached), "a deleted pod survived"
        print(f"\n410 Gone at resourceVersion {stale} (etcd compacted at {revision}): relisted "
              f"{lists.count('Pod') - pod_lists}x, the cache holds the apiserver's 25 pods")
    finally:
        healed.set()
        cache.stop()
        api.close()
