"""Durations as Volcano and Kubernetes users type them: Go's `time.ParseDuration` grammar, one parser for all.

A duration is an optional sign and a sequence of decimal numbers, each with an optional fraction and a unit:
`300ms`, `-1.5h`, `2h45m`, `1m30s`. Units are `ns`, `us` (`µs`, `μs`), `ms`, `s`, `m`, `h`; a number without a
unit is an error, except `0`. The value must fit Go's int64 nanoseconds. This is what Volcano's flags
(`--schedule-period`, the leader-election durations), conf arguments (`sla-waiting-time`) and annotations read.

volcano-py also reads a plain number as seconds where it always did (`--partial-gang-timeout 90`):
`parse_seconds` is that wider grammar; `parse_go_duration` is Go's alone.

Written here rather than taken from PyPI: `durationpy` (which the kubernetes client already installs) also
accepts units Go rejects (`d`, `w`, `mm`, `y`) and sums in floats, so a value Volcano refuses would load here.
"""

from __future__ import annotations

import re

NANOSECOND = 1
MICROSECOND = 1000 * NANOSECOND
MILLISECOND = 1000 * MICROSECOND
SECOND = 1000 * MILLISECOND
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE

UNITS = {
    "ns": NANOSECOND,
    "us": MICROSECOND,
    "µs": MICROSECOND,  # U+00B5 micro sign
    "μs": MICROSECOND,  # U+03BC Greek small letter mu
    "ms": MILLISECOND,
    "s": SECOND,
    "m": MINUTE,
    "h": HOUR,
}

_LIMIT = 1 << 63  # Go's time.Duration is an int64 of nanoseconds: -2**63 .. 2**63 - 1
_PART = re.compile(r"(\d*)(?:\.(\d*))?([^\d.]*)")
_PLAIN_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)")


class DurationError(ValueError):
    """A value that is not a duration; the message quotes it as Go does (`time: invalid duration "x"`)."""


def parse_go_duration(text: str) -> int:
    """Nanoseconds in `text`, by Go's `time.ParseDuration` rules, its rounding of long fractions included."""
    negative, rest = text[:1] == "-", text[1:] if text[:1] in ("+", "-") else text
    if rest == "0":
        return 0
    if not rest:
        raise DurationError(f"time: invalid duration {text!r}")
    total, position = 0, 0
    while position < len(rest):
        match = _PART.match(rest, position)
        assert match is not None  # every group may be empty, so the pattern always matches
        whole, fraction, unit = match.group(1), match.group(2) or "", match.group(3)
        if not whole and not fraction:
            raise DurationError(f"time: invalid duration {text!r}")
        if not unit:
            raise DurationError(f"time: missing unit in duration {text!r}")
        if unit not in UNITS:
            raise DurationError(f"time: unknown unit {unit!r} in duration {text!r}")
        scale = UNITS[unit]
        value = int(whole or "0")
        if value > _LIMIT // scale:
            raise DurationError(f"time: invalid duration {text!r}")
        total += value * scale + _fraction_ns(fraction, scale)
        if total > _LIMIT:
            raise DurationError(f"time: invalid duration {text!r}")
        position = match.end()
    if negative:
        return -total
    if total > _LIMIT - 1:
        raise DurationError(f"time: invalid duration {text!r}")
    return total


def _fraction_ns(digits: str, unit: int) -> int:
    """Go's leadingFraction: digits past int64's precision are dropped, the rest scaled in float64."""
    value, scale = 0, 1.0
    for digit in digits:
        if value > (_LIMIT - 1) // 10 or value * 10 + int(digit) > _LIMIT:
            break
        value, scale = value * 10 + int(digit), scale * 10
    return int(float(value) * (float(unit) / scale))


def parse_seconds(value: object) -> float:
    """Seconds in a Go duration, or in a plain number of seconds (an int, a float, or text like `90`)."""
    if isinstance(value, bool):
        raise DurationError(f"time: invalid duration {value!r}")
    if isinstance(value, int | float):
        return float(value)
    text = str(value).strip()
    if _PLAIN_NUMBER.fullmatch(text):
        return float(text)
    return parse_go_duration(text) / SECOND


def format_duration(seconds: float) -> str:
    """`90.0` -> `1m30s`, as Go's `Duration.String` spells whole milliseconds (`0s`, `500ms`, `1h0m0s`)."""
    millis = round(seconds * 1000)
    sign, millis = ("-", -millis) if millis < 0 else ("", millis)
    if 0 < millis < 1000:
        return f"{sign}{millis}ms"
    hours, millis = divmod(millis, 3_600_000)
    minutes, millis = divmod(millis, 60_000)
    text = f"{millis / 1000:g}s"
    if hours or minutes:
        text = f"{minutes}m{text}"
    if hours:
        text = f"{hours}h{text}"
    return sign + text


class Seconds:
    """The argparse `type` of every duration option of the command line: `parse_seconds` (a Go duration, or a
    plain number of seconds as before) with a lower bound. One class, so a test can find every duration option
    by its type and know it reads the one grammar."""

    def __init__(self, minimum: float = 0.0, *, inclusive: bool = True) -> None:
        self.minimum, self.inclusive = minimum, inclusive
        self.__name__ = "duration"  # argparse names the type in its errors: "invalid duration value: 'x'"

    def __call__(self, text: str) -> float:
        import argparse  # only the command line needs it

        try:
            value = parse_seconds(text)
        except DurationError as exc:
            raise argparse.ArgumentTypeError(f"{exc} (expected e.g. 30s, 1m30s or a number of seconds)") from None
        if value != value or value in (float("inf"), float("-inf")):
            raise argparse.ArgumentTypeError(f"expected a finite duration, got {text!r}")
        if not (value >= self.minimum if self.inclusive else value > self.minimum):
            bound = ">=" if self.inclusive else ">"
            raise argparse.ArgumentTypeError(f"expected a duration {bound} {format_duration(self.minimum)}, "
                                             f"got {text!r}")
        return value
