"""Layer `framework`: a scheduling session opened on a snapshot.

The session owns the snapshot's infos for one cycle. Plugins register functions at extension points
(`framework/points.py`); actions ask the session through `run(point, ...)` and change it only through a
Statement. At close, plugins write what they learned (conditions) and the session returns a `CycleResult`.
"""

from __future__ import annotations

import functools
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np

from scheduler.api.decision import Status
from scheduler.api.job import Condition, JobInfo, TaskInfo
from scheduler.api.messages import message
from scheduler.api.node import NodeInfo
from scheduler.api.pod import Constraints
from scheduler.api.queue import QueueInfo
from scheduler.api.reasons import FilterCount, NodeFilter, NodesUnavailable
from scheduler.api.resources import ZERO, Resource
from scheduler.api.snapshot import (
    ClusterSnapshot,
    CycleResult,
    Event,
    Eviction,
    GangBind,
    PodGroupStatus,
    QueueStatus,
)
from scheduler.api.status import PodGroupPhase, TaskStatus
from scheduler.framework import points as P
from scheduler.framework.arrays import IntArray, NodeArrays
from scheduler.framework.conf import SchedulerConf
from scheduler.framework.memo import CycleMemo
from scheduler.framework.plugin import EventHandler, Plugin

log = logging.getLogger("volcano_py.session")
F = TypeVar("F")
R = TypeVar("R")


@dataclass(slots=True)
class FitErrors:
    """Why the tasks of one job did not fit: node counts per filter, for the gang's reasons."""

    reasons: Counter[NodeFilter] = field(default_factory=Counter)
    nodes_tried: int = 0
    task: str = ""

    def unavailable(self, total_nodes: int) -> NodesUnavailable | None:
        """kube-scheduler's `0/N nodes are unavailable` as a reason (None when no node was turned away)."""
        if not self.reasons:
            return None
        counts = tuple(FilterCount(f, n) for f, n in sorted(self.reasons.items(), key=lambda kv: (-kv[1], kv[0].filter,
                                                                                               kv[0].detail)))
        return NodesUnavailable(total_nodes, counts)


def node_filter(status: Status) -> NodeFilter:
    """The node filter a predicate's rejection names (its first reason)."""
    first = status.reasons[0] if status.reasons else None
    return first if isinstance(first, NodeFilter) else NodeFilter(status.plugin or "predicate")


@dataclass(slots=True)
class _Scores:
    """Batch scores of one task shape over its feasible nodes (-inf where the task does not fit now), in step
    with `NodeArrays.changes` up to `synced`."""

    values: np.ndarray
    synced: int


@dataclass(slots=True)
class _Feasible:
    nodes: list[NodeInfo]
    indices: IntArray
    rejected: Counter[NodeFilter]
    slot: IntArray  # node position -> its place in `indices`, or -1


class Session:
    def __init__(
        self,
        snapshot: ClusterSnapshot,
        conf: SchedulerConf,
        plugin_types: dict[str, type[Plugin[object]]],
        *,
        trace: Callable[[str], None] | None = None,
        memo: CycleMemo | None = None,
    ) -> None:
        self.nodes: dict[str, NodeInfo] = snapshot.nodes
        self.node_list: list[NodeInfo] = sorted(snapshot.nodes.values(), key=lambda n: n.name)
        self.arrays = NodeArrays(self.node_list)
        self.jobs: dict[str, JobInfo] = snapshot.jobs
        self.queues: dict[str, QueueInfo] = snapshot.queues
        self.now = snapshot.now
        self.hypernodes = snapshot.hypernodes
        self.conf = conf
        self.trace = trace
        self._fns: dict[str, list[list[object]]] = {p.name: [] for p in P.ALL_POINTS}
        self._handlers: list[EventHandler] = []
        self._enqueued: list[Callable[[JobInfo], None]] = []
        self.memo = memo
        self._feasible: dict[Constraints, _Feasible] = (
            memo.begin(self.node_list, conf, self.arrays.idle) if memo is not None else {}
        )
        for remembered in self._feasible.values():  # same nodes as last cycle, but this snapshot's objects
            remembered.nodes = [self.node_list[i] for i in remembered.indices]
        self._scores: dict[tuple[Constraints, Resource], _Scores] = {}
        self._scalars: list[Callable[..., float]] | None = None  # set once plugins registered: _scalar_scorers
        self._binds: dict[str, list[tuple[str, str]]] = {}
        self._evictions: list[Eviction] = []
        self._annotations: dict[str, dict[str, str]] = {}
        self._events: list[Event] = []
        self._conditions: dict[str, Condition] = {}
        self._extra_conditions: dict[str, list[Condition]] = {}  # job uid -> conditions of other types (Timeout)
        self._overrides: dict[str, int] = {}  # job uid -> minMember the scheduler now uses (status only)
        self.fit_errors: dict[str, FitErrors] = {}
        self.gate_status: dict[str, Status] = {}  # job uid -> why a gate (enqueue, a queue, a placer) held it
        self._published: dict[str, Status] = {}  # job uid -> the Status behind its Unschedulable condition
        self._original = {uid: (job.phase, job.conditions) for uid, job in self.jobs.items()}
        self.plugins: list[tuple[int, Plugin[object]]] = []
        self.timings: dict[str, float] = {}
        self.counters: dict[str, int] = {}  # for metrics, as CycleResult.counters
        self.queue_shares: dict[str, tuple[Resource, float, bool]] = {}  # queue -> deserved, share, overused
        for tier_index, tier in enumerate(conf.tiers):
            for option in tier.plugins:
                factory = plugin_types.get(option.name)
                if factory is not None:
                    self.plugins.append((tier_index, factory(option)))
        self._open()

    # ---- registration -------------------------------------------------------------------------------
    def _open(self) -> None:
        for tier_index, plugin in self.plugins:
            self._current = (tier_index, plugin.option)
            started = time.perf_counter()
            plugin.on_session_open(self)
            self.timings[f"plugin:{plugin.name}:OnSessionOpen"] = time.perf_counter() - started
        if self.plugins:  # a conf naming only plugins volcano-py skips opens a session without any
            del self._current
        self._scalars = self._scalar_scorers()

    def register(self, point: P.Point[F, R], fn: F) -> None:
        """Called by a plugin in `on_session_open`; honours the plugin's enableXxx switch for the point, and has
        the plugin's Statuses name it."""
        tier_index, option = self._current
        if point.switch is not None and not option.enabled(point.switch):
            return
        if point.stamp is not None:
            fn = point.stamp(fn, option.name)
        tiers = self._fns[point.name]
        while len(tiers) <= tier_index:
            tiers.append([])
        tiers[tier_index].append(fn)

    def add_event_handler(self, handler: EventHandler) -> None:
        self._handlers.append(handler)

    def on_job_enqueued(self, fn: Callable[[JobInfo], None]) -> None:
        self._enqueued.append(fn)

    def job_enqueued(self, job: JobInfo) -> None:
        for fn in self._enqueued:
            fn(job)

    def run(self, point: P.Point[F, R], *args: object) -> R:
        return point.combine(self._fns[point.name], *args)

    def has(self, point: P.Point[F, R]) -> bool:
        return any(self._fns[point.name])

    # ---- orderings ----------------------------------------------------------------------------------
    def job_less(self, a: JobInfo, b: JobInfo) -> bool:
        decided = self.run(P.JOB_ORDER, a, b)
        if decided:
            return bool(decided < 0)
        return (a.creation, a.uid) < (b.creation, b.uid)

    def queue_less(self, a: QueueInfo, b: QueueInfo) -> bool:
        decided = self.run(P.QUEUE_ORDER, a, b)
        if decided:
            return bool(decided < 0)
        return (a.creation, a.name) < (b.creation, b.name)

    def task_order(self, tasks: Iterable[TaskInfo]) -> list[TaskInfo]:
        def compare(a: TaskInfo, b: TaskInfo) -> int:
            decided = self.run(P.TASK_ORDER, a, b)
            if decided:
                return int(decided)
            return -1 if default_task_key(a) < default_task_key(b) else 1

        return sorted(tasks, key=functools.cmp_to_key(compare))

    # ---- placement helpers --------------------------------------------------------------------------
    def feasible_nodes(self, task: TaskInfo) -> list[NodeInfo]:
        """Nodes whose predicates pass for this task's constraints, computed once per constraint set (and, for a
        task with inter-pod or spread terms, filtered by the dynamic predicates as the cluster is now)."""
        nodes = self._feasible_for(task).nodes
        if task.constraints.dynamic:
            return self._dynamic_filter(task, nodes)[0]
        return nodes

    def static_feasible_nodes(self, task: TaskInfo) -> list[NodeInfo]:
        """Nodes the cached (constraint-only) predicates allow, without the dynamic ones."""
        return self._feasible_for(task).nodes

    def _dynamic_filter(self, task: TaskInfo, nodes: list[NodeInfo]) -> tuple[list[NodeInfo], Counter[NodeFilter]]:
        if not nodes or not self.has(P.DYNAMIC_PREDICATE):
            return nodes, Counter()
        statuses = self.run(P.DYNAMIC_PREDICATE, task, nodes)
        rejected: Counter[NodeFilter] = Counter(node_filter(s) for s in statuses if not s.ok)
        if self.trace:
            for node, status in zip(nodes, statuses, strict=True):
                if not status.ok:
                    self.trace(f"task {task.name} (role {task.role or '-'}) rejected by node {node.name}: "
                               f"{message(status)}")
        return [n for n, s in zip(nodes, statuses, strict=True) if s.ok], rejected

    def _feasible_for(self, task: TaskInfo) -> _Feasible:
        cached = self._feasible.get(task.constraints)
        if cached is None:
            nodes: list[NodeInfo] = []
            indices: list[int] = []
            rejected: Counter[NodeFilter] = Counter()
            for i, node in enumerate(self.node_list):
                status = self.run(P.PREDICATE, task, node)
                if not status.ok:
                    rejected[node_filter(status)] += 1
                    if self.trace:
                        self.trace(f"task {task.name} (role {task.role or '-'}) rejected by node {node.name}: "
                                   f"{message(status)}")
                else:
                    nodes.append(node)
                    indices.append(i)
            slot = np.full(len(self.node_list), -1, dtype=np.int64)
            slot[indices] = np.arange(len(indices))
            cached = _Feasible(nodes, np.array(indices, dtype=np.int64), rejected, slot)
            self._feasible[task.constraints] = cached
        return cached

    def feasible_indices(self, task: TaskInfo) -> IntArray:
        """Positions (in node_list) of the nodes the task's predicates allow."""
        return self._feasible_for(task).indices

    def fitting_indices(self, task: TaskInfo) -> IntArray:
        """Indices (into node_list) of feasible nodes whose idle resources hold the task now."""
        fitting = self.arrays.fitting(task.resreq, self._feasible_for(task).indices)
        if task.constraints.dynamic and fitting.size:
            kept = self._dynamic_filter(task, [self.node_list[i] for i in fitting])[0]
            return np.fromiter((self.arrays.position[n.name] for n in kept), dtype=np.int64, count=len(kept))
        return fitting

    def is_feasible(self, task: TaskInfo, node: NodeInfo) -> bool:
        """Whether the task's predicates allow the node (O(1) after the constraint set's first look)."""
        position = self.arrays.position.get(node.name)
        return position is not None and bool(self._feasible_for(task).slot[position] >= 0)

    def static_rejections(self, task: TaskInfo) -> Counter[NodeFilter]:
        rejected = self._feasible_for(task).rejected
        if task.constraints.dynamic:
            return rejected + self._dynamic_filter(task, self._feasible_for(task).nodes)[1]
        return rejected

    def node_score(self, task: TaskInfo, node: NodeInfo) -> float:
        return float(self.run(P.NODE_ORDER, task, node))

    def pick_node(self, task: TaskInfo, indices: IntArray) -> NodeInfo | None:
        """The best-scoring candidate (batch scorers, then any per-node scorer); ties go to node name order."""
        if indices.size == 0:
            return None
        batch, per_node = self.has(P.BATCH_NODE_ORDER), self.has(P.NODE_ORDER)
        dynamic = task.constraints.dynamic and self.has(P.DYNAMIC_NODE_ORDER)
        if not (batch or per_node or dynamic):
            return self.node_list[int(indices[0])]
        scores = np.zeros(indices.size)
        if batch:
            scores = scores + self.run(P.BATCH_NODE_ORDER, task, self.arrays, indices)
        if per_node:
            scores = scores + np.fromiter((self.node_score(task, self.node_list[i]) for i in indices), float)
        if dynamic:
            scores = scores + np.asarray(
                self.run(P.DYNAMIC_NODE_ORDER, task, [self.node_list[i] for i in indices]), dtype=float
            )
        best = int(np.argmax(scores))
        if scores[best] == -np.inf:  # a batch scorer vetoed every candidate
            return None
        return self.node_list[int(indices[best])]

    def place_best(self, task: TaskInfo) -> NodeInfo | None:
        """The best node whose idle holds the task, or None.

        Batch scores depend only on the task's request and constraints and on the nodes' arrays, so they are
        cached per task shape, masked where the task does not fit, and brought up to date from the log of
        nodes that changed since (mostly the one node the gang's previous task went to). Per-node scorers,
        if any plugin registers one, are not cached.
        """
        if self.has(P.NODE_ORDER) or task.constraints.dynamic:
            return self.pick_node(task, self.fitting_indices(task))
        feasible = self._feasible_for(task)
        if feasible.indices.size == 0:
            return None
        key = (task.constraints, task.resreq)
        cached = self._scores.get(key)
        changes = self.arrays.changes
        if cached is None:
            cached = _Scores(self._masked_scores(task, feasible.indices), len(changes))
            self._scores[key] = cached
        elif cached.synced < len(changes):
            fresh = changes[cached.synced :]
            cached.synced = len(changes)
            if len(fresh) == 1 or len(set(fresh)) == 1:  # the usual case: the gang's previous task's node
                slot = int(feasible.slot[fresh[0]])
                if slot >= 0:
                    cached.values[slot] = self._masked_score(task, fresh[0])
            else:
                slots = feasible.slot[list(set(fresh))]
                slots = slots[slots >= 0]
                if slots.size:
                    cached.values[slots] = self._masked_scores(task, feasible.indices[slots])
        best = int(np.argmax(cached.values))
        if cached.values[best] == -np.inf:
            return None
        return self.node_list[int(feasible.indices[best])]

    def _masked_scores(self, task: TaskInfo, indices: IntArray) -> np.ndarray:
        if indices.size <= 8:  # a handful of nodes: plain Python beats numpy's per-call cost
            fits = np.array([task.resreq <= self.node_list[i].idle for i in indices], dtype=bool)
        else:
            mask = self.arrays.fit_mask(task.resreq, indices)
            fits = np.ones(indices.size, dtype=bool) if mask is None else mask
        if not fits.any():
            return np.full(indices.size, -np.inf)
        if not self.has(P.BATCH_NODE_ORDER):  # no scorer: the first fitting node in name order wins
            return np.where(fits, 0.0, -np.inf)
        scores = np.asarray(self.run(P.BATCH_NODE_ORDER, task, self.arrays, indices), dtype=float)
        return np.where(fits, scores, -np.inf)

    def _masked_score(self, task: TaskInfo, position: int) -> float:
        """`_masked_scores` for one node, in plain Python when every batch scorer has a scalar form."""
        scalar = self._scalars
        if scalar is None:
            return float(self._masked_scores(task, np.array([position], dtype=np.int64))[0])
        node = self.node_list[position]
        if not task.resreq <= node.idle:
            return -np.inf
        if not scalar:  # no scorer: the first fitting node in name order wins
            return 0.0
        total = 0.0
        for one in scalar:
            total += one(task, node)
        return total

    def _scalar_scorers(self) -> list[Callable[..., float]] | None:
        """The scalar forms of the batch scorers in tier order, or None if one of them has none."""
        fns = [fn for tier in self._fns[P.BATCH_NODE_ORDER.name] for fn in tier]
        scorers = [fn for fn in fns if isinstance(fn, P.BatchScorer)]
        return [fn.one for fn in scorers] if len(scorers) == len(fns) else None

    def best_node(self, task: TaskInfo, nodes: Sequence[NodeInfo]) -> NodeInfo | None:
        indices = np.fromiter((self.arrays.position[n.name] for n in nodes), dtype=np.int64, count=len(nodes))
        return self.pick_node(task, indices)

    def record_fit_error(self, task: TaskInfo, reason: NodeFilter, count: int = 1) -> None:
        errors = self.fit_errors.setdefault(task.job, FitErrors())
        errors.reasons[reason] += count
        errors.task = errors.task or task.name

    # ---- Statement back end -------------------------------------------------------------------------
    def place(self, task: TaskInfo, node: NodeInfo, status: TaskStatus) -> None:
        job = self.jobs[task.job]
        job.set_status(task, status)
        task.node_name = node.name
        node.add_task(task)
        self.arrays.update(node)
        for handler in self._handlers:
            if handler.allocate:
                handler.allocate(task)

    def unplace(self, task: TaskInfo) -> None:
        node = self.nodes.get(task.node_name)
        if node is not None:
            node.remove_task(task)
            self.arrays.update(node)
        self.jobs[task.job].set_status(task, TaskStatus.PENDING)
        task.node_name = ""
        for handler in self._handlers:
            if handler.deallocate:
                handler.deallocate(task)

    def mark_releasing(self, task: TaskInfo) -> None:
        node = self.nodes[task.node_name]
        node.remove_task(task)
        self.jobs[task.job].set_status(task, TaskStatus.RELEASING)
        node.add_task(task)
        self.arrays.update(node)
        for handler in self._handlers:
            if handler.deallocate:
                handler.deallocate(task)

    def unmark_releasing(self, task: TaskInfo, previous: TaskStatus) -> None:
        node = self.nodes[task.node_name]
        node.remove_task(task)
        self.jobs[task.job].set_status(task, previous)
        node.add_task(task)
        self.arrays.update(node)
        for handler in self._handlers:
            if handler.allocate:
                handler.allocate(task)

    def record_bind(self, task: TaskInfo, node: str) -> None:
        self._binds.setdefault(task.job, []).append((task.uid, node))

    def committed_binds(self) -> list[tuple[str, str]]:
        """(task uid, node) of every bind committed so far this cycle."""
        return [bind for binds in self._binds.values() for bind in binds]

    def annotate(self, task_uid: str, annotations: dict[str, str]) -> None:
        """Annotations the adapter writes on the pod before it binds it."""
        self._annotations.setdefault(task_uid, {}).update(annotations)

    def got_binds(self, job_uid: str) -> bool:
        return job_uid in self._binds

    def record_eviction(self, task: TaskInfo, reason: str) -> None:
        self._evictions.append(Eviction(task.job, task.uid, task.node_name, reason))

    # ---- what plugins write at close ----------------------------------------------------------------
    def set_condition(self, job: JobInfo, condition: Condition, status: Status | None = None) -> None:
        """The job's Scheduled/Unschedulable condition; `status` is what an Unschedulable one was rendered from,
        published beside it for tools (`api/decision.py`)."""
        self._conditions[job.uid] = condition
        if status is not None:
            self._published[job.uid] = status
        else:
            self._published.pop(job.uid, None)

    def hold(self, job: JobInfo, status: Status, *, first: bool = False) -> None:
        """Remember why a gate held the job this cycle, for its condition (`first`: keep an earlier one)."""
        if first and job.uid in self.gate_status:
            return
        self.gate_status[job.uid] = status

    def add_condition(self, job: JobInfo, condition: Condition) -> None:
        """A condition beside the Scheduled/Unschedulable one (e.g. `Timeout`); one per type."""
        kept = [c for c in self._extra_conditions.get(job.uid, []) if c.type != condition.type]
        self._extra_conditions[job.uid] = [*kept, condition]

    def override_min_member(self, job: JobInfo, min_member: int) -> None:
        """Schedule `job` with a smaller minMember from now on (written to status.minMemberOverride)."""
        job.min_available = min_member
        self._overrides[job.uid] = min_member

    def event(self, kind: str, key: str, type_: str, reason: str, message: str) -> None:
        self._events.append(Event(kind, key, type_, reason, message))

    def set_phase(self, job: JobInfo, phase: PodGroupPhase) -> None:
        job.phase = phase

    # ---- close --------------------------------------------------------------------------------------
    def close(self) -> CycleResult:
        if self.memo is not None:
            self.memo.end(self.jobs, self.arrays.idle)
        for _, plugin in self.plugins:
            started = time.perf_counter()
            plugin.on_session_close(self)
            self.timings[f"plugin:{plugin.name}:OnSessionClose"] = time.perf_counter() - started
        result = CycleResult(
            binds=[GangBind(job, tuple(binds)) for job, binds in self._binds.items()],
            evictions=list(self._evictions),
            events=list(self._events),
            timings=self.timings,
            counters=self.counters,
            annotations=self._annotations,
        )
        for job in self.jobs.values():
            status = self._podgroup_status(job)
            before_phase, before_conditions = self._original.get(job.uid, (None, ()))
            if status.phase != before_phase or status.conditions != before_conditions or _counts_changed(job):
                result.podgroups.append(status)
        allocated = self.allocated_by_queue()
        for queue in self.queues.values():
            result.queues.append(
                QueueStatus(queue.name, allocated.get(queue.name, ZERO), *self.queue_shares.get(queue.name, ()))
            )
        return result

    def _podgroup_status(self, job: JobInfo) -> PodGroupStatus:
        condition = self._conditions.get(job.uid)
        conditions = _merge_condition(job.conditions, condition) if condition else job.conditions
        for extra in self._extra_conditions.get(job.uid, ()):
            conditions = _merge_condition(conditions, extra)
        running = job.count(TaskStatus.RUNNING)
        unschedulable_now = condition is not None and condition.type == "Unschedulable"
        phase = podgroup_phase(job, running, unschedulable_now)
        job.phase = phase
        return PodGroupStatus(
            job.uid,
            phase,
            conditions,
            running,
            job.count(TaskStatus.SUCCEEDED),
            job.count(TaskStatus.FAILED),
            self._overrides.get(job.uid, job.extra.get("minMemberOverride")),
            decision=self._published.get(job.uid) if unschedulable_now else None,
        )

    def allocated_by_queue(self) -> dict[str, Resource]:
        """What each queue's jobs hold, in one pass over the jobs (not one pass per queue)."""
        totals: dict[str, Resource] = {}
        for job in self.jobs.values():
            held = job.allocated()
            if not held.is_zero():
                totals[job.queue] = totals.get(job.queue, ZERO) + held
        return totals


def _counts_changed(job: JobInfo) -> bool:
    now = (job.count(TaskStatus.RUNNING), job.count(TaskStatus.SUCCEEDED), job.count(TaskStatus.FAILED))
    return now != job.reported_counts


def _merge_condition(existing: tuple[Condition, ...], new: Condition) -> tuple[Condition, ...]:
    """One condition per type; the newest replaces the old; Scheduled and Unschedulable exclude each other."""
    opposite = {"Scheduled": "Unschedulable", "Unschedulable": "Scheduled"}.get(new.type)
    kept = tuple(c for c in existing if c.type not in (new.type, opposite))
    return (*kept, new)


def podgroup_phase(job: JobInfo, running: int, unschedulable_now: bool) -> PodGroupPhase:
    """The PodGroup's phase at session close, by Volcano's rule (pkg/scheduler/framework/session.go,
    getPodGroupPhase): running pods and an Unschedulable condition set this session make it Unknown; at least
    minMember pods on nodes (running, bound, finished, or releasing from a node) make it Running, or Completed
    when all of those have finished; otherwise it stays Inqueue if it was, and is Pending in every other case
    (a running gang that lost pods below minMember goes back to Pending and is admitted again)."""
    if running and unschedulable_now:
        return PodGroupPhase.UNKNOWN
    completed = job.count(TaskStatus.SUCCEEDED, TaskStatus.FAILED)
    scheduled = job.count(TaskStatus.RUNNING, TaskStatus.BOUND) + completed
    scheduled += sum(1 for t in job.with_status(TaskStatus.RELEASING) if t.node_name)
    if job.tasks and scheduled >= job.min_available:
        return PodGroupPhase.COMPLETED if scheduled == completed else PodGroupPhase.RUNNING
    return PodGroupPhase.INQUEUE if job.phase == PodGroupPhase.INQUEUE else PodGroupPhase.PENDING


def default_task_key(task: TaskInfo) -> tuple[int, float, str]:
    """Tasks no plugin orders go by their index within their task (`volcano.sh/task-index`), so the tasks of a
    multi-task job interleave (worker-0, ps-0, worker-1, ps-1, ...) and every role gets its first pods before any
    role its extras; then by creation and name. Volcano's default task order (pkg/controllers/job/helpers/
    helpers.go, CompareTask) is the index, then creation, then the pod's random UID; the name makes ours
    repeatable. A pod without an index sorts with index 0's creation order, as there."""
    return (task.index if task.index >= 0 else 0, task.creation, task.name)
