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
from scheduler.cache.store import journal_of


def _uid(obj: Mapping[str, Any]) -> object:
    meta = obj.get("metadata")
    return meta.get("uid") if isinstance(meta, dict) else None


class CacheSnapshots:
    def __init__(self, rules: AdapterRules, parser: ParseCache) -> None:
        self.builder = IncrementalSnapshot(rules)
        self.parser = parser
        self.default_queue = rules.default_queue
        self._dicts: tuple[object, ...] = ()  # the stores' dicts of pods, nodes, PodGroups as last seen, and pcs
        # key -> the pod as of the last take: a mirror of the store's pods, kept up to date by the keys written
        # since (`take_pods`), not a copy of every pod each cycle (550,000 pods: 20-30 ms to copy and as much to
        # free). The cycle's binds and evictions read the UIDs they name from it; the loop takes the next
        # snapshot only once they have (ClusterCache.apply resolves them before it returns or hands over).
        self._pods: dict[str, MutableObj] = {}
        self._pods_source: object | None = None  # the store's dict the mirror follows
        # The pod changes the last take found, for the next build: (key, the new object or None if gone, whether
        # it went and came back, whether it was there before); None: not known (everything is built afresh).
        # `_untaken`: no take since the last build.
        self._pod_changes: list[tuple[str, MutableObj | None, bool, bool]] | None = []
        self._untaken = True
        self._nodes: dict[str, MutableObj] = {}
        self._podgroups: dict[str, MutableObj] = {}
        # The keys written to the stores' nodes and PodGroups since the last build (store.Journaled), taken with
        # the stores' copies; None: not known (a kind's dict not journaled, or its journal dropped). Kept until a
        # build uses them: a snapshot that fails before its build leaves them for the next one.
        self._written: list[dict[str, bool] | None] = [{}, {}]

    def take_pods(self, objects: dict[str, MutableObj]) -> dict[str, MutableObj]:
        """Under the stores' lock: the pods as the store holds them now, by key (the mirror, brought up to date by
        the keys the store wrote since the last take, `store.Journaled`; copied whole only when that is not
        known), with what changed noted for the next build. The mirror holds the pods in the store's order (the
        journal says which keys went last), so a full build may read it as it would a copy."""
        written = journal_of(objects)
        if not self._untaken:  # an earlier take no build used (it failed before): everything built afresh
            self._dicts = ()
        self._untaken = False
        if written is None or objects is not self._pods_source:  # not known, or another dict (a relist)
            fresh = dict(objects)
            changes = _changes(self._pods, fresh, None) if objects is self._pods_source else None
            self._pod_changes = [(k, o, r, k in self._pods) for k, o, r in changes] if changes is not None else None
            self._pods, self._pods_source = fresh, objects
            return fresh
        mirror, out, gone = self._pods, [], []
        known = True
        for key, came in written.items():
            was, obj = mirror.get(key), objects.get(key)
            if obj is None:
                if was is not None:
                    del mirror[key]
                    gone.append((key, None, False, True))
                continue
            if came and was is not None:  # it went and came back: last in the store's dict, and here
                del mirror[key]
            mirror[key] = obj
            if was is obj:
                continue
            renewed = _renewed(was, obj)
            if renewed is None:  # (where it goes cannot be told: everything is built afresh)
                known = False
            out.append((key, obj, bool(renewed), was is not None))
        self._pod_changes = [*out, *gone] if known else None
        return mirror

    def written(self, nodes: dict[str, bool] | None, podgroups: dict[str, bool] | None) -> None:
        """Under the stores' lock, with their copies: the keys the nodes' and PodGroups' stores wrote since the
        last take (the pods': `take_pods`)."""
        for i, keys in enumerate((nodes, podgroups)):
            if self._written[i] == {}:
                self._written[i] = keys
            else:  # an earlier take no build used (it failed before), or not known: compare everything once
                self._written[i] = None

    def build(self, pods: dict[str, MutableObj], nodes: dict[str, MutableObj], podgroups: dict[str, MutableObj],
              dicts: tuple[object, ...], pcs: dict[str, int], inputs: SnapshotInputs,
              defer: Callable[[str], bool] | None = None, reread: Collection[str] = (),
              undefer: Callable[[set[str]], set[str]] | None = None) -> ClusterSnapshot:
        """`pods`: `take_pods`'s answer; `nodes`, `podgroups`: copies of the stores' dicts, taken under the lock;
        `dicts`: the stores' dicts themselves; `inputs`: the rest of the snapshot's inputs (its nodes, PodGroups
        and pods unread);
        `defer`, `undefer`: the nodes whose usage may wait (`IncrementalSnapshot.build`, made current by
        `refresh`);
        `reread`: pods read again though unchanged (their light read no longer serves, cache/parse.py)."""
        seen = (*dicts, pcs)
        full = len(seen) != len(self._dicts) or any(a is not b for a, b in zip(seen, self._dicts, strict=False))
        written, self._written = self._written, [{}, {}]
        pod_changes, self._pod_changes, self._untaken = self._pod_changes, [], True
        delta: Delta | None = None
        if not full and pod_changes is not None:
            delta = self._delta(pods, nodes, podgroups, pcs, pod_changes, written, reread)
        if delta is None:
            inputs = replace(  # (nodes as of their resourceVersion: a relist reads again only those changed)
                inputs, nodes=self.parser.nodes(nodes.values()),
                podgroups=self.parser.podgroups(podgroups.values(), pcs, self.default_queue),
                pods=list(self.parser.pods(pods.values(), pcs)))
        self._dicts = seen
        self._nodes, self._podgroups = nodes, podgroups
        try:
            return self.builder.build(inputs, delta, defer, undefer)
        except BaseException:
            self._dicts = ()  # the builder may have applied part of the changes: the next build is a full one
            raise

    def refresh(self, names: Iterable[str]) -> dict[str, NodeInfo]:
        """The nodes among `names` the last build deferred, made current."""
        return self.builder.refresh(names)

    def _delta(self, pods: dict[str, MutableObj], nodes: dict[str, MutableObj],
               podgroups: dict[str, MutableObj], pcs: dict[str, int],
               pod_changes: list[tuple[str, MutableObj | None, bool, bool]],
               written: list[dict[str, bool] | None], reread: Collection[str] = ()) -> Delta | None:
        """The changes since the last build; None when one cannot say where a changed object goes: one that could
        not be read before and can now sits in the stores where it always was, which only a full build sees."""
        builder = self.builder
        delta = Delta()
        node_changes = _changes(self._nodes, nodes, written[0])
        group_changes = _changes(self._podgroups, podgroups, written[1])
        if node_changes is None or group_changes is None:
            return None
        if reread:  # unchanged, read again (in the parser's cache no more: its `task` reads them in full)
            changed = {key for key, _, _, _ in pod_changes}
            pod_changes = [*pod_changes,
                           *((key, pods[key], False, True) for key in reread if key not in changed and key in pods)]
        for key, obj, renewed, existed in pod_changes:
            record = _record(self.parser.task(obj, pcs), obj) if obj is not None else None
            if record is not None and not renewed and existed and key not in builder.pods:
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
             written: dict[str, bool] | None = None) -> list[tuple[str, MutableObj | None, bool]] | None:
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
                     written: dict[str, bool]) -> list[tuple[str, MutableObj | None, bool]] | None:
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
