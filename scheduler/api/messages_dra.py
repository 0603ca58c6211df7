"""Layer `api`: the sentences of the DRA reasons (`api/reasons_dra.py`), for `api/messages.py`."""

from __future__ import annotations

from scheduler.api import reasons_dra as D
from scheduler.api.reason_base import Reason


def render_dra(reason: Reason) -> str | None:
    """The sentence of a DRA reason; None for any other reason."""
    if isinstance(reason, D.ClaimDevicesShort):
        where = f" (best node {reason.node})" if reason.node else ""
        return (f"claim {reason.claim} request {reason.request}: {reason.needed} device(s) of class "
                f"{reason.device_class} needed, {reason.available} free{where}, {reason.short} short")
    if isinstance(reason, D.ClaimConstraintUnmet):
        where = f" on {reason.node}" if reason.node else ""
        return (f"claim {reason.claim}: no devices for requests {', '.join(reason.requests) or 'all'} agree on "
                f"{reason.attribute}{where}")
    if isinstance(reason, D.ClaimMissing):
        what = "ResourceClaimTemplate" if reason.template else "ResourceClaim"
        return f"pod {reason.pod}: {what} {reason.claim} not found"
    if isinstance(reason, D.DeviceClassMissing):
        return f"claim {reason.claim} request {reason.request}: DeviceClass {reason.device_class} not found"
    if isinstance(reason, D.ClaimSelectorInvalid):
        whose = f"class {reason.device_class} selector" if reason.device_class else "selector"
        return (f"claim {reason.claim} request {reason.request}: {whose} {reason.expression!r} "
                f"{reason.problem}")
    if isinstance(reason, D.AdminAccessRefused):
        return f"claim {reason.claim} request {reason.request}: admin access is not allowed"
    if isinstance(reason, D.ClaimNotReachable):
        where = f" from node {reason.node}" if reason.node else ""
        return f"claim {reason.claim} is allocated to devices not reachable{where}"
    if isinstance(reason, D.ClaimUnusable):
        return f"claim {reason.claim}: {reason.problem}"
    return None
