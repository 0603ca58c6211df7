"""Layer `cache`: with `--active-shards N`, which other schedulers' pods a replica keeps (`PodScope`).

A replica's sessions place pods only on the nodes of the shards it holds (cache/active.py `restrict`), so another
scheduler's pod bound to any other node is never read by a session of it: most pods of a large cluster are such
pods (at 8 replicas, seven in eight), and keeping them all (~1.9 KB each, stored, parsed and in the snapshot's
records) is what made a replica's memory the cluster's. The scope is the nodes every held shard's NodeShard desires
or uses; another scheduler's pod bound outside it is not kept (its event is read as far as its node, and a copy
the store held is dropped as if the pod were deleted). Our own pods, every replica's, are always kept: gangs,
routes and the queues' totals read them. Pending pods are always kept.

The rule that makes it safe: a node that joins the scope is `unlisted` (its other schedulers' pods may have been
dropped) until a list taken after it joined has put them in (cache/freshen.py, node by node, or every pod at once
when there are many or a shard was just taken); from joining on, the watch keeps its pods. An unlisted node is in
no session's nodes to place on (`ActiveShards.restrict`), so no session counts its room free with a pod missing.

One active replica (no `--active-shards`) keeps every pod, as before: `Stores.pod_scope` is None.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Protocol

from scheduler.api.objects import MutableObj
from scheduler.api.shard import NodeShardInfo, ShardView

log = logging.getLogger("volcano_py.active")


class Shard(Protocol):
    """What `held_nodes` reads of a held shard's coordinator (cache/shards.py `ShardCoordinator`)."""

    name: str
    current: ShardView

    def view(self) -> Mapping[str, NodeShardInfo]: ...


class PodScope:
    def __init__(self, scheduler_names: Iterable[str],
                 drop: Callable[[PodScope, frozenset[str]], object] | None = None) -> None:
        self.names = frozenset(scheduler_names)
        self.drop = drop  # drops the pods no longer kept on nodes that left (cache/freshen.py `drop_pods`)
        # Swapped whole, read on the watch threads without the lock: the nodes whose pods are kept, and those of
        # them whose pods are not known to be all in the stores yet
        self.nodes: frozenset[str] = frozenset()
        self.unlisted: frozenset[str] = frozenset()
        self.dropped = 0  # pods not kept or dropped (logs, tests)

    def keeps(self, obj: MutableObj) -> bool:
        """Whether the stores keep the pod: ours, pending, bound in the scope, or not readable as a pod at all (kept:
        the parser says why it cannot be read)."""
        spec = obj.get("spec") if type(obj) is dict else None
        if type(spec) is not dict:
            return True
        node = spec.get("nodeName")
        if not node or type(node) is not str or node in self.nodes:
            return True
        name = spec.get("schedulerName", "default-scheduler")
        return type(name) is str and name in self.names

    def step(self, nodes: frozenset[str], list_pods: Callable[[Sequence[str]], bool] | None,
             listed_all: bool = False) -> None:
        """From the loop, before a snapshot: the scope becomes `nodes` (those that joined are unlisted), then the
        unlisted ones are listed (`list_pods`: cache/freshen.py `freshener`); those whose list failed stay unlisted
        and are tried again at the next step. `listed_all`: every pod was just listed after the scope was last set
        (a shard taken: cache/freshen.py `freshen_pods`), which lists the nodes unlisted then."""
        if listed_all:
            self.unlisted = frozenset()
        joined = nodes - self.nodes
        if joined or nodes != self.nodes:
            log.info("active shards: other schedulers' pods kept on %d nodes (%d joined, %d left)", len(nodes),
                     len(joined), len(self.nodes - nodes))
        # The scope first, the list after: from now on the watch keeps their pods, and the list shows the rest
        left, self.nodes = self.nodes - nodes, nodes
        self.unlisted = (self.unlisted & nodes) | joined
        if left and self.drop is not None:  # their pods' memory now, not at their next event
            self.drop(self, left)
        if self.unlisted and list_pods is not None:
            pending = sorted(self.unlisted)
            if list_pods(pending):
                self.unlisted = self.unlisted - frozenset(pending)


def held_nodes(coordinators: Iterable[Shard]) -> frozenset[str]:
    """The nodes each shard's NodeShard desires or uses (as the NodeShard watch has them now), and those its last
    step gave."""
    nodes: set[str] = set()
    for coordinator in coordinators:
        shard = coordinator.view().get(coordinator.name)
        nodes.update(coordinator.current.nodes, *((shard.desired, shard.in_use) if shard is not None else ()))
    return frozenset(nodes)
