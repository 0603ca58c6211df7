"""Layer `api`: the readers of nested structures the field table names (api/fields.py), registered by name.

Each takes a value already checked for its type and bounded (`field_parsers.structure`) and returns what the infos
keep, or raises `BadValueError`.
The pod's placement structures (affinity, tolerations, spread, ports, taints) are read in
api/pod.py, next to the types they make, and registered there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.api import field_parsers as P
from scheduler.api.member_pattern import PatternError, compile_member_pattern
from scheduler.api.resources import ZERO as ZERO, QuantityError, Resource, pod_request

_TIER = P.integer(0, 64)


def check_owners(raw: list[Any]) -> tuple[tuple[str, bool], ...]:
    """`metadata.ownerReferences` as (uid, controller) pairs; an entry that is not an object is skipped."""
    return tuple(
        (str(r.get("uid")), r.get("controller") is True) for r in raw if isinstance(r, Mapping)
    )


def check_request(raw: Any) -> Resource:
    """The table's parser for the fields of a pod's request: what `pod_request` makes of them alone."""
    spec = {"containers": raw} if isinstance(raw, list) else {"resources": raw}
    try:
        return pod_request(spec)
    except QuantityError as exc:
        raise P.BadValueError(str(exc)[:200]) from None


def check_gates(raw: list[Any]) -> str:
    if not raw:
        return ""
    first = raw[0]
    name = first.get("name") if isinstance(first, Mapping) else None
    return name if type(name) is str and name else "?"


def check_pod_conditions(raw: list[Any]) -> float | None:
    """When the pod was bound (its `PodScheduled=True` transition), None if it does not say."""
    for c in raw:
        if isinstance(c, Mapping) and c.get("type") == "PodScheduled" and c.get("status") == "True":
            at = c.get("lastTransitionTime")
            seconds = P.TIME.parse(at) if at is not None else 0.0
            if seconds:
                return seconds
    return None


def check_node_conditions(raw: list[Any]) -> bool:
    """Ready: a `Ready=True` condition; no conditions at all reads as ready (a node made by hand or a test)."""
    if not raw:
        return True
    return any(isinstance(c, Mapping) and c.get("type") == "Ready" and c.get("status") == "True" for c in raw)


def check_task_minimums(raw: Mapping[str, Any]) -> dict[str, int]:
    count = P.integer(0, P.INT32)
    out = {}
    for k, v in raw.items():
        if type(k) is not str or len(k) > P.NAME_MAX:
            raise P.BadValueError(f"names a task that is no task name: {P.show(k)}")
        out[k] = count.parse(v)
    return out


def check_conditions(raw: list[Any]) -> tuple[tuple[str, str, str, str], ...]:
    """A PodGroup's `status.conditions` as (type, status, reason, message), each a string of at most TEXT_MAX
    (read every cycle, so checked here field by field rather than by walking the whole list); an entry that is
    not an object is skipped (api/convert.py makes them Conditions)."""
    out = []
    for c in raw:
        if not isinstance(c, Mapping):
            continue
        row = (c.get("type"), c.get("status"), c.get("reason", ""), c.get("message", ""))
        for value in row:
            if type(value) is not str or len(value) > P.TEXT_MAX:
                raise P.BadValueError(f"has a condition field that is not a string of at most {P.TEXT_MAX} characters")
        out.append(row)
    return tuple(out)  # type: ignore[arg-type]


_TIER_NAME = P.text(P.LABEL_KEY_MAX)  # a HyperNode's spec.tierName is a label key (discovery names tiers so)


def check_network_topology(raw: Mapping[str, Any]) -> dict[str, Any]:
    """`spec.networkTopology`: `mode` hard or soft (hard when absent), `highestTierAllowed` a tier (0..64) or
    `highestTierName` (a HyperNode `spec.tierName`), never both: Volcano's webhook refuses a spec with both
    (pkg/webhooks/admission/podgroups/validate/validate_podgroup.go validateNetworkTopology), so one that got
    past it is unreadable here (a FieldInvalid reason on the PodGroup, logged once)."""
    mode = raw.get("mode", "hard")
    if mode is not None and (type(mode) is not str or mode.lower() not in ("hard", "soft")):
        raise P.BadValueError("mode is not hard or soft")
    out: dict[str, Any] = {"mode": (mode or "hard").lower()}
    allowed = raw.get("highestTierAllowed")
    if allowed is not None:
        out["highestTierAllowed"] = _TIER.parse(allowed)
    name = raw.get("highestTierName")
    if name is not None and name != "":
        if allowed is not None:
            raise P.BadValueError("sets both highestTierAllowed and highestTierName (at most one may be set)")
        out["highestTierName"] = _TIER_NAME.parse(name)
    return out


def check_members(raw: list[Any]) -> list[dict[str, Any]]:
    """`spec.members` of a HyperNode: each `type` Node or HyperNode and a selector, `exactMatch.name` or
    `regexMatch.pattern` (a pattern that does not compile, or longer than 1 KiB, is refused)."""
    out = []
    for member in raw:
        if not isinstance(member, Mapping):
            raise P.BadValueError("has a member that is not an object")
        kind = member.get("type", "Node")
        if kind not in ("Node", "HyperNode"):
            raise P.BadValueError("has a member whose type is not Node or HyperNode")
        selector = member.get("selector") or {}
        if not isinstance(selector, Mapping):
            raise P.BadValueError("has a selector that is not an object")
        exact = (selector.get("exactMatch") or {}).get("name") if selector.get("exactMatch") else None
        pattern = (selector.get("regexMatch") or {}).get("pattern") if selector.get("regexMatch") else None
        cleaned: dict[str, Any] = {}
        if exact is not None:
            cleaned["exactMatch"] = {"name": P.NAME.parse(exact)}
        elif pattern is not None:
            try:
                compile_member_pattern(pattern)  # RE2, as Go's regexp: linear time, Go's syntax
            except PatternError as exc:
                raise P.BadValueError(f"has a regexMatch pattern that {exc}") from None
            cleaned["regexMatch"] = {"pattern": pattern}
        out.append({"type": kind, "selector": cleaned})
    return out


def check_volumes(raw: list[Any]) -> tuple[tuple[bool, str], ...]:
    """`spec.volumes` as the claims they use: (True, claimName) for a `persistentVolumeClaim`, (False, volume
    name) for a generic `ephemeral` volume, whose claim is `<pod>-<volume>` (`api.volumes.claims_of`)."""
    out = []
    for volume in raw:
        if not isinstance(volume, Mapping):
            continue
        source = volume.get("persistentVolumeClaim")
        if isinstance(source, Mapping):
            out.append((True, P.KEY_TEXT.parse(source.get("claimName") or "")))
        elif volume.get("ephemeral") is not None:
            out.append((False, P.KEY_TEXT.parse(volume.get("name") or "")))
    return tuple(out)


def register_all() -> None:
    """Register each reader under the name the field table (api/fields.py) gives it; fields.py calls this once."""
    for name, check in (
        ("owners", check_owners), ("request", check_request), ("gates", check_gates),
        ("pod_conditions", check_pod_conditions), ("node_conditions", check_node_conditions),
        ("task_minimums", check_task_minimums), ("conditions", check_conditions),
        ("topology", check_network_topology), ("members", check_members), ("volumes", check_volumes),
    ):
        P.register(name, check)
