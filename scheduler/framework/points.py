"""Layer `framework`: the extension points, each declared once with its Volcano switch, the `Protocol` its
functions follow, and its combiner.

A combiner folds the functions plugins registered, tier by tier, into one answer. These few pure functions
carry every tier rule; `TierRunner.run` (`tiers.py`) is the only loop over tiers. Points whose answer carries
reasons answer with a `Status` (`api/decision.py`); the session stamps the plugin's name on a non-success Status
when it registers the function (`Point.stamp`), as kube-scheduler's framework does. No point answers None: "no
opinion" is `ABSTAIN` (votes, gang placement), an empty list ends a victims tier.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from scheduler.api.decision import ABSTAIN, SUCCESS, Code, Status
from scheduler.api.job import JobInfo, TaskInfo
from scheduler.api.node import NodeInfo
from scheduler.api.queue import QueueInfo
from scheduler.api.resources import Resource
from scheduler.framework.arrays import IntArray, NodeArrays
from scheduler.framework.evictable import Evictable, EvictDomains, first_domains, unified_victims

FloatArray = npt.NDArray[np.float64]
F = TypeVar("F")
R = TypeVar("R")
T = TypeVar("T")
T_contra = TypeVar("T_contra", contravariant=True)
Tiers = Sequence[Sequence[F]]


# ---- what plugins register, per point ----------------------------------------------------------------


class Ordering(Protocol[T_contra]):
    """JobOrder, QueueOrder, TaskOrder: negative if `a` goes first, positive if `b` does, 0 for no opinion."""

    def __call__(self, a: T_contra, b: T_contra, /) -> int: ...


@dataclass(frozen=True, slots=True)
class KeyedOrdering(Generic[T]):
    """An Ordering by a key: `a` first when key(a) < key(b), no opinion when equal. Sorting by a key costs one
    call per item where a comparison function costs one per comparison: `Orderings.task_order` sorts by the
    keys when every TaskOrder function has one (the same order: the tuple of keys, then the default key), and
    allocate's job heaps do where every JobOrder function has one (`Orderings.job_key`). The key reads only the
    job's or task's own state."""

    key: Callable[[T], Any]

    def __call__(self, a: T, b: T, /) -> int:
        left, right = self.key(a), self.key(b)
        return int(left > right) - int(left < right)


class NodeScore(Protocol):
    def __call__(self, task: TaskInfo, node: NodeInfo, /) -> float: ...


class BatchScore(Protocol):
    def __call__(self, task: TaskInfo, arrays: NodeArrays, indices: IntArray, /) -> FloatArray: ...


class NodesPredicate(Protocol):
    """One Status per node, in the order given."""

    def __call__(self, task: TaskInfo, nodes: Sequence[NodeInfo], /) -> list[Status]: ...


class NodesScore(Protocol):
    def __call__(self, task: TaskInfo, nodes: Sequence[NodeInfo], /) -> list[float]: ...


class JobDecision(Protocol):
    """JobValid (SUCCESS or a rejection), JobEnqueueable and JobPipelined (SUCCESS = permit, ABSTAIN, or a
    rejection with its reasons)."""

    def __call__(self, job: JobInfo, /) -> Status: ...


class JobCheck(Protocol):
    def __call__(self, job: JobInfo, /) -> bool: ...


@dataclass(frozen=True, slots=True)
class BoundedCheck:
    """A JOB_READY function with a bound: `not_before(job)` placements more are needed before `check` can pass
    (0: it may pass now). Each placement counts one. The bulk placer asks JobReady only from there on."""

    check: JobCheck
    not_before: Callable[[JobInfo], int]

    def __call__(self, job: JobInfo, /) -> bool:
        return self.check(job)


class QueueCheck(Protocol):
    def __call__(self, queue: QueueInfo, /) -> bool: ...


class QueueRequestCheck(Protocol):
    def __call__(self, queue: QueueInfo, request: Resource, /) -> bool: ...


class VictimQueueOrdering(Protocol):
    def __call__(self, a: QueueInfo, b: QueueInfo, preemptor: QueueInfo, /) -> int: ...


class QueueTaskDecision(Protocol):
    """Allocatable: may the queue take the task now? A rejection names the limit (`QueueLimit`)."""

    def __call__(self, queue: QueueInfo, task: TaskInfo, /) -> Status: ...


class QueueTaskCount(Protocol):
    """Allocatable for `n` tasks of one job with one request, taken in turn, each counted as allocated once let
    through: how many of the first of them the plugin lets through (fewer than `n` when it might stop one)."""

    def __call__(self, queue: QueueInfo, task: TaskInfo, n: int, /) -> int: ...


@dataclass(frozen=True, slots=True)
class CountedDecision:
    """An ALLOCATABLE function in both forms: `one(queue, task)`, the answer for one task, and `many(queue, task,
    n)`, how many of n identical tasks in a row `one` would let through (without any escape hatch `one` has for
    a task no node could hold). The bulk placer (`framework/bulk.py`) places a gang's identical tasks with it."""

    one: QueueTaskDecision
    many: QueueTaskCount

    def __call__(self, queue: QueueInfo, task: TaskInfo, /) -> Status:
        return self.one(queue, task)


class Victims(Protocol):
    """The candidates this plugin lets the preemptor take; an empty list ends the tier without an answer."""

    def __call__(self, preemptor: TaskInfo, candidates: Sequence[TaskInfo], /) -> list[TaskInfo]: ...


class VictimGuard(Protocol):
    def __call__(self, candidates: Sequence[TaskInfo], preemptor: TaskInfo, /) -> list[TaskInfo]: ...


@dataclass(frozen=True, slots=True)
class BatchScorer:
    """A BATCH_NODE_ORDER scorer in both forms: `many(task, arrays, indices)` -> one score per index, and
    `one(task, node)` -> the same score for one node, as a float. They must agree (to float rounding): the
    session mixes them in one cache (tests/plugins/test_batch_scores.py holds each plugin to it)."""

    many: BatchScore
    one: NodeScore
    # Optional: `static(task, node)` -> a key such that `one(task, node)` depends on the node only through its
    # resource accounting (allocatable, idle, used, no_cpu_request, no_memory_request) and this key, and on the
    # task only through its request and constraints. With it, the bulk placer computes the scores a node takes as
    # it fills once per (shape, resource state, key) instead of once per placed task.
    static: Callable[[TaskInfo, NodeInfo], Hashable] | None = None

    def __call__(self, task: TaskInfo, arrays: NodeArrays, indices: IntArray, /) -> FloatArray:
        return self.many(task, arrays, indices)


@dataclass(frozen=True, slots=True)
class GangAnswer:
    """A gang placer's answer: SUCCESS with the whole gang's (task, node) pairs; ABSTAIN to let allocate place
    pod by pod; or a rejection whose reasons prove the gang cannot be placed now."""

    status: Status
    assignments: tuple[tuple[TaskInfo, NodeInfo], ...] = ()


PLACE_BY_POD = GangAnswer(ABSTAIN)


class GangPlacer(Protocol):
    def __call__(self, job: JobInfo, tasks: Sequence[TaskInfo], /) -> GangAnswer: ...


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


# ---- combiners ---------------------------------------------------------------------------------------


def first_nonzero(tiers: Tiers[Callable[..., int]], *args: object) -> int:
    """Orderings: the first plugin with an opinion decides."""
    for tier in tiers:
        for fn in tier:
            result = fn(*args)
            if result:
                return int(result)
    return 0


def all_pass(tiers: Tiers[Callable[..., bool]], *args: object) -> bool:
    for tier in tiers:
        for fn in tier:
            if not fn(*args):
                return False
    return True


def first_rejection(tiers: Tiers[Callable[..., Status]], *args: object) -> Status:
    """JobValid and Allocatable: every plugin must pass; the first Status against is the answer."""
    for tier in tiers:
        for fn in tier:
            status = fn(*args)
            code = status.code
            if code is not Code.SUCCESS and code is not Code.ABSTAIN:
                return status
    return SUCCESS


def sum_scores(tiers: Tiers[NodeScore], task: TaskInfo, node: NodeInfo) -> float:
    total = 0.0
    for tier in tiers:
        for fn in tier:
            total += fn(task, node)
    return total


def sum_score_arrays(tiers: Tiers[BatchScore], task: TaskInfo, arrays: NodeArrays, indices: IntArray) -> FloatArray:
    """Batch node scores: each plugin returns one score per candidate index; they add up."""
    total: FloatArray | None = None
    for tier in tiers:
        for fn in tier:
            scores = fn(task, arrays, indices)
            total = scores if total is None else total + scores
    return total if total is not None else np.zeros(indices.size)


def rejections_per_node(tiers: Tiers[NodesPredicate], task: TaskInfo, nodes: Sequence[NodeInfo]) -> list[Status]:
    """Node filters: each plugin returns one Status per node; the first rejection per node wins (an answer that
    is not a rejection, SUCCESS or ABSTAIN, lets the node through)."""
    fns = [fn for tier in tiers for fn in tier]
    if len(fns) == 1:  # the usual case (predicates alone): its answer as it is
        return fns[0](task, nodes)
    out: list[Status] = [SUCCESS] * len(nodes)
    for tier in tiers:
        for fn in tier:
            for i, status in enumerate(fn(task, nodes)):
                if status.rejected and out[i].ok:
                    out[i] = status
    return out


def sum_node_lists(tiers: Tiers[NodesScore], task: TaskInfo, nodes: Sequence[NodeInfo]) -> list[float]:
    """Dynamic node scores: each plugin returns one score per node; they add up."""
    total = [0.0] * len(nodes)
    for tier in tiers:
        for fn in tier:
            for i, score in enumerate(fn(task, nodes)):
                total[i] += float(score)
    return total


def any_true(tiers: Tiers[Callable[..., bool]], *args: object) -> bool:
    return any(fn(*args) for tier in tiers for fn in tier)


def first_tier_all(tiers: Tiers[JobCheck], job: JobInfo) -> bool:
    """JobStarving, as Volcano's Session.JobStarving (pkg/scheduler/framework/session_plugins.go): the first
    tier with any function decides, and there every function must agree (the priority plugin's "short of its
    replicas" and the gang plugin's "short of minAvailable" together mean short of minAvailable)."""
    for tier in tiers:
        if tier:
            return all(fn(job) for fn in tier)
    return False


def votes(tiers: Tiers[JobDecision], job: JobInfo) -> Status:
    """Volcano's JobEnqueueable / JobPipelined (pkg/scheduler/framework/session_plugins.go): any rejection wins;
    otherwise the first tier with a permit (SUCCESS) decides; with no opinion at all, permit."""
    for tier in tiers:
        permitted = False
        for fn in tier:
            status = fn(job)
            if status.rejected:
                return status
            permitted = permitted or status.ok
        if permitted:
            return SUCCESS
    return SUCCESS


def first_placement(tiers: Tiers[GangPlacer], job: JobInfo, tasks: Sequence[TaskInfo]) -> GangAnswer:
    """The first gang placer that does not abstain decides; with none, allocate places pod by pod."""
    for tier in tiers:
        for fn in tier:
            answer = fn(job, tasks)
            if not answer.status.abstained:
                return answer
    return PLACE_BY_POD


def every_filter(tiers: Tiers[VictimGuard], candidates: Sequence[TaskInfo], preemptor: TaskInfo) -> list[TaskInfo]:
    """Victim guards: each one, in every tier, keeps only the candidates it allows (they compose)."""
    kept = list(candidates)
    for tier in tiers:
        for fn in tier:
            kept = fn(kept, preemptor)
    return kept


def tier_victims(tiers: Tiers[Victims], preemptor: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
    """Preemptable/Reclaimable, as Volcano's Session.Preemptable/Reclaimable (pkg/scheduler/framework/
    session_plugins.go): within a tier, the victims every plugin agrees on; a plugin that offers none ends the
    tier with no answer, and so does an empty agreement; the first tier with victims wins. (So a gang that tier
    1 protects completely can still lose tasks to what tier 2 allows: that is Volcano's rule too.)"""
    for tier in tiers:
        agreed: dict[int, TaskInfo] | None = None
        for fn in tier:
            offered = fn(preemptor, candidates)
            if not offered:
                agreed = None
                break
            ids = {id(v): v for v in offered}
            agreed = ids if agreed is None else ({k: v for k, v in agreed.items() if k in ids} or None)
        if agreed:
            return list(agreed.values())
    return []


@dataclass(frozen=True, slots=True)
class Point(Generic[F, R]):
    """An extension point: plugins register functions of type F; `TierRunner.run` combines them into an R."""

    name: str
    switch: str | None  # Volcano's enableXxx key that turns a plugin's function off at this point
    combine: Callable[..., R]
    stamp: Callable[[F, str], F] | None = None  # wraps a plugin's function so its Status names the plugin


JOB_ORDER: Point[Ordering[JobInfo], int] = Point("job_order", "enableJobOrder", first_nonzero)
QUEUE_ORDER: Point[Ordering[QueueInfo], int] = Point("queue_order", "enableQueueOrder", first_nonzero)
TASK_ORDER: Point[Ordering[TaskInfo], int] = Point("task_order", "enableTaskOrder", first_nonzero)
# Node filters that read only a task's constraints and the nodes' labels, taints, readiness and cordon: fn(task,
# nodes) -> one Status per node. The session asks once per constraint set for all its nodes and keeps the answer
# (across cycles too, `framework/memo.py`), so a plugin can answer for many nodes at once (predicates groups the
# nodes by their taints and compares label columns).
PREDICATE: Point[NodesPredicate, list[Status]] = Point("predicate", "enablePredicate", rejections_per_node, stamp_each)
NODE_ORDER: Point[NodeScore, float] = Point("node_order", "enableNodeOrder", sum_scores)
# The vectorised form of NODE_ORDER: fn(task, NodeArrays, candidate indices) -> float array. Scorers on the
# hot path use it, so scoring 5,000 nodes is a few numpy expressions rather than 5,000 Python calls.
# A score of -inf vetoes the node (e.g. deviceshare: no card can hold the share). A scorer registered as a
# `BatchScorer` also gives its score for one node as a plain float, which the session uses when one node
# changed (the one the previous task went to): numpy's per-call cost is most of the time there.
BATCH_NODE_ORDER: Point[BatchScore, FloatArray] = Point("batch_node_order", "enableNodeOrder", sum_score_arrays)
JOB_VALID: Point[JobDecision, Status] = Point("job_valid", None, first_rejection, stamp_status)
JOB_READY: Point[JobCheck, bool] = Point("job_ready", "enableJobReady", all_pass)
JOB_PIPELINED: Point[JobDecision, Status] = Point("job_pipelined", "enableJobPipelined", votes, stamp_status)
JOB_ENQUEUEABLE: Point[JobDecision, Status] = Point("job_enqueueable", "enableJobEnqueued", votes, stamp_status)
ALLOCATABLE: Point[QueueTaskDecision, Status] = Point(
    "allocatable", "enabledAllocatable", first_rejection, stamp_queue_task)
OVERUSED: Point[QueueCheck, bool] = Point("overused", "enabledOverused", any_true)
VictimsPoint = Point[Victims, list[TaskInfo]]
PREEMPTABLE: VictimsPoint = Point("preemptable", "enablePreemptable", tier_victims)
RECLAIMABLE: VictimsPoint = Point("reclaimable", "enableReclaimable", tier_victims)
JOB_STARVING: Point[JobCheck, bool] = Point("job_starving", "enableJobStarving", first_tier_all)
# fn(queue, request) -> bool: may the queue take `request` (one task's, or a gang's pending tasks' summed, as
# Volcano's PreemptiveFn sums its candidates) by evicting other queues' tasks (reclaim, gangreclaim)? Strict: no
# escape hatch for tasks that fit nowhere, since reclaim exists for exactly those.
PREEMPTIVE: Point[QueueRequestCheck, bool] = Point("preemptive", "enablePreemptive", all_pass)
# Gang-aware eviction's victim filter (`evictable.py`): no switch, Volcano's UnifiedEvictable tier rule.
EVICTABLE: Point[Evictable, list[TaskInfo]] = Point("evictable", None, unified_victims)
# The domains a gang with a hard network topology looks for victims in, widest first (`evictable.py`).
EVICT_DOMAINS: Point[EvictDomains, object] = Point("evict_domains", "enabledHyperNodeGradient", first_domains)
# fn(a, b, preemptor's queue) -> int: which victim queue gangreclaim takes from first (capacity: the one nearest
# the reclaimer in the queue tree); 0 for no opinion (then the reverse of QueueOrder).
VICTIM_QUEUE_ORDER: Point[VictimQueueOrdering, int] = Point("victim_queue_order", None, first_nonzero)
# Victim guards: fn(candidates, preemptor) -> the candidates this plugin lets go, applied after the tier vote
# whatever tier answered. Volcano's tier rule lets a later tier evict what an earlier tier's plugin protected
# (a plugin that offers no victim ends its tier without an answer): with gang in tier 1 and drf in tier 2, a
# gang at its minAvailable loses pods to drf. volcano-py keeps the protection of the plugins that give it (gang:
# minAvailable; conformance: critical pods) across tiers, switched by the same enablePreemptable /
# enableReclaimable keys, so a conf that turns gang's off (Volcano's CI conf does) behaves as Volcano's.
PREEMPT_GUARD: Point[VictimGuard, list[TaskInfo]] = Point("preempt_guard", "enablePreemptable", every_filter)
RECLAIM_GUARD: Point[VictimGuard, list[TaskInfo]] = Point("reclaim_guard", "enableReclaimable", every_filter)
# Predicates and scores that depend on where other pods are (inter-pod (anti-)affinity, topology spread), so
# they cannot be cached per constraint set. fn(task, nodes) -> one Status (or score) per node.
# The session evaluates them only for tasks whose constraints have such terms (`Constraints.dynamic`).
DYNAMIC_PREDICATE: Point[NodesPredicate, list[Status]] = Point(
    "dynamic_predicate", "enablePredicate", rejections_per_node, stamp_each)
DYNAMIC_NODE_ORDER: Point[NodesScore, list[float]] = Point("dynamic_node_order", "enableNodeOrder", sum_node_lists)
# fn(job, tasks in TaskOrder) -> GangAnswer (ABSTAIN: let allocate place pod by pod). The placement is replayed
# through a Statement, so predicates, queue shares and gang rules still hold.
PLACE_GANG: Point[GangPlacer, GangAnswer] = Point("place_gang", None, first_placement, stamp_answer)

ALL_POINTS: tuple[Point[object, object], ...] = (  # type: ignore[assignment]
    JOB_ORDER,
    QUEUE_ORDER,
    TASK_ORDER,
    PREDICATE,
    NODE_ORDER,
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
    VICTIM_QUEUE_ORDER,
    DYNAMIC_PREDICATE,
    DYNAMIC_NODE_ORDER,
)
