"""Layer `cache`: raw objects -> infos, each pod read once per resourceVersion, an unreadable object skipped.

Pods are read on the watch threads as they arrive (`preparse`), so a cycle's snapshot only clones them. The
costly part of a pod, its request (quantity parsing), is computed once per distinct set of resource fields: pods
made from one template share it. Pods of other schedulers are read only as far as node accounting and victim
selection need. An object that cannot be read is skipped, logged once, and (Pods, PodGroups) named in an event.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from scheduler.adapter.snapshot import PodRecord
from scheduler.api.convert import (
    group_of,
    job_from_podgroup,
    key_of,
    node_from_object,
    queue_from_object,
    task_from_pod,
)
from scheduler.api.job import JobInfo, TaskInfo
from scheduler.api.node import NodeInfo
from scheduler.api.objects import MutableObj
from scheduler.api.pod import (
    Constraints,
    host_ports_of,
    is_preemptable,
    role_of,
    status_of,
    with_host_ports,
)
from scheduler.api.queue import QueueInfo
from scheduler.api.resources import Resource
from scheduler.api.timestamps import parse_time
from scheduler.cache.kube import dumps

log = logging.getLogger("volcano_py.cache")

# Every field of a pod spec that `pod_request` reads; the rest of the spec does not change the request.
_REQUEST_FIELDS = ("containers", "initContainers", "overhead", "resources")

Unreadable = Callable[[str, str, str], None]  # (kind, key, message): an object skipped, first time


class ParseCache:
    def __init__(self, scheduler_names: frozenset[str], lock: threading.Lock, on_unreadable: Unreadable):
        self.scheduler_names = scheduler_names
        self.lock = lock  # the stores' lock: `parsed` and `pcs` change under it
        self.on_unreadable = on_unreadable
        self.parsed: dict[str, tuple[str, TaskInfo | None]] = {}  # pod key -> (resourceVersion, task)
        self.pcs: dict[str, int] = {}  # PriorityClass name -> value, rebuilt when one changes
        self._requests: dict[bytes, Resource] = {}  # a pod's resource fields (JSON) -> its request
        self._times: dict[str, float] = {}  # creationTimestamp -> seconds since the epoch
        self.bad: set[tuple[str, str, str]] = set()  # (kind, key, resourceVersion) already logged as unreadable
        # node name -> (resourceVersion, the node as read, with no tasks): a snapshot takes an empty copy of it
        # (5,000 nodes read afresh each cycle cost ~40 ms of quantities and taints; copies a seventh of that)
        self._nodes: dict[str, tuple[str, NodeInfo]] = {}

    # ---- on the watch threads ---------------------------------------------------------------------------
    def priority_classes_changed(self, objects: Iterable[MutableObj]) -> None:
        """Under the lock: pods parsed with other priority values must be parsed again."""
        pcs = {str((pc.get("metadata") or {}).get("name")): int(pc.get("value") or 0) for pc in objects}
        if pcs != self.pcs:
            self.pcs = pcs
            self.parsed.clear()

    def preparse(self, obj: MutableObj) -> None:
        """Never raises (it runs on a watch thread): an unreadable pod is left to the snapshot to report."""
        try:
            key = key_of(obj)
            rv = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        except Exception:  # noqa: BLE001
            return
        pcs = self.pcs
        task = self._parse_task(obj, pcs, key)
        with self.lock:
            if pcs is self.pcs:
                self.parsed[key] = (rv, task)

    def forget(self, key: str) -> None:
        """Under the lock: the pod was deleted."""
        self.parsed.pop(key, None)

    # ---- in the snapshot --------------------------------------------------------------------------------
    def nodes(self, objects: Iterable[MutableObj]) -> list[NodeInfo]:
        """Each node as of its resourceVersion; read again only when it changed. The cache keeps exactly the
        nodes of this call (a deleted node is forgotten by the next snapshot)."""
        kept: dict[str, tuple[str, NodeInfo]] = {}
        out: list[NodeInfo] = []
        for obj in objects:
            meta = obj.get("metadata") or {}
            name, rv = str(meta.get("name")), str(meta.get("resourceVersion") or "")
            cached = self._nodes.get(name)
            if rv and cached is not None and cached[0] == rv:
                node: NodeInfo | None = cached[1]
            else:
                node = self.read("Node", obj, node_from_object)
            if node is None:
                continue
            if rv:
                kept[name] = (rv, node)
            out.append(node.clone_empty())
        self._nodes = kept
        return out

    def podgroups(self, objects: Iterable[MutableObj], pcs: dict[str, int], default_queue: str) -> list[JobInfo]:
        jobs = []
        for obj in objects:
            created = parse_time((obj.get("metadata") or {}).get("creationTimestamp"))
            job = self.read(
                "PodGroup",
                obj,
                lambda o, c=created: job_from_podgroup(  # type: ignore[misc]
                    o, priority_classes=pcs, default_queue=default_queue, creation=c
                ),
            )
            if job is not None:
                jobs.append(job)
        return jobs

    def pods(self, objects: Iterable[MutableObj], pcs: dict[str, int]) -> Iterator[PodRecord]:
        """Lazily, as the snapshot builder walks them: no list of 20,000 pairs in between."""
        for obj in objects:
            task = self.task(obj, pcs)
            if task is not None:
                yield obj, task

    def queues(self, objects: Iterable[MutableObj]) -> list[QueueInfo]:
        out = []
        for obj in objects:
            created = parse_time((obj.get("metadata") or {}).get("creationTimestamp"))
            queue = self.read("Queue", obj, lambda o, c=created: queue_from_object(o, creation=c))  # type: ignore[misc]
            if queue is not None:
                out.append(queue)
        return out

    def task(self, obj: MutableObj, pcs: dict[str, int]) -> TaskInfo | None:
        """The pod as read at its resourceVersion (shared: the snapshot builder clones it)."""
        key = key_of(obj)
        rv = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        cached = self.parsed.get(key)
        if cached is not None and cached[0] == rv:
            return cached[1]
        task = self._parse_task(obj, pcs, key)
        self.parsed[key] = (rv, task)
        return task

    def read(self, kind: str, obj: MutableObj, parse: Callable[[MutableObj], Any]) -> Any:
        try:
            return parse(obj)
        except Exception as exc:  # noqa: BLE001 - one unreadable object must never fail the whole cycle
            meta = obj.get("metadata") or {}
            mark = (kind, key_of(obj), str(meta.get("resourceVersion")))
            if mark not in self.bad:
                self.bad.add(mark)
                log.warning("skipping %s %s: %s", kind, key_of(obj), exc)
                if kind in ("Pod", "PodGroup"):  # namespaced: an event on the object says why it waits
                    self.on_unreadable(kind, key_of(obj), f"volcano-py cannot read this {kind} and skips it: {exc}")
            return None

    # ---- reading one pod --------------------------------------------------------------------------------
    def _time(self, value: object) -> float:
        """`parse_time`, once per distinct timestamp (pods made together share their second)."""
        if not isinstance(value, str):
            return parse_time(value)
        seen = self._times.get(value)
        if seen is None:
            if len(self._times) > 50_000:
                self._times.clear()
            seen = self._times[value] = parse_time(value)
        return seen

    def _parse_task(self, obj: MutableObj, pcs: dict[str, int], key: str) -> TaskInfo | None:
        """`task_from_pod`, with the request computed once per distinct set of resource fields."""
        try:
            spec = obj.get("spec") or {}
            created = self._time((obj.get("metadata") or {}).get("creationTimestamp"))
            shape: bytes | None = _request_shape(spec)
            foreign = spec.get("schedulerName", "default-scheduler") not in self.scheduler_names
        except Exception:  # noqa: BLE001 - a malformed object: task_from_pod below names the bad field
            spec, created, shape, foreign = {}, 0.0, None, False
        request = self._requests.get(shape) if shape is not None else None
        if request is None:
            task = self.read("Pod", obj, lambda o: task_from_pod(o, priority_classes=pcs, creation=created))
            if task is not None and shape is not None:
                if len(self._requests) > 50_000:
                    self._requests.clear()
                self._requests[shape] = task.resreq
            return task  # type: ignore[no-any-return]
        if foreign:
            return self.read(  # type: ignore[no-any-return]
                "Pod", obj, lambda o: _foreign_task(o, key, request, pcs, created)
            )
        stub = {**obj, "spec": {k: v for k, v in spec.items() if k not in _REQUEST_FIELDS}}
        task = self.read("Pod", stub, lambda o: task_from_pod(o, priority_classes=pcs, creation=created))
        if task is not None:
            task.resreq = request
            ports = host_ports_of(spec)  # in the containers the stub left out
            if ports:
                task.constraints = with_host_ports(task.constraints, ports)
        return task  # type: ignore[no-any-return]


def _foreign_task(pod: MutableObj, key: str, request: Resource, pcs: dict[str, int], created: float) -> TaskInfo:
    """A pod of another scheduler: only what node accounting and victim selection read (no placement
    constraints: we never place it). Most pods of a large cluster are these, so this must be cheap. `key` is
    the pod's `key_of`."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    priority = spec.get("priority")
    if priority is None:
        priority = pcs.get(str(spec.get("priorityClassName") or ""), 0)
    return TaskInfo(
        uid=key,
        name=str(meta.get("name")),
        namespace=str(meta.get("namespace", "default")),
        job=group_of(pod, key),
        resreq=request,
        role=role_of(pod),
        status=status_of(pod),
        node_name=str(spec.get("nodeName") or ""),
        priority=int(priority or 0),
        preemptable=is_preemptable(pod),
        # Its host ports, the one constraint of another scheduler's pod that ours must respect (NodePorts).
        constraints=_ports_only(spec),
        creation=created,
        labels=dict(meta.get("labels") or {}),
    )


_NO_CONSTRAINTS = Constraints()


def _ports_only(spec: MutableObj) -> Constraints:
    ports = host_ports_of(spec)
    return Constraints(host_ports=ports) if ports else _NO_CONSTRAINTS


def _request_shape(spec: MutableObj) -> bytes:
    """The fields that decide a pod's request, as one hashable key. A pod of one container and nothing else
    that adds to its request (most pods) is keyed by that container's resources alone, a JSON object or `null`;
    every other pod by a JSON array of all those fields, so the two kinds of key never meet."""
    containers = spec.get("containers")
    if (type(containers) is list and len(containers) == 1 and type(containers[0]) is dict
            and not spec.get("initContainers") and spec.get("overhead") is None and spec.get("resources") is None):
        return dumps(containers[0].get("resources"))
    return dumps(
        [
            [c.get("resources") for c in spec.get("containers") or ()],
            [(c.get("resources"), c.get("restartPolicy")) for c in spec.get("initContainers") or ()],
            spec.get("overhead"),
            spec.get("resources"),
        ]
    )
