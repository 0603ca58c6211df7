"""Layer `api`: integer resource vectors and Kubernetes quantity parsing.

cpu is held in millicores, memory in bytes (milli-bytes would overflow int64 when a large cluster is summed),
`pods` as a count, and every extended resource (``nvidia.com/gpu``, ``volcano.sh/gpu-memory`` ...) in
milli-units so fractional GPU shares fit. Everything is an int: no float ever reaches a comparison.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation, localcontext
from typing import Any

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
GPU = "nvidia.com/gpu"

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}
_QUANTITY = re.compile(
    r"^(?P<num>[+-]?(?:\d+\.?\d*|\.\d+))(?:(?P<bin>Ki|Mi|Gi|Ti|Pi|Ei)|(?P<exp>[eE][+-]?\d+)|(?P<dec>[numkMGTPE]?))$",
    re.ASCII,  # \d is 0-9 only: Kubernetes refuses "١٢" (Arabic-Indic digits), which Python's \d would take as 12
)
# Kubernetes caps quantities far below this; anything larger is a typo, not a cluster.
_MAX_ABS = Decimal(2) ** 63


class QuantityError(ValueError):
    """A resource quantity that Kubernetes would reject; the message names the field and the value."""


def parse_quantity(value: object, *, field: str = "quantity") -> Decimal:
    """Parse a Kubernetes quantity (``100m``, ``1.5``, ``200Gi``, ``1e3``, ``64M``) into an exact Decimal."""
    if isinstance(value, bool):
        raise QuantityError(f"{field}: expected a quantity such as 500m, 2 or 16Gi, got {value!r}")
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            raise QuantityError(f"{field}: expected a finite quantity, got {value!r}")
        number = Decimal(value) if isinstance(value, int) else Decimal(repr(value))
        if abs(number) >= _MAX_ABS:  # the same bound as for text: a JSON number is no way around it
            raise QuantityError(f"{field}: {value!r} is too large")
        return number
    if not isinstance(value, str):
        raise QuantityError(f"{field}: expected a quantity such as 500m, 2 or 16Gi, got {value!r}")
    text = value.strip()
    match = _QUANTITY.match(text)
    if match is None:
        raise QuantityError(
            f"{field}: {value!r} is not a Kubernetes quantity "
            "(expected a number with an optional suffix: m, k, M, G, T, Ki, Mi, Gi, Ti, or an exponent like 1e3)"
        )
    with localcontext() as ctx:
        ctx.prec = 60
        try:
            number = Decimal(match["num"])
            if match["bin"]:
                result = number * _BINARY[match["bin"]]
            elif match["exp"]:
                exponent = int(match["exp"][1:])
                if abs(exponent) > 30:
                    raise QuantityError(f"{field}: exponent in {value!r} is out of range")
                result = number.scaleb(exponent)
            else:
                result = number * _DECIMAL[match["dec"] or ""]
        except InvalidOperation as exc:  # pragma: no cover - the regex admits only valid numbers
            raise QuantityError(f"{field}: {value!r} is not a number") from exc
    if abs(result) >= _MAX_ABS:
        raise QuantityError(f"{field}: {value!r} is too large")
    return result


def _ceil_int(value: Decimal) -> int:
    return int(value.to_integral_value(rounding="ROUND_CEILING"))


def to_units(name: str, value: object, *, field: str | None = None) -> int:
    """A quantity of resource `name` in volcano-py's integer unit (millicores, bytes, count, milli-units).

    Rounds up, as Kubernetes' MilliValue()/Value() do, so a request is never under-counted.
    """
    where = field or name
    quantity = parse_quantity(value, field=where)
    if quantity < 0:
        raise QuantityError(f"{where}: {value!r} is negative; resource quantities must be >= 0")
    if name in (MEMORY, PODS) or name.startswith("hugepages-") or name == "ephemeral-storage":
        units = _ceil_int(quantity)
    else:
        units = _ceil_int(quantity * 1000)
    if units > MAX_UNITS:
        raise QuantityError(f"{where}: {value!r} is too large: volcano-py accepts at most 2^53 of its units per "
                            "quantity (bytes, millicores, milli-units), so a cluster's sums fit the int64 arrays "
                            "of a cycle")
    return units


MAX_UNITS = 2**53  # per quantity: 8 PiB of memory, 9e12 cores or GPUs; a sum over 1,024 of them still fits int64


def format_units(name: str, units: int) -> str:
    """The inverse of `to_units`: the shortest exact Kubernetes quantity string."""
    if name in (MEMORY, PODS) or name.startswith("hugepages-") or name == "ephemeral-storage":
        if name != PODS and units and units % 2**30 == 0:
            return f"{units // 2**30}Gi"
        if name != PODS and units and units % 2**20 == 0:
            return f"{units // 2**20}Mi"
        return str(units)
    if units % 1000 == 0:
        return str(units // 1000)
    return f"{units}m"


def display_amount(name: str, units: int) -> str:
    """A number for people: GPUs as `3` or `0.5`, cpu as cores (exact: milli-units are thousandths), memory in
    Gi, or in Ti and up from 1Ti (`16Ti`, not `1.638e+04Gi`), to four significant digits and never in exponent
    form."""
    if name == MEMORY:
        return _binary_amount(units)
    if name in (PODS,) or name.startswith("hugepages-") or name == "ephemeral-storage":
        return str(units)
    sign, whole, frac = "-" if units < 0 else "", *divmod(abs(units), 1000)
    return f"{sign}{whole}" if frac == 0 else f"{sign}{whole}.{frac:03d}".rstrip("0")


_DISPLAY_UNITS = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30))
_SMALL_UNITS = (("Mi", 2**20), ("Ki", 2**10))


def _binary_amount(units: int) -> str:
    size = abs(units)
    suffix, scale = next(((s, v) for s, v in _DISPLAY_UNITS if size >= v), ("Gi", 2**30))
    if 0 < size < 2**20:  # below 1Mi, Gi would read 0.0001Gi: say Ki or bytes
        suffix, scale = next(((s, v) for s, v in _SMALL_UNITS[1:] if size >= v), ("", 1))
    elif 0 < size < 2**30 // 10:  # below 0.1Gi: Mi
        suffix, scale = _SMALL_UNITS[0]
    text = f"{units / scale:.4g}"
    if "e" in text:  # beyond 9999Ei: more than any quantity volcano-py accepts, but say it plainly
        text = f"{units / scale:.0f}"
    return f"{text}{suffix}"


@dataclass(frozen=True, slots=True)
class Resource:
    """An immutable resource vector. `scalars` maps extended resource names to milli-units (no zeros)."""

    cpu: int = 0
    memory: int = 0
    pods: int = 0
    scalars: tuple[tuple[str, int], ...] = ()

    # -- construction -------------------------------------------------------------------------------
    @staticmethod
    def of(cpu: int = 0, memory: int = 0, pods: int = 0, scalars: Mapping[str, int] | None = None) -> Resource:
        return Resource(cpu, memory, pods, _freeze(scalars or {}))

    @staticmethod
    def from_quantities(quantities: Mapping[str, Any] | None, *, field: str = "resources") -> Resource:
        """Build from a Kubernetes resource list (``{"cpu": "500m", "nvidia.com/gpu": 1}``)."""
        if not quantities:
            return ZERO
        if not isinstance(quantities, Mapping):
            raise QuantityError(f"{field}: expected a map of resource name to quantity, got {quantities!r}")
        cpu = memory = pods = 0
        scalars: dict[str, int] = {}
        for name, value in quantities.items():
            units = to_units(str(name), value, field=f"{field}.{name}")
            if name == CPU:
                cpu = units
            elif name == MEMORY:
                memory = units
            elif name == PODS:
                pods = units
            else:
                scalars[str(name)] = units
        return Resource(cpu, memory, pods, _freeze(scalars))

    # -- access -------------------------------------------------------------------------------------
    def get(self, name: str) -> int:
        if name == CPU:
            return self.cpu
        if name == MEMORY:
            return self.memory
        if name == PODS:
            return self.pods
        for key, value in self.scalars:
            if key == name:
                return value
        return 0

    def names(self) -> tuple[str, ...]:
        return (CPU, MEMORY, PODS, *(k for k, _ in self.scalars))

    def items(self) -> Iterable[tuple[str, int]]:
        yield CPU, self.cpu
        yield MEMORY, self.memory
        yield PODS, self.pods
        yield from self.scalars

    @property
    def gpu(self) -> int:
        """GPUs in milli-units."""
        return self.get(GPU)

    def is_zero(self) -> bool:
        return self.cpu == 0 and self.memory == 0 and self.pods == 0 and not self.scalars

    def is_best_effort(self) -> bool:
        """No cpu, memory or extended resource request: the pods count alone does not make a request."""
        return self.cpu == 0 and self.memory == 0 and not self.scalars

    # -- arithmetic ---------------------------------------------------------------------------------
    def __add__(self, other: Resource) -> Resource:
        return Resource(
            self.cpu + other.cpu,
            self.memory + other.memory,
            self.pods + other.pods,
            _combine(self.scalars, other.scalars, 1),
        )

    def __sub__(self, other: Resource) -> Resource:
        return Resource(
            self.cpu - other.cpu,
            self.memory - other.memory,
            self.pods - other.pods,
            _combine(self.scalars, other.scalars, -1),
        )

    @staticmethod
    def total(resources: Iterable[Resource]) -> Resource:
        """The sum of many resources in one pass (no intermediate Resource per addition)."""
        cpu = memory = pods = 0
        scalars: dict[str, int] = {}
        for r in resources:
            cpu += r.cpu
            memory += r.memory
            pods += r.pods
            for key, value in r.scalars:
                scalars[key] = scalars.get(key, 0) + value
        return Resource(cpu, memory, pods, _freeze(scalars)) if cpu or memory or pods or scalars else ZERO

    def scale(self, factor: int) -> Resource:
        return Resource(
            self.cpu * factor, self.memory * factor, self.pods * factor, tuple((k, v * factor) for k, v in self.scalars)
        )

    def __le__(self, other: Resource) -> bool:  # type: ignore[override, unused-ignore]
        """Every dimension of self fits in other (a missing scalar is zero)."""
        if self.cpu > other.cpu or self.memory > other.memory or self.pods > other.pods:
            return False
        if not self.scalars:
            return True
        theirs = dict(other.scalars)
        return all(v <= theirs.get(k, 0) for k, v in self.scalars)

    def shortfall(self, available: Resource) -> Resource:
        """What `available` lacks to hold self: per dimension max(0, self - available)."""
        theirs = dict(available.scalars)
        return Resource(
            max(0, self.cpu - available.cpu),
            max(0, self.memory - available.memory),
            max(0, self.pods - available.pods),
            _freeze({k: v - theirs.get(k, 0) for k, v in self.scalars if v > theirs.get(k, 0)}),
        )

    def max_with(self, other: Resource) -> Resource:
        """Per dimension the larger of the two (a missing scalar is zero)."""
        return self._each(other, max)

    def min_with(self, other: Resource) -> Resource:
        """Per dimension the smaller of the two (a missing scalar is zero)."""
        return self._each(other, min)

    def _each(self, other: Resource, pick: Callable[[int, int], int]) -> Resource:
        mine, theirs = dict(self.scalars), dict(other.scalars)
        return Resource(
            pick(self.cpu, other.cpu),
            pick(self.memory, other.memory),
            pick(self.pods, other.pods),
            _freeze({k: pick(mine.get(k, 0), theirs.get(k, 0)) for k in mine.keys() | theirs.keys()}),
        )

    def clamp_zero(self) -> Resource:
        return Resource(
            max(0, self.cpu), max(0, self.memory), max(0, self.pods), _freeze({k: v for k, v in self.scalars if v > 0})
        )

    # -- presentation -------------------------------------------------------------------------------
    def to_quantities(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for name, units in self.items():
            if units:
                out[name] = format_units(name, units)
        return out

    def describe(self) -> str:
        """`cpu 2, memory 16Gi, nvidia.com/gpu 3` with zeros left out (pods too, unless alone)."""
        parts = [f"{name} {display_amount(name, units)}" for name, units in self.items() if units and name != PODS]
        if not parts and self.pods:
            parts.append(f"pods {self.pods}")
        return ", ".join(parts) if parts else "nothing"

    def __str__(self) -> str:
        return self.describe()


def _freeze(scalars: Mapping[str, int]) -> tuple[tuple[str, int], ...]:
    return tuple(sorted((k, v) for k, v in scalars.items() if v))


def _combine(a: tuple[tuple[str, int], ...], b: tuple[tuple[str, int], ...], sign: int) -> tuple[tuple[str, int], ...]:
    if not b:
        return a
    if not a and sign == 1:
        return b
    if len(a) == len(b) == 1 and a[0][0] == b[0][0]:  # the common case: both hold only nvidia.com/gpu
        total = a[0][1] + sign * b[0][1]
        return ((a[0][0], total),) if total else ()
    merged = dict(a)
    for key, value in b:
        merged[key] = merged.get(key, 0) + sign * value
    return _freeze(merged)


ZERO = Resource()


# ---- a pod's request, by Kubernetes' own rules ----------------------------------------------------------


def container_request(container: Mapping[str, Any], *, field: str) -> Resource:
    """Requests, with limits standing in for any request left unset (the apiserver defaults them so)."""
    if not isinstance(container, Mapping):
        raise QuantityError(f"{field}: expected a container, got {container!r}")
    resources = container.get("resources") or {}
    if not isinstance(resources, Mapping):
        raise QuantityError(f"{field}.resources: expected a map with requests/limits")
    requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
    for part, value in (("requests", requests), ("limits", limits)):
        if not isinstance(value, Mapping):
            raise QuantityError(f"{field}.resources.{part}: expected a map of resource name to quantity, "
                                f"got {value!r}")
    requests = dict(requests)
    for name, value in limits.items():
        requests.setdefault(name, value)
    return Resource.from_quantities(requests, field=f"{field}.resources.requests")


def _container_list(spec: Mapping[str, Any], key: str, field: str) -> list[Any]:
    containers = spec.get(key) or []
    if not isinstance(containers, list):
        raise QuantityError(f"{field}.{key}: expected a list of containers, got {containers!r}")
    return containers


def pod_request(spec: Mapping[str, Any], *, field: str = "spec") -> Resource:
    """The resources a pod asks of a node, as kube-scheduler computes them, plus one `pods` slot.

    Containers are summed; restartable (sidecar) init containers add to that sum; every other init
    container runs alone (after the sidecars started before it), so the pod needs the larger of the two.
    Pod-level `spec.resources` (PodLevelResources) replaces the aggregate for the resources it names.
    `spec.overhead` is added last.
    """
    containers = _container_list(spec, "containers", field)
    total = ZERO
    for i, container in enumerate(containers):
        total = total + container_request(container, field=f"{field}.containers[{i}]")
    sidecars = ZERO
    init_peak = ZERO
    for i, container in enumerate(_container_list(spec, "initContainers", field)):
        request = container_request(container, field=f"{field}.initContainers[{i}]")
        if container.get("restartPolicy") == "Always":
            sidecars = sidecars + request
            init_peak = init_peak.max_with(sidecars)
        else:
            init_peak = init_peak.max_with(sidecars + request)
    total = (total + sidecars).max_with(init_peak)
    pod_level = spec.get("resources")
    if pod_level:
        override = container_request({"resources": pod_level}, field=field)
        merged = dict(total.items())
        merged.update({name: units for name, units in override.items() if units})
        total = Resource.of(
            merged.pop(CPU, 0),
            merged.pop(MEMORY, 0),
            merged.pop(PODS, 0),
            {k: v for k, v in merged.items()},
        )
    overhead = spec.get("overhead")
    if overhead:
        total = total + Resource.from_quantities(overhead, field=f"{field}.overhead")
    return Resource(total.cpu, total.memory, 1, total.scalars)
