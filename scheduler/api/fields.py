"""Layer `api`: every field the scheduler reads from an object, in one table, each with its parser and bounds.

A field is parsed once, at the cache's edge (`cache/parse.py`, through `api/convert.py` and `api/pod.py`), into
the typed fields of the infos; plugins read those, never the raw object. What a user may write in a Pod, a
PodGroup, a Queue, a Node or a HyperNode is hostile until parsed: a number is finite and bounded, a string is
bounded in length, a boolean is one of Go's `strconv.ParseBool` spellings, a duration is Go's, a quantity goes
through the quantity parser (`api/resources.py`, itself bounded). The scheduler reads no batch.volcano.sh Job:
what a Job says to the scheduler (`sla-waiting-time`, the fallback minimum) reaches it on the Job's PodGroup.

A value that does not parse gives a `FieldInvalid` reason (typed, with the field's path) and either

- a safe default (`Field.fallback`): the one that protects others, e.g. a pod whose `volcano.sh/preemptable`
  cannot be read is protected, as in Volcano (pkg/scheduler/api/pod_info.go `GetPodPreemptable`); or
- where no default is safe (`REJECT`: a Node whose allocatable cannot be read, a Queue whose capability is
  garbage, a PodGroup whose minMember is not a count), the object is left out with that reason and everything
  else goes on (`FieldError`, which the cache catches per object).

Readers name the fields they read through `field(kind, path)`, so a reader of a field missing from the table
fails at import; tests/api/test_fields.py records every key a reader touches on a live object and fails on one
the table does not list.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Final

from scheduler.api.reasons import Reason
from scheduler.api.resources import ZERO, QuantityError, Resource
from scheduler.durations import parse_seconds

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


@dataclass(frozen=True, slots=True)
class FieldInvalid(Reason):
    """A field of an object that the scheduler cannot read: `fallback` says what it used instead, or "" when
    the object is left out (no default is safe for that field)."""

    kind: ClassVar[str] = "FieldInvalid"
    object_kind: str  # Pod, PodGroup, Queue, Node, HyperNode
    name: str  # the object's namespace/name
    path: str  # the field, as the table names it
    problem: str
    value: str  # the value, shown short
    fallback: str = ""


def describe(reason: FieldInvalid) -> str:
    """The sentence for people (an event, a log line)."""
    head = f"{reason.object_kind} {reason.name}: {reason.path} {reason.value}: {reason.problem}"
    if reason.fallback:
        return f"{head}; read as {reason.fallback}"
    return f"{head}; the {reason.object_kind} is left out until it is fixed"


class Bad(ValueError):
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
# raises Bad. `kind`, `lo`, `hi` and `max_len` describe what a parser accepts (the property test reads them).


_ASCII_INT = re.compile(r"[+-]?[0-9]{1,19}")


@dataclass(frozen=True, slots=True)
class Parser:
    kind: str  # int, float, bool, text, duration, time, quantities, strings, enum, object
    parse: Callable[[Any], Any]
    lo: float = -math.inf
    hi: float = math.inf
    max_len: int = 0
    text: bool = False  # an int/float written as text (an annotation)


def _wrong(value: object, wanted: str) -> Bad:
    return Bad(f"expected {wanted}, got {type(value).__name__}")


def integer(lo: int, hi: int, *, text: bool = False) -> Parser:
    """A JSON integer (an integral float too, as YAML writes one), or with `text` a decimal string of ASCII
    digits as Go's strconv.Atoi reads one (`١٢` is no number to Go, though it is to Python's int)."""

    def parse(value: Any) -> int:
        if text:
            if type(value) is not str:
                raise _wrong(value, "a decimal integer as text")
            if _ASCII_INT.fullmatch(value) is None:
                raise Bad("is not a decimal integer")
            number = int(value)
        elif type(value) is int:
            number = value
        elif type(value) is float:
            if not math.isfinite(value) or not value.is_integer():
                raise Bad("is not a whole finite number")
            number = int(value)
        else:
            raise _wrong(value, "an integer")
        if not lo <= number <= hi:
            raise Bad(f"is out of range [{lo}, {hi}]")
        return number

    return Parser("int", parse, lo, hi, text=text)


def number(lo: float, hi: float, *, low_open: bool = True) -> Parser:
    """A finite JSON number in (lo, hi] (`low_open`) or [lo, hi]."""

    def parse(value: Any) -> float:
        if type(value) is not int and type(value) is not float:
            raise _wrong(value, "a number")
        if type(value) is int and abs(value) > 2**53:
            raise Bad(f"is out of range ({lo:g}, {hi:g}]")
        result = float(value)
        if not math.isfinite(result):
            raise Bad("is not finite")
        if result > hi or result < lo or (low_open and result == lo):
            raise Bad(f"is out of range ({lo:g}, {hi:g}]" if low_open else f"is out of range [{lo:g}, {hi:g}]")
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
        raise Bad("is not a boolean (1, t, T, TRUE, true, True, 0, f, F, FALSE, false, False)")
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
            raise Bad(f"is longer than {max_len} characters")
        if not empty and not value:
            raise Bad("is empty")
        return value

    return Parser("text", parse, max_len=max_len)


def duration(hi: float) -> Parser:
    """A Go duration (`90s`, `1h30m`) or a plain number of seconds, positive and at most `hi` seconds."""

    def parse(value: Any) -> float:
        if type(value) is not str:
            raise _wrong(value, "a duration such as 90s or 1h")
        if len(value) > 64 or not value.isascii():
            raise Bad("is not a duration such as 90s or 1h")
        try:
            seconds = parse_seconds(value)
        except ValueError:
            raise Bad("is not a duration such as 90s or 1h") from None
        if not math.isfinite(seconds) or not 0 < seconds <= hi:
            raise Bad(f"is out of range (0s, {hi:g}s]")
        return seconds

    return Parser("duration", parse, 0, hi, max_len=64, text=True)


def _timestamp(value: Any) -> float:
    from scheduler.api.timestamps import parse_time  # noqa: PLC0415 - timestamps imports nothing of ours

    if type(value) is not str:
        raise _wrong(value, "an RFC 3339 time")
    if len(value) > 64:
        raise Bad("is not an RFC 3339 time")
    seconds = parse_time(value)
    if not seconds and value:
        raise Bad("is not an RFC 3339 time")
    return seconds


TIME: Final = Parser("time", _timestamp, max_len=64)


def _quantities(value: Any) -> Resource:
    if not isinstance(value, Mapping):
        raise _wrong(value, "a map of resource name to quantity")
    if len(value) > 128:
        raise Bad("names more than 128 resources")
    for name in value:
        if type(name) is not str or not name or len(name) > LABEL_KEY_MAX:
            raise Bad(f"names a resource that is no resource name: {show(name)}")
    try:
        return Resource.from_quantities(value, field="")
    except QuantityError as exc:
        raise Bad(str(exc).removeprefix(".").removeprefix(": ")) from None


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
            raise Bad(f"has more than {MAP_ITEMS_MAX} entries")
        for k, v in value.items():  # the hot path: every pod's labels and annotations
            if type(k) is not str or type(v) is not str or len(k) > max_key or len(v) > max_value:
                raise Bad(_bad_entry(k, v, max_key, max_value))
        if max_total and sum(map(len, value)) + sum(map(len, value.values())) > max_total:
            raise Bad(f"is larger than {max_total} bytes in all")
        return value

    return Parser("strings", parse, max_len=max_value)


def enum(*values: str) -> Parser:
    allowed = frozenset(values)

    def parse(value: Any) -> str:
        if type(value) is not str or value not in allowed:
            raise Bad(f"is not one of {', '.join(sorted(allowed))}")
        return value

    return Parser("enum", parse, max_len=max(len(v) for v in values))


def bounded_tree(value: Any, depth: int = 0) -> int:
    """Raise Bad unless every string in `value` is at most TEXT_MAX long, every number finite and not above
    2^63, and the tree at most 12 deep; returns how many values it holds (at most 20,000 in all)."""
    if depth > 12:
        raise Bad("is nested too deeply")
    kind = type(value)
    if kind is str:
        if len(value) > TEXT_MAX:
            raise Bad(f"holds a string longer than {TEXT_MAX} characters")
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
            raise Bad("holds a number that is not finite")
        return 1
    elif kind is int:
        if abs(value) > 2**63:
            raise Bad("holds a number out of range")
        return 1
    else:
        return 1
    if count > 20_000:
        raise Bad("is too large")
    return count


def structure(check: Callable[[Any], Any], wanted: type = dict, *, walk: bool = True) -> Parser:
    """A nested structure read by a dedicated function (`check`), which raises Bad for what it refuses; any
    other exception it raises is a bug in the reader, turned into Bad so one object never fails the cycle.
    With `walk`, every string in it is bounded first (`bounded_tree`)."""

    def parse(value: Any) -> Any:
        if not isinstance(value, wanted) or not isinstance(value, list | dict):
            raise _wrong(value, "a list" if wanted is list else "an object")
        if len(value) > LIST_MAX:
            raise Bad(f"has more than {LIST_MAX} entries")
        if walk:
            bounded_tree(value)
        try:
            return check(value)
        except Bad:
            raise
        except (ValueError, TypeError, AttributeError, KeyError, IndexError, OverflowError, RecursionError) as exc:
            raise Bad(f"cannot be read ({type(exc).__name__}: {str(exc)[:80]})") from None

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
        except Bad as bad:
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

# Annotation and label keys (the constants live with their readers; repeated here as the table's keys).
GROUP_NAME = "scheduling.k8s.io/group-name"
MIN_MEMBER = "scheduling.volcano.sh/group-min-member"
TASK_SPEC = "volcano.sh/task-spec"
TASK_INDEX = "volcano.sh/task-index"
PREEMPTABLE = "volcano.sh/preemptable"
FALLBACK_MIN = "volcano-py.io/fallback-min-available"
SLA_WAITING = "sla-waiting-time"
GPU_INDEX = "volcano.sh/gpu-index"
GPU_SPEC = "volcano-py.io/gpu-spec"

_META = ("metadata",)


def _meta_fields(kind: str, *, namespaced: bool, labels: bool, created: bool = True) -> list[Field]:
    out = [
        Field(kind, (*_META, "name"), NAME, REJECT),
        Field(kind, (*_META, "resourceVersion"), text(64), ""),
    ]
    if created:
        out.append(Field(kind, (*_META, "creationTimestamp"), TIME, 0.0, "unknown (0)", 0.0))
    if labels:
        out.append(Field(kind, (*_META, "labels"), LABELS, REJECT, absent={}))
    if namespaced:
        out.append(Field(kind, (*_META, "namespace"), text(63, empty=False), REJECT, absent="default"))
    return out


_CHECKS: dict[str, Callable[[Any], Any]] = {}


def _checks() -> dict[str, Callable[[Any], Any]]:
    """The structure readers, imported late (they import this module)."""
    if _CHECKS:
        return _CHECKS
    from scheduler.api import convert, pod  # noqa: PLC0415

    _CHECKS.update({
        "affinity": pod.check_affinity, "tolerations": pod.check_tolerations, "spread": pod.check_spread,
        "ports": pod.check_ports, "volumes": convert.check_volumes, "owners": convert.check_owners,
        "gates": convert.check_gates, "conditions": convert.check_conditions, "taints": pod.check_taints,
        "node_conditions": convert.check_node_conditions, "topology": convert.check_network_topology,
        "members": convert.check_members, "task_minimums": convert.check_task_minimums,
        "pod_conditions": convert.check_pod_conditions, "request": convert.check_request,
    })
    return _CHECKS


def _late(name: str, wanted: type = dict, *, walk: bool = True) -> Parser:
    def check(value: Any) -> Any:
        return (_CHECKS or _checks())[name](value)

    return structure(check, wanted, walk=walk)


POD_PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")
PG_PHASES = ("Pending", "Inqueue", "Running", "Unknown", "Completed")
QUEUE_STATES = ("Open", "Closed", "Closing", "Unknown")

FIELDS: tuple[Field, ...] = (
    # ---- Pod (cache/parse.py, convert.task_from_pod, the snapshot builder, the partial-gang policy)
    *_meta_fields("Pod", namespaced=True, labels=True),
    Field("Pod", (*_META, "uid"), KEY_TEXT, ""),
    Field("Pod", (*_META, "deletionTimestamp"), TIME, 1.0, "being deleted"),
    Field("Pod", (*_META, "annotations"), ANNOTATIONS, REJECT, absent={}),
    Field("Pod", (*_META, "annotations", GROUP_NAME), NAME, REJECT),
    Field("Pod", (*_META, "annotations", MIN_MEMBER), integer(1, INT32, text=True), 2,
          "a gang (the pod waits for its PodGroup)"),
    Field("Pod", (*_META, "annotations", TASK_SPEC), KEY_TEXT, "", "no task"),
    Field("Pod", (*_META, "labels", TASK_SPEC), KEY_TEXT, "", "no task"),
    # Volcano: pkg/scheduler/api/pod_info.go GetPodPreemptable; the annotation first, then the label; a value
    # strconv.ParseBool refuses leaves the pod protected.
    Field("Pod", (*_META, "annotations", PREEMPTABLE), GO_BOOL, False, "not preemptable (protected)"),
    Field("Pod", (*_META, "labels", PREEMPTABLE), GO_BOOL, False, "not preemptable (protected)"),
    Field("Pod", (*_META, "annotations", TASK_INDEX), integer(0, INT32, text=True), -1, "no index"),
    Field("Pod", (*_META, "labels", TASK_INDEX), integer(0, INT32, text=True), -1, "no index"),
    Field("Pod", (*_META, "annotations", GPU_INDEX), text(1024), "", "no cards recorded"),
    Field("Pod", (*_META, "annotations", GPU_SPEC), text(1024), "", "any GPU model"),
    Field("Pod", (*_META, "ownerReferences"), _late("owners", list), (), "no owner (never evicted to be recreated)",
          ()),
    Field("Pod", ("spec", "schedulerName"), KEY_TEXT, "", "another scheduler's", "default-scheduler"),
    Field("Pod", ("spec", "nodeName"), KEY_TEXT, REJECT, absent=""),
    Field("Pod", ("spec", "priority"), integer(-INT32 - 1, 1_000_000_000), 0, "priority 0"),
    Field("Pod", ("spec", "priorityClassName"), KEY_TEXT, "", "no priority class", ""),
    # The request: containers' and init containers' resources (and restartPolicy), overhead, pod-level resources.
    Field("Pod", ("spec", "containers"), _late("request", list, walk=False), REJECT, absent=[]),
    Field("Pod", ("spec", "initContainers"), _late("request", list, walk=False), REJECT, absent=[]),
    Field("Pod", ("spec", "containers", "*", "ports"), _late("ports", list), REJECT, absent=()),
    Field("Pod", ("spec", "overhead"), QUANTITIES, REJECT, absent=ZERO),
    Field("Pod", ("spec", "resources"), _late("request", walk=False), REJECT),
    Field("Pod", ("spec", "nodeSelector"), LABELS, REJECT, absent={}),
    Field("Pod", ("spec", "affinity"), _late("affinity"), REJECT),
    Field("Pod", ("spec", "tolerations"), _late("tolerations", list), REJECT, absent=()),
    Field("Pod", ("spec", "topologySpreadConstraints"), _late("spread", list), REJECT, absent=()),
    Field("Pod", ("spec", "schedulingGates"), _late("gates", list), "?", "gated (an unreadable gate)", ""),
    Field("Pod", ("spec", "volumes"), _late("volumes", list), REJECT, absent=()),
    Field("Pod", ("status", "phase"), enum(*POD_PHASES), "Unknown", "Unknown", "Pending"),
    Field("Pod", ("status", "conditions"), _late("pod_conditions", list), None, "not known to be bound", None,
          edge=False),
    # ---- PodGroup (convert.job_from_podgroup; gang's timeout, sla's waiting time)
    *_meta_fields("PodGroup", namespaced=True, labels=False),
    Field("PodGroup", (*_META, "annotations"), ANNOTATIONS, REJECT, absent={}),
    Field("PodGroup", (*_META, "annotations", FALLBACK_MIN), integer(1, INT32, text=True), None,
          "no smaller minimum"),
    Field("PodGroup", (*_META, "annotations", SLA_WAITING), duration(DURATION_MAX), None,
          "the sla plugin's waiting time"),
    Field("PodGroup", ("spec", "minMember"), integer(0, INT32), REJECT),
    Field("PodGroup", ("spec", "minAvailable"), integer(0, INT32), REJECT, absent=1),
    Field("PodGroup", ("spec", "minResources"), QUANTITIES, REJECT),
    Field("PodGroup", ("spec", "minTaskMember"), _late("task_minimums"), REJECT, absent={}),
    Field("PodGroup", ("spec", "queue"), KEY_TEXT, REJECT, absent=""),
    Field("PodGroup", ("spec", "priorityClassName"), KEY_TEXT, "", "no priority class", ""),
    Field("PodGroup", ("spec", "networkTopology"), _late("topology"), REJECT),
    Field("PodGroup", ("spec", "scheduleTimeoutSeconds"), number(0, TIMEOUT_MAX), None, "no timeout"),
    Field("PodGroup", ("status", "phase"), enum(*PG_PHASES), "Pending", "Pending", "Pending"),
    Field("PodGroup", ("status", "conditions"), _late("conditions", list), (), "no conditions", ()),
    Field("PodGroup", ("status", "minMemberOverride"), integer(1, INT32), None, "no override"),
    Field("PodGroup", ("status", "running"), integer(0, INT32), 0, "0", 0),
    Field("PodGroup", ("status", "succeeded"), integer(0, INT32), 0, "0", 0),
    Field("PodGroup", ("status", "failed"), integer(0, INT32), 0, "0", 0),
    # ---- Queue (convert.queue_from_object)
    *_meta_fields("Queue", namespaced=False, labels=False),
    Field("Queue", ("spec", "weight"), integer(0, INT32), 1, "weight 1", 1),
    Field("Queue", ("spec", "capability"), QUANTITIES, REJECT),
    Field("Queue", ("spec", "guarantee", "resource"), QUANTITIES, REJECT, absent=ZERO),
    Field("Queue", ("spec", "deserved"), QUANTITIES, REJECT),
    Field("Queue", ("spec", "state"), enum(*QUEUE_STATES), "Closed", "Closed", "Open"),
    Field("Queue", ("status", "state"), enum(*QUEUE_STATES), "Closed", "Closed"),
    Field("Queue", ("spec", "reclaimable"), JSON_BOOL, False, "not reclaimable", True),
    Field("Queue", ("spec", "priority"), integer(-INT32 - 1, INT32), 0, "priority 0", 0),
    Field("Queue", ("spec", "parent"), KEY_TEXT, REJECT, absent=""),
    # ---- Node (convert.node_from_object)
    *_meta_fields("Node", namespaced=False, labels=True, created=False),
    Field("Node", ("status", "allocatable"), QUANTITIES, REJECT),
    Field("Node", ("status", "capacity"), QUANTITIES, REJECT),
    Field("Node", ("status", "conditions"), _late("node_conditions", list), False, "not ready", True),
    Field("Node", ("spec", "taints"), _late("taints", list), REJECT, absent=()),
    Field("Node", ("spec", "unschedulable"), JSON_BOOL, True, "unschedulable", False),
    # ---- PriorityClass (cache/parse.py: the value a pod's or PodGroup's priorityClassName names)
    Field("PriorityClass", (*_META, "name"), NAME, REJECT),
    Field("PriorityClass", (*_META, "resourceVersion"), text(64), ""),
    Field("PriorityClass", ("value",), integer(-INT32 - 1, 1_000_000_000), REJECT, absent=0),
    # ---- HyperNode (convert.hypernode_from_object; solver/topology.py reads what it returns)
    *_meta_fields("HyperNode", namespaced=False, labels=False, created=False),
    Field("HyperNode", ("spec", "tier"), integer(1, 64), REJECT, absent=1),
    Field("HyperNode", ("spec", "members"), _late("members", list), REJECT, absent=()),
)

_BY_NAME: dict[tuple[str, str], Field] = {(f.kind, f.name): f for f in FIELDS}
assert len(_BY_NAME) == len(FIELDS), "a field listed twice"  # noqa: S101 - a table bug, at import


def field(kind: str, name: str) -> Field:
    """The table's entry; a reader asking for a field the table does not list fails (KeyError) at import."""
    return _BY_NAME[(kind, name)]


def fields_of(kind: str) -> tuple[Field, ...]:
    return tuple(f for f in FIELDS if f.kind == kind)
