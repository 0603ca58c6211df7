"""Layer `framework`: the Statement's back end — the only code that moves tasks on and off the session's nodes.

A Statement (`statement.py`) records its operations and calls these to carry them out or undo them: each keeps
the task's status, its node's infos and the node arrays in step, and tells the plugins' event handlers. A
commit turns allocations into one bind request per gang and evictions into eviction requests; the adapter sends
them (with the annotations plugins asked for) once the session closes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from scheduler.api.dra import ClaimWrite
from scheduler.api.job import JobInfo, TaskInfo
from scheduler.api.node import NodeInfo
from scheduler.api.phases import TaskStatus
from scheduler.api.snapshot import EvictCause, Eviction, GangBind, VolumeBind
from scheduler.framework.arrays import NodeArrays
from scheduler.framework.tiers import TierRunner


class StatementBackEnd:
    def __init__(self, jobs: dict[str, JobInfo], nodes: dict[str, NodeInfo], arrays: NodeArrays,
                 tiers: TierRunner) -> None:
        self._jobs = jobs
        self._nodes = nodes
        self._arrays = arrays
        self._tiers = tiers
        self._binds: dict[str, list[tuple[str, str]]] = {}
        self._evictions: list[Eviction] = []
        self._annotations: dict[str, dict[str, str]] = {}
        self._volumes: dict[str, dict[VolumeBind, None]] = {}
        self._device_claims: dict[str, list[ClaimWrite]] = {}
        self.bind_count = 0  # binds committed so far this cycle (allocate's `maxBindsPerCycle`)

    # ---- placements (undone in reverse by a discard) -------------------------------------------------
    def place(self, task: TaskInfo, node: NodeInfo, status: TaskStatus) -> None:
        job = self._jobs[task.job]
        job.set_status(task, status)
        task.node_name = node.name
        node.add_task(task)
        self._arrays.update(node)
        self._tiers.allocated(task)

    def begin_place(self, task: TaskInfo, node: NodeInfo, status: TaskStatus) -> None:
        """The first half of `place`, for the bulk placer: the task's status and node only. `end_place` for the
        tasks of one node does the rest once (the node's accounting, its arrays, the event handlers)."""
        self._jobs[task.job].set_status(task, status)
        task.node_name = node.name

    def end_place(self, tasks: Sequence[TaskInfo], node: NodeInfo) -> None:
        node.add_tasks(tasks)
        self._arrays.update(node)
        self._tiers.allocated_many(tasks)

    def unplace(self, task: TaskInfo) -> None:
        node = self._nodes.get(task.node_name)
        if node is not None:
            node.remove_task(task)
            self._arrays.update(node)
        self._jobs[task.job].set_status(task, TaskStatus.PENDING)
        task.node_name = ""
        self._tiers.deallocated(task)

    def mark_releasing(self, task: TaskInfo) -> None:
        node = self._nodes[task.node_name]
        node.remove_task(task)
        self._jobs[task.job].set_status(task, TaskStatus.RELEASING)
        node.add_task(task)
        self._arrays.update(node)
        self._tiers.deallocated(task)

    def unmark_releasing(self, task: TaskInfo, previous: TaskStatus) -> None:
        node = self._nodes[task.node_name]
        node.remove_task(task)
        self._jobs[task.job].set_status(task, previous)
        node.add_task(task)
        self._arrays.update(node)
        self._tiers.allocated(task)

    # ---- requests (made by a commit) ---------------------------------------------------------------
    def record_bind(self, task: TaskInfo, node: str) -> None:
        self._binds.setdefault(task.job, []).append((task.key, node))
        self.bind_count += 1

    def record_eviction(self, task: TaskInfo, reason: str, cause: EvictCause | None = None) -> None:
        self._evictions.append(Eviction(task.job, task.key, task.node_name, reason, cause))

    def annotate(self, task_uid: str, annotations: dict[str, str]) -> None:
        """Annotations the adapter writes on the pod before it binds it."""
        self._annotations.setdefault(task_uid, {}).update(annotations)

    def bind_volumes(self, job_uid: str, volumes: Iterable[VolumeBind]) -> None:
        """Claims to bind before the job's pods (asked for at close, for what a commit bound)."""
        self._volumes.setdefault(job_uid, {}).update(dict.fromkeys(volumes))

    def bind_device_claims(self, job_uid: str, writes: Iterable[ClaimWrite]) -> None:
        """DRA claims to write (allocation, reservedFor) before the job's pods (asked for at close)."""
        self._device_claims.setdefault(job_uid, []).extend(writes)

    def got_binds(self, job_uid: str) -> bool:
        """Whether a commit this cycle bound any of the job's tasks."""
        return job_uid in self._binds

    def committed_binds(self) -> list[tuple[str, str]]:
        """(task uid, node) of every bind committed so far this cycle."""
        return [bind for binds in self._binds.values() for bind in binds]

    def gang_binds(self) -> list[GangBind]:
        """The committed binds, one request per gang, with the claims to bind first."""
        return [GangBind(job, tuple(binds), tuple(self._volumes.get(job, ())), tuple(self._device_claims.get(job, ())))
                for job, binds in self._binds.items()]

    def evictions(self) -> list[Eviction]:
        return list(self._evictions)

    def annotations(self) -> dict[str, dict[str, str]]:
        """Task uid -> the annotations plugins asked for on its pod."""
        return self._annotations
