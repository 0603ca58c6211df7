"""Layer `cache`: the Kubernetes implementation of the cluster adapter (`snapshot`, `apply`).

Background threads list+watch pods, nodes, PodGroups, Queues and PriorityClasses as raw JSON and keep the
latest object of each; `snapshot()` reads them through `scheduler.api.convert` exactly as
`sim.InMemoryCluster` does, and `apply()` carries a cycle's decisions back: binds, evictions, PodGroup and
Queue status, events.
"""

from __future__ import annotations

import logging
import os
import queue
import re
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from scheduler import metrics
from scheduler.api.convert import (
    group_of,
    implicit_job,
    job_from_podgroup,
    key_of,
    node_from_object,
    plain_group_of,
    queue_from_object,
    task_from_pod,
    wants_gang,
)
from scheduler.api.job import Condition, JobInfo, TaskInfo
from scheduler.api.node import NodeInfo
from scheduler.api.pod import is_preemptable, role_of, status_of
from scheduler.api.queue import QueueInfo
from scheduler.api.resources import Resource
from scheduler.api.snapshot import ClusterSnapshot, CycleResult, Event, PodGroupStatus
from scheduler.cache.kube import MERGE_PATCH, STRATEGIC_PATCH, Kube, KubeError, Obj, dumps, loads

log = logging.getLogger("volcano_py.cache")

COMPONENT = "volcano-py"
PG_API = "/apis/scheduling.volcano.sh/v1beta1"
ASSUME_TTL = 60.0  # seconds an assumed bind waits for the watch to confirm it


@dataclass(slots=True)
class Watched:
    """One resource kind: its collection path, the latest objects by key, and the watch position."""

    kind: str
    path: str
    objects: dict[str, Obj] = field(default_factory=dict)
    resource_version: str | None = None
    synced: threading.Event = field(default_factory=threading.Event)
    optional: bool = False  # a kind whose CRD may not be installed: absent counts as synced and empty


class Gone(Exception):
    """The watch position is too old (410): relist."""


def rfc3339(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: object) -> float:
    if not isinstance(value, str) or not value:
        return 0.0
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


class ClusterCache:
    def __init__(
        self,
        api_client: Any,
        scheduler_names: Iterable[str] = frozenset({"volcano-py"}),
        default_queue: str = "default",
        *,
        watch_timeout: int = 60,
        page_size: int = 1000,
        request_timeout: float = 30.0,
        bind_workers: int = 16,
        eviction_grace_seconds: int = 30,
        clock: Callable[[], float] = time.time,
        identity: str | None = None,
        event_workers: int = 2,
    ):
        self.kube = Kube(api_client, request_timeout=request_timeout)
        self.scheduler_names = frozenset(scheduler_names)
        self.default_queue = default_queue
        self.watch_timeout = watch_timeout
        self.page_size = page_size
        self.eviction_grace_seconds = eviction_grace_seconds
        self.clock = clock
        self.lock = threading.Lock()
        self.pods = Watched("Pod", "/api/v1/pods")
        self.nodes = Watched("Node", "/api/v1/nodes")
        self.podgroups = Watched("PodGroup", f"{PG_API}/podgroups")
        self.queues = Watched("Queue", f"{PG_API}/queues")
        self.priority_classes = Watched("PriorityClass", "/apis/scheduling.k8s.io/v1/priorityclasses")
        self.hypernodes = Watched("HyperNode", "/apis/topology.volcano.sh/v1alpha1/hypernodes", optional=True)
        self.watched = (self.pods, self.nodes, self.podgroups, self.queues, self.priority_classes, self.hypernodes)
        self._assumed: dict[str, tuple[str, float]] = {}  # pod key -> (node, when) bound by us, not yet seen
        self._parsed: dict[str, tuple[str, TaskInfo | None]] = {}  # pod key -> (resourceVersion, task)
        self._pcs: dict[str, int] = {}  # PriorityClass name -> value, rebuilt when one changes
        self._requests: dict[bytes, Resource] = {}  # a pod's resource fields (JSON) -> its request
        self._bad: set[tuple[str, str, str]] = (
            set()
        )  # (kind, key, resourceVersion) already logged as unreadable
        self._events_sent: set[tuple[str, str, str, str, str]] = set()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._pool = ThreadPoolExecutor(max_workers=bind_workers, thread_name_prefix="volcano-py-api")
        # Pod conditions are patched in the background: nothing in the next cycle depends on them.
        self._status_pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="volcano-py-status")
        self._condition_sent: dict[str, str] = {}  # pod key -> PodScheduled message patched (or in flight)
        # Whether PodGroup status goes through /status (our CRDs before issue 16) or the object (Volcano's CRD,
        # ours now): found out on the first write, see `_patch_podgroup_status`.
        self._pg_status_subresource = True
        self._instance = identity or f"{socket.gethostname()}-{os.getpid()}"
        # Writes (binds, evictions, status) are sent only while this returns True: the leader-election guard.
        self.may_write: Callable[[], bool] = lambda: True
        # Events leave the bind path: binds enqueue them and these threads send them.
        self._events: queue.Queue[Obj | None] = queue.Queue()
        self._binds_done = threading.Event()  # events wait while binds are in flight: binds go first
        self._binds_done.set()
        self._event_threads = [
            threading.Thread(target=self._send_events, name=f"events-{i}", daemon=True)
            for i in range(event_workers)
        ]

    @property
    def identity(self) -> str:
        """Who this scheduler is: the Lease holderIdentity and the events' reportingInstance."""
        return self._instance

    # ---- lifecycle --------------------------------------------------------------------------------------
    def start(self) -> ClusterCache:
        for t in self._event_threads:
            t.start()
        for w in self.watched:
            t = threading.Thread(target=self._run, args=(w,), name=f"watch-{w.kind}", daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def wait_synced(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        return all(w.synced.wait(max(0.0, deadline - time.monotonic())) for w in self.watched)

    def stop(self, timeout: float = 5.0) -> None:
        if self._event_threads[0].is_alive():
            self.flush_events(min(timeout, 2.0))
        self._stop.set()
        self.kube.close_streams()
        self._pool.shutdown(wait=True)
        self._status_pool.shutdown(wait=True, cancel_futures=True)
        for _ in self._event_threads:
            self._events.put(None)
        deadline = time.monotonic() + timeout
        for t in [*self._threads, *self._event_threads]:
            if t.is_alive():
                t.join(max(0.0, deadline - time.monotonic()))

    # ---- list + watch -------------------------------------------------------------------------------------
    def _run(self, w: Watched) -> None:
        backoff = 0.2
        while not self._stop.is_set():
            try:
                if w.resource_version is None:
                    self._list(w)
                self._watch(w)
                backoff = 0.2
            except Gone:
                log.info("watch %s: resourceVersion too old, relisting", w.kind)
                w.resource_version = None
            except Exception as exc:  # noqa: BLE001 - any I/O error: back off and retry, never die
                if self._stop.is_set():
                    return
                if isinstance(exc, KubeError) and exc.status == 410:
                    w.resource_version = None
                    continue
                if w.optional and isinstance(exc, KubeError) and exc.status == 404:
                    w.synced.set()  # the CRD is not installed: nothing to watch; look again later
                    self._stop.wait(60.0)
                    continue
                log.warning("watch %s failed (retrying in %.1fs): %s", w.kind, backoff, exc)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 30.0)

    def _list(self, w: Watched) -> None:
        if w is self.pods:
            # Pods are parsed as they arrive, with the priority classes: list those first (a small list).
            self.priority_classes.synced.wait(10.0)
        objects: dict[str, Obj] = {}
        meta: Obj = {}
        for page in self._pages(w.path):
            for obj in page.get("items") or ():
                _trim(obj)
                objects[key_of(obj)] = obj
                if w is self.pods:
                    self._preparse(obj)
            meta = page.get("metadata") or {}
        with self.lock:
            w.objects = objects
            if w is self.priority_classes:
                self._priority_classes_changed()
        w.resource_version = str(meta.get("resourceVersion") or "")
        w.synced.set()
        log.debug("listed %d %s at resourceVersion %s", len(objects), w.kind, w.resource_version)

    def _pages(self, path: str) -> Iterator[Obj]:
        """A paged list (`limit`/`continue`), pipelined: the next page is requested as soon as its continue
        token is read from the head of this one, so the apiserver serves it while this page is parsed."""
        fetch = ThreadPoolExecutor(max_workers=1, thread_name_prefix="list-page")
        try:
            def get(token: str | None) -> Future[bytes]:
                query = {"limit": self.page_size, **({"continue": token} if token else {})}
                return fetch.submit(self.kube.request_bytes, "GET", path, query=query)

            future: Future[bytes] | None = get(None)
            while future is not None:
                data = future.result()
                guess = _continue_token(data)
                future = get(guess) if guess else None
                page = loads(data)
                token = (page.get("metadata") or {}).get("continue") or None
                if token != guess:  # not where we looked: drop the prefetch, go on with the real token
                    if future is not None:
                        future.cancel()
                    future = get(token) if token else None
                yield page
        finally:
            fetch.shutdown(wait=True, cancel_futures=True)

    def _watch(self, w: Watched) -> None:
        query = {
            "watch": "1",
            "resourceVersion": w.resource_version or "",
            "allowWatchBookmarks": "true",
            "timeoutSeconds": self.watch_timeout,
        }
        for event in self.kube.stream(w.path, query, read_timeout=self.watch_timeout + 15):
            if self._stop.is_set():
                return
            kind, obj = event.get("type"), event.get("object") or {}
            if kind == "ERROR":
                if obj.get("code") == 410:
                    raise Gone()
                raise RuntimeError(f"watch error: {obj.get('message')}")
            rv = (obj.get("metadata") or {}).get("resourceVersion")
            if kind != "BOOKMARK":
                self._on_event(w, str(kind), obj)
            if rv:
                w.resource_version = str(rv)

    def _on_event(self, w: Watched, kind: str, obj: Obj) -> None:
        _trim(obj)
        key = key_of(obj)
        if w is self.pods and kind != "DELETED":
            self._preparse(obj)  # here, on the watch thread, not in the next cycle's snapshot
        with self.lock:
            if kind == "DELETED":
                w.objects.pop(key, None)
                if w is self.pods:
                    self._assumed.pop(key, None)
                    self._parsed.pop(key, None)
            else:
                w.objects[key] = obj
                if w is self.pods and (obj.get("spec") or {}).get("nodeName"):
                    self._assumed.pop(key, None)
            if w is self.priority_classes:
                self._priority_classes_changed()

    def _priority_classes_changed(self) -> None:
        """Under the lock: pods parsed with other priority values must be parsed again."""
        pcs = {
            str((pc.get("metadata") or {}).get("name")): int(pc.get("value") or 0)
            for pc in self.priority_classes.objects.values()
        }
        if pcs != self._pcs:
            self._pcs = pcs
            self._parsed.clear()

    def _preparse(self, obj: Obj) -> None:
        """Never raises (it runs on a watch thread): an unreadable pod is left to the snapshot to report."""
        try:
            key = key_of(obj)
            rv = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        except Exception:  # noqa: BLE001
            return
        pcs = self._pcs
        task = self._parse_task(obj, pcs)
        with self.lock:
            if pcs is self._pcs:
                self._parsed[key] = (rv, task)

    def _parse_task(self, obj: Obj, pcs: dict[str, int]) -> TaskInfo | None:
        """`task_from_pod`, with the request (the costly part: quantity parsing) computed once per distinct
        set of resource fields; pods made from one template share it."""
        try:
            spec = obj.get("spec") or {}
            created = parse_time((obj.get("metadata") or {}).get("creationTimestamp"))
            shape: bytes | None = _request_shape(spec)
            foreign = spec.get("schedulerName", "default-scheduler") not in self.scheduler_names
        except Exception:  # noqa: BLE001 - a malformed object: task_from_pod below names the bad field
            spec, created, shape, foreign = {}, 0.0, None, False
        request = self._requests.get(shape) if shape is not None else None
        if request is None:
            task = self._parse("Pod", obj, lambda o: task_from_pod(o, priority_classes=pcs, creation=created))
            if task is not None and shape is not None:
                if len(self._requests) > 50_000:
                    self._requests.clear()
                self._requests[shape] = task.resreq
            return task  # type: ignore[no-any-return]
        if foreign:
            return self._parse(  # type: ignore[no-any-return]
                "Pod", obj, lambda o: _foreign_task(o, request, pcs, created)
            )
        stub = {**obj, "spec": {k: v for k, v in spec.items() if k not in _REQUEST_FIELDS}}
        task = self._parse("Pod", stub, lambda o: task_from_pod(o, priority_classes=pcs, creation=created))
        if task is not None:
            task.resreq = request
        return task  # type: ignore[no-any-return]

    # ---- snapshot ---------------------------------------------------------------------------------------
    def snapshot(self) -> ClusterSnapshot:
        now = self.clock()
        with self.lock:
            pods = list(self.pods.objects.values())
            nodes_raw = list(self.nodes.objects.values())
            pgs = list(self.podgroups.objects.values())
            queues_raw = list(self.queues.objects.values())
            hypernodes = tuple(self.hypernodes.objects.values())
            pcs = self._pcs
            self._expire_assumed(now)
            assumed = dict(self._assumed)
        nodes: dict[str, NodeInfo] = {}
        for obj in nodes_raw:
            node = self._parse("Node", obj, node_from_object)
            if node is not None:
                nodes[node.name] = node
        jobs: dict[str, JobInfo] = {}
        for obj in pgs:
            created = parse_time((obj.get("metadata") or {}).get("creationTimestamp"))
            job = self._parse(
                "PodGroup",
                obj,
                lambda o, c=created: job_from_podgroup(  # type: ignore[misc]
                    o, priority_classes=pcs, default_queue=self.default_queue, creation=c
                ),
            )
            if job is not None:
                jobs[job.uid] = job
        others: list[TaskInfo] = []
        for obj in pods:
            task = self._task(obj, pcs, assumed)
            if task is None:
                continue
            ours = (obj.get("spec") or {}).get("schedulerName", "default-scheduler") in self.scheduler_names
            if not ours:
                others.append(task)
                continue
            job = jobs.get(task.job)
            if job is None:
                if group_of(obj) != task.uid:
                    continue  # names a PodGroup that does not exist (yet): not schedulable
                plain = jobs.get(plain_group_of(obj) or "")  # the PodGroup the controllers made for it
                if plain is not None:
                    task.job, job = plain.uid, plain
                elif wants_gang(obj):
                    continue  # a gang member whose PodGroup is not there yet never runs alone
                else:
                    job = jobs[task.job] = implicit_job(task, default_queue=self.default_queue)
            job.add_task(task)
            node = nodes.get(task.node_name)
            if node is not None:
                node.add_task(task)
        for task in others:  # pods of other schedulers still use node resources
            node = nodes.get(task.node_name)
            if node is not None:
                node.add_task(task)
        queues: dict[str, QueueInfo] = {}
        for obj in queues_raw:
            created = parse_time((obj.get("metadata") or {}).get("creationTimestamp"))
            queue = self._parse("Queue", obj, lambda o, c=created: queue_from_object(o, creation=c))  # type: ignore[misc]
            if queue is not None:
                queues[queue.name] = queue
        return ClusterSnapshot(nodes, jobs, queues, now, hypernodes)

    def _task(self, obj: Obj, pcs: dict[str, int], assumed: dict[str, tuple[str, float]]) -> TaskInfo | None:
        key = key_of(obj)
        rv = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        cached = self._parsed.get(key)
        if cached is not None and cached[0] == rv:
            base = cached[1]
        else:
            base = self._parse_task(obj, pcs)
            self._parsed[key] = (rv, base)
        if base is None:
            return None
        task = base.clone()
        task.status = status_of(obj)
        task.node_name = str((obj.get("spec") or {}).get("nodeName") or "")
        if not task.node_name and key in assumed:
            # Bound by us a moment ago; the watch has not shown it yet. Never double-book.
            bound = {**obj, "spec": {**(obj.get("spec") or {}), "nodeName": assumed[key][0]}}
            task.node_name = assumed[key][0]
            task.status = status_of(bound)
        return task

    def _parse(self, kind: str, obj: Obj, parse: Callable[[Obj], Any]) -> Any:
        try:
            return parse(obj)
        except Exception as exc:  # noqa: BLE001 - one unreadable object must never fail the whole cycle
            meta = obj.get("metadata") or {}
            mark = (kind, key_of(obj), str(meta.get("resourceVersion")))
            if mark not in self._bad:
                self._bad.add(mark)
                log.warning("skipping %s %s: %s", kind, key_of(obj), exc)
                if kind in ("Pod", "PodGroup"):  # namespaced: an event on the object says why it waits
                    self._event(kind, key_of(obj), "Warning", "FailedToRead",
                                f"volcano-py cannot read this {kind} and skips it: {exc}")
            return None

    def _expire_assumed(self, now: float) -> None:
        for key, (_, when) in list(self._assumed.items()):
            if now - when > ASSUME_TTL or key not in self.pods.objects:
                del self._assumed[key]

    # ---- apply ------------------------------------------------------------------------------------------
    def apply(self, result: CycleResult) -> None:
        now = self.clock()
        if not self.may_write():
            log.warning("not the leader any more: dropping this cycle's decisions")
            return
        # Every pod of every committed gang is bound concurrently; a failed bind leaves its pod pending in the
        # cache, so the next cycle retries it.
        if result.binds:
            self._binds_done.clear()
        binds = [
            (gang, self._pool.submit(self._bind, task, node, now, result.annotations.get(task)))
            for gang in result.binds
            for task, node in gang.binds
        ]
        evictions = [self._pool.submit(self._evict, e.task, e.reason) for e in result.evictions]
        failed: dict[str, int] = {}
        try:
            for gang, future in binds:
                if not future.result():
                    failed[gang.job] = failed.get(gang.job, 0) + 1
        finally:
            self._binds_done.set()
        for eviction in evictions:
            eviction.result()
        for job, count in failed.items():
            log.warning("gang %s: %d binds failed; retrying next cycle", job, count)
        self._write_podgroups(result.podgroups, now)
        self._write_queues(result)
        self._write_pod_conditions(now)
        self._emit(result.events)

    def _bind(self, task_key: str, node: str, now: float, annotations: Mapping[str, str] | None = None) -> bool:
        if not self.may_write():
            return False  # leadership lost while this cycle's binds were being sent
        namespace, name = task_key.split("/", 1)
        prebind_started = time.monotonic()
        if annotations and not self._annotate(namespace, name, annotations):
            return False
        bind_started = time.monotonic()
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        try:
            self.kube.request("POST", f"/api/v1/namespaces/{namespace}/pods/{name}/binding", body=body)
        except KubeError as exc:
            if exc.status == 404:
                log.info("pod %s was deleted before its bind: dropped", task_key)
            else:
                log.warning("bind %s -> %s failed: %s", task_key, node, exc)
            return False
        except Exception as exc:  # noqa: BLE001 - network trouble: the pod stays pending, retried next cycle
            log.warning("bind %s -> %s failed: %s", task_key, node, exc)
            return False
        with self.lock:
            pod = self.pods.objects.get(task_key)
            if pod is not None and not (pod.get("spec") or {}).get("nodeName"):
                self._assumed[task_key] = (node, now)
        created = parse_time(((pod or {}).get("metadata") or {}).get("creationTimestamp"))
        metrics.observe_bind(time.monotonic() - bind_started, self.clock() - created if created else None,
                             bind_started - prebind_started if annotations else None)
        self._event("Pod", task_key, "Normal", "Scheduled", f"Successfully assigned {task_key} to {node}")
        return True

    def _annotate(self, namespace: str, name: str, annotations: Mapping[str, str]) -> bool:
        """Write the pod's bind annotations (deviceshare's cards) first: a device plugin reads them at start."""
        try:
            self.kube.request(
                "PATCH", f"/api/v1/namespaces/{namespace}/pods/{name}",
                body={"metadata": {"annotations": dict(annotations)}}, content_type=MERGE_PATCH,
            )
        except Exception as exc:  # noqa: BLE001 - the pod stays pending and is retried next cycle
            log.warning("annotating %s/%s before its bind failed: %s", namespace, name, exc)
            return False
        return True

    def _evict(self, task_key: str, reason: str) -> None:
        if not self.may_write():
            return
        with self.lock:
            pod = self.pods.objects.get(task_key) or {}
            if (pod.get("metadata") or {}).get("deletionTimestamp"):
                return  # already terminating: the watch has shown our (or somebody's) delete
        namespace, name = task_key.split("/", 1)
        try:
            self.kube.request(
                "DELETE",
                f"/api/v1/namespaces/{namespace}/pods/{name}",
                body={
                    "apiVersion": "v1",
                    "kind": "DeleteOptions",
                    "gracePeriodSeconds": self.eviction_grace_seconds,
                },
            )
        except KubeError as exc:
            if exc.status != 404:
                log.warning("evict %s failed: %s", task_key, exc)
            return
        except Exception as exc:  # noqa: BLE001
            log.warning("evict %s failed: %s", task_key, exc)
            return
        self._event("Pod", task_key, "Warning", "Evict", f"Pod is evicted: {reason}")

    def _write_podgroups(self, statuses: list[PodGroupStatus], now: float) -> None:
        """Patch the PodGroups whose status changed, concurrently; waits, as the next cycle reads them."""
        for future in [self._pool.submit(self._write_podgroup, status, now) for status in statuses]:
            future.result()

    def _write_podgroup(self, status: PodGroupStatus, now: float) -> None:
        if not self.may_write():
            return
        if True:
            with self.lock:
                pg = self.podgroups.objects.get(status.job)
            if pg is None:
                return  # an implicit gang of one has no PodGroup object
            current = pg.get("status") or {}
            wanted = {
                "phase": status.phase.value,
                "running": status.running,
                "succeeded": status.succeeded,
                "failed": status.failed,
                "conditions": _conditions(status.conditions, current.get("conditions") or [], now),
            }
            if status.min_member_override is not None:
                wanted["minMemberOverride"] = status.min_member_override
            if all(_same(current.get(k), v) for k, v in wanted.items()):
                return
            namespace, name = status.job.split("/", 1)
            try:
                updated = self._patch_podgroup_status(namespace, name, wanted)
            except Exception as exc:  # noqa: BLE001 - retried next cycle (the status still differs)
                log.warning("patch PodGroup %s status failed: %s", status.job, exc)
                return
            _trim(updated)
            with self.lock:
                if status.job in self.podgroups.objects:
                    self.podgroups.objects[status.job] = updated

    def _patch_podgroup_status(self, namespace: str, name: str, wanted: Mapping[str, Any]) -> Obj:
        """Merge-patch a PodGroup's status on either set of CRDs.

        Volcano's PodGroup CRD has no status subresource (its scheduler updates the whole object,
        pkg/scheduler/cache/cache.go); volcano-py's had one until issue 16. So: write through /status while that
        works; on its 404 write through the object (a 404 there too means the PodGroup is gone) and keep doing so;
        should the object's status then not take the write, a status subresource is back: use it again."""
        path = f"{PG_API}/namespaces/{namespace}/podgroups/{name}"
        body = {"status": dict(wanted)}
        if self._pg_status_subresource:
            try:
                return self.kube.request("PATCH", f"{path}/status", body=body, content_type=MERGE_PATCH)
            except KubeError as exc:
                if exc.status != 404:
                    raise
            updated = self.kube.request("PATCH", path, body=body, content_type=MERGE_PATCH)
            self._pg_status_subresource = False
            log.info("PodGroups have no status subresource: writing their status through the object")
            return updated
        updated = self.kube.request("PATCH", path, body=body, content_type=MERGE_PATCH)
        if all(_same((updated.get("status") or {}).get(k), v) for k, v in wanted.items()):
            return updated
        self._pg_status_subresource = True
        log.info("PodGroups have a status subresource again: writing their status through /status")
        return self.kube.request("PATCH", f"{path}/status", body=body, content_type=MERGE_PATCH)

    def _write_queues(self, result: CycleResult) -> None:
        for q in result.queues:
            with self.lock:
                obj = self.queues.objects.get(q.queue)
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
            except Exception as exc:  # noqa: BLE001
                log.warning("patch Queue %s status failed: %s", q.queue, exc)
                continue
            with self.lock:
                if q.queue in self.queues.objects:
                    self.queues.objects[q.queue] = updated

    def _write_pod_conditions(self, now: float) -> None:
        """Pending pods of an Unschedulable gang say so on the pod too (what `kubectl describe pod` shows)."""
        with self.lock:
            messages: dict[str, str] = {}
            for key, pg in self.podgroups.objects.items():
                for c in (pg.get("status") or {}).get("conditions") or ():
                    if c.get("type") == "Unschedulable" and c.get("status") == "True":
                        messages[key] = str(c.get("message") or "")
            todo = []
            for key, pod in self.pods.objects.items():
                spec = pod.get("spec") or {}
                if (
                    spec.get("nodeName")
                    or key in self._assumed
                    or spec.get("schedulerName") not in self.scheduler_names
                ):
                    continue
                message = messages.get(group_of(pod))
                if message is None:  # a plain pod: the PodGroup the controllers made for it, as the snapshot finds it
                    message = messages.get(plain_group_of(pod) or "")
                if message is None:
                    continue
                existing: dict[str, Any] = next(
                    (
                        c
                        for c in (pod.get("status") or {}).get("conditions") or ()
                        if c.get("type") == "PodScheduled"
                    ),
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
            for key in [k for k in self._condition_sent if k not in self.pods.objects]:
                del self._condition_sent[key]
        for key, message in todo:
            self._status_pool.submit(self._write_pod_condition, key, message, now)

    def _write_pod_condition(self, key: str, message: str, now: float) -> None:
        if self._stop.is_set() or not self.may_write():
            with self.lock:
                self._condition_sent.pop(key, None)
            return
        if True:
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
            except Exception as exc:  # noqa: BLE001
                with self.lock:
                    self._condition_sent.pop(key, None)  # retried next cycle
                if not (isinstance(exc, KubeError) and exc.status == 404):
                    log.warning("patch pod %s condition failed: %s", key, exc)
                return
            _trim(updated)
            with self.lock:
                current = self.pods.objects.get(key)
                if current is not None and _rv(updated) > _rv(current):
                    self.pods.objects[key] = updated

    # ---- events -----------------------------------------------------------------------------------------
    def _emit(self, events: list[Event]) -> None:
        for e in events:
            self._event(e.kind, e.key, e.type, e.reason, e.message)

    def _event(self, kind: str, key: str, type_: str, reason: str, message: str) -> None:
        mark = (kind, key, type_, reason, message)
        with self.lock:
            if mark in self._events_sent:
                return
            store = self.pods if kind == "Pod" else self.podgroups
            obj = store.objects.get(key)
            if obj is None and kind != "Pod":
                return  # an implicit gang has no PodGroup to attach the event to
            self._events_sent.add(mark)
        namespace, name = key.split("/", 1)
        uid = ((obj or {}).get("metadata") or {}).get("uid")
        api_version = "v1" if kind == "Pod" else "scheduling.volcano.sh/v1beta1"
        now = rfc3339(self.clock())
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{name}.", "namespace": namespace},
            "involvedObject": {
                "apiVersion": api_version,
                "kind": kind,
                "name": name,
                "namespace": namespace,
                **({"uid": uid} if uid else {}),
            },
            "type": type_,
            "reason": reason,
            "message": message,
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "reportingInstance": self._instance,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        self._events.put(body)

    def _send_events(self) -> None:
        while True:
            body = self._events.get()
            self._binds_done.wait(5.0)
            try:
                if body is None or self._stop.is_set():
                    return
                namespace = body["metadata"]["namespace"]
                self.kube.request("POST", f"/api/v1/namespaces/{namespace}/events", body=body)
            except Exception as exc:  # noqa: BLE001 - an event is best effort
                log.debug("event not written: %s", exc)
            finally:
                self._events.task_done()

    def flush_events(self, timeout: float = 10.0) -> bool:
        """Wait until the queued events were sent (tests, shutdown)."""
        deadline = time.monotonic() + timeout
        while self._events.unfinished_tasks and time.monotonic() < deadline:
            time.sleep(0.01)
        return not self._events.unfinished_tasks

    # ---- helpers for the runner -------------------------------------------------------------------------
    def controller_owned(self, pod_key: str) -> bool:
        """The pod has an ownerReference with `controller: true` (a controller recreates it if evicted)."""
        with self.lock:
            pod = self.pods.objects.get(pod_key) or {}
        refs = (pod.get("metadata") or {}).get("ownerReferences") or ()
        return any(isinstance(r, dict) and r.get("controller") is True for r in refs)

    def bound_at(self, pod_key: str) -> float | None:
        """When the pod was bound: its `PodScheduled=True` transition, or our own bind if not seen yet."""
        with self.lock:
            pod = self.pods.objects.get(pod_key) or {}
            assumed = self._assumed.get(pod_key)
        for c in (pod.get("status") or {}).get("conditions") or ():
            if c.get("type") == "PodScheduled" and c.get("status") == "True":
                at = parse_time(c.get("lastTransitionTime"))
                if at:
                    return at
        return assumed[1] if assumed else None

    def has_podgroup(self, key: str) -> bool:
        with self.lock:
            return key in self.podgroups.objects

    def ensure_queue(self, name: str) -> None:
        """Create a Queue (weight 1, reclaimable) if it does not exist."""
        try:
            self.kube.request("GET", f"{PG_API}/queues/{name}")
            return
        except KubeError as exc:
            if exc.status != 404:
                raise
        body = {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": name},
            "spec": {"weight": 1, "reclaimable": True},
        }
        try:
            created = self.kube.request("POST", f"{PG_API}/queues", body=body)
            log.info("created Queue %s", name)
            with self.lock:  # the first cycle must see it, whether or not the watch has shown it yet
                self.queues.objects.setdefault(name, created)
        except KubeError as exc:
            if exc.status != 409:
                raise


# Every field of a pod spec that `pod_request` reads; the rest of the spec does not change the request.
_REQUEST_FIELDS = ("containers", "initContainers", "overhead", "resources")


_CONTINUE = re.compile(rb'"continue":"([^"]*)"')


def _continue_token(data: bytes) -> str | None:
    """The list's continue token, read from the head of the raw response: the list's own metadata is the
    first `"metadata":{...}` and holds no nested object."""
    start = data.find(b'"metadata":{', 0, 4096)
    end = data.find(b"}", start) if start >= 0 else -1
    match = _CONTINUE.search(data, start, end) if end >= 0 else None
    return match.group(1).decode() if match else None


def _foreign_task(pod: Obj, request: Resource, pcs: dict[str, int], created: float) -> TaskInfo:
    """A pod of another scheduler: only what node accounting and victim selection read (no placement
    constraints: we never place it). Most pods of a large cluster are these, so this must be cheap."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    priority = spec.get("priority")
    if priority is None:
        priority = pcs.get(str(spec.get("priorityClassName") or ""), 0)
    return TaskInfo(
        uid=key_of(pod),
        name=str(meta.get("name")),
        namespace=str(meta.get("namespace", "default")),
        job=group_of(pod),
        resreq=request,
        role=role_of(pod),
        status=status_of(pod),
        node_name=str(spec.get("nodeName") or ""),
        priority=int(priority or 0),
        preemptable=is_preemptable(pod),
        creation=created,
        labels=dict(meta.get("labels") or {}),
    )


def _request_shape(spec: Obj) -> bytes:
    """The fields that decide a pod's request, as one hashable key."""
    return dumps(
        [
            [c.get("resources") for c in spec.get("containers") or ()],
            [(c.get("resources"), c.get("restartPolicy")) for c in spec.get("initContainers") or ()],
            spec.get("overhead"),
            spec.get("resources"),
        ]
    )


def _rv(obj: Obj) -> int:
    """resourceVersion as a number (etcd revisions), to keep the newer of two copies; 0 if not numeric."""
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion") or 0)
    except ValueError:
        return 0


def _trim(obj: Obj) -> None:
    """Drop what the scheduler never reads and that costs memory on every object (managedFields)."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)


def _conditions(new: tuple[Condition, ...], old: list[Obj], now: float) -> list[Obj]:
    """Conditions as the API stores them; a condition that did not change keeps its lastTransitionTime."""
    by_type = {c.get("type"): c for c in old if isinstance(c, dict)}
    out = []
    for c in new:
        previous = by_type.get(c.type) or {}
        same = (
            previous.get("status") == c.status
            and previous.get("reason") == c.reason
            and (previous.get("message") == c.message)
        )
        when = (
            previous.get("lastTransitionTime")
            if same and previous.get("lastTransitionTime")
            else rfc3339(now)
        )
        out.append(
            {
                "type": c.type,
                "status": c.status,
                "reason": c.reason,
                "message": c.message,
                "lastTransitionTime": when,
            }
        )
    return out


def _same(current: Any, wanted: Any) -> bool:
    if isinstance(wanted, list):
        strip = [
            {k: v for k, v in c.items() if k != "transitionID"} for c in current or () if isinstance(c, dict)
        ]
        return bool(strip == wanted)
    return bool(current == wanted) or (current is None and wanted == 0)
