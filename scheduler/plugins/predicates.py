"""Layer `plugins`: `predicates` filters nodes a task may not use, whatever their free resources.

Node readiness and cordoning, nodeSelector, required node affinity, NoSchedule/NoExecute taints, and what the
pod's bound PersistentVolumeClaims require (their volumes' node affinity, zone and region: kube-scheduler's
VolumeBinding and VolumeZone, resolved into `Constraints.volumes` when the snapshot is built, `api/volumes.py`).
These depend only on the task's `Constraints` and the node, so the session evaluates them once per
constraint set per cycle (identical pods of a gang share the answer). Resource fit, including the
`pods` count, is checked by the actions against each node's idle resources (`resource_misfit`).

Inter-pod affinity and anti-affinity (required: filter; preferred: score) and topologySpreadConstraints
(DoNotSchedule: filter; ScheduleAnyway: score) depend on where other pods are, including the tasks placed
earlier in this cycle (a gang's own pods), so they are registered at the dynamic points, which the session
evaluates per placement and only for tasks that carry such terms. Pods counted are those placed or bound and not
terminating. As in Kubernetes: required anti-affinity is symmetric (an existing pod's anti-affinity term that
selects the new pod keeps it out of that pod's domain), but only for a new pod that has terms of its own, since
only those are evaluated dynamically (a known gap: a plain pod may join a node whose pod repels it); a required
affinity term no existing pod matches is satisfied when the pod matches it itself (the first pod of a group);
a spread constraint counts matching pods of the pod's namespace per domain over the nodes its node affinity
allows, and a node without the topology label fails a DoNotSchedule constraint.

Claims still to bind (unbound, `WaitForFirstConsumer`) are matched to volumes or provisioning as pods are placed
(`volume_binding.ClaimBinding`, served only when the snapshot has such claims); a committed gang's claims are
handed to the adapter, which binds them before the gang's pods.

A topologyKey's domains are the session's label domains (`api.topology`, the model the solver's tiers are built
from too); the matching pods per domain are counted once and kept current through the session's event handler
(`pod_counts.PlacedPods`), so a question costs a look-up per node, not a walk over every node's pods.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from scheduler.api import reasons as R
from scheduler.api.decision import SUCCESS, Status, unresolvable, unschedulable
from scheduler.api.job import JobInfo, TaskInfo
from scheduler.api.node import NodeInfo
from scheduler.api.pod import SpreadConstraint, Taint, host_ports_conflict
from scheduler.api.topology import NO_DOMAIN, LabelDomains
from scheduler.framework import combine as C, points as P
from scheduler.framework.arrays import IntArray
from scheduler.framework.conf_args import ArgReader
from scheduler.framework.plugin import Plugin, SessionAPI
from scheduler.plugins.dra_claims import DeviceClaims
from scheduler.plugins.pod_counts import COUNTED, BoolArray, PlacedPods, SpreadSelection, TermSelection
from scheduler.plugins.volume_binding import ClaimBinding

# Static filters answer UnschedulableAndUnresolvable: no eviction on the node changes them (kube-scheduler's
# node affinity, taint and node-unschedulable filters say the same, pkg/scheduler/framework/plugins/).
NOT_READY = unresolvable(R.NodeFilter(R.NODE_NOT_READY))
UNSCHEDULABLE = unresolvable(R.NodeFilter(R.NODE_UNSCHEDULABLE))
AFFINITY = unresolvable(R.NodeFilter(R.NODE_AFFINITY))
STATIC_ANSWERS = (SUCCESS, NOT_READY, UNSCHEDULABLE, AFFINITY)
_NOT_READY, _UNSCHEDULABLE, _AFFINITY_REJECTED = range(1, len(STATIC_ANSWERS))
POD_AFFINITY = unschedulable(R.NodeFilter(R.POD_AFFINITY))
POD_ANTI_AFFINITY = unschedulable(R.NodeFilter(R.POD_ANTI_AFFINITY))
EXISTING_ANTI_AFFINITY = unschedulable(R.NodeFilter(R.EXISTING_ANTI_AFFINITY))
SPREAD = unschedulable(R.NodeFilter(R.TOPOLOGY_SPREAD))
SPREAD_LABEL = unresolvable(R.NodeFilter(R.TOPOLOGY_SPREAD_LABEL))
# Where `PodTopology.filter` rejects a node, the first reason (0: none).
REJECTIONS = (SUCCESS, POD_ANTI_AFFINITY, EXISTING_ANTI_AFFINITY, POD_AFFINITY, SPREAD_LABEL, SPREAD)
_ANTI, _EXISTING, _AFFINITY, _SPREAD_LABEL, _SPREAD = range(1, len(REJECTIONS))


class StaticFilter:
    """Readiness, cordon, nodeSelector, required node affinity, taints and the pod's bound volumes, for all nodes
    at once.

    The session asks once per constraint set with the same node list, so what is the same for every question is
    computed on the first one: readiness and cordon per node, the nodes grouped by their taints (a cluster has
    a handful of taint sets), and each label key's values as a column that a nodeSelector compares in one numpy
    expression. Required node affinity terms (which may name the node) and what the pod's claims require
    (`Constraints.volumes`, kube-scheduler's VolumeBinding and VolumeZone, which answer UnschedulableAndUnresolvable:
    no eviction frees a volume) are matched per node that is still in.
    A node's first failing check is its answer, in the order above (tests/plugins/test_static_filter.py holds
    this against the per-node rule)."""

    def __init__(self) -> None:
        self._nodes: Sequence[NodeInfo] | None = None
        self._base: IntArray = np.zeros(0, dtype=np.int64)
        self._taints: list[tuple[tuple[Taint, ...], IntArray]] = []
        self._columns: dict[str, np.ndarray] = {}

    def _prepare(self, nodes: Sequence[NodeInfo]) -> None:
        self._nodes, self._columns = nodes, {}
        base = np.zeros(len(nodes), dtype=np.int64)
        groups: dict[tuple[Taint, ...], list[int]] = {}
        for i, node in enumerate(nodes):
            if not node.ready:
                base[i] = _NOT_READY
            elif node.unschedulable:
                base[i] = _UNSCHEDULABLE
            if node.taints:
                groups.setdefault(node.taints, []).append(i)
        self._base = base
        self._taints = [(taints, np.array(where, dtype=np.int64)) for taints, where in groups.items()]

    def _column(self, key: str) -> np.ndarray:
        column = self._columns.get(key)
        if column is None:
            assert self._nodes is not None
            column = self._columns[key] = np.array([n.labels.get(key) for n in self._nodes], dtype=object)
        return column

    def __call__(self, task: TaskInfo, nodes: Sequence[NodeInfo]) -> list[Status]:
        if nodes is not self._nodes:
            self._prepare(nodes)
        constraints = task.constraints
        rejection = self._base.copy()  # per node, an index into `answers` (0: it passes)
        for key, value in constraints.node_selector:
            rejection[(rejection == 0) & (self._column(key) != value)] = _AFFINITY_REJECTED
        terms = constraints.required_terms
        if terms:
            for i in np.flatnonzero(rejection == 0).tolist():
                node = nodes[i]
                if not any(t.matches(node.labels, node.name) for t in terms):
                    rejection[i] = _AFFINITY_REJECTED
        answers = list(STATIC_ANSWERS)
        for taints, where in self._taints:
            taint = constraints.untolerated(taints)
            if taint is not None:
                shown = f"{taint.key}: {taint.value}" if taint.value else taint.key
                answers.append(unresolvable(R.NodeFilter(R.TAINT_TOLERATION, shown)))
                still_in = where[rejection[where] == 0]
                rejection[still_in] = len(answers) - 1
        volumes = constraints.volumes
        if volumes is not None:  # a pod whose claims constrain nothing has None: no cost
            found: dict[R.NodeFilter, int] = {}
            for i in np.flatnonzero(rejection == 0).tolist():
                conflict = volumes.node_conflict(nodes[i].labels)
                if conflict is not None:
                    if conflict not in found:
                        found[conflict] = len(answers)
                        answers.append(unresolvable(conflict))
                    rejection[i] = found[conflict]
        return [answers[r] for r in rejection.tolist()]


# ---- inter-pod affinity and topology spread ---------------------------------------------------------------


class PodTopology:
    """Inter-pod affinity and topology spread over the session's nodes as they are now: matching pods are
    counted per domain (`pod_counts.PlacedPods`, over the session's `domains`), and a node is judged by its
    domain's count."""

    def __init__(self, ssn: SessionAPI) -> None:
        self.ssn = ssn
        self.placed = PlacedPods(ssn)

    def _positions(self, nodes: Sequence[NodeInfo]) -> IntArray:
        position = self.ssn.arrays.position
        return np.fromiter((position[n.name] for n in nodes), dtype=np.int64, count=len(nodes))

    # -- filters --------------------------------------------------------------------------------------------
    def filter(self, task: TaskInfo, nodes: Sequence[NodeInfo]) -> list[Status]:
        rejection = np.zeros(len(nodes), dtype=np.int64)  # per node, the first reason (index into REJECTIONS)

        def reject(where: BoolArray, reason: int) -> None:
            rejection[where & (rejection == 0)] = reason

        c = task.constraints
        positions = self._positions(nodes)
        for term in c.pod_anti_affinity:
            domains, counts = self.placed.counts(TermSelection(term, task.namespace), task)
            reject(counts[domains.of[positions]] > 0, _ANTI)
        for domains, forbidden in self.placed.repelled(task):
            reject(forbidden[domains.of[positions]], _EXISTING)
        for term in c.pod_affinity:
            domains, counts = self.placed.counts(TermSelection(term, task.namespace), task)
            if not counts.any() and term.selects(task.namespace, task.namespace, task.labels):
                continue  # the first pod of a group that must be together
            reject(counts[domains.of[positions]] == 0, _AFFINITY)
        for spread in c.spread:
            if spread.when_unsatisfiable != "DoNotSchedule":
                continue
            domains, counts, floor = self._spread_counts(task, spread)
            me = 1 if spread.selector.matches(task.labels) else 0
            ids = domains.of[positions]
            labelled = ids != NO_DOMAIN
            reject(~labelled, _SPREAD_LABEL)
            reject(labelled & (counts[ids] + me - floor > spread.max_skew), _SPREAD)
        return [REJECTIONS[r] for r in rejection.tolist()]

    def _spread_counts(self, task: TaskInfo, spread: SpreadConstraint) -> tuple[LabelDomains, IntArray, int]:
        """Matching pods of the task's namespace per domain, and the smallest count over the eligible domains
        (those of the nodes the task's constraint-only predicates allow)."""
        selection = SpreadSelection(spread.selector, task.namespace, spread.topology_key)
        domains, counts = self.placed.counts(selection, task)
        eligible = domains.of[self.ssn.feasible_indices(task)]
        eligible = eligible[eligible != NO_DOMAIN]
        floor = int(counts[eligible].min()) if eligible.size else 0
        return domains, counts, floor

    # -- scores ---------------------------------------------------------------------------------------------
    def score(self, task: TaskInfo, nodes: Sequence[NodeInfo]) -> list[float]:
        c = task.constraints
        positions = self._positions(nodes)
        total = [0.0] * len(nodes)
        preferred = [(w, t) for w, t in c.preferred_pod_affinity] + [(-w, t) for w, t in c.preferred_pod_anti_affinity]
        if preferred:
            raw = np.zeros(len(nodes))
            for weight, term in preferred:
                domains, counts = self.placed.counts(TermSelection(term, task.namespace), task)
                raw[counts[domains.of[positions]] > 0] += weight
            _add_normalised(total, raw.tolist())
        for spread in c.spread:
            if spread.when_unsatisfiable != "ScheduleAnyway":
                continue
            domains, counts, _ = self._spread_counts(task, spread)
            ids = domains.of[positions]
            unlabelled = -float(int(counts.max()) + 1)  # the last slot is 0: the max is 0 when nothing matches
            raw_spread = np.where(ids != NO_DOMAIN, -counts[ids].astype(float), unlabelled)
            _add_normalised(total, raw_spread.tolist())
        return total


def _add_normalised(total: list[float], raw: list[float]) -> None:
    """Add `raw` scaled to 0..100 (as Kubernetes normalises a scoring plugin)."""
    low, high = min(raw), max(raw)
    if high == low:
        return
    for i, value in enumerate(raw):
        total[i] += 100.0 * (value - low) / (high - low)


HOST_PORTS = unschedulable(R.NodeFilter(R.NODE_PORTS))


def host_port_filter(task: TaskInfo, nodes: Sequence[NodeInfo]) -> list[Status]:
    """A node where a placed pod already holds one of the task's host ports (kube-scheduler's NodePorts filter;
    Volcano's predicates run it, `predicate.NodePortsEnable`). Dynamic: tasks placed earlier this cycle count."""
    wanted = task.constraints.host_ports
    if not wanted:
        return [SUCCESS] * len(nodes)
    return [
        HOST_PORTS if any(other.constraints.host_ports and other.status in COUNTED and other.key != task.key
                          and host_ports_conflict(wanted, other.constraints.host_ports)
                          for other in node.tasks.values()) else SUCCESS
        for node in nodes
    ]


DRA_ENABLE = "predicate.DynamicResourceAllocationEnable"  # Volcano's argument name (predicates.go)


@dataclass(frozen=True, slots=True)
class PredicatesArgs:
    dra: bool = False  # DRA_ENABLE: pods' ResourceClaims are allocated as they are placed (`dra_claims.py`)


class PredicatesPlugin(Plugin[PredicatesArgs]):
    name = "predicates"

    @classmethod
    def parse_args(cls, reader: ArgReader) -> PredicatesArgs:
        return PredicatesArgs(dra=reader.boolean(DRA_ENABLE, False))

    def on_session_open(self, ssn: SessionAPI) -> None:
        self._static = StaticFilter()
        self._topology = PodTopology(ssn)
        self.binding: ClaimBinding | None = None
        self.devices: DeviceClaims | None = None
        self._dynamic: list[P.NodesPredicate] = [host_port_filter, self._topology.filter]
        if ssn.storage is not None and ssn.storage.binding:  # some pending pod has a claim to bind
            self.binding = ClaimBinding(ssn, ssn.storage)
            self._dynamic.append(self.binding.filter)
        if self.args.dra and ssn.dra is not None:
            self.devices = DeviceClaims(ssn, ssn.dra)
            self._dynamic.append(self.devices.filter)

    def inactive_points(self) -> frozenset[str]:
        # With claims to bind (volumes or devices), JobReady waits for them, and the binding hears each placement on
        # its own (no run of placements at once: bulk placement stays off that session).
        if self.binding is None and self.devices is None:
            return frozenset({"job_ready"})
        return frozenset({"on_allocate_many"})

    # ---- extension points ------------------------------------------------------------------------------------
    def predicate(self, task: TaskInfo, nodes: Sequence[NodeInfo]) -> list[Status]:
        return self._static(task, nodes)

    def dynamic_predicate(self, task: TaskInfo, nodes: Sequence[NodeInfo]) -> list[Status]:
        """Host ports, inter-pod (anti-)affinity and topology spread, and claims to bind: the first rejection per
        node, in that order."""
        return C.rejections_per_node((self._dynamic,), task, nodes)

    def dynamic_node_order(self, task: TaskInfo, nodes: Sequence[NodeInfo]) -> list[float]:
        return self._topology.score(task, nodes)

    def job_ready(self, job: JobInfo) -> bool:
        return (self.binding is None or self.binding.ready(job)) and (self.devices is None or self.devices.ready(job))

    # ---- hooks: where pods are (inter-pod terms) and which claims they take ----------------------------------
    def on_allocate(self, task: TaskInfo) -> None:
        binding = self.binding
        _all_hear(self._topology.placed.changed, binding.placed_task if binding is not None else None, task)
        if self.devices is not None:
            self.devices.placed_task(task)

    def on_allocate_many(self, tasks: Sequence[TaskInfo]) -> None:
        # Read only for tasks with inter-pod terms, which the bulk placer leaves to the per-task loop: it may hear
        # of a run's tasks once they are all on their node.
        self._topology.placed.changed_many(tasks)

    def on_deallocate(self, task: TaskInfo) -> None:
        binding = self.binding
        _all_hear(self._topology.placed.changed, binding.removed_task if binding is not None else None, task)
        if self.devices is not None:
            self.devices.removed_task(task)

    def on_session_close(self, ssn: SessionAPI) -> None:
        if self.binding is not None:
            self.binding.close(ssn)
        if self.devices is not None:
            self.devices.close(ssn)


def _all_hear(first: Callable[[TaskInfo], None], second: Callable[[TaskInfo], None] | None, task: TaskInfo) -> None:
    """Both hear the placement even when the first raises (then its error is raised after)."""
    try:
        first(task)
    finally:
        if second is not None:
            second(task)
