"""Layer `api`: Volcano's NodeShard (shard.volcano.sh/v1alpha1) as the scheduler reads it, and the pure rules of
the shard handoff.

A sharding controller (Volcano's, or `volcano-py controllers`) writes `spec.nodesDesired` of one NodeShard per
scheduler; the scheduler named by the shard publishes `status.nodesInUse` (its desired nodes less those another
shard still has in use), `status.nodesToAdd` and `status.nodesToRemove`. A node moves in two phases: the controller
moves it from A's desired to B's; B may not use it while A's published `nodesInUse` still holds it; A drops it
from `nodesInUse` once its session has ended; then B takes it. Volcano: pkg/scheduler/cache/shard_coordinator.go
(`getAvailableNodesFromShard`, `generateNodeShardWithStatus`), pkg/scheduler/api/node_shard_info.go.

Every NodeShard is read once here, bounded; an unreadable one is `ShardUnreadable` (said once by the reader).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, Final

NONE, SOFT, HARD = "none", "soft", "hard"  # --scheduler-sharding-mode (Volcano: pkg/util/util.go)
MODES: Final = (NONE, SOFT, HARD)
NODE_SHARDS_PATH: Final = "/apis/shard.volcano.sh/v1alpha1/nodeshards"
NAME_MAX: Final = 253
NODES_MAX: Final = 200_000  # names in one list: more nodes than any cluster has
LISTS: Final = ("nodesInUse", "nodesToRemove", "nodesToAdd")


@dataclass(frozen=True, slots=True)
class ShardUnreadable:
    """A NodeShard the scheduler cannot read: the field and why. It counts as absent."""

    name: str
    path: str
    problem: str

    def describe(self) -> str:
        return f"NodeShard {self.name or '?'}: {self.path}: {self.problem}; the shard is ignored"


@dataclass(frozen=True, slots=True)
class NodeShardInfo:
    """One NodeShard, read. The status's `nodesToAdd` / `nodesToRemove` are kept only to tell whether a new status
    differs: `status_body` works them out again from desired and in use (node_shard_info.go NewNodeShardInfo)."""

    name: str
    desired: frozenset[str]
    in_use: frozenset[str]
    resource_version: str = ""
    status_to_add: frozenset[str] = frozenset()  # as published (to tell whether a new status differs)
    status_to_remove: frozenset[str] = frozenset()


def _names(value: Any, name: str, path: str, *, required: bool) -> frozenset[str] | ShardUnreadable:
    if value is None:
        return ShardUnreadable(name, path, "missing") if required else frozenset()
    if not isinstance(value, list):
        return ShardUnreadable(name, path, f"not a list ({type(value).__name__})")
    if len(value) > NODES_MAX:
        return ShardUnreadable(name, path, f"{len(value)} names, more than {NODES_MAX}")
    for item in value:
        if not isinstance(item, str) or not item or len(item) > NAME_MAX:
            return ShardUnreadable(name, path, f"{str(item)[:40]!r} is no node name")
    return frozenset(value)


def parse_node_shard(obj: Any) -> NodeShardInfo | ShardUnreadable:
    """A NodeShard as served, read and bounded."""
    if not isinstance(obj, Mapping):
        return ShardUnreadable("", "", "not an object")
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    if not isinstance(name, str) or not name or len(name) > NAME_MAX:
        return ShardUnreadable("", "metadata.name", "missing or not a name")
    version = meta.get("resourceVersion") if isinstance(meta, Mapping) else None
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        return ShardUnreadable(name, "spec", "missing or not an object")
    desired = _names(spec.get("nodesDesired"), name, "spec.nodesDesired", required=True)
    if isinstance(desired, ShardUnreadable):
        return desired
    status = obj.get("status")
    if status is None:
        status = {}
    if not isinstance(status, Mapping):
        return ShardUnreadable(name, "status", "not an object")
    lists: list[frozenset[str]] = []
    for key in LISTS:
        read = _names(status.get(key), name, f"status.{key}", required=False)
        if isinstance(read, ShardUnreadable):
            return read
        lists.append(read)
    return NodeShardInfo(name, desired, lists[0], str(version or "")[:64], lists[2], lists[1])


def available_nodes(own: str, shards: Mapping[str, NodeShardInfo]) -> frozenset[str] | None:
    """The nodes shard `own` may use now: its desired nodes less every node another shard still has in use
    (shard_coordinator.go getAvailableNodesFromShard). None when there is no such shard."""
    mine = shards.get(own)
    if mine is None:
        return None
    nodes = set(mine.desired)
    for name, other in shards.items():
        if name != own:
            nodes -= other.in_use
    return frozenset(nodes)


def status_body(shard: NodeShardInfo, in_use: frozenset[str]) -> dict[str, list[str]] | None:
    """The status the scheduler publishes for `in_use` (lists sorted), or None when the published one says the
    same already (shard_coordinator.go generateNodeShardWithStatus)."""
    to_remove, to_add = in_use - shard.desired, shard.desired - in_use
    if in_use == shard.in_use and to_remove == shard.status_to_remove and to_add == shard.status_to_add:
        return None
    return {"nodesInUse": sorted(in_use), "nodesToRemove": sorted(to_remove), "nodesToAdd": sorted(to_add)}


@dataclass(frozen=True, slots=True)
class ShardView:
    """What one session knows of its shard: the mode and the nodes it may use (`in_shard`). Hard: a node outside
    is refused by every action with Volcano's reason; soft: nodes inside are tried first, then the others
    (pkg/scheduler/util/predicate_helper.go, actions/allocate/allocate.go prioritizeNodes)."""

    mode: str
    name: str
    nodes: frozenset[str]

    @property
    def hard(self) -> bool:
        return self.mode == HARD

    @property
    def soft(self) -> bool:
        return self.mode == SOFT


def revision(version: str) -> int:
    """A resourceVersion as a number (etcd revisions; 0 when not numeric)."""
    return int(version) if version.isascii() and version.isdigit() and len(version) <= 20 else 0


@dataclass(slots=True)
class ShardLedger:
    """One scheduler's side of the handoff, without I/O: between two sessions (`step`), work out the nodes this
    shard may use from a view of every NodeShard, publish them if the status says otherwise, and return what the
    next session may use: the available nodes that the stored `nodesInUse` also holds. So a node is used only
    once the apiserver has it in this shard's `nodesInUse`, and it leaves `nodesInUse` only between sessions
    (after the last session that used it ended and its binds returned: the runner calls `step` after apply).

    The view must be what one watch of all NodeShards has delivered (a prefix of their changes, in order), and
    `write(shard, status)` must send the status with the shard's resourceVersion as a precondition (a PUT of the
    status subresource), returning the new resourceVersion or None when refused. Then no node is in two shards'
    `nodesInUse` while the sharding controller keeps `nodesDesired` disjoint: a shard adds a node only while its
    own desired list (current, by the precondition) holds it, which is after the node left the other shard's
    desired list, and its view, a prefix that holds that change, holds every earlier status of the other shard.
    Until the watch shows this shard's own write, nothing more is written (the next write would be refused)."""

    name: str
    published: frozenset[str] | None = None  # what this shard's stored nodesInUse holds, as far as known
    _written: tuple[int, frozenset[str]] | None = None  # our last write, until the view shows it

    def step(self, view: Mapping[str, NodeShardInfo],
             write: Callable[[NodeShardInfo, dict[str, list[str]]], str | None]) -> frozenset[str] | None:
        """The nodes the next session may use; None when there is no NodeShard of this name."""
        own = view.get(self.name)
        if own is None:
            return None
        available = available_nodes(self.name, view) or frozenset()
        if not self._caught_up(own):
            return available & (self.published or frozenset())
        self._publish(own, available, write)
        return available & (self.published or frozenset())

    def release(self, view: Mapping[str, NodeShardInfo],
                write: Callable[[NodeShardInfo, dict[str, list[str]]], str | None], keep: Collection[str]) -> bool:
        """During an apply, once its binds are sent: let go of the nodes leaving this shard (no longer available)
        that none of the apply's writes names (`keep`: the nodes of its binds and evictions), instead of after
        the binds return. Only removals are written; the nodes kept leave at the next `step`. Stricter than
        Volcano still (it publishes as the session ends, its binds still in flight): a node leaves only once no
        write of this scheduler to it is in flight. True when a status was written."""
        own = view.get(self.name)
        if own is None or not self._caught_up(own):
            return False
        let_go = (own.in_use - (available_nodes(self.name, view) or frozenset())).difference(keep)
        return bool(let_go) and self._publish(own, own.in_use - let_go, write)

    def _caught_up(self, own: NodeShardInfo) -> bool:
        """Whether the view shows our last write (`published` then what the stored status holds); if not,
        `published` is what that write held, and nothing more may be written yet."""
        if self._written is not None:
            if revision(own.resource_version) < self._written[0]:
                self.published = self._written[1]
                return False
            self._written = None
        self.published = own.in_use
        return True

    def _publish(self, own: NodeShardInfo, in_use: frozenset[str],
                 write: Callable[[NodeShardInfo, dict[str, list[str]]], str | None]) -> bool:
        """Write the status for `in_use` unless the stored one says it already; True when a write was accepted."""
        body = status_body(own, in_use)
        version = write(own, body) if body is not None else None
        if version is None:
            return False
        self._written = (revision(version), in_use)
        self.published = in_use
        return True
