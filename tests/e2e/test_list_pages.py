"""Paged lists on a real apiserver (scheduler/cache/pages.py): the pages fetched ahead of their reader hold every
object once, and a cache whose pod list was started before it existed (the scheduler's start-up) holds them all."""

from __future__ import annotations

from scheduler.cache.cluster_cache import ClusterCache
from scheduler.cache.kube import Kube
from scheduler.cache.pages import Pages, prefetch

PODS = 7


def make_pods(core_v1, namespace: str) -> set[str]:
    for i in range(PODS):
        core_v1.create_namespaced_pod(namespace, {
            "metadata": {"name": f"p{i}"},
            "spec": {"schedulerName": "nobody", "containers": [{"name": "c", "image": "registry.invalid/x"}]},
        })
    return {f"{namespace}/p{i}" for i in range(PODS)}


def test_pages_fetched_ahead_hold_every_pod_once(control_plane, core_v1, namespace):
    made = make_pods(core_v1, namespace)
    api = control_plane.api_client()
    try:
        pages = list(Pages(Kube(api), f"/api/v1/namespaces/{namespace}/pods", 2).start())
        keys = [f"{namespace}/{item['metadata']['name']}" for p in pages for item in p["items"]]
        assert (len(pages), sorted(keys)) == (4, sorted(made))
        assert [bool(p["metadata"].get("continue")) for p in pages] == [True, True, True, False]
    finally:
        api.close()


def test_a_cache_takes_the_pod_list_started_before_it(control_plane, core_v1, namespace):
    made = make_pods(core_v1, namespace)
    api = control_plane.api_client()
    kube = Kube(api, request_timeout=15.0)
    early = prefetch(kube, 2)
    cache = ClusterCache(api, {"volcano-py"}, "default", page_size=2, prefetched=early, kube=kube).start()
    try:
        assert cache.kube is kube  # one client for the early lists and the cache
        assert cache.wait_synced(30)
        assert made <= set(cache.pods.objects)
        assert cache.watcher.prefetched == {}  # both early lists were taken
        for p in early.values():  # each fetcher ended after its last page
            p._thread.join(10)
            assert not p._thread.is_alive()
    finally:
        cache.stop()
        api.close()
