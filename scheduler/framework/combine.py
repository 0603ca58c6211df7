"""Layer `framework`: the combiners — how the functions plugins serve at one extension point fold, tier by tier,
into one answer.

Each combiner takes the tiers of functions (`Tiers[F]`: the plugins' methods, tier by tier, in conf order) and
the point's arguments, and carries one tier rule. They are pure: no state, no session. `points.py` pairs each
point with its combiner; `TierRunner.run` (`tiers.py`) is the only caller outside tests
(tests/framework/test_combiners.py holds each one to a table of cases).

The generic ones (`first_nonzero`, `all_pass`, `first_rejection`, `any_true`) are typed by the point's
parameters (`ParamSpec`), so a point declared `Point[F, [JobInfo], Status]` can only be run with one JobInfo.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, ParamSpec, TypeVar

import numpy as np

from scheduler.api.decision import SUCCESS, Code, Status
from scheduler.api.job import JobInfo, TaskInfo
from scheduler.api.node import NodeInfo
from scheduler.framework.arrays import IntArray, NodeArrays
from scheduler.framework.forms import (
    PLACE_BY_POD,
    BatchScore,
    FloatArray,
    GangAnswer,
    GangPlacer,
    HyperNodeScore,
    JobCheck,
    JobDecision,
    NodesPredicate,
    NodesScore,
    VictimGuard,
    Victims,
)

if TYPE_CHECKING:
    from scheduler.framework.evictable import Domain, Evictable, EvictDomains, EvictionContext, VictimFilter

F = TypeVar("F")
A = ParamSpec("A")
Tiers = Sequence[Sequence[F]]


def first_nonzero(tiers: Tiers[Callable[A, int]], *args: A.args, **kwargs: A.kwargs) -> int:
    """Orderings (JobOrder, QueueOrder, TaskOrder, VictimQueueOrder): the first plugin with an opinion decides;
    no opinion anywhere is 0."""
    for tier in tiers:
        for fn in tier:
            result = fn(*args, **kwargs)
            if result:
                return int(result)
    return 0


def all_pass(tiers: Tiers[Callable[A, bool]], *args: A.args, **kwargs: A.kwargs) -> bool:
    """JobReady, Preemptive: every function must pass (none registered: pass)."""
    for tier in tiers:
        for fn in tier:
            if not fn(*args, **kwargs):
                return False
    return True


def any_true(tiers: Tiers[Callable[A, bool]], *args: A.args, **kwargs: A.kwargs) -> bool:
    """Overused: any function saying so decides."""
    return any(fn(*args, **kwargs) for tier in tiers for fn in tier)


def first_rejection(tiers: Tiers[Callable[A, Status]], *args: A.args, **kwargs: A.kwargs) -> Status:
    """JobValid and Allocatable: every plugin must pass; the first Status against is the answer (ABSTAIN is no
    answer)."""
    for tier in tiers:
        for fn in tier:
            status = fn(*args, **kwargs)
            code = status.code
            if code is not Code.SUCCESS and code is not Code.ABSTAIN:
                return status
    return SUCCESS


def sum_score_arrays(tiers: Tiers[BatchScore], task: TaskInfo, arrays: NodeArrays, indices: IntArray) -> FloatArray:
    """Batch node scores: each plugin returns one score per candidate index; they add up (none: zeros)."""
    total: FloatArray | None = None
    for tier in tiers:
        for fn in tier:
            scores = fn(task, arrays, indices)
            total = scores if total is None else total + scores
    return total if total is not None else np.zeros(indices.size)


def rejections_per_node(tiers: Tiers[NodesPredicate], task: TaskInfo, nodes: Sequence[NodeInfo]) -> list[Status]:
    """Node filters: each plugin returns one Status per node; the first rejection per node wins (an answer that
    is not a rejection, SUCCESS or ABSTAIN, lets the node through)."""
    fns = [fn for tier in tiers for fn in tier]
    if len(fns) == 1:  # the usual case (predicates alone): its answer as it is
        return fns[0](task, nodes)
    out: list[Status] = [SUCCESS] * len(nodes)
    for fn in fns:
        for i, status in enumerate(fn(task, nodes)):
            if status.rejected and out[i].ok:
                out[i] = status
    return out


def sum_node_lists(tiers: Tiers[NodesScore], task: TaskInfo, nodes: Sequence[NodeInfo]) -> list[float]:
    """Dynamic node scores: each plugin returns one score per node; they add up."""
    total = [0.0] * len(nodes)
    for tier in tiers:
        for fn in tier:
            for i, score in enumerate(fn(task, nodes)):
                total[i] += float(score)
    return total


def first_tier_all(tiers: Tiers[JobCheck], job: JobInfo) -> bool:
    """JobStarving, as Volcano's Session.JobStarving (pkg/scheduler/framework/session_plugins.go): the first
    tier with any function decides, and there every function must agree (the priority plugin's "short of its
    replicas" and the gang plugin's "short of minAvailable" together mean short of minAvailable)."""
    for tier in tiers:
        if tier:
            return all(fn(job) for fn in tier)
    return False


def votes(tiers: Tiers[JobDecision], job: JobInfo) -> Status:
    """Volcano's JobEnqueueable / JobPipelined (pkg/scheduler/framework/session_plugins.go): any rejection wins;
    otherwise the first tier with a permit (SUCCESS) decides; with no opinion at all, permit."""
    for tier in tiers:
        permitted = False
        for fn in tier:
            status = fn(job)
            if status.rejected:
                return status
            permitted = permitted or status.ok
        if permitted:
            return SUCCESS
    return SUCCESS


def first_placement(tiers: Tiers[GangPlacer], job: JobInfo, tasks: Sequence[TaskInfo]) -> GangAnswer:
    """The first gang placer that does not abstain decides; with none, allocate places pod by pod."""
    for tier in tiers:
        for fn in tier:
            answer = fn(job, tasks)
            if not answer.status.abstained:
                return answer
    return PLACE_BY_POD


def every_filter(tiers: Tiers[VictimGuard], candidates: Sequence[TaskInfo], preemptor: TaskInfo) -> list[TaskInfo]:
    """Victim guards: each one, in every tier, keeps only the candidates it allows (they compose)."""
    kept = list(candidates)
    for tier in tiers:
        for fn in tier:
            kept = fn(kept, preemptor)
    return kept


def tier_victims(tiers: Tiers[Victims], preemptor: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
    """Preemptable/Reclaimable, as Volcano's Session.Preemptable/Reclaimable (pkg/scheduler/framework/
    session_plugins.go): within a tier, the victims every plugin agrees on; a plugin that offers none ends the
    tier with no answer, and so does an empty agreement; the first tier with victims wins. (So a gang that tier
    1 protects completely can still lose tasks to what tier 2 allows: that is Volcano's rule too.)"""
    for tier in tiers:
        agreed: dict[int, TaskInfo] | None = None
        for fn in tier:
            offered = fn(preemptor, candidates)
            if not offered:
                agreed = None
                break
            ids = {id(v): v for v in offered}
            agreed = ids if agreed is None else ({k: v for k, v in agreed.items() if k in ids} or None)
        if agreed:
            return list(agreed.values())
    return []


def unified_victims(tiers: Tiers[Evictable], ctx: EvictionContext, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
    """The tier rule of Volcano's Session.UnifiedEvictable (see `evictable.py`'s module doc), in the candidates'
    order: an abstaining plugin is skipped, one that allows none ends the tier, an empty intersection leaves no
    answer so far; the first tier with an answer gives it."""
    for tier in tiers:
        agreed: list[TaskInfo] | None = None
        for fn in tier:
            allowed = fn(ctx, candidates)
            if allowed is None:
                continue
            if not allowed:
                agreed = None
                break
            if agreed is None:
                agreed = list(allowed)
            else:
                kept = {t.key for t in allowed}
                agreed = [t for t in agreed if t.key in kept] or None
        if agreed is not None:
            return agreed
    return []


def chain_filters(tiers: Tiers[VictimFilter], ctx: EvictionContext, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
    """Victim filters: each one, in every tier, in order, takes what the one before it let go (so they compose,
    and the last one's order is the order the action takes victims in); none: the candidates as given."""
    kept = list(candidates)
    for tier in tiers:
        for fn in tier:
            kept = fn(ctx, kept)
    return kept


def first_domains(tiers: Tiers[EvictDomains], job: JobInfo) -> list[Domain] | None:
    """The first plugin that serves the point decides (Volcano: the first plugin with
    HyperNodeGradientForJobFn); None when none does."""
    for tier in tiers:
        for fn in tier:
            return fn(job)
    return None


def sum_hypernode_scores(tiers: Tiers[HyperNodeScore], job: JobInfo, tasks: Sequence[TaskInfo],
                         candidates: Mapping[str, IntArray]) -> dict[str, float]:
    """HyperNode scores for a sub-group: every plugin's score of a candidate adds up, 0 where no plugin scores it
    (Volcano's HyperNodeOrderMapFn summed by util.PrioritizeHyperNodes)."""
    total = dict.fromkeys(candidates, 0.0)
    for tier in tiers:
        for fn in tier:
            for name, score in fn(job, tasks, candidates).items():
                if name in total:
                    total[name] += score
    return total
