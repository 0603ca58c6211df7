"""Layer `ctl`: how vcctl (Go) spells values, so `volcano-py job|queue|pod|jobflow|jobtemplate` print the same
bytes: ages, `time.Time`'s String(), local dates, `%-Ns` padding, compact JSON and canonical quantities.

Pure functions; the Volcano or Kubernetes source each one follows is named where it is.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from decimal import ROUND_UP, Decimal, localcontext
from typing import Any

from scheduler.api.resources import parse_quantity


def parse_time(value: object) -> datetime | None:
    """An RFC 3339 timestamp as the apiserver writes it, in the local zone (metav1.Time's UnmarshalJSON calls
    `.Local()`), or None when it is missing or unreadable."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone()
    except ValueError:
        return None


def human_duration(seconds: float, *, apimachinery: bool = False) -> str:
    """An age as kubectl prints it. vcctl has two copies of the rule: its own (pkg/cli/util/util.go
    HumanDuration, used by `job view`) prints `2y0d`, apimachinery's (util/duration, used by `pod list` and
    `jobflow`) prints `2y`; they differ in nothing else."""
    whole = int(seconds)
    if whole < -1:
        return "<invalid>"
    if whole < 0:
        return "0s"
    if whole < 120:
        return f"{whole}s"
    minutes, hours = whole // 60, whole // 3600
    if minutes < 10:
        return f"{minutes}m" if whole % 60 == 0 else f"{minutes}m{whole % 60}s"
    if minutes < 180:
        return f"{minutes}m"
    if hours < 8:
        return f"{hours}h" if minutes % 60 == 0 else f"{hours}h{minutes % 60}m"
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    if hours < 24 * 8:
        return f"{days}d" if hours % 24 == 0 else f"{days}d{hours % 24}h"
    if hours < 24 * 365 * 2:
        return f"{days}d"
    if hours < 24 * 365 * 8:
        if apimachinery and days % 365 == 0:
            return f"{days // 365}y"
        return f"{days // 365}y{days % 365}d"
    return f"{days // 365}y"


def since(timestamp: object, now: float, *, apimachinery: bool = False) -> str:
    """TranslateTimestampSince: `<unknown>` for a missing timestamp, else the age."""
    when = parse_time(timestamp)
    if when is None:
        return "<unknown>"
    return human_duration(now - when.timestamp(), apimachinery=apimachinery)


def go_time(timestamp: object) -> str:
    """`%s` of a metav1.Time: Go's time.Time.String() in the local zone, `0001-01-01 00:00:00 +0000 UTC` for an
    unset one."""
    when = parse_time(timestamp)
    if when is None:
        return "0001-01-01 00:00:00 +0000 UTC"
    text = when.strftime("%Y-%m-%d %H:%M:%S")
    if when.microsecond:
        text += f".{when.microsecond:06d}".rstrip("0")
    return f"{text} {when.strftime('%z')} {when.tzname() or when.strftime('%z')}"


def local_date(timestamp: object) -> str:
    """`Format("2006-01-02")` of a metav1.Time (local zone); an unset one is Go's zero time."""
    when = parse_time(timestamp)
    return when.strftime("%Y-%m-%d") if when is not None else "0001-01-01"


def pad(value: object, width: int) -> str:
    """Go's `%-<width>s` (and `%-<width>d`): left-aligned, never cut."""
    return str(value).ljust(width)


def go_list(values: object) -> str:
    """`%v` of a []string: `[a b]`, `[]` for none."""
    if values is None or isinstance(values, list):
        return "[" + " ".join(str(v) for v in values or ()) + "]"
    return str(values)


def go_json(value: Any) -> str:
    """encoding/json's Marshal of a map: sorted keys, no spaces, `<`, `>` and `&` escaped."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    for char, escaped in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(char, escaped)
    return text


def go_int(value: object) -> int:
    """An integer field of a typed Go struct: absent (or not a number) is 0."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return 0


# ---- quantities -------------------------------------------------------------------------------------------

_SUFFIX = re.compile(r"^[+-]?(?:\d+\.?\d*|\.\d+)(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?\d+|[numkMGTPE]?)$")
_DECIMAL_SUFFIXES = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
_BINARY_SUFFIXES = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
_NANO = Decimal("1e-9")


def canonical_quantity(text: str) -> str:
    """A quantity as Kubernetes writes it back (`1000m` -> `1`, `1024Mi` -> `1Gi`, `1.5` -> `1500m`): what a Go
    client sends and prints for a value it parsed. Follows apimachinery's ParseQuantity (round up to 1n) and
    CanonicalizeBytes (pkg/api/resource/quantity.go). Raises QuantityError for no quantity at all."""
    value = parse_quantity(text)
    match = _SUFFIX.match(text.strip())
    suffix = match["suffix"] if match else ""
    kind = "binary" if suffix.endswith("i") else "exponent" if suffix[:1] in ("e", "E") else "decimal"
    if _kept_as_written(text, kind, suffix):
        return text
    with localcontext() as ctx:
        ctx.prec = 80
        if value != value.quantize(_NANO, rounding=ROUND_UP):
            value = value.quantize(_NANO, rounding=ROUND_UP)
        if value == 0:
            return "0"
        if kind == "binary" and (abs(value) < 1024 or value != value.to_integral_value()):
            kind = "decimal"
        sign, number = ("-" if value < 0 else ""), abs(value)
        if kind == "binary":
            amount, power = int(number), 0
            while amount % 1024 == 0 and power < len(_BINARY_SUFFIXES) - 1:
                amount, power = amount // 1024, power + 1
            return f"{sign}{amount}{_BINARY_SUFFIXES[power]}"
        digits, exponent = _mantissa(number)
        if kind == "decimal":
            return f"{sign}{digits}{_DECIMAL_SUFFIXES.get(exponent, '')}"
        return f"{sign}{digits}" + (f"e{exponent}" if exponent else "")


_GO_PARTS = re.compile(r"^[+-]?0*(?P<num>\d*)(?:\.(?P<denom>\d*))?")
_DECIMAL_EXPONENTS = {v: k for k, v in _DECIMAL_SUFFIXES.items()}


def _kept_as_written(text: str, kind: str, suffix: str) -> bool:
    """ParseQuantity keeps the string it was given when it is already canonical on its int64 fast path (a short
    number, no trailing 000, no leading 0; for binary units a number not divisible by 8), so `1E6` stays `1E6`."""
    parts = _GO_PARTS.match(text)
    if parts is None or text == "0":
        return text == "0"
    num, denom = parts["num"] or "0", parts["denom"] or ""
    shifted = num + denom
    if kind == "binary":
        power = 10 * _BINARY_SUFFIXES.index(suffix)
        fits = not denom and 15 - len(num) - power * 3 // 10 - 1 >= 0 and int(num) << power < 2**63
        return fits and int(num) & 7 != 0
    exponent = int(suffix[1:]) if kind == "exponent" else _DECIMAL_EXPONENTS[suffix]
    scale = exponent - len(denom)
    if 18 - len(shifted) < 0 or scale < -9 or scale % 3:
        return False
    return not shifted.endswith("000") and not shifted.startswith("0")


def _mantissa(number: Decimal) -> tuple[int, int]:
    """`number` as amount * 10^exponent with every factor of 10 in the exponent, then the exponent brought down
    to a multiple of 3 (AsCanonicalBytes)."""
    _, digits, exponent = number.normalize().as_tuple()
    amount = int("".join(map(str, digits)))
    assert isinstance(exponent, int)
    while amount % 10 == 0 and amount:
        amount, exponent = amount // 10, exponent + 1
    while exponent % 3:
        amount, exponent = amount * 10, exponent - 1
    return amount, exponent
