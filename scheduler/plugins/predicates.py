"""Layer `plugins`: `predicates` filters nodes a task may not use, whatever their free resources.

Node readiness and cordoning, nodeSelector, required node affinity, and NoSchedule/NoExecute taints.
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
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Sequence

from scheduler.api import reasons as R
from scheduler.api.decision import SUCCESS, Status, unresolvable, unschedulable
from scheduler.api.job import TaskInfo
from scheduler.api.node import NodeInfo
from scheduler.api.pod import PodAffinityTerm, SpreadConstraint, host_ports_conflict
from scheduler.api.status import TaskStatus
from scheduler.framework import points as P
from scheduler.framework.conf_args import NoArgs
from scheduler.framework.plugin import Plugin, SessionAPI

# Static filters answer UnschedulableAndUnresolvable: no eviction on the node changes them (kube-scheduler's
# node affinity, taint and node-unschedulable filters say the same, pkg/scheduler/framework/plugins/).
NOT_READY = unresolvable(R.NodeFilter(R.NODE_NOT_READY))
UNSCHEDULABLE = unresolvable(R.NodeFilter(R.NODE_UNSCHEDULABLE))
AFFINITY = unresolvable(R.NodeFilter(R.NODE_AFFINITY))
POD_AFFINITY = unschedulable(R.NodeFilter(R.POD_AFFINITY))
POD_ANTI_AFFINITY = unschedulable(R.NodeFilter(R.POD_ANTI_AFFINITY))
EXISTING_ANTI_AFFINITY = unschedulable(R.NodeFilter(R.EXISTING_ANTI_AFFINITY))
SPREAD = unschedulable(R.NodeFilter(R.TOPOLOGY_SPREAD))
SPREAD_LABEL = unresolvable(R.NodeFilter(R.TOPOLOGY_SPREAD_LABEL))
# Placed or bound and not terminating: what affinity and spread count.
COUNTED = frozenset(
    {TaskStatus.ALLOCATED, TaskStatus.PIPELINED, TaskStatus.BINDING, TaskStatus.BOUND, TaskStatus.RUNNING}
)


def static_predicate(task: TaskInfo, node: NodeInfo) -> Status:
    if not node.ready:
        return NOT_READY
    if node.unschedulable:
        return UNSCHEDULABLE
    constraints = task.constraints
    labels = node.labels
    for key, value in constraints.node_selector:
        if labels.get(key) != value:
            return AFFINITY
    if constraints.required_terms and not any(t.matches(labels, node.name) for t in constraints.required_terms):
        return AFFINITY
    taint = constraints.untolerated(node.taints)
    if taint is not None:
        shown = f"{taint.key}: {taint.value}" if taint.value else taint.key
        return unresolvable(R.NodeFilter(R.TAINT_TOLERATION, shown))
    return SUCCESS


# ---- inter-pod affinity and topology spread ---------------------------------------------------------------


class PodTopology:
    """Counts of matching pods per topology domain, over the session's nodes as they are now."""

    def __init__(self, ssn: SessionAPI) -> None:
        self.ssn = ssn

    def placed(self) -> Iterator[tuple[NodeInfo, TaskInfo]]:
        for node in self.ssn.node_list:
            for other in node.tasks.values():
                if other.status in COUNTED:
                    yield node, other

    def counts(self, key: str, selects: Callable[[TaskInfo], bool], me: TaskInfo) -> Counter[str]:
        out: Counter[str] = Counter()
        for node, other in self.placed():
            value = node.labels.get(key)
            if value is not None and other.uid != me.uid and selects(other):
                out[value] += 1
        return out

    @staticmethod
    def _term_selects(term: PodAffinityTerm, owner: TaskInfo) -> Callable[[TaskInfo], bool]:
        return lambda other: term.selects(owner.namespace, other.namespace, other.labels)

    # -- filters --------------------------------------------------------------------------------------------
    def filter(self, task: TaskInfo, nodes: Sequence[NodeInfo]) -> list[Status]:
        reasons: list[Status] = [SUCCESS] * len(nodes)

        def reject(i: int, reason: Status) -> None:
            if reasons[i].ok:
                reasons[i] = reason

        c = task.constraints
        for term in c.pod_anti_affinity:
            counts = self.counts(term.topology_key, self._term_selects(term, task), task)
            for i, node in enumerate(nodes):
                value = node.labels.get(term.topology_key)
                if value is not None and counts[value]:
                    reject(i, POD_ANTI_AFFINITY)
        forbidden = self._forbidden_by_existing(task)
        if forbidden:
            for i, node in enumerate(nodes):
                if any(node.labels.get(key) == value for key, value in forbidden):
                    reject(i, EXISTING_ANTI_AFFINITY)
        for term in c.pod_affinity:
            counts = self.counts(term.topology_key, self._term_selects(term, task), task)
            if not counts and term.selects(task.namespace, task.namespace, task.labels):
                continue  # the first pod of a group that must be together
            for i, node in enumerate(nodes):
                value = node.labels.get(term.topology_key)
                if value is None or not counts[value]:
                    reject(i, POD_AFFINITY)
        for spread in c.spread:
            if spread.when_unsatisfiable != "DoNotSchedule":
                continue
            counts, floor = self._spread_counts(task, spread)
            me = 1 if spread.selector.matches(task.labels) else 0
            for i, node in enumerate(nodes):
                value = node.labels.get(spread.topology_key)
                if value is None:
                    reject(i, SPREAD_LABEL)
                elif counts[value] + me - floor > spread.max_skew:
                    reject(i, SPREAD)
        return reasons

    def _forbidden_by_existing(self, task: TaskInfo) -> set[tuple[str, str]]:
        """(topology key, value) domains whose pods' required anti-affinity selects `task`."""
        out: set[tuple[str, str]] = set()
        for node, other in self.placed():
            for term in other.constraints.pod_anti_affinity:
                value = node.labels.get(term.topology_key)
                if value is not None and other.uid != task.uid and term.selects(
                    other.namespace, task.namespace, task.labels
                ):
                    out.add((term.topology_key, value))
        return out

    def _spread_counts(self, task: TaskInfo, spread: SpreadConstraint) -> tuple[Counter[str], int]:
        """Matching pods of the task's namespace per domain, and the smallest count over the eligible domains."""
        def selects(other: TaskInfo) -> bool:
            return other.namespace == task.namespace and spread.selector.matches(other.labels)

        counts = self.counts(spread.topology_key, selects, task)
        domains = {
            n.labels[spread.topology_key]
            for n in self.ssn.static_feasible_nodes(task)
            if spread.topology_key in n.labels
        }
        floor = min((counts[d] for d in domains), default=0)
        return counts, floor

    # -- scores ---------------------------------------------------------------------------------------------
    def score(self, task: TaskInfo, nodes: Sequence[NodeInfo]) -> list[float]:
        c = task.constraints
        total = [0.0] * len(nodes)
        preferred = [(w, t) for w, t in c.preferred_pod_affinity] + [(-w, t) for w, t in c.preferred_pod_anti_affinity]
        if preferred:
            raw = [0.0] * len(nodes)
            for weight, term in preferred:
                counts = self.counts(term.topology_key, self._term_selects(term, task), task)
                for i, node in enumerate(nodes):
                    value = node.labels.get(term.topology_key)
                    if value is not None and counts[value]:
                        raw[i] += weight
            _add_normalised(total, raw)
        for spread in c.spread:
            if spread.when_unsatisfiable != "ScheduleAnyway":
                continue
            counts, _ = self._spread_counts(task, spread)
            raw = [-float(counts[node.labels[spread.topology_key]]) if spread.topology_key in node.labels
                   else -float(max(counts.values(), default=0) + 1) for node in nodes]
            _add_normalised(total, raw)
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
        HOST_PORTS if any(other.constraints.host_ports and other.status in COUNTED and other.uid != task.uid
                          and host_ports_conflict(wanted, other.constraints.host_ports)
                          for other in node.tasks.values()) else SUCCESS
        for node in nodes
    ]


class PredicatesPlugin(Plugin[NoArgs]):
    name = "predicates"

    def on_session_open(self, ssn: SessionAPI) -> None:
        ssn.register(P.PREDICATE, static_predicate)
        ssn.register(P.DYNAMIC_PREDICATE, host_port_filter)
        topology = PodTopology(ssn)
        ssn.register(P.DYNAMIC_PREDICATE, topology.filter)
        ssn.register(P.DYNAMIC_NODE_ORDER, topology.score)
