"""Layer `api`: Kubernetes timestamps (RFC 3339, whole seconds, UTC) <-> seconds since the epoch or datetimes.

The one reader of timestamps for the scheduler, the controllers and the simulator: anything that is not an RFC
3339 string reads as missing (None, or 0.0 seconds), never as an exception; a time without an offset is UTC.
"""

from __future__ import annotations

from datetime import UTC, datetime

MAX_TIMESTAMP = 64  # characters: RFC 3339 with nanoseconds and an offset is 35


def rfc3339(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_datetime(value: object) -> datetime | None:
    """An aware UTC datetime; None for a missing or unreadable timestamp."""
    if not isinstance(value, str) or not value or len(value) > MAX_TIMESTAMP:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
        return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
    except (ValueError, OverflowError):  # year 1 with a positive offset, year 9999 with a negative one
        return None


def parse_time(value: object) -> float:
    """Seconds since the epoch; 0.0 for a missing or unreadable timestamp."""
    parsed = parse_datetime(value)
    try:
        return 0.0 if parsed is None else parsed.timestamp()
    except (OverflowError, ValueError):  # a platform whose time_t cannot hold it
        return 0.0


def format_datetime(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
