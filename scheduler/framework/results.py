"""Layer `framework`: the results collector — what a cycle decided about jobs and queues, as status to write.

Actions and plugins write here as the session runs: a job's Scheduled/Unschedulable condition and the Status it
was rendered from, why a gate held a job, other conditions (Timeout), a smaller minMember, events, phases, each
queue's share, counters for metrics. At close it folds them with the Statement's requests into the
`CycleResult`: the PodGroups whose status changed (phase by Volcano's rule, `podgroup_phase`) and every queue's
status.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

from scheduler.api.decision import Status
from scheduler.api.job import Condition, JobInfo, TaskInfo
from scheduler.api.messages import unschedulable_condition
from scheduler.api.phases import PodGroupPhase, TaskStatus
from scheduler.api.queue import QueueInfo
from scheduler.api.resources import ZERO, Resource
from scheduler.api.snapshot import CycleResult, Event, Eviction, PodGroupStatus, QueueStatus
from scheduler.api.usage import QueueUsage
from scheduler.framework.backend import StatementBackEnd
from scheduler.framework.carry import JobChanges

SCHEDULER_ERROR = "SchedulerError"  # the condition's and event's reason for a job a plugin failed on


class ResultsCollector:
    def __init__(self, jobs: dict[str, JobInfo], queues: dict[str, QueueInfo],
                 changes: JobChanges | None = None) -> None:
        self._jobs = jobs
        self._queues = queues
        self.changes = changes if changes is not None else JobChanges(None, None)
        self.marked = self.changes.marked  # jobs whose phase or minAvailable this session set (`carry.py`)
        # each job's phase and conditions as read, for those whose phase the session sets (kept before it does);
        # the others' are theirs at close (nothing else changes them)
        self._original: dict[str, tuple[PodGroupPhase, tuple[Condition, ...]]] = {}
        self._events: list[Event] = []
        self._conditions: dict[str, Condition] = {}
        self._extra_conditions: dict[str, list[Condition]] = {}  # job uid -> conditions of other types (Timeout)
        self._overrides: dict[str, int] = {}  # job uid -> minMember the scheduler now uses (status only)
        self._gates: dict[str, Status] = {}  # job uid -> why a gate (enqueue, a queue, a placer) held it
        self._published: dict[str, Status] = {}  # job uid -> the Status behind its Unschedulable condition
        self._shares: dict[str, tuple[Resource, float, bool]] = {}  # queue -> deserved, share, overused
        self._usage: dict[str, QueueUsage] = {}  # queue -> decayed usage (time-based fair share)
        self._counters: dict[str, int] = {}  # for metrics, as CycleResult.counters
        self._faults: dict[str, Status] = {}  # job uid -> the Error Status of a plugin that failed on it
        self._ungate: dict[str, None] = {}  # tasks whose queue-allocation gate is to be removed, in order
        self._pg_annotations: dict[str, dict[str, str | None]] = {}  # job key -> merge patch of its annotations
        self._look_again: float | None = None  # CycleResult.look_again
        self._deferred: dict[str, None] = {}  # jobs allocate left for the next cycle (`maxBindsPerCycle`)
        # job -> the condition (and Status) a plugin gives it again as it gave it last session (`carry_conditions`)
        self._carried: dict[str, tuple[Condition, Status | None]] = {}

    # ---- jobs -----------------------------------------------------------------------------------------
    def set_condition(self, job: JobInfo, condition: Condition, status: Status | None = None) -> None:
        """The job's Scheduled/Unschedulable condition; `status` is what an Unschedulable one was rendered from,
        published beside it for tools (`api/decision.py`)."""
        self._conditions[job.key] = condition
        if status is not None:
            self._published[job.key] = status
        else:
            self._published.pop(job.key, None)

    def carry_conditions(self, carried: dict[str, tuple[Condition, Status | None]]) -> None:
        """`set_condition` for many jobs at once, each as read and given what the caller gave it last session: set
        at close only for a job whose status is worked out anyway (`close`), so a job settled in that condition
        costs nothing. Only for conditions no one else sets for those jobs this session (the gang plugin's; the
        jobs a gate held or a fault marked are not carried)."""
        self._carried.update(carried)

    def troubled(self) -> set[str]:
        """The jobs a fault marked, a gate held or allocate deferred this session."""
        return set(self._faults) | set(self._gates) | set(self._deferred)

    def hold(self, job: JobInfo, status: Status, *, first: bool = False) -> None:
        """Remember why a gate held the job this cycle, for its condition (`first`: keep an earlier one)."""
        if first and job.key in self._gates:
            return
        self._gates[job.key] = status

    def held(self, job: JobInfo) -> Status | None:
        """Why a gate held the job this cycle (None: none did); a fault first."""
        return self._faults.get(job.key) or self._gates.get(job.key)

    def fault(self, job: JobInfo, status: Status) -> None:
        """A plugin or action failed on `job` (`faults.py`): its condition at close says so, whatever else was
        written for it."""
        self._faults.setdefault(job.key, status)

    def faulted(self, job: JobInfo) -> bool:
        return job.key in self._faults

    def defer(self, job: JobInfo) -> None:
        """Allocate spent the cycle's budget of binds before the job's turn (actions/allocate.py): no action tries
        it again this cycle, no condition or event is written for it, and the next cycle starts at once."""
        self._deferred[job.key] = None

    def deferred(self, job: JobInfo) -> bool:
        return job.key in self._deferred

    def add_condition(self, job: JobInfo, condition: Condition) -> None:
        """A condition beside the Scheduled/Unschedulable one (e.g. `Timeout`); one per type."""
        kept = [c for c in self._extra_conditions.get(job.key, []) if c.type != condition.type]
        self._extra_conditions[job.key] = [*kept, condition]

    def override_min_member(self, job: JobInfo, min_member: int) -> None:
        """Schedule `job` with a smaller minMember from now on (written to status.minMemberOverride)."""
        job.set_min_available(min_member)
        self._overrides[job.key] = min_member
        self.marked.add(job.key)

    def annotate_podgroup(self, job: JobInfo, annotations: Mapping[str, str | None]) -> None:
        """PodGroup annotations to write at the end of the cycle (None: remove the key)."""
        self._pg_annotations.setdefault(job.key, {}).update(annotations)

    def set_phase(self, job: JobInfo, phase: PodGroupPhase) -> None:
        self._original.setdefault(job.key, (job.phase, job.conditions))
        job.set_phase(phase)
        self.marked.add(job.key)

    def event(self, kind: str, key: str, type_: str, reason: str, message: str) -> None:
        """A Kubernetes event on the object `kind`/`key` (a PodGroup's or a pod's uid)."""
        self._events.append(Event(kind, key, type_, reason, message))

    # ---- queues and metrics ---------------------------------------------------------------------------
    def set_queue_share(self, queue: str, deserved: Resource, share: float, overused: bool) -> None:
        """The queue's deserved resources, share and overused flag, for its status and the queue metrics."""
        self._shares[queue] = (deserved, share, overused)

    def set_queue_usage(self, queue: str, usage: QueueUsage) -> None:
        """The queue's decayed usage at this cycle (time-based fair share), for its annotation."""
        self._usage[queue] = usage

    def count(self, counter: str) -> None:
        """Add one to a cycle counter (CycleResult.counters, for metrics)."""
        self._counters[counter] = self._counters.get(counter, 0) + 1

    def allocated_by_queue(self) -> dict[str, Resource]:
        """What each queue's jobs hold, in one pass over the jobs (not one pass per queue); with a store
        (`carry.py`), over the jobs that changed since the last session, the others' part kept."""
        changes = self.changes
        store = changes.store("results:allocated") if changes.keeps else {}
        closing = changes.closing
        kept: dict[str, tuple[str, Resource]] | None = store.get("jobs")
        totals: dict[str, Resource] | None = store.get("totals")
        if closing is None or kept is None or totals is None:
            kept, totals = {}, {}
            keeps = changes.keeps
            for job in self._jobs.values():
                held = job.allocated()
                if not held.is_zero():
                    if keeps:
                        kept[job.key] = (job.queue, held)
                    totals[job.queue] = totals.get(job.queue, ZERO) + held
        else:
            # what went and came, per queue, summed in one pass each; a job holding what it held (its PodGroup's
            # status written, say) changes no sum
            went: dict[str, list[Resource]] = {}
            came: dict[str, list[Resource]] = {}
            for key in closing:  # (gone jobs are among them: they changed since the last session)
                old = kept.get(key)
                now = self._jobs.get(key)
                holds: Resource | None = now.allocated() if now is not None else None
                if holds is not None and holds.is_zero():
                    holds = None
                if (old is not None and holds is not None and now is not None and old[0] == now.queue
                        and (old[1] is holds or old[1] == holds)):
                    continue
                if old is not None:
                    del kept[key]
                    went.setdefault(old[0], []).append(old[1])
                if holds is not None and now is not None:
                    kept[key] = (now.queue, holds)
                    came.setdefault(now.queue, []).append(holds)
            for queue in went.keys() | came.keys():
                totals[queue] = (totals.get(queue, ZERO) - Resource.total(went.get(queue, ()))
                                 + Resource.total(came.get(queue, ())))
        if changes.keeps:
            store["jobs"], store["totals"] = kept, totals
        return {queue: total for queue, total in totals.items() if not total.is_zero()}

    # ---- close ----------------------------------------------------------------------------------------
    def _with_notice(self, eviction: Eviction) -> Eviction:
        """The eviction with its victim's queue's notice (api/evictions.py), which the evictor gives first."""
        job = self._jobs.get(eviction.job)
        queue = self._queues.get(job.queue) if job is not None else None
        notice = queue.eviction_notice if queue is not None else 0.0
        return replace(eviction, notice=notice) if notice else eviction

    def look_again(self, at: float) -> None:
        """A rule held something back until `at` (CycleResult.look_again: the earliest is kept)."""
        if self._look_again is None or at < self._look_again:
            self._look_again = at

    def ungate(self, task: TaskInfo) -> None:
        """Remove the task's queue-allocation gate after the cycle (CycleResult.ungate)."""
        self._ungate[task.key] = None

    def close(self, requests: StatementBackEnd, timings: dict[str, float]) -> CycleResult:
        """The cycle's result: the committed requests, the events, and every status that changed."""
        for uid, fault in self._faults.items():
            job = self._jobs[uid]
            condition = unschedulable_condition(SCHEDULER_ERROR, fault)
            self.set_condition(job, condition, fault)
            if condition not in job.conditions:
                self.event("PodGroup", uid, "Warning", SCHEDULER_ERROR, condition.message)
        closing = self.changes.closing  # (the session worked it out before its plugins closed)
        if closing is not None and not self.marked <= closing:
            closing = self.changes.closing = closing | self.marked
        result = CycleResult(
            binds=requests.gang_binds(),
            evictions=[self._with_notice(e) for e in requests.evictions()],
            events=list(self._events),
            timings=timings,
            counters=self._counters,
            annotations=requests.annotations(),
            ungate=list(self._ungate),
            podgroup_annotations={uid: dict(patch) for uid, patch in self._pg_annotations.items()},
            look_again=self._look_again,
            deferred=tuple(self._deferred),
        )
        binding: dict[str, int] = {}
        for gang in result.binds:
            binding[gang.job] = binding.get(gang.job, 0) + len(gang.binds)
        # A job whose state is as read, for which this session set what the last one set (nothing, or the very
        # condition: a gang that lost pods is told it is Unschedulable every cycle), has the status it had at the
        # last session's close if it had the same state then: one that was not written then is not now
        # (`carry.py`). `quiet` keeps, per such job, what the session set (`_set_for`).
        keeps = self.changes.keeps
        quiet: dict[str, tuple[object, ...] | None] = self.changes.store("results:quiet") if keeps else {}
        ours = self._conditions.keys() | self._extra_conditions.keys() | self._overrides.keys() | binding.keys()
        jobs: Iterable[JobInfo] = self._jobs.values()
        skip: set[str] = set()
        if closing is not None:
            for key in self.changes.since or ():
                if key not in self._jobs:
                    quiet.pop(key, None)
            settled = quiet.keys() - closing
            skip = {key for key in settled - ours - self._carried.keys() if quiet[key] is None}
            skip.update(key for key in settled & ours if quiet[key] == self._set_for(key))
            carried = self._carried
            skip.update(key for key in (settled & carried.keys()) - ours
                        if quiet[key] == (*carried[key], (), None))
            if skip:
                jobs = [job for key, job in self._jobs.items() if key not in skip]
        for key in self._carried.keys() - skip:
            condition, reason = self._carried[key]  # worked out below: the condition it was given again
            if key not in self._conditions:
                self._conditions[key] = condition
                if reason is not None:
                    self._published[key] = reason
        ours |= self._carried.keys()
        for job in jobs:
            before_phase, before_conditions = self._original.get(job.key) or (job.phase, job.conditions)
            status = self._podgroup_status(job, binding.get(job.key, 0), (before_phase, before_conditions))
            if (status.phase != before_phase or status.conditions != before_conditions or _counts_changed(job)
                    or status.phase_when_bound not in (None, before_phase)):
                result.podgroups.append(status)
                if keeps:
                    quiet.pop(job.key, None)
            elif not keeps:
                continue
            elif self.changes.clean(job):
                quiet[job.key] = self._set_for(job.key) if job.key in ours else None
            else:
                quiet.pop(job.key, None)
        allocated = self.allocated_by_queue()
        for queue in self._queues.values():
            queue_status = QueueStatus(queue.name, allocated.get(queue.name, ZERO), *self._shares.get(queue.name, ()))
            usage = self._usage.get(queue.name)
            result.queues.append(queue_status if usage is None else replace(queue_status, usage=usage))
        return result

    def _set_for(self, key: str) -> tuple[object, ...]:
        """Everything this session set that `_podgroup_status` reads for the job besides the job itself (binds
        aside: a job with binds is not as read)."""
        extra = self._extra_conditions.get(key)
        return (self._conditions.get(key), self._published.get(key), tuple(extra) if extra else (),
                self._overrides.get(key))

    def _podgroup_status(self, job: JobInfo, binding: int = 0,
                         base: tuple[PodGroupPhase | None, tuple[Condition, ...]] | None = None) -> PodGroupStatus:
        """`binding`: how many of the job's pods this cycle's result binds; `base`: the phase and conditions it
        was worked out from (`PodGroupStatus.base`)."""
        condition = self._conditions.get(job.key)
        conditions = merge_condition(job.conditions, condition) if condition else job.conditions
        for extra in self._extra_conditions.get(job.key, ()):
            conditions = merge_condition(conditions, extra)
        running = job.count(TaskStatus.RUNNING)
        unschedulable_now = condition is not None and condition.type == "Unschedulable"
        phase = podgroup_phase(job, running, unschedulable_now)
        when_bound = podgroup_phase(job, running, unschedulable_now, binding) if binding else phase
        job.set_phase(phase)
        return PodGroupStatus(
            job.key,
            phase,
            conditions,
            running,
            job.count(TaskStatus.SUCCEEDED),
            job.count(TaskStatus.FAILED),
            self._overrides.get(job.key, job.extra.get("minMemberOverride")),
            decision=self._published.get(job.key) if unschedulable_now else None,
            phase_when_bound=when_bound if when_bound != phase else None,
            base=base,
        )


def _counts_changed(job: JobInfo) -> bool:
    now = (job.count(TaskStatus.RUNNING), job.count(TaskStatus.SUCCEEDED), job.count(TaskStatus.FAILED))
    return now != job.reported_counts


def merge_condition(existing: tuple[Condition, ...], new: Condition) -> tuple[Condition, ...]:
    """One condition per type; the newest replaces the old; Scheduled and Unschedulable exclude each other."""
    opposite = {"Scheduled": "Unschedulable", "Unschedulable": "Scheduled"}.get(new.type)
    kept = tuple(c for c in existing if c.type not in (new.type, opposite))
    return (*kept, new)


def podgroup_phase(job: JobInfo, running: int, unschedulable_now: bool, binding: int = 0) -> PodGroupPhase:
    """The PodGroup's phase at session close, by Volcano's rule (pkg/scheduler/framework/session.go,
    getPodGroupPhase): running pods and an Unschedulable condition set this session make it Unknown; at least
    minMember pods on nodes (running, bound, finished, or releasing from a node) make it Running, or Completed
    when all of those have finished; otherwise it stays Inqueue if it was, and is Pending in every other case
    (a running gang that lost pods below minMember goes back to Pending and is admitted again). `binding`: pods
    this cycle binds, counted as bound (the phase once the binds have landed, as the next cycle would compute it)."""
    if running and unschedulable_now:
        return PodGroupPhase.UNKNOWN
    completed = job.count(TaskStatus.SUCCEEDED, TaskStatus.FAILED)
    scheduled = job.count(TaskStatus.RUNNING, TaskStatus.BOUND) + completed
    scheduled += sum(1 for t in job.with_status(TaskStatus.RELEASING) if t.node_name) + binding
    if job.tasks and scheduled >= job.min_available:
        return PodGroupPhase.COMPLETED if scheduled == completed else PodGroupPhase.RUNNING
    return PodGroupPhase.INQUEUE if job.phase == PodGroupPhase.INQUEUE else PodGroupPhase.PENDING
