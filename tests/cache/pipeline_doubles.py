"""Test doubles for the pipelined apply (tests/cache/test_pipelined_apply.py): an apiserver answering binds and
status patches, whose binds can be held or refused, and whose watch shows a landed bind in the cache."""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from typing import Any

from scheduler.api.timestamps import rfc3339
from scheduler.cache.cluster_cache import ClusterCache
from scheduler.cache.kube import KubeError
from scheduler.sim.objects import node_object, pod_object

NOW = 1_800_000_000.0
Obj = dict[str, Any]


class Apiserver:
    """Binds: held while the pod's name is in `held` (until `release`), refused (409) while `refuse(name)` says
    so; a bind that lands is recorded and shown by the watch (the pod with its nodeName) before the answer. PodGroup
    status patches are recorded in the order they arrive and answered with the object patched."""

    request_timeout = 5.0

    def __init__(self, cache: ClusterCache, refuse: Callable[[str], bool] = lambda _: False,
                 delay: Callable[[str], float] = lambda _: 0.0):
        self.cache, self.refuse, self.delay = cache, refuse, delay
        self.lock = threading.Lock()
        self.held: dict[str, threading.Event] = {}
        self.bind_requests: list[str] = []  # pod keys, as the requests arrive
        self.landed: list[tuple[str, str]] = []  # (pod key, node) of the binds carried out
        self.status_patches: list[tuple[str, str]] = []  # (PodGroup key, phase) as written
        self.log: list[tuple[str, str]] = []  # (method, path) of every request as it arrives, ("ANSWERED", path)
        self.arrived = threading.Condition(self.lock)

    def hold(self, *keys: str) -> None:
        for key in keys:
            self.held[key] = threading.Event()

    def release(self) -> None:
        for gate in self.held.values():
            gate.set()

    def wait_for_binds(self, keys: set[str], timeout: float = 10.0) -> bool:
        """Until a bind request for every pod of `keys` has arrived (True), or the timeout (False)."""
        return self.wait_until(lambda sent: keys <= sent, timeout)

    def wait_until(self, condition: Callable[[set[str]], bool], timeout: float = 10.0) -> bool:
        """Until `condition(pods whose bind request arrived)` holds (True), or the timeout (False)."""
        with self.arrived:
            return self.arrived.wait_for(lambda: condition(set(self.bind_requests)), timeout)

    def request(self, method: str, path: str, *, body: Any = None, **_: Any) -> Obj:
        with self.lock:
            self.log.append((method, path))
        try:
            return self._answer(method, path, body)
        finally:
            with self.lock:
                self.log.append(("ANSWERED", path))

    def _answer(self, method: str, path: str, body: Any) -> Obj:
        parts = path.strip("/").split("/")
        if path.endswith("/binding"):
            return self._bind(f"{parts[3]}/{parts[5]}", body["target"]["name"])
        if method == "PATCH" and "/podgroups/" in path:
            return self._patch_podgroup(f"{parts[4]}/{parts[6]}", body)
        if method == "PATCH" and "/queues/" in path:
            with self.cache.lock:
                queue = copy.deepcopy(self.cache.queues.objects.get(parts[4]) or {})
            queue.setdefault("status", {}).update((body or {}).get("status") or {})
            return queue
        return {}

    def get_or_none(self, path: str) -> Obj | None:
        parts = path.strip("/").split("/")
        with self.cache.lock:
            pod = self.cache.pods.objects.get(f"{parts[3]}/{parts[5]}")
        return copy.deepcopy(pod) if pod is not None else None

    def _bind(self, key: str, node: str) -> Obj:
        with self.arrived:
            self.bind_requests.append(key)
            self.arrived.notify_all()
            gate = self.held.get(key)
        if gate is not None:
            gate.wait(30.0)
        seconds = self.delay(key)
        if seconds > 0:
            threading.Event().wait(seconds)  # a slow apiserver, not a synchronisation
        if self.refuse(key):
            raise KubeError(409, "POST", key, b'{"message": "conflict"}')
        with self.cache.lock:
            pod = copy.deepcopy(self.cache.pods.objects.get(key))
        if pod is None:
            raise KubeError(404, "POST", key, b"{}")
        with self.lock:
            self.landed.append((key, node))
        pod["spec"]["nodeName"] = node
        pod["metadata"]["resourceVersion"] = str(int(pod["metadata"]["resourceVersion"]) + 1)
        self.cache.watcher._on_event(self.cache.pods, "MODIFIED", pod)  # the watch shows it
        return {}

    def _patch_podgroup(self, key: str, body: Obj) -> Obj:
        with self.cache.lock:
            pg = copy.deepcopy(self.cache.podgroups.objects.get(key) or {})
        if "status" in body:
            pg["status"] = {**(pg.get("status") or {}), **body["status"]}
            with self.lock:
                self.status_patches.append((key, str(body["status"].get("phase"))))
        if "metadata" in body:
            pg.setdefault("metadata", {}).setdefault("annotations", {}).update(body["metadata"]["annotations"])
        return pg

    def close_streams(self) -> None: ...

    def close(self) -> None: ...


def cache_with(nodes: dict[str, int]) -> tuple[ClusterCache, Apiserver]:
    """A cache (no watches running) holding these nodes (name -> CPUs) and the default Queue."""
    cache = ClusterCache(None, {"volcano-py"}, "default", clock=lambda: NOW, incremental=True)
    api = Apiserver(cache)
    cache.kube = api  # type: ignore[assignment]
    add(cache, cache.queues, {"metadata": {"name": "default", "resourceVersion": "1"}, "spec": {"weight": 1}})
    for name, cpu in nodes.items():
        add(cache, cache.nodes, node_object(name, cpu=str(cpu), memory="64Gi"))
    return cache, api


def add(cache: ClusterCache, watched: Any, obj: Obj) -> None:
    obj["metadata"].setdefault("resourceVersion", "1")
    obj["metadata"].setdefault("creationTimestamp", rfc3339(NOW - 10))
    obj["metadata"].setdefault("uid", f"uid-{obj['metadata'].get('namespace', '')}-{obj['metadata']['name']}")
    cache.watcher._on_event(watched, "ADDED", obj)


def add_gang(cache: ClusterCache, name: str, size: int, cpu: int = 1) -> list[str]:
    """A PodGroup of `size` pods of `cpu` CPUs each, all pending; their keys."""
    add(cache, cache.podgroups, {"metadata": {"name": name, "namespace": "ns"},
                                 "spec": {"minMember": size, "queue": "default"}, "status": {"phase": "Pending"}})
    keys = []
    for i in range(size):
        pod = pod_object(f"{name}-{i}", namespace="ns", group=name, cpu=str(cpu), memory="1Gi")
        add(cache, cache.pods, pod)
        keys.append(f"ns/{name}-{i}")
    return keys


def delete_pod(cache: ClusterCache, key: str) -> None:
    with cache.lock:
        pod = cache.pods.objects.get(key)
    if pod is not None:
        cache.watcher._on_event(cache.pods, "DELETED", copy.deepcopy(pod))
