"""Layer `cache`: the Kubernetes implementation of the cluster adapter (`snapshot`, `apply`), as one facade.

Its parts, one job each:
- `watch.Watcher`: list+watch threads keeping the latest pods, nodes, PodGroups, Queues, PriorityClasses,
  HyperNodes, PersistentVolumes, PersistentVolumeClaims, StorageClasses, PodDisruptionBudgets and ResourceQuotas
  as raw JSON in `store.Stores`;
- `parse.ParseCache`: those objects read into infos, each pod once per resourceVersion; `volumes.StorageReader`
  the storage objects, rebuilt only when one changed;
- `adapter.snapshot.build_snapshot`: the snapshot, built by the same function the simulator calls;
- `binder.Binder` (with `volumes.VolumeBinder` for a gang's claims), `evictor.Evictor`,
  `status_writer.StatusWriter`, `events.EventRecorder`: a cycle's decisions carried back: claims and binds,
  evictions, PodGroup / Queue / pod status, events.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

from scheduler.adapter.partial import bound_since, owned_by_controller
from scheduler.adapter.snapshot import AdapterRules, SnapshotInputs, build_snapshot
from scheduler.api.node import NodeInfo
from scheduler.api.phases import TaskStatus
from scheduler.api.shard import revision
from scheduler.api.snapshot import ClusterSnapshot, CycleResult
from scheduler.cache.applier import Applied, Applier, behind
from scheduler.cache.binder import Binder, Pending
from scheduler.cache.dra import DraReader
from scheduler.cache.events import EventRecorder
from scheduler.cache.evictor import Evictor
from scheduler.cache.freshen import freshener
from scheduler.cache.gates import GateRemover
from scheduler.cache.kube import Kube, KubeError
from scheduler.cache.pages import PAGE_SIZE, EarlyList, Pages
from scheduler.cache.parse import ParseCache
from scheduler.cache.shards import ShardCoordinator, coordinator_for
from scheduler.cache.snapshots import CacheSnapshots
from scheduler.cache.status_writer import StatusWriter
from scheduler.cache.store import PG_API, Stores, Watched, journal_of
from scheduler.cache.volumes import StorageReader
from scheduler.cache.watch import Watcher

if TYPE_CHECKING:  # imported by the CLI only with --active-shards
    from scheduler.cache.active import ActiveShards

log = logging.getLogger("volcano_py.cache")


def prestart(pool: ThreadPoolExecutor) -> None:
    """Make the pool start all its threads: each of that many tasks waits until all are running (a pool starts a
    thread for a task only when none is idle)."""
    workers = pool._max_workers
    barrier = threading.Barrier(workers)

    def wait() -> None:
        with contextlib.suppress(threading.BrokenBarrierError):  # the pool is shutting down: nothing to wait for
            barrier.wait(10.0)

    for _ in range(workers):
        pool.submit(wait)


ORPHAN_GRACE = 3.0  # seconds a pod may wait for the PodGroup it names before it is told it does not exist


class ClusterCache:
    def __init__(
        self,
        api_client: Any,
        scheduler_names: Iterable[str] = frozenset({"volcano-py"}),
        default_queue: str = "default",
        *,
        watch_timeout: int = 60,
        page_size: int = PAGE_SIZE,
        request_timeout: float = 30.0,
        bind_workers: int = 16,
        eviction_grace_seconds: int | None = None,  # None: each pod's own terminationGracePeriodSeconds
        clock: Callable[[], float] | None = None,
        local_clock: Callable[[], float] = time.time,
        identity: str | None = None,
        event_workers: int = 2,
        prefetched: dict[str, Pages] | None = None,
        kube: Kube | None = None,
        queue_allocation_gate: bool = False,
        ours_early: list[EarlyList] | None = None,
        sharding: tuple[str, str] | None = None,  # (mode, NodeShard name): --scheduler-sharding-mode soft or hard
        incremental: bool = True,
    ):
        # `kube`: a client already made from `api_client` (the one the `prefetched` lists run on), or a new one.
        kube = kube or Kube(api_client, request_timeout=request_timeout, local_clock=local_clock)
        self.scheduler_names = frozenset(scheduler_names)
        self.default_queue = default_queue
        self.rules = AdapterRules(self.scheduler_names, default_queue)
        # `now` for snapshots, binds and events: the apiserver's clock (cache/clock.py), so a timeout that starts
        # at an object's creationTimestamp runs the same on a replica whose clock is off; `clock` for tests.
        clock = clock or kube.clock.now
        self.clock = clock
        self.stores = Stores()
        self._stop = threading.Event()
        self._instance = identity or f"{socket.gethostname()}-{os.getpid()}"
        # Writes (binds, evictions, status) are sent only while this returns True: the leader-election guard.
        self.may_write: Callable[[], bool] = lambda: True

        def may_write() -> bool:  # read when called: the runner swaps the guard in
            return self.may_write()

        # Seconds the Lease is certainly ours (None: no leader election); binds are fenced by it (`Binder`).
        self.lease_left: Callable[[], float | None] = lambda: None

        def lease_left() -> float | None:  # likewise
            return self.lease_left()

        self._pool = ThreadPoolExecutor(max_workers=bind_workers, thread_name_prefix="volcano-py-api")
        self.events = EventRecorder(kube, self.stores, clock, self._instance, self._stop, event_workers)
        self.parser = ParseCache(
            self.scheduler_names, self.stores.lock,
            lambda kind, key, message: self.events.record(kind, key, "Warning", "FailedToRead", message),
        )
        self.watcher = Watcher(kube, self.stores, self.parser, self._stop, watch_timeout=watch_timeout,
                               page_size=page_size, prefetched=prefetched)
        self.storage = StorageReader(self.stores, self.parser.read)
        self.dra = DraReader()  # ResourceSlices, DeviceClasses, ResourceClaims, templates (cache/dra.py)
        self.binder = Binder(kube, self.stores, self._pool, self.events, may_write, clock, lease_left=lease_left)
        # An eviction names the pod the cycle decided for (its snapshot copy: uid and resourceVersion), not whatever
        # the watch has put under that name since.
        self.evictor = Evictor(kube, self.stores, self._pool, self.events, may_write, eviction_grace_seconds,
                               decided=lambda key: self._snapshot_pods.get(key), clock=clock)
        self.status_writer = StatusWriter(kube, self.stores, self._pool, self.scheduler_names, may_write, self._stop)
        # Volcano's feature gate SchedulingGatesQueueAdmission: cycles ungate opted-in pods, written by `gates`.
        self.queue_allocation_gate = queue_allocation_gate
        self.gates = GateRemover(kube, self.stores, self._pool, may_write)
        self._kube = kube
        self._snapshot_pods: dict[str, Any] = {}
        # Our schedulers' pods, listed early for the first cycle on a partial view (cache/first_view.py); the
        # runner takes them.
        self.ours_early: list[EarlyList] = list(ours_early or [])
        # Volcano's NodeShard contract (cache/shards.py): None with sharding off, and then no NodeShard is watched
        self.shards = coordinator_for(kube, self.stores, *sharding, may_write) if sharding else None
        if self.shards is not None:
            self.guard_gains(self.shards)
        # --active-shards N (cache/active.py): this replica's shards, set by the CLI; None: one active replica
        self._active: ActiveShards | None = None
        # Snapshots from the last one and what changed (`cache/snapshots.py`); None: each built afresh.
        self.incremental: CacheSnapshots | None = CacheSnapshots(self.rules, self.parser) if incremental else None
        self.applier = Applier()  # pipelined applies (cache/applier.py)
        self._pods_through = 0  # the resourceVersion the last snapshot's copy of the pods is current to
        self._unseen: Future[Applied] | None = None  # the apply in flight when the last snapshot was taken

    def guard_gains(self, coordinator: ShardCoordinator) -> None:
        """A node another shard lets this one have is used once the session's pods are current on it (cache/shards.py
        `ShardCoordinator._checked`): the snapshot's copy of the pods read past its release, or its pods listed
        (cache/freshen.py) before the copy."""
        coordinator.freshen = freshener(lambda: self.kube, self.stores, self.watcher._on_event, self.clock,
                                        self._pool)
        coordinator.pods_version = lambda: str(self._pods_through)

    @property
    def active(self) -> ActiveShards | None:
        return self._active

    @active.setter
    def active(self, active: ActiveShards | None) -> None:
        """With --active-shards: the parser reads another replica's pods light (`reads_light`), and the view holds
        back a job with a pod so read (`is_light`)."""
        self._active = active
        self.parser.light_of = active.reads_light if active is not None else None
        if active is not None:
            active.is_light = self.parser.is_light

    @property
    def kube(self) -> Kube:
        return self._kube

    @kube.setter
    def kube(self, kube: Kube) -> None:
        """Every part talks to the API through the same client (tests put a fake one in)."""
        self._kube = kube
        for part in (self.events, self.watcher, self.binder, self.binder.volumes, self.evictor, self.status_writer,
                     self.gates):
            part.kube = kube
        if self.shards is not None:
            self.shards.kube = kube

    @property
    def identity(self) -> str:
        """Who this scheduler is: the Lease holderIdentity and the events' reportingInstance."""
        return self._instance

    # The stores, as the tests and the runner know them.
    @property
    def lock(self) -> threading.Lock:
        return self.stores.lock

    @property
    def pods(self) -> Watched:
        return self.stores.pods

    @property
    def nodes(self) -> Watched:
        return self.stores.nodes

    @property
    def podgroups(self) -> Watched:
        return self.stores.podgroups

    @property
    def queues(self) -> Watched:
        return self.stores.queues

    @property
    def priority_classes(self) -> Watched:
        return self.stores.priority_classes

    @property
    def hypernodes(self) -> Watched:
        return self.stores.hypernodes

    # ---- lifecycle --------------------------------------------------------------------------------------
    def start(self) -> ClusterCache:
        self.events.start()
        self.watcher.start()
        # Every thread of the two bounded pools now, not at the first burst that needs it: a long-lived scheduler's
        # thread count is then flat from the start (a soak tells a leak from a pool warming up), and the first
        # large gang's binds do not wait for threads to be made.
        prestart(self._pool)
        prestart(self.status_writer.status_pool)
        return self

    def wait_synced(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        return all(w.synced.wait(max(0.0, deadline - time.monotonic())) for w in self.stores.watched)

    def stop(self, timeout: float = 5.0, flush: float | None = None) -> None:
        """`flush`: how long queued events may take to go out (default: `timeout`, 2 s at most); the scheduler's
        shutdown, its Lease released, gives them events.py's DEFER (that long of them may be queued at a stop)."""
        self.applier.close()  # the apply in flight finishes (its binds were sent)
        if self.events.running():
            self.flush_events(min(timeout, 2.0) if flush is None else flush)
        self._stop.set()
        self.watcher.close_prefetched()
        self._kube.close_streams()
        self._pool.shutdown(wait=True)
        self._kube.close()
        self.status_writer.close()
        self.events.close()
        deadline = time.monotonic() + timeout
        for t in [*self.watcher.threads, *self.events.threads]:
            if t.is_alive():
                t.join(max(0.0, deadline - time.monotonic()))

    def flush_events(self, timeout: float = 10.0) -> bool:
        """Wait until the queued events were sent (tests, shutdown)."""
        return self.events.flush(timeout)

    # ---- snapshot ---------------------------------------------------------------------------------------
    def snapshot(self) -> ClusterSnapshot:
        reread: set[str] = set()
        if self.active is not None:  # a shard just taken: our pending pods made current before the stores are read
            self.active.prepare()
            self.active.refresh_light()  # a shard's jobs read in full once it is held, from this snapshot on
            self.parser.revalidate()
            reread = self.parser.take_reread()
        now = self.clock()
        # Read before the stores: an apply done by then had its binds' outcome in them.
        self._unseen = self.applier.in_flight()
        stores = self.stores
        with stores.lock:
            # how current the pods read now are (a shard's gained nodes are used only if it is past their release)
            self._pods_through = max(revision(stores.pods.resource_version or ""), stores.pods_listed_at)
            incremental = self.incremental
            if incremental is not None:  # what changed is found by identity (cache/snapshots.py)
                by_key = incremental.take_pods(stores.pods.objects)  # the pods as of now, not copied each cycle
                node_objects, group_objects = dict(stores.nodes.objects), dict(stores.podgroups.objects)
                dicts = (stores.pods.objects, stores.nodes.objects, stores.podgroups.objects)
                incremental.written(journal_of(dicts[1]), journal_of(dicts[2]))  # what changed since, by key
            else:
                by_key = dict(stores.pods.objects)  # one copy: the parser walks its values, the binds read UIDs
                nodes = list(stores.nodes.objects.values())
            stores.expire_assumed()
            assumed = {key: node for key, (node, _) in stores.assumed.items()}
        if incremental is None:
            snapshot = self.build(self.parser.nodes(nodes), by_key, assumed, now)
        else:  # from the last snapshot and what changed
            inputs, _, pcs = self._inputs(assumed, now)
            self._snapshot_pods = by_key  # the pods this cycle decides for: its binds name their UIDs
            # With --active-shards, a node outside this replica's last session is rebuilt only once one needs it
            defer, undefer = (self.active.defers, self.active.undeferred) if self.active is not None else (None, None)
            snapshot = self._finish(incremental.build(by_key, node_objects, group_objects, dicts, pcs, inputs,
                                                      defer, reread, undefer), incremental)
        for pod, group, created in snapshot.orphans:  # the recorder sends each (pod, message) once
            if created and now - created >= ORPHAN_GRACE:
                self.events.record("Pod", pod, "Warning", "PodGroupNotFound",
                                   f"PodGroup {group} does not exist: the pod is not scheduled until it does "
                                   "(its annotation scheduling.k8s.io/group-name names it)")
        return snapshot

    def build(self, nodes: list[NodeInfo], pods: dict[str, Any], assumed: dict[str, str],
              now: float | None = None) -> ClusterSnapshot:
        """A snapshot of these nodes and pods (every node's pods among them: a node is accounted with the pods
        given), with the PodGroups, Queues and the other kinds as the watches hold them now. The pods are the
        ones the next apply binds (by UID)."""
        now = self.clock() if now is None else now
        inputs, podgroups, pcs = self._inputs(assumed, now)
        jobs = self.parser.podgroups(podgroups, pcs, self.default_queue)
        records = self.parser.pods(pods.values(), pcs)
        self._snapshot_pods = pods  # the pods this cycle decides for: its binds name their UIDs
        return self._finish(build_snapshot(replace(inputs, nodes=nodes, podgroups=jobs, pods=records), self.rules))

    def _inputs(self, assumed: dict[str, str], now: float) -> tuple[SnapshotInputs, list[Any], dict[str, int]]:
        """A snapshot's inputs but its nodes, PodGroups and pods, with the PodGroups' objects and the priority
        classes to read them with."""
        stores = self.stores
        with stores.lock:
            podgroups = list(stores.podgroups.objects.values())
            queues = list(stores.queues.objects.values())
            hypernodes = tuple(stores.hypernodes.objects.values())
            budgets = list(stores.disruption_budgets.objects.values())
            quotas = list(stores.resource_quotas.objects.values())
            pcs = self.parser.pcs
        queue_infos, unreadable = self.parser.queues(queues)
        inputs = SnapshotInputs((), (), queue_infos, (), now, self.parser.hypernodes(hypernodes),
                                assumed, self.storage.storage(), unreadable,
                                self.parser.disruption_budgets(budgets), self.parser.resource_quotas(quotas),
                                partial(self.dra.read, stores))  # read only if a pending pod names claims
        return inputs, podgroups, pcs

    def _finish(self, snapshot: ClusterSnapshot, built: CacheSnapshots | None = None) -> ClusterSnapshot:
        """`built`: the incremental builder `snapshot` came from, whose deferred nodes the session may need."""
        snapshot.queue_allocation_gate = self.queue_allocation_gate
        if self.shards is not None:  # between two sessions: publish this shard's status, take its nodes
            snapshot.shard = self.shards.between_sessions()
        if self.active is not None:  # the held shards' nodes and jobs only
            snapshot = self.active.restrict(snapshot)
            self.active.refresh_light()  # other replicas' jobs, as this view routed them
            self.parser.revalidate()
            if built is not None and built.builder.deferred:  # a node the session is given is current (restrict
                deferred = built.builder.deferred  # made `nodes` a dict of its own)
                snapshot.nodes.update(built.refresh([name for name in snapshot.nodes if name in deferred]))
        # Read now, before the session changes any task's status: the pods the status writer may give a condition
        self.status_writer.pending = {key: tuple(tasks) for key, job in snapshot.jobs.items()
                                      if (tasks := job.by_status.get(TaskStatus.PENDING))}
        return snapshot

    @property
    def pool(self) -> ThreadPoolExecutor:
        """The API calls' pool (binds, evictions, the first view's node lists)."""
        return self._pool

    # ---- apply ------------------------------------------------------------------------------------------
    def apply(self, result: CycleResult, *, pipelined: bool = False) -> None:
        """Carry a cycle's decisions out. In line (the default): binds, evictions and ungates sent and waited for,
        then the status writes, the events and the NodeShard step. `pipelined` (`--pipeline-apply`,
        cache/applier.py): the binds are sent (their pods assumed on their nodes) and the rest is left to the
        applier thread, so the next cycle starts at once; a cycle that evicts or ungates, any with sharding on,
        and one with deletions due, still applies in line, after the apply in flight."""
        now = self.clock()
        if not self.may_write():
            log.warning("not the leader any more: dropping this cycle's decisions")
            return
        unseen, self._unseen = self._unseen, None
        due = self.evictor.due()
        # Every pod of every committed gang is bound concurrently; a failed bind leaves its pod pending in the
        # cache, so a later cycle retries it.
        if (not pipelined or due or result.evictions or result.ungate or self.shards is not None
                or self.active is not None):
            # Conservative: an eviction's room is taken by the next cycles (preempt, reclaim), the NodeShard step
            # and a shard's release must follow the binds of every cycle that used a node (docs/scale-out.md): no
            # apply left in flight.
            self.applier.drain()
            binds = self.binder.submit(result, now, self._snapshot_uid)
            try:
                waits = [*self.gates.submit(result.ungate, self._snapshot_uid),
                         *self.evictor.submit(result.evictions), *due]
                if self.shards is not None or self.active is not None:  # leaving nodes no write names: let go now
                    keep = ({node for gang in result.binds for _, node in gang.binds}
                            | {e.node for e in result.evictions})
                    if self.shards is not None:
                        self.shards.release(keep)
                    if self.active is not None:
                        self.active.release(keep)
            except BaseException:
                self.binder.wait(binds)  # counted back, or every later event would wait out its defer
                raise
            self._finish_apply(result, now, binds, waits, unseen)
            return
        binds = self.binder.submit(result, now, self._snapshot_uid)
        self.applier.hand_over(lambda _before: self._finish_apply(result, now, binds, [], unseen))

    def drain(self) -> None:
        """Wait for the apply in flight (pipelined), if any; raise its exception."""
        self.applier.drain()

    def _finish_apply(self, result: CycleResult, now: float, binds: Pending, waits: list[Future[None]],
                      unseen: Future[Applied] | None) -> Applied:
        """After the binds were sent: wait for them (and `waits`), then write the statuses, send the events, take
        the NodeShard step. `unseen`: the apply that was in flight when this cycle's snapshot was taken (done by
        now); the gangs whose binds failed in it were seen bound by this cycle, whose statuses of them are not
        written (the next cycle's are)."""
        failed = self.binder.wait(binds)
        for pending in waits:
            pending.result()
        for job, count in failed.items():
            log.warning("gang %s: %d binds failed; retrying next cycle", job, count)
        if unseen is not None and unseen.exception() is None:  # done by now
            result = replace(result, podgroups=behind(result.podgroups, unseen.result(), self._stored_status))
        if self.active is not None:  # the holder of shard 0 writes the Queues' status, for every shard
            result = replace(result, queues=self.active.queue_statuses(result.queues)
                             if self.active.writes_queues() else [])
        self.status_writer.write(result, now, failed)
        self.events.emit(result.events)
        if self.shards is not None:  # the session has ended and its binds have returned
            self.shards.between_sessions()
        if self.active is not None:  # likewise: the held shards' status, then the shards given up released
            self.active.after_apply()
        return Applied(failed, frozenset(s.job for s in result.podgroups))

    def apply_binds(self, result: CycleResult) -> int:
        """Only the binds of a cycle (and their `Scheduled` events): the first cycle on a partial view
        (cache/first_view.py), whose conditions and statuses would be partial. The binds that landed."""
        if not self.may_write():
            return 0
        self.applier.drain()
        binds = self.binder.submit(result, self.clock(), self._snapshot_uid)
        failed = self.binder.wait(binds)
        if self.shards is not None:  # the session has ended and its binds have returned
            self.shards.between_sessions()
        return sum(len(g.binds) for g in result.binds) - sum(failed.values())

    def _stored_status(self, job: str) -> object:
        with self.stores.lock:
            return (self.stores.podgroups.objects.get(job) or {}).get("status")

    def _snapshot_uid(self, pod_key: str) -> str | None:
        """The UID of the pod of that key in the last snapshot: the one the cycle decided for."""
        uid = ((self._snapshot_pods.get(pod_key) or {}).get("metadata") or {}).get("uid")
        return str(uid) if uid else None

    # ---- what the runner and the partial-gang policy ask (adapter.partial.GangFacts) ----------------------
    def controller_owned(self, pod_key: str) -> bool:
        """The pod has an ownerReference with `controller: true` (a controller recreates it if evicted)."""
        with self.lock:
            pod = self.stores.pods.objects.get(pod_key) or {}
        return owned_by_controller(pod)

    def bound_at(self, pod_key: str) -> float | None:
        """When the pod was bound: its `PodScheduled=True` transition, or our own bind if not seen yet."""
        with self.lock:
            pod = self.stores.pods.objects.get(pod_key) or {}
            assumed = self.stores.assumed.get(pod_key)
        at = bound_since(pod)
        if at is not None:
            return at
        return assumed[1] if assumed else None

    def has_podgroup(self, key: str) -> bool:
        with self.lock:
            return key in self.stores.podgroups.objects

    def ensure_queue(self, name: str) -> None:
        """Create a Queue (weight 1, reclaimable) if it does not exist."""
        try:
            self._kube.request("GET", f"{PG_API}/queues/{name}")
            return
        except KubeError as exc:
            if exc.status != 404:
                raise
        body = {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": name},
            "spec": {"weight": 1, "reclaimable": True},
        }
        try:
            created = self._kube.request("POST", f"{PG_API}/queues", body=body)
            log.info("created Queue %s", name)
            with self.lock:  # the first cycle must see it, whether or not the watch has shown it yet
                self.stores.queues.objects.setdefault(name, created)
        except KubeError as exc:
            if exc.status != 409:
                raise
