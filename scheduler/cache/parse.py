"""Layer `cache`: raw objects -> infos, each pod read once per resourceVersion, an unreadable object skipped.

Pods are read on the watch threads as they arrive (`preparse`), so a cycle's snapshot only clones them. The
costly part of a pod, its request (quantity parsing), is computed once per distinct set of resource fields: pods
made from one template share it. Pods of other schedulers are read only as far as node accounting and victim
selection need. An object that cannot be read is skipped, logged once, and (Pods, PodGroups) named in an event.

With `--active-shards`, a pod of ours whose job another replica schedules (`light_of`, cache/active.py
`reads_light`) is read as far as another scheduler's is, plus its annotations (what node accounting reads of a
bound pod: deviceshare's GPU indexes, the bind fence): three quarters of the pod events at four replicas are of
such pods, and a full read costs ~3.5 times as much. Such a read is "light" (`light`: pod key -> its job); `task`
reads a light pod again in full once `light_of` says no more of its job, and `revalidate` names the pods read
light that the next snapshot must read again (`take_reread`) though they did not change.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from scheduler.adapter.snapshot import PodRecord
from scheduler.api import fields as F
from scheduler.api.convert import (
    hypernode_from_object,
    job_from_podgroup,
    key_of,
    node_from_object,
    priority_of,
    queue_from_object,
    request_of,
    task_from_pod,
)
from scheduler.api.disruption import DisruptionBudget, budget_from_object
from scheduler.api.job import JobInfo, TaskInfo
from scheduler.api.node import NodeInfo
from scheduler.api.objects import MutableObj
from scheduler.api.pod import (
    F_NODE_NAME,
    Constraints,
    constraints_of,
    host_ports_of,
    is_preemptable,
    role_of,
    status_of,
)
from scheduler.api.queue import QueueInfo
from scheduler.api.quota import ResourceQuotaInfo, quota_from_object
from scheduler.api.resources import Resource
from scheduler.api.timestamps import parse_time
from scheduler.cache.kube import dumps

log = logging.getLogger("volcano_py.cache")

Unreadable = Callable[[str, str, str], None]  # (kind, key, message): an object skipped, first time

F_PC_NAME = F.field("PriorityClass", "metadata.name")
F_PC_VALUE = F.field("PriorityClass", "value")
_POD_NAME, _POD_NAMESPACE = F.field("Pod", "metadata.name"), F.field("Pod", "metadata.namespace")
_POD_LABELS, _POD_ANNOTATIONS = F.field("Pod", "metadata.labels"), F.field("Pod", "metadata.annotations")
_POD_SCHEDULER = F.field("Pod", "spec.schedulerName")
_POD_CREATED = F.field("Pod", "metadata.creationTimestamp")
_POD_GROUP = F.field("Pod", f"metadata.annotations[{F.GROUP_NAME}]")


class ParseCache:
    def __init__(self, scheduler_names: frozenset[str], lock: threading.Lock, on_unreadable: Unreadable):
        self.scheduler_names = scheduler_names
        self.lock = lock  # the stores' lock: `parsed` and `pcs` change under it
        self.on_unreadable = on_unreadable
        self.parsed: dict[str, tuple[str, TaskInfo | None]] = {}  # pod key -> (resourceVersion, task)
        # --active-shards: whether a job's pods of ours may be read light (another replica schedules it); the pods
        # read light (pod key -> its job); those whose light read serves no more, for the next snapshot to read
        self.light_of: Callable[[str], bool] | None = None
        self.light: dict[str, str] = {}
        self._reread: set[str] = set()
        self.pcs: dict[str, int] = {}  # PriorityClass name -> value, rebuilt when one changes
        self._requests: dict[bytes, Resource] = {}  # a pod's resource fields (JSON) -> its request
        self._times: dict[str, float] = {}  # creationTimestamp -> seconds since the epoch
        # (kind, key, its reasons) already logged: once per object and problem, whatever its version
        self.bad: set[tuple[str, str, tuple[F.FieldInvalid, ...]]] = set()
        # (kind, key) -> why a field of that object could not be read (api/fields.py), as of its last version read:
        # the object left out (a reason with no fallback) or read with a safe default. Logged once per problem.
        self.problems: dict[tuple[str, str], tuple[F.FieldInvalid, ...]] = {}
        # node name -> (resourceVersion, the node as read, with no tasks): a snapshot takes an empty copy of it
        # (5,000 nodes read afresh each cycle cost ~40 ms of quantities and taints; copies a seventh of that)
        self._nodes: dict[str, tuple[str, NodeInfo]] = {}

    # ---- on the watch threads ---------------------------------------------------------------------------
    def priority_classes_changed(self, objects: Iterable[MutableObj]) -> None:
        """Under the lock: pods parsed with other priority values must be parsed again."""
        pcs: dict[str, int] = {}
        for pc in objects:
            sink: list[F.FieldInvalid] = []
            rv = _version("PriorityClass", pc, sink)
            if sink:
                self.note("PriorityClass", _key(pc, "PriorityClass"), rv, None, sink)
            try:
                name = F_PC_NAME.read((pc.get("metadata") or {}).get("name"), "?", None)
                pcs[name] = F_PC_VALUE.read(pc.get("value"), name, None)
            except (F.FieldError, AttributeError) as exc:  # one bad PriorityClass: its pods read priority 0
                self.note("PriorityClass", _key(pc, "PriorityClass"), _version("PriorityClass", pc), exc)
        if pcs != self.pcs:
            self.pcs = pcs
            self.parsed.clear()
            self.light.clear()

    def preparse(self, obj: MutableObj, key: str | None = None) -> None:
        """Never raises (it runs on a watch thread): an unreadable pod is left to the snapshot to report. `key`: the
        pod's `key_of`, when the caller has it (one string kept per pod, not two)."""
        try:
            key = key_of(obj) if key is None else key
            rv = _version("Pod", obj)
        except Exception:
            log.debug("preparse: an unreadable pod, left to the snapshot to report", exc_info=True)
            return
        pcs = self.pcs
        task, light = self._parse_task(obj, pcs, key)
        with self.lock:
            if pcs is self.pcs:
                self.parsed[key] = (rv, task)
                self._mark(key, light)

    def forget(self, key: str) -> None:
        """Under the lock: the pod was deleted."""
        self.parsed.pop(key, None)
        self.light.pop(key, None)
        self.problems.pop(("Pod", key), None)

    def _mark(self, key: str, light: str | None) -> None:
        if light is not None:
            self.light[key] = light
        elif self.light:
            self.light.pop(key, None)

    # ---- the jobs read light (--active-shards) ------------------------------------------------------------
    def revalidate(self) -> None:
        """From the loop, before a snapshot reads the stores and after its view is decided (what `light_of` says
        may change then): the pods read light for a job `light_of` now refuses are read again in full by the next
        snapshot (`take_reread`), whether or not they change."""
        light_of = self.light_of
        if light_of is None or not self.light:
            return
        with self.lock:
            refused = {job for job in set(self.light.values()) if not light_of(job)}
            if refused:
                self._reread.update(key for key, job in self.light.items() if job in refused)

    def take_reread(self) -> set[str]:
        """The pods the next snapshot reads again though they did not change (their light read no longer
        serves), taken: a snapshot that fails after this builds in full next, and reads them again then."""
        with self.lock:
            out, self._reread = self._reread, set()
        return out

    def is_light(self, key: str) -> bool:
        """Whether the pod was last read light (its task lacks what only a session of its job reads)."""
        return key in self.light

    # ---- in the snapshot --------------------------------------------------------------------------------
    def nodes(self, objects: Iterable[MutableObj]) -> list[NodeInfo]:
        """Each node as of its resourceVersion; read again only when it changed. The cache keeps exactly the
        nodes of this call (a deleted node is forgotten by the next snapshot)."""
        kept: dict[str, tuple[str, NodeInfo]] = {}
        out: list[NodeInfo] = []
        for obj in objects:
            name, rv = _key(obj, "Node"), _version("Node", obj)
            cached = self._nodes.get(name)
            if rv and cached is not None and cached[0] == rv:
                node: NodeInfo | None = cached[1]
            else:
                node = self.read_fields("Node", obj, lambda o, sink: node_from_object(o, sink))
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
            job = self.read_fields(
                "PodGroup",
                obj,
                lambda o, sink: job_from_podgroup(o, priority_classes=pcs, default_queue=default_queue, sink=sink),
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

    def queues(self, objects: Iterable[MutableObj]) -> tuple[list[QueueInfo], dict[str, tuple[F.FieldInvalid, ...]]]:
        """The Queues that can be read, and why each of the others was left out (by name): the jobs that name
        one wait with that reason rather than "queue does not exist"."""
        out, left_out = [], {}
        for obj in objects:
            queue = self.read_fields("Queue", obj, lambda o, sink: queue_from_object(o, sink=sink))
            if queue is not None:
                out.append(queue)
            else:
                key = _key(obj, "Queue")
                left_out[key] = self.problems.get(("Queue", key), ())
        return out, left_out

    def hypernodes(self, objects: Iterable[MutableObj]) -> tuple[MutableObj, ...]:
        """The HyperNodes as the topology solver reads them, each field parsed; an unreadable one left out."""
        out = []
        for obj in objects:
            hypernode = self.read_fields("HyperNode", obj, lambda o, sink: hypernode_from_object(o, sink))
            if hypernode is not None:
                out.append(hypernode)
        return tuple(out)

    def disruption_budgets(self, objects: Iterable[MutableObj]) -> tuple[DisruptionBudget, ...]:
        """The PodDisruptionBudgets, each field parsed (a few objects: read afresh each cycle); one whose name
        cannot be read is left out, a bad field read as its safe default (api/fields.py), logged once."""
        out = []
        for obj in objects:
            budget = self.read_fields("PodDisruptionBudget", obj, lambda o, sink: budget_from_object(o, sink))
            if budget is not None:
                out.append(budget)
        return tuple(out)

    def resource_quotas(self, objects: Iterable[MutableObj]) -> tuple[ResourceQuotaInfo, ...]:
        """The ResourceQuotas' status, each field parsed (a few objects: read afresh each cycle). One whose hard or
        used cannot be read is left out (ignored: it holds no job at enqueue), with the reason, logged once."""
        out = []
        for obj in objects:
            quota = self.read_fields("ResourceQuota", obj, lambda o, sink: quota_from_object(o, sink))
            if quota is not None:
                out.append(quota)
        return tuple(out)

    def task(self, obj: MutableObj, pcs: dict[str, int]) -> TaskInfo | None:
        """The pod as read at its resourceVersion (shared: the snapshot builder clones it)."""
        key = _key(obj)
        rv = _version("Pod", obj)
        cached = self.parsed.get(key)
        if cached is not None and cached[0] == rv:
            job = self.light.get(key) if self.light else None
            if job is None or (self.light_of is not None and self.light_of(job)):
                return cached[1]
        task, light = self._parse_task(obj, pcs, key)
        self.parsed[key] = (rv, task)
        self._mark(key, light)
        return task

    def read(self, kind: str, obj: MutableObj, parse: Callable[[MutableObj], Any]) -> Any:
        """`parse(obj)`, for a reader that reports no field of its own (the storage objects: volumes.py); None
        when it cannot be read (logged once, as below)."""
        return self.read_fields(kind, obj, lambda o, sink: parse(o))

    def read_fields(self, kind: str, obj: MutableObj, parse: Callable[[MutableObj, list[F.FieldInvalid]], Any],
                    early: list[F.FieldInvalid] | None = None) -> Any:
        """`parse(obj, sink)`, its fields through the table (api/fields.py): a field read with a safe default is
        reported to `sink`; one with none (FieldError), or any other failure, leaves the object out. Either way
        the reasons are kept in `problems` and logged once per object and problem."""
        sink: list[F.FieldInvalid] = early if early is not None else []  # `early`: found before, by the caller
        rv = _version(kind, obj, sink)
        try:
            made = parse(obj, sink)
        except Exception as exc:  # one unreadable object must never fail the whole cycle
            log.debug("%s: the traceback of the failure noted above", kind, exc_info=True)
            self.note(kind, _key(obj, kind), rv, exc, sink)
            return None
        if sink:
            self.note(kind, _key(obj, kind), rv, None, sink)
        elif self.problems:
            self.problems.pop((kind, _key(obj, kind)), None)
        return made

    def note(self, kind: str, key: str, rv: str, exc: BaseException | None,
             sink: list[F.FieldInvalid] | None = None) -> None:
        """Keep why `kind` `key` was left out (`exc`) or read with defaults (`sink`); log it, and name it in an event
        (Pods, PodGroups), once per object and problem."""
        reasons = list(sink or ())
        if isinstance(exc, F.FieldError):
            reasons.append(exc.reason)
        elif exc is not None:  # a reader's failure the table did not foresee: still a typed reason, and no traceback
            reasons.append(F.FieldInvalid(kind, key, "?", f"cannot be read ({type(exc).__name__}: {str(exc)[:120]})",
                                          ""))
        if len(self.problems) > 100_000:  # objects deleted with a problem are forgotten in bulk (pods one by one)
            self.problems.clear()
        self.problems[(kind, key)] = tuple(reasons)
        # Once per object and problem, not per version: a pod's version changes as it is bound and starts, and the
        # same bad field said again each time is noise (make fuzz-api: 3 lines in 200 ms for one annotation).
        mark = (kind, key, tuple(reasons))
        if mark in self.bad:
            return
        if len(self.bad) > 100_000:
            self.bad.clear()
        self.bad.add(mark)
        text = "; ".join(F.describe(r) for r in reasons)
        if exc is not None:
            log.warning("skipping %s %s: %s", kind, key, text)
            message = f"volcano-py cannot read this {kind} and skips it: {text}"
        else:
            log.warning("read %s %s with defaults: %s", kind, key, text)
            message = f"volcano-py read this {kind} with defaults for fields it cannot read: {text}"
        if kind in ("Pod", "PodGroup"):  # namespaced: an event on the object says why it waits
            self.on_unreadable(kind, key, message)

    # ---- reading one pod --------------------------------------------------------------------------------
    def _time(self, value: object) -> float:
        """`parse_time`, once per distinct timestamp (pods made together share their second)."""
        if not isinstance(value, str) or len(value) > 64:
            return 0.0
        seen = self._times.get(value)
        if seen is None:
            if len(self._times) > 50_000:
                self._times.clear()
            seen = self._times[value] = parse_time(value)
        return seen

    def _parse_task(self, obj: MutableObj, pcs: dict[str, int], key: str) -> tuple[TaskInfo | None, str | None]:
        """`task_from_pod`, with the request computed once per distinct set of resource fields; and the job the
        pod was read light for (None: read in full, or another scheduler's)."""
        early: list[F.FieldInvalid] = []
        light: str | None = None
        try:
            spec = obj.get("spec") or {}
            meta = obj.get("metadata") or {}
            stamp = meta.get("creationTimestamp")
            created = self._time(stamp)
            shape: bytes | None = _request_shape(spec)
            scheduler = spec.get("schedulerName", "default-scheduler")
            if type(scheduler) is not str or len(scheduler) > F.NAME_MAX:
                scheduler = _POD_SCHEDULER.refuse(scheduler, "is not a scheduler name", key, early)
            foreign = scheduler not in self.scheduler_names
            light_of = self.light_of
            if not foreign and light_of is not None:  # ours: another replica's job? (the key task_from_pod makes)
                group = (meta.get("annotations") or {}).get(F.GROUP_NAME)
                namespace = meta.get("namespace")
                if (type(group) is str and type(namespace) is str and len(group) <= F.NAME_MAX
                        and len(namespace) <= 63 and light_of(job := f"{namespace}/{group}")):
                    light = job  # (a name past its bounds: read in full, which names the field)
        except Exception:  # a malformed object: task_from_pod below names the bad field
            log.debug("pod %s: read as malformed", key, exc_info=True)
            spec, created, shape, foreign, stamp, light = {}, 0.0, None, False, None, None
        if stamp is not None and not created and stamp != "":  # unreadable: the pod reads as created at 0
            _POD_CREATED.refuse(stamp, "is not an RFC 3339 time", key, early)
        request = self._requests.get(shape) if shape is not None else None
        if foreign or light is not None:  # every such pod read alike, the first of its shape too (slim.py)
            keep = light is not None

            def foreign_task(o: MutableObj, sink: list[F.FieldInvalid]) -> TaskInfo:
                made = request if request is not None else self._request(shape, spec, key)
                return _foreign_task(o, key, made, pcs, created, sink, keep_annotations=keep)

            return self.read_fields("Pod", obj, foreign_task, early), light
        if request is None:
            task = self.read_fields(
                "Pod", obj, lambda o, sink: task_from_pod(o, priority_classes=pcs, creation=created, sink=sink), early)
            if task is not None and shape is not None:
                self._keep_request(shape, task.resreq)
            return task, None
        known = request  # (the request of this shape, read before: not computed again)
        return self.read_fields("Pod", obj, lambda o, sink: task_from_pod(
            o, priority_classes=pcs, creation=created, sink=sink, resreq=known), early), None

    def _request(self, shape: bytes | None, spec: MutableObj, key: str) -> Resource:
        """The request of a pod whose shape was not read before (FieldError for a quantity Kubernetes rejects)."""
        made = request_of(spec, key)
        if shape is not None:
            self._keep_request(shape, made)
        return made

    def _keep_request(self, shape: bytes, request: Resource) -> None:
        if len(self._requests) > 50_000:
            self._requests.clear()
        self._requests[shape] = request


def _foreign_task(pod: MutableObj, key: str, request: Resource, pcs: dict[str, int], created: float,
                  sink: list[F.FieldInvalid], *, keep_annotations: bool = False) -> TaskInfo:
    """A pod of another scheduler: only what node accounting, victim selection and our pods' placement read (of
    its constraints, its host ports and pod affinity: we never place it). Most pods of a large cluster are these,
    so this must be cheap. `key` is the pod's `key_of`. Each field through the table, as `task_from_pod` reads
    it. `keep_annotations`: a pod of ours read light (another replica's job), whose annotations node accounting
    reads (deviceshare's GPU indexes, the bind fence `active.py` pins its gang by)."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    name, namespace = meta.get("name"), meta.get("namespace")
    if not (type(name) is str and 0 < len(name) <= F.NAME_MAX):  # (each such test spares the call when valid)
        name = _POD_NAME.read(name, key, sink)
    if not (type(namespace) is str and 0 < len(namespace) <= 63):
        namespace = _POD_NAMESPACE.read(namespace, key, sink)
    labels = _POD_LABELS.read(meta.get("labels"), key, sink)
    annotations = _POD_ANNOTATIONS.read(meta.get("annotations"), key, sink)
    group = annotations.get(F.GROUP_NAME) if annotations else None
    node_name = spec.get("nodeName")
    if not (type(node_name) is str and len(node_name) <= F.NAME_MAX):
        node_name = F_NODE_NAME.read(node_name, key, sink)
    return TaskInfo(
        key=key,
        name=name,
        namespace=namespace,
        job=f"{namespace}/{_POD_GROUP.read(group, key, sink)}" if group else key,
        resreq=request,
        role=role_of(annotations, labels, key, sink),
        status=status_of(pod, key, sink),
        node_name=node_name,
        priority=priority_of(spec, pcs, key, sink),
        preemptable=is_preemptable(annotations, labels, key, sink),
        # What of another scheduler's pod ours must respect: its host ports (NodePorts) and its pod affinity
        # terms (the symmetric half of anti-affinity, and what scoring counts), as kube-scheduler does.
        constraints=_foreign_constraints(spec, key, sink),
        creation=created,
        labels=labels,  # (shared with the stored pod, cache/slim.py: neither is ever changed in place)
        annotations=dict(annotations) if keep_annotations else {},
    )


_NO_CONSTRAINTS = Constraints()


def _foreign_constraints(spec: MutableObj, key: str, sink: list[F.FieldInvalid]) -> Constraints:
    """Its host ports and pod affinity. An affinity our table cannot read (past its bounds, or malformed) is
    dropped with its reason, never the pod: left out, its node's room would be counted free."""
    if spec.get("affinity") is not None:
        try:
            return constraints_of({"affinity": spec["affinity"], "containers": spec.get("containers")}, key, sink)
        except F.FieldError as exc:
            sink.append(exc.reason)
    ports = host_ports_of(spec, key)
    return Constraints(host_ports=ports) if ports else _NO_CONSTRAINTS


def _key(obj: MutableObj, kind: str = "Pod") -> str:
    """The object's key, as the stores key it (a cluster-scoped kind: its name alone); "?" without metadata."""
    try:
        if kind in ("Pod", "PodGroup", "PodDisruptionBudget", "ResourceQuota"):
            return key_of(obj)
        return str(obj["metadata"].get("name"))[: F.NAME_MAX + 1]
    except Exception:  # metadata that is not an object
        log.debug("an object whose metadata is not an object", exc_info=True)
        return "?"


_VERSIONS = {kind: F.field(kind, "metadata.resourceVersion")
             for kind in ("Pod", "PodGroup", "Queue", "Node", "HyperNode", "PriorityClass", "PodDisruptionBudget",
                          "ResourceQuota")}


def _version(kind: str, obj: MutableObj, sink: list[F.FieldInvalid] | None = None) -> str:
    """The object's resourceVersion, read through the table ("" if unreadable: then it is logged once per key)."""
    meta = obj.get("metadata")
    version = meta.get("resourceVersion") if isinstance(meta, dict) else None
    if type(version) is str and len(version) <= 64:  # nearly always: spare the call
        return version
    return _VERSIONS[kind].read(version, _key(obj, kind), sink) or ""


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
