"""Layer `actions`: bulk placement — a run of a gang's identical tasks, placed as the per-task loop places them.

allocate takes a gang's tasks one by one (`allocate.py`, beside this module, after Volcano's allocate loop):
ask Allocatable, take the best node from the shape's cached scores, place the task through the Statement (the
node's accounting, its arrays, every event handler), ask JobReady, and rescore the node the task took before the
next task. For consecutive tasks of one job with the same request, constraints and role, `BulkPlacer.place_run`
does the node
work once per node instead of once per task, and makes the same binds in the same order. It applies only where
that holds by construction, and leaves everything else to the per-task loop:

- Allocatable: every function gives its counting form (`points.CountedDecision.many`): how many of the run's
  tasks in a row it lets through, the earlier ones counted as allocated. The run stops there, and the loop asks
  about the next task itself (with its escape hatch, its reasons).
- Event handlers: every handler gives `allocate_many`, by which it says that nothing asked in the middle of a run
  reads what it keeps; it hears of a node's tasks once they are placed, with the same total effect.
- Scores: no inter-pod terms (as `FeasibilityCache.place_best` requires), and every batch
  scorer has its scalar form, which the loop uses to rescore the node the previous task took. The pick is the
  loop's: the first node in the cache with the highest score. After a task, only the node it took has a new
  score, so that node stays the pick while its new score beats the best other node's (a tie goes to the node
  first in order); otherwise the pick is that other node. A node's scores as it fills are computed on a copy of
  its accounting, once per shape and resource state where every scorer gives its `static` key (`_ladder`).
- JobReady is asked after every task but the last, as in the loop, except while a function's bound
  (`points.BoundedCheck`: the gang's minAvailable not yet reached) says it cannot pass: the job's task statuses
  are current (the nodes' accounting catches up when the node's tasks are settled, and JobReady reads none of
  it). A job that turns ready with tasks left is committed by the caller, as the loop does.
- A job already ready takes one task per turn: the loop does that alone. A task that fits no node now (to be
  pipelined or to fail) ends the run before it.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

import numpy as np

from scheduler.api.job import JobInfo, TaskInfo
from scheduler.api.node import NodeInfo
from scheduler.api.queue import QueueInfo
from scheduler.framework import points as P
from scheduler.framework.arrays import NodeArrays
from scheduler.framework.fit import FeasibilityCache
from scheduler.framework.statement import Statement
from scheduler.framework.tiers import TierRunner

NO_FIT = -np.inf


def run_end(tasks: Sequence[TaskInfo], start: int) -> int:
    """The end of the run of tasks identical to tasks[start] (request, constraints, role) that starts there."""
    first = tasks[start]
    request, constraints, role = first.resreq, first.constraints, first.role
    end = start + 1
    while end < len(tasks):
        task = tasks[end]
        if task.constraints is not constraints or task.role != role or not (
            task.resreq is request or task.resreq == request
        ):
            break
        end += 1
    return end


def fits_count(task: TaskInfo, node: NodeInfo) -> int:
    """How many more of the task's request the node's idle holds."""
    idle = node.idle
    count: int | None = None
    for name, units in task.resreq.items():
        if units > 0:
            room = max(0, idle.get(name) // units)
            count = room if count is None else min(count, room)
    return 0 if count is None else count


class BulkPlacer:
    """Made by the session once its plugins have registered; `enabled` says whether the conf allows bulk runs."""

    def __init__(self, node_list: list[NodeInfo], arrays: NodeArrays, tiers: TierRunner,
                 fit: FeasibilityCache) -> None:
        self._node_list = node_list
        self._changes = arrays.changes
        self._fit = fit
        self._ready = tiers.runner(P.JOB_READY)
        self._bounds = [fn.not_before for fn in tiers.functions(P.JOB_READY) if isinstance(fn, P.BoundedCheck)]
        allocatable = tiers.functions(P.ALLOCATABLE)
        self._counts: list[P.QueueTaskCount] = [fn.many for fn in allocatable if isinstance(fn, P.CountedDecision)]
        scorers = tiers.functions(P.BATCH_NODE_ORDER)
        self._statics: list[Callable[[TaskInfo, NodeInfo], Hashable]] = [
            fn.static for fn in scorers if isinstance(fn, P.BatchScorer) and fn.static is not None
        ]
        self._memo = len(self._statics) == len(scorers)
        self.enabled = (
            len(self._counts) == len(allocatable)
            and tiers.handlers_batched()
            and fit.scalar_scorers is not None
            and not fit.prefers_shard  # soft sharding: the per-task loop tries the shard's nodes first
        )
        self._ladders: dict[Hashable, list[float]] = {}

    def place_run(self, stmt: Statement, queue: QueueInfo, job: JobInfo, tasks: Sequence[TaskInfo],
                  start: int) -> tuple[int, bool]:
        """Place the run of identical tasks that starts at tasks[start] through `stmt`, as many as the per-task
        loop would place in a row. Returns (how many were placed, whether the job turned ready with tasks left:
        the caller commits then). (0, False): none; the loop takes tasks[start] itself."""
        first = tasks[start]
        if first.constraints.dynamic:
            return 0, False
        allowed = run_end(tasks, start) - start
        if allowed < 2:
            return 0, False  # one task: the loop is as quick
        for count in self._counts:
            allowed = min(allowed, count(queue, first, allowed))
            if allowed <= 0:
                return 0, False
        synced = self._fit.shape_scores(first)
        if synced is None:
            return 0, False
        feasible, cached = synced
        values, indices = cached.values, feasible.indices
        best = int(np.argmax(values))
        if values[best] == NO_FIT:
            return 0, False
        changes = self._changes
        stop, last = start + allowed, len(tasks)
        at = start
        # JobReady (all must pass) cannot pass before the largest bound: ask it only from there on.
        ask_from = start + max((bound(job) for bound in self._bounds), default=0)
        while True:
            node = self._node_list[int(indices[best])]
            score = values[best]
            values[best] = NO_FIT  # the best other node, for as long as this one is the pick
            rival = int(np.argmax(values))
            rival_score = values[rival]
            placed: list[TaskInfo] = []
            ready = False
            try:
                for score in self._ladder(first, node, stop - at):  # the node's score for the next task
                    task = tasks[at]
                    stmt.allocate_begin(task, node)
                    placed.append(task)
                    at += 1
                    if at < last and at >= ask_from and self._ready(job):
                        ready = True
                        break
                    if (at == stop or score == NO_FIT or score < rival_score
                            or (score == rival_score and rival < best)):
                        break
            finally:  # a JobReady that raised leaves begun tasks: settle them, so the job's discard undoes them
                if placed:
                    stmt.allocate_end(placed, node)
            values[best] = score
            cached.synced = len(changes)  # the one change, this node's, is in the cache already
            if ready or at == stop:
                return at - start, ready
            if score != NO_FIT and (score > rival_score or (score == rival_score and best < rival)):
                continue  # still the pick (the ladder was cut short)
            if rival_score == NO_FIT:
                return at - start, False  # the next task fits no node now: the loop pipelines it or fails
            best = rival

    def _ladder(self, task: TaskInfo, node: NodeInfo, limit: int) -> list[float]:
        """The masked scores of the task on the node after 1, 2 ... of its kind are placed there, up to `limit` or
        the first -inf (then it holds no more), by the scalar scorers on a copy of the node's accounting; kept
        per (shape, resource state, scorers' static keys) where every scorer gives its key."""
        key: Hashable = None
        if self._memo:
            key = (task.constraints, task.resreq, node.allocatable, node.idle, node.used, node.no_cpu_request,
                   node.no_memory_request, tuple(static(task, node) for static in self._statics))
            known = self._ladders.get(key)
            if known is not None and (len(known) >= limit or known[-1] == NO_FIT):
                return known
        request = task.resreq
        copy = NodeInfo(node.name, node.allocatable, node.labels, node.taints, node.unschedulable, node.ready,
                        node.idle, node.used, node.releasing, node.pipelined, {}, node.no_cpu_request,
                        node.no_memory_request)
        ladder: list[float] = []
        for _ in range(min(limit, fits_count(task, node))):
            copy.idle = copy.idle - request
            copy.used = copy.used + request
            copy.no_cpu_request += not request.cpu
            copy.no_memory_request += not request.memory
            score = self._fit.scalar_score(task, copy)
            ladder.append(score)
            if score == NO_FIT:
                break
        if key is not None:
            self._ladders[key] = ladder
        return ladder
