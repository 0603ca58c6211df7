"""Layer `framework`: time-based fair share for the queue-share plugins (`proportion`, `capacity`).

The rule itself (decay, fold, usage fraction, how history moves a weight) is `api/usage.py`'s; this module holds
what both plugins do with it, so they read their arguments and fold their queues' history the same way:

- `parse_usage_args`: the `usage.weight`, `usage.halfLife`, `usage.window` arguments, read once when the conf is
  loaded, with bounds (a value outside them rejects the conf with one error naming the argument);
- `fold_queues`: each queue's usage at this session, its record (the Queue annotation `volcano-py.io/usage`,
  parsed at the edge) decayed, plus what it held since.

A beyond-Volcano rule (after KAI-Scheduler's time-based fairshare and Kueue's admission fair sharing); off unless
`usage.weight` > 0, and then the plugins place exactly as without it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from scheduler.api.queue import QueueInfo
from scheduler.api.resources import ZERO, Resource
from scheduler.api.usage import SPAN_MAX, QueueUsage, fold, usage_fraction
from scheduler.durations import DurationError, format_duration, parse_seconds
from scheduler.framework.conf_args import ArgReader

HALF_LIFE: Final = "usage.halfLife"
WINDOW: Final = "usage.window"
HISTORY_WEIGHT: Final = "usage.weight"
HISTORY_WEIGHT_MAX: Final = 10.0
HALF_LIFE_DEFAULT: Final = 4 * 3600.0
WINDOW_DEFAULT: Final = 24 * 3600.0


@dataclass(frozen=True, slots=True)
class UsageArgs:
    """Time-based fair share: `weight` (KAI's kValue) 0 turns it off."""

    half_life: float = HALF_LIFE_DEFAULT
    window: float = WINDOW_DEFAULT
    weight: float = 0.0

    @property
    def on(self) -> bool:
        return self.weight > 0


def _span(reader: ArgReader, key: str, default: float) -> float:
    raw = reader.raw(key)
    if raw is None:
        return default
    expected = f"a duration such as 30m or 4h, in (0s, {format_duration(SPAN_MAX)}]"
    try:
        seconds = parse_seconds(raw) if isinstance(raw, str | int | float) and not isinstance(raw, bool) \
            else float("nan")
    except DurationError:
        raise reader.fail(key, expected) from None
    if not 0 < seconds <= SPAN_MAX:  # also refuses nan
        raise reader.fail(key, expected)
    return seconds


def parse_usage_args(reader: ArgReader) -> UsageArgs:
    """The `usage.*` arguments of a queue-share plugin's entry, bounded; absent: off."""
    weight = reader.number(HISTORY_WEIGHT, 0.0)
    if not 0 <= weight <= HISTORY_WEIGHT_MAX:  # also refuses nan
        raise reader.fail(HISTORY_WEIGHT, f"a number in [0, {HISTORY_WEIGHT_MAX:g}] (0: no history)")
    return UsageArgs(_span(reader, HALF_LIFE, HALF_LIFE_DEFAULT), _span(reader, WINDOW, WINDOW_DEFAULT), weight)


def fold_queues(queues: Mapping[str, QueueInfo], held: Mapping[str, Resource], total: Resource, now: float,
                args: UsageArgs) -> dict[str, QueueUsage]:
    """Each queue's usage at `now`: its record decayed, plus `held[queue]` counted since the record's time, with
    its usage fraction of `total`. A queue with no record that holds nothing has none (nothing to keep)."""
    usage = {}
    for name, queue in queues.items():
        holding = held.get(name, ZERO)
        if queue.usage is None and holding.is_zero():
            continue
        folded = fold(queue.usage, holding, now, args.half_life, args.window)
        share = usage_fraction(folded.used, total, args.half_life, args.window)
        usage[name] = QueueUsage(folded.at, args.half_life, args.window, folded.used, share)
    return usage
