"""Layer `actions`: `preempt` — within a queue, a starving higher-priority job evicts lower-priority tasks.

1. Preemptors: admitted jobs with pending tasks that JobValid accepts and JobStarving calls starving (the gang
   plugin: not yet pipelined; the priority plugin: an elastic job short of its replicas).
2. Per queue, preemptor jobs in JobOrder; each gets one Statement. For each pending task in TaskOrder, find the
   node where the cheapest set of victims makes room (victims: running tasks of other jobs in the same queue
   that the Preemptable plugins agree on, never a non-preemptable pod; the gang plugin keeps each job's
   minAvailable where its Preemptable is enabled, as in Volcano, whose CI conf turns it off), evict them lowest
   priority first until the task fits the node's future idle, and pipeline the task there. A task that fits
   nowhere ends the job's turn.
   With preempt's `enableTopologyAwarePreemption: true` (a `configurations` argument, as in Volcano), a node
   that only the task's dynamic predicates turn away (a pod it repels, a spread constraint, a host port) is a
   candidate too: victims are taken until the task fits there and those predicates pass, then the ones it does
   not need are given back, highest priority first.
3. Commit the Statement only if the job is then pipelined (JobPipelined): evictions happen only together with
   the preemptor's placement. Otherwise discard it, and nothing is evicted.

A pending task with `preemptionPolicy: Never` is skipped in both preempt and reclaim (it may still be placed by
allocate where there is room); its job's other tasks go on. Volcano checks this in these two legacy actions only.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import numpy as np

from scheduler.actions.allocate import pending_tasks, schedulable_jobs
from scheduler.actions.base import guarded, round_robin
from scheduler.actions.subgroups import sub_group_job
from scheduler.api.job import JobInfo, TaskInfo
from scheduler.api.node import NodeInfo
from scheduler.api.phases import TaskStatus
from scheduler.api.queue import QueueInfo
from scheduler.api.resources import ZERO, Resource
from scheduler.api.snapshot import EvictCause
from scheduler.framework import points as P
from scheduler.framework.conf_args import as_bool
from scheduler.framework.evictable import EvictionContext, EvictionKind
from scheduler.framework.order import default_task_key
from scheduler.framework.session import Session
from scheduler.framework.statement import Statement
from scheduler.framework.victims import running_candidates, victim_order

ACTIONS = {"preempted": "preempt", "reclaimed": "reclaim"}  # the verb a plan is told with -> its action's name
LEGACY_RULE = "lowest priority first"  # the victims' order of the legacy actions (framework/victims.py)

Eligible = Callable[[TaskInfo], bool]
PREEMPTABLE_STATUSES = frozenset({TaskStatus.BOUND, TaskStatus.RUNNING})  # Volcano's PreemptableStatus


TOPOLOGY_AWARE = "enableTopologyAwarePreemption"  # preempt's configurations argument, as Volcano's


def topology_aware(ssn: Session) -> bool:
    return as_bool((ssn.conf.configurations.get("preempt") or {}).get(TOPOLOGY_AWARE)) is True


def starving_jobs(ssn: Session) -> list[JobInfo]:
    return guarded(ssn, schedulable_jobs(ssn), lambda job: ssn.tiers.run(P.JOB_STARVING, job))


def filtered(ssn: Session, kind: EvictionKind, job: JobInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
    """The victim filters beyond Volcano's (`points.VICTIM_FILTER`: minimum runtime, victim cost), asked last by
    every evicting action; not asked at all when no plugin serves them (a Volcano conf)."""
    if not candidates or not ssn.tiers.has(P.VICTIM_FILTER):
        return list(candidates)
    return ssn.tiers.run(P.VICTIM_FILTER, EvictionContext(kind, job), candidates)


def _offered(
    ssn: Session, point: P.VictimsPoint, preemptor: TaskInfo, node: NodeInfo, eligible: Eligible,
) -> list[TaskInfo] | None:
    """The running tasks on `node` the victim plugins and guards offer for `preemptor`, lowest priority first;
    None when no task there is eligible at all."""
    candidates = sorted(
        (t for t in running_candidates(node.tasks.values()) if eligible(t)), key=lambda t: victim_order(t, ssn.jobs)
    )
    if not candidates:
        return None
    agreed = {id(t) for t in ssn.tiers.run(point, preemptor, candidates)}
    guard = P.PREEMPT_GUARD if point is P.PREEMPTABLE else P.RECLAIM_GUARD
    kept = ssn.tiers.run(guard, [t for t in candidates if id(t) in agreed], preemptor)
    kind = EvictionKind.PREEMPT if point is P.PREEMPTABLE else EvictionKind.RECLAIM
    return filtered(ssn, kind, ssn.jobs[preemptor.job], kept)


def _room_on(
    ssn: Session, point: P.VictimsPoint, preemptor: TaskInfo, node: NodeInfo, eligible: Eligible,
    held_back: Callable[[TaskInfo], bool] | None = None,
) -> list[TaskInfo] | None:
    """The victims on `node` that make room for `preemptor` (lowest priority first), or None if none suffice.

    `held_back` (reclaim, when the reclaimer's queue cannot take the task now: a limit above it, such as an
    ancestor queue's capability, holds it back although nodes have space) is that queue check: victims are then
    taken until it lets the task in, as their evictions would leave it (tried in a statement that is undone)."""
    request = preemptor.resreq
    if held_back is None and request <= node.future_idle():
        return []
    ordered = _offered(ssn, point, preemptor, node, eligible)
    if ordered is None:
        return None
    chosen: list[TaskInfo] = []
    freed = ZERO
    for victim in ordered:
        chosen.append(victim)
        freed = freed + victim.resreq
        if request <= node.future_idle() + freed and (
            held_back is None or _fits_without(ssn, chosen, preemptor, held_back)
        ):
            return chosen
    return None


def _room_resolving(
    ssn: Session, point: P.VictimsPoint, preemptor: TaskInfo, node: NodeInfo, eligible: Eligible,
) -> list[TaskInfo] | None:
    """Topology-aware preemption, for a node the task's dynamic predicates (pod anti-affinity, spread, host
    ports) turn away: evict candidates lowest priority first until the task fits the node's future idle and its
    dynamic predicates pass, then give back, highest priority first, each victim the task does not need (Volcano's
    `enableTopologyAwarePreemption`, actions/preempt/preempt.go SelectVictimsOnNode, after kube-scheduler's
    DryRunPreemption). Tried in statements that are undone; None if no set of victims makes the node fit."""
    ordered = _offered(ssn, point, preemptor, node, eligible)
    if ordered is None:
        return None

    def fits_without(victims: Sequence[TaskInfo]) -> bool:
        trial = ssn.statement()
        for victim in victims:
            trial.evict(victim, "")
        fits = preemptor.resreq <= node.future_idle() and ssn.tiers.run(
            P.DYNAMIC_PREDICATE, preemptor, [node])[0].ok
        trial.discard()
        return fits

    needed = next((list(ordered[:n]) for n in range(1, len(ordered) + 1) if fits_without(ordered[:n])), None)
    if needed is None:
        return None
    for victim in reversed(list(needed)):  # reprieve the highest priority first
        rest = [v for v in needed if v is not victim]
        if fits_without(rest):
            needed = rest
    return needed


def _fits_without(
    ssn: Session, victims: list[TaskInfo], preemptor: TaskInfo, queue_fits: Callable[[TaskInfo], bool]
) -> bool:
    trial = ssn.statement()
    for victim in victims:
        trial.evict(victim, "")
    fits = queue_fits(preemptor)
    trial.discard()
    return fits


def _cost(ssn: Session, victims: Sequence[TaskInfo]) -> tuple[int, int, int]:
    """Cheaper first: no victims, then the lowest highest-priority victim, then the fewest victims."""
    if not victims:
        return (0, -(2**62), 0)
    return (1, max(victim_order(v, ssn.jobs)[0] for v in victims), len(victims))


def make_room(
    ssn: Session, stmt: Statement, preemptor: TaskInfo, point: P.VictimsPoint, eligible: Eligible, verb: str,
    queue_fits: Callable[[TaskInfo], bool] | None = None,
) -> bool:
    """Evict the cheapest victims that let `preemptor` fit on one node and pipeline it there, in `stmt`."""
    best: tuple[tuple[int, int, int], str, NodeInfo, list[TaskInfo]] | None = None
    held_back = queue_fits if queue_fits is not None and not queue_fits(preemptor) else None  # asked once
    feasible = ssn.fit.feasible_nodes(preemptor)
    resolvable: list[NodeInfo] = []
    if point is P.PREEMPTABLE and preemptor.constraints.dynamic and topology_aware(ssn):
        allowed = {n.name for n in feasible}
        resolvable = [n for n in ssn.fit.static_feasible_nodes(preemptor) if n.name not in allowed]
    resolving = {n.name for n in resolvable}
    for node in (*feasible, *resolvable):
        if node.name in resolving:
            victims = _room_resolving(ssn, point, preemptor, node, eligible)
        else:
            victims = _room_on(ssn, point, preemptor, node, eligible, held_back)
        if victims is None:
            continue
        key = (_cost(ssn, victims), node.name, node, victims)
        if best is None or key[:2] < best[:2]:
            best = key
    if best is None:
        return False
    _, _, node, victims = best
    job = ssn.jobs[preemptor.job]
    action = ACTIONS.get(verb, verb)
    for victim in victims:
        owner = ssn.jobs.get(victim.job)
        # The victim's gang is broken when, without this pod, fewer than its minimum are ready (a victim is ready
        # until the Statement marks it releasing, so earlier evictions of this plan already count).
        broken = owner is not None and owner.ready_task_num() - 1 < owner.min_available
        stmt.evict(victim, f"{verb} by {job.key} (priority {job.priority}) for its task {preemptor.key}",
                   EvictCause(action, job.key, LEGACY_RULE, breaks_gang=broken))
    stmt.pipeline(preemptor, node)
    return True


def commit_or_discard(ssn: Session, stmt: Statement, job: JobInfo, reason: str, *,
                      require_pipelined: bool = True) -> bool:
    """Commit only if the job is pipelined now; announce each eviction on the victim pod."""
    if not len(stmt) or require_pipelined and ssn.tiers.run(P.JOB_PIPELINED, job).rejected:
        stmt.discard()
        return False
    evicted = [op for op in stmt.operations if op.kind == "evict"]
    stmt.commit()
    if evicted:  # volcano_eviction_transactions_total, as Volcano's RegisterEvictionTransaction
        ssn.results.count(f"eviction_transactions:{reason}")
    for op in evicted:
        ssn.results.event("Pod", op.task.key, "Warning", reason, op.reason)
    return True


def preempt_job(ssn: Session, job: JobInfo, eligible: Eligible, point: P.VictimsPoint, verb: str, reason: str,
                admit: Callable[[TaskInfo], bool] | None = None,
                queue_fits: Callable[[TaskInfo], bool] | None = None) -> bool:
    stmt = ssn.statement()
    for task in job.minimums_first(ssn.order.task_order(pending_tasks(job))):
        if task.preempt_never:
            # `preemptionPolicy: Never`: this task evicts no one; the job's other tasks still may (Volcano checks
            # it per task, first: actions/preempt/preempt.go taskEligibleToPreempt, actions/reclaim/reclaim.go).
            continue
        if admit is not None and not admit(task):
            break
        if not make_room(ssn, stmt, task, point, eligible, verb, queue_fits):
            break
        if not ssn.tiers.run(P.JOB_PIPELINED, job).rejected and not ssn.tiers.run(P.JOB_STARVING, job):
            break
    return commit_or_discard(ssn, stmt, job, reason)


class Preempt:
    """Volcano's legacy preempt (pkg/scheduler/actions/preempt/preempt.go, Execute): see the module doc."""

    name = "preempt"

    def execute(self, ssn: Session) -> None:
        # 1.
        by_queue: dict[str, list[JobInfo]] = {}
        for job in starving_jobs(ssn):
            if job.extra.get("networkTopology") or sub_group_job(job):  # Volcano: "jobs containing
                continue  # networkTopology do not support preemption" (volcano-sh/volcano#4374)
            by_queue.setdefault(job.queue, []).append(job)
        # 2.
        for queue, job, _ in round_robin(ssn, by_queue):
            with ssn.guard(job):  # a plugin failing on this job costs this job alone (framework/faults.py)
                self.preempt_for(ssn, queue, job)
        # 4. within a job, queue by queue (Volcano runs it after each queue's jobs)
        for name, jobs in by_queue.items():
            for job in jobs:
                with ssn.guard(job):
                    within_job(ssn, ssn.queues[name], job)

    @staticmethod
    def preempt_for(ssn: Session, queue: QueueInfo, job: JobInfo) -> bool:
        if topology_aware(ssn):
            def eligible(victim: TaskInfo) -> bool:
                owner = ssn.jobs.get(victim.job)
                return owner is not None and owner.queue == queue.name and owner.key != job.key

            return preempt_job(ssn, job, eligible, P.PREEMPTABLE, "preempted", "Preempted")
        # 3.
        stmt = ssn.statement()
        for task in ssn.order.task_order(preemptor_tasks(job)):
            if not ssn.tiers.run(P.JOB_STARVING, job):
                break
            normal_preempt(ssn, stmt, queue, task, other_jobs_of_queue(ssn, job, task))
        return commit_or_discard(ssn, stmt, job, "Preempted")


def preemptor_tasks(job: JobInfo) -> list[TaskInfo]:
    """The job's pending tasks that are not scheduling-gated (Volcano takes BestEffort ones too)."""
    return [t for t in job.with_status(TaskStatus.PENDING) if not t.gated]


def may_preempt(task: TaskInfo) -> bool:
    """Volcano's taskEligibleToPreempt: a pod whose preemptionPolicy is Never does not preempt."""
    return not task.preempt_never


def _victim_filter(task: TaskInfo, same: Callable[[TaskInfo], bool]) -> Eligible:
    def eligible(victim: TaskInfo) -> bool:
        return (victim.status in PREEMPTABLE_STATUSES and victim.preemptable
                and not (task.best_effort and not victim.best_effort) and same(victim))
    return eligible


def other_jobs_of_queue(ssn: Session, job: JobInfo, task: TaskInfo) -> Eligible:
    def same(victim: TaskInfo) -> bool:
        owner = ssn.jobs.get(victim.job)
        return owner is not None and owner.queue == job.queue and owner.key != job.key
    return _victim_filter(task, same)


def within_job(ssn: Session, queue: QueueInfo, job: JobInfo) -> None:
    """Volcano's "preemption between tasks within a job": each pending task, in TaskOrder, may evict the job's
    own tasks the victim plugins allow (priority: of a lower task priority); one Statement per task, kept only
    if the task was placed; the first task that cannot be placed ends the job's turn."""
    for task in ssn.order.task_order(preemptor_tasks(job)):
        stmt = ssn.statement()
        if not normal_preempt(ssn, stmt, queue, task, _victim_filter(task, lambda v: v.job == job.key)):
            stmt.discard()
            break
        commit_or_discard(ssn, stmt, job, "Preempted", require_pipelined=False)


def volcano_victim_order(ssn: Session, victims: Sequence[TaskInfo]) -> list[TaskInfo]:
    """Volcano's BuildVictimsPriorityQueue (framework/session_plugins.go): tasks of one job in reverse TaskOrder;
    of two jobs, reverse JobOrder as the plugins decide it (no creation fallback), then reverse TaskOrder."""
    def task_less(a: TaskInfo, b: TaskInfo) -> bool:
        decided = ssn.tiers.run(P.TASK_ORDER, a, b)
        if decided:
            return decided < 0
        return default_task_key(a) < default_task_key(b)

    def first(a: TaskInfo, b: TaskInfo) -> bool:
        if a.job != b.job:
            ja, jb = ssn.jobs.get(a.job), ssn.jobs.get(b.job)
            if ja is None or jb is None:
                return ja is None and jb is not None or (ja is None and jb is None and not task_less(a, b))
            decided = ssn.tiers.run(P.JOB_ORDER, ja, jb)
            if decided:
                return decided > 0
        return not task_less(a, b)

    def compare(a: TaskInfo, b: TaskInfo) -> int:
        return -1 if first(a, b) else (1 if first(b, a) else 0)

    return sorted(victims, key=functools.cmp_to_key(compare))


def normal_preempt(ssn: Session, stmt: Statement, queue: QueueInfo, preemptor: TaskInfo,
                   eligible: Eligible) -> bool:
    """Volcano's normalPreempt: the feasible nodes by score, best first; on each, the victims the plugins offer
    (in victim order) must be able to make room at all (ValidateVictims); they are evicted one by one until the
    preemptor fits (its queue's Allocatable, the node's future idle, the node's predicates), and it is pipelined
    there. A node where it does not fit is given back; the first node where it fits wins."""
    if not may_preempt(preemptor):
        return False
    nodes = ssn.fit.feasible_nodes(preemptor)
    if not nodes:
        return False
    position = ssn.arrays.position
    scores = ssn.fit.node_scores(preemptor, np.fromiter((position[n.name] for n in nodes), dtype=np.int64,
                                                        count=len(nodes)))
    ranked = [n for _, _, n in sorted(zip((-s for s in scores.tolist()), (n.name for n in nodes), nodes,
                                          strict=True), key=lambda x: (x[0], x[1]))]
    job = ssn.jobs[preemptor.job]

    def fits(node: NodeInfo) -> bool:
        return (ssn.tiers.run(P.ALLOCATABLE, queue, preemptor).ok and preemptor.resreq <= node.future_idle()
                and (not preemptor.constraints.dynamic
                     or ssn.tiers.run(P.DYNAMIC_PREDICATE, preemptor, [node])[0].ok))

    for node in ranked:
        candidates = volcano_victim_order(ssn, [t for t in node.tasks.values() if eligible(t)])
        offered: list[TaskInfo] = []
        if candidates:
            agreed = {id(t) for t in ssn.tiers.run(P.PREEMPTABLE, preemptor, candidates)}
            offered = ssn.tiers.run(P.PREEMPT_GUARD, [t for t in candidates if id(t) in agreed], preemptor)
            offered = filtered(ssn, EvictionKind.PREEMPT, job, offered)
        if not preemptor.resreq <= node.future_idle() + Resource.total(v.resreq for v in offered):
            continue  # ValidateVictims
        mark = stmt.mark()
        for victim in offered:
            if fits(node):
                break
            owner = ssn.jobs.get(victim.job)
            breaks = owner is not None and owner.ready_task_num() <= owner.min_available
            stmt.evict(victim, f"preempted by {job.key} (priority {job.priority}) for its task {preemptor.key}",
                       EvictCause("preempt", job.key, LEGACY_RULE, breaks_gang=breaks))
        if fits(node):
            stmt.pipeline(preemptor, node)
            return True
        stmt.rollback(mark)
    return False
