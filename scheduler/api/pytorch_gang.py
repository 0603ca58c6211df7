"""Layer `api`: the automatic gang of a Kubeflow PyTorchJob (kubeflow.org/v1, training-operator v1.8.1) whose
operator runs without its Volcano integration (no `--gang-scheduler-name`), and so writes no PodGroup.

Left alone its pods, owned by the PyTorchJob, each get the plain pods' PodGroup (`controllers/podgroup.py`) and
start piecemeal. A PyTorchJob that opts in (`api.owner_gang.opted_in`) becomes one gang `pytorchjob-<name>`,
read once from its spec with bounds, as the operator's own Volcano integration computes its PodGroup
(training-operator pkg/controller.v1/common/job.go, ReconcileJobs, and util.go CalcPGMinResources):

- `minMember` is the number of all replicas (`replicas` defaults to 1 per replica type:
  pkg/util/k8sutil/k8sutil.go GetTotalReplicas), or `runPolicy.schedulingPolicy.minAvailable`; the elastic
  policy's `minReplicas` does not enter it there either;
- `minResources` is `runPolicy.schedulingPolicy.minResources`, else the requests of the first `minMember` pods
  (the operator orders the replica types by their priority class's value; here Master before Worker, the order
  of equal priorities being the map's in the operator);
- `minTaskMember` counts each replica type's pods (a pod's task is its `training.kubeflow.org/replica-type`
  label, the lower-cased type, which the integration writes as `volcano.sh/task-spec`: `api/pod.py role_of`);
  it is left out when `minAvailable` asks for fewer than all, as the integration writes none;
- the queue is `runPolicy.schedulingPolicy.queue`, else the job's `scheduling.volcano.sh/queue-name`
  annotation or label, else `default`; the priority class `runPolicy.schedulingPolicy.priorityClass`, else the
  first template's (Master's, then Worker's).

A suspended job (`runPolicy.suspend`) and a finished one (a `Succeeded` or `Failed` condition: the operator then
deletes its PodGroup, job.go) have no gang (`minMember` 0: the controller deletes the PodGroup). The pods join
by their labels `training.kubeflow.org/job-name` and `training.kubeflow.org/operator-name:
pytorchjob-controller` (`api.owner_gang.owner_group_name`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.api.owner_gang import (
    PYTORCH_API,
    PYTORCH_PREFIX,
    GangSpec,
    WorkloadReader,
    queue_of,
    workload_meta,
    workload_owner,
    workload_where,
)
from scheduler.api.resources import ZERO, QuantityError, Resource

REPLICA_TYPES = ("Master", "Worker")  # a PyTorchJob's (pytorch_types.go); the operator camel-cases the keys
FINISHED = ("Succeeded", "Failed")
MAX_CONDITIONS = 64


def pytorchjob_gang(job: Mapping[str, Any]) -> GangSpec:
    """The one gang of a PyTorchJob; `min_member` 0 when it is suspended or finished (no PodGroup)."""
    reader = WorkloadReader("PyTorchJob", workload_where("PyTorchJob", job))
    owner = workload_owner(reader, job, PYTORCH_API, "PyTorchJob")
    meta = workload_meta(reader, job)
    namespace = reader.name(meta.get("namespace"), "metadata.namespace")
    spec = reader.obj(job.get("spec"), "spec")
    run = reader.obj(spec.get("runPolicy"), "spec.runPolicy", required=False)
    policy = reader.obj(run.get("schedulingPolicy"), "spec.runPolicy.schedulingPolicy", required=False)
    replicas = _replicas(reader, reader.obj(spec.get("pytorchReplicaSpecs"), "spec.pytorchReplicaSpecs"))
    total = reader.members(sum(n for _, n, _, _ in replicas), "spec.pytorchReplicaSpecs")
    min_member = total
    if policy.get("minAvailable") is not None:
        min_member = reader.count(policy["minAvailable"], "spec.runPolicy.schedulingPolicy.minAvailable", total,
                                  low=1)
        if min_member > total:
            raise reader.fail("spec.runPolicy.schedulingPolicy.minAvailable",
                              f"asks for more pods than the job's {total}", min_member)
    if policy.get("minResources") is not None:
        resources = _resource_list(reader, policy["minResources"], "spec.runPolicy.schedulingPolicy.minResources")
    else:
        resources, left = ZERO, min_member
        for _, count, request, _ in replicas:  # the first minMember pods, as CalcPGMinResources counts them
            take = min(count, left)
            resources, left = (resources + request.scale(take) if take else resources), left - take
    tasks = tuple((task, count) for task, count, _, _ in replicas if count) if min_member == total else ()
    # "" is unset, as the operator reads the policy's strings (`len(...) != 0`); then the next source applies.
    priority = (reader.optional_name(policy.get("priorityClass"), "spec.runPolicy.schedulingPolicy.priorityClass")
                or next((p for _, _, _, p in replicas if p), ""))
    queue = (reader.optional_name(policy.get("queue"), "spec.runPolicy.schedulingPolicy.queue")
             or queue_of(reader, meta))
    suspend = run.get("suspend")
    if suspend is not None and type(suspend) is not bool:
        raise reader.fail("spec.runPolicy.suspend", "is not a boolean", suspend)
    if suspend or _finished(reader, job):
        min_member, tasks = 0, ()
    return GangSpec("pytorchjob", namespace, f"{PYTORCH_PREFIX}{owner.name}", min_member, tasks, resources, queue,
                    priority, owner)


def _replicas(reader: WorkloadReader, specs: Mapping[str, Any]) -> list[tuple[str, int, Resource, str]]:
    """(task, replicas, one pod's request, priority class) per replica type, Master first."""
    if not specs or len(specs) > len(REPLICA_TYPES):
        raise reader.fail("spec.pytorchReplicaSpecs", "is not one or two replica types (Master, Worker)",
                          sorted(map(str, specs))[:4])
    found: dict[str, tuple[str, int, Resource, str]] = {}
    for key, raw in specs.items():
        path = f"spec.pytorchReplicaSpecs[{str(key)[:63]}]"
        kind = next((t for t in REPLICA_TYPES if type(key) is str and key.lower() == t.lower()), None)
        if kind is None:
            raise reader.fail(path, "is not a replica type of a PyTorchJob (Master, Worker)", key)
        if kind in found:
            raise reader.fail(path, "names a replica type twice", key)
        rspec = reader.obj(raw, path)
        count = reader.count(rspec.get("replicas"), f"{path}.replicas", 1)
        template = reader.obj(rspec.get("template"), f"{path}.template")
        pod_spec = reader.obj(template.get("spec"), f"{path}.template.spec")
        request = reader.request(pod_spec, f"{path}.template.spec")
        priority = reader.optional_name(pod_spec.get("priorityClassName"), f"{path}.template.spec.priorityClassName")
        found[kind] = (kind.lower(), count, request, priority)
    return [found[t] for t in REPLICA_TYPES if t in found]


def _resource_list(reader: WorkloadReader, value: object, path: str) -> Resource:
    quantities = reader.obj(value, path)
    if len(quantities) > MAX_CONDITIONS:
        raise reader.fail(path, f"names more than {MAX_CONDITIONS} resources", len(quantities))
    try:
        return Resource.from_quantities(quantities, field=path)
    except (QuantityError, TypeError, ValueError) as exc:
        raise reader.fail(path, f"cannot be read: {exc}", "") from None


def _finished(reader: WorkloadReader, job: Mapping[str, Any]) -> bool:
    """A `Succeeded` or `Failed` condition with status "True" (the operator's status, read with bounds)."""
    status = reader.obj(job.get("status"), "status", required=False)
    conditions = status.get("conditions")
    if conditions is None:
        return False
    if not isinstance(conditions, list) or len(conditions) > MAX_CONDITIONS:
        raise reader.fail("status.conditions", f"is not a list of at most {MAX_CONDITIONS}", type(conditions))
    for i, raw in enumerate(conditions):
        condition = reader.obj(raw, f"status.conditions[{i}]")
        if condition.get("type") in FINISHED and condition.get("status") == "True":
            return True
    return False

