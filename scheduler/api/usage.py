"""Layer `api`: a queue's usage history, for time-based fair share (docs/configuration.md, "Time-based fair share").

A queue's *usage* is what it held over time, each second weighted by `2^(-age / halfLife)`: an exponentially
decayed integral, per resource, in resource-seconds of the resource's natural unit (GPU-seconds, core-seconds,
byte-seconds). It is kept as two numbers per resource and the time they were last folded to, so it costs O(1)
to carry forward: `used(t) = used(at) x 2^(-(t - at)/halfLife) + held x integral of the decay over (at, t]`,
holding `held` constant since `at` (the scheduler folds every cycle, so `held` is what the queue held during
the last cycle's interval).

- The *window* bounds what the history covers: a record last folded longer ago than the window is forgotten
  (the queue starts from zero), at most a window's worth of holding is folded at once, and the usage fraction
  is normalised by what holding the whole cluster for the window would give.
- The *usage fraction* of a queue is its dominant one: the largest `used[r] / (cluster[r] x norm)` over the
  cluster's resources, `norm` being the decay integral over the window. 1.0 means: as if the queue held the
  whole cluster for the whole window.

The record lives in the Queue's annotation `volcano-py.io/usage` (Volcano's Queue CRD prunes unknown fields
of its status, never annotations), a small JSON object written by the scheduler's status writer and read back
here with bounds: `{"v":1,"at":<unix s>,"halfLife":<s>,"window":<s>,"share":<fraction>,"used":{<res>:<amount>}}`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from scheduler.api.field_parsers import BadValueError, Parser
from scheduler.api.resources import MEMORY, PODS, Resource

USAGE_ANNOTATION: Final = "volcano-py.io/usage"
USAGE_VERSION: Final = 1
USAGE_TEXT_MAX: Final = 4096  # characters of the annotation; 16 resources fit in well under 2 KiB
USAGE_RESOURCES_MAX: Final = 16
RESOURCE_NAME_MAX: Final = 253
AMOUNT_MAX: Final = 1e30  # resource-seconds: 2^53 bytes held for 3e13 years is still below
TIME_MAX: Final = 1e11  # unix seconds (year 5138)
SPAN_MAX: Final = 366 * 86400.0  # a half-life or a window: at most a year
SHARE_MAX: Final = 1e6
LN2: Final = math.log(2)


@dataclass(frozen=True, slots=True)
class QueueUsage:
    """A queue's decayed usage, folded to `at` with `half_life`, over `window` (seconds)."""

    at: float
    half_life: float
    window: float
    used: Mapping[str, float] = field(default_factory=dict)  # resource -> decayed resource-seconds
    share: float = 0.0  # the dominant usage fraction at `at`

    def decayed_to(self, now: float) -> QueueUsage:
        """The same history seen at `now` (nothing held since `at`): every amount decayed; forgotten past the
        window."""
        elapsed = max(0.0, now - self.at)
        if elapsed > self.window:
            return QueueUsage(now, self.half_life, self.window)
        factor = decay(elapsed, self.half_life)
        return QueueUsage(now, self.half_life, self.window, {k: v * factor for k, v in self.used.items()},
                          self.share * factor)


def decay(elapsed: float, half_life: float) -> float:
    """What one resource-second `elapsed` seconds old weighs now: `2^(-elapsed / half_life)`."""
    return math.pow(2.0, -max(0.0, elapsed) / half_life)


def held_integral(elapsed: float, half_life: float) -> float:
    """The decayed weight of holding one unit for the last `elapsed` seconds: the integral of
    `2^(-age/half_life)` over age in [0, elapsed], i.e. `half_life / ln 2 x (1 - 2^(-elapsed/half_life))`."""
    if elapsed <= 0:
        return 0.0
    return half_life / LN2 * -math.expm1(-LN2 * elapsed / half_life)


def natural(name: str, units: int) -> float:
    """A `Resource` amount in the resource's natural unit: cores, bytes, pods, GPUs (not milli-units)."""
    return float(units) if name in (MEMORY, PODS) else units / 1000.0


def fold(previous: QueueUsage | None, held: Resource, now: float, half_life: float, window: float) -> QueueUsage:
    """The usage at `now`: `previous` decayed, plus `held` counted since `previous.at` (at most a window).

    No previous record (or one past the window) starts from nothing at `now`: what the queue held before the
    history began is not known, so it is not counted."""
    if previous is None or now - previous.at > window:
        return QueueUsage(now, half_life, window)
    elapsed = max(0.0, now - previous.at)
    factor, weight = decay(elapsed, half_life), held_integral(elapsed, half_life)
    used = {name: amount * factor for name, amount in previous.used.items()}
    for name, units in held.items():
        if units > 0 and name != PODS:
            used[name] = used.get(name, 0.0) + natural(name, units) * weight
    return QueueUsage(now, half_life, window, {k: min(v, AMOUNT_MAX) for k, v in used.items() if v > 0})


def usage_fraction(used: Mapping[str, float], total: Resource, half_life: float, window: float) -> float:
    """The dominant usage fraction: the largest `used[r] / (total[r] x decay integral over the window)` over
    the resources the cluster has (pods aside); 0 with no cluster."""
    norm = held_integral(window, half_life)
    share = 0.0
    for name, units in total.items():
        if units > 0 and name != PODS and norm > 0:
            share = max(share, used.get(name, 0.0) / (natural(name, units) * norm))
    return min(share, SHARE_MAX)


# ---- the annotation ----------------------------------------------------------------------------------------


def _significant(value: float) -> float:
    return float(f"{value:.6g}")


def encode(usage: QueueUsage) -> str:
    """The annotation's text: compact JSON, amounts to 6 significant digits, resources sorted."""
    body = {
        "v": USAGE_VERSION,
        "at": round(usage.at, 3),
        "halfLife": _significant(usage.half_life),
        "window": _significant(usage.window),
        "share": _significant(usage.share),
        "used": {name: _significant(usage.used[name]) for name in sorted(usage.used)[:USAGE_RESOURCES_MAX]},
    }
    return json.dumps(body, separators=(",", ":"), sort_keys=True)


def _bounded(body: Mapping[str, Any], key: str, lo: float, hi: float, *, open_lo: bool = False) -> float:
    value = body.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BadValueError(f"{key}: expected a number")
    try:
        number = float(value)
    except OverflowError:  # an integer of hundreds of digits (JSON has no bound): no float holds it
        raise BadValueError(f"{key}: out of range {'(' if open_lo else '['}{lo:g}, {hi:g}]") from None
    if not math.isfinite(number) or number > hi or number < lo or (open_lo and number == lo):
        raise BadValueError(f"{key}: out of range {'(' if open_lo else '['}{lo:g}, {hi:g}]")
    return number


def _used(raw: Any) -> dict[str, float]:
    if not isinstance(raw, dict):
        raise BadValueError("used: expected an object")
    if len(raw) > USAGE_RESOURCES_MAX:
        raise BadValueError(f"used: more than {USAGE_RESOURCES_MAX} resources")
    used: dict[str, float] = {}
    for name in raw:
        if not 0 < len(name) <= RESOURCE_NAME_MAX or not name.isascii() or not name.isprintable():
            raise BadValueError("used: a resource name is not a short printable ASCII name")
        used[name] = _bounded(raw, name, 0.0, AMOUNT_MAX)
    return used


def parse_usage(value: Any) -> QueueUsage:
    """The annotation's record, every number bounded; BadValueError (what is wrong, never the value) otherwise."""
    if type(value) is not str:
        raise BadValueError(f"expected JSON text, got {type(value).__name__}")
    if len(value) > USAGE_TEXT_MAX:
        raise BadValueError(f"is longer than {USAGE_TEXT_MAX} characters")
    try:
        body = json.loads(value)
    except (ValueError, RecursionError):
        raise BadValueError("is not JSON") from None
    if not isinstance(body, dict):
        raise BadValueError("expected a JSON object")
    if body.get("v") != USAGE_VERSION or isinstance(body.get("v"), bool):
        raise BadValueError(f"v: expected {USAGE_VERSION}")
    return QueueUsage(
        at=_bounded(body, "at", 0.0, TIME_MAX),
        half_life=_bounded(body, "halfLife", 0.0, SPAN_MAX, open_lo=True),
        window=_bounded(body, "window", 0.0, SPAN_MAX, open_lo=True),
        used=_used(body.get("used", {})),
        share=_bounded(body, "share", 0.0, SHARE_MAX) if "share" in body else 0.0,
    )


USAGE_RECORD: Final = Parser("object", parse_usage, max_len=USAGE_TEXT_MAX, text=True)


# ---- what the history does to the shares ----------------------------------------------------------------------

WEIGHT_FLOOR: Final = 0.01  # a queue keeps at least 1% of its weight's fraction: it still gets what no one wants
WEIGHT_SCALE: Final = 1_000_000  # adjusted weights in millionths, so water-filling keeps integer weights


def moved_fraction(fraction: float, used: float, k: float) -> float:
    """A queue's fraction `f` (of the total weight, or of the cluster it deserves) moved by `k` times how far its
    usage fraction `u` is below (or above) it: `f + k x (f - u)`, at least `f x WEIGHT_FLOOR`."""
    return max(fraction * WEIGHT_FLOOR, fraction + k * (fraction - used))


def history_weights(weights: Mapping[str, int], usage: Mapping[str, float], k: float) -> dict[str, int]:
    """The weights water-filling uses with history: a queue's fraction of the total weight `f`, moved by `k`
    times how far its usage fraction `u` is below (or above) it, `f + k x (f - u)`, at least `f x WEIGHT_FLOOR`;
    in millionths. Queues of weight 0 keep it (they deserve nothing either way)."""
    total = sum(w for w in weights.values() if w > 0)
    adjusted: dict[str, int] = {}
    for name, weight in weights.items():
        if weight <= 0 or total <= 0:
            adjusted[name] = weight
            continue
        moved = moved_fraction(weight / total, usage.get(name, 0.0), k)
        adjusted[name] = max(1, round(moved * WEIGHT_SCALE))
    return adjusted
