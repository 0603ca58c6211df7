"""Layer `api`: what the scheduler reads off a Pod: its request, its placement constraints and its status.

Both the Kubernetes cache and the simulator turn pods into tasks here, so they agree on every rule.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from scheduler.api import fields as F
from scheduler.api.phases import TaskStatus

# The selectors live in api.selectors (api.volumes reads them too); they are re-exported here, where they were.
from scheduler.api.selectors import (
    LabelSelector as LabelSelector,
    NodeSelectorTerm as NodeSelectorTerm,
    Requirement as Requirement,
    label_selector,
    node_selector_terms,
    requirements,
)
from scheduler.api.volumes import VolumeNeeds

GROUP_NAME_ANNOTATION = "scheduling.k8s.io/group-name"
TASK_SPEC_KEY = "volcano.sh/task-spec"
JOBSET_REPLICATED_JOB = "jobset.sigs.k8s.io/replicatedjob-name"  # as api/owner_gang.py names it
TRAINING_REPLICA_TYPE = "training.kubeflow.org/replica-type"  # a PyTorchJob's pod's (api/owner_gang.py)
TRAINING_OPERATOR_NAME = "training.kubeflow.org/operator-name"
PREEMPTABLE_KEY = "volcano.sh/preemptable"


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str  # NoSchedule, PreferNoSchedule, NoExecute


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if self.operator == "Exists":
            return not self.key or self.key == taint.key
        return self.key == taint.key and self.value == taint.value


@dataclass(frozen=True, slots=True)
class PodAffinityTerm:
    """Pods matching `selector` in `namespaces` (empty: the pod's own) within one `topology_key` domain."""

    selector: LabelSelector
    topology_key: str
    namespaces: tuple[str, ...] = ()

    def selects(self, owner_namespace: str, namespace: str, labels: Mapping[str, str]) -> bool:
        allowed = self.namespaces or (owner_namespace,)
        return namespace in allowed and self.selector.matches(labels)


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    """A topologySpreadConstraint: matching pods per `topology_key` domain may differ by at most `max_skew`."""

    max_skew: int
    topology_key: str
    when_unsatisfiable: str  # DoNotSchedule | ScheduleAnyway
    selector: LabelSelector


HostPort = tuple[str, str, int]  # (protocol, hostIP, hostPort)


@dataclass(frozen=True, slots=True, weakref_slot=True)
class Constraints:
    """Where a pod may go, independent of free resources. Hashable: tasks that share it share fit results.

    The session looks these up in dicts several times per placed task, so the hash is computed once, and
    `constraints_of` hands out one shared instance per distinct value (a lookup then ends at `is`, not at a
    field-by-field comparison).
    """

    node_selector: tuple[tuple[str, str], ...] = ()
    required_terms: tuple[NodeSelectorTerm, ...] = ()  # ORed
    tolerations: tuple[Toleration, ...] = ()
    preferred: tuple[tuple[int, NodeSelectorTerm], ...] = ()  # preferred node affinity: (weight, term)
    # Terms that depend on where other pods are: evaluated per placement, never cached (`dynamic`).
    pod_affinity: tuple[PodAffinityTerm, ...] = ()
    pod_anti_affinity: tuple[PodAffinityTerm, ...] = ()
    preferred_pod_affinity: tuple[tuple[int, PodAffinityTerm], ...] = ()
    preferred_pod_anti_affinity: tuple[tuple[int, PodAffinityTerm], ...] = ()
    spread: tuple[SpreadConstraint, ...] = ()
    # (protocol, hostIP, hostPort) of the containers' ports that ask for a host port (kube-scheduler's NodePorts).
    host_ports: tuple[HostPort, ...] = ()
    # What the pod's PersistentVolumeClaims require (`api.volumes`), set when a snapshot is built; None: no claim
    # constrains the pod (no claims, or all bound to volumes any node may use), so it costs no check.
    volumes: VolumeNeeds | None = None
    # The pod names DRA ResourceClaims (`TaskInfo.device_claims`): which devices are free depends on the cycle's
    # earlier placements, so it is evaluated per placement.
    devices: bool = False
    _hash: int = field(default=0, init=False, compare=False, repr=False)
    _dynamic: bool = field(default=False, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash(self._fields()))
        object.__setattr__(self, "_dynamic", bool(
            self.pod_affinity or self.pod_anti_affinity or self.preferred_pod_affinity
            or self.preferred_pod_anti_affinity or self.spread or self.host_ports
            or (self.volumes is not None and self.volumes.to_bind) or self.devices
        ))

    def _fields(self) -> tuple[Any, ...]:
        return (
            self.node_selector, self.required_terms, self.tolerations, self.preferred, self.pod_affinity,
            self.pod_anti_affinity, self.preferred_pod_affinity, self.preferred_pod_anti_affinity, self.spread,
            self.host_ports, self.volumes, self.devices,
        )

    def __hash__(self) -> int:
        return self._hash

    @property
    def dynamic(self) -> bool:
        """Terms that depend on where other pods are, or claims still to bind (which volumes the cycle's earlier
        placements took): evaluated per placement. Computed once, as the session asks for every task placed."""
        return self._dynamic

    def untolerated(self, taints: tuple[Taint, ...]) -> Taint | None:
        for taint in taints:
            if taint.effect in ("NoSchedule", "NoExecute") and not any(t.tolerates(taint) for t in self.tolerations):
                return taint
        return None


# The fields this module reads (api/fields.py lists them all).
F_NODE_SELECTOR = F.field("Pod", "spec.nodeSelector")
F_AFFINITY = F.field("Pod", "spec.affinity")
F_TOLERATIONS = F.field("Pod", "spec.tolerations")
F_SPREAD = F.field("Pod", "spec.topologySpreadConstraints")
F_PORTS = F.field("Pod", "spec.containers.*.ports")
F_TASK_SPEC = F.field("Pod", f"metadata.annotations[{TASK_SPEC_KEY}]")
F_TASK_SPEC_LABEL = F.field("Pod", f"metadata.labels[{TASK_SPEC_KEY}]")
F_PREEMPTABLE = F.field("Pod", f"metadata.annotations[{PREEMPTABLE_KEY}]")
F_PREEMPTABLE_LABEL = F.field("Pod", f"metadata.labels[{PREEMPTABLE_KEY}]")
F_PHASE = F.field("Pod", "status.phase")
F_DELETION = F.field("Pod", "metadata.deletionTimestamp")
F_NODE_NAME = F.field("Pod", "spec.nodeName")
F_TAINTS = F.field("Node", "spec.taints")

_NO_AFFINITY: Affinity = ((), (), (), (), (), ())


def constraints_of(spec: Mapping[str, Any], where: str = "", sink: list[F.FieldInvalid] | None = None) -> Constraints:
    """The pod's placement constraints, each field read through the table (raises FieldError for one that
    cannot be read: a constraint is never dropped)."""
    get = spec.get
    raw = get("nodeSelector")  # (each `is not None` below only spares the call for an absent field)
    selector = F_NODE_SELECTOR.read(raw, where, sink) if raw is not None else None
    raw = get("affinity")
    affinity = (F_AFFINITY.read(raw, where, sink) if raw is not None else None) or _NO_AFFINITY
    raw = get("tolerations")
    tolerations = F_TOLERATIONS.read(raw, where, sink) if raw is not None else ()
    raw = get("topologySpreadConstraints")
    made = Constraints(
        tuple(sorted(selector.items())) if selector else (),
        affinity[0], tolerations, affinity[1], affinity[2], affinity[3], affinity[4], affinity[5],
        F_SPREAD.read(raw, where, sink) if raw is not None else (),
        host_ports_of(spec, where),
    )
    return _SHARED.setdefault(made, made)


# required node terms, preferred (weight, term), pod affinity, pod anti-affinity, and their preferred ones
Affinity = tuple[
    tuple[NodeSelectorTerm, ...], tuple[tuple[int, NodeSelectorTerm], ...], tuple[PodAffinityTerm, ...],
    tuple[PodAffinityTerm, ...], tuple[tuple[int, PodAffinityTerm], ...], tuple[tuple[int, PodAffinityTerm], ...],
]
_WEIGHT = F.integer(0, 100)  # Kubernetes: a preferred term's weight is 1..100 (0 read as no preference)
_SKEW = F.integer(1, F.INT32)
_PORT = F.integer(1, 65535)


def _weight(preferred: Mapping[str, Any]) -> int:
    weight = preferred.get("weight")
    return 0 if weight is None else _WEIGHT.parse(weight)


def _mapping(value: object, what: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise F.BadValueError(f"{what} is not an object")
    return value


def _items(value: object, what: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise F.BadValueError(f"{what} is not a list")
    return value


def check_affinity(raw: Mapping[str, Any]) -> Affinity:
    """`spec.affinity`: node affinity (required terms, preferred weighted terms), pod (anti-)affinity."""
    node = _mapping(raw.get("nodeAffinity"), "nodeAffinity")
    required = _mapping(node.get("requiredDuringSchedulingIgnoredDuringExecution"), "nodeAffinity.required")
    terms = node_selector_terms(required)
    preferred = tuple(
        (_weight(p), _term(_mapping(p.get("preference"), "preference")))
        for p in _items(node.get("preferredDuringSchedulingIgnoredDuringExecution"), "nodeAffinity.preferred")
        if isinstance(p, Mapping)
    )
    affinity_terms = _pod_terms(raw.get("podAffinity"))
    anti_terms = _pod_terms(raw.get("podAntiAffinity"))
    return terms, preferred, affinity_terms[0], anti_terms[0], affinity_terms[1], anti_terms[1]


def check_tolerations(raw: list[Any]) -> tuple[Toleration, ...]:
    return tuple(
        Toleration(
            str(t.get("key", "") or ""),
            str(t.get("operator", "Equal") or "Equal"),
            str(t.get("value", "") or ""),
            str(t.get("effect", "") or ""),
        )
        for t in raw
        if isinstance(t, Mapping)
    )


def check_ports(raw: list[Any]) -> tuple[HostPort, ...]:
    """A container's `ports`: those with a `hostPort` (1..65535), with their protocol and host IP."""
    found = []
    for port in raw:
        if not isinstance(port, Mapping):
            raise F.BadValueError("has a port that is not an object")
        host_port = port.get("hostPort")
        if host_port is not None and host_port != 0:
            found.append((str(port.get("protocol") or "TCP"), str(port.get("hostIP") or ""), _PORT.parse(host_port)))
    return tuple(found)


def check_taints(raw: list[Any]) -> tuple[Taint, ...]:
    return tuple(
        Taint(str(t.get("key", "")), str(t.get("value", "") or ""), str(t.get("effect", "")))
        for t in raw
        if isinstance(t, Mapping)
    )


def check_spread(raw: list[Any]) -> tuple[SpreadConstraint, ...]:
    return tuple(
        SpreadConstraint(
            _SKEW.parse(c.get("maxSkew")) if c.get("maxSkew") is not None else 1,
            str(c.get("topologyKey") or ""),
            str(c.get("whenUnsatisfiable") or "DoNotSchedule"),
            label_selector(c.get("labelSelector")),
        )
        for c in raw
        if isinstance(c, Mapping)
    )


_ANY_IP = ("", "0.0.0.0")  # a host IP as Kubernetes spells "all addresses" (not a bind)


def host_ports_of(spec: Mapping[str, Any], where: str = "") -> tuple[HostPort, ...]:
    """The host ports a pod's containers ask for, as kube-scheduler's NodePorts plugin reads them (containers'
    `ports[].hostPort` with their protocol, TCP by default, and hostIP, all addresses by default)."""
    found: list[HostPort] = []
    containers = spec.get("containers")
    if not isinstance(containers, list):
        return ()
    for container in containers:
        if isinstance(container, dict):
            ports = container.get("ports")
            if ports is not None:
                found.extend(F_PORTS.read(ports, where, None))
    return tuple(sorted(set(found))) if found else ()


def with_host_ports(constraints: Constraints, ports: tuple[HostPort, ...]) -> Constraints:
    """`constraints` with these host ports (the shared instance), for a pod parsed without its containers."""
    made = replace(constraints, host_ports=ports)
    return _SHARED.setdefault(made, made)


def with_volumes(constraints: Constraints, volumes: VolumeNeeds | None) -> Constraints:
    """`constraints` with what the pod's claims require (the shared instance)."""
    made = replace(constraints, volumes=volumes)
    return _SHARED.setdefault(made, made)


def with_devices(constraints: Constraints) -> Constraints:
    """`constraints` of a pod with DRA claims (the shared instance)."""
    made = replace(constraints, devices=True)
    return _SHARED.setdefault(made, made)


def host_ports_conflict(wanted: tuple[HostPort, ...], used: tuple[HostPort, ...]) -> bool:
    """Two host ports clash on one node when protocol and port match and either listens on all addresses or both
    on the same one (kube-scheduler's NodePorts filter, pkg/scheduler/framework/plugins/nodeports)."""
    for protocol, ip, port in wanted:
        for other_protocol, other_ip, other_port in used:
            if port == other_port and protocol == other_protocol and (ip in _ANY_IP or other_ip in _ANY_IP
                                                                      or ip == other_ip):
                return True
    return False


# One instance per distinct Constraints value while any task holds it (see Constraints).
_SHARED: weakref.WeakValueDictionary[Constraints, Constraints] = weakref.WeakValueDictionary()


def _pod_term(raw: Mapping[str, Any]) -> PodAffinityTerm:
    return PodAffinityTerm(
        label_selector(raw.get("labelSelector")),
        str(raw.get("topologyKey") or ""),
        tuple(str(n) for n in _items(raw.get("namespaces"), "namespaces")),
    )


def _pod_terms(raw: object) -> tuple[tuple[PodAffinityTerm, ...], tuple[tuple[int, PodAffinityTerm], ...]]:
    """(required terms, preferred (weight, term)) of a podAffinity or podAntiAffinity block."""
    block = _mapping(raw, "pod affinity")
    required = tuple(
        _pod_term(t) for t in _items(block.get("requiredDuringSchedulingIgnoredDuringExecution"), "required")
        if isinstance(t, Mapping)
    )
    preferred = tuple(
        (_weight(p), _pod_term(_mapping(p.get("podAffinityTerm"), "podAffinityTerm")))
        for p in _items(block.get("preferredDuringSchedulingIgnoredDuringExecution"), "preferred")
        if isinstance(p, Mapping)
    )
    return required, preferred


def _term(raw: Mapping[str, Any]) -> NodeSelectorTerm:
    return NodeSelectorTerm(requirements(raw.get("matchExpressions")), requirements(raw.get("matchFields")))


def taints_of(node_spec: Mapping[str, Any], where: str = "") -> tuple[Taint, ...]:
    return F_TAINTS.read(node_spec.get("taints"), where, None)  # type: ignore[no-any-return]


def status_of(pod: Mapping[str, Any], where: str = "", sink: list[F.FieldInvalid] | None = None) -> TaskStatus:
    """Kubernetes pod state -> task status (Volcano's getTaskStatus). Reads phase, nodeName and
    deletionTimestamp through the table (a bad phase reads as Unknown, a bad deletionTimestamp as deleting); a
    pod under an eviction notice reads as deleting."""
    status = pod.get("status") or {}
    phase = status.get("phase", "Pending") if isinstance(status, dict) else None
    if type(phase) is not str or phase not in _PHASES:
        phase = F_PHASE.read(phase, where, sink)
    spec = pod.get("spec") or {}
    node = spec.get("nodeName") if isinstance(spec, dict) else None
    bound = bool(node) and type(node) is str
    meta = pod.get("metadata") or {}
    stamp = meta.get("deletionTimestamp") if isinstance(meta, dict) else None
    deleting = stamp is not None and F_DELETION.read(stamp, where, sink) != 0.0
    if not deleting and isinstance(meta, dict):
        # A victim given notice (api/evictions.py) is on its way out as a terminating pod is: its room is the
        # preemptor's (pipelined onto it), and it is not chosen again. The deadline is the evictor's to read.
        annotations = meta.get("annotations")
        deleting = isinstance(annotations, dict) and F.POD_EVICTION_NOTICE in annotations
    if phase == "Running":
        return TaskStatus.RELEASING if deleting else TaskStatus.RUNNING
    if phase == "Pending":
        if deleting:
            return TaskStatus.RELEASING if bound else TaskStatus.UNKNOWN
        return TaskStatus.BOUND if bound else TaskStatus.PENDING
    if phase == "Succeeded":
        return TaskStatus.SUCCEEDED
    if phase == "Failed":
        return TaskStatus.FAILED
    return TaskStatus.UNKNOWN


_PHASES = frozenset(F.POD_PHASES)


def role_of(annotations: Mapping[str, str], labels: Mapping[str, str], where: str = "",
            sink: list[F.FieldInvalid] | None = None) -> str:
    """The pod's task name (`volcano.sh/task-spec`), from its parsed annotations, else its labels, else a JobSet
    pod's replicated job (`jobset.sigs.k8s.io/replicatedjob-name`), else a PyTorchJob pod's replica type."""
    value = annotations.get(TASK_SPEC_KEY)
    if value:
        if type(value) is str and len(value) <= F.NAME_MAX:  # valid: spare the call
            return value
        return F_TASK_SPEC.read(value, where, sink)  # type: ignore[no-any-return]
    value = labels.get(TASK_SPEC_KEY)
    if value:
        return F_TASK_SPEC_LABEL.read(value, where, sink) or ""
    # A JobSet's pod: its replicated job is its task (api/owner_gang.py counts minTaskMember by it). A label
    # value the apiserver let through is at most 63 characters; anything else is no task.
    value = labels.get(JOBSET_REPLICATED_JOB) if labels else None
    if value is None and labels and labels.get(TRAINING_OPERATOR_NAME) == "pytorchjob-controller":
        # A PyTorchJob's pod: its replica type (lower-cased by the operator, which writes the same value as
        # `volcano.sh/task-spec` with its Volcano integration) is its task (api/pytorch_gang.py's minTaskMember).
        value = labels.get(TRAINING_REPLICA_TYPE)
    return value if type(value) is str and len(value) <= 63 else ""


def is_preemptable(annotations: Mapping[str, str], labels: Mapping[str, str], where: str = "",
                   sink: list[F.FieldInvalid] | None = None) -> bool:
    """Volcano's GetPodPreemptable (pkg/scheduler/api/pod_info.go), from the pod's parsed annotations and labels:
    the annotation if present (even empty), else the label, each read as Go's strconv.ParseBool; a value it
    refuses leaves the pod protected (false); neither present: preemptable."""
    if annotations:
        value = annotations.get(PREEMPTABLE_KEY)
        if value is not None:
            return F_PREEMPTABLE.read(value, where, sink)  # type: ignore[no-any-return]
    if labels:
        value = labels.get(PREEMPTABLE_KEY)
        if value is not None:
            return F_PREEMPTABLE_LABEL.read(value, where, sink)  # type: ignore[no-any-return]
    return True


for _name, _check in (("affinity", check_affinity), ("tolerations", check_tolerations), ("spread", check_spread),
                      ("ports", check_ports), ("taints", check_taints)):
    F.register(_name, _check)
