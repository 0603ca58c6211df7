"""The simulated apiserver's store: every object kept as its encoded JSON (what a list or watch sends, built once
per write), one resourceVersion counter for all kinds (etcd's revision), and per kind a log of recent events that
watches read from.

Kubernetes semantics kept (each checked by tests/cli/test_bench_shardsim.py):
- optimistic concurrency: a write that names a resourceVersion other than the stored one is a 409 Conflict;
- a status subresource writes only the status, the object's write leaves the status as stored;
- a paged list (`limit`/`continue`) is one consistent snapshot at the first page's resourceVersion; an unknown
  or expired continue token is a 410 Gone;
- a watch from resourceVersion R sends every change after R, in order; R older than the kept events is a 410
  (an ERROR event with code 410, as the watch cache sends it); a selected watch sees an object leave its selection
  as DELETED and enter it as ADDED (the watch cache's filtering, storage/cacher);
- a delete whose DeleteOptions name a uid or resourceVersion other than the stored ones is a 409;
- `pods/binding` sets `spec.nodeName` once: a second binding of a bound pod is a 409;
- the bind fence of manifests/07-bind-fence.yaml: a Binding annotated with a Lease `<namespace>/<name>` and a
  sender (`scheduling.volcano-py.io/lease`, `.../bound-by`) is refused (403 Forbidden) when that Lease exists and
  does not name the sender as its holder;
- creation in a namespace that does not exist is a 404.
"""

from __future__ import annotations

import base64
import itertools
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from shardsim.patches import PatchError, json_patch, merge_patch, strategic_merge_patch
from shardsim.selectors import Selector, field_values

LEASE_ANNOTATION = "scheduling.volcano-py.io/lease"  # scheduler/cache/leader.py's, on a fenced Binding
BOUND_BY_ANNOTATION = "scheduling.volcano-py.io/bound-by"
LOG_KEEP = 200_000  # events kept per kind for watches to resume from (the watch cache's window)
SNAPSHOT_TTL = 300.0  # seconds a list's continue token stays valid (etcd compaction runs every 5 minutes)


class ApiError(Exception):
    """An error status: code, reason, message, as metav1.Status."""

    def __init__(self, code: int, reason: str, message: str):
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message

    def body(self) -> bytes:
        return orjson.dumps({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                             "message": self.message, "reason": self.reason, "code": self.code})


@dataclass(slots=True)
class Entry:
    data: bytes
    rv: int
    labels: dict[str, str]
    fields: dict[str, str]


@dataclass(slots=True)
class Event:
    rv: int
    type: str
    data: bytes
    new: tuple[dict[str, str], dict[str, str]] | None  # labels, fields after (None: deleted)
    old: tuple[dict[str, str], dict[str, str]] | None  # before (None: added)
    at: float = 0.0  # when it was written (time.monotonic), for the watch delay


@dataclass
class Kind:
    resource: str
    group_version: str
    kind: str
    namespaced: bool
    status_subresource: bool
    retain: bool = True  # events are accepted and counted, not kept (nothing here reads them back)
    objects: dict[str, Entry] = field(default_factory=dict)
    log: list[Event] = field(default_factory=list)
    base: int = 0  # the absolute index of log[0]
    floor_rv: int = 0  # a watch may resume from this resourceVersion or later
    watchers: set[Callable[[], None]] = field(default_factory=set)
    sorted_keys: list[str] | None = None
    # field -> value -> keys: the fields a list selects on by equality that the apiserver indexes (the watch
    # cache's pod index on spec.nodeName); here also spec.schedulerName, which the scheduler's first lists ask for
    indexes: dict[str, dict[str, set[str]]] = field(default_factory=dict)

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"


def key_of(namespace: str, name: str) -> str:
    return f"{namespace}/{name}" if namespace else name


class Store:
    def __init__(self, kinds: list[Kind], clock: Callable[[], float] = time.time):
        self.by_resource: dict[tuple[str, str], Kind] = {(k.group_version, k.resource): k for k in kinds}
        self.rv = 1
        self.clock = clock
        self._snapshots: dict[str, tuple[float, int, list[bytes]]] = {}
        self._ids = itertools.count(1)
        self.binds: dict[str, int] = {}  # pod key -> accepted bindings (the check: never more than one)
        self.loading = False  # while the harness fills the store: no events kept (nobody watches yet)
        self.writer = ""  # who sent the write being made (the server sets it per request): for the observers
        # called after every kept write: (kind, event type, the entry written, the entry before); the chaos
        # bench's monitor (shardsim/monitor.py) checks its invariants there, at every write
        self.observers: list[Callable[[Kind, str, Entry, Entry | None], None]] = []
        self.fence_refused: list[tuple[float, dict[str, str]]] = []  # the binds the fence refused: when, what

    def kind(self, group_version: str, resource: str) -> Kind:
        kind = self.by_resource.get((group_version, resource))
        if kind is None:
            raise ApiError(404, "NotFound", f"the server could not find the requested resource ({resource})")
        return kind

    # ---- writes -------------------------------------------------------------------------------------------------
    def _put(self, kind: Kind, key: str, entry: Entry | None) -> None:
        """Store (or with None, drop) an object, its index entries with it."""
        old = kind.objects.get(key)
        for name, index in kind.indexes.items():
            before = old.fields.get(name) if old is not None else None
            after = entry.fields.get(name) if entry is not None else None
            if before != after:
                if before is not None:
                    index[before].discard(key)
                if after is not None:
                    index.setdefault(after, set()).add(key)
        if entry is None:
            del kind.objects[key]
        else:
            kind.objects[key] = entry

    def _stamp(self, kind: Kind, doc: dict[str, Any]) -> Entry:
        self.rv += 1
        meta = doc.setdefault("metadata", {})
        meta["resourceVersion"] = str(self.rv)
        doc["apiVersion"], doc["kind"] = kind.group_version, kind.kind
        labels = meta.get("labels") if isinstance(meta.get("labels"), dict) else {}
        # orjson's answer keeps its whole write buffer (4 KiB for a pod of 500 bytes): copied to its size, a
        # million stored objects take 0.5 GB rather than 4.
        return Entry(bytes(memoryview(orjson.dumps(doc))), self.rv, {str(k): str(v) for k, v in labels.items()},
                     field_values(kind.resource, doc))

    def _record(self, kind: Kind, type_: str, entry: Entry, old: Entry | None) -> None:
        if self.loading:
            kind.floor_rv = entry.rv  # a watch from before the load is too old: it must list
            return
        new = None if type_ == "DELETED" else (entry.labels, entry.fields)
        kind.log.append(Event(entry.rv, type_, entry.data, new, (old.labels, old.fields) if old else None,
                              time.monotonic()))
        if len(kind.log) > 2 * LOG_KEEP:
            cut = len(kind.log) - LOG_KEEP
            kind.floor_rv = kind.log[cut - 1].rv
            del kind.log[:cut]
            kind.base += cut
        for wake in list(kind.watchers):
            wake()
        for observe in self.observers:
            observe(kind, type_, entry, old)

    def _check_namespace(self, kind: Kind, namespace: str) -> None:
        if kind.namespaced:
            if not namespace:
                raise ApiError(400, "BadRequest", f"{kind.resource} is namespaced: a namespace is required")
            if namespace not in self.kind("v1", "namespaces").objects:
                raise ApiError(404, "NotFound", f'namespaces "{namespace}" not found')

    def create(self, kind: Kind, namespace: str, doc: Any) -> bytes:
        if not isinstance(doc, dict) or not isinstance(doc.get("metadata"), dict):
            raise ApiError(400, "BadRequest", "the body is not an object with metadata")
        meta = doc["metadata"]
        name = meta.get("name")
        if not isinstance(name, str) or not name:
            if isinstance(meta.get("generateName"), str):
                name = meta["generateName"] + uuid.uuid4().hex[:5]
                meta["name"] = name
            else:
                raise ApiError(422, "Invalid", "metadata.name: Required value: name or generateName is required")
        self._check_namespace(kind, namespace)
        if kind.namespaced:
            meta["namespace"] = namespace
        key = key_of(namespace, name)
        if key in kind.objects:
            raise ApiError(409, "AlreadyExists", f'{kind.resource} "{name}" already exists')
        if meta.get("resourceVersion"):
            raise ApiError(400, "BadRequest", "resourceVersion should not be set on objects to be created")
        meta["uid"] = str(uuid.uuid4())
        meta.setdefault("creationTimestamp", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.clock())))
        entry = self._stamp(kind, doc)
        if kind.retain:
            self._put(kind, key, entry)
            kind.sorted_keys = None
            self._record(kind, "ADDED", entry, None)
        return entry.data

    def get(self, kind: Kind, namespace: str, name: str) -> Entry:
        entry = kind.objects.get(key_of(namespace, name))
        if entry is None:
            raise ApiError(404, "NotFound", f'{kind.resource} "{name}" not found')
        return entry

    def _write(self, kind: Kind, namespace: str, name: str, new: dict[str, Any], old: Entry,
               subresource: str, *, patching: bool = False) -> bytes:
        stored = orjson.loads(old.data)
        meta = new.get("metadata") if isinstance(new.get("metadata"), dict) else {}
        sent_rv = meta.get("resourceVersion")
        if sent_rv not in (None, "") and str(sent_rv) != str(old.rv):
            raise ApiError(409, "Conflict", f'Operation cannot be fulfilled on {kind.resource} "{name}": the object '
                           "has been modified; please apply your changes to the latest version and try again")
        if meta.get("uid") not in (None, stored["metadata"].get("uid")):
            if patching:  # a patch has no precondition but its resourceVersion: the uid is validated, immutable
                raise ApiError(422, "Invalid", f'{kind.kind} "{name}" is invalid: metadata.uid: Invalid value: '
                               f'"{meta.get("uid")}": field is immutable')
            raise ApiError(409, "Conflict", f'Operation cannot be fulfilled on {kind.resource} "{name}": '
                           f'Precondition failed: UID in precondition: {meta.get("uid")}, UID in object meta: '
                           f'{stored["metadata"].get("uid")}')
        if subresource == "status":  # only the status changes
            result = {**stored, "status": new.get("status")}
        elif subresource:
            raise ApiError(404, "NotFound", f"{kind.resource}/{subresource}: no such subresource")
        else:
            result = dict(new)
            if kind.status_subresource:  # the object's write leaves the status as stored
                result["status"] = stored.get("status")
            result["metadata"] = {**meta, "uid": stored["metadata"]["uid"],
                                  "creationTimestamp": stored["metadata"].get("creationTimestamp"),
                                  "name": name, **({"namespace": namespace} if kind.namespaced else {})}
        if result.get("status") is None:
            result.pop("status", None)
        entry = self._stamp(kind, result)
        self._put(kind, key_of(namespace, name), entry)
        self._record(kind, "MODIFIED", entry, old)
        return entry.data

    def update(self, kind: Kind, namespace: str, name: str, doc: Any, subresource: str = "") -> bytes:
        """PUT: a replace, refused (409) unless it names the stored resourceVersion (an update must name one)."""
        if not isinstance(doc, dict) or not isinstance(doc.get("metadata"), dict):
            raise ApiError(400, "BadRequest", "the body is not an object with metadata")
        if not doc["metadata"].get("resourceVersion"):
            raise ApiError(422, "Invalid", "metadata.resourceVersion: Invalid value: 0x0: must be specified for an "
                           "update")
        if doc["metadata"].get("name") not in (None, name):
            raise ApiError(400, "BadRequest", "the name of the object does not match the name on the URL")
        return self._write(kind, namespace, name, doc, self.get(kind, namespace, name), subresource)

    def patch(self, kind: Kind, namespace: str, name: str, content_type: str, patch: Any,
              subresource: str = "") -> bytes:
        old = self.get(kind, namespace, name)
        stored = orjson.loads(old.data)
        try:
            if content_type == "application/merge-patch+json":
                new = merge_patch(stored, patch)
            elif content_type == "application/strategic-merge-patch+json":
                if "volcano.sh/" in kind.group_version:  # custom resources (CRDs): no strategy
                    raise ApiError(415, "UnsupportedMediaType", "strategic merge patch is not supported for "
                                   "custom resources")
                new = strategic_merge_patch(stored, patch)
            elif content_type == "application/json-patch+json":
                new = json_patch(stored, patch)
            else:
                raise ApiError(415, "UnsupportedMediaType", f"the patch type {content_type!r} is not supported")
        except PatchError as exc:
            raise ApiError(422, "Invalid", str(exc)) from None
        if not isinstance(new, dict) or not isinstance(new.get("metadata"), dict):
            raise ApiError(422, "Invalid", "the patched object has no metadata")
        return self._write(kind, namespace, name, new, old, subresource, patching=True)

    def delete(self, kind: Kind, namespace: str, name: str, preconditions: Any = None) -> bytes:
        """DELETE, with DeleteOptions' `preconditions` (uid, resourceVersion) checked against the stored object:
        a mismatch is a 409 Conflict and nothing is deleted (apiserver's registry/generic/registry/store.go)."""
        key = key_of(namespace, name)
        old = self.get(kind, namespace, name)
        if isinstance(preconditions, dict):
            uid = orjson.loads(old.data)["metadata"].get("uid")
            for field_name, stored in (("uid", uid), ("resourceVersion", str(old.rv))):
                wanted = preconditions.get(field_name)
                if wanted not in (None, "") and str(wanted) != stored:
                    label = "UID" if field_name == "uid" else "ResourceVersion"
                    raise ApiError(409, "Conflict", f'Operation cannot be fulfilled on {kind.resource} "{name}": '
                                   f"Precondition failed: {label} in precondition: {wanted}, {label} in object "
                                   f"meta: {stored}")
        self._put(kind, key, None)
        kind.sorted_keys = None
        entry = self._stamp(kind, orjson.loads(old.data))
        self._record(kind, "DELETED", entry, old)
        return entry.data

    def bind(self, namespace: str, name: str, binding: Any) -> None:
        """pods/binding (pkg/registry/core/pod/storage/storage.go assignPod): a pod is bound once."""
        pods = self.kind("v1", "pods")
        if not isinstance(binding, dict) or not isinstance(binding.get("target"), dict):
            raise ApiError(400, "BadRequest", "a Binding needs a target")
        meta = binding.get("metadata") if isinstance(binding.get("metadata"), dict) else {}
        if meta.get("name") not in (None, name):
            raise ApiError(400, "BadRequest", "the Binding's name does not match the pod's")
        node = binding["target"].get("name")
        if not isinstance(node, str) or not node:
            raise ApiError(422, "Invalid", "target.name: Required value")
        self._fence(name, meta.get("annotations"))  # admission runs before the registry's checks
        old = self.get(pods, namespace, name)
        pod = orjson.loads(old.data)
        if meta.get("uid") not in (None, pod["metadata"].get("uid")):
            raise ApiError(409, "Conflict", f'Operation cannot be fulfilled on pods/binding "{name}": Precondition '
                           f'failed: UID in precondition: {meta.get("uid")}, UID in object meta: '
                           f'{pod["metadata"].get("uid")}')
        if pod["metadata"].get("deletionTimestamp"):
            raise ApiError(409, "Conflict", f"pod {name} is being deleted, cannot be assigned to a host")
        spec = pod.setdefault("spec", {})
        if spec.get("nodeName"):
            raise ApiError(409, "Conflict", f'Operation cannot be fulfilled on pods/binding "{name}": pod {name} is '
                           f'already assigned to node "{spec["nodeName"]}"')
        spec["nodeName"] = node
        if isinstance(meta.get("annotations"), dict):
            pod["metadata"]["annotations"] = {**(pod["metadata"].get("annotations") or {}), **meta["annotations"]}
        status = pod.setdefault("status", {})
        conditions = [c for c in status.get("conditions") or () if c.get("type") != "PodScheduled"]
        status["conditions"] = [*conditions, {"type": "PodScheduled", "status": "True"}]
        entry = self._stamp(pods, pod)
        self._put(pods, key_of(namespace, name), entry)
        self._record(pods, "MODIFIED", entry, old)
        key = key_of(namespace, name)
        self.binds[key] = self.binds.get(key, 0) + 1

    def _fence(self, pod: str, annotations: Any) -> None:
        """manifests/07-bind-fence.yaml's ValidatingAdmissionPolicy: a Binding naming a Lease and its sender is
        refused when the Lease exists and another (or nobody) holds it; one without both annotations, or naming a
        Lease that does not exist, passes."""
        if not isinstance(annotations, dict):
            return
        lease, sender = annotations.get(LEASE_ANNOTATION), annotations.get(BOUND_BY_ANNOTATION)
        if not isinstance(lease, str) or not isinstance(sender, str):
            return
        namespace, _, name = lease.partition("/")
        entry = self.by_resource[("coordination.k8s.io/v1", "leases")].objects.get(key_of(namespace, name))
        if entry is None:
            return
        holder = (orjson.loads(entry.data).get("spec") or {}).get("holderIdentity") or ""
        if holder != sender:
            self.fence_refused.append((time.monotonic(), {"pod": pod, "lease": lease, "sender": sender,
                                                          "holder": holder}))
            raise ApiError(403, "Forbidden", f"admission webhook denied the request: bind fence: {sender} does not "
                           f"hold Lease {lease} (held by {holder or 'nobody'})")

    # ---- reads --------------------------------------------------------------------------------------------------
    def list(self, kind: Kind, namespace: str, selector: Selector, limit: int, token: str) -> tuple[bytes, int]:
        """One page (all when `limit` is 0) and its number of objects."""
        now = self.clock()
        for stale in [t for t, (at, _, _) in self._snapshots.items() if now - at > SNAPSHOT_TTL]:
            del self._snapshots[stale]
        if token:
            try:
                sid, _, offset_text = base64.urlsafe_b64decode(token.encode()).decode().partition(":")
                offset = int(offset_text)
            except ValueError:
                raise ApiError(400, "BadRequest", "invalid continue token") from None
            held = self._snapshots.get(sid)
            if held is None:
                raise ApiError(410, "Expired", "The provided continue parameter is too old to display a consistent "
                               "list result. You can start a new list without the continue parameter.")
            _, rv, items = held
        else:
            if kind.sorted_keys is None:
                kind.sorted_keys = sorted(kind.objects)
            prefix = f"{namespace}/" if namespace and kind.namespaced else ""
            keys = kind.sorted_keys
            for term in selector.fields:
                if term.op == "=" and term.field in kind.indexes:
                    keys = sorted(kind.indexes[term.field].get(term.value, ()))
                    break
            items = [e.data for k in keys if (e := kind.objects[k]) is not None
                     and (not prefix or k.startswith(prefix)) and (selector.everything
                                                                   or selector.matches(e.labels, e.fields))]
            rv, offset, sid = self.rv, 0, ""
        page = items[offset:offset + limit] if limit > 0 else items[offset:]
        end = offset + len(page)
        more = ""
        if end < len(items):
            if not sid:
                sid = str(next(self._ids))
                self._snapshots[sid] = (now, rv, items)
            more = base64.urlsafe_b64encode(f"{sid}:{end}".encode()).decode()
        elif sid:
            self._snapshots.pop(sid, None)
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if more:
            meta["continue"] = more
            meta["remainingItemCount"] = len(items) - end
        head = orjson.dumps({"kind": kind.list_kind, "apiVersion": kind.group_version, "metadata": meta})
        return head[:-1] + b',"items":[' + b",".join(page) + b"]}", len(page)

    def watch_start(self, kind: Kind, rv_text: str) -> int:
        """The absolute log index a watch from `rv_text` starts at; 410 when that position is no longer kept."""
        try:
            rv = int(rv_text)
        except ValueError:
            raise ApiError(400, "BadRequest", f"invalid resourceVersion {rv_text!r}") from None
        if rv < kind.floor_rv:
            raise ApiError(410, "Expired", f"too old resource version: {rv} ({kind.floor_rv})")
        lo, hi = 0, len(kind.log)  # the first event after rv
        while lo < hi:
            mid = (lo + hi) // 2
            if kind.log[mid].rv <= rv:
                lo = mid + 1
            else:
                hi = mid
        return kind.base + lo

    def watch_read(self, kind: Kind, at: int, selector: Selector, *, delay: float = 0.0,
                   now: float | None = None) -> tuple[list[bytes], int]:
        """The event lines from absolute index `at` on, filtered as the watch cache filters, and the next index;
        410 when the watcher fell behind the kept events. With a `delay` (seconds), only the events written at
        least that long before `now`: a watcher sees each change that long after it happened."""
        if at < kind.base:
            raise ApiError(410, "Expired", "too old resource version: the watch fell behind")
        lines = []
        end = len(kind.log)
        if delay > 0:
            due = (time.monotonic() if now is None else now) - delay
            while end > at - kind.base and kind.log[end - 1].at > due:
                end -= 1
        for ev in kind.log[at - kind.base:end]:
            type_ = ev.type
            if not selector.everything:
                now_in = ev.new is not None and selector.matches(*ev.new)
                was_in = ev.old is not None and selector.matches(*ev.old)
                if type_ == "DELETED":
                    if not was_in:
                        continue
                elif now_in and not was_in:
                    type_ = "ADDED"
                elif was_in and not now_in:
                    type_ = "DELETED"
                elif not now_in:
                    continue
            lines.append(b'{"type":"' + type_.encode() + b'","object":' + ev.data + b"}\n")
        return lines, kind.base + end

    def initial_events(self, kind: Kind, namespace: str, selector: Selector) -> list[bytes]:
        """A watch from resourceVersion "" or "0": every current object as ADDED first."""
        prefix = f"{namespace}/" if namespace and kind.namespaced else ""
        return [b'{"type":"ADDED","object":' + e.data + b"}\n" for k, e in kind.objects.items()
                if (not prefix or k.startswith(prefix)) and (selector.everything
                                                             or selector.matches(e.labels, e.fields))]
