"""Layer `cache`: N active replicas of one scheduler (`--active-shards N`): the Leases, the NodeShards and what each
session of this replica may see. The rules are `api.active_shards`'s.

- **Leases.** Shard i is held through Lease `<lease-name>-shard-<i>` (client-go's rules, `cache/leader.py`). Each
  replica also renews a presence Lease `<lease-name>-member-<identity>`, so the replicas count each other. Every
  retry period one thread renews what this replica holds, observes the others, and follows `lease_moves`: it
  takes free shards up to its fair count, takes an orphaned shard whatever its count, and gives up a shard
  above its fair count. A shard given up is released only between cycles, after the apply of the last cycle
  that used it returned (`after_apply`), and no session starts on it meanwhile.
- **Nodes.** Shard i keeps to NodeShard `<scheduler-name>-shard-<i>` with the two-phase handoff of
  `cache/shards.py` (a `ShardCoordinator` per held shard, hard mode). The holder of shard 0 writes every shard's
  `spec.nodesDesired` from `plan_nodes` (`cache/active_plan.py`), each shard's losses before any shard's gains.
- **Sessions.** A session sees the union of the held shards: their nodes in use (plus the nodes its jobs already
  run on, never placed on), and the jobs routed to them (`route`: a PodGroup's shard annotation, else a hash of
  its name). A replica never schedules a job of a shard it does not hold. Queue shares are worked out on the
  session's own nodes, so each shard gives a queue its share of that shard's capacity. The holder of shard 0
  writes the Queues' `status.allocated`, summed over every shard's jobs (`queue_statuses`): its own sessions'
  figures and what the other shards' holders publish.
- **Summaries.** A replica passes over its pods of other replicas' jobs (cache/scope.py), so no cache holds every
  shard's jobs. Each holder publishes on its shard's Lease, with each renewal, what the shard's jobs hold per
  queue and its gangs larger than their shard; the holder of shard 0 adds the plan's node weights, by which the
  others tell which of their gangs are (cache/active_summary.py).
- **Binds.** Each carries the Lease of the shard owning its node (`fence_for`), so the apiserver's bind fence
  (manifests/07-bind-fence.yaml, which reads every Lease in the namespace) refuses a bind once another replica
  took that shard over.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace
from typing import Any

from scheduler.api.active_shards import (
    SUMMARY_ANNOTATION,
    lease_moves,
    member_lease_name,
    route,
    shard_name,
)
from scheduler.api.job import JobInfo
from scheduler.api.node import NodeInfo
from scheduler.api.objects import MutableObj
from scheduler.api.resources import Resource
from scheduler.api.shard import HARD, ShardView
from scheduler.api.snapshot import ClusterSnapshot, Lineage, QueueStatus
from scheduler.cache.active_pins import Pins
from scheduler.cache.active_plan import PlanWriter
from scheduler.cache.active_summary import Summaries
from scheduler.cache.kube import TRANSPORT_ERRORS, Kube
from scheduler.cache.leader import (
    BOUND_BY_ANNOTATION,
    LEASE_API,
    LeaderConfig,
    LeaderElector,
    forget_member,
    lease_seconds,
)
from scheduler.cache.scope import PodScope, held_nodes
from scheduler.cache.shards import ShardCoordinator, node_shards_watched
from scheduler.cache.store import Stores, Watched

log = logging.getLogger("volcano_py.active")
GONE_DURATIONS = 10.0  # a member Lease unchanged this many lease durations is deleted
ORPHAN_DURATIONS = 2.0  # a shard free this many lease durations is taken by any replica, whatever its count
LAPSE_MARGIN = 0.05  # seconds after a Lease lapses (as observed here) the round that may take it runs


class ActiveShards:
    def __init__(self, kube: Kube, stores: Stores, config: LeaderConfig, identity: str, scheduler_name: str,
                 shards: int, *, topology_label: str = "", plan_period: float = 30.0,
                 monotonic: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time) -> None:
        self.kube, self.stores, self.config, self.identity = kube, stores, config, identity
        self.shards, self.monotonic, self.wall = shards, monotonic, wall
        self._said: set[str] = set()  # marks of the warnings said once (`_say`)
        self.scheduler_name = scheduler_name
        self.watched = stores.node_shards = node_shards_watched()
        self.electors = [self._elector(i) for i in range(shards)]
        self.coordinators = [ShardCoordinator(kube, self.watched, stores.lock, HARD,
                                              shard_name(scheduler_name, i), self.electors[i].is_leader)
                             for i in range(shards)]
        self.member = LeaderElector(kube, identity, replace(config, name=member_lease_name(config.name, identity)),
                                    monotonic=monotonic)
        # The lease namespace's Leases, watched (optional: without the right to watch, the rounds' reads alone)
        # so a Lease's changes are timed when they happen, not at the next round (`observe`)
        self.leases = stores.leases = Watched("Lease", f"{LEASE_API}/namespaces/{config.namespace}/leases",
                                              optional=True)
        self.leases.on_event = self.observe
        self._shard_of = {shard_name(config.name, i): i for i in range(shards)}
        self._member_prefix = f"{config.name}-member-"
        self._wakeup = threading.Event()  # a Lease seen to change, or a stop: the round thread looks again
        self.plan = PlanWriter(kube, self.watched, stores.lock, [c.name for c in self.coordinators], topology_label,
                               plan_period, monotonic)
        self.summaries = Summaries(shards, config.retry_period, self.plan, monotonic, wall, self._say,
                                   self._said.discard)
        self.replicas = 1  # live replicas as last counted, this one included
        self._members: dict[str, tuple[Any, float]] = {}  # member Lease -> (record, when it last changed here)
        self._free_since: dict[int, float] = {}
        self._releasing: set[int] = set()
        self._lock = threading.Lock()  # the Leases' reads and writes: the round thread's and the releases'
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.on_taken: Callable[[], None] | None = None  # set by the loop: a shard taken starts a cycle now
        self._active: frozenset[int] = frozenset()  # the shards of the session in progress
        self._owner: dict[str, int] = {}  # node -> the held shard whose NodeShard has it in use, this session
        self.pins = Pins(shards, f"{config.namespace}/{config.name}-shard-", lambda: len(stores.podgroups.objects),
                         self._say)
        # held shard -> its Lease's term (`LeaderElector.terms`) whose takeover `freshen` made current; the shards of
        # the session in progress -> their terms. A shard lost and taken again is a new term (seed 13010)
        self._checked, self._active_terms = dict[int, int](), dict[int, int]()
        self.freshen: Callable[[], bool] | None = None  # set by the CLI: cache/freshen.py `freshen_pods`
        self._others_allocated: dict[str, Resource] = {}  # queue -> what other shards' jobs hold (shard 0 held)
        self._queues_since: float | None = None  # since when this replica's sessions have had shard 0
        self._session_jobs: frozenset[str] | None = None  # the jobs of the last session's view
        self._scope: frozenset[str] | None = None  # the nodes of the last session's view (`defers`)
        # (keep, the snapshot's node names, those of them kept, in order) as `_kept_nodes` last worked them out
        self._kept: tuple[set[str], list[str], list[str]] = (set(), [], [])
        self._routes: dict[str, int] = {}  # job -> its shard, as the last view routed it (`reads_light`)
        self._light_held: frozenset[int] = frozenset(range(shards))  # the held shards `reads_light` counts
        self.is_light: Callable[[str], bool] | None = None  # set by the cache: a pod read light (cache/parse.py)
        # Set by the CLI: which other schedulers' pods are kept (cache/scope.py), and how nodes joining it are listed
        self.scope: PodScope | None = None
        self.list_pods: Callable[[Sequence[str]], bool] | None = None
        self._outside: frozenset[str] = frozenset()  # the last session's nodes outside its shards (its jobs run there)

    # ---- what the loop, the cache and the binder ask -----------------------------------------------------------
    def held(self) -> frozenset[int]:
        """The shards this replica may schedule now: held, renewed within the deadline, not being given up."""
        return frozenset(i for i, e in enumerate(self.electors) if e.is_leader() and i not in self._releasing)

    def held_names(self) -> frozenset[str]:
        """The NodeShards of the shards held now (the NodeShard watch's `ShardWake`)."""
        return frozenset(self.coordinators[i].name for i in self.held())

    def holds_any(self) -> bool:
        return any(e.is_leader() for e in self.electors)

    def wait_any(self, timeout: float) -> bool:
        """Wait (up to `timeout`) while this replica holds no shard; whether it holds one now."""
        if not self.holds_any():
            self._stop.wait(timeout)
        return self.holds_any()

    def fence_for(self, node: str) -> tuple[dict[str, str], Callable[[], float | None]] | None:
        shard = self._owner.get(node)
        if shard is None or shard not in self._active:
            return None
        elector = self.electors[shard]
        return elector.fence_annotations(), elector.valid_for

    def bound_by(self) -> dict[str, str]:
        return {BOUND_BY_ANNOTATION: self.identity}

    def writes_queues(self) -> bool:
        """Queue status is written by the holder of shard 0 alone (`queue_statuses`), once it has every other
        shard's summary (a new holder would otherwise write a queue's `allocated` down to its own shards' share
        until they come), or two lease durations after it took shard 0 (a holder that publishes none: an older
        volcano-py during a rolling upgrade)."""
        since = self._queues_since
        return since is not None and (self.summaries.knows(self._active)
                                      or self.monotonic() - since >= 2 * self.config.lease_duration)

    def queue_statuses(self, statuses: list[QueueStatus]) -> list[QueueStatus]:
        """The Queues' status as the holder of shard 0 writes it: what each queue's jobs hold across the cluster,
        its own sessions' jobs as the session left them plus the other shards' as their holders last published
        (cache/active_summary.py). Deserved share and usage stay the session's own."""
        others = self._others_allocated
        if not others:
            return statuses
        return [replace(q, allocated=q.allocated + others[q.queue]) if q.queue in others else q for q in statuses]

    # ---- a session ---------------------------------------------------------------------------------------
    def prepare(self) -> None:
        """Before a snapshot reads the stores: a shard just taken has our pending pods made current by `freshen`
        (cache/freshen.py), so the snapshot read next (its session's view) holds the dead replica's last binds and
        the shard joins that very session. A survivor whose watch is behind never schedules on them; if the
        apiserver cannot be read, the shard waits for the next cycle's try."""
        held = self.held()
        terms = {i: self.electors[i].terms for i in held}
        self._checked = {i: term for i, term in self._checked.items() if terms.get(i) == term}
        taken = held - self._checked.keys()
        scope = self.scope
        if scope is not None:  # the held shards' nodes; with a shard just taken, the list of every pod below
            nodes = held_nodes(self.coordinators[i] for i in held) | self._outside  # (whose pods affinity counts)
            scope.step(nodes, None if taken else self.list_pods)
        token = scope.listing() if scope is not None and taken else None
        if taken and (self.freshen is None or self._freshened()):
            self._checked.update((i, terms[i]) for i in taken)
            if scope is not None:
                scope.step(scope.nodes, None, listed_all=True)
                if token is not None:  # every pod of ours put in: no job waits for a list taken before
                    scope.listed(token)
        if scope is not None:  # the jobs `restrict` held back, their pods passed over (cache/scope.py)
            scope.list_wanting()

    def _freshened(self) -> bool:
        """`freshen`'s answer; a fault in it is "not yet": the shard just taken waits, the shards held already are
        scheduled this cycle as usual."""
        assert self.freshen is not None
        try:
            return self.freshen()
        except Exception:
            log.exception("active shards: making the pods current for a shard taken over failed; trying next cycle")
            return False

    def restrict(self, snapshot: ClusterSnapshot) -> ClusterSnapshot:
        """The session's view: the held shards' nodes and jobs (see the module's docstring). A shard taken joins
        once `prepare` made the cache current for it before this snapshot was read; one taken since waits for the
        next session."""
        held = self.held()
        terms = {i: self.electors[i].terms for i in held}
        active = held if self.freshen is None else frozenset(i for i in held if self._checked.get(i) == terms[i])
        for i in (i for i in active if self._active_terms.get(i) != terms[i]):  # taken (again): its handoff
            self.coordinators[i].restart()  # starts from what the NodeShard says
            log.info("active shards: scheduling shard %d (NodeShard %s)", i, self.coordinators[i].name)
        self._active_terms = {i: terms[i] for i in active}
        with self.stores.lock:
            groups = {key: self.stores.podgroups.objects.get(key) for key in snapshot.jobs}
        pins = {key: self.pin(key, groups.get(key)) for key in snapshot.jobs}
        self.pins.pin_bound(snapshot.jobs, pins)
        routes = {key: route(key, self.shards, pins[key]) for key in snapshot.jobs}
        own = {key: job for key, job in snapshot.jobs.items() if routes[key] in active}
        self.summaries.read([e.published for e in self.electors], active)
        if 0 in active:  # every shard's nodes, with loans for gangs larger than their shard (others' published)
            self.plan.step(replace(snapshot, jobs=own), routes.__getitem__, self.summaries.loans_elsewhere(active))
        owner: dict[str, int] = {}
        scope = self.scope  # (a node whose other schedulers' pods are not all in the stores yet is not placed on)
        for i in sorted(active):
            for node in self.coordinators[i].between_sessions().nodes:
                if scope is None or (node in scope.nodes and node not in scope.unlisted):
                    owner.setdefault(node, i)
        self._active, self._owner = active, owner
        jobs = {key: job for key, job in own.items() if self._whole(key, job)}
        if scope is not None:  # a job with pods passed over waits for a list of them (`prepare`)
            scope.prune(snapshot.jobs, self.stores.podgroups.objects)
            scope.hold_back(jobs, self.monotonic())
        self._routes = routes
        self.summaries.work_out(snapshot, own, routes, active)
        self._others_allocated = self.summaries.allocated_elsewhere(active) if 0 in active else {}
        if 0 not in active or self._queues_since is None:
            self._queues_since = self.monotonic() if 0 in active else None
        keep = set(owner)
        for job in jobs.values():
            keep.update(t.node_name for t in job.tasks.values() if t.node_name)
        nodes = self._kept_nodes(snapshot.nodes, keep)
        self._scope, self._outside = frozenset(keep), frozenset(keep.difference(owner))
        return replace(snapshot, jobs=jobs, nodes=nodes, lineage=self._lineage(snapshot.lineage, jobs),
                       shard=ShardView(HARD, shard_name(self.scheduler_name, 0), frozenset(owner)))

    def _kept_nodes(self, nodes: Mapping[str, NodeInfo], keep: set[str]) -> dict[str, NodeInfo]:
        """The nodes among `keep`, in the snapshot's order; which they are is worked out again (a walk of every
        node, ~25 ms a cycle at 50,000) only when the snapshot's node names or `keep` changed."""
        names = list(nodes)
        if keep != self._kept[0] or names != self._kept[1]:
            self._kept = (keep, names, [name for name in names if name in keep])
        return {name: nodes[name] for name in self._kept[2]}

    def refresh_light(self) -> None:
        """From the loop, after `prepare` and after `restrict`: the held shards `reads_light` counts from now on
        (a shard just taken, not yet in a session, holds its jobs already)."""
        self._light_held = self.held()

    def reads_light(self, job: str) -> bool:
        """Whether the job's pods of ours may be read light (cache/parse.py): another replica schedules it. Its
        shard as the last view routed it; a job that view did not have yet, by its PodGroup as the stores hold it
        (`route`; none yet: no). Called on the pod watch's thread too: it reads only references swapped whole. A
        wrong answer costs a full read, or (a job of ours read light) one session: `_whole` holds it back. Never
        raises (a fault in one PodGroup's route reads its pods in full, and costs no other job anything)."""
        shard = self._routes.get(job)
        if shard is None:
            try:
                podgroup = self.stores.podgroups.objects.get(job)
                if podgroup is None:
                    return False
                shard = self.route(job, podgroup)
            except Exception:
                log.debug("active shards: routing job %s for a light read failed; read in full", job, exc_info=True)
                return False
        return shard not in self._light_held

    def _whole(self, key: str, job: JobInfo) -> bool:
        """Whether a job entering the session (not in the last one) has every pod read in full: one read light
        while another replica scheduled it (`is_light`) waits for the next session, which reads it again."""
        last = self._session_jobs
        if self.is_light is None or (last is not None and key in last):
            return True
        if any(self.is_light(task_key) for task_key in job.tasks):
            log.debug("active shards: job %s joins the next session, its pods read in full first", key)
            return False
        return True

    def defers(self, node: str) -> bool:
        """Whether the next snapshot may leave the node's usage as it was (`IncrementalSnapshot.build`'s `defer`):
        a node outside the last session (another shard's), whose pods other replicas bind. A guess only: the
        cache makes every node `restrict` keeps current before the session (ClusterCache._finish)."""
        scope = self._scope
        return scope is not None and node not in scope

    def undeferred(self, names: set[str]) -> set[str]:
        """Those of `names` `defers` no longer defers (those in the last session's scope), in one set operation."""
        scope = self._scope
        return set(names) if scope is None else names & scope

    def _lineage(self, lineage: Lineage | None, jobs: Mapping[str, object]) -> Lineage | None:
        """The snapshot's lineage with the jobs that entered or left this replica's sessions since the last one
        (a shard taken or given up, a pin changed) among the changed ones: the session carries per-job work from
        the last one (`framework/carry.py`) only for jobs it had then, the very same."""
        keys, last = frozenset(jobs), self._session_jobs
        self._session_jobs = keys
        if lineage is None or lineage.since is None:
            return lineage
        if last is None:  # no session of ours to follow: every job counts as changed
            return Lineage(None, lineage.token, lineage.jobs)
        return Lineage(lineage.since, lineage.token, lineage.jobs | (keys ^ last))

    def route(self, key: str, podgroup: Mapping[str, Any] | None) -> int:
        return route(key, self.shards, self.pin(key, podgroup))

    def pin(self, key: str, podgroup: Mapping[str, Any] | None) -> int | None:
        return self.pins.pin(key, podgroup)

    def release(self, keep: Collection[str]) -> None:
        """The apply's binds are sent: each held shard lets go of its leaving nodes that none of them names."""
        for i in sorted(self._active):
            if self.electors[i].is_leader():
                self.coordinators[i].release(keep)

    def after_apply(self) -> None:
        """The session's binds have returned: publish the held shards' NodeShard status, then give up the shards
        being given up (no session uses them any more)."""
        for i in sorted(self._active):
            if self.electors[i].is_leader():
                self.coordinators[i].between_sessions()
        for i in sorted(self._releasing):
            with self._lock:
                self.electors[i].stop(release=True)
                self.electors[i] = self._fresh(i)
                self._releasing.discard(i)
            log.info("active shards: gave up shard %d (its fair count is %d of %d with %d replicas)", i,
                     -(-self.shards // max(1, self.replicas)), self.shards, self.replicas)
        self._active = self._active & self.held()

    def _fresh(self, i: int) -> LeaderElector:
        elector = self._elector(i)
        self.coordinators[i].may_write = elector.is_leader
        return elector

    def _elector(self, i: int) -> LeaderElector:
        elector = LeaderElector(self.kube, self.identity, replace(self.config, name=shard_name(self.config.name, i)),
                                monotonic=self.monotonic)
        elector.publish = (SUMMARY_ANNOTATION, lambda: self.summaries.published(i, self._active))
        return elector

    # ---- the Leases -------------------------------------------------------------------------------------------
    def start(self) -> ActiveShards:
        self._thread = threading.Thread(target=self._run, name="active-shards", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._wakeup.set()
        if self._thread is not None:
            self._thread.join(self.config.renew_deadline)
        with self._lock:
            for elector in (*self.electors, self.member):
                if elector.is_leader():
                    elector.stop(release=True)

    def _run(self) -> None:
        log.info("active shards: %s is a candidate for %d shards (Leases %s-shard-0..%d)", self.identity,
                 self.shards, self.config.name, self.shards - 1)
        while not self._stop.is_set():
            try:
                self.round()
            except Exception:  # one bad round must not end the elections: the next one reads everything again
                log.exception("active shards: a round of the Lease elections failed")
            self._wakeup.wait(self.next_round_in())
            self._wakeup.clear()

    def observe(self, kind: str, obj: MutableObj) -> None:
        """The Lease watch (its thread): a shard's Lease or another replica's member Lease, timed as it changes
        (client-go's observed time, on our clock), so a dead replica's Leases lapse here their duration after its
        last renew reached us, rather than after the round that next read them; the round thread looks again."""
        meta, spec = obj.get("metadata"), obj.get("spec")
        name = meta.get("name") if isinstance(meta, dict) else None
        if not isinstance(name, str):
            return
        spec = spec if isinstance(spec, dict) and kind != "DELETED" else {}
        now = self.monotonic()
        with self._lock:
            shard = self._shard_of.get(name)
            if shard is not None:
                self.electors[shard].observe(spec, now)
                if kind != "DELETED":
                    self.electors[shard].read_published(obj)
            elif name.startswith(self._member_prefix) and name != self.member.config.name:
                record = (spec.get("holderIdentity"), spec.get("renewTime"), spec.get("leaseDurationSeconds"))
                last = self._members.get(name)
                if kind == "DELETED":
                    self._members.pop(name, None)
                elif last is None or last[0] != record:
                    self._members[name] = (record, now)
            else:
                return
        # Only a Lease given up or deleted wakes the round at once (a shard to take now, or one replica fewer);
        # a renew only moves a lapse later, which the round's own timing already covers. (Waking on every event
        # would wake on our own renewals too: a round, a renew, its event, a round...)
        if not spec.get("holderIdentity"):
            self._wakeup.set()

    def next_round_in(self) -> float:
        """Seconds to the next round: the retry period, or sooner, just after the next Lease (a shard's or a
        member's) lapses as observed here, so a dead replica's shard is taken when its Lease lapses rather than
        up to a retry period later (client-go polls every retry period)."""
        now, soonest = self.monotonic(), self.config.retry_period
        with self._lock:
            lapses = [e.lapses_at() for e in self.electors]
            for name, (record, changed) in self._members.items():
                if name != self.member.config.name and record[0]:
                    lapses.append(changed + lease_seconds(record[2], self.config.lease_duration))
        for at in lapses:
            if at is not None and at > now:
                soonest = min(soonest, at - now + LAPSE_MARGIN)
        return soonest

    def round(self) -> None:
        self.member.try_acquire_or_renew()
        self.replicas = self._count_members()
        held: set[int] = set()
        free: set[int] = set()
        now = self.monotonic()
        with self._lock:
            for i, elector in enumerate(self.electors):
                elector.try_acquire_or_renew(acquire=False)  # renews ours, observes the others
                if elector.is_leader():
                    held.add(i)
                elif elector.lapsed():
                    free.add(i)
                    self._free_since.setdefault(i, now)
                    continue
                self._free_since.pop(i, None)
        orphaned = {i for i in free if now - self._free_since[i] >= ORPHAN_DURATIONS * self.config.lease_duration}
        moves = lease_moves(self.identity, self.shards, self.replicas, held, free, orphaned)
        took = False
        for i in moves.acquire:
            with self._lock:
                if self.electors[i].try_acquire_or_renew():
                    took = True
                    log.info("active shards: %s took shard %d (%d replicas)", self.identity, i, self.replicas)
        self._releasing.update(moves.release)
        if took and self.on_taken is not None:
            self.on_taken()

    def _count_members(self) -> int:
        """Live replicas: member Leases whose record changed within their duration, on our clock."""
        prefix = f"{self.config.name}-member-"
        try:
            page = self.kube.request("GET", f"{LEASE_API}/namespaces/{self.config.namespace}/leases",
                                     query={"limit": 500})
        except TRANSPORT_ERRORS as exc:
            self._say("members", f"active shards: cannot list the member Leases: {exc}; counting {self.replicas}")
            return self.replicas
        self._said.discard("members")
        now, live, seen, gone = self.monotonic(), 0, set(), []
        with self._lock:  # `_members` is the Lease watch's too (`observe`)
            for lease in page.get("items") or ():
                meta, spec = lease.get("metadata") or {}, lease.get("spec") or {}
                name = str(meta.get("name") or "")
                if not name.startswith(prefix):
                    continue
                seen.add(name)
                record = (spec.get("holderIdentity"), spec.get("renewTime"), spec.get("leaseDurationSeconds"))
                last = self._members.get(name)
                if last is None or last[0] != record:
                    last = self._members[name] = (record, now)
                duration = lease_seconds(record[2], self.config.lease_duration)
                if record[0] and (name == self.member.config.name or now - last[1] < duration):
                    live += 1
                elif name != self.member.config.name and now - last[1] > GONE_DURATIONS * duration:
                    gone.append((name, str(meta.get("resourceVersion") or "")))
            for name in set(self._members) - seen:
                del self._members[name]
        for name, version in gone:  # (each restart of a replica named by host and pid leaves one)
            forget_member(self.kube, self.config.namespace, name, version)
            with self._lock:
                self._members.pop(name, None)
        return max(1, live)

    def _say(self, mark: str, message: str) -> None:
        if mark not in self._said:
            self._said.add(mark)
            log.warning("%s", message)

