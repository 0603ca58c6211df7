"""A task's `partitionPolicy`: its PodGroup sub-group, its pods' partition label, its admission checks. Layer: jobs
(pure: plain dicts in, plain dicts and messages out).

Volcano's job controller turns each task with a `partitionPolicy` into one PodGroup `spec.subGroupPolicy` entry
(pkg/controllers/job/job_controller_actions.go `getSubGroupPolicy`): named after the task, `subGroupSize` the
partition size, `minSubGroups` the minimum partitions, pods picked by `volcano.sh/task-spec: <task>` and grouped
by their `volcano.sh/partition-id` label, with the partition's `networkTopology` copied. Pod `i` of the task gets
`volcano.sh/partition-id: i // partitionSize` (job_controller_util.go `createJobPod`; 0 when the size is not
positive). The scheduler reads the sub-groups from the PodGroup (`scheduler.api.subgroups`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.api.pod import TASK_SPEC_KEY

PARTITION_ID_KEY = "volcano.sh/partition-id"  # batch v1alpha1 labels.go TaskPartitionID
_TOPOLOGY_KEYS = ("mode", "highestTierAllowed", "highestTierName")


def _count(value: object) -> int | None:
    """An integer field's value, None if it is not one (a bool, a string, a float)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def partition_policy(task: Mapping[str, Any]) -> Mapping[str, Any] | None:
    policy = task.get("partitionPolicy")
    return policy if isinstance(policy, Mapping) else None


def partition_id(task: Mapping[str, Any], index: int) -> str | None:
    """The `volcano.sh/partition-id` label of the task's pod `index`, None for a task without a partitionPolicy."""
    policy = partition_policy(task)
    if policy is None:
        return None
    size = _count(policy.get("partitionSize")) or 0
    return str(index // size) if size > 0 else "0"


def sub_group_policy(task: Mapping[str, Any]) -> dict[str, Any] | None:
    """The PodGroup `spec.subGroupPolicy` entry of a task, None for a task without a partitionPolicy."""
    policy = partition_policy(task)
    if policy is None:
        return None
    name = str(task.get("name") or "")
    entry: dict[str, Any] = {
        "name": name,
        "subGroupSize": _count(policy.get("partitionSize")) or 0,
        "minSubGroups": _count(policy.get("minPartitions")) or 0,
        "labelSelector": {"matchLabels": {TASK_SPEC_KEY: name}},
        "matchLabelKeys": [PARTITION_ID_KEY],
    }
    topology = policy.get("networkTopology")
    if isinstance(topology, Mapping):
        # Volcano copies the three fields; an empty one is omitted (omitempty).
        entry["networkTopology"] = {k: topology[k] for k in _TOPOLOGY_KEYS if topology.get(k) not in (None, "")}
    return entry


def sub_group_policies(tasks: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every task's entry, in spec order (setPgSubGroupPolicy: all tasks, dependsOn or not)."""
    return [entry for entry in map(sub_group_policy, tasks) if entry is not None]


def partition_problems(job: Mapping[str, Any], task: Mapping[str, Any], index: int) -> list[str]:
    """Volcano's admission checks of a task's partitionPolicy (pkg/webhooks/admission/jobs/validate/admit_job.go
    `validatePartitionPolicy`): the first of totalPartitions > 0, partitionSize > 0, replicas = totalPartitions x
    partitionSize, minAvailable = minPartitions x partitionSize (when both are set), then the topology's
    highestTierAllowed and highestTierName not both set. Each message names the field and the task and job."""
    raw = task.get("partitionPolicy")
    if raw is None:
        return []
    path = f"spec.tasks[{index}].partitionPolicy"
    if not isinstance(raw, Mapping):
        return [f"{path}: must be an object"]
    where = f"in task: {task.get('name', '')}, job: {(job.get('metadata') or {}).get('name', '')}"
    counts: dict[str, int] = {}
    for field in ("totalPartitions", "partitionSize", "minPartitions"):
        value = raw.get(field, 0 if field == "minPartitions" else None)
        counted = _count(value)
        if counted is None:
            return [f"{path}.{field}: {value!r} is not an integer {where}"]
        counts[field] = counted
    problems = _first_count_problem(index, counts, task, where)
    topology = raw.get("networkTopology")
    if isinstance(topology, Mapping) and topology.get("highestTierAllowed") is not None \
            and topology.get("highestTierName") not in (None, ""):
        problems.append(f"{path}.networkTopology: must not specify 'highestTierAllowed' and 'highestTierName' "
                        f"in networkTopology simultaneously {where}")
    return problems


def _first_count_problem(index: int, counts: Mapping[str, int], task: Mapping[str, Any], where: str) -> list[str]:
    path = f"spec.tasks[{index}].partitionPolicy"
    total, size, least = counts["totalPartitions"], counts["partitionSize"], counts["minPartitions"]
    replicas, minimum = _count(task.get("replicas", 0)), _count(task.get("minAvailable"))
    if total <= 0:
        return [f"{path}.totalPartitions: {total} must be greater than 0 {where}"]
    if size <= 0:
        return [f"{path}.partitionSize: {size} must be greater than 0 {where}"]
    if least < 0:  # the CRD's minimum: 0, for an object that did not come through the apiserver
        return [f"{path}.minPartitions: {least} must be greater than or equal to 0 {where}"]
    if replicas != total * size:
        return [f"spec.tasks[{index}].replicas: {replicas} is not equal to totalPartitions x partitionSize "
                f"({total} x {size}) {where}"]
    if minimum is not None and least > 0 and least * size != minimum:
        return [f"spec.tasks[{index}].minAvailable: {minimum} is not equal to minPartitions x "
                f"partitionSize ({least} x {size}) {where}"]
    return []

