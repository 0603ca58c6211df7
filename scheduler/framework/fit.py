"""Layer `framework`: the feasibility and score cache — which nodes a task may go to, and the best of them.

Predicates that read only a task's constraints run once per constraint set (and, with a `CycleMemo`, once per
run of cycles in which no node's labels, taints or readiness changed); resource fit is then one numpy
comparison over the cached node indices (`arrays.py`). Batch scores are cached per task shape and brought up to
date from the log of nodes that changed. Predicates and scores that depend on where other pods are (the dynamic
points) are evaluated afresh for the tasks whose constraints have such terms. What turned nodes away is kept per
job (`FitErrors`), for the gang's reasons at close.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from scheduler.api.decision import Code, Status, unresolvable
from scheduler.api.job import JobInfo, TaskInfo
from scheduler.api.messages import message
from scheduler.api.node import NodeInfo
from scheduler.api.pod import Constraints
from scheduler.api.reasons import (
    INSUFFICIENT,
    NODE_SHARD,
    TOO_MANY_PODS,
    FilterCount,
    NodeFilter,
    NodesUnavailable,
    resource_misfit,
)
from scheduler.api.resources import CPU, MEMORY, PODS, Resource
from scheduler.api.shard import ShardView
from scheduler.framework import points as P
from scheduler.framework.arrays import IntArray, NodeArrays
from scheduler.framework.conf import SchedulerConf
from scheduler.framework.memo import CycleMemo, Failure
from scheduler.framework.tiers import TierRunner

NOT_IN_SHARD = unresolvable(NodeFilter(NODE_SHARD))  # hard sharding (pkg/scheduler/util/predicate_helper.go)


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
    nodes: list[NodeInfo]  # the session's NodeInfos at `indices` (`_STALE`: a memo's, until first asked for)
    indices: IntArray
    rejected: Counter[NodeFilter]
    slot: IntArray  # node position -> its place in `indices`, or -1


_STALE: list[NodeInfo] = []  # (by identity)


class FeasibilityCache:
    def __init__(
        self,
        node_list: list[NodeInfo],
        arrays: NodeArrays,
        tiers: TierRunner,
        conf: SchedulerConf,
        *,
        memo: CycleMemo | None = None,
        trace: Callable[[str], None] | None = None,
        shard: ShardView | None = None,
    ) -> None:
        self._node_list = node_list
        self._arrays = arrays
        self._tiers = tiers
        self._memo = memo
        self._trace = trace
        # Volcano's NodeShard contract (api/shard.py). Hard: a node outside the shard is refused with Volcano's
        # reason and no predicate runs on it (`_hard`: the positions and nodes inside, when some are outside; the
        # memo's feasible sets then hold for this shard only). Soft: the best node inside the shard, else the best
        # outside (`_prefer_shard`).
        self._hard: tuple[list[int], list[NodeInfo]] | None = None
        self._in_shard: np.ndarray | None = None
        if shard is not None and (shard.hard or shard.soft):
            inside = np.fromiter((n.name in shard.nodes for n in node_list), dtype=bool, count=len(node_list))
            if shard.hard:
                if not inside.all():
                    positions = np.flatnonzero(inside).tolist()
                    self._hard = (positions, [node_list[i] for i in positions])
                conf = (conf, shard.nodes)  # type: ignore[assignment]  # the memo's key: the conf and the shard
            else:
                self._in_shard = inside
        self._feasible: dict[Constraints, _Feasible] = (
            memo.begin(node_list, conf, arrays.idle) if memo is not None else {}
        )
        for remembered in self._feasible.values():  # the same nodes as last cycle, but this snapshot's objects:
            remembered.nodes = _STALE  # taken when the constraint set is first asked for (`_feasible_for`)
        self._scores: dict[tuple[Constraints, Resource], _Scores] = {}
        self._scalars: list[Callable[..., float]] | None = None  # set once plugins registered: _scalar_scorers
        self._errors: dict[str, FitErrors] = {}
        self._own_kept: dict[str, dict[Any, Any]] = {}  # `kept` without a memo

    def kept(self, name: str) -> dict[Any, Any]:
        """A store for answers that depend only on the nodes' statics (labels, taints, allocatable's names,
        readiness: `memo.node_statics`), a task's constraints and the conf: kept from cycle to cycle in the memo
        while those are the same (the very condition under which the feasible sets are kept), else empty; without
        a memo, this session's own."""
        if self._memo is None:
            return self._own_kept.setdefault(name, {})
        return self._memo.kept.setdefault(name, {})

    def scorers_registered(self) -> None:
        """Called once every plugin has registered: take the batch scorers' scalar forms, if they all have one."""
        self._scalars = self._scalar_scorers()

    # ---- which nodes ----------------------------------------------------------------------------------
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

    def feasible_indices(self, task: TaskInfo) -> IntArray:
        """Positions (in node_list) of the nodes the task's predicates allow."""
        return self._feasible_for(task).indices

    def fitting_indices(self, task: TaskInfo) -> IntArray:
        """Indices (into node_list) of feasible nodes whose idle resources hold the task now."""
        fitting = self._arrays.fitting(task.resreq, self._feasible_for(task).indices)
        if task.constraints.dynamic and fitting.size:
            kept = self._dynamic_filter(task, [self._node_list[i] for i in fitting])[0]
            return np.fromiter((self._arrays.position[n.name] for n in kept), dtype=np.int64, count=len(kept))
        return fitting

    def is_feasible(self, task: TaskInfo, node: NodeInfo) -> bool:
        """Whether the task's predicates allow the node (O(1) after the constraint set's first look)."""
        position = self._arrays.position.get(node.name)
        return position is not None and bool(self._feasible_for(task).slot[position] >= 0)

    def misfits(self, request: Resource, nodes: Sequence[NodeInfo], fits: NodeFilter) -> Counter[NodeFilter]:
        """How many of `nodes` each `resource_misfit` answer turns the request away for, `fits` counting those
        whose idle holds it: the same counts as asking each node (its first dimension short, in cpu, memory, pods,
        then the scalars by name), from the node arrays in one pass per dimension asked (allocate asks this for
        every task that fits no node, and a Python call per node was that cycle's cost on a full cluster)."""
        arrays = self._arrays
        position = arrays.position
        if not nodes:
            return Counter()
        try:
            at = np.fromiter((position[n.name] for n in nodes), dtype=np.int64, count=len(nodes))
        except KeyError:  # a node outside the arrays (none, as a rule): asked one by one
            return Counter(resource_misfit(request, n.idle) or fits for n in nodes)
        left = np.ones(len(nodes), dtype=bool)
        out: Counter[NodeFilter] = Counter()
        asked = [(CPU, request.cpu), (MEMORY, request.memory), (PODS, request.pods), *sorted(request.scalars)]
        for name, units in asked:
            row = arrays.row.get(name)
            # (a resource no node offers: every node lacks it, if asked for at all)
            short = np.full(len(nodes), units > 0) if row is None else arrays.idle[row, at] < units
            hit = int(np.count_nonzero(short & left))
            if hit:
                out[NodeFilter(TOO_MANY_PODS) if name == PODS else NodeFilter(INSUFFICIENT, name)] += hit
                left &= ~short
                if not left.any():
                    return out
        rest = int(np.count_nonzero(left))
        if rest:
            out[fits] += rest
        return out

    def static_rejections(self, task: TaskInfo) -> Counter[NodeFilter]:
        """How many nodes each predicate turned away for this task."""
        rejected = self._feasible_for(task).rejected
        if task.constraints.dynamic:
            return rejected + self._dynamic_filter(task, self._feasible_for(task).nodes)[1]
        return rejected

    def _dynamic_filter(self, task: TaskInfo, nodes: list[NodeInfo]) -> tuple[list[NodeInfo], Counter[NodeFilter]]:
        if not nodes or not self._tiers.has(P.DYNAMIC_PREDICATE):
            return nodes, Counter()
        statuses = self._tiers.run(P.DYNAMIC_PREDICATE, task, nodes)
        rejected: Counter[NodeFilter] = Counter(node_filter(s) for s in statuses if s.rejected)
        if self._trace:
            for node, status in zip(nodes, statuses, strict=True):
                if status.rejected:
                    self._trace(f"task {task.name} (role {task.role or '-'}) rejected by node {node.name}: "
                                f"{message(status)}")
        return [n for n, s in zip(nodes, statuses, strict=True) if not s.rejected], rejected

    def _feasible_for(self, task: TaskInfo) -> _Feasible:
        cached = self._feasible.get(task.constraints)
        if cached is not None and cached.nodes is _STALE:
            node_list = self._node_list
            cached.nodes = [node_list[i] for i in cached.indices.tolist()]
        if cached is None:
            node_list = self._node_list
            if self._hard is None:
                statuses = self._tiers.run(P.PREDICATE, task, node_list)
            else:  # hard sharding: the predicates run on the shard's nodes only
                positions, inside = self._hard
                statuses = [NOT_IN_SHARD] * len(node_list)
                if inside:
                    found: list[Status] = self._tiers.run(P.PREDICATE, task, inside)
                    for i, status in zip(positions, found, strict=True):
                        statuses[i] = status
            success = Code.SUCCESS
            indices = [i for i, s in enumerate(statuses) if s.code is success or not s.rejected]
            nodes = [node_list[i] for i in indices]
            rejected: Counter[NodeFilter] = Counter()
            if len(indices) < len(statuses):
                # A handful of distinct answers repeat over thousands of nodes: count them by identity.
                distinct = dict(zip(map(id, statuses), statuses, strict=True))
                for key, count in Counter(map(id, statuses)).items():
                    status = distinct[key]
                    if status.rejected:
                        rejected[node_filter(status)] += count
                if self._trace:
                    for node, status in zip(node_list, statuses, strict=True):
                        if status.rejected:
                            self._trace(f"task {task.name} (role {task.role or '-'}) rejected by node {node.name}: "
                                        f"{message(status)}")
            slot = np.full(len(self._node_list), -1, dtype=np.int64)
            slot[indices] = np.arange(len(indices))
            cached = _Feasible(nodes, np.array(indices, dtype=np.int64), rejected, slot)
            self._feasible[task.constraints] = cached
        return cached

    # ---- the best of them -----------------------------------------------------------------------------
    def node_scores(self, task: TaskInfo, indices: IntArray) -> P.FloatArray:
        """The configured scorers' sum for the task on each node at `indices` as the nodes are now (batch scorers,
        and the dynamic ones for a task with inter-pod terms); -inf where a scorer vetoes
        the node. Allocate ranks a task's nodes by it, and the gang placer a placement's nodes."""
        scores = np.zeros(indices.size)
        if indices.size == 0:
            return scores
        tiers = self._tiers
        if tiers.has(P.BATCH_NODE_ORDER):
            scores = scores + tiers.run(P.BATCH_NODE_ORDER, task, self._arrays, indices)
        if task.constraints.dynamic and tiers.has(P.DYNAMIC_NODE_ORDER):
            scores = scores + np.asarray(
                tiers.run(P.DYNAMIC_NODE_ORDER, task, [self._node_list[i] for i in indices]), dtype=float
            )
        return scores

    def pick_node(self, task: TaskInfo, indices: IntArray) -> NodeInfo | None:
        """The best-scoring candidate (`node_scores`); ties go to node name order."""
        if indices.size == 0:
            return None
        scores = self.node_scores(task, indices)
        best = self._prefer_shard(scores, indices)
        if scores[best] == -np.inf:  # a batch scorer vetoed every candidate
            return None
        return self._node_list[int(indices[best])]

    def place_best(self, task: TaskInfo) -> NodeInfo | None:
        """The best node whose idle holds the task, or None.

        Batch scores depend only on the task's request and constraints and on the nodes' arrays, so they are
        cached per task shape, masked where the task does not fit, and brought up to date from the log of
        nodes that changed since (mostly the one node the gang's previous task went to). A task with inter-pod
        terms is scored afresh (its dynamic scores depend on where other pods are).
        """
        if task.constraints.dynamic:
            return self.pick_node(task, self.fitting_indices(task))
        synced = self.shape_scores(task)
        if synced is None:
            return None
        feasible, cached = synced
        best = self._prefer_shard(cached.values, feasible.indices)
        if cached.values[best] == -np.inf:
            return None
        return self._node_list[int(feasible.indices[best])]

    @property
    def prefers_shard(self) -> bool:
        """Soft sharding: a task takes the best node of the shard, and only when none fits, the best other."""
        return self._in_shard is not None

    def _prefer_shard(self, values: np.ndarray, indices: IntArray) -> int:
        """The position in `values` of the best candidate: with soft sharding, of those in the shard if one of
        them is not vetoed, else of all (Volcano's allocate.go prioritizeNodes: in-shard nodes are scored and
        taken first, then the nodes of other shards)."""
        if self._in_shard is not None and indices.size:
            inside = self._in_shard[indices]
            if inside.any():
                masked = np.where(inside, values, -np.inf)
                best = int(np.argmax(masked))
                if masked[best] != -np.inf:
                    return best
        return int(np.argmax(values))

    def shape_scores(self, task: TaskInfo) -> tuple[_Feasible, _Scores] | None:
        """The task's feasible nodes and its shape's cached masked scores over them, brought up to date (what
        `place_best` takes the best of); None when the task has no feasible node. Only for a task `place_best`
        caches scores for (no inter-pod terms)."""
        feasible = self._feasible_for(task)
        if feasible.indices.size == 0:
            return None
        key = (task.constraints, task.resreq)
        cached = self._scores.get(key)
        changes = self._arrays.changes
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
        return feasible, cached

    def best_node(self, task: TaskInfo, nodes: Sequence[NodeInfo]) -> NodeInfo | None:
        """The best-scoring of `nodes` (fitting or not: the caller chose them)."""
        position = self._arrays.position
        indices = np.fromiter((position[n.name] for n in nodes), dtype=np.int64, count=len(nodes))
        return self.pick_node(task, indices)

    def _masked_scores(self, task: TaskInfo, indices: IntArray) -> np.ndarray:
        if indices.size <= 8:  # a handful of nodes: plain Python beats numpy's per-call cost
            fits = np.array([task.resreq <= self._node_list[i].idle for i in indices], dtype=bool)
        else:
            mask = self._arrays.fit_mask(task.resreq, indices)
            fits = np.ones(indices.size, dtype=bool) if mask is None else mask
        if not fits.any():
            return np.full(indices.size, -np.inf)
        if not self._tiers.has(P.BATCH_NODE_ORDER):  # no scorer: the first fitting node in name order wins
            return np.where(fits, 0.0, -np.inf)
        scores = np.asarray(self._tiers.run(P.BATCH_NODE_ORDER, task, self._arrays, indices), dtype=float)
        return np.where(fits, scores, -np.inf)

    def _masked_score(self, task: TaskInfo, position: int) -> float:
        """`_masked_scores` for one node, in plain Python when every batch scorer has a scalar form."""
        if self._scalars is None:
            return float(self._masked_scores(task, np.array([position], dtype=np.int64))[0])
        return self.scalar_score(task, self._node_list[position])

    def scalar_score(self, task: TaskInfo, node: NodeInfo) -> float:
        """The masked score of the task on `node` (any NodeInfo, one of the session's or a copy) by the batch
        scorers' scalar forms: -inf where the task does not fit. Only when every batch scorer has one."""
        scalar = self._scalars
        assert scalar is not None
        if not task.resreq <= node.idle:
            return -np.inf
        if not scalar:  # no scorer: the first fitting node in name order wins
            return 0.0
        total = 0.0
        for one in scalar:
            total += one(task, node)
        return total

    @property
    def scalar_scorers(self) -> list[Callable[..., float]] | None:
        """The batch scorers' scalar forms in tier order (None: some scorer has none)."""
        return self._scalars

    def _scalar_scorers(self) -> list[Callable[..., float]] | None:
        """The scalar forms of the batch scorers in tier order, or None if one of them has none."""
        fns = self._tiers.functions(P.BATCH_NODE_ORDER)
        scorers = [fn for fn in fns if isinstance(fn, P.BatchScorer)]
        return [fn.one for fn in scorers] if len(scorers) == len(fns) else None

    # ---- why not ------------------------------------------------------------------------------------
    def record_fit_error(self, task: TaskInfo, reason: NodeFilter, count: int = 1) -> None:
        """`count` nodes turned the task away for `reason`."""
        errors = self._errors.setdefault(task.job, FitErrors())
        errors.reasons[reason] += count
        errors.task = errors.task or task.name

    def erred(self) -> set[str]:
        """The keys of the jobs `errors` has an answer for."""
        return set(self._errors)

    def errors(self, job: JobInfo) -> FitErrors | None:
        """Why the job's tasks fit no node this cycle (None: none of them was turned away by every node)."""
        return self._errors.get(job.key)

    def known_to_fail(self, job: JobInfo) -> Failure | None:
        """A gang that did not fit last cycle, unchanged, with no node it may use freed since: same answer (and
        the same fit errors; the caller says again why a gate held it, `Failure.held`). Always None without a
        `CycleMemo`."""
        if self._memo is None:
            return None
        failure = self._memo.still_failing(job)
        if failure is None:
            return None
        self._errors[job.key] = FitErrors(Counter(failure.reasons), 0, failure.task)
        return failure

    def remember_failure(self, job: JobInfo, pending: Sequence[TaskInfo], task: TaskInfo | None,
                         held: Status | None = None) -> None:
        """After the gang's statement is discarded: it did not fit for lack of resources on its nodes, so later
        cycles skip it while nothing it depends on changes (`memo.py`). `pending`: its tasks still to place."""
        errors = self._errors.get(job.key)
        if self._memo is None or errors is None:
            return
        shapes = {t.constraints: t for t in pending}.values()
        if any(t.constraints.dynamic or t.constraints.volumes is not None for t in shapes):
            # Where other pods are matters to these, or a claim's binding: free resources alone do not decide.
            return
        positions = np.unique(np.concatenate([self.feasible_indices(t) for t in shapes]))
        self._memo.record_failure(job, positions, errors.reasons, errors.task or (task.name if task else ""), held)

    def close(self, jobs: dict[str, JobInfo]) -> None:
        """At session close: the memo keeps this cycle's idle resources, to tell next cycle which nodes gained."""
        if self._memo is not None:
            self._memo.end(jobs, self._arrays.idle)
