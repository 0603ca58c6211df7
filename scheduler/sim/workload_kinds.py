"""Layer `sim`: workload kinds besides Volcano Jobs, made into the Jobs the replay runs (issue 19).

- **Deployment, StatefulSet** (apps/v1): their pods form one gang, as volcano-py's and Volcano's PodGroup
  controllers make one PodGroup per owner: `minMember` from the workload's `scheduling.volcano.sh/group-min-member`
  annotation (default 1), queue from `scheduling.volcano.sh/queue-name` (default `default`). Replayed as one
  Volcano Job of `replicas` pods of the template, running for the item's `duration` once up.
- **CronJob** (batch.volcano.sh/v1alpha1): its schedule on the simulated clock, whose 0 is `EPOCH` (midnight
  UTC, 2026-01-01): one Job from `jobTemplate` per start in [`arrival`, `until`) (`until` defaults to a day
  after `arrival`), named as the controller names them (`<cronjob>-<minutes since the Unix epoch>`), each running
  for `duration`. `suspend: true` starts none. `concurrencyPolicy: Forbid` skips a start while the previous Job's
  `duration` since its start time has not passed (the replay cannot know when that Job really ends: it may have
  waited for room); `Replace` is replayed as `Allow`, with a warning.

A template that names no scheduler is given `volcano-py`'s (a Deployment's pods would otherwise go to
kube-scheduler, which the simulator does not run), with a warning.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

from scheduler.api.convert import MIN_MEMBER_ANNOTATION, QUEUE_NAME_ANNOTATION
from scheduler.jobs.cron import job_name, schedule_of
from scheduler.jobs.cron_schedule import ScheduleError

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
JOB_API = "batch.volcano.sh/v1alpha1"
WORKLOADS = ("Deployment", "StatefulSet")
MAX_STARTS = 10_000
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


def from_cronjob(doc: dict[str, Any], where: str, label: str, warnings: list[str],
                 number: Any) -> list[dict[str, Any]]:
    """A CronJob as its Jobs' documents, one per start in [arrival, until). `number(value, where)` reads a
    simulator time field as the workload reader does."""
    spec = doc.get("spec") or {}
    arrival = number(doc.get("arrival", 0), f"{where}.arrival")
    duration = number(doc.get("duration", 60), f"{where}.duration")
    until = number(doc.get("until", arrival + 86400), f"{where}.until")
    meta = doc.get("metadata") or {}
    cronjob = {"metadata": {"name": meta.get("name"), "namespace": meta.get("namespace", "default")},
               "spec": spec}
    try:
        schedule = schedule_of(cronjob, UTC)
    except (ScheduleError, ValueError) as exc:
        raise KindError(f"{where}.spec.schedule", str(exc)) from None
    if spec.get("suspend"):
        return []
    policy = spec.get("concurrencyPolicy", "Allow")
    if policy == "Replace":
        warnings.append(f"{label}: spec.concurrencyPolicy: Replace is replayed as Allow")
    template = spec.get("jobTemplate") or {}
    if not isinstance(template.get("spec"), dict):
        raise KindError(f"{where}.spec.jobTemplate.spec", "expected a Volcano Job spec")
    docs: list[dict[str, Any]] = []
    busy_until = -1.0
    start = schedule.next_after(EPOCH + timedelta(seconds=arrival) - timedelta(seconds=1))
    while start is not None and (at := (start - EPOCH).total_seconds()) < until:
        if len(docs) >= MAX_STARTS:
            raise KindError(f"{where}.until", f"more than {MAX_STARTS} starts before it: give an earlier until")
        if policy != "Forbid" or at >= busy_until:
            job = {"apiVersion": JOB_API, "kind": "Job", "arrival": at, "duration": duration,
                   "metadata": {"name": job_name(cronjob, start), "namespace": cronjob["metadata"]["namespace"],
                                "labels": dict((template.get("metadata") or {}).get("labels") or {})},
                   "spec": copy.deepcopy(template["spec"])}
            docs.append(job)
            busy_until = at + duration
        start = schedule.next_after(start)
    return docs
