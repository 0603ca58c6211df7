"""Layer `plugins`: `gang` — all or nothing.

Volcano's rules (pkg/scheduler/plugins/gang/gang.go, pkg/scheduler/api/job_info.go):
JobValid: a job needs at least minAvailable live tasks, and each role its minTaskMember where those apply, and
each sub-group policy (PodGroup subGroupPolicy, api/subgroups.py) its minSubGroups sub-groups.
JobReady: minAvailable tasks placed, a pending BestEffort task counting as placed, each role's minimum
where those apply, and minSubGroups sub-groups of each policy placed whole: only then does allocate commit.
Task minimums apply only when the job's minAvailable is at least their sum (so an elastic job, minAvailable
below its replicas, is held to minAvailable alone).
JobPipelined: counting reservations on releasing resources, the same would be met.
JobOrder: jobs not yet ready (by count) go first, so minimums are met before extras.
Evictable (gangpreempt, gangreclaim): every candidate; the actions' bundles keep the gang rule.
Preemptable/Reclaimable: a victim's job keeps minAvailable ready tasks, and (a guard, see points.py) no later
tier may take it below that either; `enablePreemptable: false` / `enableReclaimable: false` switch both off.
JobStarving: ready + waiting < minAvailable (BestEffort tasks not counted) wants victims.
Timeout: a PodGroup with `scheduleTimeoutSeconds` that is still not placed that long after its creation gets a
`Timeout` condition and a Warning event; if its owner named a smaller minimum in the annotation
`volcano-py.io/fallback-min-available`, the gang is retried with it (the spec stays as written; the scheduler's
view and `status.minMemberOverride` carry the smaller minimum).
At close: every waiting gang gets an `Unschedulable` condition that says what is short and by how much.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from scheduler.api import reasons as R
from scheduler.api.decision import SUCCESS, Code, Status, unresolvable, unschedulable
from scheduler.api.job import Condition, JobInfo, TaskInfo
from scheduler.api.messages import (
    FALLBACK_ANNOTATION as FALLBACK_ANNOTATION,  # re-exported, as before
    UNSCHEDULABLE,
    render,
    unschedulable_condition,
)
from scheduler.api.phases import PodGroupPhase, TaskStatus
from scheduler.api.resources import PODS, ZERO
from scheduler.framework import points as P
from scheduler.framework.conf_args import NoArgs
from scheduler.framework.evictable import EvictionContext
from scheduler.framework.fit import FitErrors
from scheduler.framework.plugin import Plugin, SessionAPI
from scheduler.framework.victims import gang_safe

NOT_ENOUGH_RESOURCES = "NotEnoughResources"
NOT_ENOUGH_TASKS = "NotEnoughTasks"
NOT_ENOUGH_PODS_OF_TASK = "NotEnoughPodsOfTask"
SCHEDULED_REASON = "tasks in gang are ready to be scheduled"
TIMEOUT = "Timeout"
TIMEOUT_REASON = "ScheduleTimeout"


def check_timeout(ssn: SessionAPI, job: JobInfo) -> None:
    """Past its scheduleTimeoutSeconds unplaced: say so once, and fall back to the smaller minimum if asked."""
    timeout = job.schedule_timeout  # parsed and bounded when the PodGroup was read (api/fields.py)
    if timeout is None or job.is_started() or job.is_ready() or not job.tasks:
        return
    waited = ssn.now - job.creation
    if waited < timeout:
        return
    fallback = job.fallback_min
    if fallback is not None and fallback < job.min_available:
        reason = R.ScheduleTimeout(timeout, waited, job.min_available, fallback)
        ssn.override_min_member(job, fallback)
    elif any(c.type == TIMEOUT for c in job.conditions):
        return
    else:
        reason = R.ScheduleTimeout(timeout, waited, job.min_available)
    text = render(reason)
    ssn.add_condition(job, Condition(TIMEOUT, "True", TIMEOUT_REASON, text))
    ssn.event("PodGroup", job.key, "Warning", TIMEOUT_REASON, text)


def valid(job: JobInfo) -> Status:
    """Volcano's gang JobValid (pkg/scheduler/plugins/gang/gang.go): each task minimum that applies first,
    then minAvailable against the tasks still live (pending, waiting or placed)."""
    short = job.invalid_roles()
    if short:
        role, (have, need) = min(short.items())
        return unresolvable(R.TooFewTasks(role, have, need))
    live = job.valid_task_num()
    if live < job.min_available:
        return unresolvable(R.TooFewTasks("", live, job.min_available))
    few = job.subs.invalid() if job.subs is not None else None
    if few is not None:  # CheckSubJobValid: each sub-group policy has its minSubGroups sub-groups at all
        policy, have, need = few
        return unresolvable(R.SubGroupsShort(policy, have, need, live=True))
    return SUCCESS


def condition_reason(invalid: Status) -> str:
    """The condition's reason for a JobValid rejection, Volcano's: NotEnoughPodsOfTask or NotEnoughTasks."""
    first = invalid.reasons[0] if invalid.reasons else None
    return NOT_ENOUGH_PODS_OF_TASK if isinstance(first, R.TooFewTasks) and first.role else NOT_ENOUGH_TASKS


def _short_somewhere(errors: FitErrors | None) -> bool:
    """A node turned a task away for its free resources: only then can free resources be fragmented (not when a
    filter such as a volume's or a host port's turned every node away)."""
    return errors is not None and any(f.filter in (R.INSUFFICIENT, R.TOO_MANY_PODS) for f in errors.reasons)


def gang_reasons(ssn: SessionAPI, job: JobInfo) -> tuple[R.Reason, ...]:
    """Volcano's '3/8 tasks in gang unschedulable: ...', then what held it: a gate's reasons, the resource that
    is short and by how much (or where it is fragmented), the roles short of their minimum, the node filters."""
    ready = job.ready_task_num()
    total = len(job.tasks)
    parts: list[R.Reason] = [R.GangNotReady(total - ready, total, ready, job.min_available)]
    hold = ssn.held(job)
    if hold is not None:
        parts.extend(hold.reasons)
    gated = [t for t in job.with_status(TaskStatus.PENDING) if t.gated]
    if gated:
        parts.append(R.SchedulingGated(len(gated), gated[0].gated))
    pending = job.minimums_first(ssn.task_order(job.placeable()))  # the tasks allocate takes first
    needed = pending[: max(0, job.min_available - ready)] or pending[:1]
    if needed:
        need = ZERO
        for task in needed:
            need = need + task.resreq
        shapes = {task.constraints: task for task in needed}.values()
        positions = np.unique(np.concatenate([ssn.feasible_indices(t) for t in shapes]))
        free = ssn.arrays.free_on(positions)
        short = need.shortfall(free)
        names = tuple(n for n, v in need.items() if v and n != PODS) or (PODS,)
        if not short.is_zero() and positions.size:  # with no node to use, the node filters say it all
            parts.extend(
                R.ResourceShortfall(n, need.get(n), free.get(n), R.NODES, len(needed), int(positions.size))
                for n, v in short.items() if v
            )
        elif positions.size and _short_somewhere(ssn.fit_errors(job)):  # tried on nodes, and some were too full
            rows = [ssn.arrays.row[n] for n in names if n in ssn.arrays.row]
            idle = ssn.arrays.idle[np.ix_(np.array(rows, dtype=np.int64), positions)]
            largest = ssn.node_list[int(positions[np.lexsort(idle[::-1])[-1]])]
            if not need <= largest.idle:  # one node that holds it all: the gang did not fail for fragmentation
                parts.append(R.Fragmented(R.amounts(need, names), R.amounts(largest.idle.clamp_zero(), names),
                                          largest.name))
    for role, (have, want) in sorted(job.roles_short().items()):
        parts.append(R.RoleNotReady(role, have, want))
    groups_short = job.subs.short() if job.subs is not None else None
    if groups_short is not None:  # CheckSubJobReady
        policy, have, need_groups = groups_short
        parts.append(R.SubGroupsShort(policy, have, need_groups, live=False))
    errors = ssn.fit_errors(job)
    unavailable = errors.unavailable(len(ssn.node_list)) if errors else None
    if unavailable is not None:
        parts.append(unavailable)
    return tuple(parts)


def _held_by_releasing(job: JobInfo) -> bool:
    """A gang short of its minimum only because members are still terminating on their nodes, with nothing left
    to place: no Unschedulable condition (Volcano's shouldSkipUnschedulableForReleasing, plugins/gang/gang.go).
    Any other gang that is not ready gets one, running members or not: a running gang that lost a member turns
    Unknown (framework/session.go getPodGroupPhase), as jobseq's "Transform from running to unknown" expects."""
    releasing = sum(1 for t in job.with_status(TaskStatus.RELEASING) if t.node_name)
    if not releasing or job.count(TaskStatus.PENDING, TaskStatus.PIPELINED):
        return False
    scheduled = job.count(TaskStatus.ALLOCATED, TaskStatus.BINDING, TaskStatus.BOUND, TaskStatus.RUNNING,
                          TaskStatus.SUCCEEDED, TaskStatus.FAILED)
    return scheduled + releasing >= job.min_available


def placements_to_ready(job: JobInfo) -> int:
    """How many more tasks must be placed before the job can be ready: each placed task counts one towards
    minAvailable (`JobInfo.count_ready`), which readiness needs first."""
    return job.min_available - job.ready_task_num() - job.pending_best_effort_num()


def ready_last(job: JobInfo) -> bool:
    """JobOrder's key: jobs not yet ready (by count) first, so minimums are met before extras."""
    return job.count_ready()


class GangPlugin(Plugin[NoArgs]):
    name = "gang"

    @staticmethod
    def evictable(ctx: EvictionContext, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
        """Gang eviction lets every candidate go: the actions' bundles (safe ones keep minAvailable, whole ones
        are taken whole) carry the gang rule (Volcano's gang UnifiedEvictableFn, plugins/gang/gang.go)."""
        return list(candidates)

    def on_session_open(self, ssn: SessionAPI) -> None:
        self.jobs = ssn.jobs
        for job in ssn.jobs.values():
            if job.schedule_timeout is not None:  # (check_timeout's first test, without a guard for every job)
                with ssn.guard(job):
                    check_timeout(ssn, job)

    # ---- extension points ------------------------------------------------------------------------------------
    def job_valid(self, job: JobInfo) -> Status:
        return valid(job)

    def job_ready(self, job: JobInfo) -> bool:
        return job.is_ready()

    def job_ready_bound(self, job: JobInfo) -> int:
        """How many more placements before `job_ready` can pass (`points.BoundedCheck`)."""
        return placements_to_ready(job)

    def job_pipelined(self, job: JobInfo) -> Status:
        return SUCCESS if job.is_pipelined() else unschedulable(R.NotPipelined(job.min_available))

    def job_starving(self, job: JobInfo) -> bool:
        return job.is_starving()

    def job_order(self, a: JobInfo, b: JobInfo) -> int:
        return P.compare(ready_last(a), ready_last(b))

    def job_order_key(self, job: JobInfo) -> bool:
        return ready_last(job)

    def preemptable(self, preemptor: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
        return gang_safe(candidates, self.jobs)

    def reclaimable(self, preemptor: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
        return gang_safe(candidates, self.jobs)

    def preempt_guard(self, candidates: Sequence[TaskInfo], preemptor: TaskInfo) -> list[TaskInfo]:
        return gang_safe(candidates, self.jobs, singles_may_go=True)

    def reclaim_guard(self, candidates: Sequence[TaskInfo], preemptor: TaskInfo) -> list[TaskInfo]:
        return gang_safe(candidates, self.jobs, singles_may_go=True)

    def on_session_close(self, ssn: SessionAPI) -> None:
        # A job whose state is as read, and was at the last session's close too, gets what that close gave it
        # (`framework/carry.py`): nothing, or the same condition and events when they came from the job alone (no
        # gate held it and no node turned it away this session, no task of it to place). Binds or a fault this
        # session would have changed or marked it.
        changes = ssn.changes
        if not changes.keeps:  # (no memo: nothing to keep)
            for job in ssn.jobs.values():
                with ssn.guard(job):
                    act = self._close_job(ssn, job)
                    if act is not None:
                        _apply(ssn, job, act)
            return
        store = changes.store(self.name)
        quiet: dict[str, None] = store.setdefault("quiet", {})
        acts: dict[str, _Act] = store.setdefault("acts", {})
        jobs: Iterable[JobInfo] = ssn.jobs.values()
        closing = changes.closing
        if closing is not None:
            for key in changes.since or ():
                if key not in ssn.jobs:
                    quiet.pop(key, None)
                    acts.pop(key, None)
            skip = quiet.keys() - closing
            # A job as read whose kept act came from it alone and wrote no event (a gang that lost pods for good,
            # told again it is Unschedulable) gets it again without being looked at, when nothing this session
            # could change the act (`_own`: no fault, gate, deferral or node turned a task of it away; no task to
            # place, as read); the results collector sets it only if it works the job's status out.
            again = {key: (act[0], act[1]) for key in acts.keys() - closing - ssn.troubled()
                     if not (act := acts[key])[2]}
            if again:
                ssn.carry_conditions(again)
                skip |= again.keys()
            if skip:
                jobs = [job for key, job in ssn.jobs.items() if key not in skip]
        for job in jobs:
            key = job.key
            act = acts.get(key) if closing is not None and key not in closing else None
            if act is not None and not _own(ssn, job):
                act = None
            with ssn.guard(job):
                if act is None:
                    act = self._close_job(ssn, job)
                if act is not None:
                    _apply(ssn, job, act)
            quiet.pop(key, None)
            acts.pop(key, None)
            if ssn.faulted(job) or ssn.deferred(job) or not changes.clean(job):
                continue
            if act is None:
                quiet[key] = None
            elif _own(ssn, job):
                acts[key] = act

    def _close_job(self, ssn: SessionAPI, job: JobInfo) -> _Act | None:
        """The job's condition and events at close (None: none)."""
        if job.phase == PodGroupPhase.PENDING or not job.tasks or ssn.faulted(job) or ssn.deferred(job):
            return None  # (deferred: not tried this cycle, allocate's budget: its condition stays as it is)
        if job.count_ready():
            if ssn.got_binds(job.key) or _was_unschedulable(job) or _never_marked(job):
                return self._scheduled(job)
            return None
        if _held_by_releasing(job):
            return None
        invalid = valid(job)
        if not invalid.ok:
            return self._unschedulable(job, condition_reason(invalid), invalid.stamped(self.name))
        status = Status(Code.UNSCHEDULABLE, gang_reasons(ssn, job), self.name)
        return self._unschedulable(job, NOT_ENOUGH_RESOURCES, status)

    @staticmethod
    def _unschedulable(job: JobInfo, reason: str, status: Status) -> _Act:
        condition = unschedulable_condition(reason, status)
        text = condition.message
        events: list[tuple[str, str, str, str, str]] = []
        if condition not in job.conditions:
            events.append(("PodGroup", job.key, "Warning", UNSCHEDULABLE, text))
            for task in job.with_status(TaskStatus.PENDING):
                events.append(("Pod", task.key, "Warning", "FailedScheduling", text))
        return condition, status, tuple(events)

    @staticmethod
    def _scheduled(job: JobInfo) -> _Act:
        condition = Condition("Scheduled", "True", "tasks in gang are ready to be scheduled", SCHEDULED_REASON)
        if condition in job.conditions:
            return condition, None, ()
        return condition, None, (
            ("PodGroup", job.key, "Normal", "Scheduled", f"{job.ready_task_num()} tasks in gang scheduled"),)


# What the gang's close does for a job: its condition, the Status an Unschedulable one was rendered from, events
_Act = tuple[Condition, Status | None, tuple[tuple[str, str, str, str, str], ...]]


def _apply(ssn: SessionAPI, job: JobInfo, act: _Act) -> None:
    condition, status, events = act
    ssn.set_condition(job, condition, status)
    for event in events:
        ssn.event(*event)


def _own(ssn: SessionAPI, job: JobInfo) -> bool:
    """Whether the close's act for the job comes from the job's state alone: no gate held it, no node turned a
    task of it away, and it has no task to place (`gang_reasons` reads the nodes' free room for those)."""
    return (not ssn.faulted(job) and ssn.held(job) is None and ssn.fit_errors(job) is None
            and not job.has_placeable())


def _was_unschedulable(job: JobInfo) -> bool:
    return any(c.type == UNSCHEDULABLE for c in job.conditions)


def _never_marked(job: JobInfo) -> bool:
    """A ready gang whose PodGroup has no `Scheduled=True` condition: bound by a cycle that wrote nothing else (the
    first cycle on a partial view, scheduler/cache/first_view.py) or by a replica that died before its status
    write. Volcano marks every ready gang Scheduled at each session close (pkg/scheduler/plugins/gang/gang.go
    OnSessionClose); one already Scheduled (by Volcano too, whatever its message) is left as it is. A pod without a
    PodGroup (an implicit gang of one, keyed by the pod itself) has no condition to keep."""
    if job.key in job.tasks:
        return False
    return not any(c.type == "Scheduled" and c.status == "True" for c in job.conditions)
