"""Layer `cache`: another scheduler's pod kept as the part of it the scheduler reads, not the whole object.

Most pods of a large cluster are other schedulers' (DaemonSets, services, kube-scheduler's batch), and volcano-py
only accounts them on their nodes, never places them: `ParseCache._foreign_task` reads their name, namespace,
labels, annotations, node, priority, request, host ports, pod affinity and phase; the snapshot their scheduler
name and node; the evictor their uid, resourceVersion, deletion and DisruptionTarget condition; the partial-gang
policy their owners. A decoded pod costs ~6 times its JSON in Python objects (2.9 KB for the bench's 460-byte
pod, tens of KB for a real one with env, volumes, probes and container statuses), so the stores keep of such a
pod only those fields (`slim`): what every reader reads is exactly what it read from the whole pod, which
tests/cache/test_slim_foreign.py checks on random pods. A pod of ours is kept whole (we place it, write its
conditions, bind it).

What is left is shared where pods made from one template repeat it: the containers' projection (resources,
ports, restartPolicy) by value, and the short strings (namespace, node, scheduler, phase, timestamps) by value.
Shared parts are never written: the stores replace an object on every change, and no writer of a pod edits
another scheduler's pod in place (the status writer, gates and evictor write ours, or build new objects).
"""

from __future__ import annotations

from typing import Any, TypeVar

from scheduler.api.objects import MutableObj
from scheduler.cache.kube import dumps

K = TypeVar("K")
V = TypeVar("V")

_META = ("name", "namespace", "uid", "resourceVersion", "creationTimestamp", "deletionTimestamp", "labels",
         "annotations", "ownerReferences")
_SPEC = ("schedulerName", "nodeName", "priority", "priorityClassName", "overhead", "resources", "affinity")
_CONTAINER = ("resources", "ports", "restartPolicy")
# A node: what api/fields.py lists of a Node (name, resourceVersion, labels, allocatable, capacity, conditions,
# taints, unschedulable) and the uid the incremental snapshot tells a node made again by. A real node's status
# (images, addresses, nodeInfo, volumes, each condition's times and messages) is most of its object.
_NODE_META = ("name", "uid", "resourceVersion", "labels")
_NODE_SPEC = ("taints", "unschedulable")
_NODE_STATUS = ("allocatable", "capacity")
_NODE_CONDITION = ("type", "status")
_SHARED_MAX = 50_000  # entries of each sharing table before it is cleared (a cluster of many distinct values)
DISRUPTION_TARGET = "DisruptionTarget"


class Slimmer:
    """`slim` with its sharing tables. Called on the watch threads, one object at a time per kind's thread; the
    tables are plain dicts (a lost race shares a little less, never wrongly: values are compared whole)."""

    def __init__(self, scheduler_names: frozenset[str]) -> None:
        self.scheduler_names = scheduler_names
        self._strings: dict[str, str] = {}
        self._containers: dict[bytes, list[Any]] = {}
        self._labels: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}
        self._statuses: dict[str, dict[str, Any]] = {}  # phase -> {"phase": phase}
        self._node_statuses: dict[bytes, dict[str, Any]] = {}  # a node's status as read -> one dict for all alike

    def slim(self, obj: MutableObj) -> MutableObj:
        """`obj` itself when it is ours, or not shaped as a pod (the parser names what is wrong with it, from the
        whole object); else a new object with only what the scheduler reads of another scheduler's pod."""
        meta, spec, status = obj.get("metadata"), obj.get("spec"), obj.get("status")
        if type(meta) is not dict or type(spec) is not dict or (status is not None and type(status) is not dict):
            return obj
        scheduler = spec.get("schedulerName", "default-scheduler")
        if type(scheduler) is not str or scheduler in self.scheduler_names:
            return obj
        string = self._string
        out_spec = {k: spec[k] for k in _SPEC if k in spec}
        if "schedulerName" in out_spec:
            out_spec["schedulerName"] = string(scheduler)
        node = out_spec.get("nodeName")
        if type(node) is str:
            out_spec["nodeName"] = string(node)
        containers = spec.get("containers")
        if containers is not None:
            out_spec["containers"] = self._containers_of(containers)
        containers = spec.get("initContainers")
        if containers is not None or "initContainers" in spec:
            out_spec["initContainers"] = self._containers_of(containers)
        out_meta = {k: meta[k] for k in _META if k in meta}
        value = out_meta.get("namespace")
        if type(value) is str:
            out_meta["namespace"] = string(value)
        value = out_meta.get("creationTimestamp")
        if type(value) is str:
            out_meta["creationTimestamp"] = string(value)
        labels = out_meta.get("labels")
        if type(labels) is dict and labels:
            out_meta["labels"] = self._shared_labels(labels)
        if status is None:
            return {"metadata": out_meta, "spec": out_spec}
        return {"metadata": out_meta, "spec": out_spec, "status": self._status(status)}

    def node(self, obj: MutableObj) -> MutableObj:
        """A node as the part of it the scheduler reads (its conditions' type and status only: it reads Ready);
        `obj` itself when it is not shaped as a node (the parser names what is wrong, from the whole object)."""
        meta, spec, status = obj.get("metadata"), obj.get("spec"), obj.get("status")
        if type(meta) is not dict or type(spec) not in (dict, type(None)) or type(status) not in (dict, type(None)):
            return obj
        out: MutableObj = {"metadata": {k: meta[k] for k in _NODE_META if k in meta}}
        if spec is not None:
            out["spec"] = {k: spec[k] for k in _NODE_SPEC if k in spec}
        if status is not None:
            out_status = {k: status[k] for k in _NODE_STATUS if k in status}
            if "conditions" in status:
                conditions = status["conditions"]
                out_status["conditions"] = [
                    {k: c[k] for k in _NODE_CONDITION if k in c} if type(c) is dict else c for c in conditions
                ] if type(conditions) is list else conditions
            out["status"] = self._node_status(out_status)
        return out

    def _node_status(self, status: dict[str, Any]) -> dict[str, Any]:
        """The status (resources, condition types and statuses), one dict shared by every node with the same: a
        pool's nodes have one (~1.1 KB a node at 100,000 nodes, docs/scale-out.md). Never changed in place."""
        try:
            key = dumps(status)
        except (TypeError, ValueError):  # not JSON (never from the apiserver): kept unshared
            return status
        return _shared(self._node_statuses, key, status)

    def _string(self, value: str) -> str:
        return _shared(self._strings, value, value)

    def _containers_of(self, containers: Any) -> Any:
        """The containers' projection, one list shared by every pod with the same; anything not a list of
        objects as it came (the parser reports it)."""
        if type(containers) is not list:
            return containers
        made = []
        for c in containers:
            if type(c) is not dict:
                return containers
            made.append({k: c[k] for k in _CONTAINER if k in c})
        try:
            key = dumps(made)
        except (TypeError, ValueError):  # not JSON (never from the apiserver): kept unshared
            return made
        return _shared(self._containers, key, made)

    def _shared_labels(self, labels: dict[str, Any]) -> dict[str, Any]:
        if len(labels) > 16:
            return labels
        try:
            return _shared(self._labels, tuple(labels.items()), labels)
        except TypeError:  # an unhashable value (never from the apiserver): kept unshared
            return labels

    def _status(self, status: dict[str, Any]) -> dict[str, Any]:
        phase = status.get("phase")
        conditions = status.get("conditions")
        kept = [c for c in conditions if type(c) is not dict or c.get("type") == DISRUPTION_TARGET] \
            if type(conditions) is list else conditions
        if not kept and type(phase) is str:  # nearly always: one shared object per phase
            seen = self._statuses.get(phase)
            return seen if seen is not None else _shared(self._statuses, phase, {"phase": phase}, 64)
        out: dict[str, Any] = {}
        if "phase" in status:
            out["phase"] = phase
        if kept or (conditions is not None and type(conditions) is not list):
            out["conditions"] = kept
        return out


def _shared(table: dict[K, V], key: K, made: V, limit: int = _SHARED_MAX) -> V:
    """The value `table` holds for `key`, else `made`, kept (the table cleared when it reaches `limit`)."""
    seen = table.get(key)
    if seen is None:
        if len(table) >= limit:
            table.clear()
        seen = table[key] = made
    return seen


def same_but_version(old: MutableObj | None, new: MutableObj) -> bool:
    """Two slim objects that differ at most in their resourceVersion: the newer changes nothing the scheduler
    reads (a node's heartbeat, its images), so the store keeps the older one and nothing downstream is redone."""
    if old is None or old.get("spec") != new.get("spec") or old.get("status") != new.get("status"):
        return False
    a, b = old.get("metadata"), new.get("metadata")
    if type(a) is not dict or type(b) is not dict or len(a) != len(b):
        return False
    return all(k == "resourceVersion" or b.get(k, _ABSENT) == v for k, v in a.items())


_ABSENT = object()
