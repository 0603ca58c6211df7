"""Layer `api`: the snapshot a session opens from, and the decisions a cycle returns.

A cluster adapter (the Kubernetes cache, or the simulator's in-memory cluster) produces a `ClusterSnapshot`
and applies a `CycleResult`. The scheduling core never sees anything else of the outside world.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from scheduler.api.decision import REASONS_ANNOTATION, Status, publish
from scheduler.api.disruption import DisruptionBudget
from scheduler.api.dra import ClaimWrite, DraObjects
from scheduler.api.job import Condition, JobInfo
from scheduler.api.node import NodeInfo
from scheduler.api.phases import PodGroupPhase
from scheduler.api.queue import QueueInfo
from scheduler.api.quota import ResourceQuotaInfo
from scheduler.api.reasons import Reason
from scheduler.api.resources import Resource
from scheduler.api.shard import ShardView
from scheduler.api.usage import QueueUsage
from scheduler.api.volumes import Storage


@dataclass(frozen=True, slots=True, eq=False)
class Lineage:
    """What an incremental build (`adapter/incremental.py`) kept of the snapshot it was built from: every job
    but those in `jobs` is the very JobInfo the snapshot `since` held, untouched by the session that used it and
    with its phase and minAvailable as read again. A session whose last one opened on `since` does only the
    changed jobs' share of its per-job work (`framework/carry.py`). `since` None: built afresh."""

    since: object | None
    token: object
    jobs: frozenset[str]  # job keys made again, new or gone since `since`


@dataclass(slots=True)
class ClusterSnapshot:
    nodes: dict[str, NodeInfo]
    jobs: dict[str, JobInfo]
    queues: dict[str, QueueInfo]
    now: float = 0.0
    hypernodes: tuple[Mapping[str, Any], ...] = ()  # topology.volcano.sh HyperNode objects, as served
    # PersistentVolumes, claims and StorageClasses; None where volumes are not modelled (the simulator, unless
    # given storage objects): pods' claims are then ignored.
    storage: Storage | None = None
    # Queues left out because a field could not be read (api/fields.py), by name: why, for the jobs that name them
    unreadable_queues: Mapping[str, tuple[Reason, ...]] = field(default_factory=dict)
    # Our pending pods that name a PodGroup that does not exist: (pod key, PodGroup name, pod creation); the cache
    # says so on the pod once it has waited a while (a controller makes the PodGroup first, so it is rare).
    orphans: tuple[tuple[str, str, float], ...] = ()
    # PodDisruptionBudgets (policy/v1), each field parsed (`api/disruption.py`); the pdb plugin reads them.
    disruption_budgets: tuple[DisruptionBudget, ...] = ()
    # ResourceQuotas (core/v1), their status parsed (`api/quota.py`); the resourcequota plugin reads them.
    resource_quotas: tuple[ResourceQuotaInfo, ...] = ()
    # Volcano's feature gate SchedulingGatesQueueAdmission (the scheduler's --feature-gates): allocate removes the
    # queue-allocation gate of an opted-in pod once its queue has room, and capacity reserves that room.
    queue_allocation_gate: bool = False
    # Dynamic Resource Allocation (resource.k8s.io/v1): slices, classes, claims, templates, each parsed
    # (`api/dra_parse.py`); None where DRA is not modelled (the simulator): pods' device claims are then ignored.
    dra: DraObjects | None = None
    # Volcano's NodeShard contract (`api/shard.py`): the mode and the nodes this scheduler's shard may use this
    # session; None with sharding off (--scheduler-sharding-mode none).
    shard: ShardView | None = None
    # How this snapshot follows from the last one, when an incremental build made it (None: a cold build).
    lineage: Lineage | None = None


@dataclass(frozen=True, slots=True)
class VolumeBind:
    """A claim the scheduler binds for a committed gang before its pods, as kube-scheduler's volume binder: to
    `volume`, a PersistentVolume (its claimRef, which the PV controller completes), or with no volume for dynamic
    provisioning on `node` (the claim's selected-node annotation)."""

    claim: str  # namespace/name
    node: str
    volume: str = ""


@dataclass(frozen=True, slots=True)
class GangBind:
    """All binds of one committed gang: sent together; if one fails the rest are not sent. Its claims are bound
    first; if that fails, none of its pods is bound."""

    job: str
    binds: tuple[tuple[str, str], ...]  # (task uid, node name)
    volumes: tuple[VolumeBind, ...] = ()
    claims: tuple[ClaimWrite, ...] = ()  # DRA claims' allocation and reservedFor, written before the binds


@dataclass(frozen=True, slots=True)
class EvictCause:
    """Why a task is evicted, as data (the report, `explain` and the simulator show it): the action, the job the
    room is made for, the rule that chose the victim (e.g. `safe bundle`, `whole bundle`, `lowest priority
    first`), and whether the eviction leaves the victim's gang below its minimum."""

    action: str
    by: str
    rule: str
    breaks_gang: bool = False


@dataclass(frozen=True, slots=True)
class Eviction:
    job: str
    task: str
    node: str
    reason: str
    cause: EvictCause | None = None
    # Seconds the victim is warned before its delete: its queue's eviction notice (api/evictions.py); 0: none.
    notice: float = 0.0


@dataclass(frozen=True, slots=True)
class PodGroupStatus:
    job: str
    phase: PodGroupPhase
    conditions: tuple[Condition, ...]
    running: int
    succeeded: int
    failed: int
    # The smaller minMember the scheduler retries a timed-out gang with (status.minMemberOverride); None: none.
    min_member_override: int | None = None
    # What the Unschedulable condition's message was rendered from, published as the annotation
    # `api.decision.REASONS_ANNOTATION`; None when the PodGroup is not unschedulable (the annotation is removed).
    decision: Status | None = None
    # The phase once every bind of this cycle's result for the gang has landed (Running where the binds reach
    # minMember), when it differs from `phase`: the writer, which writes after the binds, writes it instead when
    # none of them failed, so the PodGroup goes Inqueue -> Running in one write instead of two cycles' writes.
    phase_when_bound: PodGroupPhase | None = None
    # The phase and conditions the cycle read (its snapshot's), from which `phase` and `conditions` were worked
    # out: a status written after the next cycle's snapshot was taken (--pipeline-apply) is rebased onto what the
    # PodGroup holds by then (adapter/podgroup_status.py `rebase`). None: not known (then written as it is).
    base: tuple[PodGroupPhase | None, tuple[Condition, ...]] | None = field(default=None, compare=False, repr=False)


def reasons_annotation(status: PodGroupStatus, current: Mapping[str, Any] | None) -> dict[str, str | None] | None:
    """The merge patch of the PodGroup's `metadata.annotations` that publishes `status.decision` (None: no
    change). The annotation goes when the PodGroup is no longer Unschedulable; a condition this cycle did not
    renew keeps the annotation it had."""
    now = (current or {}).get(REASONS_ANNOTATION)
    if status.decision is not None:
        wanted: str | None = publish(status.decision)
    elif any(c.type == "Unschedulable" and c.status == "True" for c in status.conditions):
        return None
    else:
        wanted = None
    return None if wanted == now else {REASONS_ANNOTATION: wanted}


@dataclass(frozen=True, slots=True)
class QueueStatus:
    queue: str
    allocated: Resource
    # Filled by the plugin that computes fair shares (proportion), for metrics; None without one.
    deserved: Resource | None = None
    share: float | None = None  # the largest allocated/deserved ratio over the resources deserved
    overused: bool | None = None
    # The queue's decayed usage folded to this cycle (time-based fair share on; api/usage.py), which the status
    # writer keeps in the Queue's annotation; None: the feature is off, nothing is written.
    usage: QueueUsage | None = None


@dataclass(frozen=True, slots=True)
class Event:
    kind: str  # Pod | PodGroup
    key: str  # namespace/name
    type: str  # Normal | Warning
    reason: str
    message: str


@dataclass(slots=True)
class CycleResult:
    binds: list[GangBind] = field(default_factory=list)
    evictions: list[Eviction] = field(default_factory=list)
    podgroups: list[PodGroupStatus] = field(default_factory=list)
    queues: list[QueueStatus] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    # Pod annotations to write before a pod is bound (task uid -> annotations), e.g. deviceshare's
    # volcano.sh/gpu-index, which the GPU device plugin reads to pick the cards.
    annotations: dict[str, dict[str, str]] = field(default_factory=dict)
    # PodGroup annotations to merge-patch (job uid -> key -> value, None: remove), e.g. network-topology-aware's
    # volcano.sh/job-allocated-hypernode.
    podgroup_annotations: dict[str, dict[str, str | None]] = field(default_factory=dict)
    # Seconds spent per step, for metrics and logs: "action:<name>", "plugin:<name>:OnSessionOpen" and
    # "...:OnSessionClose", "session:open" (the Session's construction, its plugins' OnSessionOpen included).
    timings: dict[str, float] = field(default_factory=dict)
    # Counts for metrics: "eviction_transactions:<reason>", statements committed with evictions.
    counters: dict[str, int] = field(default_factory=dict)
    # Pods (task uid: namespace/name) whose only scheduling gate, Volcano's queue-allocation gate, is to be removed
    # (SchedulingGatesQueueAdmission): they passed their queue's Allocatable check this cycle.
    ungate: list[str] = field(default_factory=list)
    # The earliest time a rule that held something back this cycle lets go by itself (a victim's minimum runtime
    # ends: plugins/minruntime.py), or None: a replay that skips idle time runs a cycle then (sim/replay.py).
    look_again: float | None = None
    # Jobs allocate left untried because the cycle's budget of binds was spent (`maxBindsPerCycle`), by key: the
    # next cycle starts at once rather than after the period (cache/runner.py), and none counts as an attempt.
    deferred: tuple[str, ...] = ()


class ClusterAdapter(Protocol):
    def snapshot(self) -> ClusterSnapshot: ...

    def apply(self, result: CycleResult) -> None: ...
