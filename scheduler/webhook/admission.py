"""Layer `webhook`: the admission decisions of `volcano-py webhook`, as pure functions over AdmissionReviews.

The checks a CRD schema cannot make, because they need another object, are made here as Volcano's validating
webhook makes them at `/jobs/validate` (pkg/webhooks/admission/jobs/validate/admit_job.go):
- on create, every rule of `scheduler.jobs.validate.validate_job`, and the Job's queue must exist, be Open,
  not be `root` and have no child queues (jobs go to leaf queues only);
- on update, only `minAvailable`, `priorityClassName` and each task's `replicas` and `minAvailable` may change,
  tasks may not be added or removed, and the changed numbers must still be consistent.
One deliberate difference: Volcano refuses a queue whose `status.state` is not yet `Open`, which a queue created
a moment ago has not reached until its controller writes it; volcano-py refuses only `Closed` and `Closing`
queues, so `kubectl apply` of a queue and its Jobs in one file works (CONFORMANCE.md, deliberate differences).

At `/jobflows/validate`, as Volcano's (pkg/webhooks/admission/jobflows/validate/validate_jobflow.go), a JobFlow
whose `dependsOn.targets` name no flow of it, or form a cycle, is refused on create and update (not a DAG).

A Job's size is bounded (issue 31): more than --max-pods-per-job pods (100000 by default, Kubernetes' limit on an
Indexed Job's parallelism; `scheduler.jobs.expand.MAX_JOB_PODS`) is refused on create and update, naming the field.
Volcano has no such bound (CONFORMANCE.md). On create, each task's pod template is then tried by a server-side
dry-run create of one pod (`scheduler.webhook.podcheck`), so what Kubernetes would refuse at pod creation (a
fractional `nvidia.com/gpu`, an extended resource whose request differs from its limit) is refused here with
Kubernetes' own message, as Volcano's webhook refuses a template Kubernetes' pod validation refuses
(admit_job.go validateTaskTemplate).

At `/queues/validate`, as Volcano's (pkg/webhooks/admission/queues/validate/validate_queue.go,
validateQueueDeleting), deleting `default` or `root`, or a queue that has child queues, is refused; with
--enable-queue-allocated-pods-check also a queue whose `status.allocated` still counts pods. Creates and updates of
queues are the CRD's to check.

Every answer names the field: `spec.queue: ...`, as the controllers' own validation does.
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scheduler.api.objects import Obj
from scheduler.jobs.expand import MAX_JOB_PODS, normalize_job, size_problems
from scheduler.jobs.flow import ProblemKind, spec_problems
from scheduler.jobs.validate import validate_job

ROOT_QUEUE = "root"
DEFAULT_QUEUE = "default"
REFUSED_QUEUE_STATES = frozenset({"Closed", "Closing"})
# Fields of a Job's spec an update may change (admit_job.go validateJobUpdate); per task, these two.
MUTABLE_JOB_FIELDS = ("minAvailable", "priorityClassName")
MUTABLE_TASK_FIELDS = ("replicas", "minAvailable")
# What Volcano's /jobflows/validate refuses: a target that is no vertex of the graph, a graph that is not a DAG.
# The other problems of a flow (a duplicate entry, an ignored probe) it admits; the controller tells them.
REFUSED_FLOW_PROBLEMS = frozenset({ProblemKind.UNKNOWN_TARGET, ProblemKind.CYCLE})
_MISSING = object()  # a spec field the Job does not have (None is a value a field may hold)


@dataclass(frozen=True, slots=True)
class Decision:
    """An admission answer: allowed, or refused with one message per problem (each starting with its field)."""

    allowed: bool
    problems: tuple[str, ...] = ()

    @property
    def message(self) -> str:
        return "; ".join(self.problems)


ALLOW = Decision(True)


def refuse(problems: Sequence[str]) -> Decision:
    return Decision(False, tuple(problems)) if problems else ALLOW


@dataclass(frozen=True, slots=True)
class Queues:
    """What the job checks read about queues: one queue by name, and the names of a queue's children."""

    get: Callable[[str], Obj | None]
    children: Callable[[str], Sequence[str]]


# The problems with a Job's pod templates, by a dry-run create of one pod per task; [] when Kubernetes takes them
# (or cannot be asked: the check never refuses for the apiserver's failure).
PodTemplateCheck = Callable[[Obj], list[str]]


@dataclass(frozen=True, slots=True)
class Checks:
    """The webhook's configurable checks: the pod cap per Job, the pod templates' dry run (None: off), and
    Volcano's --enable-queue-allocated-pods-check."""

    max_pods: int = MAX_JOB_PODS
    pod_templates: PodTemplateCheck | None = None
    queue_allocated_pods: bool = False


DEFAULT_CHECKS = Checks()


def admit_job(operation: str, job: Obj, old: Obj | None, queues: Queues, checks: Checks = DEFAULT_CHECKS) -> Decision:
    if operation not in ("CREATE", "UPDATE"):
        return ALLOW  # DELETE and CONNECT are not registered; answering them is harmless
    # The size alone first: it reads only the counts, and the other checks must never see an over-limit Job.
    too_big = size_problems(job, checks.max_pods)
    if too_big:
        return refuse(too_big)
    if operation == "CREATE":
        problems = [*validate_job(job), *queue_problems(job, queues)]
        if not problems and checks.pod_templates is not None:
            problems = checks.pod_templates(job)  # only a Job otherwise admitted costs the apiserver a dry run
        return refuse(problems)
    if old is not None:
        return refuse(update_problems(old, job))
    return ALLOW


def queue_problems(job: Obj, queues: Queues) -> list[str]:
    name = str((job.get("spec") or {}).get("queue") or DEFAULT_QUEUE)
    if name == ROOT_QUEUE:
        return [f"spec.queue: jobs cannot be submitted to the {ROOT_QUEUE!r} queue, only to a leaf queue"]
    queue = queues.get(name)
    if queue is None:
        return [f"spec.queue: queue {name!r} does not exist"]
    state = str((queue.get("status") or {}).get("state") or "")
    if state in REFUSED_QUEUE_STATES:
        return [f"spec.queue: queue {name!r} is {state}; jobs can be submitted only to an Open queue"]
    children = list(queues.children(name))
    if children:
        return [f"spec.queue: queue {name!r} is not a leaf queue (its children: {', '.join(sorted(children))}); "
                "jobs can be submitted only to leaf queues"]
    return []


def update_problems(old: Obj, new: Obj) -> list[str]:
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    old_tasks, new_tasks = list(old_spec.get("tasks") or []), list(new_spec.get("tasks") or [])
    if len(old_tasks) != len(new_tasks):
        return [f"spec.tasks: an update may not add or remove tasks ({len(old_tasks)} before, {len(new_tasks)} now)"]
    problems = [p for p in validate_job(new) if _numbers_rule(p)]
    # Everything else must be as it was: copy what may change from the new spec onto the old one and compare.
    expected = copy.deepcopy(dict(old_spec))
    for key in MUTABLE_JOB_FIELDS:
        _copy_field(new_spec, expected, key)
    expected["tasks"] = []
    for old_task, new_task in zip(old_tasks, new_tasks, strict=True):
        task = copy.deepcopy(dict(old_task))
        for key in MUTABLE_TASK_FIELDS:
            _copy_field(new_task, task, key)
        expected["tasks"].append(task)
    if not _same_ignoring_claim_names(expected, new_spec):
        changed = sorted(k for k in {*expected, *new_spec} if expected.get(k) != new_spec.get(k))
        problems.append(f"spec.{changed[0] if changed else ''}: an update may change only spec.minAvailable, "
                        "spec.priorityClassName and spec.tasks[*].replicas and minAvailable")
    return problems


def _numbers_rule(problem: str) -> bool:
    """The rules an update is held to: replicas and minimums, and each task's partitionPolicy
    (admit_job.go validateJobUpdate, which runs validatePartitionPolicy too)."""
    field = problem.split(":", 1)[0]
    if field.endswith(".networkTopology"):  # validateJobUpdate checks the tier fields too
        return True
    return field.endswith((".replicas", ".minAvailable")) or field == "spec.minAvailable" or ".partitionPolicy" in field


def _copy_field(source: Obj, target: dict[str, Any], key: str) -> None:
    if key in source:
        target[key] = copy.deepcopy(source[key])
    else:
        target.pop(key, None)


def _same_ignoring_claim_names(a: Obj, b: Obj) -> bool:
    """Equal specs, except the controller may fill `volumes[*].volumeClaimName` for a generated claim."""

    def strip(spec: Obj) -> dict[str, Any]:
        out = dict(spec)
        out["volumes"] = [{k: v for k, v in vol.items() if not (k == "volumeClaimName" and vol.get("volumeClaim"))}
                          for vol in spec.get("volumes") or []]
        return out

    return strip(a) == strip(b)


# ---- AdmissionReview (admission.k8s.io/v1) -------------------------------------------------------------
def response(review: Obj, decision: Decision) -> dict[str, Any]:
    """The AdmissionReview to send back for `review`'s request."""
    answer: dict[str, Any] = {"uid": (review.get("request") or {}).get("uid", ""), "allowed": decision.allowed}
    if not decision.allowed:
        answer["status"] = {"code": 400, "reason": "BadRequest", "message": decision.message}
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": answer}


def default_patch(job: Obj, scheduler_name: str) -> list[dict[str, Any]]:
    """The JSON Patch of Volcano's `/jobs/mutate` on CREATE (mutate_job.go `createPatch`): queue, scheduler name
    (the webhook's first --scheduler-name), maxRetry, task names, minimums and retries, the job's minAvailable and
    the plugins the framework plugins need, computed by the same `normalize_job` the controllers and the simulator
    use (docs/volcano-defaults.md). One op per top-level field of `spec` that changes."""
    spec = job.get("spec") or {}
    named = dict(job, spec=dict(spec, schedulerName=spec.get("schedulerName") or scheduler_name))
    wanted = normalize_job(named)["spec"]
    if not isinstance(job.get("spec"), Mapping):
        return [{"op": "add", "path": "/spec", "value": wanted}]
    return [{"op": "replace" if key in spec else "add", "path": f"/spec/{_pointer(key)}", "value": value}
            for key, value in wanted.items() if spec.get(key, _MISSING) != value]


def _pointer(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")  # RFC 6901


def review_job_defaults(review: Obj, scheduler_name: str) -> dict[str, Any]:
    """`/jobs/mutate`: on CREATE, allowed with the defaults as a JSON Patch; anything else allowed unchanged."""
    request = review.get("request") or {}
    answer = response(review, ALLOW)
    if request.get("operation") == "CREATE":
        patch = default_patch(request.get("object") or {}, scheduler_name)
        if patch:
            answer["response"]["patchType"] = "JSONPatch"
            answer["response"]["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
    return answer


def review_job(review: Obj, queues: Queues, checks: Checks = DEFAULT_CHECKS) -> dict[str, Any]:
    request = review.get("request") or {}
    job = request.get("object") or {}
    return response(review, admit_job(str(request.get("operation", "")), job, request.get("oldObject"), queues,
                                      checks))


# ---- queues ----------------------------------------------------------------------------------------------
PROTECTED_QUEUES = (DEFAULT_QUEUE, ROOT_QUEUE)


def admit_queue_delete(name: str, queue: Obj | None, queues: Queues, allocated_pods_check: bool = False) -> Decision:
    """Deleting a queue, as Volcano's validateQueueDeleting decides it: never `default` nor `root`; not while it
    has child queues; with `allocated_pods_check`, not while its status counts allocated pods. `queue` is the
    object being deleted (the review's oldObject), when the apiserver sent it."""
    if name in PROTECTED_QUEUES:
        return refuse([f"metadata.name: the {name!r} queue cannot be deleted"])
    if allocated_pods_check and queue is not None:
        pods = _allocated_pods(queue)
        if pods:
            return refuse([f"status.allocated.pods: queue {name!r} cannot be deleted because it has {pods} "
                           "allocated pods"])
    children = sorted(queues.children(name))
    if children:
        return refuse([f"metadata.name: queue {name!r} cannot be deleted because it has {len(children)} child "
                       f"queues: {', '.join(children)}"])
    return ALLOW


def _allocated_pods(queue: Obj) -> int:
    """`status.allocated.pods` as a count (0 when absent or not a plain count: an unreadable value refuses nothing)."""
    status = queue.get("status")
    allocated = status.get("allocated") if isinstance(status, Mapping) else None
    value = allocated.get("pods") if isinstance(allocated, Mapping) else None
    if isinstance(value, int) and not isinstance(value, bool):
        return max(value, 0)
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 18:
        return int(value)
    return 0


def review_queue(review: Obj, queues: Queues, checks: Checks = DEFAULT_CHECKS) -> dict[str, Any]:
    """`/queues/validate`: DELETE is judged; CREATE and UPDATE are allowed (the CRD's rules check them)."""
    request = review.get("request") or {}
    if request.get("operation") != "DELETE":
        return response(review, ALLOW)
    old = request.get("oldObject") if isinstance(request.get("oldObject"), Mapping) else None
    name = request.get("name") or ((old or {}).get("metadata") or {}).get("name")
    if not isinstance(name, str) or not name:
        return response(review, refuse(["metadata.name: the review names no queue"]))
    return response(review, admit_queue_delete(name, old, queues, checks.queue_allocated_pods))


def admit_jobflow(jobflow: Obj) -> Decision:
    return refuse([p.message() for p in spec_problems(jobflow) if p.kind in REFUSED_FLOW_PROBLEMS])


def review_jobflow(review: Obj) -> dict[str, Any]:
    return response(review, admit_jobflow((review.get("request") or {}).get("object") or {}))
