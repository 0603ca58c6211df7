"""Layer `api`: the reasons of Dynamic Resource Allocation (`api/dra.py`, `scheduler/dra/`): why a pod's
ResourceClaims cannot be allocated on a node. Plain fields only (names and counts), as every reason
(`api/reasons.py`); `DRA_KINDS` lists them for the JSON reader, `api/messages_dra.py` makes their sentences.

A claim, an object that cannot be read at all, gives the `FieldInvalid` reason every kind shares (`api/dra_parse.py`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from scheduler.api.reason_base import Reason


@dataclass(frozen=True, slots=True)
class ClaimDevicesShort(Reason):
    """Request `request` of claim `claim` (a `namespace/name`; a template's claim not made yet is named after the
    template) asks `needed` devices of class `device_class`; the best node, `node`, has `available` that its
    selectors accept and no other claim holds."""

    kind: ClassVar[str] = "ClaimDevicesShort"
    claim: str
    request: str
    device_class: str
    needed: int
    available: int
    node: str = ""

    @property
    def short(self) -> int:
        return max(self.needed - self.available, 0)


@dataclass(frozen=True, slots=True)
class ClaimConstraintUnmet(Reason):
    """Each request has devices enough on `node`, but no choice of them agrees on `attribute` (matchAttribute)."""

    kind: ClassVar[str] = "ClaimConstraintUnmet"
    claim: str
    attribute: str
    requests: tuple[str, ...]
    node: str = ""


@dataclass(frozen=True, slots=True)
class ClaimMissing(Reason):
    """The pod names a ResourceClaim (or a ResourceClaimTemplate, `template`) that does not exist or could not be
    read."""

    kind: ClassVar[str] = "ClaimMissing"
    pod: str
    claim: str
    template: bool = False


@dataclass(frozen=True, slots=True)
class DeviceClassMissing(Reason):
    kind: ClassVar[str] = "DeviceClassMissing"
    claim: str
    request: str
    device_class: str


@dataclass(frozen=True, slots=True)
class ClaimSelectorInvalid(Reason):
    """A CEL selector (the claim's, or its class's when `device_class` is set) that does not compile, or that
    gave an error or a non-boolean for a device: Kubernetes aborts the claim's allocation then, and so do we."""

    kind: ClassVar[str] = "ClaimSelectorInvalid"
    claim: str
    request: str
    expression: str
    problem: str
    device_class: str = ""


@dataclass(frozen=True, slots=True)
class AdminAccessRefused(Reason):
    """The request asks admin access and the scheduler is not configured to allow it."""

    kind: ClassVar[str] = "AdminAccessRefused"
    claim: str
    request: str


@dataclass(frozen=True, slots=True)
class ClaimNotReachable(Reason):
    """The claim is allocated already (shared with other pods), to devices that `node` cannot reach."""

    kind: ClassVar[str] = "ClaimNotReachable"
    claim: str
    node: str = ""


@dataclass(frozen=True, slots=True)
class ClaimUnusable(Reason):
    """The claim is being deleted (`problem` "deleting"), holds the most consumers it may (`reservedFor`), or asks
    for more devices than an allocation may hold."""

    kind: ClassVar[str] = "ClaimUnusable"
    claim: str
    problem: str


DRA_KINDS: dict[str, type[Reason]] = {
    cls.kind: cls
    for cls in (ClaimDevicesShort, ClaimConstraintUnmet, ClaimMissing, DeviceClassMissing, ClaimSelectorInvalid,
                AdminAccessRefused, ClaimNotReachable, ClaimUnusable)
}
