"""Layer `api`: Kubernetes timestamps (RFC 3339, whole seconds, UTC) <-> seconds since the epoch."""

from __future__ import annotations

from datetime import UTC, datetime


def rfc3339(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: object) -> float:
    """Seconds since the epoch; 0.0 for a missing or unreadable timestamp."""
    if not isinstance(value, str) or not value:
        return 0.0
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0
