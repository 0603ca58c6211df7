"""Layer `actions`: `allocate` places whole gangs, or nothing.

1. Take the jobs that left Pending and have pending tasks; drop (with a condition) those JobValid rejects.
   Without `enqueue` in the actions, every Pending job is moved to Inqueue first, as in Volcano.
2. Gangs found partly bound that never ran whole (a crash between binds, a failed bind) go first, ahead of
   queue order, so the resources they already hold are put to use. Then gangs that waited past
   `starvationThresholdSeconds` reserve what they need (the starvation guard, `actions/starvation.py`).
3. Visit queues by QueueOrder (skipping overused ones), jobs by JobOrder, tasks by TaskOrder. Each task goes
   to the best-scoring node among those its predicates allow and whose idle resources hold it; failing that,
   it is pipelined onto a node whose releasing resources will hold it. A task that fits nowhere ends the job's
   turn unless the job can still become ready without its role (Volcano's `NeedContinueAllocating`,
   pkg/scheduler/api/job_info.go); the rest of a failed role is skipped. A run of the job's identical tasks
   is placed at once where that makes the same binds as this loop does (`bulk.py`). With the feature gate
   SchedulingGatesQueueAdmission, a job's first turn starts with its opted-in pods held by Volcano's
   queue-allocation gate alone: each whose queue passes Allocatable loses its gate after the cycle (`ungate`).
4. Commit the job's statement only if JobReady; keep it as a reservation if JobPipelined; otherwise discard.
   A job that became ready with tasks left (minAvailable < replicas) is requeued for more after others. A ready
   job with a network topology takes each further pod from the gang placer (network-topology-aware: inside the
   job's search root, as Volcano's allocateForJob places it on every turn), pod by pod if the placer abstains.
5. A budget, beyond Volcano (whose allocate visits every job each cycle): with `maxBindsPerCycle: N` in
   allocate's `configurations` arguments, once the cycle has committed N binds no further job takes a turn (the
   job whose turn crossed N is placed whole: a gang is never split). The jobs left are deferred: no later action
   of the cycle takes them up (they were not tried: preempt must not evict for a job the free room may hold),
   their conditions are left as they are, and the next cycle starts at once (cache/runner.py) from the state
   this one left, in the same order. A cycle then binds about N pods, so its length, its apply and the time to
   its first binds stay bounded however many pods arrive at once (docs/configuration.md).
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Callable

from scheduler.actions.base import guarded, queue_missing, round_robin
from scheduler.actions.bulk import BulkPlacer
from scheduler.actions.domain_reserve import reserve_in_domain
from scheduler.actions.starvation import hold_idle, reserve, starving_gangs
from scheduler.actions.subgroups import SubGroupPlacer, sub_group_job
from scheduler.api.decision import Code, Status
from scheduler.api.job import JobInfo, TaskInfo
from scheduler.api.messages import render
from scheduler.api.node import NodeInfo
from scheduler.api.phases import PodGroupPhase, TaskStatus
from scheduler.api.queue import QueueInfo
from scheduler.api.reasons import (
    SCORE_VETO,
    NodeFilter,
    PlacementStale,
    QueueOverused,
    QueueShareExceeded,
    Reason,
    amounts,
)
from scheduler.framework import points as P
from scheduler.framework.conf_args import whole_number_or
from scheduler.framework.conf_values import SchedulerConf
from scheduler.framework.fit import FitErrors
from scheduler.framework.session import Session
from scheduler.framework.statement import Statement


def pending_tasks(job: JobInfo) -> list[TaskInfo]:
    return job.placeable()


def queue_gated(ssn: Session, job: JobInfo) -> list[TaskInfo]:
    """With SchedulingGatesQueueAdmission, the pending tasks whose only scheduling gate is Volcano's
    queue-allocation gate and that opted in to its removal (Volcano's allocate takes tasks gated by that gate
    alone and skips BestEffort ones, actions/allocate/allocate.go); none without the feature gate."""
    if not ssn.queue_allocation_gate:
        return []
    return [t for t in job.with_status(TaskStatus.PENDING)
            if t.only_queue_gate and t.queue_gate_opt_in and not t.best_effort]


def ungate(ssn: Session, queue: QueueInfo, job: JobInfo) -> None:
    """Volcano's queue admission by scheduling gates (actions/allocate/allocate.go): each gated task, in TaskOrder,
    whose queue passes Allocatable loses its gate after the cycle (never placed in this one); the capacity
    plugin then holds its room (plugins/capacity.py). A task the queue cannot take keeps its gate, and the job's
    condition says which limit. A pod with any other gate is never ungated (`TaskInfo.only_queue_gate`)."""
    for task in ssn.order.task_order(queue_gated(ssn, job)):
        allowed = ssn.tiers.run(P.ALLOCATABLE, queue, task)
        if allowed.ok:
            ssn.results.ungate(task)
        else:
            ssn.results.hold(job, _over_share(allowed, queue, task), first=True)


MAX_BINDS = "maxBindsPerCycle"  # allocate's argument: the cycle's budget of binds (step 5 above)
MAX_BINDS_TOP = 10_000_000


def binds_budget(conf: SchedulerConf) -> int | None:
    """The cycle's budget of binds (None: no bound, Volcano's allocate); a value that is not a whole number from
    1 to MAX_BINDS_TOP is no bound (`volcano-py conf check` and the conf loader name it)."""
    raw = (conf.configurations.get(Allocate.name) or {}).get(MAX_BINDS)
    if raw is None:
        return None
    return whole_number_or(raw, 0, 1, MAX_BINDS_TOP) or None


def schedulable_jobs(ssn: Session) -> list[JobInfo]:
    def schedulable(job: JobInfo) -> bool:
        if job.phase == PodGroupPhase.PENDING or not (job.has_placeable() or queue_gated(ssn, job)):
            return False
        if job.queue not in ssn.queues:
            ssn.results.hold(job, queue_missing(ssn, job, Allocate.name))
            return False
        return ssn.tiers.run(P.JOB_VALID, job).ok  # if not, the gang plugin reports why at close

    # A job with no pending task has nothing placeable nor queue-gated: it is left out before its guard (the same
    # answer, without a guarded call for each of the jobs that only run)
    pending = TaskStatus.PENDING
    return guarded(ssn, [job for job in ssn.jobs.values() if job.by_status.get(pending) and not ssn.deferred(job)],
                   schedulable)


VETOED = NodeFilter(SCORE_VETO)


def _held(code: Code, *reasons: Reason) -> Status:
    return Status(code, reasons, Allocate.name)


def _over_share(status: Status, queue: QueueInfo, task: TaskInfo) -> Status:
    """Allocatable's rejection, with the plugin's limit; a plugin that named none gets the task's request."""
    return status if status.reasons else _held(status.code, QueueShareExceeded(queue.name, amounts(task.resreq)))


def find_node(ssn: Session, task: TaskInfo) -> tuple[NodeInfo | None, bool]:
    """(node, pipelined): the best node whose idle holds the task, else one whose future idle will."""
    request = task.resreq
    best = ssn.fit.place_best(task)
    if best is not None:
        return best, False
    feasible = ssn.fit.feasible_nodes(task)
    future = [n for n in feasible if not n.releasing.is_zero() and request <= n.future_idle()]
    if future:
        return ssn.fit.best_node(task, future), True
    reasons: Counter[NodeFilter] = Counter(ssn.fit.static_rejections(task))
    reasons.update(ssn.fit.misfits(request, feasible, VETOED))  # VETOED: it fits, but a scorer said no
    for reason, count in reasons.items():
        ssn.fit.record_fit_error(task, reason, count)
    if ssn.trace:
        unavailable = FitErrors(reasons).unavailable(len(ssn.node_list))
        ssn.trace(f"task {task.name} (role {task.role or '-'}) fits no node: "
                  f"{render(unavailable) if unavailable else 'no node at all'}")
    return None, False


class Failures:
    """The tasks of one job that fit no node this session: their roles (Volcano skips the rest of a failed
    role, `JobInfo.TaskHasFitErrors`) and their shapes (a task identical in request and constraints cannot fit
    either while the nodes only fill up, so it is not tried again)."""

    __slots__ = ("roles", "shapes")

    def __init__(self) -> None:
        self.roles: set[str] = set()
        self.shapes: set[tuple[object, object]] = set()

    def add(self, task: TaskInfo) -> None:
        if task.role:
            self.roles.add(task.role)
        self.shapes.add((task.constraints, task.resreq))

    def covers(self, task: TaskInfo) -> bool:
        return bool(task.role) and task.role in self.roles or (task.constraints, task.resreq) in self.shapes


class _ReadyOrder:
    """A ready job's pending tasks in TaskOrder, sorted once in the action (Volcano's allocate keeps each job's
    task queue across the job's turns: actions/allocate/allocate.go), for the turns that place one task each.
    A ready job's tasks only leave PENDING (placed and committed) while allocate runs, so the placed ones are
    skipped where they stand: `start` is past the leading ones, `left` counts the pending ones (without it, every
    turn of a 100,000-pod elastic job sorted all its pending tasks again)."""

    __slots__ = ("tasks", "start", "left")

    def __init__(self, tasks: list[TaskInfo]) -> None:
        self.tasks, self.start, self.left = tasks, 0, len(tasks)

    def advance(self) -> None:
        tasks, start = self.tasks, self.start
        while start < len(tasks) and tasks[start].status is not TaskStatus.PENDING:
            start += 1
        self.start = start


class _Outcome(enum.Enum):
    PLACED = "placed"  # committed (and perhaps requeued for its extras)
    PIPELINED = "pipelined"  # kept as a pipelined statement, waiting for room being freed
    FAILED = "failed"  # discarded


def _defer_untried(ssn: Session, by_queue: dict[str, list[JobInfo]], turns: set[str]) -> None:
    """The jobs that had no turn yet, left for the next cycle (step 5); one a gate held already (an overused
    queue) keeps what the gate said."""
    for jobs in by_queue.values():
        for job in jobs:
            if job.key not in turns and ssn.results.held(job) is None and not ssn.faulted(job):
                ssn.results.defer(job)


class Allocate:
    name = "allocate"

    def __init__(self, *, bulk: bool = True) -> None:
        self._failed: dict[str, Failures] = {}
        self._ready: dict[str, _ReadyOrder] = {}
        self._ungated: set[str] = set()  # jobs whose queue-gated tasks were checked this cycle
        self.bulk = bulk  # place runs of a gang's identical tasks at once where that gives the same binds
        self._placer: BulkPlacer | None = None
        self._sub_groups: SubGroupPlacer | None = None  # jobs whose sub-groups have a hard topology
        self._hold_for = 0.0  # `starvationHoldIdle` in seconds, read once a cycle (0: off)

    def execute(self, ssn: Session) -> None:
        self._failed, self._ready, self._ungated = {}, {}, set()
        budget, spent = binds_budget(ssn.conf), ssn.binds_committed()
        placer = BulkPlacer(ssn.node_list, ssn.arrays, ssn.tiers, ssn.fit) if self.bulk else None
        self._placer = placer if placer is not None and placer.enabled else None
        self._sub_groups = SubGroupPlacer(ssn)
        self._hold_for = hold_idle(ssn.conf.configurations.get("allocate") or {})  # the starvation guard's hold
        # 1.
        if "enqueue" not in ssn.conf.actions:
            # Without an enqueue action nothing would ever admit a job: Volcano's allocate moves every Pending
            # PodGroup to Inqueue itself (actions/allocate/allocate.go, "no enqueue action is configured").
            for job in ssn.jobs.values():
                if job.phase == PodGroupPhase.PENDING:
                    ssn.results.set_phase(job, PodGroupPhase.INQUEUE)
        jobs = schedulable_jobs(ssn)
        # 2.
        # Only a gang that never ran whole (a crash or a failed bind between its binds): one that ran and lost
        # pods (an eviction broke it) waits its turn in JobOrder, as in Volcano, or it would take back the room
        # just made for its preemptor (differential preemption seeds 8, 12, ...: a second domain evicted).
        placeable = [j for j in jobs if j.has_placeable()]  # the others have only queue-gated tasks
        partial = guarded(ssn, placeable, lambda j: j.is_started() and not j.is_ready()
                          and j.phase not in (PodGroupPhase.RUNNING, PodGroupPhase.UNKNOWN))
        for job in sorted(partial, key=lambda j: (j.creation, j.key)):
            with ssn.guard(job):  # a plugin failing on this job costs this job alone (framework/faults.py)
                self._ungate_once(ssn, ssn.queues[job.queue], job)
                self.allocate_job(ssn, ssn.queues[job.queue], job, lambda _: None)
        starving = starving_gangs(ssn, [j for j in placeable if j not in partial and not ssn.faulted(j)])
        for job in starving:
            if not ssn.faulted(job):
                with ssn.guard(job):
                    self._ungate_once(ssn, ssn.queues[job.queue], job)
                    self.reserve_job(ssn, ssn.queues[job.queue], job)
        # 3.
        by_queue: dict[str, list[JobInfo]] = {}
        for job in jobs:
            if job not in partial and job not in starving:
                by_queue.setdefault(job.queue, []).append(job)
        turns: set[str] = set()
        for queue, job, requeue in round_robin(ssn, by_queue, skip_queue=lambda q: self._overused(ssn, q),
                                               jobs_change_only_when_out=True):
            if budget is not None and ssn.binds_committed() - spent >= budget:
                _defer_untried(ssn, by_queue, turns)
                break
            turns.add(job.key)
            with ssn.guard(job):
                self._ungate_once(ssn, queue, job)
                if job.has_placeable():
                    self.allocate_job(ssn, queue, job, requeue)

    def _ungate_once(self, ssn: Session, queue: QueueInfo, job: JobInfo) -> None:
        """`ungate` at the job's first turn of the action, ahead of its placeable tasks."""
        if job.key not in self._ungated:
            self._ungated.add(job.key)
            ungate(ssn, queue, job)

    @staticmethod
    def _overused(ssn: Session, queue: QueueInfo) -> bool:
        if not ssn.tiers.run(P.OVERUSED, queue):
            return False
        for job in ssn.jobs.values():
            if job.queue == queue.name and not job.is_ready():
                ssn.results.hold(job, _held(Code.UNSCHEDULABLE, QueueOverused(queue.name)), first=True)
        return True

    def allocate_job(
        self, ssn: Session, queue: QueueInfo, job: JobInfo, requeue: Callable[[JobInfo], None]
    ) -> None:
        if sub_group_job(job):  # each sub-group whole inside one domain, by the one placer that knows them
            (self._sub_groups or SubGroupPlacer(ssn)).place(queue, job, requeue)
            return
        was_ready = ssn.tiers.run(P.JOB_READY, job)
        if was_ready:  # one task per turn, in the order taken at its first ready turn
            order = self._ready.get(job.key)
            if order is None:
                order = self._ready[job.key] = _ReadyOrder(ssn.order.task_order(pending_tasks(job)))
            order.advance()
            if job.extra.get("networkTopology") and ssn.tiers.has(P.PLACE_GANG) \
                    and self._ready_by_placer(ssn, queue, job, order, requeue):
                return
            self._by_pod(ssn, queue, job, order.tasks, True, requeue, remember=True, ready=order)
            return
        known = ssn.fit.known_to_fail(job)
        if known is not None:
            if known.held is not None:  # e.g. a queue limit met on the way: the message stays whole
                ssn.results.hold(job, known.held, first=True)
            return
        tasks = ssn.order.task_order(pending_tasks(job))
        minimums_first = job.minimums_first(tasks)
        if not was_ready and ssn.tiers.has(P.PLACE_GANG):
            answer = ssn.tiers.run(P.PLACE_GANG, job, minimums_first)
            if not answer.status.abstained:
                if not answer.status.ok and reserve_in_domain(ssn, queue, job, tasks):
                    return  # kept as a reservation on room being released (`domain_reserve.py`)
                self.replay_placement(ssn, queue, job, ssn.statement(), answer, requeue)
                return
        # Volcano's order first (TaskOrder alone), so a job Volcano places is placed as Volcano places it; only if
        # that leaves the gang short, once more with each role's minimum first (`JobInfo.minimums_first`): the
        # extras of one role may have taken the room another role's minimum needed (CONFORMANCE.md).
        retry = not was_ready and minimums_first is not tasks
        if self._by_pod(ssn, queue, job, tasks, was_ready, requeue, remember=not retry) is _Outcome.FAILED and retry:
            self._failed[job.key] = Failures()
            self._by_pod(ssn, queue, job, minimums_first, was_ready, requeue, remember=True)

    def _ready_by_placer(self, ssn: Session, queue: QueueInfo, job: JobInfo, order: _ReadyOrder,
                         requeue: Callable[[JobInfo], None]) -> bool:
        """A ready job with a network topology takes its next pod where the gang placer puts it, as Volcano's
        allocate sends such a job through allocateForJob on every turn: network-topology-aware places it inside the
        job's search root (the HyperNode of its highestTierAllowed around the pods it holds, getSearchRoot), so a
        hard job's extras and replacements never land elsewhere. False if the placer abstains (pod by pod)."""
        failed = self._failed.setdefault(job.key, Failures())
        for task in order.tasks[order.start:]:
            if task.status is not TaskStatus.PENDING or failed.covers(task):
                continue
            allowed = ssn.tiers.run(P.ALLOCATABLE, queue, task)
            if not allowed.ok:
                ssn.results.hold(job, _over_share(allowed, queue, task), first=True)
                continue
            answer = ssn.tiers.run(P.PLACE_GANG, job, [task])
            if answer.status.abstained:
                return False
            if not answer.status.ok:  # no room inside the job's search root
                failed.add(task)
                ssn.results.hold(job, answer.status, first=True)
                if job.can_continue_after_failure(failed.roles):
                    continue
                return True
            self.replay_placement(ssn, queue, job, ssn.statement(), answer)
            if task.status is not TaskStatus.PENDING:
                order.left -= 1
                if order.left > 0:
                    requeue(job)
            return True
        return True

    def _by_pod(
        self, ssn: Session, queue: QueueInfo, job: JobInfo, tasks: list[TaskInfo], was_ready: bool,
        requeue: Callable[[JobInfo], None], *, remember: bool, ready: _ReadyOrder | None = None,
    ) -> _Outcome:
        """Place `tasks` one by one in this order (Volcano's allocate loop, steps 3 and 4 of `execute`); for a
        ready job, `ready` holds them from its first turn (placed ones skipped, `left` the pending count)."""
        stmt = ssn.statement()
        failed = self._failed.setdefault(job.key, Failures())
        bulk = self._placer if not was_ready else None
        index = -1 if ready is None else ready.start - 1
        seen = 0  # pending tasks met so far (a ready job's list holds placed ones too)
        while index + 1 < len(tasks):
            index += 1
            task = tasks[index]
            if ready is not None:
                if task.status is not TaskStatus.PENDING:
                    continue
                seen += 1
            if failed.covers(task):
                continue  # the same shape, or a task of a role that already fit nowhere this session
            if bulk is not None:  # a run of identical tasks placed at once, as this loop would (bulk.py)
                placed, turned_ready = bulk.place_run(stmt, queue, job, tasks, index)
                if turned_ready:
                    stmt.commit()
                    requeue(job)
                    return _Outcome.PLACED
                if placed:
                    index += placed - 1
                    continue
            allowed = ssn.tiers.run(P.ALLOCATABLE, queue, task)
            if not allowed.ok:
                ssn.results.hold(job, _over_share(allowed, queue, task), first=True)
                continue  # as Volcano: a smaller task of the job may still fit the queue
            node, pipelined = find_node(ssn, task)
            if node is None:
                failed.add(task)
                if remember and not was_ready and not len(stmt):
                    ssn.fit.remember_failure(job, pending_tasks(job), task, ssn.results.held(job))
                if job.can_continue_after_failure(failed.roles):
                    continue
                break
            if pipelined:
                stmt.pipeline(task, node)
            else:
                stmt.allocate(task, node)
            if ready is not None:
                more = seen < ready.left
                ready.left -= 1
            else:
                more = index + 1 < len(tasks)
            if more and (was_ready or ssn.tiers.run(P.JOB_READY, job)):
                # 4. Ready with more to place (an elastic job): bind what it has, let other jobs go first.
                stmt.commit()
                requeue(job)
                return _Outcome.PLACED
        # 4.
        if ssn.tiers.run(P.JOB_READY, job):
            stmt.commit()
            return _Outcome.PLACED
        if ssn.tiers.run(P.JOB_PIPELINED, job).rejected:
            stmt.discard()
            if remember and ssn.fit.errors(job) is not None:
                ssn.fit.remember_failure(job, pending_tasks(job), None, ssn.results.held(job))
            return _Outcome.FAILED
        return _Outcome.PIPELINED

    def reserve_job(self, ssn: Session, queue: QueueInfo, job: JobInfo) -> None:
        """The starvation guard: a gang placer's placement if it has one, else place or reserve pod by pod."""
        if self._overused(ssn, queue):
            return
        if sub_group_job(job):  # no reservation pod by pod: it could split a sub-group across domains
            (self._sub_groups or SubGroupPlacer(ssn)).place(queue, job)
            return
        declined = False
        if ssn.tiers.has(P.PLACE_GANG):
            answer = ssn.tiers.run(P.PLACE_GANG, job, job.minimums_first(ssn.order.task_order(pending_tasks(job))))
            if answer.status.ok:
                self.replay_placement(ssn, queue, job, ssn.statement(), answer)
                if job.is_ready():
                    return
            declined = not answer.status.abstained
        reserve(ssn, queue, job, pending_tasks(job), find_node, declined, self._hold_for)

    @staticmethod
    def replay_placement(
        ssn: Session, queue: QueueInfo, job: JobInfo, stmt: Statement, answer: P.GangAnswer,
        requeue: Callable[[JobInfo], None] | None = None,
    ) -> None:
        """Carry out a gang placer's answer through the Statement, re-checking every rule as it goes. Once the
        job is ready with assignments left (an elastic job), commit and requeue it, as pod-by-pod allocation
        does, so other jobs reach their minimums before this one takes its extras."""
        if not answer.status.ok:
            ssn.results.hold(job, answer.status)
            return
        # The placer groups identical tasks; replay in TaskOrder, minimums first, so the tasks of every role come
        # as pod-by-pod allocation would take them (a queue limit then falls on the extras, not on a minimum).
        where = {id(task): node for task, node in answer.assignments}
        ordered = job.minimums_first(ssn.order.task_order(task for task, _ in answer.assignments))
        assignments = [(task, where[id(task)]) for task in ordered]
        for index, (task, node) in enumerate(assignments):
            allowed = ssn.tiers.run(P.ALLOCATABLE, queue, task)
            if not allowed.ok:
                ssn.results.hold(job, _over_share(allowed, queue, task), first=True)
                continue  # as pod by pod: a smaller task may still fit the queue
            if not ssn.fit.is_feasible(task, node) or not task.resreq <= node.idle:
                ssn.results.hold(job, _held(Code.UNSCHEDULABLE, PlacementStale(task.name, node.name)), first=True)
                break
            stmt.allocate(task, node)
            if requeue is not None and index + 1 < len(assignments) and ssn.tiers.run(P.JOB_READY, job):
                stmt.commit()
                requeue(job)
                return
        if ssn.tiers.run(P.JOB_READY, job):
            stmt.commit()
        else:
            stmt.discard()
