"""Layer `api`: reasons to JSON and back, exactly, by their declared field types (`reasons.py` defines them).

A nested dataclass carries no `kind`: its field's type says what it is. Amounts (sorted `(name, units)` pairs)
are a JSON object of resource to units.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from typing import Any

Amounts = tuple[tuple[str, int], ...]
JsonObject = dict[str, Any]


class ReasonError(ValueError):
    """A published reason this version cannot read (an unknown kind, a missing or mistyped field)."""


def encode_object(obj: Any) -> JsonObject:
    """The fields of a reason (or a value nested in one), by their declared types; a nested object carries no
    `kind`: its field's type says what it is."""
    hints = _hints(type(obj))
    return {f.name: _encode(hints[f.name], getattr(obj, f.name)) for f in dataclasses.fields(obj)}


def _encode(hint: Any, value: Any) -> Any:
    if hint == Amounts:
        return {name: units for name, units in value}
    if dataclasses.is_dataclass(value):
        return encode_object(value)
    if isinstance(value, tuple):
        item = typing.get_args(hint)[0]
        return [_encode(item, v) for v in value]
    return value


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    hints = _HINTS.get(cls)
    if hints is None:
        hints = _HINTS[cls] = typing.get_type_hints(cls)
    return hints


def decode_object(cls: type[Any], obj: Mapping[str, Any]) -> Any:
    hints = _hints(cls)
    values = {}
    for f in dataclasses.fields(cls):
        if f.name in obj:
            values[f.name] = _decode(hints[f.name], obj[f.name], f.name)
        elif f.default is dataclasses.MISSING:
            raise ReasonError(f"{getattr(cls, 'kind', cls.__name__)}: missing field {f.name!r}")
    return cls(**values)


def _decode(hint: Any, value: Any, name: str) -> Any:
    if hint is bool or hint is str:
        if not isinstance(value, hint):
            raise ReasonError(f"{name}: expected {hint.__name__}, got {value!r}")
        return value
    if hint is int:
        if not isinstance(value, int) or isinstance(value, bool):
            raise ReasonError(f"{name}: expected an integer, got {value!r}")
        return value
    if hint is float:
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise ReasonError(f"{name}: expected a number, got {value!r}")
        return float(value)
    if hint == Amounts:
        if not isinstance(value, Mapping):
            raise ReasonError(f"{name}: expected a map of resource to units, got {value!r}")
        return tuple((str(k), _decode(int, v, f"{name}.{k}")) for k, v in value.items())
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):  # a reason, or a value nested in one
        if not isinstance(value, Mapping):
            raise ReasonError(f"{name}: expected an object, got {value!r}")
        return decode_object(hint, value)
    if typing.get_origin(hint) is tuple:
        item = typing.get_args(hint)[0]
        if not isinstance(value, list):
            raise ReasonError(f"{name}: expected a list, got {value!r}")
        return tuple(_decode(item, v, name) for v in value)
    raise ReasonError(f"{name}: cannot read a field of type {hint!r}")  # pragma: no cover - a bug in a new reason
