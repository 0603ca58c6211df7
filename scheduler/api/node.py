"""Layer `api`: a node as the session sees it, with its resource accounting.

idle = allocatable - what tasks on it hold; releasing = held by tasks being deleted (free soon);
pipelined = promised to tasks that wait for releasing resources. future_idle = idle + releasing - pipelined.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from scheduler.api.job import TaskInfo
from scheduler.api.phases import OCCUPYING_STATUSES, TaskStatus
from scheduler.api.pod import Taint
from scheduler.api.resources import ZERO, Resource


@dataclass(slots=True, eq=False)
class NodeInfo:
    name: str
    allocatable: Resource
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    ready: bool = True
    idle: Resource = ZERO
    used: Resource = ZERO
    releasing: Resource = ZERO
    pipelined: Resource = ZERO
    tasks: dict[str, TaskInfo] = field(default_factory=dict)
    # Occupying tasks that request no cpu / no memory: kube-scheduler's scores count each as a default request
    # (`NonZeroRequested`), so nodeorder needs them without walking the node's tasks.
    no_cpu_request: int = 0
    no_memory_request: int = 0
    # Set by every change of its tasks: an incremental snapshot (adapter/incremental.py) rebuilds a node a
    # session changed before it hands the node to the next one.
    touched: bool = False
    # Given by the incremental snapshot that built the node: its name is appended when it is first touched, so
    # that the next build looks at those nodes alone (adapter/incremental.py). None: no one asks.
    journal: list[str] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.idle is ZERO and not self.tasks:
            self.idle = self.allocatable

    def _touch(self) -> None:
        if not self.touched:
            if self.journal is not None:
                self.journal.append(self.name)
            self.touched = True

    def future_idle(self) -> Resource:
        return self.idle + self.releasing - self.pipelined

    def add_task(self, task: TaskInfo) -> None:
        """Account for a task placed here (by the cluster, or by a Statement in this session)."""
        self._touch()
        self.tasks[task.key] = task
        if task.status == TaskStatus.PIPELINED:
            self.pipelined = self.pipelined + task.resreq
            return
        if task.status not in OCCUPYING_STATUSES:
            return
        self.idle = self.idle - task.resreq
        self.used = self.used + task.resreq
        self._count_unrequested(task, 1)
        if task.status == TaskStatus.RELEASING:
            self.releasing = self.releasing + task.resreq

    def add_tasks(self, tasks: Sequence[TaskInfo]) -> None:
        """`add_task` for each of `tasks`, which share one request and one status (the bulk placer's run): the
        accounting is done once, with the same result (integer sums)."""
        self._touch()
        first = tasks[0]
        if len(tasks) == 1 or first.status not in OCCUPYING_STATUSES or first.status == TaskStatus.RELEASING:
            for task in tasks:
                self.add_task(task)
            return
        for task in tasks:
            self.tasks[task.key] = task
        total = first.resreq.scale(len(tasks))
        self.idle = self.idle - total
        self.used = self.used + total
        if not first.resreq.cpu:
            self.no_cpu_request += len(tasks)
        if not first.resreq.memory:
            self.no_memory_request += len(tasks)

    def remove_task(self, task: TaskInfo) -> None:
        self._touch()
        if self.tasks.pop(task.key, None) is None:
            return
        if task.status == TaskStatus.PIPELINED:
            self.pipelined = self.pipelined - task.resreq
            return
        if task.status not in OCCUPYING_STATUSES:
            return
        self.idle = self.idle + task.resreq
        self.used = self.used - task.resreq
        self._count_unrequested(task, -1)
        if task.status == TaskStatus.RELEASING:
            self.releasing = self.releasing - task.resreq

    def _count_unrequested(self, task: TaskInfo, sign: int) -> None:
        if not task.resreq.cpu:
            self.no_cpu_request += sign
        if not task.resreq.memory:
            self.no_memory_request += sign

    def clone_empty(self) -> NodeInfo:
        """The same node with no tasks: the snapshot re-adds cloned tasks."""
        return NodeInfo(self.name, self.allocatable, self.labels, self.taints, self.unschedulable, self.ready)

    def __repr__(self) -> str:
        return f"Node({self.name} idle[{self.idle}])"
