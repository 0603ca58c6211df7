"""Layer `api`: ResourceQuotas (core/v1) as the `resourcequota` plugin reads them, each field parsed once here.

Volcano's scheduler cache keeps each ResourceQuota's *status* (`status.hard`, `status.used`, which the
kube-controller-manager's quota controller writes) per namespace (pkg/scheduler/api/namespace_info.go
`NamespaceCollection.Update`), and the plugin compares a PodGroup's `spec.minResources` with them name by name
(pkg/scheduler/plugins/resourcequota/resourcequota.go). So amounts here are kept by their exact names, as
written (`cpu`, `requests.cpu`, `limits.memory`, `count/pods`, `requests.nvidia.com/gpu`): no name is translated
into another.

Amounts are exact integers in nano-units (a quantity times 10^9, rounded up): Kubernetes keeps no quantity finer
than 1n, so the comparisons here are Go's `resource.Quantity.Cmp`, exactly, at any size (Python integers do not
overflow; the quantity parser bounds each value below 2^63).

A quota whose status cannot be read is left out (`REJECT` in the field table), with a `FieldInvalid` reason and
one log line: Volcano never sees such an object (its informer cannot decode it; the apiserver would not store it),
and the apiserver's own quota admission still refuses the pods that pass it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import localcontext
from types import MappingProxyType
from typing import Any

from scheduler.api import fields
from scheduler.api.field_parsers import BadValueError, FieldError, register, show
from scheduler.api.reasons import FieldInvalid
from scheduler.api.resources import QuantityError, parse_quantity

NANO = 10**9
QUOTA_NAMES_MAX = 256  # a quota names a few resources; a job controller's minResources about ten per resource
QUOTA_PREFIXES = ("requests.", "limits.")
_BINARY = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))

QuotaList = Mapping[str, int]  # resource name, exactly as written -> amount in nano-units


def to_nano(value: object, name: str) -> int:
    """A Kubernetes quantity in nano-units (rounded up, as Kubernetes rounds anything finer than 1n)."""
    try:
        quantity = parse_quantity(value, field=name)
    except QuantityError as exc:
        raise BadValueError(str(exc)) from None
    if quantity < 0:
        raise BadValueError(f"{name}: {show(value)} is negative")
    with localcontext() as ctx:
        ctx.prec = 80  # |quantity| < 2^63: times 10^9 fits exactly
        return int((quantity * NANO).to_integral_value(rounding="ROUND_CEILING"))


def _quota_amounts(value: Any) -> QuotaList:
    """A map of resource name to quantity (a quota's hard or used, a PodGroup's minResources), every name kept."""
    if not isinstance(value, Mapping):
        raise BadValueError(f"expected a map of resource name to quantity, got {type(value).__name__}")
    if len(value) > QUOTA_NAMES_MAX:
        raise BadValueError(f"names more than {QUOTA_NAMES_MAX} resources")
    out: dict[str, int] = {}
    for name, amount in value.items():
        if type(name) is not str or not name or len(name) > fields.LABEL_KEY_MAX:
            raise BadValueError(f"names a resource that is no resource name: {show(name)}")
        out[name] = to_nano(amount, name)
    return MappingProxyType(out)


register("quota_amounts", _quota_amounts)

F_NAME = fields.field("ResourceQuota", "metadata.name")
F_NAMESPACE = fields.field("ResourceQuota", "metadata.namespace")
F_HARD = fields.field("ResourceQuota", "status.hard")
F_USED = fields.field("ResourceQuota", "status.used")
F_QUOTA_REQUEST = fields.field("PodGroup", "spec.minResources.*")  # by exact name (api/convert.py job_from_podgroup)


@dataclass(frozen=True, slots=True)
class ResourceQuotaInfo:
    """One ResourceQuota's status, as Volcano's cache keeps it: `hard` and `used`, by exact resource name."""

    namespace: str
    name: str
    hard: QuotaList = field(default_factory=dict)
    used: QuotaList = field(default_factory=dict)


def quota_from_object(obj: Mapping[str, Any], sink: list[FieldInvalid] | None = None) -> ResourceQuotaInfo:
    """The quota's status, each field through the table (FieldError: the quota is left out, with the reason)."""
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        raise FieldError(FieldInvalid("ResourceQuota", "?", "metadata", "is not an object", show(meta)))
    name = F_NAME.read(meta.get("name"), "?", sink)
    if name is None:
        raise FieldError(FieldInvalid("ResourceQuota", "?", "metadata.name", "is missing", "null"))
    namespace = F_NAMESPACE.read(meta.get("namespace"), name, sink)
    key = f"{namespace}/{name}"
    status = obj.get("status")
    if status is None:  # the quota controller has not written it yet: no limit known, as in Volcano
        return ResourceQuotaInfo(namespace, name)
    if not isinstance(status, Mapping):
        raise FieldError(FieldInvalid("ResourceQuota", key, "status", "is not an object", show(status)))
    return ResourceQuotaInfo(namespace, name, F_HARD.read(status.get("hard"), key, sink),
                             F_USED.read(status.get("used"), key, sink))


def quota_name_base(name: str) -> str:
    """`requests.memory` -> `memory`: the resource a quota name counts (for showing its amounts)."""
    for prefix in QUOTA_PREFIXES:
        if name.startswith(prefix):
            return name[len(prefix):]
    return name


def _in_bytes(name: str) -> bool:
    base = quota_name_base(name)
    return base in ("memory", "ephemeral-storage", "storage") or base.startswith("hugepages-") or \
        base.endswith(".storage")


def show_quota(name: str, nano: int) -> str:
    """An amount as a Kubernetes quantity (`2`, `500m`, `16Gi`, `3n`), exactly."""
    whole, fraction = divmod(nano, NANO)
    if fraction == 0:
        if _in_bytes(name):
            for suffix, scale in _BINARY:
                if whole >= scale and whole % scale == 0:
                    return f"{whole // scale}{suffix}"
        return str(whole)
    milli, rest = divmod(nano, NANO // 1000)
    if rest == 0:
        return f"{milli}m"
    return f"{nano}n" if nano % 1000 else f"{nano // 1000}u"
