"""Layer `framework`: the extension points, each declared once with its Volcano switch and its combiner.

A combiner folds the functions plugins registered, tier by tier, into one answer. These few pure functions
carry every tier rule; `Session.run` is the only loop over tiers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

Tiers = Sequence[Sequence[Callable[..., Any]]]


@dataclass(frozen=True, slots=True)
class BatchScorer:
    """A BATCH_NODE_ORDER scorer in both forms: `many(task, arrays, indices)` -> one score per index, and
    `one(task, node)` -> the same score for one node, as a float. They must agree (to float rounding): the
    session mixes them in one cache (tests/plugins/test_batch_scores.py holds each plugin to it)."""

    many: Callable[..., Any]
    one: Callable[..., float]

    def __call__(self, task: Any, arrays: Any, indices: Any) -> Any:
        return self.many(task, arrays, indices)


class Vote(IntEnum):
    REJECT = -1
    ABSTAIN = 0
    PERMIT = 1


@dataclass(frozen=True, slots=True)
class Verdict:
    """A plugin's vote with the reason a person can act on (required for REJECT)."""

    vote: Vote
    reason: str = ""
    plugin: str = ""


PERMIT = Verdict(Vote.PERMIT)
ABSTAIN = Verdict(Vote.ABSTAIN)


def reject(reason: str, plugin: str = "") -> Verdict:
    return Verdict(Vote.REJECT, reason, plugin)


@dataclass(frozen=True, slots=True)
class Invalid:
    """A JobValid failure: the job is not considered this cycle."""

    reason: str
    message: str


# ---- combiners ---------------------------------------------------------------------------------------


def first_nonzero(tiers: Tiers, *args: Any) -> int:
    """Orderings: the first plugin with an opinion decides."""
    for tier in tiers:
        for fn in tier:
            result = fn(*args)
            if result:
                return int(result)
    return 0


def all_pass(tiers: Tiers, *args: Any) -> bool:
    for tier in tiers:
        for fn in tier:
            if not fn(*args):
                return False
    return True


def first_rejection(tiers: Tiers, *args: Any) -> str | None:
    """Predicates: every plugin must pass; the first reason against is returned."""
    for tier in tiers:
        for fn in tier:
            reason = fn(*args)
            if reason:
                return str(reason)
    return None


def sum_scores(tiers: Tiers, *args: Any) -> float:
    total = 0.0
    for tier in tiers:
        for fn in tier:
            total += fn(*args)
    return total


def sum_score_arrays(tiers: Tiers, task: Any, arrays: Any, indices: Any) -> Any:
    """Batch node scores: each plugin returns one score per candidate index; they add up."""
    total = None
    for tier in tiers:
        for fn in tier:
            scores = fn(task, arrays, indices)
            total = scores if total is None else total + scores
    return total


def rejections_per_node(tiers: Tiers, task: Any, nodes: Sequence[Any]) -> list[str | None]:
    """Dynamic predicates: each plugin returns one reason-or-None per node; the first reason per node wins."""
    out: list[str | None] = [None] * len(nodes)
    for tier in tiers:
        for fn in tier:
            for i, reason in enumerate(fn(task, nodes)):
                if reason and out[i] is None:
                    out[i] = str(reason)
    return out


def sum_node_lists(tiers: Tiers, task: Any, nodes: Sequence[Any]) -> list[float]:
    """Dynamic node scores: each plugin returns one score per node; they add up."""
    total = [0.0] * len(nodes)
    for tier in tiers:
        for fn in tier:
            for i, score in enumerate(fn(task, nodes)):
                total[i] += float(score)
    return total


def any_true(tiers: Tiers, *args: Any) -> bool:
    return any(fn(*args) for tier in tiers for fn in tier)


def first_tier_all(tiers: Tiers, *args: Any) -> bool:
    """JobStarving, as Volcano's Session.JobStarving (pkg/scheduler/framework/session_plugins.go): the first
    tier with any function decides, and there every function must agree (the priority plugin's "short of its
    replicas" and the gang plugin's "short of minAvailable" together mean short of minAvailable)."""
    for tier in tiers:
        if tier:
            return all(fn(*args) for fn in tier)
    return False


def votes(tiers: Tiers, *args: Any) -> Verdict:
    """Any REJECT wins; otherwise the first tier with a PERMIT decides; with no opinion at all, permit."""
    for tier in tiers:
        permitted = False
        for fn in tier:
            verdict: Verdict = fn(*args)
            if verdict.vote == Vote.REJECT:
                return verdict
            permitted = permitted or verdict.vote == Vote.PERMIT
        if permitted:
            return PERMIT
    return PERMIT


def first_answer(tiers: Tiers, *args: Any) -> Any:
    """The first plugin that answers (returns something other than None) decides."""
    for tier in tiers:
        for fn in tier:
            result = fn(*args)
            if result is not None:
                return result
    return None


first_invalid = first_answer


def every_filter(tiers: Tiers, candidates: Sequence[Any], *args: Any) -> list[Any]:
    """Victim guards: each one, in every tier, keeps only the candidates it allows (they compose)."""
    kept = list(candidates)
    for tier in tiers:
        for fn in tier:
            kept = fn(kept, *args)
    return kept


@dataclass(frozen=True, slots=True)
class GangPlacement:
    """A whole gang's placement from a gang placer (e.g. the topology-aware solver): (task, node) pairs."""

    assignments: tuple[tuple[Any, Any], ...]  # (TaskInfo, NodeInfo)


@dataclass(frozen=True, slots=True)
class GangInfeasible:
    """A gang placer's proof that the gang cannot be placed now, with a reason a person can act on."""

    reason: str


def tier_victims(tiers: Tiers, *args: Any) -> list[Any]:
    """Preemptable/Reclaimable, as Volcano's Session.Preemptable/Reclaimable (pkg/scheduler/framework/
    session_plugins.go): within a tier, the victims every voting plugin agrees on; a plugin that offers none
    ends the tier with no answer, and so does an empty agreement; the first tier with victims wins. (So a gang
    that tier 1 protects completely can still lose tasks to what tier 2 allows: that is Volcano's rule too.)"""
    for tier in tiers:
        agreed: dict[int, Any] | None = None
        for fn in tier:
            candidates = fn(*args)
            if candidates is None:  # abstain
                continue
            if not candidates:
                agreed = None
                break
            ids = {id(v): v for v in candidates}
            agreed = ids if agreed is None else ({k: v for k, v in agreed.items() if k in ids} or None)
        if agreed:
            return list(agreed.values())
    return []


@dataclass(frozen=True, slots=True)
class Point:
    name: str
    switch: str | None  # Volcano's enableXxx key that turns a plugin's function off at this point
    combine: Callable[..., Any]


JOB_ORDER = Point("job_order", "enableJobOrder", first_nonzero)
QUEUE_ORDER = Point("queue_order", "enableQueueOrder", first_nonzero)
TASK_ORDER = Point("task_order", "enableTaskOrder", first_nonzero)
PREDICATE = Point("predicate", "enablePredicate", first_rejection)
NODE_ORDER = Point("node_order", "enableNodeOrder", sum_scores)
# The vectorised form of NODE_ORDER: fn(task, NodeArrays, candidate indices) -> float array. Scorers on the
# hot path use it, so scoring 5,000 nodes is a few numpy expressions rather than 5,000 Python calls.
# A score of -inf vetoes the node (e.g. deviceshare: no card can hold the share). A scorer registered as a
# `BatchScorer` also gives its score for one node as a plain float, which the session uses when one node
# changed (the one the previous task went to): numpy's per-call cost is most of the time there.
BATCH_NODE_ORDER = Point("batch_node_order", "enableNodeOrder", sum_score_arrays)
JOB_VALID = Point("job_valid", None, first_invalid)
JOB_READY = Point("job_ready", "enableJobReady", all_pass)
JOB_PIPELINED = Point("job_pipelined", "enableJobPipelined", votes)
JOB_ENQUEUEABLE = Point("job_enqueueable", "enableJobEnqueued", votes)
ALLOCATABLE = Point("allocatable", "enabledAllocatable", all_pass)
OVERUSED = Point("overused", "enabledOverused", any_true)
PREEMPTABLE = Point("preemptable", "enablePreemptable", tier_victims)
RECLAIMABLE = Point("reclaimable", "enableReclaimable", tier_victims)
JOB_STARVING = Point("job_starving", "enableJobStarving", first_tier_all)
# fn(queue, task) -> bool: may the queue take this task by evicting other queues' tasks (reclaim)? Strict: no
# escape hatch for tasks that fit nowhere, since reclaim exists for exactly those.
PREEMPTIVE = Point("preemptive", "enablePreemptive", all_pass)
# Victim guards: fn(candidates, preemptor) -> the candidates this plugin lets go, applied after the tier vote
# whatever tier answered. Volcano's tier rule lets a later tier evict what an earlier tier's plugin protected
# (a plugin that offers no victim ends its tier without an answer): with gang in tier 1 and drf in tier 2, a
# gang at its minAvailable loses pods to drf. volcano-py keeps the protection of the plugins that give it (gang:
# minAvailable; conformance: critical pods) across tiers, switched by the same enablePreemptable /
# enableReclaimable keys, so a conf that turns gang's off (Volcano's CI conf does) behaves as Volcano's.
PREEMPT_GUARD = Point("preempt_guard", "enablePreemptable", every_filter)
RECLAIM_GUARD = Point("reclaim_guard", "enableReclaimable", every_filter)
# Predicates and scores that depend on where other pods are (inter-pod (anti-)affinity, topology spread), so
# they cannot be cached per constraint set. fn(task, nodes) -> one reason-or-None (or score) per node.
# The session evaluates them only for tasks whose constraints have such terms (`Constraints.dynamic`).
DYNAMIC_PREDICATE = Point("dynamic_predicate", "enablePredicate", rejections_per_node)
DYNAMIC_NODE_ORDER = Point("dynamic_node_order", "enableNodeOrder", sum_node_lists)
# fn(job, tasks in TaskOrder) -> GangPlacement | GangInfeasible | None (None: let allocate place pod by pod).
# The placement is replayed through a Statement, so predicates, queue shares and gang rules still hold.
PLACE_GANG = Point("place_gang", None, first_answer)

ALL_POINTS = (
    JOB_ORDER,
    QUEUE_ORDER,
    TASK_ORDER,
    PREDICATE,
    NODE_ORDER,
    BATCH_NODE_ORDER,
    JOB_VALID,
    JOB_READY,
    JOB_PIPELINED,
    JOB_ENQUEUEABLE,
    ALLOCATABLE,
    OVERUSED,
    PREEMPTABLE,
    RECLAIMABLE,
    PREEMPT_GUARD,
    RECLAIM_GUARD,
    JOB_STARVING,
    PLACE_GANG,
    PREEMPTIVE,
    DYNAMIC_PREDICATE,
    DYNAMIC_NODE_ORDER,
)
