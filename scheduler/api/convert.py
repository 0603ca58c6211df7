"""Layer `api`: Kubernetes objects (plain dicts, as the API serves them) -> session infos.

The Kubernetes cache and the simulator both read objects through these functions, so a pod, node, PodGroup
or Queue means the same thing to a unit test, the simulator and the production scheduler.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.api.job import Condition, JobInfo, TaskInfo
from scheduler.api.node import NodeInfo
from scheduler.api.objects import Obj
from scheduler.api.pod import (
    GROUP_NAME_ANNOTATION,
    constraints_of,
    is_preemptable,
    role_of,
    status_of,
    taints_of,
)
from scheduler.api.queue import QueueInfo
from scheduler.api.resources import ZERO, Resource, pod_request, to_units
from scheduler.api.status import PodGroupPhase, QueueState
from scheduler.api.volumes import claims_of


def key_of(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    return f"{namespace}/{meta.get('name')}" if namespace else str(meta.get("name"))


def group_of(pod: Obj, key: str | None = None) -> str:
    """The PodGroup key a pod belongs to: its group-name annotation, or a gang of one named after the pod (`key`,
    its `key_of` when the caller has it already)."""
    meta = pod.get("metadata") or {}
    group = (meta.get("annotations") or {}).get(GROUP_NAME_ANNOTATION)
    if group:
        return f"{meta.get('namespace', 'default')}/{group}"
    return key if key is not None else key_of(pod)


PLAIN_GROUP_PREFIX = "podgroup-"
MIN_MEMBER_ANNOTATION = "scheduling.volcano.sh/group-min-member"
QUEUE_NAME_ANNOTATION = "scheduling.volcano.sh/queue-name"
TASK_INDEX_KEY = "volcano.sh/task-index"  # set by the job controller on every pod of a Job


def plain_group_name(pod: Obj) -> str:
    """The PodGroup the controllers make for a pod with no group-name annotation (Volcano's name):
    `podgroup-<uid of its controller owner>` (one per ReplicaSet, StatefulSet, batch Job...), else
    `podgroup-<pod uid>`."""
    meta = pod.get("metadata") or {}
    owner = next((r for r in meta.get("ownerReferences") or () if r.get("controller")), None)
    return f"{PLAIN_GROUP_PREFIX}{(owner or meta).get('uid')}"


def plain_group_of(pod: Obj) -> str | None:
    """The key of that PodGroup, for a pod that names none; None for a pod with a group-name annotation.
    The cache uses it only if that PodGroup exists, so pods are never rewritten after creation."""
    meta = pod.get("metadata") or {}
    if (meta.get("annotations") or {}).get(GROUP_NAME_ANNOTATION):
        return None
    return f"{meta.get('namespace', 'default')}/{plain_group_name(pod)}"


def wants_gang(pod: Obj) -> bool:
    """A plain pod that asks for a gang (group-min-member > 1): it waits for its PodGroup, never runs alone."""
    value = ((pod.get("metadata") or {}).get("annotations") or {}).get(MIN_MEMBER_ANNOTATION)
    return (_positive_int(value) or 1) > 1


def task_from_pod(pod: Obj, *, priority_classes: Mapping[str, int] | None = None, creation: float = 0.0) -> TaskInfo:
    """Raises QuantityError for a request Kubernetes would reject; the caller skips that pod with an event."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    priority = spec.get("priority")
    if priority is None and priority_classes is not None:
        priority = priority_classes.get(str(spec.get("priorityClassName") or ""), 0)
    return TaskInfo(
        uid=key_of(pod),
        name=str(meta.get("name")),
        namespace=str(meta.get("namespace", "default")),
        job=group_of(pod),
        resreq=pod_request(spec, field=f"pod {key_of(pod)}: spec"),
        role=role_of(pod),
        status=status_of(pod),
        node_name=str(spec.get("nodeName") or ""),
        priority=int(priority or 0),
        preemptable=is_preemptable(pod),
        constraints=constraints_of(spec),
        creation=creation,
        labels=dict(meta.get("labels") or {}),
        annotations={str(k): str(v) for k, v in (meta.get("annotations") or {}).items()},
        index=task_index_of(meta),
        gated=first_gate(spec),
        claims=claims_of(pod),
    )


def first_gate(spec: Mapping[str, Any]) -> str:
    """The name of the pod's first scheduling gate, "" when it has none."""
    gates = spec.get("schedulingGates") or ()
    return str((gates[0] or {}).get("name") or "?") if gates else ""


def task_index_of(meta: Mapping[str, Any]) -> int:
    """The pod's index within its task, from Volcano's annotation (or label) `volcano.sh/task-index`; -1 if none."""
    for source in (meta.get("annotations") or {}, meta.get("labels") or {}):
        value = source.get(TASK_INDEX_KEY)
        if value is not None:
            try:
                return int(str(value))
            except ValueError:
                return -1
    return -1


def node_from_object(node: Obj) -> NodeInfo:
    meta = node.get("metadata") or {}
    spec = node.get("spec") or {}
    status = node.get("status") or {}
    allocatable = status.get("allocatable") or status.get("capacity") or {}
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or ()
    ) if status.get("conditions") else True
    return NodeInfo(
        name=str(meta.get("name")),
        allocatable=Resource.from_quantities(allocatable, field=f"node {meta.get('name')}: status.allocatable"),
        labels=dict(meta.get("labels") or {}),
        taints=taints_of(spec),
        unschedulable=bool(spec.get("unschedulable")),
        ready=ready,
    )


# minResources keys that are ResourceQuota usage, not node resources (`count/pods`, `requests.cpu`,
# `limits.memory`): Volcano's job controller writes them (pkg/controllers/util/util.go GetPodQuotaUsage).
QUOTA_ONLY = ("count/", "requests.", "limits.")


def job_from_podgroup(
    pg: Obj, *, priority_classes: Mapping[str, int] | None = None, default_queue: str = "default",
    creation: float = 0.0,
) -> JobInfo:
    meta = pg.get("metadata") or {}
    spec = pg.get("spec") or {}
    status = pg.get("status") or {}
    # Seed 000 writes `minAvailable` and `minResources.requests`: read them as minMember / minResources.
    min_member = spec.get("minMember", spec.get("minAvailable", 1))
    raw_min_resources = spec.get("minResources")
    if isinstance(raw_min_resources, Mapping) and isinstance(raw_min_resources.get("requests"), Mapping):
        raw_min_resources = raw_min_resources["requests"]
    if isinstance(raw_min_resources, Mapping):  # Volcano's job controller adds ResourceQuota usage keys
        raw_min_resources = {k: v for k, v in raw_min_resources.items() if not str(k).startswith(QUOTA_ONLY)}
    min_resources = (
        Resource.from_quantities(raw_min_resources, field=f"podgroup {key_of(pg)}: spec.minResources")
        if raw_min_resources
        else None
    )
    priority = 0
    if priority_classes is not None:
        priority = priority_classes.get(str(spec.get("priorityClassName") or ""), 0)
    conditions = tuple(
        Condition(str(c.get("type")), str(c.get("status")), str(c.get("reason", "")), str(c.get("message", "")))
        for c in status.get("conditions") or ()
        if isinstance(c, Mapping)
    )
    extra: dict[str, Any] = {k: spec[k] for k in ("networkTopology", "scheduleTimeoutSeconds") if k in spec}
    annotations = meta.get("annotations")
    if isinstance(annotations, Mapping) and annotations:
        extra["annotations"] = {str(k): str(v) for k, v in annotations.items()}
    override = _positive_int(status.get("minMemberOverride"))
    if override is not None and override < int(min_member):
        # A gang that timed out retries with the smaller minimum its owner asked for; the spec stays as written.
        extra["minMemberOverride"] = override
        min_member = override
    return JobInfo(
        uid=key_of(pg),
        name=str(meta.get("name")),
        namespace=str(meta.get("namespace", "default")),
        queue=str(spec.get("queue") or default_queue),
        min_available=int(min_member),
        min_task_member={str(k): int(v) for k, v in (spec.get("minTaskMember") or {}).items()},
        min_resources=min_resources,
        priority=priority,
        phase=PodGroupPhase.parse(status.get("phase", "Pending")),
        creation=creation,
        conditions=conditions,
        extra=extra,
        reported_counts=(int(status.get("running", 0)), int(status.get("succeeded", 0)), int(status.get("failed", 0))),
    )


def _positive_int(value: object) -> int | None:
    try:
        number = int(str(value))
    except ValueError:
        return None
    return number if number > 0 else None


def implicit_job(task: TaskInfo, *, default_queue: str, queue: str | None = None) -> JobInfo:
    """A pod without a group-name annotation is a gang of one."""
    return JobInfo(
        uid=task.job,
        name=task.name,
        namespace=task.namespace,
        queue=queue or default_queue,
        min_available=1,
        priority=task.priority,
        phase=PodGroupPhase.INQUEUE,
        creation=task.creation,
    )


def queue_from_object(queue: Obj, *, creation: float = 0.0) -> QueueInfo:
    meta = queue.get("metadata") or {}
    spec = queue.get("spec") or {}
    status = queue.get("status") or {}
    name = str(meta.get("name"))
    capability = spec.get("capability")
    guarantee = (spec.get("guarantee") or {}).get("resource")
    deserved = spec.get("deserved")
    return QueueInfo(
        name=name,
        weight=int(spec.get("weight", 1) or 1),
        capability=Resource.from_quantities(capability, field=f"queue {name}: spec.capability") if capability else None,
        guarantee=Resource.from_quantities(guarantee, field=f"queue {name}: spec.guarantee.resource")
        if guarantee
        else ZERO,
        state=QueueState.parse(status.get("state", spec.get("state", "Open"))),
        reclaimable=bool(spec.get("reclaimable", True)),
        priority=int(spec.get("priority", 0) or 0),
        creation=creation,
        capability_zero=_zero_scalars(capability),
        deserved=Resource.from_quantities(deserved, field=f"queue {name}: spec.deserved") if deserved else None,
        parent=str(spec.get("parent") or ""),
    )


def _zero_scalars(capability: object) -> frozenset[str]:
    """Extended resources a capability names at 0 (called after it parsed, so every value is a quantity)."""
    if not isinstance(capability, Mapping):
        return frozenset()
    return frozenset(
        str(name) for name, value in capability.items()
        if str(name) not in ("cpu", "memory", "pods") and to_units(str(name), value) == 0
    )
