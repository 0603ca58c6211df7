"""Expand a Volcano Job into its PodGroup and pods. Layer: jobs (pure: plain dicts in, plain dicts out).

The simulator and the kopf controllers both call these functions, so a Job expands the same way in both.
Inputs are never mutated; every result is a fresh deep copy, except that `normalize_job` of its own answer is that
answer: each function here normalizes what it is given and they call one another, so a job normalized once is
not copied again at every step (the simulator's job controller syncs every job every cycle). A normalized job is
not to be changed; a copy of one (`copy.copy`, `copy.deepcopy`) is a plain dict, normalized afresh.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from scheduler.api.convert import TASK_INDEX_KEY
from scheduler.api.pod import GROUP_NAME_ANNOTATION, PREEMPTABLE_KEY, TASK_SPEC_KEY
from scheduler.jobs import keys
from scheduler.jobs.names import job_name, job_namespace, owner_references, pod_name, podgroup_name
from scheduler.jobs.partitions import PARTITION_ID_KEY, partition_id, sub_group_policies
from scheduler.jobs.plugins import Keygen, apply_pod_plugins, plugin_manifests

if TYPE_CHECKING:
    from scheduler.api.resources import Resource

Manifest = dict[str, Any]


class NormalizedJob(dict[str, Any]):
    """What `normalize_job` answers: normalizing it again answers it as it is. Copies are plain dicts."""

    __slots__ = ()

    def __copy__(self) -> Manifest:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> Manifest:
        return copy.deepcopy(dict(self), memo)


# ---------------------------------------------------------------------------------------------- defaults


def normalize_job(job: Mapping[str, Any]) -> Manifest:
    """A defaulted copy of a Job, as Volcano's mutating webhook would leave it; user values are kept.

    Each default follows pkg/webhooks/admission/jobs/mutate/mutate_job.go (createPatch); docs/volcano-defaults.md
    lists them with where volcano-py applies each (the CRD's `default:` where the apiserver can, else here).
    """
    if type(job) is NormalizedJob:
        return job
    out = NormalizedJob(copy.deepcopy(dict(job)))
    spec = out.setdefault("spec", {})
    if not spec.get("queue"):  # patchDefaultQueue
        spec["queue"] = keys.DEFAULT_QUEUE
    if not spec.get("schedulerName"):  # patchDefaultScheduler: the controller's first name; ours by default
        spec["schedulerName"] = keys.DEFAULT_SCHEDULER
    if spec.get("maxRetry") in (None, 0):  # patchDefaultMaxRetry: Volcano treats 0 as unset
        spec["maxRetry"] = keys.DEFAULT_MAX_RETRY
    tasks = spec.setdefault("tasks", [])
    for index, task in enumerate(tasks):
        _normalize_task(task, index)  # mutateSpec
    if spec.get("minAvailable") in (None, 0):  # patchDefaultMinAvailable: Volcano treats 0 as unset
        # Only the tasks that start first can make up the gang: a task with dependsOn gets its pods after
        # those run (Volcano counts every task here, so such a job waits forever unless gang is disabled).
        spec["minAvailable"] = sum(int(t["minAvailable"]) for t in tasks if not depends_on(t))
    if spec.get("plugins") is not None:
        spec["plugins"] = _default_plugins(spec["plugins"])
    return out


# The plugins that need the svc plugin's headless Service and hosts (patchDefaultPlugins).
_NEED_SVC = ("tensorflow", "mpi", "pytorch", "ray")


def _default_plugins(plugins: Mapping[str, Any]) -> dict[str, Any]:
    """tensorflow, mpi, pytorch and ray bring `svc`; mpi brings `ssh` (patchDefaultPlugins)."""
    out = dict(plugins)
    if any(name in out for name in _NEED_SVC):
        out.setdefault("svc", [])
    if "mpi" in out:
        out.setdefault("ssh", [])
    return out


def depends_on(task: Mapping[str, Any]) -> list[str]:
    """The tasks this task waits for (`dependsOn.name`), in spec order."""
    return [str(name) for name in ((task.get("dependsOn") or {}).get("name") or [])]


def first_wave(tasks: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The tasks whose pods are created at once (no dependsOn): the gang is made of these."""
    return [t for t in tasks if not depends_on(t)]


def _normalize_task(task: dict[str, Any], index: int) -> None:
    if not task.get("name"):
        task["name"] = f"{keys.DEFAULT_TASK_NAME}{index}"
    task.setdefault("replicas", keys.DEFAULT_TASK_REPLICAS)
    if task.get("minAvailable") is None:
        task["minAvailable"] = _default_task_min(task)
    if task.get("maxRetry") in (None, 0):
        task["maxRetry"] = keys.DEFAULT_MAX_RETRY
    pod_spec = task.setdefault("template", {}).setdefault("spec", {})
    if pod_spec.get("hostNetwork") and not pod_spec.get("dnsPolicy"):
        pod_spec["dnsPolicy"] = "ClusterFirstWithHostNet"


def _default_task_min(task: Mapping[str, Any]) -> int:
    """minPartitions x partitionSize for a partitioned task with minPartitions > 0, else its replicas
    (mutateSpec; the job controller's getMinTaskMember, pkg/controllers/job/job_controller_actions.go, agrees)."""
    partition = task.get("partitionPolicy") or {}
    min_partitions, size = int(partition.get("minPartitions") or 0), int(partition.get("partitionSize") or 0)
    if min_partitions > 0 and size > 0:
        return min_partitions * size
    return int(task["replicas"])


# ---------------------------------------------------------------------------------------------- size

# The most pods one Job may have: Kubernetes' bound on an Indexed Job's parallelism (pkg/apis/batch/validation,
# `maxParallelismForIndexedJob`). Building a Job's PodGroup and pods costs time and memory per replica, so a Job
# past it (`replicas: 2147483647`) would hold the controller for hours; the CRD's CEL rules, the webhook
# (--max-pods-per-job) and the controller (before any expansion) all refuse it. Volcano has no such bound.
MAX_JOB_PODS = 100_000


def _whole(value: object) -> int | None:
    """An integer field's value, or None if it is not one (a bool, a string, a float): parsed once, here."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def size_problems(job: Mapping[str, Any], limit: int = MAX_JOB_PODS) -> list[str]:
    """The Job's pod counts that exceed `limit` pods, one message per field, each naming it; [] if none.

    Reads only the counts (never iterates over replicas), so it is safe on any Job, however large."""
    spec = job.get("spec")
    if not isinstance(spec, Mapping) or not isinstance(spec.get("tasks"), list):
        return []  # no tasks: validate_job says so
    tasks = spec["tasks"]
    problems, total = [], 0
    for index, task in enumerate(tasks):
        if not isinstance(task, Mapping):
            problems.append(f"spec.tasks[{index}]: must be an object")
            continue
        for field in ("replicas", "minAvailable"):
            problems += _count_problem(f"spec.tasks[{index}].{field}", task.get(field), limit)
        replicas = _whole(task.get("replicas", keys.DEFAULT_TASK_REPLICAS))
        total += max(replicas or 0, 0)
    if total > limit and not any(".replicas:" in p for p in problems):
        problems.append(f"spec.tasks: {total} pods in all (the sum of the replicas of its tasks) exceed the limit of "
                        f"{limit} pods per Job")
    for field in ("minAvailable", "minSuccess"):
        problems += _count_problem(f"spec.{field}", spec.get(field), limit)
    return problems


def _count_problem(path: str, raw: object, limit: int) -> list[str]:
    """What is wrong with a count at `path` (absent is fine): not an integer, or above `limit`."""
    value = _whole(raw)
    if raw is not None and value is None:
        return [f"{path}: {raw!r} is not an integer"]
    if value is not None and value > limit:
        return [f"{path}: {value} exceeds the limit of {limit} pods per Job"]
    return []


def _tasks(job: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list(job.get("spec", {}).get("tasks") or [])


def _replicas(task: Mapping[str, Any]) -> int:
    return int(task.get("replicas", keys.DEFAULT_TASK_REPLICAS))


def _task_min(task: Mapping[str, Any]) -> int:
    return int(task.get("minAvailable", _replicas(task)))


# ---------------------------------------------------------------------------------------------- PodGroup


def podgroup_for(job: Mapping[str, Any], priority_values: Mapping[str, int] | None = None) -> Manifest:
    """The scheduling.volcano.sh/v1beta1 PodGroup of a job.

    `priority_values` maps PriorityClass names to values; Volcano counts higher-priority tasks first in
    `minResources`. Without it, tasks count in spec order.
    """
    job = normalize_job(job)
    spec = job["spec"]
    meta = job.get("metadata", {})
    pg_meta: Manifest = {"name": podgroup_name(job), "namespace": job_namespace(job)}
    if meta.get("labels"):
        pg_meta["labels"] = dict(meta["labels"])
    if meta.get("annotations"):
        pg_meta["annotations"] = dict(meta["annotations"])
    refs = owner_references(job)
    if refs:
        pg_meta["ownerReferences"] = refs
    pg_spec: Manifest = {
        "minMember": int(spec["minAvailable"]),
        "minTaskMember": {t["name"]: _task_min(t) for t in first_wave(_tasks(job))},
        "queue": spec["queue"],
        "minResources": min_resources(job, priority_values),
    }
    if spec.get("priorityClassName"):
        pg_spec["priorityClassName"] = spec["priorityClassName"]
    if spec.get("networkTopology"):  # the gang's topology constraint is the scheduler's to enforce
        pg_spec["networkTopology"] = copy.deepcopy(spec["networkTopology"])
    sub_groups = sub_group_policies(_tasks(job))  # one per task with a partitionPolicy (jobs/partitions.py)
    if sub_groups:
        pg_spec["subGroupPolicy"] = sub_groups
    return {"apiVersion": keys.PODGROUP_API_VERSION, "kind": "PodGroup", "metadata": pg_meta, "spec": pg_spec}


def min_resources(job: Mapping[str, Any], priority_values: Mapping[str, int] | None = None) -> dict[str, str]:
    """The summed requests of the job's first `minAvailable` pods, as a Kubernetes quantity map."""
    from scheduler.api.resources import pod_request  # written alongside; imported late to keep the layer light

    specs = min_pod_specs(normalize_job(job), priority_values)
    if not specs:
        return {}
    total = pod_request(specs[0])
    for pod_spec in specs[1:]:
        total = total + pod_request(pod_spec)
    return quota_usage(total, sum_limits(specs), len(specs))


def sum_limits(specs: list[Mapping[str, Any]]) -> Resource:
    """The summed limits of the pods (containers summed, the larger of that and any init container)."""
    from scheduler.api.resources import ZERO, Resource as Res

    total = ZERO
    for spec in specs:
        pod = ZERO
        for container in spec.get("containers") or []:
            pod = pod + Res.from_quantities((container.get("resources") or {}).get("limits"))
        for container in spec.get("initContainers") or []:
            pod = pod.max_with(Res.from_quantities((container.get("resources") or {}).get("limits")))
        total = total + pod
    return total


def quota_usage(requests: Resource, limits: Resource, pods: int) -> dict[str, str]:
    """The keys Volcano's job controller writes into a PodGroup's minResources: the ResourceQuota usage of the
    pods (pkg/controllers/util/util.go `GetPodQuotaUsage`, k8s quota/v1/evaluator/core `PodUsageFunc`):
    `count/pods` and `pods`; cpu, memory and ephemeral-storage bare and as `requests.*`, with `limits.*`;
    hugepages and extended resources bare and as `requests.*`. The scheduler reads only the bare names."""
    from scheduler.api.resources import CPU, MEMORY, PODS, format_units

    out = {"count/pods": str(pods), PODS: str(pods)}
    for name, units in requests.items():
        if name == PODS or not units:
            continue
        out[name] = out[f"requests.{name}"] = format_units(name, units)
    for name in (CPU, MEMORY, "ephemeral-storage"):
        if units := limits.get(name):
            out[f"limits.{name}"] = format_units(name, units)
    return out


def min_pod_specs(
    job: Mapping[str, Any], priority_values: Mapping[str, int] | None = None
) -> list[Mapping[str, Any]]:
    """The pod specs of the job's first `minAvailable` pods, in the order Volcano counts them.

    Tasks with dependsOn are left out: their pods do not exist until the first ones run. When the job's
    minAvailable covers every task's minAvailable, each task contributes its minAvailable pods first and the
    rest is filled in task order; otherwise the first minAvailable pods in task order.
    """
    tasks = first_wave(_tasks_by_priority(job, priority_values))
    wanted = int(job["spec"]["minAvailable"])
    if wanted < sum(_task_min(t) for t in tasks):
        counts = _first_count(tasks, wanted)
    else:
        counts = _task_minimums_then_fill(tasks, wanted)
    return [t["template"].get("spec", {}) for t, n in zip(tasks, counts, strict=True) for _ in range(n)]


def _tasks_by_priority(
    job: Mapping[str, Any], priority_values: Mapping[str, int] | None
) -> list[Mapping[str, Any]]:
    values = priority_values or {}

    def priority(task: Mapping[str, Any]) -> int:
        return -values.get(task.get("template", {}).get("spec", {}).get("priorityClassName", ""), 0)

    return sorted(_tasks(job), key=priority)  # stable: equal priorities keep spec order


def _first_count(tasks: list[Mapping[str, Any]], wanted: int) -> list[int]:
    counts = []
    for task in tasks:
        take = min(_replicas(task), wanted)
        counts.append(take)
        wanted -= take
    return counts


def _task_minimums_then_fill(tasks: list[Mapping[str, Any]], wanted: int) -> list[int]:
    counts = [_task_min(t) for t in tasks]
    wanted -= sum(counts)
    for i, task in enumerate(tasks):
        extra = min(_replicas(task) - counts[i], max(wanted, 0))
        counts[i] += extra
        wanted -= extra
    return counts


# ---------------------------------------------------------------------------------------------- pods


def pod_for(
    job: Mapping[str, Any], task_index_in_spec: int, replica_index: int, *, podgroup: str | None = None
) -> Manifest:
    """The Pod for replica `replica_index` of task number `task_index_in_spec`, with plugins applied.

    `podgroup` is the name of the PodGroup the controller found for the job (a legacy `<job>` one, say); the
    pod joins it. Without it the pod names `podgroup_name(job)`, as Volcano's controller always does.
    """
    job = normalize_job(job)
    task = job["spec"]["tasks"][task_index_in_spec]
    template = copy.deepcopy(task.get("template", {}))
    group = podgroup or podgroup_name(job)
    pod: Manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": _pod_metadata(job, task, template.get("metadata", {}), replica_index, group),
        "spec": _pod_spec(job, template.get("spec", {})),
    }
    _mount_job_volumes(pod, job)
    apply_pod_plugins(pod, job, task_index_in_spec, replica_index)
    return pod


def pods_for(job: Mapping[str, Any], *, podgroup: str | None = None) -> list[Manifest]:
    """Every pod of the job: tasks in spec order, replicas in index order."""
    job = normalize_job(job)
    return [pod_for(job, t, i, podgroup=podgroup) for t, task in enumerate(_tasks(job)) for i in range(_replicas(task))]


def expected_pod_names(job: Mapping[str, Any]) -> list[str]:
    job = normalize_job(job)
    return [pod_name(job, task["name"], i) for task in _tasks(job) for i in range(_replicas(task))]


def _pod_metadata(
    job: Mapping[str, Any], task: Mapping[str, Any], template_meta: Mapping[str, Any], index: int, group: str
) -> Manifest:
    spec = job["spec"]
    task_name = str(task["name"])
    labels = dict(template_meta.get("labels") or {})
    labels.update(
        {
            keys.JOB_NAME: job_name(job),
            keys.JOB_NAMESPACE: job_namespace(job),
            keys.QUEUE_NAME: spec["queue"],
            TASK_SPEC_KEY: task_name,
            keys.TASK_NAME: task_name,
            TASK_INDEX_KEY: str(index),
        }
    )
    annotations = dict(template_meta.get("annotations") or {})
    annotations.update(
        {
            # `<job>-<uid>`, as Volcano's controller annotates its pods (pkg/controllers/job/job_controller_util.go)
            GROUP_NAME_ANNOTATION: group,
            keys.JOB_NAME: job_name(job),
            TASK_SPEC_KEY: task_name,
            TASK_INDEX_KEY: str(index),
            keys.JOB_VERSION: str(int(job.get("status", {}).get("version", 0))),
            keys.QUEUE_NAME: spec["queue"],
            keys.POD_TEMPLATE: f"{job_name(job)}-{task_name}",
        }
    )
    if task.get("topologyPolicy"):
        annotations[keys.NUMA_POLICY] = str(task["topologyPolicy"])
    partition = partition_id(task, index)
    if partition is not None:  # a label only, as Volcano's createJobPod
        labels[PARTITION_ID_KEY] = partition
    preemptable = _preemptable(job, task)
    if preemptable is not None:
        annotations[PREEMPTABLE_KEY] = preemptable
        labels[PREEMPTABLE_KEY] = preemptable
    meta: Manifest = {
        "name": pod_name(job, task_name, index),
        "namespace": job_namespace(job),
        "labels": labels,
        "annotations": annotations,
    }
    refs = owner_references(job)
    if refs:
        meta["ownerReferences"] = refs
    return meta


def _preemptable(job: Mapping[str, Any], task: Mapping[str, Any]) -> str | None:
    """"true"/"false" from task `preemptable`, else job `preemptable`, else the job's label/annotation."""
    for source in (task.get("preemptable"), job["spec"].get("preemptable")):
        if source is not None:
            return _bool_text(source)
    meta = job.get("metadata", {})
    for where in ("annotations", "labels"):
        value = (meta.get(where) or {}).get(PREEMPTABLE_KEY)
        if value is not None:
            return _bool_text(value)
    return None


def _bool_text(value: object) -> str:
    if isinstance(value, str):
        return "true" if value.strip().lower() == "true" else "false"
    return "true" if value else "false"


def _pod_spec(job: Mapping[str, Any], template_spec: Mapping[str, Any]) -> Manifest:
    spec = dict(template_spec)
    if not spec.get("schedulerName"):
        spec["schedulerName"] = job["spec"]["schedulerName"]
    if not spec.get("priorityClassName") and job["spec"].get("priorityClassName"):
        spec["priorityClassName"] = job["spec"]["priorityClassName"]
    # The apiserver would default it to Always; spelling it out keeps the simulator honest.
    spec.setdefault("restartPolicy", keys.DEFAULT_RESTART_POLICY)
    spec.setdefault("containers", [])
    return spec


def _mount_job_volumes(pod: Manifest, job: Mapping[str, Any]) -> None:
    """Mount `spec.volumes` claims into every container, as Volcano does, with deterministic volume names."""
    seen: set[str] = set()
    for number, volume in enumerate(job["spec"].get("volumes") or []):
        claim = volume.get("volumeClaimName")
        if not claim or claim in seen or not volume.get("mountPath"):
            continue  # claims created from `volumeClaim` get their name from the controller first
        seen.add(claim)
        name = f"{job_name(job)}-volume-{number}"
        pod["spec"].setdefault("volumes", []).append({"name": name, "persistentVolumeClaim": {"claimName": claim}})
        for container in pod["spec"]["containers"]:
            container.setdefault("volumeMounts", []).append({"name": name, "mountPath": volume["mountPath"]})


# ---------------------------------------------------------------------------------------------- plugin objects


def plugin_objects(job: Mapping[str, Any], keygen: Keygen | None = None) -> list[Manifest]:
    """Services, ConfigMaps, NetworkPolicies and Secrets the job's plugins need, created before the pods."""
    return plugin_manifests(normalize_job(job), keygen)
