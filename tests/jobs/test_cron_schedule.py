"""A CronJob's schedule read as Volcano reads it (robfig/cron's ParseStandard), evaluated by cronsim."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import assume, given, settings, strategies as st

from scheduler.jobs.cron_schedule import (
    SCHEDULE_FIELD,
    TIME_ZONE_FIELD,
    Schedule,
    ScheduleError,
    parse_schedule,
    rfc3339_in,
    zone_named,
)

NEW_YORK = ZoneInfo("America/New_York")


def at(*parts: int, zone: ZoneInfo | None = None) -> datetime:
    return datetime(*parts, tzinfo=zone or UTC).astimezone(UTC)  # type: ignore[misc]


def starts(schedule: Schedule, after: datetime, count: int) -> list[datetime]:
    out = []
    for _ in range(count):
        nxt = schedule.next_after(after)
        assert nxt is not None
        out.append(nxt)
        after = nxt
    return out


@dataclass(frozen=True)
class Starts:
    name: str
    schedule: str
    after: datetime
    expected: list[datetime]


STARTS = [
    Starts(
        "every five minutes starts on the next multiple of five",
        "*/5 * * * *",
        at(2025, 3, 11, 10, 2),
        [at(2025, 3, 11, 10, 5), at(2025, 3, 11, 10, 10)],
    ),
    Starts(
        "a start is strictly after the time asked about",
        "0 * * * *",
        at(2025, 3, 11, 10, 0),
        [at(2025, 3, 11, 11, 0), at(2025, 3, 11, 12, 0)],
    ),
    Starts(
        "a restricted day-of-month and day-of-week are OR-ed, */2 counting as restricted (robfig)",
        "0 0 */2 * 1",
        at(2025, 3, 1),
        [at(2025, 3, 3), at(2025, 3, 5), at(2025, 3, 7), at(2025, 3, 9), at(2025, 3, 10)],
    ),
    Starts(
        "a day-of-week with * beside it is AND-ed with the days of the month",
        "0 0 * * 1",
        at(2025, 3, 1),
        [at(2025, 3, 3), at(2025, 3, 10)],
    ),
    Starts("? is *", "0 12 ? * ?", at(2025, 3, 1), [at(2025, 3, 1, 12), at(2025, 3, 2, 12)]),
    Starts(
        "names of months and days, in any case", "0 0 * jan-feb Mon", at(2025, 2, 20), [at(2025, 2, 24), at(2026, 1, 5)]
    ),
    Starts(
        "@hourly is robfig's descriptor", "@hourly", at(2025, 3, 11, 10, 30), [at(2025, 3, 11, 11), at(2025, 3, 11, 12)]
    ),
    Starts("@weekly starts on Sunday midnight", "@weekly", at(2025, 3, 11), [at(2025, 3, 16), at(2025, 3, 23)]),
    Starts(
        "@every counts from the time asked about, in whole seconds",
        "@every 1h30m",
        at(2025, 3, 11, 10, 0, 0) + timedelta(microseconds=500),
        [at(2025, 3, 11, 11, 30), at(2025, 3, 11, 13)],
    ),
    Starts(
        "a TZ= prefix puts the schedule in that zone",
        "TZ=Asia/Tokyo 0 9 * * *",
        at(2025, 3, 11),
        [at(2025, 3, 12, 0), at(2025, 3, 13, 0)],
    ),
    Starts(
        "CRON_TZ= too",
        "CRON_TZ=America/New_York 0 9 * * *",
        at(2025, 3, 11),
        [at(2025, 3, 11, 13), at(2025, 3, 12, 13)],
    ),
    # cronsim follows Debian cron at DST changes (documented in the module and in docs/controllers.md, CronJobs).
    Starts(
        "a start in the hour a DST change skips runs at the jump",
        "TZ=America/New_York 30 2 * * *",
        at(2024, 3, 9, 12),
        [at(2024, 3, 10, 3, zone=NEW_YORK), at(2024, 3, 11, 2, 30, zone=NEW_YORK)],
    ),
]


@pytest.mark.parametrize("case", STARTS, ids=[c.name for c in STARTS])
def test_starts(case: Starts) -> None:
    schedule = parse_schedule(case.schedule, UTC, UTC)
    assert starts(schedule, case.after, len(case.expected)) == case.expected


def test_the_zone_given_applies_without_a_prefix() -> None:
    schedule = parse_schedule("0 9 * * *", zone_named("Asia/Kolkata", UTC), UTC)
    assert schedule.next_after(at(2025, 3, 11)) == at(2025, 3, 11, 3, 30)


@dataclass(frozen=True)
class Bad:
    name: str
    schedule: str


BAD = [
    Bad("an empty schedule", ""),
    Bad("prose", "wrong schedule"),
    Bad("six fields (robfig's standard parser takes five)", "0 * * * * *"),
    Bad("a minute out of range", "61 * * * *"),
    Bad("day-of-week 7 (robfig's range is 0-6)", "0 0 * * 7"),
    Bad("cronsim's L", "0 0 L * *"),
    Bad("cronsim's #", "0 0 * * MON#1"),
    Bad("a zero step", "*/0 * * * *"),
    Bad("a range backwards", "0 5-1 * * *"),
    Bad("a name in the minute field", "MON * * * *"),
    Bad("a day no month has", "0 0 30 2 *"),
    Bad("an unknown descriptor", "@fortnightly"),
    Bad("@every without a Go duration", "@every 3 days"),
    Bad("a TZ= prefix naming no zone", "TZ=Mars/Olympus 0 * * * *"),
    Bad("a TZ= prefix and nothing after it", "TZ=UTC"),
]


@pytest.mark.parametrize("case", BAD, ids=[c.name for c in BAD])
def test_bad_schedules_name_the_schedule_field(case: Bad) -> None:
    with pytest.raises(ScheduleError) as caught:
        parse_schedule(case.schedule, UTC, UTC)
    assert caught.value.field == SCHEDULE_FIELD


@pytest.mark.parametrize("name", ["Mars/Olympus", "../etc/passwd", "America"])
def test_an_unknown_time_zone_names_the_time_zone_field(name: str) -> None:
    with pytest.raises(ScheduleError) as caught:
        zone_named(name, UTC)
    assert caught.value.field == TIME_ZONE_FIELD


def test_go_location_names() -> None:
    local = ZoneInfo("Europe/Paris")
    assert zone_named("", local) is UTC and zone_named("UTC", local) is UTC and zone_named("Local", local) is local


@pytest.mark.parametrize(
    "zone, expected",
    [
        (UTC, "2025-03-11T10:00:00Z"),
        (ZoneInfo("Asia/Kolkata"), "2025-03-11T15:30:00+05:30"),
        (NEW_YORK, "2025-03-11T06:00:00-04:00"),
        (ZoneInfo("Europe/London"), "2025-03-11T10:00:00Z"),  # a zero offset is Z, as Go writes RFC 3339
    ],
)
def test_rfc3339_in_a_zone_is_gos(zone: ZoneInfo, expected: str) -> None:
    assert rfc3339_in(at(2025, 3, 11, 10), zone) == expected


# ---- the most recent start, against walking the starts forward ------------------------------------------------
FIELDS = (
    ["0", "*/15", "5,35", "0-10/5", "*/7"],
    ["*", "9", "*/6", "1-3", "0,12", "2"],
    ["*", "1", "*/2", "15", "1-7", "31", "?"],
    ["*", "*/3", "2", "3,11"],
    ["*", "1", "0,6", "1-5", "?", "*/2"],
)
ZONES = [UTC, NEW_YORK, ZoneInfo("Australia/Lord_Howe"), ZoneInfo("Asia/Kolkata"), ZoneInfo("Europe/Berlin")]


@st.composite
def windows(draw: st.DrawFn) -> tuple[Schedule, datetime, datetime]:
    expression = " ".join(draw(st.sampled_from(choices)) for choices in FIELDS)
    try:
        schedule = parse_schedule(expression, draw(st.sampled_from(ZONES)), UTC)
    except ScheduleError:  # e.g. the 31st of February
        assume(False)
    after = datetime(2024, 1, 1, tzinfo=UTC) + timedelta(minutes=draw(st.integers(0, 2 * 366 * 24 * 60)))
    until = after + timedelta(minutes=draw(st.integers(0, 3 * 24 * 60)), seconds=draw(st.integers(0, 59)))
    return schedule, after, until


@settings(max_examples=60, deadline=None, derandomize=True)
@given(windows())
def test_the_latest_start_in_a_window_is_the_last_one_walking_forward(
    window: tuple[Schedule, datetime, datetime],
) -> None:
    schedule, after, until = window
    walked, t = None, schedule.next_after(after)
    while t is not None and t <= until:
        walked, t = t, schedule.next_after(t)
    assert schedule.latest_in(after, until) == walked


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.integers(1, 10 * 24 * 3600), st.integers(0, 30 * 24 * 3600), st.integers(0, 10 * 24 * 3600))
def test_every_starts_each_period_after_the_last(period: int, offset: int, span: int) -> None:
    schedule = parse_schedule(f"@every {period}s", UTC, UTC)
    after = datetime(2025, 1, 1, tzinfo=UTC) + timedelta(seconds=offset)
    latest = schedule.latest_in(after, after + timedelta(seconds=span))
    if span < period:
        assert latest is None
    else:
        assert latest is not None and (latest - after).total_seconds() == (span // period) * period
