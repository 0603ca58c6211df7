"""Layer `actions`: `gangpreempt` and `gangreclaim` — a starving gang takes room from whole bundles of victims.

Volcano's gang-aware eviction (pkg/scheduler/actions/gangpreempt/gangpreempt.go, gangreclaim/gangreclaim.go,
actions/utils/{bundle,simulate,util}.go), rule by rule:

1. Preemptors: jobs that left Pending, that JobValid accepts, whose queue exists, and that JobStarving calls
   starving. Queues are visited in QueueOrder (gangreclaim skips an overused queue), their preemptors in
   JobOrder; each gets one Statement.
2. What it needs: its pending tasks (not gated, requesting something) in TaskOrder, summed. gangreclaim first
   asks Preemptive whether the queue may take that much at all.
3. Where: the domains the `network-topology-aware` plugin gives a job with a hard network topology (HyperNodes
   of its allowed tiers that could hold its minResources, widest first, at most
   `hypernode.gradient.evict.max-hypernodes` of them; for a job that already holds a HyperNode, only those under
   its search root, Volcano's getSearchRoot), at most `maxDomains` (an argument, default 8); any other job looks
   at the whole cluster. Victims are taken only inside the domain being tried, so never outside the search root.
4. Victims, per domain: the running tasks there (gangpreempt: Bound or Running; gangreclaim: Running) that are
   preemptable, of a job whose PodGroup is not marked `volcano.sh/preemptable: false`, other than the preemptor:
   gangpreempt: of the preemptor's queue and of a lower-priority job; gangreclaim: of another queue that is
   reclaimable. They form bundles (`bundles.py`), sorted; the EVICTABLE plugins (`framework/evictable.py`) filter
   the flattened candidates; a whole bundle survives only whole; with `allowWholeBundle: false` whole bundles are
   dropped.
5. Bundles are added in order until the domain's future idle (idle plus what pods already releasing will free,
   less what is already promised to pipelined pods; each node's at least zero) plus what they free hold the need
   (Volcano sums idle and releasing, SumIdleAndReleasing: room promised to a pipelined pod is no room, and a plan
   cannot fit where this sum does not, so the plans it would try in vain are skipped); from then on, after each
   bundle, a plan is tried: the victims are evicted and each pending task is pipelined
   onto the best node of the domain that its predicates allow and whose future idle holds it (those whose idle
   holds it first), under Allocatable. Every task must find a node, and the job must then be pipelined. With
   allocate's `predicateErrorCacheEnable` (default true), a node that turned away one task of a role is not
   asked again for the role's other tasks in that plan. A failed plan is undone; the first that works is kept.
6. The Statement is committed only if the job is pipelined; otherwise discarded.

A job with sub-groups (`subGroupPolicy`) asks room for its sub-groups' pending pods and, in step 5, is pipelined
sub-group by sub-group, each hard sub-group inside a HyperNode of its own (`subgroup_eviction.py`), until the job
is pipelined: its minimum, in whole sub-groups, or nothing. Before any victim is looked for, such a job is tried in
each domain with none, on room already being released (`reserve`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from scheduler.actions.allocate import pending_tasks
from scheduler.actions.base import guarded
from scheduler.actions.bundles import Bundle, BundleKind, allowed_bundles, job_bundles, sort_bundles
from scheduler.actions.domain_reserve import hard_topology
from scheduler.actions.preempt import commit_or_discard, filtered
from scheduler.actions.subgroup_eviction import SubGroupEviction
from scheduler.actions.subgroups import sub_group_job
from scheduler.api.job import JobInfo, TaskInfo
from scheduler.api.node import NodeInfo
from scheduler.api.phases import PodGroupPhase, TaskStatus
from scheduler.api.queue import QueueInfo
from scheduler.api.resources import Resource
from scheduler.api.snapshot import EvictCause
from scheduler.framework import points as P
from scheduler.framework.conf_args import as_bool, whole_number_or
from scheduler.framework.evictable import CLUSTER_DOMAIN, Domain, EvictionContext, EvictionKind
from scheduler.framework.session import Session
from scheduler.framework.statement import Statement

MAX_DOMAINS = "maxDomains"
ALLOW_WHOLE_BUNDLE = "allowWholeBundle"
PREDICATE_ERROR_CACHE = "predicateErrorCacheEnable"  # an `allocate` argument, honoured here too
DEFAULT_MAX_DOMAINS = 8
T = TypeVar("T")
PREEMPTABLE_STATUSES = frozenset({TaskStatus.BOUND, TaskStatus.RUNNING})  # Volcano's PreemptableStatus


class GangEviction:
    """What gangpreempt and gangreclaim share; a subclass says whose tasks are candidates and how victim jobs
    are ordered."""

    name = ""
    kind = EvictionKind.GANG_PREEMPT
    verb = ""
    event_reason = ""

    def execute(self, ssn: Session) -> None:
        args = ssn.conf.configurations.get(self.name) or {}
        self.max_domains = whole_number_or(args.get(MAX_DOMAINS), DEFAULT_MAX_DOMAINS, 1, 1_000_000)
        whole = as_bool(args.get(ALLOW_WHOLE_BUNDLE))
        self.allow_whole = True if whole is None else whole
        cache = as_bool((ssn.conf.configurations.get("allocate") or {}).get(PREDICATE_ERROR_CACHE))
        self.error_cache = True if cache is None else cache
        self._sub_groups: SubGroupEviction | None = None
        # 1.
        queues: dict[str, QueueInfo] = {}
        preemptors: dict[str, list[JobInfo]] = {}

        def consider(job: JobInfo) -> bool:
            if job.phase == PodGroupPhase.PENDING or ssn.deferred(job) or ssn.tiers.run(P.JOB_VALID, job).rejected:
                return False
            queue = ssn.queues.get(job.queue)
            if queue is None:
                return False
            queues[queue.name] = queue
            return bool(ssn.tiers.run(P.JOB_STARVING, job))

        for job in guarded(ssn, ssn.jobs.values(), consider):
            preemptors.setdefault(job.queue, []).append(job)
        for queue in sorted(queues.values(), key=_cmp_key(ssn.order.queue_less)):
            if self.skip_queue(ssn, queue):
                continue
            for job in sorted(preemptors.get(queue.name, ()), key=_cmp_key(ssn.order.job_less)):
                with ssn.guard(job):
                    self.evict_for(ssn, queue, job)

    def skip_queue(self, ssn: Session, queue: QueueInfo) -> bool:
        return False

    def admits(self, ssn: Session, queue: QueueInfo, need: Resource) -> bool:
        return True

    def candidate(self, ssn: Session, preemptor: JobInfo, task: TaskInfo, owner: JobInfo) -> bool:
        raise NotImplementedError

    def victim_first(self, ssn: Session, preemptor: JobInfo) -> Callable[[JobInfo, JobInfo], bool]:
        raise NotImplementedError

    # ---- one preemptor -------------------------------------------------------------------------------
    def evict_for(self, ssn: Session, queue: QueueInfo, job: JobInfo) -> bool:
        stmt = ssn.statement()
        self.plan(ssn, stmt, queue, job)
        return commit_or_discard(ssn, stmt, job, self.event_reason)  # 6.: kept only if the job is pipelined

    def sub_groups(self, ssn: Session) -> SubGroupEviction:
        if self._sub_groups is None:
            self._sub_groups = SubGroupEviction(ssn, self.best_node)
        return self._sub_groups

    def plan(self, ssn: Session, stmt: Statement, queue: QueueInfo, job: JobInfo) -> None:
        # 2.
        if sub_group_job(job):
            pending = self.sub_groups(ssn).pending(job)
        else:
            pending = [t for t in ssn.order.task_order(pending_tasks(job)) if not t.resreq.is_zero()]
        if not pending:
            return
        need = Resource.total(t.resreq for t in pending)
        if not self.admits(ssn, queue, need):
            return
        # 3.
        domains = self.domains(ssn, job)
        if sub_group_job(job) and self.reserve(ssn, stmt, queue, job, domains):
            return
        for domain in domains:
            nodes = [ssn.nodes[name] for name in sorted(domain.nodes) if name in ssn.nodes]
            if not nodes:
                continue
            bundles = self.bundles(ssn, job, need, domain, nodes)
            if not bundles:
                continue
            room = Resource.total(n.future_idle().clamp_zero() for n in nodes)
            chosen: list[tuple[TaskInfo, Bundle]] = []
            for bundle in bundles:  # 5.
                chosen.extend((t, bundle) for t in bundle.tasks)
                room = room + bundle.local  # what the bundles chosen so far free, kept as a running sum
                if not need <= room:
                    continue
                if self.try_plan(ssn, stmt, queue, job, pending, domain, nodes, chosen):
                    return

    def reserve(self, ssn: Session, stmt: Statement, queue: QueueInfo, job: JobInfo, domains: list[Domain]) -> bool:
        """A job with sub-groups pipelined, with no victim, on room already being released (its victims of an
        earlier cycle terminating): Volcano's allocate pipelines a sub-job nominated by gang eviction onto future
        idle, so the job is not starving when gangpreempt comes; volcano-py's sub-group placer seats on idle room
        only, so this is done here. Without it the job looked starving while its victims terminated and took a
        second domain's victims every cycle."""
        for domain in domains:
            mark = stmt.mark()
            chosen = self.sub_groups(ssn).nominate(stmt, queue, job, domain.name, domain.nodes)
            if chosen is not None:
                if ssn.trace:
                    ssn.trace(f"{self.name}: {job.key} waits in {sorted(chosen.values())} on room being released")
                return True
            stmt.rollback(mark)
        return False

    def domains(self, ssn: Session, job: JobInfo) -> list[Domain]:
        everything = Domain(CLUSTER_DOMAIN, -1, frozenset(ssn.nodes))
        found = ssn.tiers.run(P.EVICT_DOMAINS, job) if ssn.tiers.has(P.EVICT_DOMAINS) else None
        if not isinstance(found, list):
            return [everything]
        if not found and not hard_topology(job):
            found = [everything]
        return found[: self.max_domains]

    def bundles(self, ssn: Session, job: JobInfo, need: Resource, domain: Domain,
                nodes: Sequence[NodeInfo]) -> list[Bundle]:
        """4."""
        by_job: dict[str, list[TaskInfo]] = {}
        for node in nodes:
            for task in node.tasks.values():
                owner = ssn.jobs.get(task.job)
                if (owner is None or not task.preemptable or owner.key == job.key
                        or owner.extra.get("preemptable") is False or not self.candidate(ssn, job, task, owner)):
                    continue
                by_job.setdefault(owner.key, []).append(task)
        bundles = [b for uid, tasks in by_job.items() for b in job_bundles(ssn.jobs[uid], tasks)]
        if not bundles:
            return []
        first = self.victim_first(ssn, job)
        ordered = sort_bundles(bundles, need, first)
        ctx = EvictionContext(self.kind, job, domain.name)
        evictable = ssn.tiers.run(P.EVICTABLE, ctx, [t for b in ordered for t in b.tasks])
        kept = filtered(ssn, self.kind, job, evictable)  # minruntime, victimcost: last, whatever tier answered
        allowed = {t.key for t in kept}
        if not allowed:
            return []
        valid = sort_bundles(allowed_bundles(ordered, allowed), need, first)
        if _reordered(evictable, kept):  # a victim cost (victimcost) orders the bundles, cheapest first
            rank = {t.key: i for i, t in enumerate(kept)}
            valid.sort(key=lambda b: min((rank[t.key] for t in b.tasks if t.key in rank), default=len(rank)))
        return [b for b in valid if b.kind == BundleKind.SAFE or self.allow_whole]

    def try_plan(self, ssn: Session, stmt: Statement, queue: QueueInfo, job: JobInfo, pending: list[TaskInfo],
                 domain: Domain, nodes: Sequence[NodeInfo], victims: list[tuple[TaskInfo, Bundle]]) -> bool:
        """Evict `victims` and pipeline every pending task in the domain (a job with sub-groups: sub-group by
        sub-group, `subgroup_eviction.py`); undone unless the job is then pipelined (Volcano's
        BuildNominationPlanInDomain)."""
        mark = stmt.mark()
        reason = f"{self.verb} by {job.key} (priority {job.priority})"
        for victim, bundle in victims:
            rule = "whole bundle" if bundle.kind == BundleKind.WHOLE else "safe bundle"
            cause = EvictCause(self.name, job.key, rule, breaks_gang=bundle.kind == BundleKind.WHOLE)
            stmt.evict(victim, f"{reason}: {rule} of {bundle.job.key}", cause)
        allowed = {n.name for n in nodes}
        if sub_group_job(job):
            chosen = self.sub_groups(ssn).nominate(stmt, queue, job, domain.name, frozenset(allowed))
            if chosen is not None:
                if ssn.trace:
                    ssn.trace(f"{self.name}: {job.key} in {domain.name}, sub-groups in {sorted(chosen.values())}")
                return True
            stmt.rollback(mark)
            return False
        turned_away: dict[tuple[str, str], set[str]] = {}
        for task in pending:
            if not ssn.tiers.run(P.ALLOCATABLE, queue, task).ok:
                break
            node = self.best_node(ssn, task, allowed, turned_away)
            if node is None:
                break
            stmt.pipeline(task, node)
        else:  # every pending task was pipelined
            if pending and not ssn.tiers.run(P.JOB_PIPELINED, job).rejected:
                return True
        stmt.rollback(mark)
        return False

    def best_node(self, ssn: Session, task: TaskInfo, allowed: set[str],
                  turned_away: dict[tuple[str, str], set[str]]) -> NodeInfo | None:
        """The node of `allowed` the task is pipelined on: its predicates pass and its future idle (idle plus
        releasing, less what is pipelined, this plan's earlier tasks included) holds the task; among those,
        the ones whose idle holds it first, then the rest, each by the session's node order (Volcano's
        simulatePredicate and prioritizeNodesForSimulate)."""
        key = (task.job, task.role)
        cached = self.error_cache and bool(task.role) and key in turned_away
        skip = turned_away.get(key, set()) if cached else set()
        idle: list[NodeInfo] = []
        future: list[NodeInfo] = []
        for node in ssn.fit.feasible_nodes(task):
            if node.name not in allowed or node.name in skip:
                continue
            if not task.resreq <= node.future_idle():
                # Volcano's simulatePredicate: idle is not lowered by what is pipelined, so a node whose idle
                # still holds the task may already be promised to the tasks pipelined before it in this plan
                if task.role:
                    turned_away.setdefault(key, set()).add(node.name)
                continue
            (idle if task.resreq <= node.idle else future).append(node)
        for group in (idle, future):
            if group:
                best = ssn.fit.best_node(task, group)
                if best is not None:
                    return best
        return None


def _reordered(given: Sequence[TaskInfo], kept: Sequence[TaskInfo]) -> bool:
    """Whether a victim filter changed the order of what it kept (not only left some out)."""
    position = {t.key: i for i, t in enumerate(given)}
    seen = [position.get(t.key, -1) for t in kept]
    return any(a > b for a, b in zip(seen, seen[1:], strict=False))


def _cmp_key(less: Callable[[T, T], bool]) -> Callable[[T], Any]:
    """A sort key from a strict `less` (Volcano's priority queues pop by such functions)."""
    return functools.cmp_to_key(lambda a, b: -1 if less(a, b) else (1 if less(b, a) else 0))


class GangPreempt(GangEviction):
    name = "gangpreempt"
    kind = EvictionKind.GANG_PREEMPT
    verb = "preempted"
    event_reason = "Preempted"

    def candidate(self, ssn: Session, preemptor: JobInfo, task: TaskInfo, owner: JobInfo) -> bool:
        return (task.status in PREEMPTABLE_STATUSES and owner.queue == preemptor.queue
                and preemptor.priority > owner.priority)

    def victim_first(self, ssn: Session, preemptor: JobInfo) -> Callable[[JobInfo, JobInfo], bool]:
        return lambda a, b: not ssn.order.job_less(a, b)  # the reverse of JobOrder


class GangReclaim(GangEviction):
    name = "gangreclaim"
    kind = EvictionKind.GANG_RECLAIM
    verb = "reclaimed"
    event_reason = "Reclaimed"

    def skip_queue(self, ssn: Session, queue: QueueInfo) -> bool:
        return bool(ssn.tiers.run(P.OVERUSED, queue))

    def admits(self, ssn: Session, queue: QueueInfo, need: Resource) -> bool:
        return not ssn.tiers.has(P.PREEMPTIVE) or bool(ssn.tiers.run(P.PREEMPTIVE, queue, need))

    def candidate(self, ssn: Session, preemptor: JobInfo, task: TaskInfo, owner: JobInfo) -> bool:
        if task.status != TaskStatus.RUNNING or owner.queue == preemptor.queue:
            return False
        victim_queue = ssn.queues.get(owner.queue)
        return victim_queue is not None and victim_queue.reclaimable

    def victim_first(self, ssn: Session, preemptor: JobInfo) -> Callable[[JobInfo, JobInfo], bool]:
        mine = ssn.queues[preemptor.queue]

        def first(a: JobInfo, b: JobInfo) -> bool:
            qa, qb = ssn.queues.get(a.queue), ssn.queues.get(b.queue)
            if qa is None or qb is None or qa.name == qb.name:
                return False
            decided = ssn.tiers.run(P.VICTIM_QUEUE_ORDER, qa, qb, mine)
            if decided:
                return decided < 0
            return not ssn.order.queue_less(qa, qb)

        return first
