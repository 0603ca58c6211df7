"""Layer `cache`: the Kubernetes cache's snapshots built from the last one and what changed (adapter/incremental.py).

What changed is found by identity, with no journal to keep: the watch (and every writer of the stores) replaces an
object on each change, and the parse cache reads each pod once per resourceVersion, so a pod, node or PodGroup
whose object is the one of the last build is unchanged. Only those that changed are read (nodes and PodGroups
here, pods by `ParseCache.task`). A pod, node or PodGroup whose uid changed went and came back (deleted and made
again between two cycles): it takes its new place, last, as in the stores. Everything is built afresh when the
order of a kind may have changed for another reason (a relist replaces a kind's dict, an object that could not
be read can now be, in its old place, or an object with no uid changed: it may have gone and come back) or when
every pod's reading may have (a PriorityClass changed).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import replace
from typing import Any

from scheduler.adapter.incremental import Delta, IncrementalSnapshot
from scheduler.adapter.snapshot import AdapterRules, PodRecord, SnapshotInputs
from scheduler.api.convert import node_from_object
from scheduler.api.job import JobInfo
from scheduler.api.node import NodeInfo
from scheduler.api.objects import MutableObj
from scheduler.api.snapshot import ClusterSnapshot
from scheduler.cache.parse import ParseCache


def _uid(obj: Mapping[str, Any]) -> object:
    meta = obj.get("metadata")
    return meta.get("uid") if isinstance(meta, dict) else None


class CacheSnapshots:
    def __init__(self, rules: AdapterRules, parser: ParseCache) -> None:
        self.builder = IncrementalSnapshot(rules)
        self.parser = parser
        self.default_queue = rules.default_queue
        self._dicts: tuple[object, ...] = ()  # the stores' dicts of pods, nodes, PodGroups as last seen, and pcs
        self._pods: dict[str, MutableObj] = {}  # key -> the object of the last build (read or not)
        self._nodes: dict[str, MutableObj] = {}
        self._podgroups: dict[str, MutableObj] = {}
        # The keys written to the stores' pods, nodes and PodGroups since the last build (store.Journaled), taken
        # with the stores' copies; None: not known (a kind's dict not journaled, or its journal dropped). Kept
        # until a build uses them: a snapshot that fails before its build leaves them for the next one.
        self._written: list[dict[str, None] | None] = [{}, {}, {}]

    def written(self, pods: dict[str, None] | None, nodes: dict[str, None] | None,
                podgroups: dict[str, None] | None) -> None:
        """Under the stores' lock, with their copies: the keys each kind's store wrote since the last take."""
        for i, keys in enumerate((pods, nodes, podgroups)):
            if self._written[i] == {}:
                self._written[i] = keys
            else:  # an earlier take no build used (it failed before), or not known: compare everything once
                self._written[i] = None

    def build(self, pods: dict[str, MutableObj], nodes: dict[str, MutableObj], podgroups: dict[str, MutableObj],
              dicts: tuple[object, ...], pcs: dict[str, int], inputs: SnapshotInputs,
              defer: Callable[[str], bool] | None = None, reread: Collection[str] = ()) -> ClusterSnapshot:
        """`pods`, `nodes`, `podgroups`: copies of the stores' dicts, taken under the lock; `dicts`: the stores'
        dicts themselves; `inputs`: the rest of the snapshot's inputs (its nodes, PodGroups and pods unread);
        `defer`: the nodes whose usage may wait (`IncrementalSnapshot.build`, made current by `refresh`);
        `reread`: pods read again though unchanged (their light read no longer serves, cache/parse.py)."""
        seen = (*dicts, pcs)
        full = len(seen) != len(self._dicts) or any(a is not b for a, b in zip(seen, self._dicts, strict=False))
        written, self._written = self._written, [{}, {}, {}]
        delta: Delta | None = None if full else self._delta(pods, nodes, podgroups, pcs, written, reread)
        if delta is None:
            inputs = replace(  # (nodes as of their resourceVersion: a relist reads again only those changed)
                inputs, nodes=self.parser.nodes(nodes.values()),
                podgroups=self.parser.podgroups(podgroups.values(), pcs, self.default_queue),
                pods=list(self.parser.pods(pods.values(), pcs)))
        self._dicts = seen
        self._pods, self._nodes, self._podgroups = pods, nodes, podgroups
        try:
            return self.builder.build(inputs, delta, defer)
        except BaseException:
            self._dicts = ()  # the builder may have applied part of the changes: the next build is a full one
            raise

    def refresh(self, names: Iterable[str]) -> dict[str, NodeInfo]:
        """The nodes among `names` the last build deferred, made current."""
        return self.builder.refresh(names)

    def _delta(self, pods: dict[str, MutableObj], nodes: dict[str, MutableObj],
               podgroups: dict[str, MutableObj], pcs: dict[str, int],
               written: list[dict[str, None] | None], reread: Collection[str] = ()) -> Delta | None:
        """The changes since the last build; None when one cannot say where a changed object goes: one that could
        not be read before and can now sits in the stores where it always was, which only a full build sees."""
        builder = self.builder
        delta = Delta()
        pod_changes, node_changes = _changes(self._pods, pods, written[0]), _changes(self._nodes, nodes, written[1])
        group_changes = _changes(self._podgroups, podgroups, written[2])
        if pod_changes is None or node_changes is None or group_changes is None:
            return None
        if reread:  # unchanged, read again (in the parser's cache no more: its `task` reads them in full)
            changed = {key for key, _, _ in pod_changes}
            pod_changes += [(key, pods[key], False) for key in reread if key not in changed and key in pods]
        for key, obj, renewed in pod_changes:
            record = _record(self.parser.task(obj, pcs), obj) if obj is not None else None
            if record is not None and not renewed and key in self._pods and key not in builder.pods:
                return None
            delta.pods[key] = record
            if renewed:
                delta.renewed.add(key)
        for key, obj, renewed in node_changes:
            base = self._node(obj) if obj is not None else None
            if base is not None and not renewed and key in self._nodes and key not in builder.bases:
                return None
            delta.nodes[key] = base
            if renewed:
                delta.renewed_nodes.add(key)
        for key, obj, renewed in group_changes:
            template = self._template(obj, pcs) if obj is not None else None
            if template is not None and not renewed and key in self._podgroups and key not in builder.podgroups:
                return None
            delta.podgroups[key] = template
            if renewed:
                delta.renewed_podgroups.add(key)
        return delta

    def _node(self, obj: MutableObj) -> NodeInfo | None:
        return self.parser.read_fields(  # type: ignore[no-any-return]
            "Node", obj, lambda o, sink: node_from_object(o, sink))

    def _template(self, obj: MutableObj, pcs: dict[str, int]) -> JobInfo | None:
        return next(iter(self.parser.podgroups((obj,), pcs, self.default_queue)), None)


def _record(task: Any, obj: MutableObj) -> PodRecord | None:
    return (obj, task) if task is not None else None


def _changes(old: dict[str, MutableObj], new: dict[str, MutableObj],
             written: dict[str, None] | None = None) -> list[tuple[str, MutableObj | None, bool]] | None:
    """(key, the new object or None if gone, whether it went and came back), in the new dict's order, gone last;
    None when that cannot be told: an object that changed has no uid (the apiserver always sets one; a hostile or
    hand-made object may not), so whether it kept its place or went last is not known. `written`: the keys the
    store wrote since `old` was copied (store.Journaled), in the order the dict holds its new keys: only those
    are compared; None: every key is."""
    if written is not None:
        return _written_changes(old, new, written)
    out: list[tuple[str, MutableObj | None, bool]] = []
    get = old.get
    added = 0
    for key, obj in new.items():
        was = get(key)
        if was is not obj:
            renewed = _renewed(was, obj)
            if renewed is None:
                return None
            out.append((key, obj, renewed))
            added += was is None
    if len(old) + added != len(new):  # some went
        out.extend((key, None, False) for key in old.keys() - new.keys())
    return out


def _renewed(was: MutableObj | None, obj: MutableObj) -> bool | None:
    """Whether `obj`, which replaced `was` (None: new), went and came back: its uid changed; None if one of the two
    has none (that cannot be told)."""
    if was is None:
        return False
    uid = _uid(obj)
    if uid is None or _uid(was) is None:
        return None
    return bool(_uid(was) != uid)


def _written_changes(old: dict[str, MutableObj], new: dict[str, MutableObj],
                     written: dict[str, None]) -> list[tuple[str, MutableObj | None, bool]] | None:
    """`_changes` over the keys written only (the same list: a key written back to the object it had is no change)."""
    out: list[tuple[str, MutableObj | None, bool]] = []
    gone: list[tuple[str, MutableObj | None, bool]] = []
    get = old.get
    for key in written:
        was, obj = get(key), new.get(key)
        if was is obj:
            continue
        if obj is None:
            gone.append((key, None, False))
            continue
        renewed = _renewed(was, obj)
        if renewed is None:
            return None
        out.append((key, obj, renewed))
    out.extend(gone)
    return out
