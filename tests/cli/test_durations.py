"""One duration grammar: Go's time.ParseDuration, checked on the examples of Go's own documentation and tests."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from scheduler.durations import (
    HOUR,
    MICROSECOND,
    MILLISECOND,
    MINUTE,
    NANOSECOND,
    SECOND,
    DurationError,
    format_duration,
    parse_go_duration,
    parse_seconds,
)


@dataclass(frozen=True)
class Good:
    text: str
    nanoseconds: int


# Go's time package: the ParseDuration doc examples and the table of time_test.go.
GOOD = [
    Good("0", 0), Good("5s", 5 * SECOND), Good("30s", 30 * SECOND), Good("1478s", 1478 * SECOND),
    Good("-5s", -5 * SECOND), Good("+5s", 5 * SECOND), Good("-0", 0), Good("+0", 0),
    Good("5.0s", 5 * SECOND), Good("5.6s", 5 * SECOND + 600 * MILLISECOND), Good("5.s", 5 * SECOND),
    Good(".5s", 500 * MILLISECOND), Good("1.004s", 1 * SECOND + 4 * MILLISECOND),
    Good("100.00100s", 100 * SECOND + 1 * MILLISECOND), Good("10ns", 10 * NANOSECOND),
    Good("11us", 11 * MICROSECOND), Good("12µs", 12 * MICROSECOND), Good("12μs", 12 * MICROSECOND),
    Good("13ms", 13 * MILLISECOND), Good("15m", 15 * MINUTE), Good("16h", 16 * HOUR),
    Good("3h30m", 3 * HOUR + 30 * MINUTE), Good("10.5s4m", 4 * MINUTE + 10 * SECOND + 500 * MILLISECOND),
    Good("-2m3.4s", -(2 * MINUTE + 3 * SECOND + 400 * MILLISECOND)),
    Good("1h2m3s4ms5us6ns", HOUR + 2 * MINUTE + 3 * SECOND + 4 * MILLISECOND + 5 * MICROSECOND + 6),
    Good("39h9m14.425s", 39 * HOUR + 9 * MINUTE + 14 * SECOND + 425 * MILLISECOND),
    Good("52763797000ns", 52763797000), Good("0.3333333333333333333h", 20 * MINUTE),
    Good("9007199254740993ns", (1 << 53) + 1), Good("9223372036854775807ns", (1 << 63) - 1),
    Good("9223372036854775.807us", (1 << 63) - 1), Good("9223372036s854ms775us807ns", (1 << 63) - 1),
    Good("-9223372036s854ms775us808ns", -(1 << 63)),
    Good("-9223372036854775808ns", -(1 << 63)), Good("-9223372036854775.808us", -(1 << 63)),
    Good("-2562047h47m16.854775808s", -(1 << 63)), Good("0.100000000000000000000h", 6 * MINUTE),
    Good("0.830103483285477580700h", 49 * MINUTE + 48 * SECOND + 372539827),
    # the brief's and Volcano's users' spellings
    Good("1m30s", 90 * SECOND), Good("2h", 2 * HOUR), Good("500ms", 500 * MILLISECOND),
    Good("1.5h", 90 * MINUTE), Good("300ms", 300 * MILLISECOND), Good("2h45m", 165 * MINUTE),
]

BAD = ["", "3", "-", "s", ".", "-.", ".s", "+.s", "1d", "1w", "1y", "1h 30m", "1.5.5s", "\x85\x85", "hello",
       "9223372036854775808ns", "-9223372036854775809ns", "9223372036854775.808us", "3000000h"]


@pytest.mark.parametrize("case", GOOD, ids=lambda c: c.text)
def test_go_durations_parse_to_goes_nanoseconds(case: Good) -> None:
    assert parse_go_duration(case.text) == case.nanoseconds


@pytest.mark.parametrize("text", BAD)
def test_what_go_rejects_is_rejected(text: str) -> None:
    with pytest.raises(DurationError):
        parse_go_duration(text)


@pytest.mark.parametrize(("value", "seconds"), [
    ("90", 90.0), ("1.5", 1.5), (30, 30.0), (0.25, 0.25), ("1m30s", 90.0), ("500ms", 0.5), (" 2h ", 7200.0),
], ids=str)
def test_plain_numbers_keep_meaning_seconds(value: object, seconds: float) -> None:
    assert parse_seconds(value) == seconds


@pytest.mark.parametrize("value", ["1d", "", "ten", True])
def test_seconds_reject_what_is_neither(value: object) -> None:
    with pytest.raises(DurationError):
        parse_seconds(value)


@pytest.mark.parametrize(("seconds", "text"), [
    (0, "0s"), (0.5, "500ms"), (15, "15s"), (60, "1m0s"), (90, "1m30s"), (3600, "1h0m0s"), (5400.5, "1h30m0.5s"),
])
def test_durations_print_as_go_prints_them(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text
    assert parse_seconds(text) == seconds
