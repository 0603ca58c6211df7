"""Layer `api`: the base of every reason (`api/reasons.py` lists them all) and `amounts`, kept apart so the
reasons can live in more than one module."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar

from scheduler.api.reason_codec import Amounts, JsonObject, encode_object
from scheduler.api.resources import PODS, Resource


def amounts(resource: Resource, names: Iterable[str] | None = None) -> Amounts:
    """The non-zero amounts of `resource` (pods left out unless named), or exactly those of `names`."""
    if names is None:
        return tuple((n, v) for n, v in resource.items() if v and n != PODS)
    return tuple((n, resource.get(n)) for n in names)


@dataclass(frozen=True, slots=True)
class Reason:
    """A reason a person can act on. Subclasses set `kind`."""

    kind: ClassVar[str] = ""

    def to_json(self) -> JsonObject:
        return {"kind": self.kind, **encode_object(self)}
