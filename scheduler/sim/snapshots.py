"""Layer `sim`: the in-memory cluster's snapshot, built afresh each cycle or, once `SimChanges.start` is called,
from the last one and what changed (`adapter/incremental.py`).

The cluster changes its objects in place, so it says what it changed: each of its methods that changes a pod, a
PodGroup or a node names it here. Code that changes an object of the cluster directly (not through its methods)
calls `changed_pod`, `changed_podgroup` or `changed_node` after; until `start`, nothing is recorded and every
snapshot is built afresh.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from scheduler.adapter.incremental import Delta, IncrementalSnapshot
from scheduler.adapter.snapshot import AdapterRules, SnapshotInputs, build_snapshot
from scheduler.api.convert import job_from_podgroup
from scheduler.api.snapshot import ClusterSnapshot


@dataclass(slots=True)
class SimChanges:
    builder: IncrementalSnapshot | None = None  # None: snapshots are built afresh
    # In the order they were first changed, except that a pod or PodGroup added goes last, as in the cluster's
    # own order: a new one takes its place in the snapshot in that order.
    pods: dict[str, None] = field(default_factory=dict)
    podgroups: dict[str, None] = field(default_factory=dict)
    nodes: dict[str, None] = field(default_factory=dict)
    renewed: set[str] = field(default_factory=set)
    renewed_nodes: set[str] = field(default_factory=set)  # nodes and PodGroups new to the cluster's dict: last
    renewed_podgroups: set[str] = field(default_factory=set)  # there, even if one of that name was there before
    first: bool = True  # the next build is a full one

    def start(self, rules: AdapterRules) -> None:
        self.builder, self.first = IncrementalSnapshot(rules), True

    def changed_pod(self, key: str) -> None:
        if self.builder is not None:
            self.pods.setdefault(key)

    def added_pod(self, key: str) -> None:
        if self.builder is not None:
            self.pods.pop(key, None)
            self.pods[key] = None

    def gone_pod(self, key: str) -> None:
        """The pod was deleted: if its key comes back, it is a new pod (last in the pods' order)."""
        if self.builder is not None:
            self.pods.setdefault(key)
            self.renewed.add(key)

    def changed_podgroup(self, key: str, *, added: bool = False) -> None:
        """`added`: new to the cluster's PodGroups (it goes last in their order, even if deleted just before)."""
        if self.builder is not None:
            if added:
                self.podgroups.pop(key, None)
                self.renewed_podgroups.add(key)
            self.podgroups.setdefault(key)

    def changed_node(self, name: str, *, added: bool = False) -> None:
        """`added`: new to the cluster's nodes (it goes last in their order, even if deleted just before)."""
        if self.builder is not None:
            if added:
                self.nodes.pop(name, None)
                self.renewed_nodes.add(name)
            self.nodes.setdefault(name)


def sim_snapshot(sim: Any) -> ClusterSnapshot:
    """The snapshot of `sim`, an `InMemoryCluster` (which imports this module)."""
    changes = sim.changes
    builder = changes.builder
    full = builder is None or changes.first

    def template(manifest: Any, created: float) -> Any:
        return job_from_podgroup(manifest, priority_classes=sim.priority_classes, default_queue=sim.default_queue,
                                 creation=created)

    inputs = SnapshotInputs(
        nodes=[node.clone_empty() for node in sim.nodes.values()] if full else (),
        podgroups=[template(pg.manifest, pg.created) for pg in sim.podgroups.values()] if full else (),
        queues=[q.clone() for q in sim.queues.values()],
        pods=[(pod.manifest, pod.task) for pod in sim.pods.values()] if full else (),
        now=sim.now,
        hypernodes=tuple(sim.hypernodes.values()),
        storage=sim.storage.storage() if sim.storage is not None else None,
        disruption_budgets=sim.disruption_budgets() if sim.pdbs else (),
        resource_quotas=sim.quotas.infos(p.manifest for p in sim.pods.values()) if sim.quotas.manifests else (),
        dra=sim._dra if sim.devices is not None else None,
    )
    if builder is None:
        snapshot = build_snapshot(inputs, AdapterRules(sim.scheduler_names, sim.default_queue))
    else:
        delta = None
        if not full:
            pods, groups, nodes = sim.pods, sim.podgroups, sim.nodes
            delta = Delta(
                {k: (p.manifest, p.task) if (p := pods.get(k)) is not None else None for k in changes.pods},
                {n: node if (node := nodes.get(n)) is not None else None for n in changes.nodes},
                {k: template(g.manifest, g.created) if (g := groups.get(k)) is not None else None
                 for k in changes.podgroups},
                changes.renewed, changes.renewed_nodes, changes.renewed_podgroups,
            )
        changes.pods, changes.podgroups, changes.nodes = {}, {}, {}
        changes.renewed, changes.renewed_nodes, changes.renewed_podgroups = set(), set(), set()
        changes.first = False
        try:
            snapshot = builder.build(inputs, delta)
        except BaseException:
            changes.first = True  # the builder may have applied part of the changes: the next build is a full one
            raise
    snapshot.queue_allocation_gate = sim.queue_allocation_gate
    return snapshot
