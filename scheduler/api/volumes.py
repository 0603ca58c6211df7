"""Layer `api`: persistent volumes as the scheduler reads them, and what a pod's claims require of a node.

`Storage` holds a snapshot's PersistentVolumes, PersistentVolumeClaims and StorageClasses as values (read from the
objects by `volume_from_object`, `claim_from_object`, `class_from_object`). A pod's claims are the PVC names of its
`persistentVolumeClaim` and generic `ephemeral` volumes (`claims_of`, read once when the pod is parsed, so a pod
without any costs nothing later). When a snapshot is built, `needs_of` turns a pending pod's claims into
`VolumeNeeds`, which `Constraints.volumes` carries:

- what does not change within a cycle, checked once per constraint set like node affinity: the node affinity of
  each bound claim's PersistentVolume and its zone and region labels (kube-scheduler's VolumeBinding and
  VolumeZone filters, pkg/scheduler/framework/plugins/volumebinding/binder.go `checkBoundClaims` and
  volumezone/volume_zone.go `Filter`), or the reason no node will do until a claim changes (`blocked`: a claim
  that is missing, being deleted, lost, or unbound without `WaitForFirstConsumer`, which kube-scheduler's
  VolumeBinding PreFilter refuses);
- the unbound `WaitForFirstConsumer` claims (`to_bind`), which the predicates plugin matches against the
  available PersistentVolumes and the StorageClass's provisioning as the cycle places pods (a volume one pod
  takes is not free for the next), as kube-scheduler's `FindPodVolumes` does.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from scheduler.api import reasons as R
from scheduler.api.resources import parse_quantity
from scheduler.api.selectors import LabelSelector, NodeSelectorTerm, Requirement, label_selector, node_selector_terms

# k8s.io/component-helpers/storage/volume/pv_helpers.go
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
SELECTED_NODE = "volume.kubernetes.io/selected-node"
BETA_CLASS = "volume.beta.kubernetes.io/storage-class"
NO_PROVISIONER = "kubernetes.io/no-provisioner"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"

# The labels VolumeZone compares (volumezone/volume_zone.go `topologyLabels`), and the GA label a node may carry
# for a PersistentVolume's beta one (`translateToGALabel`).
BETA_ZONE, BETA_REGION = "failure-domain.beta.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/region"
ZONE, REGION = "topology.kubernetes.io/zone", "topology.kubernetes.io/region"
TOPOLOGY_LABELS = (BETA_ZONE, BETA_REGION, ZONE, REGION)
_GA = {BETA_ZONE: ZONE, BETA_REGION: REGION}
_MULTI_ZONE = "__"  # k8s.io/cloud-provider/volume LabelMultiZoneDelimiter

Zones = tuple[tuple[str, frozenset[str]], ...]  # (label key, the values a node's label may have)


def _bytes(value: object, where: str) -> int:
    return math.ceil(parse_quantity(value, field=where))


def _modes(raw: object) -> frozenset[str]:
    return frozenset(str(m) for m in raw) if isinstance(raw, list) else frozenset()


@dataclass(frozen=True, slots=True)
class Volume:
    """A PersistentVolume: what binding and the node filters read."""

    name: str
    storage_class: str = ""
    capacity: int = 0  # bytes
    access_modes: frozenset[str] = frozenset()
    volume_mode: str = "Filesystem"
    node_terms: tuple[NodeSelectorTerm, ...] | None = None  # required node affinity, ORed; None: every node
    zones: Zones = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    claim: str = ""  # spec.claimRef as namespace/name, "" when unclaimed
    claim_uid: str = ""
    available: bool = True  # status.phase Available
    deleting: bool = False

    def fits(self, labels: Mapping[str, str]) -> bool:
        """The node affinity admits a node with these labels. Only labels, as `CheckNodeAffinity` passes them
        (component-helpers/storage/volume/helpers.go), so a `matchFields` term on the node name matches none."""
        return self.node_terms is None or any(t.matches(labels, "") for t in self.node_terms)

    def reserved_for(self, claim: Claim) -> bool:
        """Pre-bound or bound to this claim (`IsVolumeBoundToClaim`: namespace and name, and the uid if set)."""
        return self.claim == claim.key and (not self.claim_uid or self.claim_uid == claim.uid)


@dataclass(frozen=True, slots=True)
class Claim:
    """A PersistentVolumeClaim."""

    key: str  # namespace/name
    uid: str = ""
    storage_class: str = ""  # "" : none (the beta annotation first, as `GetPersistentVolumeClaimClass`)
    volume_name: str = ""
    fully_bound: bool = False  # volumeName and the bind-completed annotation (`isPVCFullyBound`)
    selected_node: str = ""
    access_modes: frozenset[str] = frozenset()
    request: int = 0  # bytes of resources.requests.storage
    volume_mode: str = "Filesystem"
    selector: LabelSelector | None = None
    lost: bool = False  # status.phase Lost
    deleting: bool = False

    @property
    def name(self) -> str:
        return self.key.split("/", 1)[1]


@dataclass(frozen=True, slots=True)
class ClassInfo:
    """A StorageClass: its binding mode, and whether and where it provisions."""

    name: str
    provisioner: str = ""
    wait_for_consumer: bool = False
    allowed_topologies: tuple[NodeSelectorTerm, ...] = ()  # ORed; none: every node

    @property
    def provisions(self) -> bool:
        return self.provisioner not in ("", NO_PROVISIONER)

    def allows(self, labels: Mapping[str, str]) -> bool:
        """`MatchTopologySelectorTerms`: no terms allow every node; an empty term selects none."""
        return not self.allowed_topologies or any(t.matches(labels, "") for t in self.allowed_topologies)


@dataclass(slots=True)
class Storage:
    """A snapshot's storage objects. `binding` is set when some pending pod has a claim to bind this cycle (the
    predicates plugin serves the dynamic point only then)."""

    volumes: dict[str, Volume] = field(default_factory=dict)
    claims: dict[str, Claim] = field(default_factory=dict)
    classes: dict[str, ClassInfo] = field(default_factory=dict)
    binding: bool = False


# ---- reading the objects -----------------------------------------------------------------------------------


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def volume_from_object(pv: Mapping[str, Any]) -> Volume:
    meta, spec = _meta(pv), pv.get("spec") or {}
    name = str(meta.get("name"))
    labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
    annotations = meta.get("annotations") or {}
    required = (spec.get("nodeAffinity") or {}).get("required")
    ref = spec.get("claimRef") or {}
    capacity = (spec.get("capacity") or {}).get("storage")
    return Volume(
        name=name,
        storage_class=str(annotations.get(BETA_CLASS, spec.get("storageClassName") or "")),
        capacity=_bytes(capacity, f"persistentvolume {name}: spec.capacity.storage") if capacity is not None else 0,
        access_modes=_modes(spec.get("accessModes")),
        volume_mode=str(spec.get("volumeMode") or "Filesystem"),
        node_terms=node_selector_terms(required) if isinstance(required, Mapping) else None,
        zones=zones_of(labels),
        labels=labels,
        claim=f"{ref.get('namespace', '')}/{ref.get('name', '')}" if ref.get("name") else "",
        claim_uid=str(ref.get("uid") or ""),
        available=((pv.get("status") or {}).get("phase") or "Available") == "Available",
        deleting=bool(meta.get("deletionTimestamp")),
    )


def zones_of(labels: Mapping[str, str]) -> Zones:
    """The zone and region labels VolumeZone compares (`getPVTopologies`): a value may list several zones joined
    by `__`; one with an empty part is ignored, as kube-scheduler ignores a label it cannot parse."""
    out = []
    for key in TOPOLOGY_LABELS:
        if key in labels:
            parts = [p.strip() for p in labels[key].split(_MULTI_ZONE)]
            if all(parts):
                out.append((key, frozenset(parts)))
    return tuple(out)


def claim_from_object(pvc: Mapping[str, Any]) -> Claim:
    meta, spec = _meta(pvc), pvc.get("spec") or {}
    key = f"{meta.get('namespace', 'default')}/{meta.get('name')}"
    annotations = meta.get("annotations") or {}
    request = ((spec.get("resources") or {}).get("requests") or {}).get("storage")
    volume_name = str(spec.get("volumeName") or "")
    selector = spec.get("selector")
    return Claim(
        key=key,
        uid=str(meta.get("uid") or ""),
        storage_class=str(annotations.get(BETA_CLASS, spec.get("storageClassName") or "")),
        volume_name=volume_name,
        fully_bound=bool(volume_name) and BIND_COMPLETED in annotations,
        selected_node=str(annotations.get(SELECTED_NODE) or ""),
        access_modes=_modes(spec.get("accessModes")),
        request=_bytes(request, f"persistentvolumeclaim {key}: spec.resources.requests.storage") if request else 0,
        volume_mode=str(spec.get("volumeMode") or "Filesystem"),
        selector=label_selector(selector) if isinstance(selector, Mapping) else None,
        lost=((pvc.get("status") or {}).get("phase")) == "Lost",
        deleting=bool(meta.get("deletionTimestamp")),
    )


def class_from_object(sc: Mapping[str, Any]) -> ClassInfo:
    terms = tuple(
        NodeSelectorTerm(
            tuple(
                Requirement(str(e.get("key", "")), "In", tuple(str(v) for v in e.get("values") or ()))
                for e in term.get("matchLabelExpressions") or ()
                if isinstance(e, Mapping)
            )
        )
        for term in sc.get("allowedTopologies") or ()
        if isinstance(term, Mapping)
    )
    return ClassInfo(
        name=str(_meta(sc).get("name")),
        provisioner=str(sc.get("provisioner") or ""),
        wait_for_consumer=sc.get("volumeBindingMode") == WAIT_FOR_FIRST_CONSUMER,
        allowed_topologies=terms,
    )


def claims_of(pod: Mapping[str, Any]) -> tuple[str, ...]:
    """The keys (namespace/name) of the PVCs a pod's volumes use: `persistentVolumeClaim.claimName`, and for a
    generic ephemeral volume the claim named `<pod>-<volume>` (component-helpers/storage/ephemeral)."""
    spec = pod.get("spec") or {}
    volumes = spec.get("volumes")
    if not volumes:
        return ()
    meta = _meta(pod)
    namespace = meta.get("namespace", "default")
    names = []
    for volume in volumes:
        if not isinstance(volume, Mapping):
            continue
        source = volume.get("persistentVolumeClaim")
        if isinstance(source, Mapping):
            names.append(str(source.get("claimName") or ""))
        elif volume.get("ephemeral") is not None:
            names.append(f"{meta.get('name')}-{volume.get('name')}")
    return tuple(sorted({f"{namespace}/{n}" for n in names}))


# ---- what a pod's claims require of a node -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class VolumeNeeds:
    """A pending pod's claims resolved against a snapshot's storage (see the module docstring). Hashable: it is
    part of the pod's `Constraints`, so pods with the same claims in the same state share fit results."""

    claims: tuple[str, ...]
    blocked: R.NodeFilter | None = None
    bound_terms: tuple[tuple[NodeSelectorTerm, ...], ...] = ()  # per bound claim, its volume's affinity
    zones: Zones = ()
    to_bind: tuple[str, ...] = ()

    def node_conflict(self, labels: Mapping[str, str]) -> R.NodeFilter | None:
        """Why a node with these labels cannot hold the pod's bound volumes (None: it can)."""
        if self.blocked is not None:
            return self.blocked
        for terms in self.bound_terms:
            if not any(t.matches(labels, "") for t in terms):
                return NODE_CONFLICT
        if self.zones and any(key in labels for key in TOPOLOGY_LABELS):  # a zoneless node: a one-zone cluster
            for key, values in self.zones:
                value = labels.get(key)
                if value is None:
                    value = labels.get(_GA.get(key, key))
                if value is None or value not in values:
                    return ZONE_CONFLICT
        return None


NODE_CONFLICT = R.NodeFilter(R.VOLUME_NODE_AFFINITY)
ZONE_CONFLICT = R.NodeFilter(R.VOLUME_ZONE)


def needs_of(claims: tuple[str, ...], storage: Storage) -> VolumeNeeds | None:
    """What the claims require (None: nothing, every claim bound to a volume any node may use). The claims are
    checked first for what makes them unusable, then sorted into bound and to bind, as VolumeBinding's PreFilter
    (`podHasPVCs`, then `GetPodVolumeClaims`)."""
    found = []
    for key in claims:
        claim = storage.claims.get(key)
        name = key.split("/", 1)[1]
        if claim is None:
            return VolumeNeeds(claims, R.NodeFilter(R.VOLUME_CLAIM_MISSING, name))
        if claim.lost:
            return VolumeNeeds(claims, R.NodeFilter(R.VOLUME_CLAIM_LOST, name))
        if claim.deleting:
            return VolumeNeeds(claims, R.NodeFilter(R.VOLUME_CLAIM_DELETING, name))
        found.append(claim)
    terms: list[tuple[NodeSelectorTerm, ...]] = []
    zones: list[tuple[str, frozenset[str]]] = []
    to_bind: list[str] = []
    for claim in found:
        if claim.fully_bound:
            volume = storage.volumes.get(claim.volume_name)
            if volume is None:
                return VolumeNeeds(claims, R.NodeFilter(R.VOLUME_MISSING))
            if volume.node_terms is not None:
                terms.append(volume.node_terms)
            zones.extend(volume.zones)
            continue
        klass = storage.classes.get(claim.storage_class) if claim.storage_class else None
        if klass is not None and klass.wait_for_consumer and not claim.volume_name:
            to_bind.append(claim.key)
            continue
        # Prebound, or a class that binds at once (or none): the PV controller binds it, not the scheduler.
        return VolumeNeeds(claims, R.NodeFilter(R.VOLUME_UNBOUND_IMMEDIATE, claim.name))
    if not terms and not zones and not to_bind:
        return None
    return VolumeNeeds(claims, None, tuple(dict.fromkeys(terms)), tuple(dict.fromkeys(zones)), tuple(to_bind))
