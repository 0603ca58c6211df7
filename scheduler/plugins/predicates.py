"""Layer `plugins`: `predicates` filters nodes a task may not use, whatever their free resources.

Node readiness and cordoning, nodeSelector, required node affinity, and NoSchedule/NoExecute taints.
These depend only on the task's `Constraints` and the node, so the session evaluates them once per
constraint set per cycle (identical pods of a gang share the answer). Resource fit, including the
`pods` count, is checked by the actions against each node's idle resources (`resource_misfit`).
"""

from __future__ import annotations

from scheduler.api.job import TaskInfo
from scheduler.api.node import NodeInfo
from scheduler.api.resources import PODS, Resource
from scheduler.framework import points as P
from scheduler.framework.plugin import Plugin
from scheduler.framework.session import Session

NOT_READY = "node(s) were not ready"
UNSCHEDULABLE = "node(s) were unschedulable"
AFFINITY = "node(s) didn't match Pod's node affinity/selector"


def static_predicate(task: TaskInfo, node: NodeInfo) -> str | None:
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
        return f"node(s) had untolerated taint {{{shown}}}"
    return None


def resource_misfit(request: Resource, free: Resource) -> str:
    """Kube-scheduler's wording for the first dimension that does not fit ('' when it fits)."""
    short = request.shortfall(free)
    if short.is_zero():
        return ""
    for name, units in short.items():
        if units:
            return "Too many pods" if name == PODS else f"Insufficient {name}"
    return ""  # pragma: no cover


class PredicatesPlugin(Plugin):
    name = "predicates"

    def on_session_open(self, ssn: Session) -> None:
        ssn.register(P.PREDICATE, static_predicate)
