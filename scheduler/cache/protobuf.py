"""Layer `cache`: the two objects the scheduler creates once per bound pod, a Binding and its `Scheduled` Event, as
Kubernetes protobuf (`application/vnd.kubernetes.protobuf`), the encoding kube-scheduler and client-go send.

The apiserver decodes a protobuf body with less CPU than the same object as JSON, and a scheduler sends two of
these per pod it binds; on a shared control plane that server CPU is what every client waits on. Only what the
scheduler writes is covered: the fields below, from k8s.io/api core/v1 and k8s.io/apimachinery meta/v1 and
runtime `generated.proto` (the field numbers are theirs). Anything else in the object raises `UnencodableError`, and the
caller sends JSON instead, so a field added to a body later is never silently dropped.

Wire form (k8s.io/apimachinery/pkg/runtime/serializer/protobuf): the 4 bytes `k8s\\x00`, then a `runtime.Unknown`
whose `typeMeta` names the apiVersion and kind and whose `raw` is the object's own message.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.api.timestamps import parse_datetime

CONTENT_TYPE = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"
ENABLED = True  # bench/py_variant.py turns it off to measure JSON bodies

# message -> JSON field -> (field number, type): a message name, or "string", "int", "map", "time"
SCHEMA: dict[str, dict[str, tuple[int, str]]] = {
    "ObjectMeta": {"name": (1, "string"), "generateName": (2, "string"), "namespace": (3, "string"),
                   "uid": (5, "string"), "resourceVersion": (6, "string"), "labels": (11, "map"),
                   "annotations": (12, "map")},
    "ObjectReference": {"kind": (1, "string"), "namespace": (2, "string"), "name": (3, "string"),
                        "uid": (4, "string"), "apiVersion": (5, "string"), "resourceVersion": (6, "string"),
                        "fieldPath": (7, "string")},
    "EventSource": {"component": (1, "string"), "host": (2, "string")},
    "Binding": {"metadata": (1, "ObjectMeta"), "target": (2, "ObjectReference")},
    "Event": {"metadata": (1, "ObjectMeta"), "involvedObject": (2, "ObjectReference"), "reason": (3, "string"),
              "message": (4, "string"), "source": (5, "EventSource"), "firstTimestamp": (6, "time"),
              "lastTimestamp": (7, "time"), "count": (8, "int"), "type": (9, "string"), "action": (12, "string"),
              "related": (13, "ObjectReference"), "reportingComponent": (14, "string"),
              "reportingInstance": (15, "string")},
}
TOP_LEVEL = {"Binding": "v1", "Event": "v1"}  # kind -> the apiVersion its body must carry


class UnencodableError(ValueError):
    """The body holds something this encoder does not cover: send it as JSON."""


_SMALL = [bytes((i,)) for i in range(0x80)]  # one-byte varints: every tag here and most lengths


def _varint(n: int) -> bytes:
    if 0 <= n < 0x80:
        return _SMALL[n]
    if n < 0:
        n += 1 << 64  # int64/int32 negatives: ten bytes of two's complement, as protobuf encodes them
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _tag(number: int, wire: int) -> bytes:
    return _varint(number << 3 | wire)


def _length_delimited(number: int, data: bytes) -> bytes:
    return _tag(number, 2) + _varint(len(data)) + data


def _string(number: int, value: object) -> bytes:
    if not isinstance(value, str):
        raise UnencodableError(f"field {number}: {type(value).__name__}, not a string")
    return _length_delimited(number, value.encode())


_times: dict[str, int] = {}  # RFC 3339 text -> seconds: a cycle's events share a handful of timestamps


def _seconds(value: object) -> int:
    cached = _times.get(value) if isinstance(value, str) else None  # one look-up: another thread may clear it
    if cached is not None:
        return cached
    parsed = parse_datetime(value)
    if parsed is None or parsed.microsecond:  # meta/v1 Time has whole seconds in JSON
        raise UnencodableError(f"{value!r} is not an RFC 3339 time")
    if len(_times) >= 64:
        _times.clear()
    seconds = _times[str(value)] = int(parsed.timestamp())
    return seconds


def _map(tag: bytes, value: object) -> bytes:
    if not isinstance(value, dict):
        raise UnencodableError(f"{type(value).__name__}, not a map")
    # map<string,string>: a repeated entry message {key = 1, value = 2}; sorted, as Go's generated code writes it
    return b"".join(_delimited(tag, _string(1, k) + _string(2, v)) for k, v in sorted(value.items()))


def _compiled(name: str) -> dict[str, tuple[bytes, str]]:
    """A message's fields as (the field's tag bytes, type): the tag of a string, message, map or time is
    length-delimited (wire type 2), an int's a varint (wire type 0)."""
    return {key: (_tag(number, 0 if kind == "int" else 2), kind) for key, (number, kind) in SCHEMA[name].items()}


def _delimited(tag: bytes, data: bytes) -> bytes:
    n = len(data)
    return tag + (_SMALL[n] if n < 0x80 else _varint(n)) + data


def _message(name: str, obj: object) -> bytes:
    """The fields in the order the body gives them: a protobuf parser takes fields in any order."""
    if not isinstance(obj, dict):  # a JSON object as the scheduler builds it (a dict is far cheaper to test)
        raise UnencodableError(f"{name}: {type(obj).__name__}, not an object")
    fields = _COMPILED[name]
    parts: list[bytes] = []
    for key, value in obj.items():
        spec = fields.get(key)
        if spec is None:
            raise UnencodableError(f"{name}.{key} is not covered")
        if value is None:
            continue
        tag, kind = spec
        if kind == "string":
            if not isinstance(value, str):
                raise UnencodableError(f"{name}.{key}: {type(value).__name__}, not a string")
            parts.append(_delimited(tag, value.encode()))
        elif kind == "int":
            if not isinstance(value, int) or isinstance(value, bool) or not -(1 << 31) <= value < 1 << 31:
                raise UnencodableError(f"{name}.{key}: {value!r} is not an int32")
            parts.append(tag + _varint(value))
        elif kind == "map":
            parts.append(_map(tag, value))
        elif kind == "time":
            parts.append(_delimited(tag, b"\x08" + _varint(_seconds(value))))  # Time{seconds = 1, a varint}
        else:
            parts.append(_delimited(tag, _message(kind, value)))
    return b"".join(parts)


_COMPILED = {name: _compiled(name) for name in SCHEMA}


def encode(body: Mapping[str, Any]) -> bytes:
    """A Binding or an Event (its JSON form, `apiVersion` and `kind` included) as the apiserver's protobuf body;
    `UnencodableError` for any other object or a field not covered."""
    kind, api_version = body.get("kind"), body.get("apiVersion")
    if not isinstance(kind, str) or kind not in TOP_LEVEL or api_version != TOP_LEVEL[kind]:
        raise UnencodableError(f"{api_version}/{kind} is not covered")
    try:
        raw = _message(kind, {k: v for k, v in body.items() if k not in ("kind", "apiVersion")})
    except (UnicodeEncodeError, TypeError) as exc:  # a lone surrogate (no UTF-8 form); map keys not all strings
        raise UnencodableError(f"{kind}: {exc}") from None
    return _HEADS[kind] + _delimited(b"\x12", raw)  # Unknown.raw = 2


# the envelope and Unknown.typeMeta (= 1) of each kind, the same for every object
_HEADS = {kind: MAGIC + _length_delimited(1, _string(1, v) + _string(2, kind)) for kind, v in TOP_LEVEL.items()}
