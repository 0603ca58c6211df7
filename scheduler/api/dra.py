"""Layer `api`: Dynamic Resource Allocation (`resource.k8s.io/v1`) as values: ResourceSlices, DeviceClasses,
ResourceClaims, ResourceClaimTemplates and a pod's claims, each parsed once at the edge (`api/dra_parse.py`).

The shapes follow the v1 API (Kubernetes 1.34, GA): a slice publishes the devices of one driver's pool, local to
one node (`nodeName`), to the nodes a `nodeSelector` selects, or to every node (`allNodes`); a device carries
typed attributes and capacities, each named `domain/id` or a bare `id` that belongs to the driver's domain; a
claim's requests (`spec.devices.requests[].exactly`) name a DeviceClass, CEL selectors, an allocation mode
(`ExactCount` with a count, or `All`) and admin access; its constraints (`matchAttribute`) ask that the devices
of some requests agree on one attribute. kube-scheduler's DynamicResources plugin and the structured allocator of
k8s.io/dynamic-resource-allocation read the same fields; Volcano reaches them through its predicates plugin
(pkg/scheduler/plugins/predicates/predicates.go, `predicate.DynamicResourceAllocationEnable`).

Everything here is plain and frozen; the allocator (`scheduler/dra/`) decides with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from scheduler.api.selectors import NodeSelectorTerm

EXACT_COUNT = "ExactCount"
ALL = "All"

# Bounds, as the v1 API validates them (k8s.io/api/resource/v1 types.go): a hostile or corrupt object beyond them
# is refused whole at the edge rather than walked.
DEVICES_PER_SLICE_MAX = 128
ATTRIBUTES_PER_DEVICE_MAX = 32  # attributes and capacities together
REQUESTS_MAX = 32
SELECTORS_MAX = 32
CONSTRAINTS_MAX = 32
COUNT_MAX = 32  # AllocationResultsMaxSize: a claim never holds more devices than this
CEL_MAX = 10 * 1024  # CELSelectorExpressionMaxLength
RESERVED_FOR_MAX = 256  # ResourceClaimReservedForMaxSize
POD_CLAIMS_MAX = 32
ATTR_NAME_MAX = 32  # the id part of a qualified name
DOMAIN_MAX = 63
STRING_VALUE_MAX = 64
VERSION_VALUE_MAX = 64

AttrValue = bool | int | str  # a version attribute is its semver text

def qualify(name: str, driver: str) -> tuple[str, str]:
    """`domain/id` -> (domain, id); a bare `id` belongs to the driver's domain (as the v1 API defines it)."""
    domain, sep, ident = name.rpartition("/")
    return (domain, ident) if sep else (driver, name)


@dataclass(frozen=True, slots=True)
class Device:
    """One device of a slice. `attributes`/`capacity`: domain -> id -> value (capacity in base units, rounded up:
    bytes for memory, whole units otherwise), the shape CEL's `device.attributes[domain].id` reads."""

    name: str
    attributes: Mapping[str, Mapping[str, AttrValue]] = field(default_factory=dict)
    capacity: Mapping[str, Mapping[str, int]] = field(default_factory=dict)

    def attribute(self, qualified: str, driver: str) -> AttrValue | None:
        domain, ident = qualify(qualified, driver)
        return self.attributes.get(domain, {}).get(ident)


@dataclass(frozen=True, slots=True)
class ResourceSlice:
    name: str
    driver: str
    pool: str
    generation: int
    slice_count: int  # resourceSliceCount: how many slices the pool's generation has
    node_name: str = ""
    node_selector: tuple[NodeSelectorTerm, ...] = ()
    all_nodes: bool = False
    devices: tuple[Device, ...] = ()

    def on_node(self, node: str, labels: Mapping[str, str]) -> bool:
        """Whether the slice's devices are reachable from `node`."""
        if self.all_nodes:
            return True
        if self.node_name:
            return self.node_name == node
        return any(term.matches(labels, node) for term in self.node_selector)


@dataclass(frozen=True, slots=True)
class DeviceClass:
    name: str
    selectors: tuple[str, ...] = ()  # CEL expressions, all must hold


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    name: str
    device_class: str
    selectors: tuple[str, ...] = ()
    mode: str = EXACT_COUNT  # EXACT_COUNT | ALL
    count: int = 1
    admin_access: bool = False


@dataclass(frozen=True, slots=True)
class MatchAttribute:
    """The devices of `requests` (every request when empty) share one value of `attribute` (`domain/id`)."""

    attribute: str
    requests: tuple[str, ...] = ()

    def covers(self, request: str) -> bool:
        return not self.requests or request in self.requests


@dataclass(frozen=True, slots=True)
class ClaimSpec:
    requests: tuple[DeviceRequest, ...] = ()
    constraints: tuple[MatchAttribute, ...] = ()


class DeviceId(NamedTuple):
    """(driver, pool, device): a tuple, hashed in C (the allocator hashes millions of them on a large cluster)."""

    driver: str
    pool: str
    device: str

    def __str__(self) -> str:
        return f"{self.driver}/{self.pool}/{self.device}"


@dataclass(frozen=True, slots=True)
class DeviceResult:
    request: str
    device: DeviceId
    admin_access: bool = False


@dataclass(frozen=True, slots=True)
class Allocation:
    """A claim's `status.allocation`: its devices, and the nodes they are reachable from (`node` one node's name;
    both empty: any node)."""

    results: tuple[DeviceResult, ...] = ()
    node: str = ""
    node_selector: tuple[NodeSelectorTerm, ...] = ()

    def reachable(self, node: str, labels: Mapping[str, str]) -> bool:
        if self.node:
            return self.node == node
        if self.node_selector:
            return any(term.matches(labels, node) for term in self.node_selector)
        return True


@dataclass(frozen=True, slots=True)
class Consumer:
    """One entry of `status.reservedFor` (a pod, or another consumer such as a PodGroup)."""

    resource: str
    name: str
    uid: str
    api_group: str = ""


@dataclass(frozen=True, slots=True)
class ResourceClaim:
    namespace: str
    name: str
    uid: str = ""
    spec: ClaimSpec = field(default_factory=ClaimSpec)
    allocation: Allocation | None = None
    reserved_for: tuple[Consumer, ...] = ()
    deleting: bool = False
    owner_pod: str = ""  # the uid of the pod that owns it (a claim made from a template)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class ResourceClaimTemplate:
    namespace: str
    name: str
    spec: ClaimSpec = field(default_factory=ClaimSpec)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class PodClaim:
    """One entry of a pod's `spec.resourceClaims`: exactly one of `claim` (an existing claim's name) and
    `template` (a template the claim controller makes the pod's own claim from)."""

    name: str
    claim: str = ""
    template: str = ""


@dataclass(frozen=True, slots=True)
class PodClaims:
    """A pod's claims and, for claims from templates, the generated claim's name (`status.resourceClaimStatuses`;
    absent until the claim controller made it)."""

    claims: tuple[PodClaim, ...] = ()
    generated: tuple[tuple[str, str], ...] = ()  # (pod claim name, claim name)

    def claim_name(self, claim: PodClaim) -> str:
        """The ResourceClaim this entry stands for, "" while a template's claim is not made yet."""
        if claim.claim:
            return claim.claim
        return dict(self.generated).get(claim.name, "")


@dataclass(frozen=True, slots=True)
class ClaimWrite:
    """What the binder writes on one claim before the binds: `allocation` (None: it has one already) and the
    consumers to add to `reservedFor`. `template` is set for the claim a pod would get from a template that
    the claim controller has not made yet (it cannot be written until it exists)."""

    namespace: str
    name: str
    allocation: Allocation | None
    consumers: tuple[Consumer, ...]
    template: str = ""


@dataclass(frozen=True, slots=True)
class DraObjects:
    """The cluster's DRA objects as a snapshot carries them (each parsed, `api/dra_parse.py`)."""

    slices: tuple[ResourceSlice, ...] = ()
    classes: tuple[DeviceClass, ...] = ()
    claims: tuple[ResourceClaim, ...] = ()
    templates: tuple[ResourceClaimTemplate, ...] = ()
