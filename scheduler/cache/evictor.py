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
- The delete names no grace period, as Volcano's (cache.go, defaultEvictor.Evict: `metav1.DeleteOptions{}`) and
  kube-scheduler's (pkg/scheduler/util DeletePod) do: the pod's own `terminationGracePeriodSeconds` applies
  (30 s unless it says otherwise). `grace_seconds` overrides it only when set (tests, tools).
- The cause (`EvictCause`) is written into the condition's message, and as JSON (api/evictions.py) on the events:
  the Warning `Evict` on the pod and the Normal `Evict` on its PodGroup, as Volcano records them, and a Normal
  `EvictedForJob` on the PodGroup of the job the room is for, so `explain` shows either side from the cluster.

An eviction with a notice (its queue's `volcano-py.io/eviction-notice`, docs/preemption.md) first annotates the
victim with its deadline and cause (a patch carrying the decided uid and resourceVersion, as the condition's)
and writes the condition; the snapshot then reads the pod as releasing (api/pod.py), so its room is the
preemptor's and it is not chosen again. Every `apply` deletes the victims whose deadline passed, through the same
condition-then-delete path, re-checking the uid. The deadline lives on the pod only: a scheduler that starts (or
becomes the leader) reads every pod's annotation once and carries on.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from scheduler.api import fields as F
from scheduler.api.evictions import EVENT_CAUSED, POD_CAUSE, POD_NOTICE, cause_json, describe
from scheduler.api.pod import GROUP_NAME_ANNOTATION
from scheduler.api.snapshot import EvictCause, Eviction
from scheduler.api.timestamps import rfc3339
from scheduler.cache.events import EventRecorder
from scheduler.cache.kube import STRATEGIC_PATCH, TRANSPORT_ERRORS, Kube, KubeError
from scheduler.cache.store import Stores

log = logging.getLogger("volcano_py.cache")

DISRUPTION_TARGET = "DisruptionTarget"  # k8s.io/api/core/v1 PodConditionType DisruptionTarget
PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"  # v1.PodReasonPreemptionByScheduler
CONFLICT_RETRIES = 3  # condition patches after a 409 on a pod of the same uid (its status moving on meanwhile)
MAX_UID = 128  # a uid is a 36-char UUID; anything longer than this is not one the apiserver made
MAX_RESOURCE_VERSION = 64
MAX_NAME = 253
MAX_MESSAGE = 1024
F_NOTICE = F.field("Pod", f"metadata.annotations[{POD_NOTICE}]")


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


def _disruption_target(pod: Mapping[str, Any]) -> bool:
    status = pod.get("status")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    return isinstance(conditions, list) and any(
        isinstance(c, Mapping) and c.get("type") == DISRUPTION_TARGET and c.get("status") == "True" for c in conditions)


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
        may_write: Callable[[], bool], grace_seconds: int | None = None, *,
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
        # Victims given notice: task key -> (deadline, uid). Read from the pods when this replica starts writing
        # (`due`), so the pods' annotations, not this memory, are the state.
        self._noticed: dict[str, tuple[float, str]] = {}
        self._seeded = False

    def submit(self, evictions: Iterable[Eviction]) -> list[Future[None]]:
        return [self.pool.submit(self.evict, e.task, e.reason, e.cause, e.notice) for e in evictions]

    def evict(self, task_key: str, reason: str, cause: EvictCause | None = None, notice: float = 0.0) -> None:
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
        message = f"{reason} ({describe(cause)})" if cause is not None and reason else reason
        if notice > 0:
            deadline = self.clock() + notice
            if not self._give_notice(task_key, victim, deadline, cause):
                return
            if not self._mark_disruption_target(task_key, victim, message, fresh=True):
                return  # the deadline stands: the delete writes the condition again
            self._record(task_key, victim, f"{message}; deleted after a notice until {rfc3339(deadline)}", cause)
            return
        if not self._mark_disruption_target(task_key, victim, message):
            return
        self._record(task_key, victim, message, cause)
        self._delete(task_key, victim)

    def _record(self, task_key: str, victim: Victim, message: str, cause: EvictCause | None) -> None:
        """The events once the condition landed on the pod decided for (the store still holds it: nothing deleted
        it yet, so the events name its uid), as Volcano records them (pkg/scheduler/cache/cache.go:
        defaultEvictor.Evict a Warning on the pod, SchedulerCache.Evict a Normal one on its PodGroup), and one on
        the PodGroup of the job the room is made for."""
        group = f"{victim.namespace}/{victim.group}" if victim.group else ""
        data = {POD_CAUSE: cause_json(cause, task_key, group)} if cause is not None else None
        self.events.record("Pod", task_key, "Warning", "Evict", f"Pod is evicted: {message}", data)
        if group:
            self.events.record("PodGroup", group, "Normal", "Evict", message, data)
        if cause is not None and "/" in cause.by and cause.by != group:
            self.events.record("PodGroup", cause.by, "Normal", EVENT_CAUSED,
                               f"evicted pod {task_key} ({describe(cause)})"[:MAX_MESSAGE], data)

    # ---- the notice --------------------------------------------------------------------------------------
    def _give_notice(self, task_key: str, victim: Victim, deadline: float, cause: EvictCause | None) -> bool:
        """Annotate the victim with its deadline (and cause), guarded by the decided uid and resourceVersion; True
        once it landed (the deadline is then remembered here too)."""
        group = f"{victim.namespace}/{victim.group}" if victim.group else ""
        annotations = {POD_NOTICE: rfc3339(deadline)}
        if cause is not None:
            annotations[POD_CAUSE] = cause_json(cause, task_key, group)
        path = f"/api/v1/namespaces/{victim.namespace}/pods/{victim.name}"
        if self._guarded_patch(task_key, victim, path, {"metadata": {"annotations": annotations}},
                               "eviction notice") is None:
            return False
        with self.stores.lock:
            self._noticed[task_key] = (deadline, victim.uid)
        log.info("evict %s: notice given until %s", task_key, rfc3339(deadline))
        return True

    def due(self) -> list[Future[None]]:
        """Delete the victims whose notice ran out (called by every apply). On the first call that may write,
        every cached pod's notice annotation is read: a scheduler restarted (or a new leader) keeps the deadlines
        another process gave."""
        if not self.may_write():
            self._seeded = False
            return []
        now = self.clock()
        with self.stores.lock:
            if not self._seeded:
                self._seeded = True
                for key, pod in self.stores.pods.objects.items():
                    noticed = noticed_until(key, pod)
                    if noticed is not None:
                        self._noticed.setdefault(key, noticed)
            due = [(key, uid) for key, (deadline, uid) in self._noticed.items() if deadline <= now]
            for key, _ in due:
                del self._noticed[key]
        return [self.pool.submit(self._delete_noticed, key, uid) for key, uid in due]

    def _delete_noticed(self, task_key: str, uid: str) -> None:
        with self.stores.lock:
            current = self.stores.pods.objects.get(task_key)
        if current is None or _uid(current) != uid or _terminating(current):
            log.debug("evict %s: noticed pod gone, recreated or terminating: nothing to delete", task_key)
            return
        victim = victim_of(task_key, current)
        if isinstance(victim, str):
            log.warning("evict %s: not evicted: %s", task_key, victim)
            return
        log.info("evict %s: notice ran out; deleting", task_key)
        if (not _disruption_target(current) and not self._mark_disruption_target(
                task_key, victim, "its eviction notice ran out")) or not self._delete(task_key, victim):
            with self.stores.lock:  # not written (the pod is still there, the same): the next apply tries again
                self._noticed.setdefault(task_key, (self.clock(), uid))

    def _mark_disruption_target(self, task_key: str, victim: Victim, reason: str, *, fresh: bool = False) -> bool:
        """Write `DisruptionTarget=True` on the victim; False: the pod is not to be deleted (gone, recreated,
        terminating, or the write failed). `fresh`: the pod was just patched, so its resourceVersion moved on."""
        path = f"/api/v1/namespaces/{victim.namespace}/pods/{victim.name}/status"
        condition = {
            "type": DISRUPTION_TARGET,
            "status": "True",
            "reason": PREEMPTION_BY_SCHEDULER,
            "message": f"{victim.scheduler_name}: {reason}"[:MAX_MESSAGE],
            "lastTransitionTime": rfc3339(self.clock()),
        }
        if fresh:
            victim = Victim(victim.namespace, victim.name, victim.uid, None, victim.scheduler_name, victim.group)
        return self._guarded_patch(task_key, victim, path, {"status": {"conditions": [condition]}},
                                   "DisruptionTarget condition") is not None

    def _guarded_patch(self, task_key: str, victim: Victim, path: str, body: dict[str, Any],
                       what: str) -> dict[str, Any] | None:
        """A strategic-merge patch carrying the victim's uid and resourceVersion: the patched pod, or None (logged)
        when it is gone, recreated, terminating, or the write failed."""
        resource_version = victim.resource_version
        for attempt in range(CONFLICT_RETRIES + 1):
            meta: dict[str, Any] = {**(body.get("metadata") or {}), "uid": victim.uid}
            if resource_version is not None:
                meta["resourceVersion"] = resource_version
            try:
                patched = self.kube.request("PATCH", path, body={**body, "metadata": meta},
                                            content_type=STRATEGIC_PATCH)
                return patched if isinstance(patched, dict) else {}
            except KubeError as exc:
                if exc.status == 404:
                    log.debug("evict %s: deleted before its %s", task_key, what)
                    return None
                # 409: the resourceVersion moved on; 422: no resourceVersion was sent and the patch tried to change
                # the (immutable) uid. Either way the pod is read again to tell which.
                if exc.status not in (409, 422):
                    log.warning("evict %s: %s not written, not evicted: %s", task_key, what, exc)
                    return None
                failure = exc
            except TRANSPORT_ERRORS as exc:
                log.warning("evict %s: %s not written, not evicted: %s", task_key, what, exc)
                return None
            fresh = self._read(task_key, victim)
            if fresh is None:
                return None
            if _uid(fresh) != victim.uid:
                log.info("evict %s: not evicted: recreated (uid %s) since the cycle decided for uid %s",
                         task_key, _uid(fresh), victim.uid)
                return None
            if _terminating(fresh):
                log.debug("evict %s: already terminating", task_key)
                return None
            fresh_rv = _bounded_str(_meta(fresh).get("resourceVersion"), MAX_RESOURCE_VERSION)
            if failure.status != 409 or fresh_rv is None or attempt == CONFLICT_RETRIES:
                log.warning("evict %s: %s not written, not evicted: %s", task_key, what, failure)
                return None
            resource_version = fresh_rv
        return None  # pragma: no cover - the loop returns

    def _read(self, task_key: str, victim: Victim) -> dict[str, Any] | None:
        """The pod as it is now; None (logged) when gone or unreadable."""
        try:
            fresh = self.kube.get_or_none(f"/api/v1/namespaces/{victim.namespace}/pods/{victim.name}")
        except TRANSPORT_ERRORS as exc:
            log.warning("evict %s: not evicted: reading the pod after a conflict failed: %s", task_key, exc)
            return None
        if fresh is None:
            log.debug("evict %s: deleted before its DisruptionTarget condition", task_key)
        return fresh

    def _delete(self, task_key: str, victim: Victim) -> bool:
        """The delete; False only when it failed and the pod may still be there (worth another try)."""
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": victim.uid}}
        if self.grace_seconds is not None:  # else the pod's own terminationGracePeriodSeconds, as Volcano's delete
            body["gracePeriodSeconds"] = self.grace_seconds
        try:
            self.kube.request("DELETE", f"/api/v1/namespaces/{victim.namespace}/pods/{victim.name}", body=body)
        except KubeError as exc:
            if exc.status == 404:
                log.debug("evict %s: deleted before our delete", task_key)
            elif exc.status == 409:  # preconditions.uid: another pod of that name now; it is left alone
                log.info("evict %s: not deleted: recreated since uid %s was marked", task_key, victim.uid)
            else:
                log.warning("evict %s failed: %s", task_key, exc)
                return False
        except TRANSPORT_ERRORS as exc:
            log.warning("evict %s failed: %s", task_key, exc)
            return False
        return True


def noticed_until(task_key: str, pod: Mapping[str, Any]) -> tuple[float, str] | None:
    """(deadline, uid) of a pod carrying an eviction notice (api/evictions.py), read through the table; None for
    a pod without one, or one already terminating. An unreadable deadline reads as due now (logged once, here)."""
    meta = _meta(pod)
    annotations = meta.get("annotations")
    if not isinstance(annotations, Mapping) or POD_NOTICE not in annotations or _terminating(pod):
        return None
    uid = _bounded_str(meta.get("uid"), MAX_UID)
    if uid is None:
        return None
    sink: list[F.FieldInvalid] = []
    deadline = F_NOTICE.read(annotations.get(POD_NOTICE), task_key, sink)
    if sink:
        log.warning("evict %s: %s: the notice is taken as due now", task_key, sink[0])
    return float(deadline), uid
