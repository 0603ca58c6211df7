"""Layer `api`: a queue's minimum runtime, from its annotations (the minruntime plugin, docs/preemption.md).

A Queue may say how long its running jobs are kept from eviction once started, as KAI-Scheduler's queues do
(its min-runtime design: `preempt-min-runtime` for evictions inside the queue, `reclaim-min-runtime` for those
by another queue):

- `volcano-py.io/min-runtime`: for every evicting action (preempt, reclaim, gangpreempt, gangreclaim,
  consolidate);
- `volcano-py.io/preempt-min-runtime`: for the actions that evict inside the victim's queue (preempt,
  gangpreempt), instead of `min-runtime`;
- `volcano-py.io/reclaim-min-runtime`: for the actions that evict for another queue (reclaim, gangreclaim),
  instead of `min-runtime`.

Each is a Go duration (`90s`, `1h30m`, `0s`) from 0 to 168h, read once at the edge (`api/fields.py`); a value
that does not parse or is out of bounds gives a `FieldInvalid` reason and one log line, and reads as not set.
`0s` is set: it says "no minimum" for this queue, over the plugin's own arguments.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from scheduler.api.field_parsers import BadValueError, Parser
from scheduler.durations import SECOND, DurationError, parse_go_duration

QUEUE_MIN_RUNTIME: Final = "volcano-py.io/min-runtime"
QUEUE_PREEMPT_MIN_RUNTIME: Final = "volcano-py.io/preempt-min-runtime"
QUEUE_RECLAIM_MIN_RUNTIME: Final = "volcano-py.io/reclaim-min-runtime"
MIN_RUNTIME_BOUND: Final = 7 * 24 * 3600.0  # seconds (168h): no minimum runtime, argument or annotation, is longer
_TEXT_MAX: Final = 64


def parse_min_runtime(value: Any) -> float:
    """A Go duration from 0s to 168h, in seconds; BadValueError (what is wrong, never the value) otherwise."""
    if type(value) is not str:
        raise BadValueError(f"expected a Go duration such as 10m as text, got {type(value).__name__}")
    if len(value) > _TEXT_MAX or not value.isascii():
        raise BadValueError("is not a Go duration such as 10m or 1h30m")
    try:
        seconds = parse_go_duration(value.strip()) / SECOND
    except DurationError:
        raise BadValueError("is not a Go duration such as 10m or 1h30m") from None
    if not 0 <= seconds <= MIN_RUNTIME_BOUND:
        raise BadValueError("is out of range [0s, 168h]")
    return seconds


MIN_RUNTIME: Final = Parser("duration", parse_min_runtime, 0, MIN_RUNTIME_BOUND, max_len=_TEXT_MAX, text=True)


@dataclass(frozen=True, slots=True)
class QueueMinRuntime:
    """A queue's minimum runtimes in seconds; None: not set (the plugin's arguments decide)."""

    any: float | None = None
    preempt: float | None = None
    reclaim: float | None = None

    def for_eviction(self, *, cross_queue: bool, moving: bool = False) -> float | None:
        """The minimum for an eviction: by another queue (reclaim, gangreclaim), inside the queue (preempt,
        gangpreempt), or a move (consolidate: `min-runtime` alone); the specific one first, then `min-runtime`."""
        if moving:
            return self.any
        specific = self.reclaim if cross_queue else self.preempt
        return specific if specific is not None else self.any

    @property
    def is_set(self) -> bool:
        return self.any is not None or self.preempt is not None or self.reclaim is not None


NO_MIN_RUNTIME: Final = QueueMinRuntime()
