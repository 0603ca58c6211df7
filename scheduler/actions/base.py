"""Layer `actions`: shared pieces of the actions: the action protocol and fair round-robin over queues."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator
from typing import Protocol

from scheduler.api.decision import Code, Status
from scheduler.api.job import JobInfo
from scheduler.api.queue import QueueInfo
from scheduler.api.reasons import QueueMissing
from scheduler.framework.faults import attempt
from scheduler.framework.session import Session


class Action(Protocol):
    name: str

    def execute(self, ssn: Session) -> None: ...


class _Ordered:
    """Heap entry ordered by a session `less` function evaluated when pushed and compared."""

    __slots__ = ("item", "less")

    def __init__(self, item: object, less: Callable[[object, object], bool]) -> None:
        self.item = item
        self.less = less

    def __lt__(self, other: _Ordered) -> bool:
        return self.less(self.item, other.item)


class _Keyed:
    """Heap entry ordered by a key taken when pushed."""

    __slots__ = ("item", "key")

    def __init__(self, item: object, key: tuple[object, ...]) -> None:
        self.item = item
        self.key = key

    def __lt__(self, other: _Keyed) -> bool:
        return self.key < other.key


class OrderedHeap:
    """A heap by a session `less`, or by `key` (taken when an item is pushed) where it gives the same order and
    an item does not change while it is in the heap."""

    def __init__(self, less: Callable[[object, object], bool], items: Iterable[object] = (),
                 key: Callable[[object], tuple[object, ...]] | None = None) -> None:
        self._less = less
        self._key = key
        self._heap: list[_Ordered | _Keyed] = (
            [_Ordered(i, less) for i in items] if key is None else [_Keyed(i, key(i)) for i in items]
        )
        heapq.heapify(self._heap)

    def push(self, item: object) -> None:
        if self._key is None:
            heapq.heappush(self._heap, _Ordered(item, self._less))
        else:
            heapq.heappush(self._heap, _Keyed(item, self._key(item)))

    def pop(self) -> object:
        return heapq.heappop(self._heap).item

    def __len__(self) -> int:
        return len(self._heap)


def queue_missing(ssn: Session, job: JobInfo, action: str) -> Status:
    """Why `job` waits when its queue is not in the session: the queue's fields that could not be read, if it
    exists but was left out; else that it does not exist."""
    unreadable = ssn.unreadable_queues.get(job.queue)
    reasons = unreadable if unreadable else (QueueMissing(job.queue),)
    return Status(Code.UNRESOLVABLE, tuple(reasons), action)


def guarded(ssn: Session, jobs: Iterable[JobInfo], keep: Callable[[JobInfo], bool]) -> list[JobInfo]:
    """The jobs `keep` accepts, each asked under the job's guard: a job it raises for is faulted and left out."""
    kept = []
    for job in jobs:
        if ssn.faulted(job):
            continue
        with ssn.guard(job):
            if keep(job):
                kept.append(job)
    return kept


def round_robin(
    ssn: Session, jobs_by_queue: dict[str, list[JobInfo]], *, skip_queue: Callable[[QueueInfo], bool] | None = None,
    jobs_change_only_when_out: bool = False,
) -> Iterator[tuple[QueueInfo, JobInfo, Callable[[JobInfo], None]]]:
    """Yield (queue, job, requeue) in Volcano's order: best queue first, its best job, then re-rank. Faulted jobs
    and queues are skipped (`framework/faults.py`); the caller runs each turn under `ssn.guard(job)`.

    Queue order is re-evaluated after every job, since a queue's share changes as it is given resources.
    `requeue(job)` puts a job back into its queue (an elastic job that wants more after becoming ready).
    `jobs_change_only_when_out`: the caller changes a job only between its turn and its requeue (allocate does;
    preempt and reclaim evict other jobs' tasks), so JobOrder's keys (`Orderings.job_key`), where every function
    has one, are taken once per push instead of comparing the jobs through the plugins at every step.
    """
    key = ssn.order.job_key() if jobs_change_only_when_out else None
    job_heaps: dict[str, OrderedHeap] = {
        name: OrderedHeap(ssn.order.job_less, jobs, key)  # type: ignore[arg-type]
        for name, jobs in jobs_by_queue.items()
        if jobs and name in ssn.queues
    }
    queues = OrderedHeap(ssn.order.queue_less, (ssn.queues[name] for name in job_heaps))  # type: ignore[arg-type]
    while len(queues):
        queue: QueueInfo = queues.pop()  # type: ignore[assignment]
        if ssn.faults.queue_faulted(queue):
            continue
        if skip_queue is not None:
            skipped, exc = attempt(skip_queue, queue)
            if exc is not None:  # the queue alone is left out (framework/faults.py)
                ssn.faults.queue(queue, exc)
                continue
            if skipped:
                continue
        heap = job_heaps[queue.name]
        if not len(heap):
            continue
        job: JobInfo = heap.pop()  # type: ignore[assignment]
        if not ssn.faulted(job):  # a job that failed earlier in the cycle has no more turns
            yield queue, job, heap.push
        if len(heap):
            queues.push(queue)
