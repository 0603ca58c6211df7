"""Layer `api`: tasks (pods) and jobs (PodGroups) as the scheduling session sees them.

These are mutable session infos: only a Statement (through the Session) changes a task's status or node.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from scheduler.api.dra import PodClaims
from scheduler.api.phases import READY_STATUSES, PodGroupPhase, TaskStatus
from scheduler.api.pod import Constraints
from scheduler.api.resources import Resource
from scheduler.api.subgroups import SubGroupCounts, SubGroupPolicy

# Tasks that still count towards their gang (Volcano's ValidTaskNum and CheckTaskValid).
VALID_STATUSES = READY_STATUSES | {TaskStatus.PENDING, TaskStatus.PIPELINED}
# the statuses whose tasks `allocated()` sums, in its order
HELD_STATUSES = (TaskStatus.ALLOCATED, TaskStatus.BINDING, TaskStatus.BOUND, TaskStatus.RUNNING)


@dataclass(slots=True, eq=False)
class TaskInfo:
    key: str  # namespace/name of the pod (the stores' key; the pod's own UID is not kept)
    name: str
    namespace: str
    job: str
    resreq: Resource
    role: str = ""
    status: TaskStatus = TaskStatus.PENDING
    node_name: str = ""
    priority: int = 0
    preemptable: bool = True
    constraints: Constraints = Constraints()
    creation: float = 0.0
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    index: int = -1  # the pod's index within its task (`volcano.sh/task-index`), -1 if it has none
    # The first of the pod's `spec.schedulingGates` ("" if none): no scheduler may place it until they are removed
    # (Volcano's TaskInfo.SchGated, pkg/scheduler/api/job_info.go); it still counts as one of its job's pending tasks.
    gated: str = ""
    # The keys (namespace/name) of the PersistentVolumeClaims its volumes use (`api.volumes.claims_of`); what they
    # require of a node is resolved into `constraints.volumes` when a snapshot is built.
    claims: tuple[str, ...] = ()
    # `spec.preemptionPolicy: Never`: the legacy preempt and reclaim actions never evict for this task (Volcano:
    # actions/preempt/preempt.go taskEligibleToPreempt, actions/reclaim/reclaim.go).
    preempt_never: bool = False
    # The cdp plugin's cooldown (`volcano.sh/cooldown-time`, seconds, any sign; None: none or unreadable), and when
    # the pod was bound (its `PodScheduled=True` transition; read for a pod with a cooldown or on a node, which the
    # minruntime and victimcost plugins measure runtime from; None: not known).
    cooldown: float | None = None
    scheduled_at: float | None = None
    # Volcano's queue-allocation gate (api/fields.py QUEUE_ALLOCATION_GATE; pkg/scheduler/api/helpers.go): whether
    # the pod's one and only scheduling gate is it (HasOnlyVolcanoSchedulingGate), and whether the pod opted in
    # with the annotation of that name set to "true" (HasQueueAllocationGateAnnotation).
    only_queue_gate: bool = False
    queue_gate_opt_in: bool = False
    # Dynamic Resource Allocation: the pod's `spec.resourceClaims` and the claims made for it from templates
    # (`api/dra.py`); None: it names none.
    device_claims: PodClaims | None = None

    @property
    def best_effort(self) -> bool:
        return self.resreq.is_best_effort()

    def clone(self) -> TaskInfo:
        return TaskInfo(
            self.key,
            self.name,
            self.namespace,
            self.job,
            self.resreq,
            self.role,
            self.status,
            self.node_name,
            self.priority,
            self.preemptable,
            self.constraints,
            self.creation,
            self.labels,
            self.annotations,
            self.index,
            self.gated,
            self.claims,
            self.preempt_never,
            self.cooldown,
            self.scheduled_at,
            self.only_queue_gate,
            self.queue_gate_opt_in,
            self.device_claims,
        )

    def __repr__(self) -> str:
        return f"Task({self.namespace}/{self.name} {self.status.value} on {self.node_name or '-'})"


@dataclass(frozen=True, slots=True)
class Condition:
    """A PodGroup condition (`Unschedulable` / `Scheduled`) as the scheduler writes it."""

    type: str
    status: str
    reason: str
    message: str


@dataclass(slots=True, eq=False)
class JobInfo:
    """A PodGroup and its pods."""

    key: str  # namespace/name of the PodGroup
    name: str
    namespace: str
    queue: str
    min_available: int = 1
    min_task_member: Mapping[str, int] = field(default_factory=dict)
    min_resources: Resource | None = None
    priority: int = 0
    phase: PodGroupPhase = PodGroupPhase.PENDING
    creation: float = 0.0
    conditions: tuple[Condition, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)  # plugin-specific spec fields (networkTopology, ...)
    reported_counts: tuple[int, int, int] = (0, 0, 0)  # status.running/succeeded/failed as last written
    # Parsed once when the PodGroup is read (api/fields.py): seconds, a count, seconds; None when not set or
    # unreadable (the reason is with the cache).
    schedule_timeout: float | None = None  # spec.scheduleTimeoutSeconds
    fallback_min: int | None = None  # annotation volcano-py.io/fallback-min-available
    sla_waiting: float | None = None  # annotation sla-waiting-time
    # spec.minResources by exact name, quota keys included (`requests.cpu`, `count/pods`), in nano-units
    # (api/quota.py): what the resourcequota plugin compares with ResourceQuotas. None: no minResources.
    quota_request: Mapping[str, int] | None = None
    # spec.subGroupPolicy, parsed once (api/subgroups.py); `subs` keeps the tasks by sub-group once one is added
    sub_groups: tuple[SubGroupPolicy, ...] = ()
    subs: SubGroupCounts | None = None
    tasks: dict[str, TaskInfo] = field(default_factory=dict)
    by_status: dict[TaskStatus, dict[str, TaskInfo]] = field(default_factory=dict)
    pending_best_effort: int = 0  # these two are kept in step by add_task/set_status:
    ready: int = 0  # is_ready runs after every placed task, so it must not count
    # Set by every change of its tasks' membership or status: an incremental snapshot (adapter/incremental.py)
    # rebuilds a job a session changed before it hands the job to the next one.
    touched: bool = False
    # `allocated()` as last summed; None once a task comes or changes status (kept by an incremental snapshot
    # while its job is reused, so a cycle sums only the jobs that changed)
    held: Resource | None = field(default=None, repr=False)
    # Given by the incremental snapshot that built the job (adapter/incremental.py): the job's key is appended
    # when it is first touched and whenever a session sets its phase or minAvailable, so that the next build
    # looks at those jobs alone, not at every job. None: no one asks.
    journal: list[str] | None = field(default=None, repr=False)
    # Given by that snapshot too: the key of each task whose status a session sets (`set_status`; its node is set
    # with it, `framework/backend.py`), so that the next build looks at those tasks alone. None: no one asks.
    moves: list[str] | None = field(default=None, repr=False)

    def _note(self) -> None:
        if self.journal is not None:
            self.journal.append(self.key)

    def _touch(self) -> None:
        if not self.touched:
            self._note()
            self.touched = True

    def set_phase(self, phase: PodGroupPhase) -> None:
        """The phase a session gives the job (the next snapshot reads the PodGroup's again)."""
        if phase is not self.phase:
            self.phase = phase
            self._note()

    def set_min_available(self, min_available: int) -> None:
        """The minAvailable a session gives the job (a timed-out gang's smaller minimum)."""
        if min_available != self.min_available:
            self.min_available = min_available
            self._note()

    # -- membership ---------------------------------------------------------------------------------
    def add_task(self, task: TaskInfo) -> None:
        self._touch()
        self.held = None
        self.tasks[task.key] = task
        if self.sub_groups:
            if self.subs is None:
                self.subs = SubGroupCounts(self.sub_groups)
            self.subs.add(task)
        self.by_status.setdefault(task.status, {})[task.key] = task
        if task.status == TaskStatus.PENDING and task.best_effort:
            self.pending_best_effort += 1
        if task.status in READY_STATUSES:
            self.ready += 1

    def drop_tasks(self, gone: list[TaskInfo]) -> None:
        """Take `gone` (tasks of this job) off, the rest kept in their order: the same tables, counts and sum as
        `add_task` of each other task in that order gives, without walking them (the incremental snapshot's job
        whose pods only went: adapter/incremental.py). Not a session's change: the job is not touched. Only the
        order of `by_status`'s keys may differ, which nothing reads. Not for a job with sub-group policies (their
        counts are not kept here)."""
        assert not self.sub_groups
        tasks, by_status, held = self.tasks, self.by_status, self.held
        for task in gone:
            del tasks[task.key]
            bucket = by_status[task.status]
            del bucket[task.key]
            if not bucket:  # (as `add_task` of the rest would have it: no bucket for a status no task has)
                del by_status[task.status]
            if task.status == TaskStatus.PENDING and task.best_effort:
                self.pending_best_effort -= 1
            if task.status in READY_STATUSES:
                self.ready -= 1
            if held is not None and task.status in HELD_STATUSES:
                held = held - task.resreq
        self.held = held

    def set_status(self, task: TaskInfo, status: TaskStatus) -> None:
        self._touch()
        if self.moves is not None:
            self.moves.append(task.key)
        self.held = None
        bucket = self.by_status.get(task.status)
        if bucket is not None:
            bucket.pop(task.key, None)
        if task.best_effort:
            self.pending_best_effort += (status == TaskStatus.PENDING) - (task.status == TaskStatus.PENDING)
        self.ready += (status in READY_STATUSES) - (task.status in READY_STATUSES)
        if self.subs is not None:
            self.subs.moved(task, task.status, status)
        task.status = status
        self.by_status.setdefault(status, {})[task.key] = task

    def with_status(self, status: TaskStatus) -> Iterator[TaskInfo]:
        yield from self.by_status.get(status, {}).values()

    def placeable(self) -> list[TaskInfo]:
        """The pending tasks allocate, preempt and reclaim may place: not BestEffort (backfill's) and not
        scheduling-gated (Volcano skips a gated task in each of them: actions/allocate/allocate.go, preempt.go,
        reclaim.go)."""
        return [t for t in self.with_status(TaskStatus.PENDING) if not t.best_effort and not t.gated]

    def has_placeable(self) -> bool:
        """Whether `placeable` would hold a task: stops at the first (allocate asks it of every job, twice a turn)."""
        return any(not t.best_effort and not t.gated for t in self.with_status(TaskStatus.PENDING))

    def count(self, *statuses: TaskStatus) -> int:
        if len(statuses) == 1:  # (most calls: no generator made)
            return len(self.by_status.get(statuses[0], ()))
        return sum(len(self.by_status.get(s, ())) for s in statuses)

    # -- gang arithmetic (Volcano's JobInfo) ----------------------------------------------------------
    def ready_task_num(self) -> int:
        return self.ready

    def waiting_task_num(self) -> int:
        return self.count(TaskStatus.PIPELINED)

    def pending_best_effort_num(self) -> int:
        return self.pending_best_effort

    def valid_task_num(self) -> int:
        """Tasks that still count towards the gang: placed, waiting or pending (not releasing, not finished
        badly), as Volcano's `JobInfo.ValidTaskNum` (pkg/scheduler/api/job_info.go)."""
        return self.count(*VALID_STATUSES)

    # -- per-task minimums (PodGroup minTaskMember) ------------------------------------------------------
    # Volcano's rules (pkg/scheduler/api/job_info.go: CheckTaskValid, CheckTaskReady, CheckTaskPipelined,
    # getJobAllocatedRoles): each task's minimum is checked only when the job's minAvailable is at least the
    # sum of the task minimums. Volcano's webhook defaults every task's minAvailable to its replicas, so an
    # elastic job (minAvailable below the replicas) has its task minimums waived and only minAvailable counts.
    def task_min_total(self) -> int:
        return sum(self.min_task_member.values())

    def task_minimums_apply(self) -> bool:
        return bool(self.min_task_member) and self.min_available >= self.task_min_total()

    def role_counts(self, statuses: frozenset[TaskStatus], *, best_effort_pending: bool) -> dict[str, int]:
        """Per role with a minimum: tasks in `statuses`, plus pending BestEffort ones if asked (Volcano counts
        a pending task that requests nothing as placed for readiness: it never waits for resources)."""
        counts = {role: 0 for role in self.min_task_member}
        for status in statuses:
            for task in self.by_status.get(status, {}).values():
                if task.role in counts:
                    counts[task.role] += 1
        if best_effort_pending and self.pending_best_effort:
            for task in self.by_status.get(TaskStatus.PENDING, {}).values():
                if task.best_effort and task.role in counts:
                    counts[task.role] += 1
        return counts

    def roles_short(self, statuses: frozenset[TaskStatus] = READY_STATUSES, *,
                    best_effort_pending: bool = True) -> dict[str, tuple[int, int]]:
        """The roles whose minimum is not met, as (have, minimum); empty when task minimums are waived."""
        if not self.task_minimums_apply():
            return {}
        counts = self.role_counts(statuses, best_effort_pending=best_effort_pending)
        return {
            role: (counts[role], need) for role, need in self.min_task_member.items() if counts[role] < need
        }

    def minimums_first(self, tasks: list[TaskInfo]) -> list[TaskInfo]:
        """`tasks` (in TaskOrder) with the ones each role still needs for its minimum moved ahead of the rest,
        where task minimums apply; otherwise as given. Volcano takes tasks in TaskOrder alone, so a role's extra
        can take the room its minimum needed and the gang fails although it fits (a task t0 with minAvailable 0
        before t1 with minAvailable 1 on room for one pod); volcano-py meets the minimums first (CONFORMANCE.md,
        differs on purpose; tests/fuzz/test_invariants.py finds such gangs). `tasks` itself when nothing moves."""
        short = self.roles_short()
        if not short:
            return tasks
        missing = {role: need - have for role, (have, need) in short.items()}
        first: list[TaskInfo] = []
        rest: list[TaskInfo] = []
        moved = False  # a needed task came after one that is not: the order changes
        for task in tasks:
            if missing.get(task.role, 0) > 0 and not task.best_effort:
                missing[task.role] -= 1
                first.append(task)
                moved = moved or bool(rest)
            else:
                rest.append(task)
        return first + rest if moved else tasks

    def task_ready(self) -> bool:
        return not self.roles_short(READY_STATUSES)

    def task_pipelined(self) -> bool:
        return not self.roles_short(READY_STATUSES | {TaskStatus.PIPELINED})

    def invalid_roles(self) -> dict[str, tuple[int, int]]:
        """Roles with fewer live tasks (the statuses `valid_task_num` counts) than their minimum, where task
        minimums apply (Volcano's CheckTaskValid). Pending tasks are counted already, BestEffort or not."""
        return self.roles_short(VALID_STATUSES, best_effort_pending=False)

    def can_continue_after_failure(self, failed_roles: set[str]) -> bool:
        """After a task fit no node: may allocation go on with the job's other tasks? As Volcano's
        `NeedContinueAllocating` (pkg/scheduler/api/job_info.go): not when every task is needed; with task
        minimums waived, while the placed tasks plus the pending ones of roles that have not failed still reach
        minAvailable; otherwise while every failed role already has its minimum."""
        if self.min_available >= len(self.tasks):
            return False
        if self.min_task_member and not self.task_minimums_apply():
            left = sum(1 for t in self.with_status(TaskStatus.PENDING) if t.role not in failed_roles)
            return self.ready_task_num() + left >= self.min_available
        have = self.role_counts(READY_STATUSES, best_effort_pending=True)
        return all(have.get(role, 0) >= self.min_task_member.get(role, 0) for role in failed_roles)

    # -- readiness -----------------------------------------------------------------------------------
    def count_ready(self) -> bool:
        """minAvailable placed, counting pending BestEffort tasks (Volcano's `IsReady`: job order and the
        PodGroup's Scheduled/Unschedulable condition use this count alone)."""
        return self.ready_task_num() + self.pending_best_effort_num() >= self.min_available

    def is_ready(self) -> bool:
        """The gang may be committed: minAvailable placed and every task minimum that applies met (the gang
        plugin's JobReady), and every sub-group policy's minSubGroups ready (CheckSubJobReady)."""
        return self.count_ready() and self.task_ready() and (self.subs is None or self.subs.short() is None)

    def is_pipelined(self) -> bool:
        return (
            self.ready_task_num() + self.waiting_task_num() + self.pending_best_effort_num() >= self.min_available
            and self.task_pipelined()
            and (self.subs is None or self.subs.short(waiting=True) is None)
        )

    def is_starving(self) -> bool:
        """Fewer than minAvailable placed or waiting (Volcano's `IsStarving`; BestEffort tasks do not count)."""
        return self.ready_task_num() + self.waiting_task_num() < self.min_available

    def is_started(self) -> bool:
        """Some task has been bound before (a running or finishing gang, not a fresh one)."""
        return self.count(TaskStatus.BINDING, TaskStatus.BOUND, TaskStatus.RUNNING, TaskStatus.SUCCEEDED,
                          TaskStatus.FAILED, TaskStatus.RELEASING) > 0

    def allocated(self) -> Resource:
        """What its allocated, binding, bound and running tasks hold (summed once per change of its tasks)."""
        held = self.held
        if held is None:
            held = self.held = Resource.total(
                task.resreq for status in HELD_STATUSES for task in self.by_status.get(status, {}).values())
        return held

    def pending_request(self) -> Resource:
        return Resource.total(task.resreq for task in self.with_status(TaskStatus.PENDING))

    def clone(self) -> JobInfo:
        copy = JobInfo(
            self.key,
            self.name,
            self.namespace,
            self.queue,
            self.min_available,
            self.min_task_member,
            self.min_resources,
            self.priority,
            self.phase,
            self.creation,
            self.conditions,
            self.extra,
            self.reported_counts,
            self.schedule_timeout,
            self.fallback_min,
            self.sla_waiting,
            self.quota_request,
            self.sub_groups,
        )
        for task in self.tasks.values():
            copy.add_task(task.clone())
        return copy

    def __repr__(self) -> str:
        return f"Job({self.key} {self.phase.value} {self.ready_task_num()}/{self.min_available})"
