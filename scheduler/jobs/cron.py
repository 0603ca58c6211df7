"""What a Volcano CronJob (`batch.volcano.sh/v1alpha1` CronJob) should do now. Layer: jobs (pure).

`decide(cronjob, jobs, now, local)` reads the CronJob, the Volcano Jobs of its namespace (those it owns are the
ones whose controller reference names it) and the time, and returns a `CronDecision`: the finished Jobs to delete
for the history limits or the active ones `Replace` removes, the Job to create for the start that is due, the
status to write, the events to tell and when to look again. `admit` folds the outcome of that create into the
status. The steps are those of Volcano's syncCronJob (pkg/controllers/cronjob/cronjob_controller.go); the rules
are cited where they are applied. The controller (`scheduler.controllers.cronjob`) only carries them out.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from enum import StrEnum
from typing import Any

from scheduler.api.timestamps import format_datetime, parse_datetime
from scheduler.jobs import keys
from scheduler.jobs.cron_events import CronEvent, Reason
from scheduler.jobs.cron_schedule import (
    TIME_ZONE_FIELD,
    Schedule,
    ScheduleError,
    parse_schedule,
    rfc3339_in,
    zone_named,
)

CRONJOB_KIND = "CronJob"
SCHEDULED_TIMESTAMP = "volcano.sh/cronjob-scheduled-timestamp"  # Volcano's CronJobScheduledTimestampAnnotation
# A Job is finished in one of these phases, successful in Completed and failed in Failed (isJobFinished and
# processFinishedJobs, cronjob_controller_handler.go): a Terminated Job leaves `active` but counts in neither
# history, and an Aborted one (it can be resumed) stays active.
FINISHED = frozenset({"Completed", "Failed", "Terminated"})
SUCCEEDED, FAILED = "Completed", "Failed"
# The CRD's defaults (`+kubebuilder:default` on the CronJobSpec fields), applied here too for an object written
# without them.
DEFAULT_SUCCESSFUL_HISTORY, DEFAULT_FAILED_HISTORY = 3, 1
TOO_MANY_MISSED = 100  # more missed starts than this is a clock problem, said once (mostRecentScheduleTime)
NEXT_DELTA = 0.1  # look again this long after a start is due (nextScheduleDelta: clock skew between hosts)


class Policy(StrEnum):
    ALLOW = "Allow"
    FORBID = "Forbid"
    REPLACE = "Replace"


class DeleteWhy(StrEnum):
    SUCCESSFUL_HISTORY = "successfulJobsHistoryLimit"
    FAILED_HISTORY = "failedJobsHistoryLimit"
    REPLACED = "concurrencyPolicy Replace"


@dataclass(frozen=True, slots=True)
class Deletion:
    name: str
    uid: str
    why: DeleteWhy


@dataclass(frozen=True, slots=True)
class CronDecision:
    status: dict[str, Any]  # the status to write once the deletions are done (unchanged: nothing to write)
    deletions: tuple[Deletion, ...] = ()
    create: dict[str, Any] | None = None  # the Job for `scheduled`
    scheduled: datetime | None = None
    events: tuple[CronEvent, ...] = ()
    look_again: datetime | None = None  # None: only a change of the CronJob or of its Jobs wakes it


# ---- reading the objects -------------------------------------------------------------------------------------
parse_timestamp = parse_datetime  # one reader of timestamps (`api/timestamps.py`)
timestamp = format_datetime


def job_phase(job: Mapping[str, Any]) -> str:
    return str(((job.get("status") or {}).get("state") or {}).get("phase") or "")


def finished(job: Mapping[str, Any]) -> bool:
    return job_phase(job) in FINISHED


def controlled_by(job: Mapping[str, Any], cronjob: Mapping[str, Any]) -> bool:
    """The Job's controller reference names this CronJob (getJobsByCronJob: kind, name and uid)."""
    meta = cronjob.get("metadata") or {}
    return any(
        ref.get("controller")
        and ref.get("kind") == CRONJOB_KIND
        and ref.get("name") == meta.get("name")
        and ref.get("uid") == meta.get("uid")
        for ref in (job.get("metadata") or {}).get("ownerReferences") or ()
    )


def cronjob_owner(job: Mapping[str, Any]) -> str | None:
    """The name of the Volcano CronJob that controls `job`, if any."""
    for ref in (job.get("metadata") or {}).get("ownerReferences") or ():
        if (
            ref.get("controller")
            and ref.get("kind") == CRONJOB_KIND
            and str(ref.get("apiVersion", "")).startswith("batch.volcano.sh/")
        ):
            return str(ref.get("name"))
    return None


def job_name(cronjob: Mapping[str, Any], scheduled: datetime) -> str:
    """`<cronjob>-<scheduled time in minutes since the epoch>` (getJobName): one name per start, so a second
    create for the same start (after a restart, or by a second replica) is refused by the apiserver."""
    return f"{cronjob['metadata']['name']}-{int(scheduled.timestamp()) // 60}"


def _reference(job: Mapping[str, Any]) -> dict[str, Any]:
    meta = job.get("metadata") or {}
    ref = {
        "apiVersion": keys.JOB_API_VERSION,
        "kind": keys.JOB_KIND,
        "name": meta.get("name"),
        "namespace": meta.get("namespace"),
        "uid": meta.get("uid"),
        "resourceVersion": meta.get("resourceVersion"),
    }
    return {k: v for k, v in ref.items() if v}


# ---- the decision --------------------------------------------------------------------------------------------
def decide(cronjob: Mapping[str, Any], jobs: Iterable[Mapping[str, Any]], now: datetime, local: tzinfo) -> CronDecision:
    """What to do at `now`; `local` is the zone of a CronJob that names none (the controller's, as in Volcano)."""
    spec = cronjob.get("spec") or {}
    status = _status(cronjob)
    events: list[CronEvent] = []
    in_namespace = list(jobs)
    owned = [j for j in in_namespace if controlled_by(j, cronjob)]
    # 1. Finished Jobs leave `active`; the oldest beyond the history limits go (processFinishedJobs).
    deletions = _finish(status, owned, spec, events)
    # 2. An unfinished Job of ours that `active` lacks is told about; a reference to a Job that is gone, or is
    #    another Job now, is dropped (processCtlJobAndActiveJob).
    _reconcile_active(status, owned, in_namespace, events)
    if spec.get("suspend"):
        return CronDecision(status, tuple(deletions), events=tuple(events))
    # 3. The schedule and the zone, each error reported on its field (validateTZandSchedule).
    try:
        schedule = schedule_of(cronjob, local, events)
    except ScheduleError as exc:
        reason = Reason.INVALID_TIME_ZONE if exc.field == TIME_ZONE_FIELD else Reason.UNPARSEABLE_SCHEDULE
        events.append(CronEvent(reason, field=exc.field, detail=exc.detail))
        return CronDecision(status, tuple(deletions), events=tuple(events))
    # 4. The start that is due now, if any (nextScheduleTime).
    try:
        due = due_start(cronjob, status, schedule, now, events)
    except ScheduleError as exc:
        events.append(CronEvent(Reason.INVALID_SCHEDULE, field=exc.field, detail=exc.detail))
        return CronDecision(status, tuple(deletions), events=tuple(events))
    look_again = next_look(cronjob, status, schedule, now)
    if due is None or _already_started(cronjob, status, due):
        return CronDecision(status, tuple(deletions), events=tuple(events), look_again=look_again)
    # 5. concurrencyPolicy (processConcurrencyPolicy): Forbid waits while a Job is active, Replace deletes them.
    policy = spec.get("concurrencyPolicy")  # any value but these two allows concurrency, as in Volcano
    if status["active"] and policy == Policy.FORBID:
        events.append(CronEvent(Reason.FORBID_CONCURRENT, detail=timestamp(due)))
        return CronDecision(status, tuple(deletions), events=tuple(events), look_again=look_again)
    if status["active"] and policy == Policy.REPLACE:
        replaced = ", ".join(str(r.get("name")) for r in status["active"])
        events.append(CronEvent(Reason.REPLACE_CONCURRENT, detail=replaced))
        deletions += [Deletion(str(r.get("name")), str(r.get("uid")), DeleteWhy.REPLACED) for r in status["active"]]
        status["active"] = []
    # 6. The Job for the due start (createJob).
    return CronDecision(status, tuple(deletions), job_for(cronjob, due, local), due, tuple(events), look_again)


def admit(
    status: Mapping[str, Any],
    cronjob: Mapping[str, Any],
    job: Mapping[str, Any] | None,
    scheduled: datetime,
    created: bool,
) -> tuple[dict[str, Any], CronEvent | None]:
    """The status after creating the Job for `scheduled`: `job` is the Job made (`created`), or the Job of that
    name that was there already (None: none could be read). A Job of that name that another owner holds is told
    about; one of ours that finished is left (createJob's AlreadyExists branch); else it is active."""
    out = _copy_status(status)
    if job is None:
        return out, None
    name = str(job["metadata"]["name"])
    if not created and not controlled_by(job, cronjob):
        owner = next(
            (r.get("name") for r in job["metadata"].get("ownerReferences") or () if r.get("controller")), "none"
        )
        return out, CronEvent(Reason.FOREIGN_JOB, job=name, detail=f"current owner: {owner}")
    if not created and finished(job):
        return out, None
    if not any(r.get("uid") == job["metadata"].get("uid") for r in out["active"]):
        out["active"].append(_reference(job))
        out["lastScheduleTime"] = timestamp(scheduled)
    return out, CronEvent(Reason.SUCCESSFUL_CREATE, job=name) if created else None


def schedule_of(cronjob: Mapping[str, Any], local: tzinfo, events: list[CronEvent] | None = None) -> Schedule:
    """The parsed schedule. `spec.timeZone` must name a zone even when a TZ= prefix overrides it, and a prefix
    wins over it with a warning (validateTZandSchedule and formatSchedule, cronjob_controller_util.go)."""
    spec = cronjob.get("spec") or {}
    text = str(spec.get("schedule") or "")
    zone_name = spec.get("timeZone")
    zone = local if zone_name is None else zone_named(str(zone_name), local)
    if "TZ" in text and events is not None:
        events.append(CronEvent(Reason.UNSUPPORTED_SCHEDULE, field="spec.schedule", detail=repr(text)))
    return parse_schedule(text, zone, local)


def due_start(
    cronjob: Mapping[str, Any], status: Mapping[str, Any], schedule: Schedule, now: datetime, events: list[CronEvent]
) -> datetime | None:
    """The most recent start in (last start or creation, now], not earlier than startingDeadlineSeconds before
    now; None if there is none. More than 100 missed starts are said once (mostRecentScheduleTime)."""
    earliest = _earliest(cronjob, status, now)
    deadline = (cronjob.get("spec") or {}).get("startingDeadlineSeconds")
    if deadline is not None:
        earliest = max(earliest, now - timedelta(seconds=int(deadline)))
    first = schedule.next_after(earliest)
    if first is None:
        raise ScheduleError("spec.schedule", "the schedule has no start in the next 50 years")
    if now < first:
        return None
    second = schedule.next_after(first)
    if second is not None and now >= second:
        # Volcano's count is the time since the first missed start over the first interval, plus one.
        interval = round((second - first).total_seconds())
        if interval < 1:
            raise ScheduleError("spec.schedule", "two starts are less than a second apart")
        missed = int((now - first).total_seconds()) // interval + 1
        if missed > TOO_MANY_MISSED:
            events.append(CronEvent(Reason.TOO_MANY_MISSED, detail=f"{missed} since {timestamp(first)}"))
    return schedule.latest_in(earliest, now)


def next_look(
    cronjob: Mapping[str, Any], status: Mapping[str, Any], schedule: Schedule, now: datetime
) -> datetime | None:
    """When the next start is due (nextScheduleTimeDuration): the start after the latest one up to now (or
    after the last start or the creation, when none has come since), plus Volcano's 100 ms."""
    earliest = _earliest(cronjob, status, now)
    upcoming = schedule.next_after(schedule.latest_in(earliest, now) or earliest)
    return upcoming + timedelta(seconds=NEXT_DELTA) if upcoming is not None else None


def job_for(cronjob: Mapping[str, Any], scheduled: datetime, local: tzinfo) -> dict[str, Any]:
    """The Job for one start (getJobFromTemplate): the template's spec, labels and annotations, the start as an
    RFC 3339 annotation in spec.timeZone (UTC when none is named), and the CronJob as controller."""
    meta = cronjob["metadata"]
    template = (cronjob.get("spec") or {}).get("jobTemplate") or {}
    template_meta = template.get("metadata") or {}
    zone_name = (cronjob.get("spec") or {}).get("timeZone")
    annotations = {
        **(template_meta.get("annotations") or {}),
        SCHEDULED_TIMESTAMP: rfc3339_in(scheduled, zone_named(str(zone_name or ""), local)),
    }
    job_meta: dict[str, Any] = {
        "name": job_name(cronjob, scheduled),
        "namespace": meta.get("namespace"),
        "annotations": annotations,
        "ownerReferences": [
            {
                "apiVersion": keys.JOB_API_VERSION,
                "kind": CRONJOB_KIND,
                "name": meta["name"],
                "uid": meta.get("uid"),
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }
    if template_meta.get("labels"):
        job_meta["labels"] = dict(template_meta["labels"])
    return {
        "apiVersion": keys.JOB_API_VERSION,
        "kind": keys.JOB_KIND,
        "metadata": job_meta,
        "spec": copy.deepcopy(template.get("spec") or {}),
    }


# ---- the steps -----------------------------------------------------------------------------------------------
def _status(cronjob: Mapping[str, Any]) -> dict[str, Any]:
    return _copy_status(cronjob.get("status") or {})


def _copy_status(status: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(dict(status))
    out["active"] = list(out.get("active") or [])
    return out


def written(status: Mapping[str, Any]) -> dict[str, Any]:
    """The status as the apiserver keeps it: an empty `active` is left out (Go's omitempty)."""
    return {k: v for k, v in status.items() if v is not None and not (k == "active" and not v)}


def _finish(
    status: dict[str, Any], owned: Sequence[Mapping[str, Any]], spec: Mapping[str, Any], events: list[CronEvent]
) -> list[Deletion]:
    succeeded, failed = [], []
    for job in owned:
        if not finished(job):
            continue
        uid, name = job["metadata"].get("uid"), str(job["metadata"].get("name"))
        if any(r.get("uid") == uid for r in status["active"]):
            status["active"] = [r for r in status["active"] if r.get("uid") != uid]
            events.append(CronEvent(Reason.SAW_COMPLETED, job=name))
        if job_phase(job) == SUCCEEDED:
            succeeded.append(job)
            ended = parse_timestamp(((job.get("status") or {}).get("state") or {}).get("lastTransitionTime"))
            last = parse_timestamp(status.get("lastSuccessfulTime"))
            if ended is not None and (last is None or ended > last):
                status["lastSuccessfulTime"] = timestamp(ended)
        elif job_phase(job) == FAILED:
            failed.append(job)
    limits = (
        (succeeded, spec.get("successfulJobsHistoryLimit"), DEFAULT_SUCCESSFUL_HISTORY, DeleteWhy.SUCCESSFUL_HISTORY),
        (failed, spec.get("failedJobsHistoryLimit"), DEFAULT_FAILED_HISTORY, DeleteWhy.FAILED_HISTORY),
    )
    deletions = []
    for kept, limit, default, why in limits:
        excess = len(kept) - int(default if limit is None else limit)
        for job in sorted(kept, key=_age_order)[: max(0, excess)]:
            deletions.append(Deletion(str(job["metadata"]["name"]), str(job["metadata"].get("uid")), why))
    return deletions


def _age_order(job: Mapping[str, Any]) -> tuple[bool, datetime, str]:
    """Oldest first, a Job without a creation time last, then by name (byJobCreationTimestamp)."""
    created = parse_timestamp((job.get("metadata") or {}).get("creationTimestamp"))
    return created is None, created or datetime.max.replace(tzinfo=UTC), str(job["metadata"].get("name"))


def _reconcile_active(
    status: dict[str, Any],
    owned: Sequence[Mapping[str, Any]],
    in_namespace: Sequence[Mapping[str, Any]],
    events: list[CronEvent],
) -> None:
    active_uids = {r.get("uid") for r in status["active"]}
    owned_uids = {j["metadata"].get("uid") for j in owned}
    for job in owned:
        if job["metadata"].get("uid") not in active_uids and not finished(job):
            events.append(
                CronEvent(
                    Reason.ORPHANED, job=str(job["metadata"].get("name")), detail=f"UID: {job['metadata'].get('uid')}"
                )
            )
    by_name = {str(j["metadata"].get("name")): j for j in in_namespace}
    kept = []
    for ref in status["active"]:
        if ref.get("uid") in owned_uids:
            kept.append(ref)
            continue
        same_name = by_name.get(str(ref.get("name")))
        if same_name is None:
            events.append(
                CronEvent(
                    Reason.STALE_REFERENCE, job=str(ref.get("name")), detail=f"no longer exists (UID: {ref.get('uid')})"
                )
            )
        elif same_name["metadata"].get("uid") != ref.get("uid"):
            events.append(
                CronEvent(
                    Reason.STALE_REFERENCE,
                    job=str(ref.get("name")),
                    detail=f"points to a different UID (expected: {ref.get('uid')}, actual: "
                    f"{same_name['metadata'].get('uid')})",
                )
            )
        else:
            kept.append(ref)  # there, but not ours: Volcano keeps the reference
    status["active"] = kept


def _earliest(cronjob: Mapping[str, Any], status: Mapping[str, Any], now: datetime) -> datetime:
    """The last start, else the CronJob's creation (now, for an object that has no creation time)."""
    return (
        parse_timestamp(status.get("lastScheduleTime"))
        or parse_timestamp((cronjob.get("metadata") or {}).get("creationTimestamp"))
        or now
    )


def _already_started(cronjob: Mapping[str, Any], status: Mapping[str, Any], due: datetime) -> bool:
    """A Job of the start's name is active, or the last start is this one (syncCronJob)."""
    name = job_name(cronjob, due)
    return (
        any(r.get("name") == name for r in status["active"]) or parse_timestamp(status.get("lastScheduleTime")) == due
    )
