"""The pod watch tells the loop when a pending pod of this scheduler is added (`--schedule-on-arrival`), and only
then: not for another scheduler's pod, a bound pod, a change to a pod it already had, or (`--active-shards`) a
pod of a job another replica schedules."""

from __future__ import annotations

import threading

from scheduler.cache.cluster_cache import ClusterCache
from scheduler.cache.watch import Watcher


def pod(name: str, scheduler: object = "volcano-py", node: str | None = None) -> dict:
    spec: dict = {"schedulerName": scheduler, "containers": [{"name": "c"}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "namespace": "ns", "uid": name, "resourceVersion": "1"}, "spec": spec}


def test_only_an_added_pending_pod_of_ours_wakes_the_loop() -> None:
    cache = ClusterCache(None, {"volcano-py"}, "default")
    watcher = Watcher(None, cache.stores, cache.parser, threading.Event(), watch_timeout=1,  # type: ignore[arg-type]
                      page_size=10)
    woken: list[int] = []
    watcher.on_pending = lambda: woken.append(1)
    pods = cache.stores.pods
    watcher._on_event(pods, "ADDED", pod("other", scheduler="default-scheduler"))
    watcher._on_event(pods, "ADDED", pod("bound", node="n1"))
    assert woken == []
    watcher._on_event(pods, "ADDED", pod("mine"))
    assert woken == [1]
    watcher._on_event(pods, "MODIFIED", pod("mine"))
    watcher._on_event(pods, "ADDED", pod("odd", scheduler=["volcano-py"]))  # type: ignore[arg-type]
    assert woken == [1]


def test_a_pod_whose_spec_is_not_an_object_is_stored_without_stopping_the_watch() -> None:
    cache = ClusterCache(None, {"volcano-py"}, "default")
    watcher = Watcher(None, cache.stores, cache.parser, threading.Event(), watch_timeout=1,  # type: ignore[arg-type]
                      page_size=10)
    cache.stores.assumed["ns/odd"] = ("n1", 0.0)
    odd = pod("odd") | {"spec": ["nodeName", "n1"]}
    watcher._on_event(cache.stores.pods, "MODIFIED", odd)
    assert cache.stores.pods.objects["ns/odd"]["spec"] == ["nodeName", "n1"]
    assert "ns/odd" in cache.stores.assumed  # a spec naming no node does not end the pod's assumed bind


def test_a_pending_pod_of_a_job_another_active_replica_schedules_wakes_nothing() -> None:
    cache = ClusterCache(None, {"volcano-py"}, "default")
    watcher = Watcher(None, cache.stores, cache.parser, threading.Event(), watch_timeout=1,  # type: ignore[arg-type]
                      page_size=10)
    cache.parser.light_of = {"ns/theirs"}.__contains__  # (cache/active.py `reads_light`)
    woken: list[int] = []
    watcher.on_pending = lambda: woken.append(1)
    theirs, mine = pod("t"), pod("m")
    theirs["metadata"]["annotations"] = {"scheduling.k8s.io/group-name": "theirs"}
    mine["metadata"]["annotations"] = {"scheduling.k8s.io/group-name": "mine"}
    watcher._on_event(cache.stores.pods, "ADDED", theirs)
    assert woken == []
    watcher._on_event(cache.stores.pods, "ADDED", mine)
    assert woken == [1]
