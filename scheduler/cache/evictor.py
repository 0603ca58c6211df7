"""Layer `cache`: a cycle's evictions (preempt, reclaim, a partial gang given up), as Volcano and kube-scheduler
evict: a `DisruptionTarget=True` condition first, then the pod's delete with a grace period; both requests carry
the uid of the pod the cycle decided for, so neither can land on a pod recreated under the same name.

A pod already terminating is left alone.

- The condition (reason `PreemptionByScheduler`) is what a Job's `podFailurePolicy` (`onPodConditions`) and the
  training operators read to tell a preemption from a failure. It is written through the pod's `/status` as a
  strategic-merge patch carrying the cached `metadata.uid` and `metadata.resourceVersion`: the resourceVersion
  makes the apiserver refuse it (409) once the pod changed, as Volcano's UpdateStatus of its cached pod does
  (pkg/scheduler/cache/cache.go, defaultEvictor.Evict). A 409 is then told apart by reading the pod again: another
  uid (recreated) or no pod means nothing is evicted; the same uid (only its status or labels moved on) is
  patched again with the fresh resourceVersion, a few times at most.
- The delete carries `preconditions.uid` (Volcano's and kube-scheduler's deletes, pkg/scheduler/util DeletePod,
  name the pod only): a pod recreated between the condition and the delete answers 409 and lives.
- A condition that could not be written for another reason (403, 5xx, a timeout) leaves the pod running, as in
  Volcano and kube-scheduler: the next cycle decides again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from scheduler.api.pod import GROUP_NAME_ANNOTATION
from scheduler.api.snapshot import Eviction
from scheduler.api.timestamps import rfc3339
from scheduler.cache.events import EventRecorder
from scheduler.cache.kube import STRATEGIC_PATCH, Kube, KubeError
from scheduler.cache.store import Stores

log = logging.getLogger("volcano_py.cache")

DISRUPTION_TARGET = "DisruptionTarget"  # k8s.io/api/core/v1 PodConditionType DisruptionTarget
PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"  # v1.PodReasonPreemptionByScheduler
CONFLICT_RETRIES = 3  # condition patches after a 409 on a pod of the same uid (its status moving on meanwhile)
MAX_UID = 128  # a uid is a 36-char UUID; anything longer than this is not one the apiserver made
MAX_RESOURCE_VERSION = 64
MAX_NAME = 253
MAX_MESSAGE = 1024


@dataclass(frozen=True, slots=True)
class Victim:
    """The pod the cycle decided to evict, as the cache saw it: the fields the requests carry, parsed once."""

    namespace: str
    name: str
    uid: str
    resource_version: str | None  # None: the cached copy had none; the uid alone still guards the requests
    scheduler_name: str
    group: str | None


def _bounded_str(value: Any, limit: int) -> str | None:
    return value if isinstance(value, str) and 0 < len(value) <= limit else None


def _meta(pod: Mapping[str, Any] | None) -> Mapping[str, Any]:
    meta = pod.get("metadata") if isinstance(pod, Mapping) else None
    return meta if isinstance(meta, Mapping) else {}


def _uid(pod: Mapping[str, Any] | None) -> Any:
    return _meta(pod).get("uid")


def _terminating(pod: Mapping[str, Any]) -> bool:
    return bool(_meta(pod).get("deletionTimestamp"))


def victim_of(task_key: str, pod: Mapping[str, Any]) -> Victim | str:
    """The victim's identity, or why it has none a request could safely carry (a typed reason, logged once)."""
    namespace, sep, name = task_key.partition("/")
    if not sep or not _bounded_str(namespace, MAX_NAME) or not _bounded_str(name, MAX_NAME):
        return "no namespace/name in the task key"
    meta = _meta(pod)
    uid = _bounded_str(meta.get("uid"), MAX_UID)
    if uid is None:
        return "the cached pod has no readable metadata.uid"
    spec = pod.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    annotations = meta.get("annotations")
    annotations = annotations if isinstance(annotations, Mapping) else {}
    return Victim(
        namespace, name, uid,
        _bounded_str(meta.get("resourceVersion"), MAX_RESOURCE_VERSION),
        _bounded_str(spec.get("schedulerName"), MAX_NAME) or "volcano-py",
        _bounded_str(annotations.get(GROUP_NAME_ANNOTATION), MAX_NAME),
    )


class Evictor:
    def __init__(
        self, kube: Kube, stores: Stores, pool: ThreadPoolExecutor, events: EventRecorder,
        may_write: Callable[[], bool], grace_seconds: int, *,
        decided: Callable[[str], Mapping[str, Any] | None] | None = None,
        clock: Callable[[], float] = time.time,
    ):
        self.kube = kube
        self.stores = stores
        self.pool = pool
        self.events = events
        self.may_write = may_write
        self.grace_seconds = grace_seconds
        # The pod of a task key as the cycle that decided the eviction saw it (the snapshot's copy); the watch
        # may have replaced the store's copy since. None: the store's copy is the one decided for.
        self.decided = decided
        self.clock = clock

    def submit(self, evictions: Iterable[Eviction]) -> list[Future[None]]:
        return [self.pool.submit(self.evict, e.task, e.reason) for e in evictions]

    def evict(self, task_key: str, reason: str) -> None:
        if not self.may_write():
            return
        with self.stores.lock:
            current = self.stores.pods.objects.get(task_key)
        decided = self.decided(task_key) if self.decided is not None else None
        if decided is None:
            decided = current
        if decided is None:
            log.debug("evict %s: not in the cache any more (deleted)", task_key)
            return
        victim = victim_of(task_key, decided)
        if isinstance(victim, str):
            log.warning("evict %s: not evicted: %s", task_key, victim)
            return
        if current is None:
            log.debug("evict %s: deleted since the cycle decided", task_key)
            return
        if _uid(current) != victim.uid:
            log.info("evict %s: not evicted: recreated (uid %s) since the cycle decided for uid %s",
                     task_key, _uid(current), victim.uid)
            return
        if _terminating(current):
            return  # already terminating: the watch has shown our (or somebody's) delete
        if not self._mark_disruption_target(task_key, victim, reason):
            return
        # The events once the condition landed on the pod decided for (the store still holds it: nothing deleted
        # it yet, so the events name its uid), as Volcano records them (pkg/scheduler/cache/cache.go:
        # defaultEvictor.Evict a Warning on the pod, SchedulerCache.Evict a Normal one on its PodGroup).
        self.events.record("Pod", task_key, "Warning", "Evict", f"Pod is evicted: {reason}")
        if victim.group:
            self.events.record("PodGroup", f"{victim.namespace}/{victim.group}", "Normal", "Evict", reason)
        self._delete(task_key, victim)

    def _mark_disruption_target(self, task_key: str, victim: Victim, reason: str) -> bool:
        """Write `DisruptionTarget=True` on the victim; False: the pod is not to be deleted (gone, recreated,
        terminating, or the write failed)."""
        path = f"/api/v1/namespaces/{victim.namespace}/pods/{victim.name}/status"
        condition = {
            "type": DISRUPTION_TARGET,
            "status": "True",
            "reason": PREEMPTION_BY_SCHEDULER,
            "message": f"{victim.scheduler_name}: {reason}"[:MAX_MESSAGE],
            "lastTransitionTime": rfc3339(self.clock()),
        }
        resource_version = victim.resource_version
        for attempt in range(CONFLICT_RETRIES + 1):
            meta: dict[str, str] = {"uid": victim.uid}
            if resource_version is not None:
                meta["resourceVersion"] = resource_version
            try:
                self.kube.request("PATCH", path, body={"metadata": meta, "status": {"conditions": [condition]}},
                                  content_type=STRATEGIC_PATCH)
                return True
            except KubeError as exc:
                if exc.status == 404:
                    log.debug("evict %s: deleted before its DisruptionTarget condition", task_key)
                    return False
                # 409: the resourceVersion moved on; 422: no resourceVersion was sent and the patch tried to change
                # the (immutable) uid. Either way the pod is read again to tell which.
                if exc.status not in (409, 422):
                    log.warning("evict %s: DisruptionTarget condition not written, not evicted: %s", task_key, exc)
                    return False
                failure = exc
            except Exception as exc:  # noqa: BLE001
                log.warning("evict %s: DisruptionTarget condition not written, not evicted: %s", task_key, exc)
                return False
            fresh = self._read(task_key, victim)
            if fresh is None:
                return False
            if _uid(fresh) != victim.uid:
                log.info("evict %s: not evicted: recreated (uid %s) since the cycle decided for uid %s",
                         task_key, _uid(fresh), victim.uid)
                return False
            if _terminating(fresh):
                log.debug("evict %s: already terminating", task_key)
                return False
            fresh_rv = _bounded_str(_meta(fresh).get("resourceVersion"), MAX_RESOURCE_VERSION)
            if failure.status != 409 or fresh_rv is None or attempt == CONFLICT_RETRIES:
                log.warning("evict %s: DisruptionTarget condition not written, not evicted: %s", task_key, failure)
                return False
            resource_version = fresh_rv
        return False  # pragma: no cover - the loop returns

    def _read(self, task_key: str, victim: Victim) -> dict[str, Any] | None:
        """The pod as it is now; None (logged) when gone or unreadable."""
        try:
            fresh = self.kube.get_or_none(f"/api/v1/namespaces/{victim.namespace}/pods/{victim.name}")
        except Exception as exc:  # noqa: BLE001
            log.warning("evict %s: not evicted: reading the pod after a conflict failed: %s", task_key, exc)
            return None
        if fresh is None:
            log.debug("evict %s: deleted before its DisruptionTarget condition", task_key)
        return fresh

    def _delete(self, task_key: str, victim: Victim) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "gracePeriodSeconds": self.grace_seconds,
            "preconditions": {"uid": victim.uid},
        }
        try:
            self.kube.request("DELETE", f"/api/v1/namespaces/{victim.namespace}/pods/{victim.name}", body=body)
        except KubeError as exc:
            if exc.status == 404:
                log.debug("evict %s: deleted before our delete", task_key)
            elif exc.status == 409:  # preconditions.uid: another pod of that name now; it is left alone
                log.info("evict %s: not deleted: recreated since uid %s was marked", task_key, victim.uid)
            else:
                log.warning("evict %s failed: %s", task_key, exc)
        except Exception as exc:  # noqa: BLE001
            log.warning("evict %s failed: %s", task_key, exc)
