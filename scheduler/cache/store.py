"""Layer `cache`: the objects the watches keep (the latest of each kind, by key) and what reads their metadata.

Every part of the cache (watches, parse cache, binder, evictor, status writer, events) reads and writes these
stores under one lock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from scheduler.api.objects import MutableObj
from scheduler.cache.scope import PodScope

PG_API = "/apis/scheduling.volcano.sh/v1beta1"
DRA_API = "/apis/resource.k8s.io/v1"
STORAGE_KINDS = frozenset({"PersistentVolume", "PersistentVolumeClaim", "StorageClass"})


class Journaled(dict[str, MutableObj]):
    """A kind's objects by key, noting the keys written since the last `take`, so the incremental snapshot reads
    those rather than comparing every object of the cluster each cycle (cache/snapshots.py; 550,000 pods took it
    a sixth of a second per cycle).

    The keys are noted in the order the dict holds new keys: a key that comes (or comes back after it went) goes
    last in both, and a change to a key already noted keeps its place. Each key notes whether it came (or came
    back) since the last take: True, it went last in the dict; False, it was changed or deleted only. So a reader
    can keep a copy in the dict's very order from the journal alone. A journal that outgrows the dict (nothing
    took it: a standby) is dropped, and `take` then says so with None: the reader compares everything once."""

    __slots__ = ("_written",)

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._written: dict[str, bool] | None = {}

    def __setitem__(self, key: str, value: MutableObj) -> None:
        written = self._written
        if written is not None:
            if key not in self:
                written.pop(key, None)
                written[key] = True
            elif key not in written:
                written[key] = False
            if len(written) > 2 * len(self) + 1024:
                self._written = None
        super().__setitem__(key, value)

    def __delitem__(self, key: str) -> None:
        super().__delitem__(key)
        if self._written is not None:
            self._written.setdefault(key, False)

    def pop(self, key: str, *default: Any) -> Any:
        if key in self and self._written is not None:
            self._written.setdefault(key, False)
        return super().pop(key, *default)

    def setdefault(self, key: str, default: MutableObj) -> MutableObj:
        if key not in self:
            self[key] = default
        return self[key]

    def update(self, *args: Any, **kwargs: Any) -> None:
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def clear(self) -> None:
        for key in list(self):
            del self[key]

    def _unsupported(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("a store's objects change one key at a time")

    popitem = __ior__ = _unsupported

    def take(self) -> dict[str, bool] | None:
        """The keys written since the last take (None: not known), and a fresh journal."""
        written, self._written = self._written, {}
        return written


def journal_of(objects: dict[str, MutableObj]) -> dict[str, bool] | None:
    """`take` of a Journaled dict; None for a plain one (a test's, or one a list replaced with a plain dict)."""
    return objects.take() if isinstance(objects, Journaled) else None


@dataclass(slots=True)
class Watched:
    """One resource kind: its collection path, the latest objects by key, and the watch position."""

    kind: str
    path: str
    objects: dict[str, MutableObj] = field(default_factory=Journaled)
    resource_version: str | None = None
    synced: threading.Event = field(default_factory=threading.Event)
    # A kind that may be absent (a CRD not installed: 404) or that the scheduler may not be allowed to read (403,
    # an older ClusterRole): it then counts as synced and empty, `listed` stays False, and it is tried again later.
    optional: bool = False
    listed: bool = False  # a list succeeded: the objects are the cluster's
    # Told of every object listed or changed (type, object), on the watch's thread after the store holds it: the
    # Lease watch of `--active-shards` (cache/active.py `observe`), which times each Lease's changes as they come.
    on_event: Callable[[str, MutableObj], None] | None = None


@dataclass(slots=True)
class Stores:
    """The watched kinds, the lock that guards them, and the binds the watch has not shown yet."""

    pods: Watched = field(default_factory=lambda: Watched("Pod", "/api/v1/pods"))
    nodes: Watched = field(default_factory=lambda: Watched("Node", "/api/v1/nodes"))
    podgroups: Watched = field(default_factory=lambda: Watched("PodGroup", f"{PG_API}/podgroups"))
    queues: Watched = field(default_factory=lambda: Watched("Queue", f"{PG_API}/queues"))
    priority_classes: Watched = field(
        default_factory=lambda: Watched("PriorityClass", "/apis/scheduling.k8s.io/v1/priorityclasses")
    )
    hypernodes: Watched = field(
        default_factory=lambda: Watched("HyperNode", "/apis/topology.volcano.sh/v1alpha1/hypernodes", optional=True)
    )
    # Watched always (cheap: a few objects per claim, read once per change, `cache/volumes.py`); without the RBAC
    # to read them, the scheduler goes on without considering volumes.
    volumes: Watched = field(
        default_factory=lambda: Watched("PersistentVolume", "/api/v1/persistentvolumes", optional=True)
    )
    claims: Watched = field(
        default_factory=lambda: Watched("PersistentVolumeClaim", "/api/v1/persistentvolumeclaims", optional=True)
    )
    storage_classes: Watched = field(
        default_factory=lambda: Watched("StorageClass", "/apis/storage.k8s.io/v1/storageclasses", optional=True)
    )
    # For the pdb plugin; optional, as the storage kinds: without the RBAC to read them, no PDB protects a pod.
    disruption_budgets: Watched = field(
        default_factory=lambda: Watched("PodDisruptionBudget", "/apis/policy/v1/poddisruptionbudgets", optional=True)
    )
    # For the resourcequota plugin (Volcano's cache watches them: pkg/scheduler/cache/cache.go quotaInformer);
    # optional: without the RBAC to read them, no quota holds a job at enqueue (the apiserver still enforces them).
    resource_quotas: Watched = field(
        default_factory=lambda: Watched("ResourceQuota", "/api/v1/resourcequotas", optional=True)
    )
    # Dynamic Resource Allocation (resource.k8s.io/v1, `cache/dra.py`); optional: a cluster without the API, or a
    # ClusterRole without the rights, has no devices to offer and no claims to allocate.
    resource_slices: Watched = field(
        default_factory=lambda: Watched("ResourceSlice", f"{DRA_API}/resourceslices", optional=True)
    )
    device_classes: Watched = field(
        default_factory=lambda: Watched("DeviceClass", f"{DRA_API}/deviceclasses", optional=True)
    )
    resource_claims: Watched = field(
        default_factory=lambda: Watched("ResourceClaim", f"{DRA_API}/resourceclaims", optional=True)
    )
    claim_templates: Watched = field(
        default_factory=lambda: Watched("ResourceClaimTemplate", f"{DRA_API}/resourceclaimtemplates", optional=True)
    )
    # NodeShards (shard.volcano.sh), watched only with --scheduler-sharding-mode soft or hard (cache/shards.py)
    node_shards: Watched | None = None
    # The Leases of the lease namespace, watched only with --active-shards (cache/active.py)
    leases: Watched | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    assumed: dict[str, tuple[str, float]] = field(default_factory=dict)  # pod key -> (node, when) bound by us
    storage_version: int = 0  # bumped on every change to the three storage kinds
    # The resourceVersion (as a number) of the last list of every pod merged in (cache/freshen.py): the pods are as
    # current as that, whatever the pod watch's own position
    pods_listed_at: int = 0
    # With --active-shards: which other schedulers' pods are kept (cache/scope.py); None: every pod
    pod_scope: PodScope | None = None

    @property
    def watched(self) -> tuple[Watched, ...]:
        return (
            self.pods,
            self.nodes,
            self.podgroups,
            self.queues,
            self.priority_classes,
            self.hypernodes,
            *self.storage,
            self.disruption_budgets,
            self.resource_quotas,
            *self.dra,
            *((self.node_shards,) if self.node_shards is not None else ()),
            *((self.leases,) if self.leases is not None else ()),
        )

    @property
    def dra(self) -> tuple[Watched, Watched, Watched, Watched]:
        return (self.resource_slices, self.device_classes, self.resource_claims, self.claim_templates)

    @property
    def storage(self) -> tuple[Watched, Watched, Watched]:
        return (self.volumes, self.claims, self.storage_classes)

    def expire_assumed(self) -> None:
        """Under the lock: forget the binds whose pod is gone from the stores. A bind is never forgotten for its age
        alone, as kube-scheduler's assumed pods never expire (kubernetes#106361: expiry raced with slow watches):
        the apiserver accepted it, so the pod is bound there whatever the watch has shown yet. With a 60 s expiry, a
        pod watch more than a minute behind (8 replicas at 100,000 nodes under `make bench-shards --churn`: 60-80 s)
        saw those pods pending again and their room free, and 11 nodes were over-committed. The watch's event
        showing the pod bound, its deletion, or a list showing it bound (cache/watch.py) ends the assumption."""
        for key in [key for key in self.assumed if key not in self.pods.objects]:
            del self.assumed[key]


def resource_version(obj: MutableObj) -> int:
    """resourceVersion as a number (etcd revisions), to keep the newer of two copies; 0 if not numeric."""
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion") or 0)
    except (ValueError, TypeError, AttributeError):  # a hand-made object: not as Kubernetes writes one
        return 0


def trim(obj: MutableObj) -> None:
    """Drop what the scheduler never reads and that costs memory on every object (managedFields)."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
