"""Layer `cache`: the DRA objects the watches keep (`cache/store.py`: ResourceSlices, DeviceClasses,
ResourceClaims, ResourceClaimTemplates), read into `api/dra.py` values for the allocator (`scheduler/dra/`).

Each object is parsed once per resourceVersion (a cluster of 1,000 GPU nodes has 1,000 slices or more, which
change seldom); one that cannot be read is left out with its typed `FieldInvalid` reason, logged once per object
and problem, and kept in `problems` for `explain`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from scheduler.api.convert import key_of
from scheduler.api.dra import DraObjects
from scheduler.api.dra_parse import claim_from_object, class_from_object, slice_from_object, template_from_object
from scheduler.api.field_parsers import FieldError, describe
from scheduler.api.reasons import FieldInvalid
from scheduler.cache.store import Stores

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(slots=True)
class _Kind(Generic[T]):
    name: str
    parse: Callable[[Mapping[str, Any]], T]
    parsed: dict[str, tuple[str, T | None]] = field(default_factory=dict)  # key -> (resourceVersion, value)


class DraReader:
    """Reads the four kinds from the stores; keeps each parsed value until its object's resourceVersion changes."""

    def __init__(self) -> None:
        self._slices = _Kind("ResourceSlice", slice_from_object)
        self._classes = _Kind("DeviceClass", class_from_object)
        self._claims = _Kind("ResourceClaim", claim_from_object)
        self._templates = _Kind("ResourceClaimTemplate", template_from_object)
        self.problems: dict[tuple[str, str], FieldInvalid] = {}
        self._logged: set[tuple[str, str, FieldInvalid]] = set()

    def read(self, stores: Stores) -> DraObjects | None:
        """None until the four kinds were listed (a cluster without the API, a ClusterRole without the rights):
        DRA is then not modelled, as before it was read."""
        with stores.lock:
            if not all(w.listed for w in stores.dra):
                return None
            raw = [list(w.objects.values()) for w in stores.dra]
        return DraObjects(self._read(self._slices, raw[0]), self._read(self._classes, raw[1]),
                          self._read(self._claims, raw[2]), self._read(self._templates, raw[3]))

    def _read(self, kind: _Kind[T], objects: Iterable[Any]) -> tuple[T, ...]:
        out: list[T] = []
        seen: set[str] = set()
        for obj in objects:
            key = key_of(obj)
            seen.add(key)
            meta = obj.get("metadata")
            rv = str(meta.get("resourceVersion", "")) if isinstance(meta, Mapping) else ""
            held = kind.parsed.get(key)
            if held is None or held[0] != rv or not rv:
                held = kind.parsed[key] = (rv, self._parse(kind, key, obj))
            if held[1] is not None:
                out.append(held[1])
        for gone in kind.parsed.keys() - seen:
            del kind.parsed[gone]
            self.problems.pop((kind.name, gone), None)
        return tuple(out)

    def _parse(self, kind: _Kind[T], key: str, obj: Mapping[str, Any]) -> T | None:
        try:
            value = kind.parse(obj)
        except FieldError as err:
            self._note(kind.name, key, err.reason)
            return None
        except Exception as exc:  # noqa: BLE001 - one unreadable object never fails the cycle
            self._note(kind.name, key, FieldInvalid(kind.name, key, "?", f"cannot be read ({type(exc).__name__})",
                                                    ""))
            return None
        self.problems.pop((kind.name, key), None)
        return value

    def _note(self, kind: str, key: str, reason: FieldInvalid) -> None:
        self.problems[(kind, key)] = reason
        mark = (kind, key, reason)
        if mark not in self._logged:
            if len(self._logged) > 100_000:
                self._logged.clear()
            self._logged.add(mark)
            log.warning("skipping %s %s: %s", kind, key, describe(reason))
