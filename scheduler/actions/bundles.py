"""Layer `actions`: victim bundles of gang-aware eviction (`gangpreempt`, `gangreclaim`).

A victim job's candidate tasks inside one domain split in two bundles (Volcano: pkg/scheduler/actions/utils/
bundle.go, CreateJobBundles):

- the safe bundle: the tasks the job can lose and stay a whole gang: its ready tasks stay at or above
  minAvailable, and each role with a minimum (minTaskMember) keeps it, where task minimums apply
  (minAvailable >= their sum, as the gang plugin checks them); tasks are taken lowest priority first, then by uid;
- the whole bundle: the rest. Taking it breaks the gang, so it is worth only what it frees here against what the
  whole job holds (its ROI).
A job that is already below its minimum has one safe bundle of every candidate: losing more cannot break it more.
A job with sub-groups (`subGroupPolicy`) also keeps each policy's `minSubGroups` whole sub-groups: a pod of a
sub-group not whole already is safe to take; taking a pod of a whole one breaks it and uses up one of its policy's
whole sub-groups beyond the minimum (none left: the pod goes in the whole bundle); the pods in no sub-group are held
to the job's minimum only (Volcano's enforceSubJobs in CreateJobBundles).

Bundles are ordered safe before whole, then by the victim job (the reverse of JobOrder for preempt; for reclaim
the victim queue order: capacity's nearest-in-the-tree first, else the reverse of QueueOrder), then by ROI
(what the bundle frees here, capped at the need, over what its job holds: infinite for a safe bundle), then by
job uid, first task uid and size.
"""

from __future__ import annotations

import enum
import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from scheduler.api.job import JobInfo, TaskInfo
from scheduler.api.phases import READY_STATUSES, TaskStatus
from scheduler.api.resources import PODS, ZERO, Resource
from scheduler.api.subgroups import GroupKey


class BundleKind(enum.IntEnum):
    SAFE = 0
    WHOLE = 1


@dataclass(frozen=True, slots=True)
class Bundle:
    kind: BundleKind
    job: JobInfo
    tasks: tuple[TaskInfo, ...]
    local: Resource  # what the bundle's tasks request
    whole: Resource  # what every task of the job requests (whole bundles only; ZERO for a safe one)


def _requests(tasks: Sequence[TaskInfo]) -> Resource:
    return Resource.total(t.resreq for t in tasks)


def job_bundles(job: JobInfo, candidates: Sequence[TaskInfo]) -> list[Bundle]:
    """The safe and whole bundles of `job`'s candidate tasks (see the module doc)."""
    if not candidates:
        return []
    tasks = sorted(candidates, key=lambda t: (t.priority, t.key))
    surplus = job.ready_task_num() - job.min_available
    if surplus < 0:
        return [Bundle(BundleKind.SAFE, job, tuple(tasks), _requests(tasks), ZERO)]
    role_surplus: dict[str, int] = {}
    if job.min_available >= job.task_min_total():
        ready = job.role_counts(READY_STATUSES | {TaskStatus.SUCCEEDED}, best_effort_pending=True)
        role_surplus = {role: ready[role] - need for role, need in job.min_task_member.items()}
    broken, group_surplus = _sub_group_surplus(job)
    safe: list[TaskInfo] = []
    whole: list[TaskInfo] = []
    for task in tasks:
        limited = task.role in role_surplus
        group = job.subs.of.get(task.key) if job.subs is not None else None
        group_safe = group is None or group in broken or group_surplus.get(group[0], 0) > 0
        if surplus > 0 and (not limited or role_surplus[task.role] > 0) and group_safe:
            safe.append(task)
            surplus -= 1
            if limited:
                role_surplus[task.role] -= 1
            if group is not None and group not in broken:
                broken.add(group)
                group_surplus[group[0]] -= 1
        else:
            whole.append(task)
    out = []
    if safe:
        out.append(Bundle(BundleKind.SAFE, job, tuple(safe), _requests(safe), ZERO))
    if whole:
        out.append(Bundle(BundleKind.WHOLE, job, tuple(whole), _requests(whole), _requests(list(job.tasks.values()))))
    return out


def _sub_group_surplus(job: JobInfo) -> tuple[set[GroupKey], dict[int, int]]:
    """The job's sub-groups that are not whole (placed pods short of subGroupSize), and per policy how many whole
    ones it has beyond its minSubGroups."""
    subs = job.subs
    if subs is None:
        return set(), {}
    broken: set[GroupKey] = set()
    surplus = {index: -policy.min_groups for index, policy in enumerate(job.sub_groups)}
    for key in subs.members:
        if subs.group_ready(key):
            surplus[key[0]] = surplus.get(key[0], 0) + 1
        else:
            broken.add(key)
    return broken, surplus


def allowed_bundles(bundles: Sequence[Bundle], allowed: set[str]) -> list[Bundle]:
    """A whole bundle stays only if every task of it is allowed; a safe one keeps its allowed tasks."""
    out = []
    for bundle in bundles:
        approved = tuple(t for t in bundle.tasks if t.key in allowed)
        if bundle.kind == BundleKind.WHOLE:
            if len(approved) == len(bundle.tasks) and approved:
                out.append(bundle)
        elif approved:
            out.append(replace(bundle, tasks=approved, local=_requests(approved)))
    return out


def _score(res: Resource, need: Resource, *, cap: bool) -> float:
    score = 0.0
    for name, units in need.items():
        if name == PODS or units <= 0:
            continue
        have = res.get(name)
        score += (min(have, units) if cap else have) / units
    return score


def roi(bundle: Bundle, need: Resource) -> float:
    """What the bundle frees here (capped at the need) over what its whole job holds; infinite for safe ones."""
    whole = _score(bundle.whole, need, cap=False)
    return math.inf if whole == 0 else _score(bundle.local, need, cap=True) / whole


def _stable_key(bundle: Bundle) -> tuple[str, str, int]:
    return (bundle.job.key, bundle.tasks[0].key if bundle.tasks else "", len(bundle.tasks))


def sort_bundles(bundles: Sequence[Bundle], need: Resource,
                 victim_first: Callable[[JobInfo, JobInfo], bool]) -> list[Bundle]:
    """Bundles in the order victims are taken: kind, then the victim job (`victim_first(a, b)`: a's bundles go
    before b's; applied only when the two answers differ, as Volcano's SortBundlesForPreempt/-Reclaim), then ROI
    (highest first), then job uid, first task uid and size."""
    rois = {id(b): roi(b, need) for b in bundles}

    def compare(a: Bundle, b: Bundle) -> int:
        if a.kind != b.kind:
            return -1 if a.kind < b.kind else 1
        if a.job.key != b.job.key:
            ab, ba = victim_first(a.job, b.job), victim_first(b.job, a.job)
            if ab != ba:
                return -1 if ab else 1
        if rois[id(a)] != rois[id(b)]:
            return -1 if rois[id(a)] > rois[id(b)] else 1
        ka, kb = _stable_key(a), _stable_key(b)
        return (ka > kb) - (ka < kb)

    return sorted(bundles, key=functools.cmp_to_key(compare))
