"""The chaos bench's invariants, checked inside the simulated apiserver at every write (a `Store` observer), not
only at the end of a run (bench/shards_chaos.py, docs/scale-out.md "Chaos runs"):

- **no node in two shards' `nodesInUse`**: at every NodeShard write, the written shard's nodes in use against every
  other shard's as stored at that moment;
- **no over-committed node**: at every bind, the requests of the pods bound to the node (cpu, memory, GPUs, the pod
  count) against its allocatable; a pod deleted gives its room back, so an over-commit hidden later by a deletion
  is still seen;

and what happened, with the server's monotonic time of each (the driver's clock too: one machine): every accepted
bind and who sent it, each node moved between shards' `nodesDesired` (a shard move) and between shards'
`nodesInUse` (a handoff done), each change of a Lease's holder. Binds to a node that no longer exists (a node
deleted while binds were in flight) are kept apart: Kubernetes accepts them, and they take nobody's room.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import orjson

from shardsim.cluster import quantity
from shardsim.store import Entry, Kind, Store

EXAMPLES = 20  # violations kept in full (all are counted)


def requests_of(doc: dict[str, Any]) -> dict[str, float]:
    """A pod's requests summed over its containers, and one `pods`."""
    out: dict[str, float] = {"pods": 1.0}
    for c in (doc.get("spec") or {}).get("containers") or ():
        for r, v in ((c.get("resources") or {}).get("requests") or {}).items():
            out[r] = out.get(r, 0.0) + quantity(v)
    return out


class Monitor:
    def __init__(self, store: Store, clock: Callable[[], float] = time.monotonic) -> None:
        self.store, self.clock = store, clock
        self.in_use: dict[str, frozenset[str]] = {}  # NodeShard -> its status.nodesInUse as stored
        self.desired_owner: dict[str, str] = {}  # node -> the NodeShard whose nodesDesired last named it
        self.use_owner: dict[str, str] = {}  # node -> the NodeShard whose nodesInUse last named it
        self.alloc: dict[str, dict[str, float]] = {}
        self.used: dict[str, dict[str, float]] = {}
        self.placed: dict[str, tuple[str, dict[str, float]]] = {}  # pod key -> (node, requests)
        self.holders: dict[str, str] = {}  # Lease key -> holderIdentity
        self.overlaps = 0
        self.overlap_examples: list[dict[str, Any]] = []
        self.over_commits = 0  # binds that left their node over-committed
        self.over_nodes: set[str] = set()  # the nodes ever over-committed
        self.over_commit_examples: list[dict[str, Any]] = []
        self.binds: list[tuple[float, str]] = []  # (when, who) of every accepted bind
        self.binds_to_gone_nodes = 0
        self.moves: list[dict[str, Any]] = []  # nodesDesired: a node from one shard to another
        self.handoffs: list[dict[str, Any]] = []  # nodesInUse: a node from one shard to another
        self.releases: list[dict[str, Any]] = []  # nodesInUse: a node a shard stopped using
        self.lease_changes: list[dict[str, Any]] = []
        self.shard_writes = 0
        for kind in (store.kind("v1", "nodes"), store.kind("shard.volcano.sh/v1alpha1", "nodeshards"),
                     store.kind("v1", "pods"), store.kind("coordination.k8s.io/v1", "leases")):
            for entry in list(kind.objects.values()):
                self.observe(kind, "ADDED", entry, None, initial=True)
        store.observers.append(self.observe)

    def observe(self, kind: Kind, type_: str, entry: Entry, old: Entry | None, *, initial: bool = False) -> None:
        resource = kind.resource
        if resource == "pods":
            self._pod(type_, entry, old, initial)
        elif resource == "nodeshards":
            self._shard(type_, entry, initial)
        elif resource == "nodes":
            doc = orjson.loads(entry.data)
            name = doc["metadata"]["name"]
            if type_ == "DELETED":
                self.alloc.pop(name, None)
            else:
                self.alloc[name] = {r: quantity(v) for r, v in
                                    ((doc.get("status") or {}).get("allocatable") or {}).items()}
        elif resource == "leases":
            doc = orjson.loads(entry.data)
            meta = doc["metadata"]
            key = f"{meta.get('namespace')}/{meta['name']}"
            holder = "" if type_ == "DELETED" else str((doc.get("spec") or {}).get("holderIdentity") or "")
            before = self.holders.get(key, "")
            self.holders[key] = holder
            if holder != before and not initial:
                self.lease_changes.append({"t": self.clock(), "lease": key, "from": before, "to": holder})

    def _pod(self, type_: str, entry: Entry, old: Entry | None, initial: bool) -> None:
        doc = orjson.loads(entry.data)
        meta = doc["metadata"]
        key = f"{meta.get('namespace')}/{meta['name']}"
        if type_ == "DELETED":
            placed = self.placed.pop(key, None)
            if placed is not None:
                used = self.used.get(placed[0], {})
                for r, v in placed[1].items():
                    used[r] = used.get(r, 0.0) - v
            return
        node = entry.fields.get("spec.nodeName") or ""
        if not node or key in self.placed:
            return
        if not initial and not (old is not None and old.fields.get("spec.nodeName")):
            self.binds.append((self.clock(), self.store.writer))
        req = requests_of(doc)
        self.placed[key] = (node, req)
        alloc = self.alloc.get(node)
        if alloc is None:
            self.binds_to_gone_nodes += 1
            return
        used = self.used.setdefault(node, {})
        for r, v in req.items():
            used[r] = used.get(r, 0.0) + v
        over = {r: (round(v, 3), alloc.get(r, 0.0)) for r, v in used.items() if v > alloc.get(r, 0.0) + 1e-9}
        if over:
            self.over_commits += 1
            self.over_nodes.add(node)
            if len(self.over_commit_examples) < EXAMPLES:
                self.over_commit_examples.append({"t": self.clock(), "node": node, "pod": key,
                                                  "by": self.store.writer, "over": over,
                                                  "on_node": sorted(k for k, p in self.placed.items()
                                                                    if p[0] == node)})

    def _shard(self, type_: str, entry: Entry, initial: bool) -> None:
        doc = orjson.loads(entry.data)
        name = doc["metadata"]["name"]
        now = self.clock()
        if type_ == "DELETED":
            self.in_use.pop(name, None)
            return
        self.shard_writes += 0 if initial else 1
        for node in (doc.get("spec") or {}).get("nodesDesired") or ():
            before = self.desired_owner.get(node)
            if before is not None and before != name and not initial:
                self.moves.append({"t": now, "node": node, "from": before, "to": name, "by": self.store.writer})
            self.desired_owner[node] = name
        nodes = frozenset((doc.get("status") or {}).get("nodesInUse") or ())
        if not initial:
            self.releases.extend({"t": now, "node": node, "from": name}
                                 for node in sorted(self.in_use.get(name, frozenset()) - nodes))
        self.in_use[name] = nodes
        both = {node: sorted(other for other, theirs in self.in_use.items() if other != name and node in theirs)
                for node in nodes}
        both = {node: others for node, others in both.items() if others}
        if both:
            self.overlaps += 1
            if len(self.overlap_examples) < EXAMPLES:
                self.overlap_examples.append({"t": now, "rv": entry.rv, "shard": name, "by": self.store.writer,
                                              "nodes": {n: [name, *o] for n, o in sorted(both.items())}})
        for node in nodes:
            before = self.use_owner.get(node)
            if before is not None and before != name and not initial:
                self.handoffs.append({"t": now, "node": node, "from": before, "to": name, "by": self.store.writer})
            self.use_owner[node] = name

    def over_committed_now(self) -> list[str]:
        """Existing nodes whose bound pods' requests exceed their allocatable now."""
        return sorted(n for n, used in self.used.items() if n in self.alloc and any(
            v > self.alloc[n].get(r, 0.0) + 1e-9 for r, v in used.items()))

    def report(self) -> dict[str, Any]:
        return {"overlaps": self.overlaps, "overlap_examples": self.overlap_examples,
                "over_commits": self.over_commits, "over_commit_examples": self.over_commit_examples,
                "over_committed_now": self.over_committed_now(),
                "over_committed_ever": sorted(self.over_nodes), "binds": [[round(t, 4), w] for t, w in self.binds],
                "binds_to_gone_nodes": self.binds_to_gone_nodes, "moves": self.moves, "handoffs": self.handoffs,
                "lease_changes": self.lease_changes, "shard_writes": self.shard_writes,
                "fence_refused": list(self.store.fence_refused)}
