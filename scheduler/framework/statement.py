"""Layer `framework`: a Statement records allocate / pipeline / evict and commits or discards all of them.

Actions change the session only through a Statement (`Session.statement()`), which carries out its operations
through the session's back end (`backend.py`). `discard()` undoes every operation in reverse, so a gang that does
not become ready leaves no trace; `commit()` turns allocations into one bind request for the gang and evictions
into eviction requests. Pipelined placements are reservations inside the session only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from scheduler.api.phases import TaskStatus
from scheduler.framework.faults import for_each

if TYPE_CHECKING:
    from scheduler.api.job import TaskInfo
    from scheduler.api.node import NodeInfo
    from scheduler.api.snapshot import EvictCause
    from scheduler.framework.backend import StatementBackEnd


@dataclass(slots=True)  # not frozen: one is made per placed task, and a frozen one costs five times as much to make
class Operation:
    kind: str  # allocate | pipeline | evict
    task: TaskInfo
    node: str
    previous: TaskStatus
    reason: str = ""
    cause: EvictCause | None = None


class Statement:
    def __init__(self, back_end: StatementBackEnd) -> None:
        self._back_end = back_end
        self.operations: list[Operation] = []

    def allocate(self, task: TaskInfo, node: NodeInfo) -> None:
        self.operations.append(Operation("allocate", task, node.name, task.status))
        self._back_end.place(task, node, TaskStatus.ALLOCATED)

    def allocate_begin(self, task: TaskInfo, node: NodeInfo) -> None:
        """`allocate`, for the bulk placer, in two halves: this records the operation and sets the task's status;
        `allocate_end` settles the tasks of one node at once (their node, its arrays, the event handlers). Between
        the two only JobReady is asked (`actions/bulk.py`)."""
        self.operations.append(Operation("allocate", task, node.name, task.status))
        self._back_end.begin_place(task, node, TaskStatus.ALLOCATED)

    def allocate_end(self, tasks: Sequence[TaskInfo], node: NodeInfo) -> None:
        self._back_end.end_place(tasks, node)

    def pipeline(self, task: TaskInfo, node: NodeInfo) -> None:
        self.operations.append(Operation("pipeline", task, node.name, task.status))
        self._back_end.place(task, node, TaskStatus.PIPELINED)

    def evict(self, task: TaskInfo, reason: str, cause: EvictCause | None = None) -> None:
        self.operations.append(Operation("evict", task, task.node_name, task.status, reason, cause))
        self._back_end.mark_releasing(task)

    def mark(self) -> int:
        """A point to `rollback` to: what was done so far stays, what is done after it can be undone alone."""
        return len(self.operations)

    def discard(self) -> None:
        """Undo every operation, in reverse. An undo that raises (a plugin's event handler failing on the job
        being undone) does not stop the others: the nodes' accounting is undone first in each, and the first
        error is raised once all are undone."""
        self.rollback(0)

    def rollback(self, mark: int) -> None:
        """Undo the operations made since `mark`, in reverse, as `discard` undoes them all."""
        undone, self.operations = self.operations[mark:], self.operations[:mark]
        for_each(self._undo, reversed(undone))

    def _undo(self, op: Operation) -> None:
        if op.kind == "evict":
            self._back_end.unmark_releasing(op.task, op.previous)
        else:
            self._back_end.unplace(op.task)

    def commit(self) -> None:
        for op in self.operations:
            if op.kind == "allocate":
                self._back_end.record_bind(op.task, op.node)
            elif op.kind == "evict":
                self._back_end.record_eviction(op.task, op.reason, op.cause)
        self.operations.clear()

    def __len__(self) -> int:
        return len(self.operations)
