"""Layer `cache`: the status the scheduler owns, written back after a cycle: PodGroup status, Queue
`status.allocated`, and the `PodScheduled=False` condition on pending pods of an Unschedulable gang.

A status is patched only when it differs from what the watch last showed; the patched object replaces the
cached one, so the next cycle reads what was written.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from scheduler.adapter.podgroup_status import status_body
from scheduler.api.convert import group_of, plain_group_of
from scheduler.api.field_parsers import BadValueError
from scheduler.api.objects import MutableObj
from scheduler.api.owner_gang import owner_group_name
from scheduler.api.resources import Resource
from scheduler.api.snapshot import CycleResult, PodGroupStatus, reasons_annotation
from scheduler.api.timestamps import rfc3339
from scheduler.api.usage import USAGE_ANNOTATION, QueueUsage, encode, parse_usage
from scheduler.cache.kube import MERGE_PATCH, STRATEGIC_PATCH, TRANSPORT_ERRORS, Kube, KubeError
from scheduler.cache.publish import publish_annotations
from scheduler.cache.store import PG_API, Stores, resource_version, trim

log = logging.getLogger("volcano_py.cache")
USAGE_WRITE_PERIOD = 60.0  # seconds between writes of a queue's usage annotation (time-based fair share)


class StatusWriter:
    def __init__(
        self, kube: Kube, stores: Stores, pool: ThreadPoolExecutor, scheduler_names: frozenset[str],
        may_write: Callable[[], bool], stop: threading.Event,
    ):
        self.kube = kube
        self.stores = stores
        self.pool = pool  # PodGroup writes: the next cycle reads them, so they are waited for
        self.scheduler_names = scheduler_names
        self.may_write = may_write
        self._stop = stop
        # Pod conditions are patched in the background: nothing in the next cycle depends on them.
        self.status_pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="volcano-py-status")
        self._condition_sent: dict[str, str] = {}  # pod key -> PodScheduled message patched (or in flight)
        # The pending pods of each job of the last snapshot (job key -> pod keys), set by the cache as it takes a
        # snapshot: the pods looked at for a condition are then those of the gangs a PodGroup says are
        # Unschedulable, not every pod of the cluster (a walk of 500,000 pods under the stores' lock each cycle:
        # 0.2-0.3 s, docs/benchmarks-history.md). With --active-shards the snapshot holds this replica's jobs
        # only, so each replica writes its own gangs' pods. None: every pod is looked at.
        self.pending: Mapping[str, tuple[str, ...]] | None = None
        # Whether PodGroup status goes through /status (our CRDs before issue 16) or the object (Volcano's CRD,
        # ours now): found out on the first write, see `_patch_podgroup_status`.
        self._pg_status_subresource = True
        self._pg_status_probed = False  # until a write has shown which: the first write goes alone

    def write(self, result: CycleResult, now: float, failed_binds: Mapping[str, int] | None = None) -> None:
        """Everything the cycle decided, after its binds: `failed_binds` (gang -> binds that failed) says which
        gangs' PodGroups may be written with the phase their landed binds give them."""
        self.write_podgroups(result.podgroups, now, failed_binds)
        self.write_podgroup_annotations(result.podgroup_annotations)
        self.write_queues(result)
        self.write_queue_usage(result, now)
        self.write_pod_conditions(now)

    def close(self) -> None:
        self.status_pool.shutdown(wait=True, cancel_futures=True)

    # ---- PodGroups --------------------------------------------------------------------------------------
    def write_podgroups(self, statuses: list[PodGroupStatus], now: float,
                        failed_binds: Mapping[str, int] | None = None) -> None:
        """Patch the PodGroups whose status changed, concurrently; waits, as the next cycle reads them. A gang
        whose binds of this cycle all landed is written with the phase they give it (`phase_when_bound`: Running),
        once, rather than Inqueue now and Running next cycle, two writes of the same PodGroup."""
        statuses = [replace(s, phase=s.phase_when_bound)
                    if s.phase_when_bound is not None and failed_binds is not None and s.job not in failed_binds
                    else s for s in statuses]
        while statuses and not self._pg_status_probed:  # one write finds out where status goes, not each worker
            self._write_podgroup(statuses[0], now)
            statuses = statuses[1:]
        for future in [self.pool.submit(self._write_podgroup, status, now) for status in statuses]:
            future.result()

    def write_podgroup_annotations(self, patches: Mapping[str, Mapping[str, str | None]]) -> None:
        """Merge-patch the PodGroup annotations plugins asked for (network-topology-aware's allocated HyperNode),
        concurrently; the stored object is replaced by the one written, so the next cycle reads it."""
        if not patches or not self.may_write():
            return
        futures = {job: self.pool.submit(publish_annotations, self.kube, job, patch) for job, patch in patches.items()}
        for job, future in futures.items():
            updated = future.result()
            if updated is None:
                continue
            trim(updated)
            with self.stores.lock:
                if job in self.stores.podgroups.objects:
                    self.stores.podgroups.objects[job] = updated

    def _write_podgroup(self, status: PodGroupStatus, now: float) -> None:
        if not self.may_write():
            return
        with self.stores.lock:
            pg = self.stores.podgroups.objects.get(status.job)
        if pg is None:
            return  # an implicit gang of one has no PodGroup object
        stored = pg.get("status")
        current = stored if isinstance(stored, dict) else {}
        wanted = status_body(status, current, now)
        annotations = (pg.get("metadata") or {}).get("annotations")
        reasons = reasons_annotation(status, annotations if isinstance(annotations, Mapping) else None)
        if all(_same(current.get(k), v) for k, v in wanted.items()):
            if reasons is not None:
                publish_annotations(self.kube, status.job, reasons)
            return
        namespace, name = status.job.split("/", 1)
        try:
            updated = self._patch_podgroup_status(namespace, name, wanted, reasons)
        except TRANSPORT_ERRORS as exc:  # retried next cycle (the status still differs)
            log.warning("patch PodGroup %s status failed: %s", status.job, exc)
            return
        trim(updated)
        with self.stores.lock:
            if status.job in self.stores.podgroups.objects:
                self.stores.podgroups.objects[status.job] = updated

    def _patch_podgroup_status(self, namespace: str, name: str, wanted: Mapping[str, Any],
                               annotations: Mapping[str, str | None] | None = None) -> MutableObj:
        """Merge-patch a PodGroup's status on either set of CRDs, and `annotations` (the reasons, `publish.py`).

        Volcano's PodGroup CRD has no status subresource (its scheduler updates the whole object,
        pkg/scheduler/cache/cache.go); volcano-py's had one until issue 16. So: write through /status while that
        works; on its 404 write through the object (a 404 there too means the PodGroup is gone) and keep doing so;
        should the object's status then not take the write, a status subresource is back: use it again. Through
        the object the annotations go in the same request (one write and one watch event where there were two);
        `/status` takes no metadata, so they go in a request of their own before it."""
        path = f"{PG_API}/namespaces/{namespace}/podgroups/{name}"
        body: MutableObj = {"status": dict(wanted)}
        self._pg_status_probed = True
        if self._pg_status_subresource:
            if annotations:
                publish_annotations(self.kube, f"{namespace}/{name}", annotations)
            try:
                return self.kube.request("PATCH", f"{path}/status", body=body, content_type=MERGE_PATCH)
            except KubeError as exc:
                if exc.status != 404:
                    raise
            updated = self.kube.request("PATCH", path, body=body, content_type=MERGE_PATCH)
            self._pg_status_subresource = False
            log.info("PodGroups have no status subresource: writing their status through the object")
            return updated
        whole = {**body, "metadata": {"annotations": dict(annotations)}} if annotations else body
        updated = self.kube.request("PATCH", path, body=whole, content_type=MERGE_PATCH)
        if all(_same((updated.get("status") or {}).get(k), v) for k, v in wanted.items()):
            return updated
        self._pg_status_subresource = True
        log.info("PodGroups have a status subresource again: writing their status through /status")
        return self.kube.request("PATCH", f"{path}/status", body=body, content_type=MERGE_PATCH)

    # ---- Queues -----------------------------------------------------------------------------------------
    def write_queues(self, result: CycleResult) -> None:
        for q in result.queues:
            with self.stores.lock:
                obj = self.stores.queues.objects.get(q.queue)
            if obj is None:
                continue
            current = (obj.get("status") or {}).get("allocated") or {}
            try:
                unchanged = Resource.from_quantities(current) == q.allocated
            except ValueError:
                unchanged = False
            if unchanged:
                continue
            # A merge patch replaces the whole map when it is given as null first; send it complete.
            allocated: dict[str, Any] = {k: None for k in current}
            allocated.update(q.allocated.to_quantities())
            try:
                updated = self.kube.request(
                    "PATCH",
                    f"{PG_API}/queues/{q.queue}/status",
                    body={"status": {"allocated": allocated}},
                    content_type=MERGE_PATCH,
                )
            except TRANSPORT_ERRORS as exc:
                log.warning("patch Queue %s status failed: %s", q.queue, exc)
                continue
            with self.stores.lock:
                if q.queue in self.stores.queues.objects:
                    self.stores.queues.objects[q.queue] = updated

    def write_queue_usage(self, result: CycleResult, now: float) -> None:
        """Time-based fair share: each queue's decayed usage into its `volcano-py.io/usage` annotation, the one
        writer of it (api/usage.py). Written when the annotation is missing, unreadable or made with other
        parameters, and otherwise once a USAGE_WRITE_PERIOD: between writes each cycle folds from the record as
        written, counting what the queue holds now since then, so a restart loses at most that period's detail."""
        for q in result.queues:
            if q.usage is None or not self.may_write():
                continue
            with self.stores.lock:
                obj = self.stores.queues.objects.get(q.queue)
            if obj is None:
                continue
            annotations = (obj.get("metadata") or {}).get("annotations") or {}
            if not _usage_due(annotations.get(USAGE_ANNOTATION), q.usage, now):
                continue
            try:
                updated = self.kube.request(
                    "PATCH",
                    f"{PG_API}/queues/{q.queue}",
                    body={"metadata": {"annotations": {USAGE_ANNOTATION: encode(q.usage)}}},
                    content_type=MERGE_PATCH,
                )
            except TRANSPORT_ERRORS as exc:  # retried next cycle (the record is still due)
                log.warning("patch Queue %s usage annotation failed: %s", q.queue, exc)
                continue
            with self.stores.lock:
                if q.queue in self.stores.queues.objects:
                    self.stores.queues.objects[q.queue] = updated

    # ---- pod conditions ---------------------------------------------------------------------------------
    def write_pod_conditions(self, now: float) -> None:
        """Pending pods of an Unschedulable gang say so on the pod too (what `kubectl describe pod` shows)."""
        with self.stores.lock:
            todo = self._conditions_to_write()
        for key, message in todo:
            self.status_pool.submit(self._write_pod_condition, key, message, now)

    def _conditions_to_write(self) -> list[tuple[str, str]]:
        """Under the lock: (pod key, message) of the pods whose PodScheduled condition is not yet the gang's."""
        messages: dict[str, str] = {}
        for key, pg in self.stores.podgroups.objects.items():
            for c in (pg.get("status") or {}).get("conditions") or ():
                if c.get("type") == "Unschedulable" and c.get("status") == "True":
                    messages[key] = str(c.get("message") or "")
        todo = []
        pods = self.stores.pods.objects
        pending = self.pending
        candidates: Iterable[tuple[str, MutableObj]] = pods.items() if pending is None else [
            (key, pod) for job in messages for key in pending.get(job, ()) if (pod := pods.get(key)) is not None]
        for key, pod in candidates:
            spec = pod.get("spec") or {}
            if (
                spec.get("nodeName")
                or key in self.stores.assumed
                or spec.get("schedulerName") not in self.scheduler_names
                or spec.get("schedulingGates")  # the apiserver's SchedulingGated condition stands (Volcano's cache.go)
            ):
                continue
            message = messages.get(group_of(pod))
            if message is None:  # a plain pod: its owner gang or the PodGroup the controllers made for it, as the
                owner = owner_group_name((pod.get("metadata") or {}).get("labels"))  # snapshot finds it
                message = messages.get(f"{(pod.get('metadata') or {}).get('namespace')}/{owner}") if owner else None
            if message is None:
                message = messages.get(plain_group_of(pod) or "")
            if message is None:
                continue
            existing: dict[str, Any] = next(
                (c for c in (pod.get("status") or {}).get("conditions") or () if c.get("type") == "PodScheduled"),
                {},
            )
            if (
                existing.get("status") == "False"
                and existing.get("reason") == "Unschedulable"
                and (existing.get("message") == message)
            ) or self._condition_sent.get(key) == message:
                continue
            self._condition_sent[key] = message
            todo.append((key, message))
        for key in [k for k in self._condition_sent if k not in pods]:
            del self._condition_sent[key]
        return todo

    def _write_pod_condition(self, key: str, message: str, now: float) -> None:
        if self._stop.is_set() or not self.may_write():
            with self.stores.lock:
                self._condition_sent.pop(key, None)
            return
        namespace, name = key.split("/", 1)
        condition = {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": message,
            "lastTransitionTime": rfc3339(now),
        }
        try:
            updated = self.kube.request(
                "PATCH",
                f"/api/v1/namespaces/{namespace}/pods/{name}/status",
                body={"status": {"conditions": [condition]}},
                content_type=STRATEGIC_PATCH,
            )
        except TRANSPORT_ERRORS as exc:
            with self.stores.lock:
                self._condition_sent.pop(key, None)  # retried next cycle
            if not (isinstance(exc, KubeError) and exc.status == 404):
                log.warning("patch pod %s condition failed: %s", key, exc)
            return
        trim(updated)
        with self.stores.lock:
            current = self.stores.pods.objects.get(key)
            if current is not None and resource_version(updated) > resource_version(current):
                self.stores.pods.objects[key] = updated


def _usage_due(written: object, usage: QueueUsage, now: float) -> bool:
    """Whether the queue's usage record is to be (re)written: none or an unreadable one, other parameters, or
    older than USAGE_WRITE_PERIOD (or in the future: a clock moved back)."""
    try:
        current = parse_usage(written)
    except BadValueError:
        return True
    if (current.half_life, current.window) != (usage.half_life, usage.window):
        return True
    return not 0 <= now - current.at < USAGE_WRITE_PERIOD


def _same(current: Any, wanted: Any) -> bool:
    if isinstance(wanted, list):
        strip = [
            {k: v for k, v in c.items() if k != "transitionID"} for c in current or () if isinstance(c, dict)
        ]
        return bool(strip == wanted)
    return bool(current == wanted) or (current is None and wanted == 0)
