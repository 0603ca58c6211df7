"""Layer `cache`: the scheduler's side of Volcano's NodeShard contract (`--scheduler-sharding-mode` soft or hard).

With sharding on, the cache watches every NodeShard (`Stores.node_shards`; with sharding off nothing is watched,
as in Volcano: pkg/scheduler/cache/cache.go registers the NodeShard informer only in soft and hard mode). Between
two sessions, the runner calls `between_sessions`: the shard named `--scheduler-sharding-name` gets its available
nodes (desired, less what other shards still use), its status written when it changed (`nodesInUse`,
`nodesToAdd`, `nodesToRemove`: shard_coordinator.go UpdateNodeShardStatus, a PUT of the status subresource with
the object's resourceVersion), and the next session's `ShardView`. The rules are `api.shard.ShardLedger`'s.

Volcano writes the status when a session ends or, with none running, as soon as a NodeShard changes; the runner
here calls this before each snapshot and after each apply, which returns only once the cycle's binds have: so a
node leaves `nodesInUse` only after every bind of the last cycle that used it has returned.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any
from urllib.parse import quote

from scheduler.api.shard import (
    NODE_SHARDS_PATH,
    NodeShardInfo,
    ShardLedger,
    ShardUnreadable,
    ShardView,
    parse_node_shard,
    revision,
)
from scheduler.cache.kube import TRANSPORT_ERRORS, Kube, KubeError
from scheduler.cache.store import Stores, Watched

log = logging.getLogger("volcano_py.shards")


def node_shards_watched() -> Watched:
    """The NodeShard kind for the cache's watches: optional (a cluster without the CRD, or a ClusterRole without
    the rights, has no shard: the scheduler says so once and keeps to an empty one in hard mode)."""
    return Watched("NodeShard", NODE_SHARDS_PATH, optional=True)


class ShardCoordinator:
    def __init__(self, kube: Kube, watched: Watched, lock: threading.Lock, mode: str, name: str,
                 may_write: Callable[[], bool] = lambda: True) -> None:
        self.kube = kube
        self.may_write = may_write  # the leader-election guard: a standby writes no status
        self.watched = watched
        self.lock = lock
        self.mode = mode
        self.name = name
        self.ledger = ShardLedger(name)
        self._read: dict[str, tuple[str, NodeShardInfo | ShardUnreadable]] = {}  # name -> (resourceVersion, read)
        self._said: set[str] = set()
        self.writes = 0  # status writes accepted (tests, logs)
        self.current = ShardView(mode, name, frozenset())
        # Before a session uses nodes another shard has just let go of, their pods are made current (`_checked`):
        # `freshen(names)` (cache/freshen.py `freshener`) and the pod watch's resourceVersion; None: not checked
        self.freshen: Callable[[Sequence[str]], bool] | None = None
        self.pods_version: Callable[[], str | None] | None = None
        self._last: frozenset[str] | None = None  # the nodes the last step gave (None: none since the start or a take)
        self._held_by_others: set[str] = set()  # every node seen in another shard's nodesInUse since the start
        self._listed: set[str] = set()  # gained nodes whose pods were listed, for the next session
        self.wake: Callable[[], None] | None = None  # starts the next session (the runner's nudge)

    def restart(self) -> None:
        """A shard taken (again) by `--active-shards`: its handoff starts from what its NodeShard says (the nodes
        its stored `nodesInUse` holds are used as the cache has their pods, which one list of every pod has just
        made current: cache/freshen.py `freshen_pods`)."""
        self.ledger = ShardLedger(self.name)
        self._last = None

    def view(self) -> dict[str, NodeShardInfo]:
        """Every readable NodeShard as the watch has it now, each read once per resourceVersion."""
        with self.lock:
            objects = list(self.watched.objects.values())
        shards: dict[str, NodeShardInfo] = {}
        seen: set[str] = set()
        for obj in objects:
            meta = obj.get("metadata") if isinstance(obj, dict) else None
            meta = meta if isinstance(meta, dict) else {}
            key = str(meta.get("name") or "")
            version = str(meta.get("resourceVersion") or "")
            seen.add(key)
            cached = self._read.get(key)
            if cached is None or cached[0] != version or not version:
                cached = (version, parse_node_shard(obj))
                self._read[key] = cached
                if isinstance(cached[1], ShardUnreadable):
                    self._say(f"bad:{key}:{version}", cached[1].describe())
            if isinstance(cached[1], NodeShardInfo):
                shards[cached[1].name] = cached[1]
        for gone in set(self._read) - seen:
            del self._read[gone]
        return shards

    def between_sessions(self) -> ShardView:
        """Publish this shard's status if it changed; the nodes the next session may use. Never raises: on a bug
        the next session keeps the last one's nodes (said once), which the stored nodesInUse still holds, as
        nothing after an accepted write can raise."""
        try:
            return self._between_sessions()
        except Exception:
            log.debug("the NodeShard step's traceback", exc_info=True)
            self._say("bug", f"NodeShard {self.name}: the step between sessions failed; the next session keeps the "
                      f"last one's {len(self.current.nodes)} nodes")
            return self.current

    def release(self, keep: Collection[str]) -> None:
        """The apply's binds are sent: let go of the nodes leaving this shard that none of its writes names (`keep`),
        not after they return (`ShardLedger.release`). Never raises: on a fault they leave at the next step."""
        try:
            if self.ledger.release(self.view(), self._write, keep):
                log.debug("NodeShard %s: nodes leaving with no write in flight let go as the binds were sent",
                          self.name)
        except Exception:
            log.debug("the NodeShard early release's traceback", exc_info=True)
            self._say("bug:release", f"NodeShard {self.name}: letting go of the leaving nodes during an apply "
                      "failed; they leave after it")

    def _between_sessions(self) -> ShardView:
        view = self.view()
        own = view.get(self.name)
        stored = own.in_use if own is not None else frozenset()  # this shard's nodes before this step
        nodes = self.ledger.step(view, self._write)
        self._said.discard("bug")
        if nodes is None and not self.watched.synced.is_set():
            nodes = frozenset()  # the NodeShards are not listed yet (the first cycle on a partial view): no shard
        elif nodes is None:
            # Volcano: "Sharding is enabled but no shard is defined for this scheduler!" (its set stays empty)
            self._say("missing", f"sharding is {self.mode} but there is no NodeShard {self.name}: no node is in "
                      "this scheduler's shard until one is written")
            nodes = frozenset()
        else:
            self._said.discard("missing")
        nodes = self._checked(nodes, view, stored)
        if nodes != self.current.nodes:
            log.info("NodeShard %s: %d nodes in this scheduler's shard (%s mode)", self.name, len(nodes), self.mode)
        self.current = ShardView(self.mode, self.name, nodes)
        return self.current

    def _checked(self, nodes: frozenset[str], view: Mapping[str, NodeShardInfo],
                 stored: frozenset[str]) -> frozenset[str]:
        """`nodes` less those gained whose pods the session's copy may not have. Stricter than Volcano, which uses
        a node as soon as the other shard's status lets it go: the pod watch is a stream of its own and may not yet
        have delivered the last binds the other scheduler made on that node (its lag is seconds on a busy apiserver,
        the NodeShard watch's none), whose room would then look free. So a node gained that another shard was seen
        holding (in any view since the start) is used in a session whose copy of the pods was read past every other
        NodeShard's resourceVersion (`pods_version`: the status that let the node go is older); else its pods are
        listed (`freshen`) into the stores, and the node is used from the next session on, whose copy has them
        (`wake` starts it). At the start or a take, the nodes this shard's stored `nodesInUse` already held
        (`stored`) count as known: no other scheduler binds on them. Not covered: a node another shard let go of
        before this process first saw it held (a restart, a NodeShard made meanwhile), used as Volcano uses it."""
        held = self._held_by_others
        for name, shard in view.items():
            if name != self.name and not shard.in_use <= held:
                held |= shard.in_use
        last = stored if self._last is None else self._last
        self._listed &= nodes  # (one that left again is listed again if it comes back)
        new = (nodes - last) & held if self.freshen is not None else frozenset()
        ready = new & self._listed  # listed at an earlier step: in the stores before this session's copy
        self._listed -= ready
        new -= ready
        if new and not self._watch_past(view):
            assert self.freshen is not None
            if self.freshen(sorted(new)):  # (a fault in it leaves `_last` as it was: checked again next step)
                self._listed |= new
                if self.wake is not None:  # the next session, whose copy has them, at once (a list that failed
                    self.wake()  # is tried again a period later: no cycle after cycle while it is refused)
            nodes = nodes - new
        self._last = nodes
        return nodes

    def _watch_past(self, view: Mapping[str, NodeShardInfo]) -> bool:
        latest = max((revision(s.resource_version) for name, s in view.items() if name != self.name), default=0)
        seen = revision(str(self.pods_version() or "")) if self.pods_version is not None else 0
        return 0 < latest <= seen

    def _write(self, shard: NodeShardInfo, status: dict[str, list[str]]) -> str | None:
        """PUT the status subresource with the shard's resourceVersion; the new resourceVersion, or None when
        refused (a conflict: the view is behind, the next step looks again)."""
        with self.lock:
            stored = self.watched.objects.get(shard.name)
        if stored is None or not self.may_write():
            return None
        meta = dict(stored.get("metadata") or {})
        meta["resourceVersion"] = shard.resource_version
        old = stored.get("status") if isinstance(stored.get("status"), dict) else {}
        body = {"apiVersion": "shard.volcano.sh/v1alpha1", "kind": "NodeShard", "metadata": meta,
                "spec": stored.get("spec"), "status": {**(old or {}), **status}}
        try:
            answer = self.kube.request("PUT", f"{NODE_SHARDS_PATH}/{quote(shard.name)}/status", body=body)
        except KubeError as exc:
            if exc.status != 409:
                self._say(f"write:{exc.status}", f"NodeShard {shard.name}: cannot write its status: {exc}")
            return None
        except TRANSPORT_ERRORS as exc:
            self._say("write:io", f"NodeShard {shard.name}: cannot write its status: {exc}")
            return None
        self.writes += 1
        self._said = {s for s in self._said if not s.startswith("write:")}
        log.info("NodeShard %s: status nodesInUse %d, nodesToAdd %d, nodesToRemove %d", shard.name,
                 len(status["nodesInUse"]), len(status["nodesToAdd"]), len(status["nodesToRemove"]))
        answered = answer.get("metadata") if isinstance(answer, dict) else None
        version = answered.get("resourceVersion") if isinstance(answered, dict) else None
        return str(version) if version else None

    def _say(self, mark: str, message: str) -> None:
        """One log line per distinct problem, not one per cycle."""
        if mark not in self._said:
            self._said.add(mark)
            log.warning("%s", message)


class ShardWake:
    """The NodeShard watch's hook (`Watched.on_event`): starts the next session now (`wake`, the runner's nudge)
    when a NodeShard event concerns this scheduler's shards, so a handoff does not wait for the schedule period.
    Volcano writes a shard's status as soon as a NodeShard changes when no session runs, and at the session's end
    when one does (pkg/scheduler/cache/shard_coordinator.go `RefreshNodeShards`, `tryUpdateNodeShardStatus`, called
    from event_handlers.go on each NodeShard add and update); here the session started now writes it at its
    start (`between_sessions`, before its snapshot), and one running writes it after its apply, as before.

    Which events: one of our shards' `spec` changed (nodes desired added or taken away), or another shard's
    `nodesInUse` let go of a node one of our shards desires (it may now be taken), or our own status came back
    from a release during an apply (`ShardLedger.release`) with nodes still leaving (they go at the next step,
    which the view must show that write to take). Our other status writes coming back, other shards' writes
    that free nothing of ours and anything unreadable wake nothing. `names`: our shards'
    NodeShard names now (one with `--scheduler-sharding-name`, the held ones with `--active-shards`)."""

    def __init__(self, names: Callable[[], Collection[str]], wake: Callable[[], None]) -> None:
        self.names, self.wake = names, wake
        self._spec: dict[str, object] = {}  # every shard's spec as last seen
        self._in_use: dict[str, frozenset[str]] = {}  # every shard's nodesInUse as last seen
        self.wakes = 0  # (tests, logs)

    def on_event(self, kind: str, obj: Mapping[str, Any]) -> None:
        meta = obj.get("metadata") if isinstance(obj, Mapping) else None
        name = meta.get("name") if isinstance(meta, Mapping) else None
        if not isinstance(name, str):
            return
        if kind == "DELETED":
            self._spec.pop(name, None)
            self._in_use.pop(name, None)
            return
        ours = self.names()
        status = obj.get("status")
        listed = status.get("nodesInUse") if isinstance(status, Mapping) else None
        in_use = frozenset(n for n in listed if isinstance(n, str)) if isinstance(listed, list) else frozenset()
        before, self._in_use[name] = self._in_use.get(name), in_use
        spec = obj.get("spec")
        spec_before, self._spec[name] = self._spec.get(name), spec  # every shard's: ours may change (a take)
        if name in ours:
            if spec != spec_before or (before is not None and before - in_use and _leaving(spec, in_use)):
                self._wake()  # (or our release during an apply came back, `ShardLedger.release`: the rest leaves now)
            return
        if before is None or not before - in_use:
            return
        freed = before - in_use
        for own in ours:
            spec = self._spec.get(own)
            desired = spec.get("nodesDesired") if isinstance(spec, Mapping) else None
            if isinstance(desired, list) and any(type(n) is str and n in freed for n in desired):
                self._wake()
                return

    def _wake(self) -> None:
        self.wakes += 1
        self.wake()


def _leaving(spec: object, in_use: frozenset[str]) -> bool:
    """Whether `in_use` holds a node the spec no longer desires."""
    desired = spec.get("nodesDesired") if isinstance(spec, Mapping) else None
    return bool(in_use.difference(n for n in desired if isinstance(n, str)) if isinstance(desired, list) else in_use)


def coordinator_for(kube: Kube, stores: Stores, mode: str, name: str,
                    may_write: Callable[[], bool]) -> ShardCoordinator:
    """Add the NodeShard watch to the cache's stores and make the coordinator (soft or hard mode only)."""
    watched = stores.node_shards = node_shards_watched()
    return ShardCoordinator(kube, watched, stores.lock, mode, name, may_write)


def put_nodes_desired(kube: Kube, shard: Mapping[str, Any], desired: Sequence[str]) -> object | None:
    """Write a NodeShard's `spec.nodesDesired` (a PUT at the resourceVersion it was read with, as Volcano's sharding
    controller updates it): the object written, or None when it changed or went meanwhile (409, 404) and the
    caller looks again."""
    body = {**shard, "spec": {**(shard.get("spec") or {}), "nodesDesired": list(desired)}}
    name = str((shard.get("metadata") or {}).get("name"))
    try:
        return kube.request("PUT", f"{NODE_SHARDS_PATH}/{quote(name)}", body=body)
    except KubeError as exc:
        if exc.status not in (404, 409):
            raise
        return None
