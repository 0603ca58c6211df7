"""Layer `sim`: workload kinds besides Volcano Jobs, made into the Jobs the replay runs (issue 19).

- **Deployment, StatefulSet** (apps/v1): their pods form one gang, as volcano-py's and Volcano's PodGroup
  controllers make one PodGroup per owner: `minMember` from the workload's `scheduling.volcano.sh/group-min-member`
  annotation (default 1), queue from `scheduling.volcano.sh/queue-name` (default `default`). Replayed as one
  Volcano Job of `replicas` pods of the template, running for the item's `duration` once up.
- **CronJob** (batch.volcano.sh/v1alpha1), created at `arrival`: its controller runs in the replay
  (`sim/controllers.py`) on the simulated clock, whose 0 is `EPOCH` (midnight UTC, 2026-01-01), with the real
  controller's rules: a Job from `jobTemplate` per start after `arrival` and before `until` (default: a day after
  `arrival`), named as the controller names them (`<cronjob>-<minutes since the Unix epoch>`), each running for
  `duration` once its gang is up; `suspend`, `startingDeadlineSeconds`, the history limits, and
  `concurrencyPolicy` against the Jobs as they are (Forbid waits while the last one has not finished, Replace
  deletes it).
- **JobFlow, JobTemplate** (flow.volcano.sh/v1alpha1): the flow, created at its `arrival`, makes each entry's Job
  from its template once the Jobs it depends on have Completed; a Job made from a template runs for the
  template's `duration`.

A template that names no scheduler is given `volcano-py`'s (a Deployment's pods would otherwise go to
kube-scheduler, which the simulator does not run), with a warning.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

from scheduler.api.convert import MIN_MEMBER_ANNOTATION, QUEUE_NAME_ANNOTATION
from scheduler.jobs.cron import job_for, schedule_of
from scheduler.jobs.cron_schedule import ScheduleError
from scheduler.sim.items import Controlled

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
JOB_API = "batch.volcano.sh/v1alpha1"
FLOW_API = "flow.volcano.sh/v1alpha1"
CONTROLLED = ("CronJob", "JobFlow", "JobTemplate")
WORKLOADS = ("Deployment", "StatefulSet")
OURS = ("volcano", "volcano-py")


class KindError(ValueError):
    """A field of such an item that cannot be replayed: (where, problem)."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"{where}: {problem}")
        self.where, self.problem = where, problem


def _template(template: Any, where: str, label: str, warnings: list[str]) -> dict[str, Any]:
    if not isinstance(template, dict) or not isinstance(template.get("spec"), dict):
        raise KindError(f"{where}.spec.template", "expected a pod template with a spec")
    out = copy.deepcopy(template)
    if out["spec"].get("schedulerName") not in OURS:
        warnings.append(f"{label}: spec.template.spec.schedulerName: "
                        f"{out['spec'].get('schedulerName') or 'none'}: replayed as volcano-py's")
        out["spec"]["schedulerName"] = "volcano-py"
    return out


def from_workload(doc: dict[str, Any], where: str, label: str, warnings: list[str]) -> dict[str, Any] | None:
    """A Deployment or StatefulSet as the Job document (with its arrival and duration) the replay runs; None for
    one of 0 replicas (nothing to place), with a warning."""
    meta = doc.get("metadata") or {}
    spec = doc.get("spec") or {}
    replicas = spec.get("replicas", 1)
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 0:
        raise KindError(f"{where}.spec.replicas", f"expected a whole number >= 0, got {replicas!r}")
    annotations = meta.get("annotations") or {}
    try:
        least = int(annotations.get(MIN_MEMBER_ANNOTATION, 1))
    except (TypeError, ValueError):
        raise KindError(f"{where}.metadata.annotations.{MIN_MEMBER_ANNOTATION}",
                        f"expected a whole number, got {annotations.get(MIN_MEMBER_ANNOTATION)!r}") from None
    template = _template(spec.get("template"), where, label, warnings)
    if replicas == 0:
        warnings.append(f"{label}: spec.replicas: 0, nothing to replay")
        return None
    return {
        "apiVersion": JOB_API, "kind": "Job", "arrival": doc.get("arrival", 0), "duration": doc.get("duration", 60),
        "metadata": {"name": meta.get("name"), "namespace": meta.get("namespace", "default"),
                     "labels": {"volcano-py.io/simulated-kind": str(doc.get("kind"))}},
        "spec": {"schedulerName": template["spec"]["schedulerName"],
                 "queue": annotations.get(QUEUE_NAME_ANNOTATION, "default"),
                 "minAvailable": max(1, min(least, replicas)),
                 "tasks": [{"name": "pod", "replicas": replicas, "template": template}]},
    }


def cronjob_item(doc: dict[str, Any], where: str, number: Any) -> Controlled:
    """A CronJob for its controller in the replay (`sim/controllers.py`); `number(value, where)` reads a
    simulator time field as the workload reader does. Its schedule and template are checked here, once."""
    spec = doc.get("spec") or {}
    arrival = number(doc.get("arrival", 0), f"{where}.arrival")
    duration = number(doc.get("duration", 60), f"{where}.duration")
    until = number(doc.get("until", arrival + 86400), f"{where}.until")
    meta = doc.get("metadata") or {}
    cronjob = {"apiVersion": JOB_API, "kind": "CronJob",
               "metadata": {"name": meta.get("name"), "namespace": meta.get("namespace", "default"),
                            **{k: v for k, v in meta.items() if k in ("labels", "annotations")}},
               "spec": spec}
    try:
        schedule_of(cronjob, UTC)
    except (ScheduleError, ValueError) as exc:
        raise KindError(f"{where}.spec.schedule", str(exc)) from None
    template = spec.get("jobTemplate") or {}
    if not isinstance(template.get("spec"), dict):
        raise KindError(f"{where}.spec.jobTemplate.spec", "expected a Volcano Job spec")
    return Controlled(cronjob, arrival, until, duration)


def sample_job(item: Controlled) -> dict[str, Any]:
    """The Job a CronJob's or JobTemplate's spec makes, to check it as a Job is checked."""
    if item.kind == "CronJob":
        return job_for({**item.manifest, "metadata": {**item.manifest["metadata"], "uid": "check"}}, EPOCH, UTC)
    meta = item.manifest["metadata"]
    return {"apiVersion": JOB_API, "kind": "Job", "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
            "spec": item.manifest.get("spec")}


def flow_item(doc: dict[str, Any], where: str, number: Any) -> Controlled:
    """A JobFlow (its `arrival`) or a JobTemplate (the `duration` of the Jobs made from it)."""
    meta = dict(doc.get("metadata") or {})
    if not isinstance(meta.get("name"), str) or not meta["name"]:
        raise KindError(f"{where}.metadata.name", "expected a name")
    meta.setdefault("namespace", "default")
    manifest = {"apiVersion": doc.get("apiVersion", FLOW_API), "kind": doc["kind"], "metadata": meta,
                "spec": doc.get("spec") or {}}
    if not isinstance(manifest["spec"], dict):
        raise KindError(f"{where}.spec", "expected a mapping")
    return Controlled(manifest, number(doc.get("arrival", 0), f"{where}.arrival"),
                      duration=number(doc.get("duration", 60), f"{where}.duration"))
