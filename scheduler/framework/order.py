"""Layer `framework`: the orderings — jobs, queues and tasks in the order the plugins' JobOrder, QueueOrder and
TaskOrder give, with a default for what no plugin decides."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import TypeVar

from scheduler.api.job import JobInfo, TaskInfo
from scheduler.api.queue import QueueInfo
from scheduler.framework import points as P
from scheduler.framework.faults import Faults, attempt
from scheduler.framework.tiers import TierRunner

T = TypeVar("T")


class Orderings:
    """A JobOrder (QueueOrder) function that raises for a job (queue) makes that job (queue) faulted, and a
    faulted one orders after all others (`faults.py`): the heaps the actions build stay consistent, and the
    others keep the order they have among themselves."""

    def __init__(self, tiers: TierRunner, faults: Faults) -> None:
        self._tiers = tiers
        self._faults = faults

    def job_less(self, a: JobInfo, b: JobInfo) -> bool:
        """JobOrder; undecided, the older job (then the smaller uid) goes first."""
        faulted = self._faults.job_faulted
        if not (faulted(a) or faulted(b)):
            decided, exc = attempt(self._tiers.run, P.JOB_ORDER, a, b)
            if exc is not None:  # the job whose own order raises is faulted, see the class
                for job in _culprits(lambda j: self._tiers.run(P.JOB_ORDER, j, j), (a, b)):
                    self._faults.job(job, exc)
            elif decided:
                return bool(decided < 0)
        return (faulted(a), a.creation, a.key) < (faulted(b), b.creation, b.key)

    def job_key(self) -> Callable[[JobInfo], tuple[object, ...]] | None:
        """JobOrder as a key, when every JobOrder function is a `KeyedOrdering`: their keys in tier order, then
        (creation, uid), which orders jobs exactly as `job_less` does while they do not change. None otherwise.
        A faulted job's key is (1, uid), after every other (0, ...)."""
        fns = self._tiers.functions(P.JOB_ORDER)
        keys = [fn.key for fn in fns if isinstance(fn, P.KeyedOrdering)]
        if len(keys) < len(fns):
            return None
        faults = self._faults

        def key_of(job: JobInfo) -> tuple[object, ...]:
            if not faults.job_faulted(job):
                made, exc = attempt(lambda: (0, *(key(job) for key in keys), job.creation, job.key))
                if exc is not None:
                    faults.job(job, exc)  # see the class
                elif made is not None:
                    return made
            return (1, job.key)

        return key_of

    def queue_less(self, a: QueueInfo, b: QueueInfo) -> bool:
        """QueueOrder; undecided, the older queue (then the smaller name) goes first."""
        faulted = self._faults.queue_faulted
        if not (faulted(a) or faulted(b)):
            decided, exc = attempt(self._tiers.run, P.QUEUE_ORDER, a, b)
            if exc is not None:  # see the class
                for queue in _culprits(lambda q: self._tiers.run(P.QUEUE_ORDER, q, q), (a, b)):
                    self._faults.queue(queue, exc)
            elif decided:
                return bool(decided < 0)
        return (faulted(a), a.creation, a.name) < (faulted(b), b.creation, b.name)

    def task_order(self, tasks: Iterable[TaskInfo]) -> list[TaskInfo]:
        """The tasks sorted by TaskOrder; undecided, by `default_task_key`."""
        fns = self._tiers.functions(P.TASK_ORDER)
        if all(isinstance(fn, P.KeyedOrdering) for fn in fns):  # the same order, one key per task
            keys = [fn.key for fn in fns if isinstance(fn, P.KeyedOrdering)]
            return sorted(tasks, key=lambda t: (*(key(t) for key in keys), default_task_key(t)))

        def compare(a: TaskInfo, b: TaskInfo) -> int:
            decided = self._tiers.run(P.TASK_ORDER, a, b)
            if decided:
                return int(decided)
            return -1 if default_task_key(a) < default_task_key(b) else 1

        return sorted(tasks, key=functools.cmp_to_key(compare))


def _culprits(alone: Callable[[T], object], pair: tuple[T, T]) -> list[T]:
    """Which of a pair whose comparison raised raises when compared with itself; both if neither does alone."""
    found = [item for item in pair if attempt(alone, item)[1] is not None]
    return found or list(pair)


def default_task_key(task: TaskInfo) -> tuple[int, float, str]:
    """Tasks no plugin orders go by their index within their task (`volcano.sh/task-index`), so the tasks of a
    multi-task job interleave (worker-0, ps-0, worker-1, ps-1, ...) and every role gets its first pods before any
    role its extras; then by creation and name. Volcano's default task order (pkg/controllers/job/helpers/
    helpers.go, CompareTask) is the index, then creation, then the pod's random UID; the name makes ours
    repeatable. A pod without an index sorts with index 0's creation order, as there."""
    return (task.index if task.index >= 0 else 0, task.creation, task.name)
