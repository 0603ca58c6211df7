"""The events a Volcano CronJob's controller tells about it, as data. Layer: jobs (pure).

The reasons are Volcano's (pkg/controllers/cronjob/*.go, its recorder.Eventf calls), so what watches for them
carries over; a message is rendered from the event's fields here and nowhere else, and nothing reads one back.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Reason(StrEnum):
    """The event reasons Volcano's CronJob controller records, by the same names."""

    SAW_COMPLETED = "SawCompletedJob"
    ORPHANED = "OrphanedJob"
    STALE_REFERENCE = "StaleReference"
    SUCCESSFUL_DELETE = "SuccessfulDelete"
    FAILED_DELETE = "FailedDelete"
    FORBID_CONCURRENT = "ForbidConcurrent"
    REPLACE_CONCURRENT = "ReplaceConcurrent"
    SUCCESSFUL_CREATE = "SuccessfulCreate"
    FOREIGN_JOB = "ForeignJob"
    TOO_MANY_MISSED = "TooManyMissedTimes"
    UNSUPPORTED_SCHEDULE = "UnsupportedSchedule"
    INVALID_TIME_ZONE = "InvalidTimeZone"
    UNPARSEABLE_SCHEDULE = "UnParseableCronJobSchedule"
    INVALID_SCHEDULE = "InvalidSchedule"


NORMAL = frozenset({Reason.SAW_COMPLETED, Reason.SUCCESSFUL_DELETE, Reason.SUCCESSFUL_CREATE})  # the rest warn


@dataclass(frozen=True, slots=True)
class CronEvent:
    """An event about the CronJob: what happened (`reason`), to which Job or field, and the detail. The message
    is rendered here and nowhere else; nothing reads it back."""

    reason: Reason
    job: str = ""
    field: str = ""
    detail: str = ""

    @property
    def type(self) -> str:
        return "Normal" if self.reason in NORMAL else "Warning"

    def message(self) -> str:
        return _MESSAGES[self.reason].format(job=self.job, field=self.field, detail=self.detail).strip()


_MESSAGES = {
    Reason.SAW_COMPLETED: "Saw completed job: {job} in active, remove",
    Reason.ORPHANED: "Detected orphaned job forgotten or not managed by controller: {job} ({detail})",
    Reason.STALE_REFERENCE: "Active job {job} {detail}",
    Reason.SUCCESSFUL_DELETE: "Deleted job {job} ({detail})",
    Reason.FAILED_DELETE: "Error deleting job {job}: {detail}",
    Reason.FORBID_CONCURRENT: "Skipping job creation for {detail} because another job is already running",
    Reason.REPLACE_CONCURRENT: "Replacing active job for CronJob ({detail})",
    Reason.SUCCESSFUL_CREATE: "Created job {job}",
    Reason.FOREIGN_JOB: "Job {job} exists but is not owned by this CronJob ({detail})",
    Reason.TOO_MANY_MISSED: "too many missed start times ({detail}). Set or decrease .spec.startingDeadlineSeconds "
    "or check clock skew",
    Reason.UNSUPPORTED_SCHEDULE: "{field}: CRON_TZ or TZ in the schedule {detail} is not officially supported; "
    "spec.timeZone is ignored",
    Reason.INVALID_TIME_ZONE: "{field}: {detail}",
    Reason.UNPARSEABLE_SCHEDULE: "{field}: {detail}",
    Reason.INVALID_SCHEDULE: "{field}: {detail}",
}
