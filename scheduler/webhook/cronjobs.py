"""`/cronjobs/validate`: what Volcano's webhook refuses of a CronJob on CREATE and UPDATE. Layer: webhook.

The rules are those of Volcano's pkg/webhooks/admission/cronjobs/validate/admit_cronjob.go: a schedule that is
there, names no time zone (TZ belongs in `spec.timeZone`) and parses as a standard cron expression; a time zone
that is unset, or a non-empty IANA name other than Local; and a name short enough for the Jobs' 11-character
suffix (`-<minutes since the epoch>`), and a qualified name. Each problem is one message starting with its field.
"""

from __future__ import annotations

import re
from datetime import UTC
from typing import Any
from zoneinfo import ZoneInfo

from scheduler.api.objects import Obj
from scheduler.jobs.cron_schedule import ScheduleError, parse_schedule
from scheduler.webhook.admission import Decision, refuse, response

MAX_NAME = 63 - 11  # a Job's name is `<cronjob>-<minutes>`: 11 characters of suffix within the 63 of a name
_ZONE_PART = re.compile(r"^[A-Za-z.\-_0-9+]{1,14}$")
_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_PREFIX = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
OPERATIONS = ("CREATE", "UPDATE")


def schedule_problems(spec: Obj) -> list[str]:
    schedule = spec.get("schedule")
    if not isinstance(schedule, str) or not schedule:
        return ["spec.schedule: is required, but got empty"]
    if "TZ" in schedule:
        return ["spec.schedule: should not contain TZ or CRON_TZ, TZ should only be set in the timeZone field"]
    try:
        parse_schedule(schedule, UTC, UTC)
    except ScheduleError:
        return [f"spec.schedule: {schedule!r} is not a valid cron expression"]
    return []


def zone_problems(spec: Obj) -> list[str]:
    if "timeZone" not in spec or spec["timeZone"] is None:
        return []
    zone = spec["timeZone"]
    if not isinstance(zone, str) or not zone:
        return ["spec.timeZone: must be unset or a non-empty string, got an empty string"]
    if any(p in (".", "..") or p.startswith("-") or not _ZONE_PART.match(p) for p in zone.split("/")):
        return [f"spec.timeZone: unknown time zone {zone!r}"]
    if zone.lower() == "local":
        return ["spec.timeZone: can't be Local, and must be defined in https://www.iana.org/time-zones"]
    try:
        ZoneInfo(zone)
    except (KeyError, ValueError, OSError):  # ZoneInfoNotFoundError is a KeyError
        return [f"spec.timeZone: invalid time zone {zone!r}"]
    return []


def name_problems(name: Any) -> list[str]:
    text = str(name or "")
    if len(text) > MAX_NAME:
        return [f"metadata.name: must be no more than {MAX_NAME} characters to accommodate the Jobs' name suffix "
                f"(63 in all)"]
    prefix, slash, base = text.rpartition("/")
    if (slash and (not prefix or len(prefix) > 253 or not _PREFIX.match(prefix))) or not base or len(base) > 63 \
            or not _NAME.match(base):
        return [f"metadata.name: {text!r} is not a qualified name (alphanumerics, '-', '_' or '.', starting and "
                f"ending with an alphanumeric)"]
    return []


def admit_cronjob(operation: str, cronjob: Obj) -> Decision:
    if operation not in OPERATIONS:
        return refuse([f"operation: expected 'CREATE' or 'UPDATE', got {operation!r}"])
    spec = cronjob.get("spec") if isinstance(cronjob.get("spec"), dict) else {}
    assert isinstance(spec, dict)
    meta = cronjob.get("metadata") if isinstance(cronjob.get("metadata"), dict) else {}
    assert isinstance(meta, dict)
    return refuse([*schedule_problems(spec), *zone_problems(spec), *name_problems(meta.get("name"))])


def review_cronjob(review: Obj) -> dict[str, Any]:
    request = review.get("request") or {}
    return response(review, admit_cronjob(str(request.get("operation", "")), request.get("object") or {}))
