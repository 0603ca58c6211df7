"""Layer `framework`: the forms of what plugins serve at each extension point — the `Protocol` each point's
method follows, and the accelerated forms the runtime builds from a plugin's optional methods
(`KeyedOrdering`, `CountedDecision`, `BoundedCheck`, `BatchScorer`) — and the gang placer's answer.

`points.py` declares the points over these types and re-exports them; `combine.py` folds them.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from scheduler.api.decision import ABSTAIN, Status
from scheduler.api.job import JobInfo, TaskInfo
from scheduler.api.node import NodeInfo
from scheduler.api.queue import QueueInfo
from scheduler.api.resources import Resource
from scheduler.framework.arrays import IntArray, NodeArrays

FloatArray = npt.NDArray[np.float64]
T = TypeVar("T")
K = TypeVar("K", bound="Comparable")


class Comparable(Protocol):
    """A key an ordering sorts by (a number, a Fraction, a bool)."""

    def __lt__(self: K, other: K, /) -> bool: ...

T_contra = TypeVar("T_contra", contravariant=True)


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

    key: Callable[[T], Comparable]

    def __call__(self, a: T, b: T, /) -> int:
        return compare(self.key(a), self.key(b))


def compare(left: Comparable, right: Comparable) -> int:
    """An Ordering's answer from two keys: -1 when `left` goes first (smaller), 1 when `right` does, 0 if equal.
    A plugin's plain `job_order(a, b)` is `compare(self.job_order_key(a), self.job_order_key(b))`."""
    return int(right < left) - int(left < right)


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
    a task no node could hold). The bulk placer (`actions/bulk.py`) places a gang's identical tasks with it."""

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


class HyperNodeScore(Protocol):
    """fn(job, the sub-group's tasks, candidates: HyperNode name -> its nodes as positions in the session's node
    list) -> a score per candidate (Volcano's HyperNodeOrderFn for a SubJobInfo); a candidate left out scores 0."""

    def __call__(self, job: JobInfo, tasks: Sequence[TaskInfo], candidates: Mapping[str, IntArray], /,
                 ) -> dict[str, float]: ...
