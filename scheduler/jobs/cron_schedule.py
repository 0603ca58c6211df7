"""A CronJob's `spec.schedule` and `spec.timeZone` as Volcano reads them. Layer: jobs (pure; no Kubernetes client).

Volcano parses the schedule with robfig/cron's `ParseStandard` (pkg/controllers/cronjob/cronjob_controller_util.go,
validateTZandSchedule): five fields, or a descriptor (`@hourly`, `@daily`, `@every 90m`, ...), optionally after a
`TZ=<zone> ` or `CRON_TZ=<zone> ` prefix. Evaluating a cron expression is cronsim's (a maintained, typed,
dependency-free evaluator that works with zoneinfo); this module only holds robfig's grammar to it, so an
expression Volcano refuses is refused here too, and robfig's rules where the two differ:

- `?` means `*`; the day-of-week is 0-6 (no 7); no `L`, `W` or `#` (cronsim's extensions);
- day-of-month and day-of-week are AND-ed when either field is unrestricted (`*`, `?` or `*/1` in one of its
  comma terms) and OR-ed otherwise, so `0 0 */2 * 1` runs on odd days *or* Mondays (cronsim, after Debian
  cron, treats any field starting with `*` as unrestricted);
- `@every D` runs every D (Go's duration syntax, whole seconds, at least 1 s) counted from the time it is asked
  about, as robfig's ConstantDelaySchedule does.

Daylight saving time follows cronsim (Debian cron): a start in the hour that a change skips runs when the clock
jumps, and one in a repeated hour runs once. robfig skips the first and runs the second twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo

from cronsim import CronSim, CronSimError

from scheduler.durations import SECOND, DurationError, parse_go_duration

SCHEDULE_FIELD = "spec.schedule"
TIME_ZONE_FIELD = "spec.timeZone"
TZ_PREFIXES = ("TZ=", "CRON_TZ=")

# robfig's descriptors (parser.go, parseDescriptor), as the five fields they stand for.
DESCRIPTORS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_EVERY = "@every "
_NAMES = {
    3: ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"),
    4: ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"),
}  # by field index: month, day-of-week
_FIELDS = ("minute", "hour", "day-of-month", "month", "day-of-week")


class ScheduleError(ValueError):
    """A schedule or time zone that cannot be used; `field` names the CronJob field, `detail` says why."""

    def __init__(self, field: str, detail: str):
        super().__init__(f"{field}: {detail}")
        self.field = field
        self.detail = detail


def zone_named(name: str, local: tzinfo) -> tzinfo:
    """The zone Go's `time.LoadLocation(name)` returns: "" and "UTC" are UTC, "Local" is the process's zone."""
    if name in ("", "UTC"):
        return UTC
    if name == "Local":
        return local
    try:
        return ZoneInfo(name)
    except (KeyError, ValueError, OSError):  # not in the database (ZoneInfoNotFoundError), a malformed key, a folder
        raise ScheduleError(TIME_ZONE_FIELD, f"unknown time zone {name!r}") from None


@dataclass(frozen=True, slots=True)
class Schedule:
    """When a CronJob runs: a robfig-checked five-field expression in a zone, or a fixed period (`@every`)."""

    expression: str  # five fields, as cronsim reads them ("" for @every)
    zone: tzinfo
    every: int = 0  # seconds between runs, for `@every`
    days_and: bool = True  # robfig's rule: day-of-month AND day-of-week (else OR)

    def next_after(self, t: datetime) -> datetime | None:
        """The first start strictly after `t` (whole seconds), None if there is none within cronsim's 50 years."""
        if self.every:
            return _whole_second(t) + timedelta(seconds=self.every)
        try:
            return next(self._sim(t.astimezone(self.zone))).astimezone(UTC)
        except StopIteration:
            return None

    def latest_in(self, after: datetime, until: datetime) -> datetime | None:
        """The last start in (after, until], None if there is none."""
        if self.every:  # the starts are after + k * every (robfig's Next from `after`, then from each start)
            first = _whole_second(after) + timedelta(seconds=self.every)
            if first > until:
                return None
            return first + timedelta(seconds=(until - first) // timedelta(seconds=self.every) * self.every)
        try:
            latest = next(self._sim((_whole_second(until) + timedelta(seconds=1)).astimezone(self.zone), True))
        except StopIteration:
            return None
        latest = latest.astimezone(UTC)
        return latest if latest > after else None

    def _sim(self, start: datetime, reverse: bool = False) -> CronSim:
        sim = CronSim(self.expression, start, reverse=reverse)
        sim.day_and = self.days_and  # robfig's rule instead of Debian's (see the module docstring)
        return sim


def parse_schedule(text: str, zone: tzinfo, local: tzinfo) -> Schedule:
    """`spec.schedule` by robfig's ParseStandard; `zone` applies unless the text has a TZ=/CRON_TZ= prefix."""
    spec = text
    if spec.startswith(TZ_PREFIXES):
        name, space, rest = spec.partition(" ")
        if not space:
            raise ScheduleError(SCHEDULE_FIELD, f"{text!r} has a time zone and no schedule after it")
        try:
            zone = zone_named(name.split("=", 1)[1], local)
        except ScheduleError as exc:
            raise ScheduleError(SCHEDULE_FIELD, f"{text!r} names {exc.detail}") from None
        spec = rest.strip()
    if not spec:
        raise ScheduleError(SCHEDULE_FIELD, "empty schedule")
    if spec.startswith(_EVERY):
        return Schedule("", zone, every=_every_seconds(text, spec[len(_EVERY) :]))
    if spec.startswith("@"):
        if spec not in DESCRIPTORS:
            raise ScheduleError(SCHEDULE_FIELD, f"{text!r}: unrecognized descriptor {spec!r}")
        spec = DESCRIPTORS[spec]
    fields = spec.split()
    if len(fields) != 5:
        raise ScheduleError(SCHEDULE_FIELD, f"{text!r}: expected exactly 5 fields, found {len(fields)}")
    fields = [_robfig_field(text, i, f) for i, f in enumerate(fields)]
    expression = " ".join(fields)
    try:
        CronSim(expression, datetime(2000, 1, 1, tzinfo=UTC))
    except CronSimError as exc:
        raise ScheduleError(SCHEDULE_FIELD, f"{text!r}: {str(exc).lower()}") from None
    return Schedule(expression, zone, days_and=_unrestricted(fields[2]) or _unrestricted(fields[4]))


def _every_seconds(text: str, duration: str) -> int:
    try:
        nanoseconds = parse_go_duration(duration)
    except DurationError:
        raise ScheduleError(SCHEDULE_FIELD, f"{text!r}: {duration!r} is not a duration") from None
    return max(1, nanoseconds // SECOND)  # robfig's Every: under a second is a second, the rest truncated


def _robfig_field(text: str, index: int, field: str) -> str:
    """One field checked against robfig's grammar (terms `*`, `?`, `N`, `N-M`, each with an optional `/step`;
    names in the month and day-of-week fields), with `?` as `*` for cronsim."""
    terms = []
    for term in field.upper().split(","):
        span, slash, step = term.partition("/")
        if slash and not step.isdigit():
            raise ScheduleError(SCHEDULE_FIELD, f"{text!r}: bad {_FIELDS[index]} step in {term!r}")
        if span == "?":
            span = "*"
        if span != "*":
            for value in span.split("-", 1):
                if not (value.isdigit() or value in _NAMES.get(index, ())):
                    raise ScheduleError(SCHEDULE_FIELD, f"{text!r}: bad {_FIELDS[index]} {value!r}")
                if index == 4 and value.isdigit() and int(value) > 6:
                    raise ScheduleError(SCHEDULE_FIELD, f"{text!r}: day-of-week {value} is not in 0-6")
        terms.append(span + slash + step)
    return ",".join(terms)


def _unrestricted(field: str) -> bool:
    """robfig's star bit: a term that is `*` (or `?`, already `*` here) with no step other than 1."""
    return any(
        span == "*" and (not step or int(step) == 1)
        for span, _, step in (term.partition("/") for term in field.split(","))
    )


def _whole_second(t: datetime) -> datetime:
    return t.replace(microsecond=0)


def rfc3339_in(t: datetime, zone: tzinfo) -> str:
    """`t` in `zone` as Go's time.RFC3339 writes it: whole seconds, `Z` for a zero offset, else `+hh:mm`."""
    local = t.astimezone(zone)
    offset = local.utcoffset() or timedelta(0)
    if not offset:
        return local.strftime("%Y-%m-%dT%H:%M:%SZ")
    sign, minutes = ("-", -offset) if offset < timedelta(0) else ("+", offset)
    hours, rest = divmod(int(minutes.total_seconds()) // 60, 60)
    return local.strftime("%Y-%m-%dT%H:%M:%S") + f"{sign}{hours:02d}:{rest:02d}"
