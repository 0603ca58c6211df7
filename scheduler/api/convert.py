"""Layer `api`: Kubernetes objects (plain dicts, as the API serves them) -> session infos.

The Kubernetes cache and the simulator both read objects through these functions, so a pod, node, PodGroup
or Queue means the same thing to a unit test, the simulator and the production scheduler.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.api import fields as F
from scheduler.api.dra_parse import device_claims_of
from scheduler.api.job import Condition, JobInfo, TaskInfo
from scheduler.api.min_runtime import NO_MIN_RUNTIME, QueueMinRuntime
from scheduler.api.node import NodeInfo
from scheduler.api.objects import Obj
from scheduler.api.phases import PodGroupPhase, QueueState
from scheduler.api.pod import (
    F_NODE_NAME,
    F_TAINTS,
    GROUP_NAME_ANNOTATION,
    constraints_of,
    is_preemptable,
    role_of,
    status_of,
    with_devices,
)
from scheduler.api.queue import QueueInfo
from scheduler.api.quota import F_QUOTA_REQUEST
from scheduler.api.resources import ZERO, QuantityError, Resource, pod_request, to_units


def key_of(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    return f"{namespace}/{meta.get('name')}" if namespace else str(meta.get("name"))


def group_of(pod: Obj, key: str | None = None) -> str:
    """The PodGroup key a pod belongs to: its group-name annotation, or a gang of one named after the pod (`key`,
    its `key_of` when the caller has it already)."""
    meta = pod.get("metadata") or {}
    annotations = meta.get("annotations")
    group = annotations.get(GROUP_NAME_ANNOTATION) if isinstance(annotations, dict) else None
    if group:
        group = F_GROUP.read(group, "", None)
        return f"{meta.get('namespace', 'default')}/{group}"
    return key if key is not None else key_of(pod)


PLAIN_GROUP_PREFIX = "podgroup-"
MIN_MEMBER_ANNOTATION = "scheduling.volcano.sh/group-min-member"
QUEUE_NAME_ANNOTATION = "scheduling.volcano.sh/queue-name"
TASK_INDEX_KEY = "volcano.sh/task-index"  # set by the job controller on every pod of a Job

# The fields this module reads (api/fields.py lists them all, with their parsers and bounds).
F_GROUP = F.field("Pod", f"metadata.annotations[{GROUP_NAME_ANNOTATION}]")
F_MIN_MEMBER = F.field("Pod", f"metadata.annotations[{MIN_MEMBER_ANNOTATION}]")
F_POD_UID = F.field("Pod", "metadata.uid")
F_OWNERS = F.field("Pod", "metadata.ownerReferences")
F_TASK_INDEX = F.field("Pod", f"metadata.annotations[{TASK_INDEX_KEY}]")
F_TASK_INDEX_LABEL = F.field("Pod", f"metadata.labels[{TASK_INDEX_KEY}]")
F_GATES = F.field("Pod", "spec.schedulingGates")
F_QUEUE_GATE_OPT_IN = F.field("Pod", f"metadata.annotations[{F.QUEUE_ALLOCATION_GATE}]")
F_PRIORITY = F.field("Pod", "spec.priority")
F_PRIORITY_CLASS = F.field("Pod", "spec.priorityClassName")
F_CONTAINERS = F.field("Pod", "spec.containers")
F_POD_CONDITIONS = F.field("Pod", "status.conditions")
F_VOLUMES = F.field("Pod", "spec.volumes")
F_PREEMPTION_POLICY = F.field("Pod", "spec.preemptionPolicy")
F_COOLDOWN_LABEL = F.field("Pod", f"metadata.labels[{F.COOLDOWN}]")
F_COOLDOWN = F.field("Pod", f"metadata.annotations[{F.COOLDOWN}]")
F_GPU = (F.field("Pod", f"metadata.annotations[{F.GPU_INDEX}]"), F.field("Pod", f"metadata.annotations[{F.GPU_SPEC}]"))


_IDENTITY = {
    kind: (F.field(kind, "metadata.name"),
           F.field(kind, "metadata.namespace") if kind in ("Pod", "PodGroup") else None)
    for kind in ("Pod", "PodGroup", "Queue", "Node", "HyperNode")
}
_POD_ANNOTATIONS = F.field("Pod", "metadata.annotations")
_POD_LABELS = F.field("Pod", "metadata.labels")


def identity(kind: str, obj: Obj) -> tuple[str, str, str]:
    """(name, namespace, key) read through the table: an object without a readable name or namespace is left
    out (FieldError), since nothing else about it can be named."""
    name_field, ns_field = _IDENTITY[kind]
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        raise F.FieldError(F.FieldInvalid(kind, "?", "metadata", "is not an object", F.show(meta)))
    name = name_field.read(meta.get("name"), "?", None)
    if name is None:
        raise F.FieldError(F.FieldInvalid(kind, "?", name_field.name, "is missing", "null"))
    if ns_field is None:
        return name, "", name
    raw = meta.get("namespace")
    namespace = ns_field.read(raw, name, None)
    return name, namespace, f"{namespace}/{name}" if raw else name  # `key_of`: no namespace, the name alone


def plain_group_name(pod: Obj) -> str:
    """The PodGroup the controllers make for a pod with no group-name annotation (Volcano's name):
    `podgroup-<uid of its controller owner>` (one per ReplicaSet, StatefulSet, batch Job...), else
    `podgroup-<pod uid>`."""
    meta = pod.get("metadata") or {}
    owners = F_OWNERS.read(meta.get("ownerReferences"), "", None)
    owner = next((uid for uid, controller in owners if controller), None)
    return f"{PLAIN_GROUP_PREFIX}{owner if owner is not None else F_POD_UID.read(meta.get('uid'), '', None)}"


def plain_group_of(pod: Obj) -> str | None:
    """The key of that PodGroup, for a pod that names none; None for a pod with a group-name annotation.
    The cache uses it only if that PodGroup exists, so pods are never rewritten after creation."""
    meta = pod.get("metadata") or {}
    annotations = meta.get("annotations")
    if isinstance(annotations, dict) and annotations.get(GROUP_NAME_ANNOTATION):
        return None
    return f"{meta.get('namespace', 'default')}/{plain_group_name(pod)}"


def wants_gang(pod: Obj) -> bool:
    """A plain pod that asks for a gang (group-min-member > 1): it waits for its PodGroup, never runs alone. An
    unreadable value asks for one (the safe reading: the pod waits)."""
    annotations = (pod.get("metadata") or {}).get("annotations")
    value = annotations.get(MIN_MEMBER_ANNOTATION) if isinstance(annotations, dict) else None
    return (F_MIN_MEMBER.read(value, "", None) or 1) > 1


def task_from_pod(pod: Obj, *, priority_classes: Mapping[str, int] | None = None, creation: float = 0.0,
                  sink: list[F.FieldInvalid] | None = None, resreq: Resource | None = None) -> TaskInfo:
    """Every field through the table (api/fields.py): a bad one is reported to `sink` and read as its safe
    default, or raises FieldError (a request Kubernetes would reject, a constraint that cannot be read) and the
    caller skips that pod with an event. `resreq`: the request, known from a pod of the same resource fields."""
    raw_meta = pod.get("metadata")
    meta: Mapping[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
    name, namespace = meta.get("name"), meta.get("namespace")
    if type(name) is str and type(namespace) is str and 0 < len(name) <= F.NAME_MAX and 0 < len(namespace) <= 63:
        key = f"{namespace}/{name}"  # valid, as nearly always: spare the calls
    else:
        name, namespace, key = identity("Pod", pod)
    spec = pod.get("spec") or {}
    if not isinstance(spec, dict):
        raise F.FieldError(F.FieldInvalid("Pod", key, "spec", "is not an object", F.show(spec)))
    labels = _POD_LABELS.read(meta.get("labels"), key, sink)
    annotations = _POD_ANNOTATIONS.read(meta.get("annotations"), key, sink)
    group = annotations.get(GROUP_NAME_ANNOTATION) if annotations else None
    volumes = spec.get("volumes")
    node_name = spec.get("nodeName", "")
    if not group:  # what the snapshot builder reads of a plain pod (`plain_group_of`, `wants_gang`): checked here
        F_POD_UID.read(meta.get("uid"), key, sink)
        F_OWNERS.read(meta.get("ownerReferences"), key, sink)
        F_MIN_MEMBER.read(annotations.get(MIN_MEMBER_ANNOTATION), key, sink)
    cooldown = cooldown_of(labels, annotations, key, sink)
    device_claims, constraints = device_claims_of(pod, spec, key, sink), constraints_of(spec, key, sink)
    gated = first_gate(spec, key, sink)
    if annotations:  # the deviceshare plugin's, bounded here (gpu/devices.py reads them off task.annotations)
        for gpu_field in F_GPU:
            value = annotations.get(gpu_field.path[-1])
            if value is not None:
                gpu_field.read(value, key, sink)
    return TaskInfo(
        key=key,
        name=name,
        namespace=namespace,
        job=f"{namespace}/{F_GROUP.read(group, key, sink)}" if group else key,
        resreq=request_of(spec, key) if resreq is None else resreq,
        role=role_of(annotations, labels, key, sink),
        status=status_of(pod, key, sink),
        node_name=node_name if type(node_name) is str and len(node_name) <= F.NAME_MAX
        else F_NODE_NAME.read(node_name, key, sink),
        priority=priority_of(spec, priority_classes, key, sink),
        preemptable=is_preemptable(annotations, labels, key, sink),
        constraints=constraints if device_claims is None else with_devices(constraints),
        creation=creation,
        labels=dict(labels),
        annotations=dict(annotations),
        index=task_index_of(annotations, labels, key, sink),
        gated=gated,
        claims=_claims(F_VOLUMES.read(volumes, key, sink), namespace, name) if volumes is not None else (),
        preempt_never=preempts_never(spec, key, sink),
        cooldown=cooldown,
        # cdp's cooldown and minruntime's start read it: for a pod with a cooldown, and for one on a node
        scheduled_at=scheduled_at_of(pod, key, sink) if cooldown is not None or node_name else None,
        only_queue_gate=gated == F.QUEUE_ALLOCATION_GATE and len(spec["schedulingGates"]) == 1,
        queue_gate_opt_in=queue_gate_opt_in(annotations, key, sink),
        device_claims=device_claims,
    )


def queue_gate_opt_in(annotations: Mapping[str, str], where: str = "",
                      sink: list[F.FieldInvalid] | None = None) -> bool:
    """The pod opted in to Volcano's queue-allocation gate: its annotation of that name is exactly "true"
    (Volcano's HasQueueAllocationGateAnnotation, pkg/scheduler/api/helpers.go)."""
    value = annotations.get(F.QUEUE_ALLOCATION_GATE) if annotations else None
    return value is not None and F_QUEUE_GATE_OPT_IN.read(value, where, sink) == "true"


def preempts_never(spec: Mapping[str, Any], where: str = "", sink: list[F.FieldInvalid] | None = None) -> bool:
    policy = spec.get("preemptionPolicy")
    if policy is None or policy == "PreemptLowerPriority":  # nearly always: spare the call
        return False
    return F_PREEMPTION_POLICY.read(policy, where, sink) == "Never"  # type: ignore[no-any-return]


def cooldown_of(labels: Mapping[str, str], annotations: Mapping[str, str], where: str = "",
                sink: list[F.FieldInvalid] | None = None) -> float | None:
    """The cdp plugin's cooldown in seconds: the label if present (even unreadable), else the annotation, as
    Volcano's podCooldownTime (pkg/scheduler/plugins/cdp/cdp.go); None when neither says one Go reads."""
    if labels:
        value = labels.get(F.COOLDOWN)
        if value is not None:
            return F_COOLDOWN_LABEL.read(value, where, sink)  # type: ignore[no-any-return]
    if annotations:
        value = annotations.get(F.COOLDOWN)
        if value is not None:
            return F_COOLDOWN.read(value, where, sink)  # type: ignore[no-any-return]
    return None


def scheduled_at_of(pod: Obj, where: str = "", sink: list[F.FieldInvalid] | None = None) -> float | None:
    """When the pod was bound: its `PodScheduled=True` condition's lastTransitionTime; None if it does not say."""
    status = pod.get("status")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    return F_POD_CONDITIONS.read(conditions, where, sink)  # type: ignore[no-any-return]


def _claims(volumes: tuple[tuple[bool, str], ...], namespace: str, pod: str) -> tuple[str, ...]:
    if not volumes:
        return ()
    return tuple(sorted({f"{namespace}/{name if claim else f'{pod}-{name}'}" for claim, name in volumes}))


def priority_of(spec: Mapping[str, Any], priority_classes: Mapping[str, int] | None, where: str = "",
                sink: list[F.FieldInvalid] | None = None) -> int:
    priority = spec.get("priority")
    if type(priority) is int and -(2**31) <= priority <= 1_000_000_000:  # valid, spare the call
        return priority
    if priority is not None:
        return F_PRIORITY.read(priority, where, sink)  # type: ignore[no-any-return]
    if priority_classes is None:
        return 0
    return priority_classes.get(F_PRIORITY_CLASS.read(spec.get("priorityClassName"), where, sink), 0)


def request_of(spec: Mapping[str, Any], where: str) -> Resource:
    """The pod's request (`pod_request`); a quantity Kubernetes would reject leaves the pod out (FieldError
    naming the field)."""
    try:
        return pod_request(spec, field="spec")
    except QuantityError as exc:
        path, _, problem = str(exc).partition(": ")
        raise F.FieldError(F.FieldInvalid("Pod", where, path, problem[:200], "")) from None


def first_gate(spec: Mapping[str, Any], where: str = "", sink: list[F.FieldInvalid] | None = None) -> str:
    """The name of the pod's first scheduling gate, "" when it has none."""
    gates = spec.get("schedulingGates")
    return F_GATES.read(gates, where, sink) if gates else ""


def task_index_of(annotations: Mapping[str, str], labels: Mapping[str, str], where: str = "",
                  sink: list[F.FieldInvalid] | None = None) -> int:
    """The pod's index within its task, from Volcano's annotation (or label) `volcano.sh/task-index`; -1 if none."""
    value = annotations.get(TASK_INDEX_KEY)
    if value is not None:
        return F_TASK_INDEX.read(value, where, sink)  # type: ignore[no-any-return]
    value = labels.get(TASK_INDEX_KEY)
    if value is not None:
        return F_TASK_INDEX_LABEL.read(value, where, sink)  # type: ignore[no-any-return]
    return -1


F_NODE_LABELS = F.field("Node", "metadata.labels")
F_ALLOCATABLE = F.field("Node", "status.allocatable")
F_CAPACITY = F.field("Node", "status.capacity")
F_NODE_CONDITIONS = F.field("Node", "status.conditions")
F_UNSCHEDULABLE = F.field("Node", "spec.unschedulable")


def node_from_object(node: Obj, sink: list[F.FieldInvalid] | None = None) -> NodeInfo:
    name, _, key = identity("Node", node)
    meta = node["metadata"]
    spec = _part(node, "spec", "Node", key)
    status = _part(node, "status", "Node", key)
    raw = status.get("allocatable")
    allocatable = F_ALLOCATABLE.read(raw, key, sink) if raw else F_CAPACITY.read(status.get("capacity"), key, sink)
    return NodeInfo(
        name=name,
        allocatable=allocatable if allocatable is not None else ZERO,
        labels=dict(F_NODE_LABELS.read(meta.get("labels"), key, sink)),
        taints=F_TAINTS.read(spec.get("taints"), key, sink),
        unschedulable=F_UNSCHEDULABLE.read(spec.get("unschedulable"), key, sink),
        ready=F_NODE_CONDITIONS.read(status.get("conditions"), key, sink),
    )


def _part(obj: Obj, part: str, kind: str, key: str) -> Mapping[str, Any]:
    value = obj.get(part)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise F.FieldError(F.FieldInvalid(kind, key, part, "is not an object", F.show(value)))
    return value


# minResources keys that are ResourceQuota usage, not node resources (`count/pods`, `requests.cpu`,
# `limits.memory`): Volcano's job controller writes them (pkg/controllers/util/util.go GetPodQuotaUsage).
QUOTA_ONLY = ("count/", "requests.", "limits.")

F_PG_CREATED = F.field("PodGroup", "metadata.creationTimestamp")
F_PG_ANNOTATIONS = F.field("PodGroup", "metadata.annotations")
F_FALLBACK = F.field("PodGroup", f"metadata.annotations[{F.FALLBACK_MIN}]")
F_SLA = F.field("PodGroup", f"metadata.annotations[{F.SLA_WAITING}]")
F_MIN_MEMBER_PG = F.field("PodGroup", "spec.minMember")
F_MIN_AVAILABLE = F.field("PodGroup", "spec.minAvailable")
F_MIN_RESOURCES = F.field("PodGroup", "spec.minResources")
F_MIN_TASK_MEMBER = F.field("PodGroup", "spec.minTaskMember")
F_QUEUE = F.field("PodGroup", "spec.queue")
F_PG_PRIORITY_CLASS = F.field("PodGroup", "spec.priorityClassName")
F_TOPOLOGY = F.field("PodGroup", "spec.networkTopology")
F_SUB_GROUPS = F.field("PodGroup", "spec.subGroupPolicy")
F_TIMEOUT = F.field("PodGroup", "spec.scheduleTimeoutSeconds")
F_PG_PREEMPTABLE = F.field("PodGroup", f"metadata.annotations[{F.PREEMPTABLE}]")
F_PG_ALLOCATED_HYPERNODE = F.field("PodGroup", f"metadata.annotations[{F.ALLOCATED_HYPERNODE}]")
F_PG_PREEMPTABLE_LABEL = F.field("PodGroup", f"metadata.labels[{F.PREEMPTABLE}]")
F_PG_PHASE = F.field("PodGroup", "status.phase")
F_PG_CONDITIONS = F.field("PodGroup", "status.conditions")
F_OVERRIDE = F.field("PodGroup", "status.minMemberOverride")
F_COUNTS = tuple(F.field("PodGroup", f"status.{n}") for n in ("running", "succeeded", "failed"))




def job_from_podgroup(
    pg: Obj, *, priority_classes: Mapping[str, int] | None = None, default_queue: str = "default",
    creation: float | None = None, sink: list[F.FieldInvalid] | None = None,
) -> JobInfo:
    name, namespace, key = identity("PodGroup", pg)
    meta = pg["metadata"]
    spec = _part(pg, "spec", "PodGroup", key)
    status = _part(pg, "status", "PodGroup", key)
    if creation is None:
        creation = F_PG_CREATED.read(meta.get("creationTimestamp"), key, sink)
    # Seed 000 writes `minAvailable` and `minResources.requests`: read them as minMember / minResources.
    raw_min = spec.get("minMember")
    min_member = (F_MIN_MEMBER_PG.read(raw_min, key, sink) if raw_min is not None
                  else F_MIN_AVAILABLE.read(spec.get("minAvailable"), key, sink))
    raw_min_resources = spec.get("minResources")
    if isinstance(raw_min_resources, Mapping) and isinstance(raw_min_resources.get("requests"), Mapping):
        raw_min_resources = raw_min_resources["requests"]
    quota_request = F_QUOTA_REQUEST.read(raw_min_resources, key, sink) if raw_min_resources is not None else None
    if isinstance(raw_min_resources, Mapping):  # Volcano's job controller adds ResourceQuota usage keys
        raw_min_resources = {k: v for k, v in raw_min_resources.items() if not str(k).startswith(QUOTA_ONLY)}
    min_resources = F_MIN_RESOURCES.read(raw_min_resources, key, sink) if raw_min_resources else None
    priority = 0
    if priority_classes is not None:
        priority = priority_classes.get(F_PG_PRIORITY_CLASS.read(spec.get("priorityClassName"), key, sink), 0)
    extra: dict[str, Any] = {}
    topology = F_TOPOLOGY.read(spec.get("networkTopology"), key, sink)
    if topology is not None:
        extra["networkTopology"] = topology
    annotations = F_PG_ANNOTATIONS.read(meta.get("annotations"), key, sink)
    if annotations:
        extra["annotations"] = dict(annotations)
        allocated = F_PG_ALLOCATED_HYPERNODE.read(annotations.get(F.ALLOCATED_HYPERNODE), key, sink)
        if allocated is not None:
            extra["allocatedHyperNode"] = allocated
    preemptable = _group_preemptable(annotations, meta.get("labels"), key, sink)
    if preemptable is not None:
        extra["preemptable"] = preemptable
    override = F_OVERRIDE.read(status.get("minMemberOverride"), key, sink)
    if override is not None and override < min_member:
        # A gang that timed out retries with the smaller minimum its owner asked for; the spec stays as written.
        extra["minMemberOverride"] = override
        min_member = override
    return JobInfo(
        key=key,
        name=name,
        namespace=namespace,
        queue=F_QUEUE.read(spec.get("queue"), key, sink) or default_queue,
        min_available=min_member,
        min_task_member=F_MIN_TASK_MEMBER.read(spec.get("minTaskMember"), key, sink),
        min_resources=min_resources,
        priority=priority,
        phase=PodGroupPhase.parse(F_PG_PHASE.read(status.get("phase"), key, sink)),
        creation=creation,
        conditions=tuple(Condition(*c) for c in F_PG_CONDITIONS.read(status.get("conditions"), key, sink)),
        extra=extra,
        reported_counts=tuple(
            f.read(status.get(f.path[-1]), key, sink) for f in F_COUNTS
        ),
        schedule_timeout=F_TIMEOUT.read(spec.get("scheduleTimeoutSeconds"), key, sink) or None,  # 0: none
        fallback_min=F_FALLBACK.read(annotations.get(F.FALLBACK_MIN), key, sink) if annotations else None,
        sla_waiting=F_SLA.read(annotations.get(F.SLA_WAITING) or None, key, sink) if annotations else None,
        quota_request=quota_request,
        sub_groups=F_SUB_GROUPS.read(spec.get("subGroupPolicy"), key, sink),
    )


def _group_preemptable(annotations: Mapping[str, str] | None, labels: object, key: str,
                        sink: list[F.FieldInvalid] | None) -> bool | None:
    """The PodGroup's `volcano.sh/preemptable`, annotation before label; None when neither is set."""
    if annotations and F.PREEMPTABLE in annotations:
        return bool(F_PG_PREEMPTABLE.read(annotations[F.PREEMPTABLE], key, sink))
    if isinstance(labels, Mapping) and F.PREEMPTABLE in labels:
        return bool(F_PG_PREEMPTABLE_LABEL.read(labels[F.PREEMPTABLE], key, sink))
    return None


def implicit_job(task: TaskInfo, *, default_queue: str, queue: str | None = None) -> JobInfo:
    """A pod without a group-name annotation is a gang of one."""
    return JobInfo(
        key=task.job,
        name=task.name,
        namespace=task.namespace,
        queue=queue or default_queue,
        min_available=1,
        priority=task.priority,
        phase=PodGroupPhase.INQUEUE,
        creation=task.creation,
    )


F_QUEUE_CREATED = F.field("Queue", "metadata.creationTimestamp")
F_WEIGHT = F.field("Queue", "spec.weight")
F_CAPABILITY = F.field("Queue", "spec.capability")
F_GUARANTEE = F.field("Queue", "spec.guarantee.resource")
F_DESERVED = F.field("Queue", "spec.deserved")
F_STATE = F.field("Queue", "spec.state")
F_STATUS_STATE = F.field("Queue", "status.state")
F_RECLAIMABLE = F.field("Queue", "spec.reclaimable")
F_QUEUE_PRIORITY = F.field("Queue", "spec.priority")
F_PARENT = F.field("Queue", "spec.parent")
F_QUEUE_ANNOTATIONS = F.field("Queue", "metadata.annotations")
F_NOTICE = F.field("Queue", f"metadata.annotations[{F.EVICTION_NOTICE}]")
F_USAGE = F.field("Queue", f"metadata.annotations[{F.QUEUE_USAGE}]")
F_MIN_RUNTIME = tuple((F.field("Queue", f"metadata.annotations[{k}]"), k) for k in F.MIN_RUNTIME_KEYS)


def queue_from_object(queue: Obj, *, creation: float | None = None,
                      sink: list[F.FieldInvalid] | None = None) -> QueueInfo:
    name, _, key = identity("Queue", queue)
    meta = queue["metadata"]
    spec = _part(queue, "spec", "Queue", key)
    status = _part(queue, "status", "Queue", key)
    if creation is None:
        creation = F_QUEUE_CREATED.read(meta.get("creationTimestamp"), key, sink)
    capability = spec.get("capability")
    guarantee = _part(spec, "guarantee", "Queue", key).get("resource")
    deserved = spec.get("deserved")
    state = F_STATUS_STATE.read(status.get("state"), key, sink) or F_STATE.read(spec.get("state"), key, sink)
    annotations = F_QUEUE_ANNOTATIONS.read(meta.get("annotations"), key, sink)
    return QueueInfo(
        name=name,
        weight=F_WEIGHT.read(spec.get("weight"), key, sink) or 1,
        capability=F_CAPABILITY.read(capability, key, sink) if capability else None,
        guarantee=F_GUARANTEE.read(guarantee, key, sink) if guarantee else ZERO,
        state=QueueState.parse(state),
        reclaimable=F_RECLAIMABLE.read(spec.get("reclaimable"), key, sink),
        priority=F_QUEUE_PRIORITY.read(spec.get("priority"), key, sink),
        creation=creation,
        capability_zero=_zero_scalars(capability),
        deserved=F_DESERVED.read(deserved, key, sink) if deserved else None,
        parent=F_PARENT.read(spec.get("parent"), key, sink),
        eviction_notice=F_NOTICE.read(annotations.get(F.EVICTION_NOTICE), key, sink) if annotations else 0.0,
        usage=F_USAGE.read(annotations.get(F.QUEUE_USAGE), key, sink) if annotations else None,
        min_runtime=QueueMinRuntime(*(f.read(annotations.get(k), key, sink) for f, k in F_MIN_RUNTIME))
        if annotations and any(k in annotations for k in F.MIN_RUNTIME_KEYS) else NO_MIN_RUNTIME,
    )


def _zero_scalars(capability: object) -> frozenset[str]:
    """Extended resources a capability names at 0 (called after it parsed, so every value is a quantity)."""
    if not isinstance(capability, Mapping):
        return frozenset()
    return frozenset(
        str(name) for name, value in capability.items()
        if str(name) not in ("cpu", "memory", "pods") and to_units(str(name), value) == 0
    )


F_TIER = F.field("HyperNode", "spec.tier")
F_MEMBERS = F.field("HyperNode", "spec.members")
F_TIER_NAME = F.field("HyperNode", "spec.tierName")


def hypernode_from_object(hypernode: Obj, sink: list[F.FieldInvalid] | None = None) -> Obj:
    """The HyperNode, each field the topology solver reads (`solver/topology.py`: `metadata.name`, `spec.tier`,
    `spec.members`) checked against its bounds; raises FieldError for one that cannot be read. The object is
    passed on as served (the simulator passes the same), so the solver reads only checked values."""
    _, _, key = identity("HyperNode", hypernode)
    spec = _part(hypernode, "spec", "HyperNode", key)
    F_TIER.read(spec.get("tier"), key, sink)
    F_MEMBERS.read(spec.get("members"), key, sink)
    tier_name = F_TIER_NAME.read(spec.get("tierName"), key, sink)
    if tier_name != spec.get("tierName", ""):  # unreadable: the HyperNode stays, without a tier name
        return {**hypernode, "spec": {**spec, "tierName": tier_name}}
    return hypernode
