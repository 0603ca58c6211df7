"""Layer `cache`: a cycle's evictions (preempt, reclaim, a partial gang given up), as pod deletes with a grace
period; a pod already terminating is left alone."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor

from scheduler.api.pod import GROUP_NAME_ANNOTATION
from scheduler.api.snapshot import Eviction
from scheduler.cache.events import EventRecorder
from scheduler.cache.kube import Kube, KubeError
from scheduler.cache.store import Stores

log = logging.getLogger("volcano_py.cache")


class Evictor:
    def __init__(
        self, kube: Kube, stores: Stores, pool: ThreadPoolExecutor, events: EventRecorder,
        may_write: Callable[[], bool], grace_seconds: int,
    ):
        self.kube = kube
        self.stores = stores
        self.pool = pool
        self.events = events
        self.may_write = may_write
        self.grace_seconds = grace_seconds

    def submit(self, evictions: Iterable[Eviction]) -> list[Future[None]]:
        return [self.pool.submit(self.evict, e.task, e.reason) for e in evictions]

    def evict(self, task_key: str, reason: str) -> None:
        if not self.may_write():
            return
        with self.stores.lock:
            pod = self.stores.pods.objects.get(task_key) or {}
            if (pod.get("metadata") or {}).get("deletionTimestamp"):
                return  # already terminating: the watch has shown our (or somebody's) delete
        namespace, name = task_key.split("/", 1)
        # The events first, while the pod is still in the store (they name its uid; after the delete the watch
        # may already have dropped it), as Volcano does (pkg/scheduler/cache/cache.go: defaultEvictor.Evict on
        # the pod, SchedulerCache.Evict a Normal one on its PodGroup).
        self.events.record("Pod", task_key, "Warning", "Evict", f"Pod is evicted: {reason}")
        group = ((pod.get("metadata") or {}).get("annotations") or {}).get(GROUP_NAME_ANNOTATION)
        if group:
            self.events.record("PodGroup", f"{namespace}/{group}", "Normal", "Evict", reason)
        try:
            self.kube.request(
                "DELETE",
                f"/api/v1/namespaces/{namespace}/pods/{name}",
                body={"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": self.grace_seconds},
            )
        except KubeError as exc:
            if exc.status != 404:
                log.warning("evict %s failed: %s", task_key, exc)
            return
        except Exception as exc:  # noqa: BLE001
            log.warning("evict %s failed: %s", task_key, exc)
