"""Layer `api`: a PodGroup's `spec.subGroupPolicy` — sub-groups of its pods, each a gang of its own with its own
network topology (Volcano's SubJobInfo, pkg/scheduler/api/sub_job_info.go; job_info.go).

Each policy picks pods by `labelSelector` and groups the picked ones by the values of their `matchLabelKeys`
labels: pods with the same values form one sub-group (the job controller writes one policy per partitioned task,
grouping by `volcano.sh/partition-id`: one sub-group per partition, `scheduler/jobs/partitions.py`). A pod goes to
the first policy that picks it and whose keys it carries, all non-empty; a pod no policy takes is in no sub-group
(Volcano's default sub-job, held to the job's own minimum only). A policy without `matchLabelKeys` takes no pod,
as in Volcano (getSubJobMatchValues gives no values, getOrCreateSubJob needs some).

A sub-group is ready when `subGroupSize` of its pods are placed (a pending BestEffort pod counting, as for the
job); the job is ready only when, for every policy with `minSubGroups` > 0, that many of its sub-groups are
(CheckSubJobReady), and valid only when the policy has at least `minSubGroups` sub-groups at all
(CheckSubJobValid). A sub-group's `networkTopology` in hard mode with a `highestTierAllowed` keeps all its pods
inside one domain of at most that tier; soft mode, or hard mode without a tier, constrains nothing (Volcano's
SubJobInfo.IsHardTopologyMode).

The policies are parsed once, when the PodGroup is read (`check_sub_groups`, registered for the field table); a
bad one leaves the PodGroup out with a `FieldInvalid` reason, as any unreadable PodGroup spec field does.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from scheduler.api import field_parsers as parsers
from scheduler.api.phases import READY_STATUSES, TaskStatus
from scheduler.api.selectors import LabelSelector, Requirement

_TIER = parsers.integer(0, 64)
_SIZE = parsers.integer(1, parsers.INT32)
_MIN = parsers.integer(0, parsers.INT32)
_KEY = parsers.text(parsers.LABEL_KEY_MAX, empty=False)
_VALUE = parsers.text(parsers.LABEL_VALUE_MAX)
_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
KEYS_MAX = 16  # matchLabelKeys per policy (Volcano sets no bound; the controller writes one)
POLICIES_MAX = 64  # policies per PodGroup (the controller writes one per task)

GroupKey = tuple[int, str]  # (policy index, the pods' joined label values)


class _Task(Protocol):  # what the counts read of a TaskInfo (api/job.py imports this module)
    @property
    def key(self) -> str: ...
    @property
    def labels(self) -> Mapping[str, str]: ...
    @property
    def status(self) -> TaskStatus: ...
    @property
    def best_effort(self) -> bool: ...


class _Job(Protocol):
    @property
    def subs(self) -> SubGroupCounts | None: ...


@dataclass(frozen=True, slots=True)
class SubGroupTopology:
    hard: bool
    tier: int | None = None  # highestTierAllowed; None: not set
    tier_name: str = ""  # highestTierName, kept as written

    def hard_tier(self, top: int, tier_names: Mapping[str, int] | None = None) -> int | None:
        """The highest tier a hard sub-group may span, capped at the cluster tier; None in soft mode, or without
        a highestTierAllowed or a highestTierName some HyperNode's `spec.tierName` carries (`tier_names`: name ->
        tier; Volcano's SubJobInfo.IsHardTopologyMode: hard needs a tier, and the session translates a
        highestTierName through the HyperNodes' tierName)."""
        if not self.hard:
            return None
        tier = self.tier
        if tier is None and self.tier_name and tier_names is not None:
            tier = tier_names.get(self.tier_name)
        return None if tier is None else min(tier, top)


@dataclass(frozen=True, slots=True)
class SubGroupPolicy:
    name: str
    size: int = 1  # subGroupSize: the placed pods that make one sub-group ready
    min_groups: int = 0  # minSubGroups
    selector: LabelSelector | None = None
    match_keys: tuple[str, ...] = ()
    topology: SubGroupTopology | None = None

    def hard_topology(self) -> bool:
        return self.topology is not None and self.topology.hard and self.topology.tier is not None


def _selector(raw: object) -> LabelSelector | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise parsers.BadValueError("has a labelSelector that is not an object")
    labels = raw.get("matchLabels") or {}
    if not isinstance(labels, Mapping):
        raise parsers.BadValueError("has matchLabels that are not a map")
    pairs = tuple(sorted((_KEY.parse(k), _VALUE.parse(v)) for k, v in labels.items()))
    expressions = raw.get("matchExpressions") or []
    if not isinstance(expressions, list):
        raise parsers.BadValueError("has matchExpressions that are not a list")
    out = []
    for item in expressions:
        if not isinstance(item, Mapping) or item.get("operator") not in _OPERATORS:
            raise parsers.BadValueError(f"has a matchExpression whose operator is not one of {', '.join(_OPERATORS)}")
        values = item.get("values") or []
        if not isinstance(values, list):
            raise parsers.BadValueError("has a matchExpression whose values are not a list")
        out.append(Requirement(_KEY.parse(item.get("key")), str(item["operator"]),
                               tuple(_VALUE.parse(v) for v in values)))
    return LabelSelector(pairs, tuple(out))


def _topology(raw: object) -> SubGroupTopology | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise parsers.BadValueError("has a networkTopology that is not an object")
    mode = raw.get("mode") or "hard"
    if type(mode) is not str or mode.lower() not in ("hard", "soft"):
        raise parsers.BadValueError("has a networkTopology mode that is not hard or soft")
    tier = raw.get("highestTierAllowed")
    name = raw.get("highestTierName") or ""
    return SubGroupTopology(mode.lower() == "hard", None if tier is None else _TIER.parse(tier),
                            parsers.KEY_TEXT.parse(name))


def _policy(raw: object) -> SubGroupPolicy:
    if not isinstance(raw, Mapping):
        raise parsers.BadValueError("has an entry that is not an object")
    keys = raw.get("matchLabelKeys") or []
    if not isinstance(keys, list) or len(keys) > KEYS_MAX:
        raise parsers.BadValueError(f"has matchLabelKeys that are not a list of at most {KEYS_MAX} label keys")
    size, least = raw.get("subGroupSize"), raw.get("minSubGroups")
    return SubGroupPolicy(
        name=parsers.KEY_TEXT.parse(raw.get("name") or ""),
        size=1 if size is None else _SIZE.parse(size),
        min_groups=0 if least is None else _MIN.parse(least),
        selector=_selector(raw.get("labelSelector")),
        match_keys=tuple(_KEY.parse(k) for k in keys),
        topology=_topology(raw.get("networkTopology")),
    )


def check_sub_groups(raw: list[Any]) -> tuple[SubGroupPolicy, ...]:
    """`spec.subGroupPolicy`: at most POLICIES_MAX entries, each read with its bounds."""
    if len(raw) > POLICIES_MAX:
        raise parsers.BadValueError(f"has more than {POLICIES_MAX} policies")
    return tuple(_policy(entry) for entry in raw)


parsers.register("sub_groups", check_sub_groups)


def sub_group_job(job: _Job) -> bool:
    """A job with a sub-group policy: only the sub-group placer (actions/subgroups.py) places it, each sub-group
    whole (Volcano sends every such job through allocateForJob); the gang placers abstain, and pod-by-pod
    allocation, reservation and the legacy preempt and reclaim leave it alone (gangpreempt and gangreclaim plan it
    sub-group by sub-group: actions/subgroup_eviction.py)."""
    return job.subs is not None


def group_of(policies: tuple[SubGroupPolicy, ...], labels: Mapping[str, str]) -> GroupKey | None:
    """The sub-group of a pod with these labels (getOrCreateSubJob): the first policy that picks it and whose keys
    it carries, all non-empty; None for a pod in no sub-group."""
    for index, policy in enumerate(policies):
        if not policy.match_keys:
            continue
        if policy.selector is not None and not policy.selector.matches(labels):
            continue
        values = [labels.get(key) or "" for key in policy.match_keys]
        if all(values):
            return index, "-".join(values)
    return None


def group_name(policies: tuple[SubGroupPolicy, ...], key: GroupKey) -> str:
    return f"{policies[key[0]].name}-{key[1]}"


def match_index(key: GroupKey) -> int:
    """Volcano orders sub-groups by the first label value read as a number (SubJobInfo.MatchIndex; 0 if not)."""
    first = key[1].split("-", 1)[0]
    return int(first) if first.isdigit() and len(first) < 10 else 0


class SubGroupCounts:
    """A job's tasks by sub-group, with each sub-group's placed, waiting and pending-BestEffort counts kept in step
    with the tasks' statuses (JobInfo.add_task and set_status call `add` and `moved`)."""

    __slots__ = ("policies", "of", "members", "ready", "waiting", "best_effort")

    def __init__(self, policies: tuple[SubGroupPolicy, ...]) -> None:
        self.policies = policies
        self.of: dict[str, GroupKey] = {}
        self.members: Counter[GroupKey] = Counter()
        self.ready: Counter[GroupKey] = Counter()
        self.waiting: Counter[GroupKey] = Counter()
        self.best_effort: Counter[GroupKey] = Counter()

    def add(self, task: _Task) -> None:
        key = group_of(self.policies, task.labels)
        if key is None:
            return
        self.of[task.key] = key
        self.members[key] += 1
        self._count(key, task.status, task.best_effort, 1)

    def moved(self, task: _Task, old: TaskStatus, new: TaskStatus) -> None:
        key = self.of.get(task.key)
        if key is not None and old is not new:
            self._count(key, old, task.best_effort, -1)
            self._count(key, new, task.best_effort, 1)

    def _count(self, key: GroupKey, status: TaskStatus, best_effort: bool, sign: int) -> None:
        if status in READY_STATUSES:
            self.ready[key] += sign
        elif status is TaskStatus.PIPELINED:
            self.waiting[key] += sign
        elif status is TaskStatus.PENDING and best_effort:
            self.best_effort[key] += sign

    def keys(self, policy: int) -> Iterator[GroupKey]:
        return (key for key in self.members if key[0] == policy)

    def group_ready(self, key: GroupKey, *, waiting: bool = False) -> bool:
        """SubJobInfo.IsReady (IsPipelined with `waiting`): subGroupSize of its pods placed (or waiting)."""
        have = self.ready[key] + self.best_effort[key] + (self.waiting[key] if waiting else 0)
        return have >= self.policies[key[0]].size

    def short(self, *, waiting: bool = False) -> tuple[str, int, int] | None:
        """The first policy with fewer ready (or, with `waiting`, pipelined) sub-groups than its minSubGroups, as
        (name, ready, minimum); None when every policy has its minimum (CheckSubJobReady, CheckSubJobPipelined)."""
        for index, policy in enumerate(self.policies):
            if policy.min_groups <= 0:
                continue
            have = sum(1 for key in self.keys(index) if self.group_ready(key, waiting=waiting))
            if have < policy.min_groups:
                return policy.name, have, policy.min_groups
        return None

    def invalid(self) -> tuple[str, int, int] | None:
        """The first policy with fewer sub-groups than its minSubGroups, as (name, sub-groups, minimum)
        (CheckSubJobValid)."""
        for index, policy in enumerate(self.policies):
            have = sum(1 for _ in self.keys(index))
            if have < policy.min_groups:
                return policy.name, have, policy.min_groups
        return None
