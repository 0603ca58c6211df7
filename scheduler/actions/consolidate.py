"""Layer `actions`: `consolidate` — a pending gang whose room is scattered over half-used nodes gets it by moving
running jobs that may move, all of them or none.

A rule beyond Volcano's, after KAI-Scheduler's `consolidation` action (pkg/scheduler/actions/consolidation: a
scenario is kept only if every victim is placed again); off unless the conf's `actions` names it.

1. Preemptors: as for preempt (admitted, pending tasks, JobValid, JobStarving), whose queue is open, without
   sub-groups or a network topology; queues in QueueOrder, jobs in JobOrder. A job whose pending tasks ask for
   more than the whole cluster's free room (idle plus releasing, less what is promised) is skipped: moving
   frees nothing, it only gathers.
2. Candidates: running jobs other than the preemptor, every pod of them running or bound, marked movable
   (`movable.py`), and whose every pod the victim filters let go (`points.VICTIM_FILTER`: minruntime keeps a
   job within its minimum runtime; a job is a candidate only whole); with `maxLostGPUHoursPerMove`, only jobs
   whose move loses no more work than that (below). They are ordered by the nodes they free:
   nodes closest to holding the preemptor's largest pod first, the smaller jobs on a node first.
3. Plan, in one Statement: candidates are added in that order, within the bounds (below). After each, every pod
   of the move set is evicted, every pending pod of the preemptor is pipelined (on idle room first, then on room
   being released, with its predicates and its queue's Allocatable), and every pod of every moved job is placed
   again on room that is free now and stays free (idle, not released, not promised), with its predicates. The
   plan holds only if all of that succeeds and the preemptor is then pipelined (JobPipelined); otherwise it is
   undone and the next candidate is added. A plan that holds is pruned: each moved job is taken out again if the
   plan still holds without it.
4. Commit: the evictions (each with an `EvictCause`: `consolidate`, the preemptor, the move, so `explain`, the
   report and the simulator show it) and the preemptor's pipelined pods. Each moved job's new room is held
   (`holds.py`) until its recreated pods are placed there, and the preemptor's until its victims are gone and it
   is bound. A plan that does not hold evicts nothing.

Bounds (the action's arguments in `configurations`; out of range or unreadable: the default):
- `maxEvictionsPerCycle` (default 16, 1..10000): pods evicted by consolidate in one cycle, all plans together;
- `maxEvictionsPerJob` (default 8, 1..1000): pods evicted to make room for one pending job;
- `holdSeconds` (default 300, 1..3600): how long a moved job's room is held for it;
- `maxLostGPUHoursPerMove` (default: no bound; 1..1000000): the work a move may lose, in GPU-hours: the job's
  GPUs times the time since its last checkpoint (`volcano-py.io/last-checkpoint` on its pods), else since its
  start (`plugins/victimcost.lost_work`). A moved job restarts from there, so this bounds what each move costs
  (the simulated GPU day, docs/simulator.md: a move that loses more than it gains raises the load).
A plan that would pass a bound is not tried.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from scheduler.actions.allocate import pending_tasks
from scheduler.actions.base import round_robin
from scheduler.actions.domain_reserve import hard_topology
from scheduler.actions.holds import hold_room
from scheduler.actions.movable import movable
from scheduler.actions.preempt import filtered, starving_jobs
from scheduler.actions.subgroups import sub_group_job
from scheduler.api.job import JobInfo, TaskInfo
from scheduler.api.node import NodeInfo
from scheduler.api.phases import QueueState, TaskStatus
from scheduler.api.queue import QueueInfo
from scheduler.api.resources import GPU, ZERO, Resource
from scheduler.api.snapshot import EvictCause
from scheduler.framework import points as P
from scheduler.framework.conf_args import whole_number_or
from scheduler.framework.evictable import EvictionKind
from scheduler.framework.holds import HeldPod, Hold
from scheduler.framework.session import Session
from scheduler.framework.statement import Statement
from scheduler.plugins.victimcost import lost_work

log = logging.getLogger("volcano_py.actions.consolidate")

PER_CYCLE, PER_JOB, HOLD = "maxEvictionsPerCycle", "maxEvictionsPerJob", "holdSeconds"
MAX_LOST, MAX_LOST_TOP = "maxLostGPUHoursPerMove", 1_000_000  # GPU-hours; unset: no bound
DEFAULT_PER_CYCLE, DEFAULT_PER_JOB, DEFAULT_HOLD = 16, 8, 300
BOUNDS = {  # argument -> (default, largest); the smallest is 1 (`conf check` reads them from here)
    PER_CYCLE: (DEFAULT_PER_CYCLE, 10_000), PER_JOB: (DEFAULT_PER_JOB, 1000), HOLD: (DEFAULT_HOLD, 3600),
}
RUNNING = frozenset({TaskStatus.RUNNING, TaskStatus.BOUND})
GONE = frozenset({TaskStatus.SUCCEEDED, TaskStatus.FAILED})


@dataclass(frozen=True, slots=True)
class ConsolidateArgs:
    per_cycle: int = DEFAULT_PER_CYCLE
    per_job: int = DEFAULT_PER_JOB
    hold: float = float(DEFAULT_HOLD)
    max_lost: int | None = None  # GPU-hours of work one move may lose; None: no bound

    @classmethod
    def read(cls, raw: Mapping[str, object]) -> ConsolidateArgs:
        def value(key: str) -> int:
            default, top = BOUNDS[key]
            return whole_number_or(raw.get(key, default), default, 1, top)

        raw_lost = raw.get(MAX_LOST)
        lost = None if raw_lost is None else whole_number_or(raw_lost, 0, 1, MAX_LOST_TOP) or None
        return cls(value(PER_CYCLE), value(PER_JOB), float(value(HOLD)), lost)


@dataclass(frozen=True, slots=True)
class Move:
    """One job moved for `preemptor`: each pod's node before and after (the decision `explain` shows)."""

    job: str
    preemptor: str
    pods: tuple[tuple[str, str, str], ...]  # (pod, from node, to node)

    def rule(self) -> str:
        before = ",".join(sorted({f for _, f, _ in self.pods}))
        after = ",".join(sorted({t for _, _, t in self.pods}))
        return f"moved whole from {before} to {after} (room held until it is placed again)"


@dataclass(slots=True)
class _Plan:
    pipelined: list[tuple[TaskInfo, NodeInfo]]
    moves: dict[str, list[HeldPod]]  # moved job -> where each of its pods goes


class Consolidate:
    name = "consolidate"

    def execute(self, ssn: Session) -> None:
        args = ConsolidateArgs.read(ssn.conf.configurations.get(self.name) or {})
        movers = self.movers(ssn)
        if not movers:
            return  # nothing may move this cycle (the usual case): no plan to make, no node to look at
        by_queue: dict[str, list[JobInfo]] = {}
        for job in starving_jobs(ssn):
            queue = ssn.queues.get(job.queue)
            if queue is not None and queue.state == QueueState.OPEN and not sub_group_job(job) \
                    and not hard_topology(job):
                by_queue.setdefault(job.queue, []).append(job)
        budget = args.per_cycle
        free: list[Resource] = []  # the cluster's free room (future idle), computed once and again after a move
        for queue, job, _ in round_robin(ssn, by_queue):
            if budget <= 0 or not movers:
                break
            if not free:
                free.append(Resource.total(n.future_idle() for n in ssn.node_list))
            with ssn.guard(job):
                evicted = self.consolidate_for(ssn, queue, job, args, budget, movers, free[0])
                if evicted:
                    budget -= evicted
                    free.clear()

    # ---- one preemptor ---------------------------------------------------------------------------------
    def consolidate_for(self, ssn: Session, queue: QueueInfo, job: JobInfo, args: ConsolidateArgs, budget: int,
                        movers: dict[str, tuple[JobInfo, list[TaskInfo]]], free: Resource) -> int:
        """Move jobs of `movers` so that `job` fits (the moved ones leave `movers`); the number of pods evicted
        (0: nothing done)."""
        pending = [t for t in ssn.order.task_order(pending_tasks(job)) if not t.resreq.is_zero()]
        if not pending:
            return 0
        if not Resource.total(t.resreq for t in pending) <= free:
            return 0  # 1.: moving gathers room, it makes none
        candidates = self.candidates(ssn, job, pending, movers, args.max_lost)
        limit = min(args.per_job, budget)
        stmt = ssn.statement()
        chosen: list[tuple[JobInfo, list[TaskInfo]]] = []
        for candidate in candidates:
            if sum(len(t) for _, t in chosen) + len(candidate[1]) > limit:
                continue  # 3.: past a bound; a smaller job later may still fit under it
            chosen.append(candidate)
            if self.try_plan(ssn, stmt, queue, job, pending, chosen, keep=False) is not None:
                chosen = self.prune(ssn, stmt, queue, job, pending, chosen)
                plan = self.try_plan(ssn, stmt, queue, job, pending, chosen, keep=True)
                if plan is None:  # pragma: no cover - the pruned plan held a moment ago, on the same session
                    break
                for other, _ in chosen:
                    movers.pop(other.key, None)  # its pods are leaving: it moves once a cycle
                return self.commit(ssn, stmt, job, chosen, plan, args)
        stmt.discard()
        return 0

    @staticmethod
    def movers(ssn: Session) -> dict[str, tuple[JobInfo, list[TaskInfo]]]:
        """2., what does not depend on the preemptor: running jobs, every pod of them running or bound, marked
        movable, without sub-groups or a network topology; each with its pods on nodes, by key."""
        found: dict[str, tuple[JobInfo, list[TaskInfo]]] = {}
        for other in ssn.jobs.values():
            if sub_group_job(other) or other.extra.get("networkTopology") or ssn.faulted(other):
                continue
            live = [t for t in other.tasks.values() if t.status not in GONE]
            if live and all(t.status in RUNNING for t in live) and movable(other, live):
                found[other.key] = (other, sorted(live, key=lambda t: t.key))
        return found

    def candidates(self, ssn: Session, job: JobInfo, pending: Sequence[TaskInfo],
                   movers: Mapping[str, tuple[JobInfo, list[TaskInfo]]],
                   max_lost: int | None = None) -> list[tuple[JobInfo, list[TaskInfo]]]:
        """2., for `job`: the movers whose every pod the victim filters let go and whose move loses at most
        `max_lost` GPU-hours of work (None: any), best first."""
        found: list[tuple[JobInfo, list[TaskInfo]]] = []
        for other, live in movers.values():
            if other.key == job.key or ssn.faulted(other):
                continue
            with ssn.guard(other):  # a filter (or its pods' marks) failing faults their job, not the preemptor
                if max_lost is not None and move_cost(other, live, ssn.now) > max_lost:
                    continue
                if len(filtered(ssn, EvictionKind.CONSOLIDATE, job, live)) == len(live):  # moves whole or not
                    found.append((other, live))
        largest = max((t.resreq for t in pending), key=_weight)
        short = {n.name: _weight(largest.shortfall(n.future_idle())) for n in ssn.node_list}

        def rank(item: tuple[JobInfo, list[TaskInfo]]) -> tuple[float, int, int, str]:
            other, tasks = item
            nodes = {t.node_name for t in tasks}
            return (min(short.get(n, float("inf")) for n in nodes), len(tasks), other.priority, other.key)

        return sorted(found, key=rank)

    def try_plan(self, ssn: Session, stmt: Statement, queue: QueueInfo, job: JobInfo, pending: Sequence[TaskInfo],
                 chosen: Sequence[tuple[JobInfo, list[TaskInfo]]], *, keep: bool) -> _Plan | None:
        """3.: the plan for moving `chosen`, or None. Undone unless `keep` and it holds (then the evictions carry
        their causes, the preemptor's pods stay pipelined)."""
        mark = stmt.mark()
        plan = self._plan(ssn, stmt, queue, job, pending, chosen)
        if plan is None or not keep:
            stmt.rollback(mark)
            return plan
        stmt.rollback(mark)  # again, with each eviction's cause now that its move is known
        for other, tasks in chosen:
            move = _move(other, job, tasks, plan.moves[other.key])
            cause = EvictCause(self.name, job.key, move.rule(), breaks_gang=True)
            for task in tasks:
                stmt.evict(task, f"consolidated for {job.key}: {other.key} {move.rule()}", cause)
        for task, node in plan.pipelined:
            stmt.pipeline(task, node)
        return plan

    def _plan(self, ssn: Session, stmt: Statement, queue: QueueInfo, job: JobInfo, pending: Sequence[TaskInfo],
              chosen: Sequence[tuple[JobInfo, list[TaskInfo]]]) -> _Plan | None:
        for _, tasks in chosen:
            for task in tasks:
                stmt.evict(task, "")
        pipelined: list[tuple[TaskInfo, NodeInfo]] = []
        for task in pending:
            if not ssn.tiers.run(P.ALLOCATABLE, queue, task).ok:
                return None
            node = _best(ssn, task, lambda n, t: t.resreq <= n.future_idle(), prefer_idle=True)
            if node is None:
                return None
            stmt.pipeline(task, node)
            pipelined.append((task, node))
        if ssn.tiers.run(P.JOB_PIPELINED, job).rejected:
            return None
        taken: dict[str, Resource] = {}

        def free_now(node: NodeInfo, task: TaskInfo) -> bool:
            wanted = task.resreq + taken.get(node.name, ZERO)
            return wanted <= node.idle and wanted <= node.future_idle()

        moves: dict[str, list[HeldPod]] = {}
        for other, tasks in chosen:
            for task in sorted(tasks, key=lambda t: (-_weight(t.resreq), t.key)):
                node = _best(ssn, task, free_now, prefer_idle=False)
                if node is None:
                    return None
                taken[node.name] = taken.get(node.name, ZERO) + task.resreq
                moves.setdefault(other.key, []).append(HeldPod(task.key, node.name, task.resreq))
        return _Plan(pipelined, moves)

    def prune(self, ssn: Session, stmt: Statement, queue: QueueInfo, job: JobInfo, pending: Sequence[TaskInfo],
              chosen: list[tuple[JobInfo, list[TaskInfo]]]) -> list[tuple[JobInfo, list[TaskInfo]]]:
        """The move set without the jobs the plan holds without (tried last added first)."""
        kept = list(chosen)
        for candidate in reversed(chosen):
            if len(kept) == 1:
                break
            fewer = [c for c in kept if c[0].key != candidate[0].key]
            if self.try_plan(ssn, stmt, queue, job, pending, fewer, keep=False) is not None:
                kept = fewer
        return kept

    def commit(self, ssn: Session, stmt: Statement, job: JobInfo, chosen: Sequence[tuple[JobInfo, list[TaskInfo]]],
               plan: _Plan, args: ConsolidateArgs) -> int:
        """4."""
        evicted = [op for op in stmt.operations if op.kind == "evict"]
        stmt.commit()
        ssn.results.count("eviction_transactions:Consolidated")
        for op in evicted:
            ssn.results.event("Pod", op.task.key, "Warning", "Consolidated", op.reason)
        # the gang's own room too: its victims leave through their grace period, and until then the part of each
        # node already idle would go to the next job that fits it (allocate places on idle before pipelining)
        own = tuple(HeldPod(t.key, n.name, t.resreq) for t, n in plan.pipelined)
        ssn.holds.holds[job.key] = Hold(job.key, job.key, own, ssn.now, ssn.now + args.hold)
        for other, tasks in chosen:
            pods = tuple(plan.moves[other.key])
            ssn.holds.holds[other.key] = Hold(other.key, job.key, pods, ssn.now, ssn.now + args.hold)
            hold_room(ssn, list(pods))
            move = _move(other, job, tasks, list(pods))
            log.info("consolidate: moving %s for %s: %s", other.key, job.key, move.rule())
            if ssn.trace is not None:
                ssn.trace(f"consolidate: {job.key}: moving {other.key} {move.rule()}")
        return len(evicted)


def _move(job: JobInfo, preemptor: JobInfo, tasks: Sequence[TaskInfo], to: Sequence[HeldPod]) -> Move:
    where = {h.pod: h.node for h in to}
    return Move(job.key, preemptor.key, tuple((t.key, t.node_name, where.get(t.key, "")) for t in tasks))


def move_cost(job: JobInfo, live: Sequence[TaskInfo], now: float) -> float:
    """GPU-hours of work a move of `job` loses: its pods' GPUs times the time since its last checkpoint, else
    since its start."""
    gpus = sum(t.resreq.get(GPU) for t in live) / 1000  # milli-GPUs
    return gpus * lost_work(job, now) / 3600.0


def _weight(res: Resource) -> float:
    """How much of a node a request is, GPUs first (the scarce resource this action is for)."""
    return res.get(GPU) * 1e6 + res.cpu + res.memory / 2**30


def _best(ssn: Session, task: TaskInfo, fits: Callable[[NodeInfo, TaskInfo], bool], *,
          prefer_idle: bool) -> NodeInfo | None:
    """The best feasible node that `fits(node, task)`; with `prefer_idle`, nodes whose idle holds it first."""
    nodes = [n for n in ssn.fit.feasible_nodes(task) if fits(n, task)]
    if prefer_idle:
        idle = [n for n in nodes if task.resreq <= n.idle]
        if idle:
            best = ssn.fit.best_node(task, idle)
            if best is not None:
                return best
    return ssn.fit.best_node(task, nodes) if nodes else None
