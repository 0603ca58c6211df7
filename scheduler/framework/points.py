"""Layer `framework`: the extension points, each declared once with the plugin method that serves it, its
Volcano switch, the `Protocol` its methods follow (`forms.py`), its parameters and its combiner (`combine.py`).

A combiner folds the methods plugins serve, tier by tier, into one answer. These few pure functions carry every
tier rule; `TierRunner.run` (`tiers.py`) is the only loop over tiers. Points whose answer carries
reasons answer with a `Status` (`api/decision.py`); the session stamps the plugin's name on a non-success Status
when it registers the function (`Point.stamp`), as kube-scheduler's framework does. No point answers None: "no
opinion" is `ABSTAIN` (votes, gang placement), an empty list ends a victims tier.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar

from scheduler.api.decision import Code, Status
from scheduler.api.job import JobInfo, TaskInfo
from scheduler.api.node import NodeInfo
from scheduler.api.queue import QueueInfo
from scheduler.api.resources import Resource
from scheduler.framework import combine as C
from scheduler.framework.arrays import IntArray, NodeArrays
from scheduler.framework.evictable import Domain, Evictable, EvictDomains, EvictionContext, VictimFilter
from scheduler.framework.forms import (  # re-exported: plugins and actions name them as points.X
    PLACE_BY_POD as PLACE_BY_POD,
    BatchScore as BatchScore,
    BatchScorer as BatchScorer,
    BoundedCheck as BoundedCheck,
    CountedDecision as CountedDecision,
    FloatArray as FloatArray,
    GangAnswer as GangAnswer,
    GangPlacer as GangPlacer,
    HyperNodeScore as HyperNodeScore,
    JobCheck as JobCheck,
    JobDecision as JobDecision,
    KeyedOrdering as KeyedOrdering,
    NodeScore as NodeScore,
    NodesPredicate as NodesPredicate,
    NodesScore as NodesScore,
    Ordering as Ordering,
    QueueCheck as QueueCheck,
    QueueRequestCheck as QueueRequestCheck,
    QueueTaskCount as QueueTaskCount,
    QueueTaskDecision as QueueTaskDecision,
    VictimGuard as VictimGuard,
    VictimQueueOrdering as VictimQueueOrdering,
    Victims as Victims,
    compare as compare,
)

F = TypeVar("F")
R = TypeVar("R")
A = ParamSpec("A")
Tiers = Sequence[Sequence[F]]


# ---- stamping the plugin's name ------------------------------------------------------------------------


def stamp_status(fn: JobDecision, plugin: str) -> JobDecision:
    def run(job: JobInfo, /) -> Status:
        status = fn(job)
        return status if status.ok else status.stamped(plugin)

    return run


def _node_stamper(plugin: str) -> Callable[[Status], Status]:
    """Stamps node-filter answers, which run once per node and come from a handful of values: each distinct one
    is stamped once (a `replace` per rejected node cost 5-10% of a gang-only cycle at 5,000 nodes)."""
    stamped: dict[Status, Status] = {}

    def stamp(status: Status) -> Status:
        if status.code is Code.SUCCESS:  # the hot path
            return status
        done = stamped.get(status)
        if done is None:
            done = stamped[status] = status.stamped(plugin)
        return done

    return stamp


def stamp_queue_task(fn: QueueTaskDecision, plugin: str) -> QueueTaskDecision:
    if isinstance(fn, CountedDecision):  # keep the counting form beside the stamped one
        return CountedDecision(stamp_queue_task(fn.one, plugin), fn.many)

    def run(queue: QueueInfo, task: TaskInfo, /) -> Status:
        status = fn(queue, task)
        return status if status.ok else status.stamped(plugin)

    return run


def stamp_each(fn: NodesPredicate, plugin: str) -> NodesPredicate:
    stamp = _node_stamper(plugin)

    def run(task: TaskInfo, nodes: Sequence[NodeInfo], /) -> list[Status]:
        return [s if s.code is Code.SUCCESS else stamp(s) for s in fn(task, nodes)]

    return run


def stamp_answer(fn: GangPlacer, plugin: str) -> GangPlacer:
    def run(job: JobInfo, tasks: Sequence[TaskInfo], /) -> GangAnswer:
        answer = fn(job, tasks)
        if answer.status.plugin == plugin:
            return answer
        return GangAnswer(answer.status.stamped(plugin), answer.assignments)

    return run


@dataclass(frozen=True, slots=True)
class Point(Generic[F, A, R]):
    """An extension point: plugins serve it with a method named `name`, of type F; `TierRunner.run(point, *args)`
    folds their answers into an R with `combine`, the arguments typed by A (`ParamSpec`).

    `accelerations` names the optional methods beside the plain one that let the runtime take a faster path with
    the same answers (`runtime.py` discovers them; `points.KeyedOrdering`, `CountedDecision`, `BoundedCheck` and
    `BatchScorer` are the forms it builds from them)."""

    name: str
    switch: str | None  # Volcano's enableXxx key that turns a plugin's method off at this point
    combine: Callable[Concatenate[Tiers[F], A], R]
    stamp: Callable[[F, str], F] | None = None  # wraps a plugin's method so its Status names the plugin
    accelerations: tuple[str, ...] = ()


JOB_ORDER: Point[Ordering[JobInfo], [JobInfo, JobInfo], int] = Point(
    "job_order", "enableJobOrder", C.first_nonzero, accelerations=("job_order_key",))
QUEUE_ORDER: Point[Ordering[QueueInfo], [QueueInfo, QueueInfo], int] = Point(
    "queue_order", "enableQueueOrder", C.first_nonzero)
TASK_ORDER: Point[Ordering[TaskInfo], [TaskInfo, TaskInfo], int] = Point(
    "task_order", "enableTaskOrder", C.first_nonzero, accelerations=("task_order_key",))
# Node filters that read only a task's constraints and the nodes' labels, taints, readiness and cordon: fn(task,
# nodes) -> one Status per node. The session asks once per constraint set for all its nodes and keeps the answer
# (across cycles too, `framework/memo.py`), so a plugin can answer for many nodes at once (predicates groups the
# nodes by their taints and compares label columns).
PREDICATE: Point[NodesPredicate, [TaskInfo, Sequence[NodeInfo]], list[Status]] = Point(
    "predicate", "enablePredicate", C.rejections_per_node, stamp_each)
# The vectorised form of NODE_ORDER: fn(task, NodeArrays, candidate indices) -> float array. Scorers on the
# hot path use it, so scoring 5,000 nodes is a few numpy expressions rather than 5,000 Python calls.
# A score of -inf vetoes the node (e.g. deviceshare: no card can hold the share). A scorer registered as a
# `BatchScorer` also gives its score for one node as a plain float, which the session uses when one node
# changed (the one the previous task went to): numpy's per-call cost is most of the time there.
BATCH_NODE_ORDER: Point[BatchScore, [TaskInfo, NodeArrays, IntArray], FloatArray] = Point(
    "batch_node_order", "enableNodeOrder", C.sum_score_arrays,
    accelerations=("batch_node_order_one", "batch_node_order_static"))
JOB_VALID: Point[JobDecision, [JobInfo], Status] = Point("job_valid", None, C.first_rejection, stamp_status)
JOB_READY: Point[JobCheck, [JobInfo], bool] = Point(
    "job_ready", "enableJobReady", C.all_pass, accelerations=("job_ready_bound",))
JOB_PIPELINED: Point[JobDecision, [JobInfo], Status] = Point(
    "job_pipelined", "enableJobPipelined", C.votes, stamp_status)
JOB_ENQUEUEABLE: Point[JobDecision, [JobInfo], Status] = Point(
    "job_enqueueable", "enableJobEnqueued", C.votes, stamp_status)
ALLOCATABLE: Point[QueueTaskDecision, [QueueInfo, TaskInfo], Status] = Point(
    "allocatable", "enabledAllocatable", C.first_rejection, stamp_queue_task, accelerations=("allocatable_count",))
OVERUSED: Point[QueueCheck, [QueueInfo], bool] = Point("overused", "enabledOverused", C.any_true)
VictimsPoint = Point[Victims, [TaskInfo, Sequence[TaskInfo]], list[TaskInfo]]
PREEMPTABLE: VictimsPoint = Point("preemptable", "enablePreemptable", C.tier_victims)
RECLAIMABLE: VictimsPoint = Point("reclaimable", "enableReclaimable", C.tier_victims)
JOB_STARVING: Point[JobCheck, [JobInfo], bool] = Point("job_starving", "enableJobStarving", C.first_tier_all)
# fn(queue, request) -> bool: may the queue take `request` (one task's, or a gang's pending tasks' summed, as
# Volcano's PreemptiveFn sums its candidates) by evicting other queues' tasks (reclaim, gangreclaim)? Strict: no
# escape hatch for tasks that fit nowhere, since reclaim exists for exactly those.
PREEMPTIVE: Point[QueueRequestCheck, [QueueInfo, Resource], bool] = Point(
    "preemptive", "enablePreemptive", C.all_pass)
# Gang-aware eviction's victim filter (`evictable.py`): no switch, Volcano's UnifiedEvictable tier rule.
EVICTABLE: Point[Evictable, [EvictionContext, Sequence[TaskInfo]], list[TaskInfo]] = Point(
    "evictable", None, C.unified_victims)
# The domains a gang with a hard network topology looks for victims in, widest first (`evictable.py`).
EVICT_DOMAINS: Point[EvictDomains, [JobInfo], list[Domain] | None] = Point(
    "evict_domains", "enabledHyperNodeGradient", C.first_domains)
# fn(a, b, preemptor's queue) -> int: which victim queue gangreclaim takes from first (capacity: the one nearest
# the reclaimer in the queue tree); 0 for no opinion (then the reverse of QueueOrder).
VICTIM_QUEUE_ORDER: Point[VictimQueueOrdering, [QueueInfo, QueueInfo, QueueInfo], int] = Point(
    "victim_queue_order", None, C.first_nonzero)
# Victim guards: fn(candidates, preemptor) -> the candidates this plugin lets go, applied after the tier vote
# whatever tier answered. Volcano's tier rule lets a later tier evict what an earlier tier's plugin protected
# (a plugin that offers no victim ends its tier without an answer): with gang in tier 1 and drf in tier 2, a
# gang at its minAvailable loses pods to drf. volcano-py keeps the protection of the plugins that give it (gang:
# minAvailable; conformance: critical pods) across tiers, switched by the same enablePreemptable /
# enableReclaimable keys, so a conf that turns gang's off (Volcano's CI conf does) behaves as Volcano's.
GuardPoint = Point[VictimGuard, [Sequence[TaskInfo], TaskInfo], list[TaskInfo]]
PREEMPT_GUARD: GuardPoint = Point("preempt_guard", "enablePreemptable", C.every_filter)
RECLAIM_GUARD: GuardPoint = Point("reclaim_guard", "enableReclaimable", C.every_filter)
# Predicates and scores that depend on where other pods are (inter-pod (anti-)affinity, topology spread), so
# they cannot be cached per constraint set. fn(task, nodes) -> one Status (or score) per node.
# The session evaluates them only for tasks whose constraints have such terms (`Constraints.dynamic`).
DYNAMIC_PREDICATE: Point[NodesPredicate, [TaskInfo, Sequence[NodeInfo]], list[Status]] = Point(
    "dynamic_predicate", "enablePredicate", C.rejections_per_node, stamp_each)
DYNAMIC_NODE_ORDER: Point[NodesScore, [TaskInfo, Sequence[NodeInfo]], list[float]] = Point(
    "dynamic_node_order", "enableNodeOrder", C.sum_node_lists)
# fn(job, tasks in TaskOrder) -> GangAnswer (ABSTAIN: let allocate place pod by pod). The placement is replayed
# through a Statement, so predicates, queue shares and gang rules still hold.
PLACE_GANG: Point[GangPlacer, [JobInfo, Sequence[TaskInfo]], GangAnswer] = Point(
    "place_gang", None, C.first_placement, stamp_answer)
# fn(job, a sub-group's tasks, candidate HyperNodes as node positions) -> a score per candidate: which of the
# HyperNodes a sub-group fits in it goes to (Volcano's HyperNodeOrderFn, the network-topology-aware plugin's
# hypernode binpack; allocate.go selectBestHyperNodeForSubJob takes the highest sum).
HYPERNODE_ORDER: Point[HyperNodeScore, [JobInfo, Sequence[TaskInfo], Mapping[str, IntArray]], dict[str, float]] = Point(
    "hypernode_order", "enabledHyperNodeOrder", C.sum_hypernode_scores)
# Victim filters beyond Volcano's (minruntime, victimcost): fn(context, candidates) -> the candidates the plugin
# lets go, cheapest first. Every evicting action (preempt, reclaim, gangpreempt, gangreclaim) asks it last, after
# its own rules, the victim plugins and the guards, whatever tier answered; no switch. Nobody serves it under a
# Volcano conf, and then the actions do not ask it: their victims are Volcano's.
VICTIM_FILTER: Point[VictimFilter, [EvictionContext, Sequence[TaskInfo]], list[TaskInfo]] = Point(
    "victim_filter", None, C.chain_filters)

ALL_POINTS: tuple[Point[Any, ..., Any], ...] = (
    JOB_ORDER,
    QUEUE_ORDER,
    TASK_ORDER,
    PREDICATE,
    BATCH_NODE_ORDER,
    JOB_VALID,
    JOB_READY,
    JOB_PIPELINED,
    JOB_ENQUEUEABLE,
    ALLOCATABLE,
    OVERUSED,
    PREEMPTABLE,
    RECLAIMABLE,
    PREEMPT_GUARD,
    RECLAIM_GUARD,
    JOB_STARVING,
    PLACE_GANG,
    PREEMPTIVE,
    EVICTABLE,
    EVICT_DOMAINS,
    HYPERNODE_ORDER,
    VICTIM_QUEUE_ORDER,
    DYNAMIC_PREDICATE,
    DYNAMIC_NODE_ORDER,
    VICTIM_FILTER,
)
