"""Layer `api`: what the scheduler reads off a Pod: its request, its placement constraints and its status.

Both the Kubernetes cache and the simulator turn pods into tasks here, so they agree on every rule.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

# The selectors live in api.selectors (api.volumes reads them too); they are re-exported here, where they were.
from scheduler.api.selectors import LabelSelector as LabelSelector
from scheduler.api.selectors import NodeSelectorTerm as NodeSelectorTerm
from scheduler.api.selectors import Requirement as Requirement
from scheduler.api.selectors import label_selector, node_selector_terms, requirements
from scheduler.api.status import TaskStatus
from scheduler.api.volumes import VolumeNeeds

GROUP_NAME_ANNOTATION = "scheduling.k8s.io/group-name"
TASK_SPEC_KEY = "volcano.sh/task-spec"
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
    _hash: int = field(default=0, init=False, compare=False, repr=False)
    _dynamic: bool = field(default=False, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash(self._fields()))
        object.__setattr__(self, "_dynamic", bool(
            self.pod_affinity or self.pod_anti_affinity or self.preferred_pod_affinity
            or self.preferred_pod_anti_affinity or self.spread or self.host_ports
            or (self.volumes is not None and self.volumes.to_bind)
        ))

    def _fields(self) -> tuple[Any, ...]:
        return (
            self.node_selector, self.required_terms, self.tolerations, self.preferred, self.pod_affinity,
            self.pod_anti_affinity, self.preferred_pod_affinity, self.preferred_pod_anti_affinity, self.spread,
            self.host_ports, self.volumes,
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


def constraints_of(spec: Mapping[str, Any]) -> Constraints:
    selector = spec.get("nodeSelector") or {}
    affinity = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = node_selector_terms(affinity)
    tolerations = tuple(
        Toleration(
            str(t.get("key", "") or ""),
            str(t.get("operator", "Equal") or "Equal"),
            str(t.get("value", "") or ""),
            str(t.get("effect", "") or ""),
        )
        for t in spec.get("tolerations") or ()
        if isinstance(t, Mapping)
    )
    preferred = tuple(
        (int(p.get("weight", 0) or 0), _term(p.get("preference") or {}))
        for p in ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "preferredDuringSchedulingIgnoredDuringExecution"
        )
        or ()
        if isinstance(p, Mapping)
    )
    node_selector = tuple(sorted((str(k), str(v)) for k, v in selector.items()))
    raw_affinity = spec.get("affinity") or {}
    affinity_terms = _pod_terms(raw_affinity.get("podAffinity"))
    anti_terms = _pod_terms(raw_affinity.get("podAntiAffinity"))
    made = Constraints(
        node_selector, terms, tolerations, preferred,
        affinity_terms[0], anti_terms[0], affinity_terms[1], anti_terms[1],
        _spread(spec.get("topologySpreadConstraints")),
        host_ports_of(spec),
    )
    return _SHARED.setdefault(made, made)


_ANY_IP = ("", "0.0.0.0")  # noqa: S104 - a host IP as Kubernetes spells "all addresses", not a bind


def host_ports_of(spec: Mapping[str, Any]) -> tuple[HostPort, ...]:
    """The host ports a pod's containers ask for, as kube-scheduler's NodePorts plugin reads them (containers'
    `ports[].hostPort` with their protocol, TCP by default, and hostIP, all addresses by default)."""
    found = []
    for container in spec.get("containers") or ():
        for port in (container or {}).get("ports") or ():
            host_port = (port or {}).get("hostPort")
            if isinstance(host_port, int) and host_port > 0:
                found.append((str(port.get("protocol") or "TCP"), str(port.get("hostIP") or ""), host_port))
    return tuple(sorted(set(found)))


def with_host_ports(constraints: Constraints, ports: tuple[HostPort, ...]) -> Constraints:
    """`constraints` with these host ports (the shared instance), for a pod parsed without its containers."""
    made = replace(constraints, host_ports=ports)
    return _SHARED.setdefault(made, made)


def with_volumes(constraints: Constraints, volumes: VolumeNeeds | None) -> Constraints:
    """`constraints` with what the pod's claims require (the shared instance)."""
    made = replace(constraints, volumes=volumes)
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
        tuple(str(n) for n in raw.get("namespaces") or ()),
    )


def _pod_terms(raw: object) -> tuple[tuple[PodAffinityTerm, ...], tuple[tuple[int, PodAffinityTerm], ...]]:
    """(required terms, preferred (weight, term)) of a podAffinity or podAntiAffinity block."""
    if not isinstance(raw, Mapping):
        return (), ()
    required = tuple(
        _pod_term(t) for t in raw.get("requiredDuringSchedulingIgnoredDuringExecution") or () if isinstance(t, Mapping)
    )
    preferred = tuple(
        (int(p.get("weight", 0) or 0), _pod_term(p.get("podAffinityTerm") or {}))
        for p in raw.get("preferredDuringSchedulingIgnoredDuringExecution") or ()
        if isinstance(p, Mapping)
    )
    return required, preferred


def _spread(raw: object) -> tuple[SpreadConstraint, ...]:
    if not isinstance(raw, list):
        return ()
    return tuple(
        SpreadConstraint(
            max(1, int(c.get("maxSkew", 1) or 1)),
            str(c.get("topologyKey") or ""),
            str(c.get("whenUnsatisfiable") or "DoNotSchedule"),
            label_selector(c.get("labelSelector")),
        )
        for c in raw
        if isinstance(c, Mapping)
    )


def _term(raw: Mapping[str, Any]) -> NodeSelectorTerm:
    return NodeSelectorTerm(requirements(raw.get("matchExpressions")), requirements(raw.get("matchFields")))


def taints_of(node_spec: Mapping[str, Any]) -> tuple[Taint, ...]:
    return tuple(
        Taint(str(t.get("key", "")), str(t.get("value", "") or ""), str(t.get("effect", "")))
        for t in node_spec.get("taints") or ()
        if isinstance(t, Mapping)
    )


def status_of(pod: Mapping[str, Any]) -> TaskStatus:
    """Kubernetes pod state -> task status (Volcano's getTaskStatus)."""
    status = pod.get("status") or {}
    phase = status.get("phase", "Pending")
    bound = bool((pod.get("spec") or {}).get("nodeName"))
    deleting = bool((pod.get("metadata") or {}).get("deletionTimestamp"))
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


def role_of(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    annotations, labels = meta.get("annotations") or {}, meta.get("labels") or {}
    return str(annotations.get(TASK_SPEC_KEY) or labels.get(TASK_SPEC_KEY) or "")


def is_preemptable(pod: Mapping[str, Any]) -> bool:
    meta = pod.get("metadata") or {}
    value = (meta.get("annotations") or {}).get(PREEMPTABLE_KEY) or (meta.get("labels") or {}).get(PREEMPTABLE_KEY)
    return str(value).lower() != "false"
