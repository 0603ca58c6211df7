"""Layer `api`: the parsers of the field table (`api/fields.py`), the reason a bad field gives, and `Field`.

Each parser takes a raw value from an object and returns it parsed and bounded, or raises `BadValueError`.
A `Field` is one
row of the table: a path, its parser, and what a bad value becomes (a safe default, or `REJECT`: the object is
left out with a `FieldError`). Readers of nested structures (affinity, taints, members...) register here under a
name (`register`), so the table can name them without importing the readers.
"""

from __future__ import annotations

import math
import re
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from scheduler.api.reasons import FieldInvalid
from scheduler.api.resources import QuantityError, Resource
from scheduler.durations import SECOND, DurationError, parse_go_duration, parse_seconds

INT32: Final = 2**31 - 1
NAME_MAX: Final = 253  # a DNS subdomain: object names, node names, label-key prefixes
LABEL_KEY_MAX: Final = 317  # prefix (253) + "/" + name (63)
LABEL_VALUE_MAX: Final = 63
ANNOTATIONS_MAX: Final = 256 * 1024  # Kubernetes' TotalAnnotationSizeLimitB, keys and values together
TEXT_MAX: Final = 4096  # a condition's message, a free-form string the scheduler keeps
MAP_ITEMS_MAX: Final = 4096
LIST_MAX: Final = 4096
DURATION_MAX: Final = 10 * 365 * 86400.0  # ten years, in seconds
TIMEOUT_MAX: Final = 366 * 86400.0


# ---- the reason ------------------------------------------------------------------------------------------


def describe(reason: FieldInvalid) -> str:
    """The sentence for people (an event, a log line)."""
    head = f"{reason.object_kind} {reason.name}: {reason.path} {reason.value}: {reason.problem}"
    if reason.fallback:
        return f"{head}; read as {reason.fallback}"
    return f"{head}; the {reason.object_kind} is left out until it is fixed"


class BadValueError(ValueError):
    """A parser's refusal: the message says what is wrong with the value (never the value in full)."""


class FieldError(ValueError):
    """An object left out: a field with no safe default could not be read."""

    def __init__(self, reason: FieldInvalid) -> None:
        super().__init__(describe(reason))
        self.reason = reason


def show(value: object) -> str:
    """A value as a reason quotes it: its type for a container, its first 40 characters otherwise."""
    if isinstance(value, Mapping):
        return f"(a map of {len(value)})"
    if isinstance(value, list | tuple):
        return f"(a list of {len(value)})"
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:37]}...({len(text)} characters)"


# ---- parsers -----------------------------------------------------------------------------------------------
# Each takes the raw value (never None: an absent field is the reader's `absent`) and returns the parsed one or
# raises BadValueError. `kind`, `lo`, `hi` and `max_len` describe what a parser accepts (the property test reads them).


_ASCII_INT = re.compile(r"[+-]?[0-9]{1,19}")


@dataclass(frozen=True, slots=True)
class Parser:
    kind: str  # int, float, bool, text, duration, time, quantities, strings, enum, object
    parse: Callable[[Any], Any]
    lo: float = -math.inf
    hi: float = math.inf
    max_len: int = 0
    text: bool = False  # an int/float written as text (an annotation)


def _wrong(value: object, wanted: str) -> BadValueError:
    return BadValueError(f"expected {wanted}, got {type(value).__name__}")


def integer(lo: int, hi: int, *, text: bool = False) -> Parser:
    """A JSON integer (an integral float too, as YAML writes one), or with `text` a decimal string of ASCII
    digits as Go's strconv.Atoi reads one (`١٢` is no number to Go, though it is to Python's int)."""

    def parse(value: Any) -> int:
        if text:
            if type(value) is not str:
                raise _wrong(value, "a decimal integer as text")
            if _ASCII_INT.fullmatch(value) is None:
                raise BadValueError("is not a decimal integer")
            number = int(value)
        elif type(value) is int:
            number = value
        elif type(value) is float:
            if not math.isfinite(value) or not value.is_integer():
                raise BadValueError("is not a whole finite number")
            number = int(value)
        else:
            raise _wrong(value, "an integer")
        if not lo <= number <= hi:
            raise BadValueError(f"is out of range [{lo}, {hi}]")
        return number

    return Parser("int", parse, lo, hi, text=text)


def number(lo: float, hi: float) -> Parser:
    """A finite JSON number in [lo, hi]."""

    def parse(value: Any) -> float:
        if type(value) is not int and type(value) is not float:
            raise _wrong(value, "a number")
        if type(value) is int and abs(value) > 2**53:
            raise BadValueError(f"is out of range [{lo:g}, {hi:g}]")
        result = float(value)
        if not math.isfinite(result):
            raise BadValueError("is not finite")
        if not lo <= result <= hi:
            raise BadValueError(f"is out of range [{lo:g}, {hi:g}]")
        return result

    return Parser("float", parse, lo, hi)


_TRUE = frozenset(("1", "t", "T", "TRUE", "true", "True"))
_FALSE = frozenset(("0", "f", "F", "FALSE", "false", "False"))


def parse_bool(value: object) -> bool:
    """Go's `strconv.ParseBool`: exactly these twelve spellings; anything else is an error."""
    if type(value) is str:
        if value in _TRUE:
            return True
        if value in _FALSE:
            return False
        raise BadValueError("is not a boolean (1, t, T, TRUE, true, True, 0, f, F, FALSE, false, False)")
    raise _wrong(value, "a boolean as text")


GO_BOOL: Final = Parser("bool", parse_bool, text=True)


def _json_bool(value: Any) -> bool:
    if type(value) is not bool:
        raise _wrong(value, "true or false")
    return value


JSON_BOOL: Final = Parser("bool", _json_bool)


def text(max_len: int, *, empty: bool = True) -> Parser:
    def parse(value: Any) -> str:
        if type(value) is not str:
            raise _wrong(value, "a string")
        if len(value) > max_len:
            raise BadValueError(f"is longer than {max_len} characters")
        if not empty and not value:
            raise BadValueError("is empty")
        return value

    return Parser("text", parse, max_len=max_len)


def duration(hi: float) -> Parser:
    """A Go duration (`90s`, `1h30m`) or a plain number of seconds, positive and at most `hi` seconds."""

    def parse(value: Any) -> float:
        if type(value) is not str:
            raise _wrong(value, "a duration such as 90s or 1h")
        if len(value) > 64 or not value.isascii():
            raise BadValueError("is not a duration such as 90s or 1h")
        try:
            seconds = parse_seconds(value)
        except ValueError:
            raise BadValueError("is not a duration such as 90s or 1h") from None
        if not math.isfinite(seconds) or not 0 < seconds <= hi:
            raise BadValueError(f"is out of range (0s, {hi:g}s]")
        return seconds

    return Parser("duration", parse, 0, hi, max_len=64, text=True)


def go_duration(max_len: int) -> Parser:
    """A Go duration as `time.ParseDuration` reads it (`90s`, `1h30m`, `-5m`, `0`; no plain number), in seconds.
    Any sign: Go's int64 of nanoseconds bounds it (about 292 years either way). `max_len` bounds the text."""

    def parse(value: Any) -> float:
        if type(value) is not str:
            raise _wrong(value, "a Go duration such as 90s or 1h")
        if len(value) > max_len or not value.replace("µ", "").replace("μ", "").isascii():  # Go's digits are ASCII
            raise BadValueError("is not a Go duration such as 90s or 1h")
        try:
            return parse_go_duration(value) / SECOND
        except DurationError:
            raise BadValueError("is not a Go duration such as 90s or 1h") from None

    return Parser("duration", parse, -(2.0**63) / SECOND, (2.0**63 - 1) / SECOND, max_len=max_len, text=True)


def _timestamp(value: Any) -> float:
    from scheduler.api.timestamps import parse_time

    if type(value) is not str:
        raise _wrong(value, "an RFC 3339 time")
    if len(value) > 64:
        raise BadValueError("is not an RFC 3339 time")
    seconds = parse_time(value)
    if not seconds and value:
        raise BadValueError("is not an RFC 3339 time")
    return seconds


TIME: Final = Parser("time", _timestamp, max_len=64)


def _quantities(value: Any) -> Resource:
    if not isinstance(value, Mapping):
        raise _wrong(value, "a map of resource name to quantity")
    if len(value) > 128:
        raise BadValueError("names more than 128 resources")
    for name in value:
        if type(name) is not str or not name or len(name) > LABEL_KEY_MAX:
            raise BadValueError(f"names a resource that is no resource name: {show(name)}")
    try:
        return Resource.from_quantities(value, field="")
    except QuantityError as exc:
        raise BadValueError(str(exc).removeprefix(".").removeprefix(": ")) from None


QUANTITIES: Final = Parser("quantities", _quantities)


def _bad_entry(k: object, v: object, max_key: int, max_value: int) -> str:
    if type(k) is not str or type(v) is not str:
        return f"has a {type(k if type(k) is not str else v).__name__} where a string belongs"
    return f"has an entry longer than {max_key if len(k) > max_key else max_value} characters"


def strings(max_key: int, max_value: int, max_total: int = 0) -> Parser:
    """A map of string to string (labels, annotations, a nodeSelector), bounded per key, per value and in all."""

    def parse(value: Any) -> dict[str, str]:
        if not isinstance(value, dict):
            if not isinstance(value, Mapping):
                raise _wrong(value, "a map of string to string")
            value = dict(value)
        if len(value) > MAP_ITEMS_MAX:
            raise BadValueError(f"has more than {MAP_ITEMS_MAX} entries")
        total = 0
        for k, v in value.items():  # the hot path: every pod's labels and annotations (a loop is fastest here)
            if type(k) is not str or type(v) is not str or len(k) > max_key or len(v) > max_value:
                raise BadValueError(_bad_entry(k, v, max_key, max_value))
            total += len(k) + len(v)
        if max_total and total > max_total:
            raise BadValueError(f"is larger than {max_total} bytes in all")
        return typing.cast(dict[str, str], value)

    return Parser("strings", parse, max_len=max_value)


def enum(*values: str) -> Parser:
    allowed = frozenset(values)

    def parse(value: Any) -> str:
        if type(value) is not str or value not in allowed:
            raise BadValueError(f"is not one of {', '.join(sorted(allowed))}")
        return value

    return Parser("enum", parse, max_len=max(len(v) for v in values))


def bounded_tree(value: Any, depth: int = 0) -> int:
    """Raise BadValueError unless every string in `value` is at most TEXT_MAX long, every number finite and not above
    2^63, and the tree at most 12 deep; returns how many values it holds (at most 20,000 in all)."""
    if depth > 12:
        raise BadValueError("is nested too deeply")
    kind = type(value)
    if kind is str:
        if len(value) > TEXT_MAX:
            raise BadValueError(f"holds a string longer than {TEXT_MAX} characters")
        return 1
    if kind is dict:
        count = 1
        for k, v in value.items():
            count += bounded_tree(k, depth + 1) + bounded_tree(v, depth + 1)
    elif kind is list:
        count = 1
        for v in value:
            count += bounded_tree(v, depth + 1)
    elif kind is float:
        if not math.isfinite(value):
            raise BadValueError("holds a number that is not finite")
        return 1
    elif kind is int:
        if abs(value) > 2**63:
            raise BadValueError("holds a number out of range")
        return 1
    else:
        return 1
    if count > 20_000:
        raise BadValueError("is too large")
    return count


def structure(check: Callable[[Any], Any], wanted: type = dict, *, walk: bool = True) -> Parser:
    """A nested structure read by a dedicated function (`check`), which raises BadValueError for what it refuses; any
    other exception it raises is a bug in the reader, turned into BadValueError so one object never fails the cycle.
    With `walk`, every string in it is bounded first (`bounded_tree`)."""

    def parse(value: Any) -> Any:
        if not isinstance(value, wanted) or not isinstance(value, list | dict):
            raise _wrong(value, "a list" if wanted is list else "an object")
        if len(value) > LIST_MAX:
            raise BadValueError(f"has more than {LIST_MAX} entries")
        if walk:
            bounded_tree(value)
        try:
            return check(value)
        except BadValueError:
            raise
        except (ValueError, TypeError, AttributeError, KeyError, IndexError, OverflowError, RecursionError) as exc:
            raise BadValueError(f"cannot be read ({type(exc).__name__}: {str(exc)[:80]})") from None

    return Parser("object", parse)


# ---- the table -------------------------------------------------------------------------------------------


class _Reject:
    def __repr__(self) -> str:
        return "REJECT"


REJECT: Final = _Reject()  # no default is safe: the object is left out


@dataclass(frozen=True, slots=True)
class Field:
    """One field path the scheduler reads, its parser, and what a bad value becomes. `path` steps are keys; `*`
    is any list item or any map key (a structure read whole by its parser is one entry, at its root)."""

    kind: str
    path: tuple[str, ...]
    parser: Parser
    fallback: Any  # REJECT, or the value used for a bad one (`fallback_text` says it for people)
    fallback_text: str = ""
    absent: Any = None  # the value of a missing field (also used for an explicit null)
    # False: read only after a cycle, by the partial-gang policy, for the few pods of a partly bound gang; a bad
    # value reads as the fallback there (no per-cycle log), and no reason is kept on the object.
    edge: bool = True

    @property
    def name(self) -> str:
        return dotted(self.path)

    def read(self, value: Any, where: str, sink: list[FieldInvalid] | None) -> Any:
        """The parsed value, `absent` for None; a bad one is reported to `sink` and read as the fallback, or
        raises FieldError when the object must be left out."""
        if value is None:
            return self.absent
        try:
            return self.parser.parse(value)
        except BadValueError as bad:
            return self.refuse(value, str(bad), where, sink)

    def refuse(self, value: Any, problem: str, where: str, sink: list[FieldInvalid] | None) -> Any:
        rejected = self.fallback is REJECT
        reason = FieldInvalid(self.kind, where, self.name, problem, show(value),
                              "" if rejected else (self.fallback_text or repr(self.fallback)))
        if rejected:
            raise FieldError(reason)
        if sink is not None:
            sink.append(reason)
        return self.fallback


def dotted(path: Iterable[str]) -> str:
    out = ""
    for step in path:
        out += f"[{step}]" if not (step.isalnum() or step == "*") else (f".{step}" if out else step)
    return out


NAME = text(NAME_MAX, empty=False)
LABELS = strings(LABEL_KEY_MAX, LABEL_VALUE_MAX)
ANNOTATIONS = strings(LABEL_KEY_MAX, ANNOTATIONS_MAX, ANNOTATIONS_MAX)
KEY_TEXT = text(NAME_MAX)
FREE_TEXT = text(TEXT_MAX)

# ---- structure readers, by name -------------------------------------------------------------------------------

CHECKS: dict[str, Callable[[Any], Any]] = {}


def register(name: str, check: Callable[[Any], Any]) -> None:
    """A structure reader the table names (`registered`): api/field_readers.py and api/pod.py register theirs."""
    CHECKS[name] = check


def registered(name: str, wanted: type = dict, *, walk: bool = True) -> Parser:
    """The parser of a structure read by the reader registered as `name` (looked up when a value is parsed)."""

    def check(value: Any) -> Any:
        reader = CHECKS.get(name)
        if reader is None:  # a programming error, never a user's: not turned into a reason
            raise RuntimeError(f"no structure reader {name!r} registered: import scheduler.api.convert first")
        return reader(value)

    return structure(check, wanted, walk=walk)
