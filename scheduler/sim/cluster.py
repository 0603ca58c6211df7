"""Layer `sim`: an in-memory cluster behind the same interface as the Kubernetes cache.

It holds pods, nodes, PodGroups, Queues and HyperNodes as Kubernetes-shaped objects, gives the scheduler a fresh
`ClusterSnapshot` each cycle (built by `adapter.snapshot.build_snapshot`, the function the Kubernetes cache
calls, so both decide gang membership alike) and applies the `CycleResult` (binds, evictions, status). It answers
the partial-gang policy's questions (`adapter.partial.GangFacts`) from its objects and its simulated clock. Unit
tests and the simulator run the real scheduling code against it. Volumes are modelled only when storage objects
are added (`add_storage`, `sim/volumes.py`).

With `graceful` (the replay sets it), an eviction is modelled as Kubernetes carries it out: the victim is given
its queue's eviction notice first (annotated, still running), then deleted: it is terminating, still on its
node, for its `terminationGracePeriodSeconds` (30 by default, as Kubernetes), and gone after; `reap` returns the
pods gone so the job controller can react. Without it (unit tests' harness) a victim is gone at once. Either
way each eviction is recorded with its cause (`eviction_log`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from scheduler.adapter.partial import bound_since, owned_by_controller
from scheduler.adapter.podgroup_status import status_body
from scheduler.api.convert import (
    group_of,
    job_from_podgroup,
    key_of,
    node_from_object,
    queue_from_object,
    task_from_pod,
)
from scheduler.api.decision import REASONS_ANNOTATION, Status, read_published
from scheduler.api.disruption import DisruptionBudget, budget_from_object
from scheduler.api.dra import DraObjects
from scheduler.api.evictions import POD_NOTICE
from scheduler.api.fields import QUEUE_ALLOCATION_GATE
from scheduler.api.job import TaskInfo
from scheduler.api.node import NodeInfo
from scheduler.api.objects import MutableObj
from scheduler.api.queue import QueueInfo
from scheduler.api.reasons import Reason
from scheduler.api.resources import GPU, Resource
from scheduler.api.snapshot import ClusterSnapshot, CycleResult, Event, EvictCause, Eviction, reasons_annotation
from scheduler.api.timestamps import rfc3339
from scheduler.sim.devices import SimDevices
from scheduler.sim.objects import DEFAULT_GRACE, grace_of, merge_annotations
from scheduler.sim.pdbs import pdb_problem
from scheduler.sim.quotas import SimQuotas
from scheduler.sim.snapshots import SimChanges, sim_snapshot
from scheduler.sim.volumes import SimStorage
from scheduler.solver.topology import from_hypernodes

T = TypeVar("T")
DEFAULT_SCHEDULER_NAMES = frozenset({"volcano-py", "volcano"})


@dataclass(slots=True)
class SimPod:
    manifest: MutableObj
    task: TaskInfo  # parsed once; cloned into every snapshot
    created: float
    bound_at: float | None = None
    started_at: float | None = None
    finished_at: float | None = None
    grace: float = DEFAULT_GRACE  # spec.terminationGracePeriodSeconds
    delete_at: float | None = None  # evicted: when its delete is sent (after its notice, if any)
    gone_at: float | None = None  # deleted: when it is gone (after its grace period)


@dataclass(slots=True)
class SimPodGroup:
    manifest: MutableObj
    created: float
    implicit: bool = False


@dataclass(slots=True)
class BoundRecord:
    time: float
    job: str
    task: str
    node: str


@dataclass(frozen=True, slots=True)
class EvictionRecord:
    """One pod evicted: when, of which job, on which node, why (`cause`: None for an eviction that gave none),
    and when its delete went out and it was gone (None: not yet)."""

    time: float
    job: str
    task: str
    node: str
    reason: str
    cause: EvictCause | None
    notice: float
    grace: float


@dataclass(slots=True)
class InMemoryCluster:
    scheduler_names: frozenset[str] = DEFAULT_SCHEDULER_NAMES
    default_queue: str = "default"
    now: float = 0.0
    nodes: dict[str, NodeInfo] = field(default_factory=dict)
    queues: dict[str, QueueInfo] = field(default_factory=dict)
    queue_allocated: dict[str, Resource] = field(default_factory=dict)
    priority_classes: dict[str, int] = field(default_factory=dict)
    pods: dict[str, SimPod] = field(default_factory=dict)
    podgroups: dict[str, SimPodGroup] = field(default_factory=dict)
    hypernodes: dict[str, MutableObj] = field(default_factory=dict)  # topology.volcano.sh HyperNodes by name
    events: list[tuple[float, Event]] = field(default_factory=list)
    bind_log: list[BoundRecord] = field(default_factory=list)
    evicted: list[str] = field(default_factory=list)
    eviction_log: list[EvictionRecord] = field(default_factory=list)
    graceful: bool = False  # model eviction notices and grace periods (the replay); else a victim goes at once
    storage: SimStorage | None = None  # PersistentVolumes, claims, StorageClasses; None: volumes not modelled
    pdbs: dict[str, MutableObj] = field(default_factory=dict)  # PodDisruptionBudgets by namespace/name
    quotas: SimQuotas = field(default_factory=SimQuotas)  # ResourceQuotas, their status computed (sim/quotas.py)
    queue_allocation_gate: bool = False  # Volcano's feature gate SchedulingGatesQueueAdmission (`ungate`)
    devices: SimDevices | None = None  # DRA slices, classes, claims, templates; None: DRA not modelled
    _groups: dict[str, dict[str, None]] = field(default_factory=dict)  # PodGroup key -> its pods' keys, in order
    changes: SimChanges = field(default_factory=SimChanges)  # what changed since the last snapshot (snapshots.py)

    # ---- building the cluster -----------------------------------------------------------------------
    def add_node(self, node: MutableObj | NodeInfo) -> NodeInfo:
        info = node if isinstance(node, NodeInfo) else _read("Node", node, lambda: node_from_object(node))
        self.changes.changed_node(info.name, added=info.name not in self.nodes)
        self.nodes[info.name] = info
        return info

    def add_queue(self, queue: MutableObj | QueueInfo) -> QueueInfo:
        info = (
            queue
            if isinstance(queue, QueueInfo)
            else _read("Queue", queue, lambda: queue_from_object(queue, creation=self.now))
        )
        self.queues[info.name] = info
        return info

    def add_hypernode(self, hypernode: MutableObj) -> str:
        manifest = copy.deepcopy(hypernode)

        def validate() -> str:
            name = (manifest.get("metadata") or {}).get("name")
            if not name:
                raise ValueError("HyperNode: metadata.name is required")
            try:
                from_hypernodes([], [manifest])  # tier and members as the topology plugin reads them
            except ValueError as exc:
                raise ValueError(f"HyperNode {name!r} cannot be read: {exc}") from exc
            return str(name)

        name = _read("HyperNode", hypernode, validate)
        self.hypernodes[name] = manifest
        return name

    def add_storage(self, obj: MutableObj) -> str:
        """A PersistentVolume, PersistentVolumeClaim or StorageClass: from the first one on, pods' claims count."""
        if self.storage is None:
            self.storage = SimStorage()
        return self.storage.add(obj)

    def add_dra(self, obj: MutableObj) -> str:
        """A ResourceSlice, DeviceClass, ResourceClaim or ResourceClaimTemplate: from the first one on, pods'
        DRA claims count (`sim/devices.py`). Add them before the pods that name them."""
        if self.devices is None:
            self.devices = SimDevices()
        return _read(str(obj.get("kind")), obj, lambda: self.devices.add(obj) if self.devices else "")

    def add_pdb(self, pdb: MutableObj) -> str:
        """A PodDisruptionBudget (policy/v1). With an integer `spec.minAvailable`, its `disruptionsAllowed` is
        computed each cycle as the disruption controller computes it for one (its selected pods that are Running,
        less minAvailable, at least 0); otherwise its `status` is taken as given and never changes."""
        manifest = copy.deepcopy(pdb)

        def validate() -> str:
            manifest.setdefault("metadata", {}).setdefault("namespace", "default")
            problem = pdb_problem(manifest)
            if problem:
                raise ValueError(f"PodDisruptionBudget {key_of(manifest)}: {problem}")
            return key_of(manifest)

        key = _read("PodDisruptionBudget", pdb, validate)
        self.pdbs[key] = manifest
        return key

    def disruption_budgets(self) -> tuple[DisruptionBudget, ...]:
        out = []
        for manifest in self.pdbs.values():
            budget = budget_from_object(manifest)
            minimum = (manifest.get("spec") or {}).get("minAvailable")
            if type(minimum) is int:
                healthy = sum(1 for pod in self.pods.values()
                              if pod.manifest["status"].get("phase") == "Running"
                              and budget.selects(pod.task.namespace, pod.task.labels))
                budget = replace(budget, allowed=max(0, healthy - minimum))
            out.append(budget)
        return tuple(out)

    def add_resource_quota(self, quota: MutableObj) -> str:
        """A ResourceQuota (core/v1), its status kept as the quota controller would (`sim/quotas.py`)."""
        return _read("ResourceQuota", quota, lambda: self.quotas.add(quota))

    def add_priority_class(self, name: str, value: int) -> None:
        self.priority_classes[name] = value

    def add_podgroup(self, podgroup: MutableObj) -> str:
        manifest = copy.deepcopy(podgroup)

        def validate() -> str:
            manifest.setdefault("metadata", {}).setdefault("namespace", "default")
            manifest.setdefault("status", {}).setdefault("phase", "Pending")
            job_from_podgroup(manifest, priority_classes=self.priority_classes, default_queue=self.default_queue)
            return key_of(manifest)

        # Validate now: a PodGroup the scheduler cannot read is rejected here, not mid-cycle.
        key = _read("PodGroup", podgroup, validate)
        self.changes.changed_podgroup(key, added=key not in self.podgroups)
        self.podgroups[key] = SimPodGroup(manifest, self.now)
        return key

    def add_pod(self, pod: MutableObj, *, owned: bool = False) -> str:
        """Add a pod; the cluster keeps a copy, or, with `owned`, the manifest itself (the caller made it for the
        cluster and keeps no reference: the job controller's 100,000 new pods are not copied once more)."""
        manifest = pod if owned else copy.deepcopy(pod)

        def parse() -> TaskInfo:
            if not isinstance(manifest.get("spec"), Mapping):
                raise ValueError(f"pod {key_of(manifest)}: spec: expected a map, got {manifest.get('spec')!r}")
            manifest.setdefault("metadata", {}).setdefault("namespace", "default")
            manifest.setdefault("status", {}).setdefault("phase", "Pending")
            if self.devices is not None:  # the resourceclaim controller's part: claims from templates made
                self.devices.make_claims(manifest)
            return task_from_pod(manifest, priority_classes=self.priority_classes, creation=self.now)

        task = _read("Pod", pod, parse)
        self.pods[task.key] = SimPod(manifest, task, self.now, grace=grace_of(manifest))
        self.changes.added_pod(task.key)
        self._groups.setdefault(group_of(manifest), {})[task.key] = None
        return task.key

    def delete_pod(self, key: str) -> None:
        self.pods.pop(key, None)
        self.changes.gone_pod(key)

    def delete_podgroup(self, key: str) -> None:
        """The PodGroup and its pods, as deleting their Job takes them (garbage collection by owner)."""
        for pod in self._groups.pop(key, {}):
            self.delete_pod(pod)
        self.podgroups.pop(key, None)
        self.changes.changed_podgroup(key)

    # ---- the kubelet's part -------------------------------------------------------------------------
    def start_bound_pods(self) -> list[str]:
        """Bound pods that are still Pending start Running (what a kubelet does)."""
        started = []
        for key, pod in self.pods.items():
            if pod.manifest["spec"].get("nodeName") and pod.manifest["status"]["phase"] == "Pending":
                pod.manifest["status"]["phase"] = "Running"
                pod.started_at = self.now
                self.changes.changed_pod(key)
                started.append(key)
        return started

    def finish_pod(self, key: str, *, succeeded: bool = True, exit_code: int = 0) -> None:
        pod = self.pods[key]
        self.changes.changed_pod(key)
        pod.manifest["status"]["phase"] = "Succeeded" if succeeded else "Failed"
        pod.manifest["status"]["containerStatuses"] = [
            {"name": "main", "state": {"terminated": {"exitCode": exit_code}}}
        ]
        pod.finished_at = self.now

    # ---- ClusterAdapter -----------------------------------------------------------------------------
    def snapshot(self) -> ClusterSnapshot:
        return sim_snapshot(self)  # afresh, or from the last one and the changes once `changes.start` is called

    def _dra(self) -> DraObjects | None:
        """The DRA objects, once pods gone or finished have left their claims (read only when a pending pod of
        ours names claims)."""
        if self.devices is None:
            return None
        self.devices.sweep((key, _uid(p)) for key, p in self.pods.items()
                           if p.manifest["status"].get("phase") not in ("Succeeded", "Failed"))
        return self.devices.objects()

    def ungate(self, key: str) -> bool:
        """Remove the pod's queue-allocation gate if it is its only gate, as the cache's JSON Patch does
        (`cache/gates.py`); False if the pod is gone or has another gate."""
        pod = self.pods.get(key)
        if pod is None or pod.manifest.get("spec", {}).get("schedulingGates") != [{"name": QUEUE_ALLOCATION_GATE}]:
            return False
        del pod.manifest["spec"]["schedulingGates"]
        self.changes.changed_pod(key)
        pod.task.gated, pod.task.only_queue_gate = "", False
        return True

    # ---- adapter.partial.GangFacts ------------------------------------------------------------------
    def bound_at(self, pod_key: str) -> float | None:
        pod = self.pods.get(pod_key)
        if pod is None:
            return None
        at = bound_since(pod.manifest)
        return at if at is not None else pod.bound_at

    def controller_owned(self, pod_key: str) -> bool:
        pod = self.pods.get(pod_key)
        return pod is not None and owned_by_controller(pod.manifest)

    def has_podgroup(self, key: str) -> bool:
        return key in self.podgroups

    def apply(self, result: CycleResult) -> None:
        for key in result.ungate:
            self.ungate(key)
        for gang in result.binds:
            if self.storage is not None:
                for volume in gang.volumes:  # before the pods, as the cache binds them
                    self.storage.bind(volume)
            if gang.claims and self.devices is not None and not self.devices.write(
                    gang.claims, {k: _uid(p) for k, _ in gang.binds if (p := self.pods.get(k)) is not None}):
                continue  # a claim could not be written: none of the gang's pods is bound (cache/dra_writer.py)
            for task_key, node in gang.binds:
                pod = self.pods.get(task_key)
                if pod is None:
                    continue  # deleted meanwhile: dropped cleanly
                if task_key in result.annotations:
                    pod.manifest["metadata"].setdefault("annotations", {}).update(result.annotations[task_key])
                pod.manifest["spec"]["nodeName"] = node
                self.changes.changed_pod(task_key)
                pod.bound_at = self.now
                pod.task.scheduled_at = self.now  # its PodScheduled time (cdp, minruntime, victimcost read it)
                self.bind_log.append(BoundRecord(self.now, gang.job, task_key, node))
        for eviction in result.evictions:
            self._evict(eviction)
        for status in result.podgroups:
            pg = self.podgroups.get(status.job)
            if pg is None:
                continue
            st = pg.manifest.setdefault("status", {})
            before = dict(st)
            st.update(status_body(status, st, self.now))
            if st != before:
                self.changes.changed_podgroup(status.job)  # as the scheduler writes it (adapter/podgroup_status.py)
            patch = reasons_annotation(status, pg.manifest.get("metadata", {}).get("annotations"))
            if patch is not None:
                merge_annotations(pg.manifest, patch)
                self.changes.changed_podgroup(status.job)
        for job, patch in result.podgroup_annotations.items():  # as the cache writes them (cache/publish.py)
            group = self.podgroups.get(job)
            if group is not None:
                merge_annotations(group.manifest, patch)
                self.changes.changed_podgroup(job)
        for queue in result.queues:
            self.queue_allocated[queue.queue] = queue.allocated
            if queue.usage is not None and queue.queue in self.queues:
                # time-based fair share: kept in memory as the status writer keeps it in the Queue's annotation
                self.queues[queue.queue].usage = queue.usage
        self.events.extend((self.now, e) for e in result.events)

    def _evict(self, eviction: Eviction) -> None:
        pod = self.pods.get(eviction.task)
        if pod is None or pod.delete_at is not None:
            return  # gone, or already on its way out
        self.evicted.append(eviction.task)
        self.eviction_log.append(EvictionRecord(self.now, eviction.job, eviction.task, eviction.node,
                                                eviction.reason, eviction.cause,
                                                eviction.notice if self.graceful else 0.0,
                                                pod.grace if self.graceful else 0.0))
        if not self.graceful:
            self.delete_pod(eviction.task)
            return
        pod.delete_at = self.now + eviction.notice
        if eviction.notice:  # annotated as the evictor does: the snapshot reads it as releasing (api/pod.py)
            pod.manifest["metadata"].setdefault("annotations", {})[POD_NOTICE] = rfc3339(pod.delete_at)
            self.changes.changed_pod(eviction.task)
        self._delete_due(pod)

    def _delete_due(self, pod: SimPod) -> None:
        if pod.gone_at is None and pod.delete_at is not None and pod.delete_at <= self.now:
            pod.manifest["metadata"]["deletionTimestamp"] = rfc3339(max(self.now, 1.0))
            self.changes.changed_pod(pod.task.key)
            pod.gone_at = pod.delete_at + pod.grace

    def reap(self) -> list[SimPod]:
        """Evicted pods whose notice ran out are deleted; those whose grace period ran out are gone (returned)."""
        gone = []
        for key, pod in list(self.pods.items()):
            if pod.delete_at is None:
                continue
            self._delete_due(pod)
            if pod.gone_at is not None and pod.gone_at <= self.now:
                gone.append(self.pods.pop(key))
                self.changes.gone_pod(key)
        return gone

    def next_reap(self) -> float | None:
        """When an evicted pod is next deleted or gone (None: none pending)."""
        times = [t for p in self.pods.values() for t in (p.delete_at, p.gone_at)
                 if t is not None and t > self.now]
        return min(times, default=None)

    # ---- queries for tests and reports --------------------------------------------------------------
    def pods_of(self, group: str) -> list[SimPod]:
        """The pods of a PodGroup, from an index kept by add_pod (a replay asks for every job on every tick)."""
        key = group if "/" in group else f"default/{group}"
        members = self._groups.get(key, {})
        return [pod for uid in members if (pod := self.pods.get(uid)) is not None]

    def bound(self, group: str) -> dict[str, str]:
        pods = self.pods_of(group)
        return {p.task.name: p.manifest["spec"]["nodeName"] for p in pods if p.manifest["spec"].get("nodeName")}

    def podgroup(self, group: str) -> MutableObj:
        key = group if "/" in group else f"default/{group}"
        return self.podgroups[key].manifest

    def decision(self, group: str) -> Status | None:
        """The Status the scheduler published on the PodGroup (its reasons annotation), if any."""
        text = (self.podgroup(group).get("metadata", {}).get("annotations") or {}).get(REASONS_ANNOTATION)
        return read_published(text) if text else None

    def reasons(self, group: str) -> tuple[Reason, ...]:
        decision = self.decision(group)
        return decision.reasons if decision is not None else ()

    def condition(self, group: str, type_: str = "Unschedulable") -> Mapping[str, Any] | None:
        for c in self.podgroup(group).get("status", {}).get("conditions") or ():
            if c["type"] == type_:
                return c  # type: ignore[no-any-return]
        return None

    def used_gpus(self, group: str | None = None) -> int:
        """GPUs (milli) held by pods bound to nodes and not finished (of one PodGroup, if named)."""
        return self.used(GPU, group)

    def used(self, resource: str, group: str | None = None) -> int:
        """Units of `resource` held by pods bound to nodes and not finished (of one PodGroup, if named)."""
        total = 0
        for pod in self.pods.values() if group is None else self.pods_of(group):
            if pod.manifest["spec"].get("nodeName") and pod.manifest["status"]["phase"] in ("Pending", "Running"):
                total += pod.task.resreq.get(resource)
        return total

    def total_gpus(self) -> int:
        return sum(n.allocatable.gpu for n in self.nodes.values())

    def partially_bound_gangs(self) -> list[str]:
        """Gangs with some but fewer than minMember pods holding nodes, none of them finished yet."""
        out = []
        by_group: dict[str, list[SimPod]] = {}
        for pod in self.pods.values():
            by_group.setdefault(group_of(pod.manifest), []).append(pod)
        for key, pods in by_group.items():
            pg = self.podgroups.get(key)
            if pg is None:
                continue
            minimum = int(pg.manifest["spec"].get("minMember", pg.manifest["spec"].get("minAvailable", 1)))
            if any(p.manifest["status"]["phase"] in ("Succeeded", "Failed") for p in pods):
                continue
            holding = sum(1 for p in pods if p.manifest["spec"].get("nodeName"))
            if 0 < holding < minimum:
                out.append(key)
        return out

    def allocated_by_queue(self) -> Mapping[str, Resource]:
        return dict(self.queue_allocated)


def _read(kind: str, obj: Any, parse: Callable[[], T]) -> T:
    """Objects are checked when they are added; any malformed one is refused with a ValueError naming it."""
    try:
        return parse()
    except ValueError:
        raise
    except (AttributeError, TypeError, KeyError, ArithmeticError) as exc:  # int(.inf) from YAML: OverflowError
        meta = obj.get("metadata") if isinstance(obj, Mapping) else None
        name = meta.get("name") if isinstance(meta, Mapping) else None
        raise ValueError(f"{kind} {name!r} cannot be read: {type(exc).__name__}: {exc}") from exc


def _uid(pod: SimPod) -> str:
    uid = pod.manifest["metadata"].get("uid")
    return uid if isinstance(uid, str) else ""
