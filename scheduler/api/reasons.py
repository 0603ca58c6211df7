"""Layer `api`: why a job waits, as values — the reasons a `Status` carries (see `api/decision.py`).

Each reason is a frozen dataclass with a stable `kind` (the JSON tag; never rename one, tools read it) and only
plain fields: names, counts, and resource amounts as integers in volcano-py's units (`api/resources.py`: cpu in
millicores, memory in bytes, extended resources such as GPUs in milli-units), never formatted numbers. A set of
amounts over several resources is `Amounts`, sorted `(name, units)` pairs. `to_json` / `from_json` are exact
inverses, so what the scheduler publishes on a PodGroup is what `volcano-py explain` reads back.

Sentences are made from reasons in one place, `api/messages.py`; nothing parses them back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from scheduler.api.reason_base import Reason as Reason, amounts as amounts
from scheduler.api.reason_codec import (
    Amounts as Amounts,
    JsonObject as JsonObject,
    ReasonError as ReasonError,
    decode_object,
)
from scheduler.api.reasons_dra import DRA_KINDS
from scheduler.api.reasons_topology import (
    MinRuntimeProtected as MinRuntimeProtected,
    ResourceQuotaExceeded as ResourceQuotaExceeded,
    SubGroupNoDomain as SubGroupNoDomain,
    SubGroupsShort as SubGroupsShort,
    TopologyLimit as TopologyLimit,
    TopologyNoFit as TopologyNoFit,
    TopologyNoNode as TopologyNoNode,
)
from scheduler.api.resources import CPU, MEMORY, Resource

# ---- queues ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class QueueMissing(Reason):
    kind: ClassVar[str] = "QueueMissing"
    queue: str


@dataclass(frozen=True, slots=True)
class QueueClosed(Reason):
    """The queue is not Open (`state` Closed, Closing or Unknown): enqueue admits nothing from it."""

    kind: ClassVar[str] = "QueueClosed"
    queue: str
    state: str


@dataclass(frozen=True, slots=True)
class QueueNotLeaf(Reason):
    """capacity with enableHierarchy: jobs go to leaf queues only."""

    kind: ClassVar[str] = "QueueNotLeaf"
    queue: str
    children: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class QueueParentMissing(Reason):
    """capacity with enableHierarchy: `at` (the queue or one of its ancestors) names a parent that is no Queue."""

    kind: ClassVar[str] = "QueueParentMissing"
    queue: str
    at: str
    parent: str


@dataclass(frozen=True, slots=True)
class QueueParentCycle(Reason):
    kind: ClassVar[str] = "QueueParentCycle"
    queue: str
    at: str
    through: str


# Which limit a `QueueLimit` is: the queue's own `capability`; its real capability as proportion and capacity
# compute it without a capability (the cluster less what other queues are guaranteed); or, in a queue tree, its
# parent's real capability less what the parent's other children are guaranteed.
CAPABILITY = "capability"
REAL_CAPABILITY = "real-capability"
PARENT_CAPABILITY = "parent-capability"
DESERVED = "deserved"  # Allocatable (proportion): the queue's deserved share, which allocate does not pass


@dataclass(frozen=True, slots=True)
class QueueLimit(Reason):
    """JobEnqueueable (proportion, capacity): the job's minResources on top of what the queue holds passes
    `limit_amount`: allocated - elastic + admitted + requested = total (less what preemption could free).
    Allocatable: one task's request on top of what the queue holds passes it (elastic and admitted are 0)."""

    kind: ClassVar[str] = "QueueLimit"
    queue: str
    limit: str  # CAPABILITY | REAL_CAPABILITY | PARENT_CAPABILITY | DESERVED
    resource: str
    limit_amount: int
    total: int
    requested: int
    allocated: int = 0
    elastic: int = 0
    admitted: int = 0
    cluster: int = 0  # REAL_CAPABILITY: the cluster's allocatable
    guaranteed_to_others: int = 0  # REAL_CAPABILITY: what the other queues are guaranteed
    parent: str = ""  # PARENT_CAPABILITY

    @property
    def short(self) -> int:
        return self.total - self.limit_amount


@dataclass(frozen=True, slots=True)
class QueueOverused(Reason):
    """Overused (proportion): the queue holds its deserved share, so allocate skips it this cycle."""

    kind: ClassVar[str] = "QueueOverused"
    queue: str


@dataclass(frozen=True, slots=True)
class QueueShareExceeded(Reason):
    """Allocatable: the queue cannot take a task of `request` more without passing its share."""

    kind: ClassVar[str] = "QueueShareExceeded"
    queue: str
    request: Amounts


@dataclass(frozen=True, slots=True)
class OvercommitLimit(Reason):
    """JobEnqueueable (overcommit): used + admitted + requested = total passes cluster x factor = capacity."""

    kind: ClassVar[str] = "OvercommitLimit"
    resource: str
    cluster: int
    factor: float
    capacity: int
    used: int
    admitted: int
    requested: int
    total: int

    @property
    def short(self) -> int:
        return self.total - self.capacity


# ---- gangs ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GangNotReady(Reason):
    """Volcano's head: `unschedulable`/`tasks` tasks in gang unschedulable, `ready` ready, minAvailable."""

    kind: ClassVar[str] = "GangNotReady"
    unschedulable: int
    tasks: int
    ready: int
    min_available: int


@dataclass(frozen=True, slots=True)
class TooFewTasks(Reason):
    """JobValid (gang): fewer live tasks than the minimum, for the job (`role` "") or for one task role."""

    kind: ClassVar[str] = "TooFewTasks"
    role: str
    valid: int
    needed: int


@dataclass(frozen=True, slots=True)
class SchedulingGated(Reason):
    """`tasks` of the gang's pending pods have `spec.schedulingGates`, which no scheduler may pass (the first
    gate of the first of them is `gate`): they are placed once whoever set the gates removes them."""

    kind: ClassVar[str] = "SchedulingGated"
    tasks: int
    gate: str


@dataclass(frozen=True, slots=True)
class RoleNotReady(Reason):
    """A task role with fewer ready pods than its minimum (minTaskMember)."""

    kind: ClassVar[str] = "RoleNotReady"
    role: str
    ready: int
    needed: int


# Where a `ResourceShortfall` was counted.
NODES = "nodes"  # the nodes the tasks' predicates allow
CLUSTER = "cluster"
DOMAIN = "domain"


@dataclass(frozen=True, slots=True)
class ResourceShortfall(Reason):
    """`tasks` more tasks need `needed` of `resource`; the `nodes` nodes of `scope` have `free`."""

    kind: ClassVar[str] = "ResourceShortfall"
    resource: str
    needed: int
    free: int
    scope: str = NODES
    tasks: int = 0
    nodes: int = 0

    @property
    def short(self) -> int:
        return self.needed - self.free


@dataclass(frozen=True, slots=True)
class Fragmented(Reason):
    """Enough is free in total on the nodes the tasks may use, but no node holds the next task."""

    kind: ClassVar[str] = "Fragmented"
    needed: Amounts
    largest: Amounts  # the most free on one node
    node: str


@dataclass(frozen=True, slots=True)
class NotPipelined(Reason):
    """JobPipelined (gang): even counting releasing resources, minAvailable is not met."""

    kind: ClassVar[str] = "NotPipelined"
    min_available: int


@dataclass(frozen=True, slots=True)
class Reserving(Reason):
    """The starvation guard holds resources for the gang as running pods free them; with `starvationHoldIdle`,
    `drained` of its nodes also keep their free resources for it (0: none)."""

    kind: ClassVar[str] = "Reserving"
    waited_seconds: float
    nodes: int
    held: int
    min_available: int
    drained: int = 0


@dataclass(frozen=True, slots=True)
class PlacementStale(Reason):
    """A gang placer's placement no longer holds when allocate replays it."""

    kind: ClassVar[str] = "PlacementStale"
    task: str
    node: str


@dataclass(frozen=True, slots=True)
class PartialGangTimeout(Reason):
    """A gang partly bound for longer than `timeout_seconds` that cannot be completed (cache/partial.py)."""

    kind: ClassVar[str] = "PartialGangTimeout"
    ready: int
    min_available: int
    timeout_seconds: float
    evicted: int
    kept: int


@dataclass(frozen=True, slots=True)
class ScheduleTimeout(Reason):
    """Not placed within the PodGroup's scheduleTimeoutSeconds; `fallback` is the smaller minAvailable it is
    retried with (0: none asked for)."""

    kind: ClassVar[str] = "ScheduleTimeout"
    timeout_seconds: float
    waited_seconds: float
    min_available: int
    fallback: int = 0


# Where a `MinRuntimeProtected` job's minimum runtime was set (plugins/minruntime.py).
MIN_RUNTIME_JOB = "job"  # the pods' annotation volcano-py.io/min-runtime
MIN_RUNTIME_QUEUE = "queue"  # the plugin's queueMinRuntime for the victim's queue
# the victim's Queue annotation volcano-py.io/min-runtime, or its preempt- or reclaim- form (api/min_runtime.py)
MIN_RUNTIME_QUEUE_ANNOTATION = "queue-annotation"
MIN_RUNTIME_DEFAULT = "default"  # the plugin's minRuntime
MIN_RUNTIME_COOLDOWN = "cooldown"  # the pod's volcano.sh/cooldown-time (Volcano's cdp)


# ---- nodes -------------------------------------------------------------------------------------------------

# Why one node was filtered out: kube-scheduler's filter plugin names (pkg/scheduler/framework/plugins/names).
NODE_NOT_READY = "NodeNotReady"
NODE_UNSCHEDULABLE = "NodeUnschedulable"
NODE_AFFINITY = "NodeAffinity"
TAINT_TOLERATION = "TaintToleration"  # detail: the taint, "key: value" or "key"
NODE_PORTS = "NodePorts"
NODE_SHARD = "NodeShard"  # hard sharding: the node is not in this scheduler's NodeShard (api/shard.py)
# A pod's PersistentVolumeClaims (kube-scheduler's VolumeBinding and VolumeZone, `api/volumes.py`).
VOLUME_NODE_AFFINITY = "VolumeNodeAffinityConflict"  # a bound claim's volume may not be used from the node
VOLUME_BIND_CONFLICT = "VolumeBindingNoMatch"  # no free volume of the claim's class here, nor provisioning
VOLUME_ZONE = "VolumeZone"  # a bound claim's volume is in another zone or region
VOLUME_MISSING = "VolumePVNotExist"  # a claim is bound to a volume that does not exist
# A pod's DRA ResourceClaims cannot be allocated or used there (kube-scheduler's DynamicResources); detail: the
# sentence of the typed reason (`api/reasons_dra.py`) without the node, so nodes with one answer count together.
DYNAMIC_RESOURCES = "DynamicResources"
VOLUME_UNBOUND_IMMEDIATE = "VolumeUnboundImmediateClaim"  # detail: the claim, unbound and not WaitForFirstConsumer
VOLUME_CLAIM_MISSING = "VolumeClaimNotFound"  # detail: the claim
VOLUME_CLAIM_DELETING = "VolumeClaimDeleting"  # detail: the claim
VOLUME_CLAIM_LOST = "VolumeClaimLost"  # detail: the claim, whose volume is gone
INSUFFICIENT = "Insufficient"  # detail: the resource
TOO_MANY_PODS = "TooManyPods"
POD_AFFINITY = "InterPodAffinity"
POD_ANTI_AFFINITY = "InterPodAntiAffinity"
EXISTING_ANTI_AFFINITY = "ExistingPodsAntiAffinity"
TOPOLOGY_SPREAD = "PodTopologySpread"
TOPOLOGY_SPREAD_LABEL = "PodTopologySpreadMissingLabel"
NO_FEASIBLE_NODE = "NoFeasibleNode"
SCORE_VETO = "ScoreVeto"  # the node holds the task's request, but a scorer vetoed it (deviceshare: no card fits)


@dataclass(frozen=True, slots=True)
class NodeFilter(Reason):
    """One node's answer to a filter (predicates, or the resource fit allocate checks)."""

    kind: ClassVar[str] = "NodeFilter"
    filter: str
    detail: str = ""


def resource_misfit(request: Resource, free: Resource) -> NodeFilter | None:
    """kube-scheduler's NodeResourcesFit answer for the first dimension that does not fit (None when it fits): cpu,
    memory, the pod count, then the scalars by name, the order of `Resource.items`. Compared dimension by
    dimension, nothing built: allocate asks it of every node for every task that fits none (a full cluster with a
    backlog: 500 nodes x 300 jobs a cycle), and building each node's shortfall was most of that cycle."""
    if request.cpu > free.cpu:
        return _MISFIT_CPU
    if request.memory > free.memory:
        return _MISFIT_MEMORY
    if request.pods > free.pods:
        return _MISFIT_PODS
    if request.scalars:
        theirs = dict(free.scalars)
        short = [name for name, units in request.scalars if units > theirs.get(name, 0)]
        if short:
            return NodeFilter(INSUFFICIENT, min(short))
    return None


_MISFIT_CPU = NodeFilter(INSUFFICIENT, CPU)
_MISFIT_MEMORY = NodeFilter(INSUFFICIENT, MEMORY)
_MISFIT_PODS = NodeFilter(TOO_MANY_PODS)


@dataclass(frozen=True, slots=True)
class FilterCount:
    filter: NodeFilter
    nodes: int


@dataclass(frozen=True, slots=True)
class NodesUnavailable(Reason):
    """kube-scheduler's `0/N nodes are unavailable`: how many nodes each filter turned away."""

    kind: ClassVar[str] = "NodesUnavailable"
    total: int
    counts: tuple[FilterCount, ...]


# ---- topology --------------------------------------------------------------------------------------------


# ---- faults --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PluginError(Reason):
    """A plugin (or an action) raised while it handled this job (`plugin`: its name; `action`: the action, or
    `OnSessionOpen`/`OnSessionClose`; `error`: the exception's type; `detail`: its message, cut short). The job is
    left out of this cycle; every other job goes on (`framework/faults.py`)."""

    kind: ClassVar[str] = "PluginError"
    plugin: str
    action: str
    error: str
    detail: str


@dataclass(frozen=True, slots=True)
class FieldInvalid(Reason):
    """A field of an object that the scheduler cannot read (`api/fields.py`): `fallback` says what it used
    instead, or "" when the object is left out (no default is safe for that field)."""

    kind: ClassVar[str] = "FieldInvalid"
    object_kind: str  # Pod, PodGroup, Queue, Node, HyperNode
    name: str  # the object's namespace/name
    path: str  # the field, as the table names it
    problem: str
    value: str  # the value, shown short
    fallback: str = ""


KINDS: dict[str, type[Reason]] = {
    cls.kind: cls
    for cls in (
        QueueMissing, QueueClosed, QueueNotLeaf, QueueParentMissing, QueueParentCycle, QueueLimit, QueueOverused,
        QueueShareExceeded, OvercommitLimit, GangNotReady, TooFewTasks, SchedulingGated, RoleNotReady,
        ResourceShortfall, Fragmented, NotPipelined, Reserving, PlacementStale, PartialGangTimeout, ScheduleTimeout,
        NodeFilter, NodesUnavailable, TopologyLimit, TopologyNoNode, TopologyNoFit, PluginError,
        FieldInvalid, ResourceQuotaExceeded, SubGroupsShort, SubGroupNoDomain, MinRuntimeProtected,
    )
} | DRA_KINDS


def from_json(obj: Mapping[str, Any]) -> Reason:
    cls = KINDS.get(str(obj.get("kind")))
    if cls is None:
        raise ReasonError(f"unknown reason kind {obj.get('kind')!r}")
    reason: Reason = decode_object(cls, obj)
    return reason
