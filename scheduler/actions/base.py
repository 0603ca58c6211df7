"""Layer `actions`: shared pieces of the actions: the action protocol and fair round-robin over queues."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator
from typing import Protocol

from scheduler.api.job import JobInfo
from scheduler.api.queue import QueueInfo
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


class OrderedHeap:
    def __init__(self, less: Callable[[object, object], bool], items: Iterable[object] = ()) -> None:
        self._less = less
        self._heap = [_Ordered(i, less) for i in items]
        heapq.heapify(self._heap)

    def push(self, item: object) -> None:
        heapq.heappush(self._heap, _Ordered(item, self._less))

    def pop(self) -> object:
        return heapq.heappop(self._heap).item

    def __len__(self) -> int:
        return len(self._heap)


def round_robin(
    ssn: Session, jobs_by_queue: dict[str, list[JobInfo]], *, skip_queue: Callable[[QueueInfo], bool] | None = None
) -> Iterator[tuple[QueueInfo, JobInfo, Callable[[JobInfo], None]]]:
    """Yield (queue, job, requeue) in Volcano's order: best queue first, its best job, then re-rank.

    Queue order is re-evaluated after every job, since a queue's share changes as it is given resources.
    `requeue(job)` puts a job back into its queue (an elastic job that wants more after becoming ready).
    """
    job_heaps: dict[str, OrderedHeap] = {
        name: OrderedHeap(ssn.order.job_less, jobs)  # type: ignore[arg-type]
        for name, jobs in jobs_by_queue.items()
        if jobs and name in ssn.queues
    }
    queues = OrderedHeap(ssn.order.queue_less, (ssn.queues[name] for name in job_heaps))  # type: ignore[arg-type]
    while len(queues):
        queue: QueueInfo = queues.pop()  # type: ignore[assignment]
        if skip_queue is not None and skip_queue(queue):
            continue
        heap = job_heaps[queue.name]
        if not len(heap):
            continue
        job: JobInfo = heap.pop()  # type: ignore[assignment]
        yield queue, job, heap.push
        if len(heap):
            queues.push(queue)
