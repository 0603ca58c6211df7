"""The evictor's API calls and events (issue 22): as Volcano's (pkg/scheduler/cache/cache.go), a Warning `Evict`
on the pod and a Normal `Evict` on its PodGroup, both naming the objects' uids, and the pod deleted."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from scheduler.cache.events import EventRecorder
from scheduler.cache.evictor import Evictor
from scheduler.cache.store import Stores


class DeletingKube:
    """Records the calls; a DELETE also drops the pod from the store, as a fast watch would."""

    def __init__(self, stores: Stores) -> None:
        self.stores = stores
        self.calls: list[tuple[str, str]] = []

    def request(self, method: str, path: str, **_: object) -> dict:
        self.calls.append((method, path))
        with self.stores.lock:
            self.stores.pods.objects.pop("ns/victim", None)
        return {}


def test_an_eviction_deletes_the_pod_and_reports_it_on_the_pod_and_its_podgroup() -> None:
    stores = Stores()
    stores.pods.objects["ns/victim"] = {"metadata": {
        "name": "victim", "namespace": "ns", "uid": "pod-uid",
        "annotations": {"scheduling.k8s.io/group-name": "low"}}}
    stores.podgroups.objects["ns/low"] = {"metadata": {"name": "low", "namespace": "ns", "uid": "pg-uid"}}
    kube = DeletingKube(stores)
    events = EventRecorder(kube, stores, lambda: 0.0, "test", threading.Event())  # type: ignore[arg-type]
    evictor = Evictor(kube, stores, ThreadPoolExecutor(1), events, lambda: True, 0)  # type: ignore[arg-type]

    evictor.evict("ns/victim", "preempted by ns/high")

    assert kube.calls == [("DELETE", "/api/v1/namespaces/ns/pods/victim")]
    sent = [events.queue.get_nowait() for _ in range(events.queue.qsize())]
    assert [(e["involvedObject"]["kind"], e["involvedObject"].get("uid"), e["type"], e["reason"]) for e in sent] == [
        ("Pod", "pod-uid", "Warning", "Evict"), ("PodGroup", "pg-uid", "Normal", "Evict")]
    assert sent[1]["message"] == "preempted by ns/high"
