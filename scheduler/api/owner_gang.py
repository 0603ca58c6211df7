"""Layer `api`: automatic gangs from a workload's owner chain, for operators that make no PodGroup.

A JobSet (jobset.x-k8s.io) runs its replicated jobs as batch Jobs; a LeaderWorkerSet (leaderworkerset.x-k8s.io)
runs each group as a leader pod and a StatefulSet of workers. Neither writes a PodGroup, so by themselves their
pods get one PodGroup per child Job or StatefulSet (controllers/podgroup.py) and never start as one gang. Here a
workload that opts in becomes whole gangs, read once from its spec with bounds:

- a JobSet is one gang `jobset-<name>`: `minMember` is the sum over its replicated jobs of `replicas` x the pods
  each Job runs at once (`parallelism`, at most `completions`; both default to 1 as the Job API does),
  `minTaskMember` that count per replicated job (a pod's task is its `jobset.sigs.k8s.io/replicatedjob-name`
  label, `api/pod.py role_of`), and `minResources` the sum of those pods' requests;
- a LeaderWorkerSet is one gang per group, `lws-<name>-<group index>` for index 0..replicas-1: `minMember` is
  the group's `size` (the leader and size-1 workers), `minResources` the leader's request plus size-1 workers'.
- a Kubeflow PyTorchJob whose operator runs without its Volcano integration is one gang `pytorchjob-<name>`,
  read in `api.pytorch_gang` (its pods' labels are read here, with the others').

Opt-in: the annotation `scheduling.volcano-py.io/owner-gang: "true"` on the workload, or on its namespace (the
workload's own value, "true" or "false", wins). The queue is the workload's `scheduling.volcano.sh/queue-name`
annotation, else label, else `default`, as for a Volcano Job; the priority class is the first pod template's
`priorityClassName` (a Volcano Job's PodGroup takes the Job's).

A pod joins its owner gang by its labels alone (`owner_group_name`): the pods are never rewritten. A spec that
cannot be read raises `OwnerGangError` with a typed `FieldInvalid`; the caller logs it once and the workload's
pods keep their per-Job PodGroups.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scheduler.api.reasons import FieldInvalid
from scheduler.api.resources import ZERO, QuantityError, Resource, pod_request

OWNER_GANG_ANNOTATION = "scheduling.volcano-py.io/owner-gang"
OWNER_GANG_LABEL = "scheduling.volcano-py.io/owner-gang"  # on the PodGroups made here: "jobset" or "lws"
QUEUE_NAME_KEY = "scheduling.volcano.sh/queue-name"
DEFAULT_QUEUE = "default"

JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
LWS_NAME = "leaderworkerset.sigs.k8s.io/name"
LWS_GROUP_INDEX = "leaderworkerset.sigs.k8s.io/group-index"

# A Kubeflow PyTorchJob's pods (training-operator v1.8.1: common_types.go labels, pytorchjob_controller.go name);
# its gang is read in `api.pytorch_gang`.
TRAINING_JOB_NAME = "training.kubeflow.org/job-name"
TRAINING_OPERATOR_NAME = "training.kubeflow.org/operator-name"
TRAINING_REPLICA_TYPE = "training.kubeflow.org/replica-type"
PYTORCH_OPERATOR = "pytorchjob-controller"

JOBSET_API = ("jobset.x-k8s.io", "v1alpha2", "jobsets")
LWS_API = ("leaderworkerset.x-k8s.io", "v1", "leaderworkersets")
PYTORCH_API = ("kubeflow.org", "v1", "pytorchjobs")
JOBSET_PREFIX = "jobset-"
LWS_PREFIX = "lws-"
PYTORCH_PREFIX = "pytorchjob-"

JOBSET_EXCLUSIVE = "alpha.jobset.sigs.k8s.io/exclusive-topology"
JOBSET_NODE_SELECTOR_STRATEGY = "alpha.jobset.sigs.k8s.io/node-selector"
LWS_EXCLUSIVE = "leaderworkerset.sigs.k8s.io/exclusive-topology"

MAX_MEMBERS = 100_000  # pods in one gang: a Volcano Job's default --max-pods-per-job (jobs/expand.py)
MAX_NAME = 253
MAX_LABEL_VALUE = 63


class OwnerGangError(ValueError):
    def __init__(self, reason: FieldInvalid) -> None:
        super().__init__(f"{reason.object_kind} {reason.name}: {reason.path} {reason.problem} ({reason.value})")
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Owner:
    api_version: str
    kind: str
    name: str
    uid: str


@dataclass(frozen=True, slots=True)
class GangSpec:
    """One PodGroup to make: what `podgroup()` writes."""

    kind: str  # "jobset", "lws" or "pytorchjob"
    namespace: str
    name: str
    min_member: int
    min_task_member: tuple[tuple[str, int], ...]
    min_resources: Resource
    queue: str
    priority_class: str
    owner: Owner

    def podgroup(self) -> dict[str, Any]:
        spec: dict[str, Any] = {"minMember": self.min_member, "queue": self.queue}
        if self.min_task_member:
            spec["minTaskMember"] = dict(self.min_task_member)
        minimum = {k: v for k, v in self.min_resources.to_quantities().items() if k != "pods"}
        if minimum:
            spec["minResources"] = minimum
        if self.priority_class:
            spec["priorityClassName"] = self.priority_class
        ref = {"apiVersion": self.owner.api_version, "kind": self.owner.kind, "name": self.owner.name,
               "uid": self.owner.uid, "controller": True, "blockOwnerDeletion": False}
        meta = {"name": self.name, "namespace": self.namespace, "labels": {OWNER_GANG_LABEL: self.kind},
                "ownerReferences": [ref]}
        return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": meta, "spec": spec}


# ---- reading, with bounds -------------------------------------------------------------------------------------
class WorkloadReader:
    def __init__(self, kind: str, where: str) -> None:
        self.kind, self.where = kind, where

    def fail(self, path: str, problem: str, value: object) -> OwnerGangError:
        shown = repr(value)
        return OwnerGangError(FieldInvalid(self.kind, self.where, path, problem,
                                           shown if len(shown) <= 80 else shown[:77] + "..."))

    def obj(self, value: object, path: str, *, required: bool = True) -> Mapping[str, Any]:
        if value is None and not required:
            return {}
        if not isinstance(value, Mapping):
            raise self.fail(path, "is missing" if value is None else "is not an object", value)
        return value

    def count(self, value: object, path: str, default: int, low: int = 0) -> int:
        if value is None:
            return default
        if type(value) is not int:
            raise self.fail(path, "is not an integer", value)
        if not low <= value <= MAX_MEMBERS:
            raise self.fail(path, f"is outside [{low}, {MAX_MEMBERS}]", value)
        return value

    def name(self, value: object, path: str, most: int = MAX_NAME) -> str:
        if type(value) is not str or not 0 < len(value) <= most:
            raise self.fail(path, f"is not a name of 1 to {most} characters", value)
        return value

    def optional_name(self, value: object, path: str) -> str:
        """A name the owner may leave out: absent or "" (a Go string's zero value: its controllers read it as
        unset, as a pod's `priorityClassName: ""` is none) is ""."""
        return "" if value is None or value == "" else self.name(value, path)

    def request(self, pod_spec: Mapping[str, Any], path: str) -> Resource:
        try:
            return pod_request(pod_spec, field=path)
        except QuantityError as exc:
            raise self.fail(path, f"has a request that cannot be read: {exc}", "") from None

    def members(self, total: int, path: str) -> int:
        if total > MAX_MEMBERS:
            raise self.fail(path, f"make a gang of more than {MAX_MEMBERS} pods", total)
        return total


def workload_meta(reader: WorkloadReader, workload: Mapping[str, Any]) -> Mapping[str, Any]:
    return reader.obj(workload.get("metadata"), "metadata")


def workload_where(kind: str, workload: Mapping[str, Any]) -> str:
    meta = workload.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    return f"{str(meta.get('namespace', '?'))[:63]}/{str(meta.get('name', '?'))[:MAX_NAME]}"


def workload_owner(reader: WorkloadReader, workload: Mapping[str, Any], api: tuple[str, str, str], kind: str) -> Owner:
    meta = workload_meta(reader, workload)
    # The name is a label value on its pods (owner_group_name reads it there): at most 63 characters, which also
    # keeps the PodGroup's name (`jobset-<name>`, `lws-<name>-<index>`) a valid one.
    return Owner(f"{api[0]}/{api[1]}", kind, reader.name(meta.get("name"), "metadata.name", MAX_LABEL_VALUE),
                 reader.name(meta.get("uid"), "metadata.uid"))


def queue_of(reader: WorkloadReader, meta: Mapping[str, Any]) -> str:
    """A Volcano Job's rule: the queue-name annotation, else the label, else `default`."""
    for where in ("annotations", "labels"):
        values = meta.get(where)
        value = values.get(QUEUE_NAME_KEY) if isinstance(values, Mapping) else None
        if value is not None:
            return reader.name(value, f"metadata.{where}[{QUEUE_NAME_KEY}]")
    return DEFAULT_QUEUE


def opted_in(workload: Mapping[str, Any], namespace_annotations: Mapping[str, Any] | None) -> bool:
    """The workload's `owner-gang` annotation ("true" or "false") decides; without one, its namespace's "true"."""
    meta = workload.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    own = annotations.get(OWNER_GANG_ANNOTATION) if isinstance(annotations, Mapping) else None
    if own is not None:
        return bool(own == "true")
    return bool(namespace_annotations and namespace_annotations.get(OWNER_GANG_ANNOTATION) == "true")


# ---- JobSet ---------------------------------------------------------------------------------------------------
def jobset_gang(jobset: Mapping[str, Any]) -> GangSpec:
    """The one gang of a JobSet (sigs.k8s.io/jobset v1alpha2). `startupPolicyOrder: InOrder` is refused: its
    replicated jobs start one after another once the previous is ready, which a whole gang never is."""
    reader = WorkloadReader("JobSet", workload_where("JobSet", jobset))
    owner = workload_owner(reader, jobset, JOBSET_API, "JobSet")
    meta = workload_meta(reader, jobset)
    spec = reader.obj(jobset.get("spec"), "spec")
    startup = reader.obj(spec.get("startupPolicy"), "spec.startupPolicy", required=False)
    if startup.get("startupPolicyOrder", "AnyOrder") != "AnyOrder":
        raise reader.fail("spec.startupPolicy.startupPolicyOrder", "starts its jobs one by one, never as one gang",
                          startup.get("startupPolicyOrder"))
    _no_exclusive(reader, meta, "metadata.annotations")
    replicated = spec.get("replicatedJobs")
    if not isinstance(replicated, list) or not replicated:
        raise reader.fail("spec.replicatedJobs", "is not a non-empty list", replicated)
    tasks: dict[str, int] = {}
    resources, total, priority = ZERO, 0, ""
    for i, raw in enumerate(replicated):
        path = f"spec.replicatedJobs[{i}]"
        rjob = reader.obj(raw, path)
        name = reader.name(rjob.get("name"), f"{path}.name")
        if name in tasks:
            raise reader.fail(f"{path}.name", "names a replicated job twice", name)
        replicas = reader.count(rjob.get("replicas"), f"{path}.replicas", 1)
        job_template = reader.obj(rjob.get("template"), f"{path}.template")
        _no_exclusive(reader, reader.obj(job_template.get("metadata"), f"{path}.template.metadata", required=False),
                      f"{path}.template.metadata.annotations")
        job_spec = reader.obj(job_template.get("spec"), f"{path}.template.spec")
        parallelism = reader.count(job_spec.get("parallelism"), f"{path}.template.spec.parallelism", 1)
        completions = reader.count(job_spec.get("completions"), f"{path}.template.spec.completions", parallelism)
        pod_template = reader.obj(job_spec.get("template"), f"{path}.template.spec.template")
        pod_spec = reader.obj(pod_template.get("spec"), f"{path}.template.spec.template.spec")
        pods = reader.members(replicas * min(parallelism, completions), f"{path}.replicas x parallelism")
        total = reader.members(total + pods, "spec.replicatedJobs")
        tasks[name] = pods
        if pods:
            resources = resources + reader.request(pod_spec, f"{path}.template.spec.template.spec").scale(pods)
        if not priority:
            priority = reader.optional_name(pod_spec.get("priorityClassName"),
                                            f"{path}.template.spec.template.spec.priorityClassName")
    return GangSpec("jobset", reader.name(meta.get("namespace"), "metadata.namespace"),
                    f"{JOBSET_PREFIX}{owner.name}", total,
                    tuple((k, v) for k, v in tasks.items() if v), resources, queue_of(reader, meta), priority, owner)


def _no_exclusive(reader: WorkloadReader, meta: Mapping[str, Any], path: str) -> None:
    """JobSet's exclusive placement by pod affinity admits a Job's other pods only once its first is scheduled
    (its pod admission webhook), which a gang waiting for all of them never is; the node-selector strategy
    does not wait, and is let through."""
    annotations = meta.get("annotations")
    if isinstance(annotations, Mapping) and JOBSET_EXCLUSIVE in annotations and (
            JOBSET_NODE_SELECTOR_STRATEGY not in annotations):
        raise reader.fail(f"{path}[{JOBSET_EXCLUSIVE}]", "admits a Job's pods one by one, never as one gang",
                          annotations[JOBSET_EXCLUSIVE])


# ---- LeaderWorkerSet ------------------------------------------------------------------------------------------
def lws_gangs(lws: Mapping[str, Any]) -> list[GangSpec]:
    """One gang per group of a LeaderWorkerSet (sigs.k8s.io/lws v1): `replicas` groups of `size` pods, the
    leader from `leaderTemplate` (the worker template when absent, as LWS does) and size-1 workers.
    `startupPolicy: LeaderReady` and exclusive placement are refused: the workers are created only once the
    leader is ready (or scheduled), which a leader waiting for its whole gang never is."""
    reader = WorkloadReader("LeaderWorkerSet", workload_where("LeaderWorkerSet", lws))
    owner = workload_owner(reader, lws, LWS_API, "LeaderWorkerSet")
    meta = workload_meta(reader, lws)
    spec = reader.obj(lws.get("spec"), "spec")
    if spec.get("startupPolicy", "LeaderCreated") != "LeaderCreated":
        raise reader.fail("spec.startupPolicy", "creates the workers after the leader is ready, never one gang",
                          spec.get("startupPolicy"))
    annotations = meta.get("annotations")
    if isinstance(annotations, Mapping) and LWS_EXCLUSIVE in annotations:
        raise reader.fail(f"metadata.annotations[{LWS_EXCLUSIVE}]",
                          "creates the workers after the leader is scheduled, never one gang",
                          annotations[LWS_EXCLUSIVE])
    replicas = reader.count(spec.get("replicas"), "spec.replicas", 1)
    template = reader.obj(spec.get("leaderWorkerTemplate"), "spec.leaderWorkerTemplate")
    size = reader.count(template.get("size"), "spec.leaderWorkerTemplate.size", 1, low=1)
    reader.members(replicas * size, "spec.replicas x size")
    worker = reader.obj(reader.obj(template.get("workerTemplate"), "spec.leaderWorkerTemplate.workerTemplate")
                        .get("spec"), "spec.leaderWorkerTemplate.workerTemplate.spec")
    leader_template = reader.obj(template.get("leaderTemplate"), "spec.leaderWorkerTemplate.leaderTemplate",
                                 required=False)
    leader = (reader.obj(leader_template.get("spec"), "spec.leaderWorkerTemplate.leaderTemplate.spec")
              if leader_template else worker)
    resources = reader.request(leader, "spec.leaderWorkerTemplate.leaderTemplate.spec") + reader.request(
        worker, "spec.leaderWorkerTemplate.workerTemplate.spec").scale(size - 1)
    priority = ""
    for pod_spec, path in ((leader, "leaderTemplate"), (worker, "workerTemplate")):
        if not priority:
            priority = reader.optional_name(pod_spec.get("priorityClassName"),
                                            f"spec.leaderWorkerTemplate.{path}.spec.priorityClassName")
    namespace, queue = reader.name(meta.get("namespace"), "metadata.namespace"), queue_of(reader, meta)
    return [GangSpec("lws", namespace, lws_group_name(owner.name, index), size, (), resources, queue, priority, owner)
            for index in range(replicas)]


def lws_group_name(name: str, index: int) -> str:
    return f"{LWS_PREFIX}{name}-{index}"


# ---- pods -----------------------------------------------------------------------------------------------------
def owner_group_name(labels: Mapping[str, Any] | None) -> str | None:
    """The owner gang a pod would join, from its labels (JobSet's, LWS's name and group index, or a PyTorchJob's
    name with its operator's name); None for other pods and for labels that cannot be read."""
    if not labels or not isinstance(labels, Mapping):
        return None
    pytorch = _pytorchjob_name(labels)
    if pytorch is not None:
        return f"{PYTORCH_PREFIX}{pytorch}"
    jobset = labels.get(JOBSET_NAME)
    if jobset is not None:
        return f"{JOBSET_PREFIX}{jobset}" if type(jobset) is str and 0 < len(jobset) <= MAX_LABEL_VALUE else None
    lws = labels.get(LWS_NAME)
    if lws is None:
        return None
    index = labels.get(LWS_GROUP_INDEX)
    if type(lws) is not str or not 0 < len(lws) <= MAX_LABEL_VALUE:
        return None
    if type(index) is not str or not (index.isascii() and index.isdigit()) or len(index) > 6:
        return None
    return lws_group_name(lws, int(index))


def owner_workload(labels: Mapping[str, Any] | None) -> tuple[tuple[str, str, str], str] | None:
    """(API group/version/plural, name) of the workload whose labels a pod carries, or None."""
    if not labels or not isinstance(labels, Mapping):
        return None
    pytorch = _pytorchjob_name(labels)
    if pytorch is not None:
        return PYTORCH_API, pytorch
    for key, api in ((JOBSET_NAME, JOBSET_API), (LWS_NAME, LWS_API)):
        value = labels.get(key)
        if type(value) is str and 0 < len(value) <= MAX_LABEL_VALUE:
            return api, value
    return None


def _pytorchjob_name(labels: Mapping[str, Any]) -> str | None:
    """The PyTorchJob a pod's labels name: its job-name label, with the PyTorchJob controller's operator name (the
    other training jobs' pods carry the same job-name label)."""
    if labels.get(TRAINING_OPERATOR_NAME) != PYTORCH_OPERATOR:
        return None
    name = labels.get(TRAINING_JOB_NAME)
    return name if type(name) is str and 0 < len(name) <= MAX_LABEL_VALUE else None
