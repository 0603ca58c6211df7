"""Layer `cache`: the scheduler's main loop on a real cluster.

Every period: snapshot -> `run_cycle` -> give up partly bound gangs past their timeout (`adapter.partial`) ->
apply. The conf file is re-read when it changes; a bad file keeps the last good config (the built-in default
at first start) and its error is logged once. `stop()` (SIGTERM in the CLI) lets the cycle in progress finish.

With a `LeaderElector` the caches run on every replica (a standby is warm), but only the Lease holder runs
cycles, and the cache sends nothing once the holder has missed its renew deadline.
"""

from __future__ import annotations

import gc
import hashlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from scheduler import metrics
from scheduler.adapter.partial import PartialGangPolicy
from scheduler.api.snapshot import ClusterSnapshot, CycleResult
from scheduler.cache.cluster_cache import ClusterCache
from scheduler.cache.first_view import FirstView, Skip, prepare
from scheduler.cache.kube import TRANSPORT_ERRORS
from scheduler.cache.leader import LeaderElector
from scheduler.cache.shards import ShardWake
from scheduler.conf_check import action_warnings  # the actions' arguments, checked as conf check does
from scheduler.cycle import (
    builtin_default_conf,
    bulk_blockers,
    collect_between_cycles,
    collector_paused,
    freeze_snapshot,
    load_conf,
    run_cycle,
)
from scheduler.framework.conf import SchedulerConf
from scheduler.framework.conf_yaml import MAX_CONF_BYTES
from scheduler.framework.memo import CycleMemo
from scheduler.framework.runtime import describe

log = logging.getLogger("volcano_py.scheduler")


@dataclass(slots=True)
class ConfWatcher:
    """The current SchedulerConf, reloaded from `path` when the file's content changes."""

    path: str | None
    conf: SchedulerConf = field(default_factory=builtin_default_conf)
    _digest: str | None = None
    _mtime: float | None = None
    _bad_digest: str | None = None

    def current(self) -> SchedulerConf:
        if not self.path:
            return self.conf
        try:
            stat = Path(self.path).stat()
            if stat.st_mtime == self._mtime:
                return self.conf
            self._mtime = stat.st_mtime
            if stat.st_size > MAX_CONF_BYTES:  # not read at all: it is no ConfigMap's value
                self._report(f"size:{stat.st_size}:{stat.st_mtime}", f"scheduler conf {self.path} is "
                             f"{stat.st_size} bytes, more than a ConfigMap holds; keeping the last good one")
                return self.conf
            data = Path(self.path).read_bytes()
        except OSError as exc:
            self._report(
                f"os:{exc}", f"cannot read scheduler conf {self.path}: {exc}; keeping the last good one"
            )
            return self.conf
        digest = hashlib.sha256(data).hexdigest()
        if digest in (self._digest, self._bad_digest):
            return self.conf
        try:
            conf = load_conf(self.path)
        except Exception as exc:  # any bad file keeps the last good config
            log.debug("scheduler conf %s: the traceback", self.path, exc_info=True)
            self._report(digest, f"scheduler conf {self.path} rejected, keeping the last good one: {exc}")
            return self.conf
        self.conf, self._digest, self._bad_digest = conf, digest, None
        metrics.observe_conf(loaded=True)
        for warning in (*conf.skipped, *(w.render() for w in action_warnings(conf))):
            log.warning("scheduler conf: %s", warning)
        log.info("loaded scheduler conf %s (actions: %s)", self.path, ", ".join(conf.actions))
        blockers = bulk_blockers(conf)
        if blockers:  # once per conf load: a gang's identical pods are placed one by one under this conf
            log.info("scheduler conf: bulk placement off (%s); gangs are placed pod by pod", describe(blockers))
        metrics.observe_bulk_blockers(sorted({b.plugin for b in blockers}))
        return conf

    def _report(self, mark: str, message: str) -> None:
        """One error line per bad file (not per cycle), and the stale-conf gauge up until a good file loads."""
        if mark != self._bad_digest:
            self._bad_digest = mark
            log.error("%s", message)
            metrics.observe_conf(loaded=False)


FIRST_VIEW_WAIT = 5.0  # seconds the first view may wait for the small lists and our pods
FIRST_VIEW_LEADER_WAIT = 1.0  # seconds a replica with leader election waits to lead before its first view
SYNC_SLICE = 0.25  # seconds: how soon a stop is seen while the first lists are awaited
MAX_FAILED_CYCLES = 5  # whole cycles failed in a row before liveness fails (a restart may clear what one cannot)
STUCK_PERIODS = 10  # liveness fails when no cycle completed within this many schedule periods


def next_start(started: float, arrived_at: float | None, delay: float, period: float, now: float) -> float:
    """When the next cycle starts after a pending pod arrived (`--schedule-on-arrival`): `delay` after the first
    arrival since the last cycle began, so pods arriving together share a cycle, and never sooner than `delay`
    after that cycle began, so a flood of arrivals never makes a busy loop; never past the period's end. A
    cycle (with its apply) that took longer than the delay, under a steady stream of pods, is followed at once."""
    first = now if arrived_at is None else arrived_at
    return min(max(first, started) + delay, started + period)


class SchedulerLoop:
    def __init__(
        self,
        cache: ClusterCache,
        conf: ConfWatcher,
        *,
        period: float = 1.0,
        default_queue: str = "default",
        trace: Callable[[str], None] | None = None,
        elector: LeaderElector | None = None,
        partial_gang_timeout: float = 60.0,
        max_failed_cycles: int = MAX_FAILED_CYCLES,
        arrival_delay: float = 0.0,
        pipeline: bool = False,
    ):
        self.cache = cache
        self.elector = elector
        self.partial_gangs = PartialGangPolicy(partial_gang_timeout)
        self.conf = conf
        self.period = period
        self.default_queue = default_queue
        self.trace = trace
        self.memo = CycleMemo()  # predicate answers and known-failing gangs, carried from cycle to cycle
        self.stopping = threading.Event()
        # --schedule-on-arrival: a cycle starts this long after a pending pod of ours arrives (`wake`) instead of
        # at the period's end; 0, the default, cycles every period only, as Volcano does
        self.arrival_delay = arrival_delay
        self.arrived = threading.Event()  # set by arrivals (`wake`), `nudge` and `stop`: ends the wait between cycles
        self.nudged = False  # `nudge` since the last cycle began
        self.arrived_at: float | None = None  # monotonic: the first arrival since the last cycle began
        # --pipeline-apply: a cycle's binds are sent and the rest of its apply (waiting for them, the status
        # writes, the events) goes on behind the next cycle (cache/applier.py)
        self.pipeline = pipeline
        self.cycles = 0
        self.max_failed_cycles = max_failed_cycles
        self.failed_in_a_row = 0  # whole cycles that raised, in a row (a job's own fault is not one: faults.py)
        self.cycling_since: float | None = None  # monotonic: when this replica last began or ended a cycle
        self._last_failure: str | None = None
        # The first cycle on a partial view: its view (or why it was skipped) and its result, for logs and tests.
        self.first_view: FirstView | Skip | None = None
        self.first_view_result: CycleResult | None = None

    def healthy(self) -> bool:
        """Liveness: false after `max_failed_cycles` failed cycles in a row, or when the replica should be
        cycling (the leader, caches synced) and no cycle has ended within STUCK_PERIODS schedule periods (a
        stuck cycle). A standby, or a replica still waiting for its first lists, is alive."""
        if self.failed_in_a_row >= self.max_failed_cycles:
            return False
        since = self.cycling_since
        return since is None or time.monotonic() - since <= STUCK_PERIODS * max(self.period, 0.1)

    def stop(self) -> None:
        self.stopping.set()
        self.arrived.set()  # ends an arrival wait at once

    def nudge(self) -> None:
        """Start the next cycle now, whatever the period (`--active-shards`: this replica just took a shard, whose
        pending gangs have waited for a Lease to lapse)."""
        self.nudged = True
        self.arrived.set()

    def wake(self) -> None:
        """A pending pod of ours arrived (the pod watch calls this): with an arrival delay, the next cycle starts
        that long after instead of at the end of the period. Arrivals during a cycle wake the next one."""
        if self.arrived_at is None:
            self.arrived_at = time.monotonic()
        self.arrived.set()

    def _wait_next(self, started: float) -> None:
        """Until the period since `started` ends, or with an arrival delay, until `next_start` after an arrival."""
        deadline = started + self.period
        if self.arrival_delay <= 0:  # only a stop or a nudge ends the period early (an arrival does not)
            while not (self.stopping.is_set() or self.nudged):
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                if self.arrived.wait(left) and not (self.stopping.is_set() or self.nudged):
                    self.arrived.clear()  # an arrival: the period goes on
            return
        if self.arrived.wait(max(0.0, deadline - time.monotonic())) and not self.stopping.is_set():
            if self.nudged:
                return
            at = next_start(started, self.arrived_at, self.arrival_delay, self.period, time.monotonic())
            self.stopping.wait(max(0.0, at - time.monotonic()))

    def run_once(self) -> CycleResult:
        started, cpu = time.monotonic(), time.process_time()
        snapshot = self.cache.snapshot()
        freeze_snapshot()  # (the cycle's young pass walks what the session makes, not the snapshot)
        snapshot_seconds = time.monotonic() - started
        result = run_cycle(snapshot, self.conf.current(), trace=self.trace, memo=self.memo)
        self._give_up_partial_gangs(snapshot, result)
        decided = time.monotonic()
        if self.pipeline:  # returns once the binds are sent; `cache.drain()` waits for the rest
            self.cache.apply(result, pipelined=True)
        else:
            self.cache.apply(result)
        self.cycles += 1
        cpu = time.process_time() - cpu  # the process's, all threads: the cycle's length in CPU
        metrics.observe_cycle(result, time.monotonic() - started, snapshot, snapshot_seconds=snapshot_seconds,
                              cpu_seconds=cpu)
        binds = sum(len(g.binds) for g in result.binds)
        if result.deferred:  # allocate's budget of binds left jobs untried (actions/allocate.py): no wait
            self.nudge()
        for eviction in result.evictions:  # one line each: who lost which pod, to whom, under which rule
            log.info("cycle %d: evicting %s (job %s) on %s: %s", self.cycles, eviction.task, eviction.job,
                     eviction.node, eviction.reason)
        if binds or result.evictions:
            log.info(
                "cycle %d: %d jobs %d nodes; bound %d pods in %d gangs, evicted %d (%.3fs + apply %.3fs, cpu %.3fs)%s",
                self.cycles,
                len(snapshot.jobs),
                len(snapshot.nodes),
                binds,
                len(result.binds),
                len(result.evictions),
                decided - started,
                time.monotonic() - decided,
                cpu,
                f"; {len(result.deferred)} jobs left for the next cycle (maxBindsPerCycle)" if result.deferred else "",
            )
        return result

    def _give_up_partial_gangs(self, snapshot: ClusterSnapshot, result: CycleResult) -> None:
        for gang in self.partial_gangs.apply(snapshot, result, self.cache):
            log.warning("gang %s partly bound (%d/%d) since %.0fs ago: giving it up", gang.job, gang.ready,
                        gang.min_available, snapshot.now - gang.since)

    def run(self, *, sync_timeout: float = 60.0) -> None:
        # The first lists build millions of small objects that all live on (the watch caches): the cyclic
        # garbage collector would scan them again and again while they are parsed (5x the parse time at
        # 50,000 pods). Raw JSON holds no cycles, so collect nothing until the caches are synced, then move
        # them out of the collector's sight (gc.freeze).
        gc.disable()
        self._wake_on_shards()
        self.cache.start()
        if self.elector is not None:
            self.cache.may_write = self.elector.is_leader
            self.cache.lease_left = self.elector.valid_for
            self.cache.binder.fence_annotations = self.elector.fence_annotations()
            self.elector.start()
        active = getattr(self.cache, "active", None)  # a ClusterCache; tests give stand-ins without it
        if active is not None:  # --active-shards: writes while any shard is held, each bind fenced by its node's
            self.cache.may_write = active.holds_any
            self.cache.binder.fence_for = active.fence_for
            self.cache.binder.fence_annotations = active.bound_by()
            active.on_taken = self.nudge
            active.start()
        if sync_timeout > 0:
            self._first_view_cycle()
        # Volcano's --resource-sync-timeout: 0 (or less) starts scheduling without waiting for the first lists.
        synced = self._wait_synced(sync_timeout) if sync_timeout > 0 else True
        gc.freeze()
        gc.enable()
        if not synced and not self.stopping.is_set():
            log.warning("caches not synced after %.0fs; scheduling with what is known", sync_timeout)
        queue_ensured = False
        try:
            while not self.stopping.is_set():
                if self.elector is not None and not self.elector.is_leader():
                    self._drain()  # what the last apply had not sent was dropped (it checks the Lease)
                    self.cycling_since = None  # a standby is not expected to cycle
                    self.elector.wait_leader(min(self.period, 0.5))  # standby: warm caches, no cycles
                    continue
                if active is not None and not active.holds_any():
                    self.cycling_since = None  # holds no shard: a standby
                    active.wait_any(min(self.period, 0.5))
                    continue
                if not queue_ensured:
                    self._ensure_default_queue()
                    queue_ensured = True
                started = time.monotonic()
                self.arrived_at, self.nudged = None, False
                self.arrived.clear()  # what arrives from here on wakes the next cycle
                if self.cycling_since is None:
                    self.cycling_since = started
                try:
                    with collector_paused():
                        self.run_once()
                except Exception as exc:  # a bug in one cycle must not stop the scheduler
                    log.debug("the failed cycle's traceback", exc_info=True)
                    self._cycle_failed(exc)
                else:
                    self.failed_in_a_row, self._last_failure = 0, None
                self.cycling_since = time.monotonic()
                metrics.observe_failed_cycles(self.failed_in_a_row)
                collect_between_cycles()
                self._wait_next(started)
        finally:
            self._drain()  # the last cycle's apply finishes before the Lease is released
            if self.elector is not None:
                self.elector.stop(release=True)
            if active is not None:
                active.stop()
        log.info("scheduler stopped after %d cycles", self.cycles)

    def _wake_on_shards(self) -> None:
        """With sharding on, a NodeShard change that moves one of our shards' nodes starts the next session now
        (cache/shards.py `ShardWake`), before the watches start."""
        shards = getattr(self.cache, "shards", None)  # a ClusterCache; tests give stand-ins without them
        active = getattr(self.cache, "active", None)
        if shards is not None:
            name = shards.name
            shards.watched.on_event = ShardWake(lambda: (name,), self.nudge).on_event
            shards.wake = self.nudge  # a gained node whose pods were just listed: the session that uses them
        elif active is not None:
            active.watched.on_event = ShardWake(active.held_names, self.nudge).on_event
            for coordinator in active.coordinators:
                coordinator.wake = self.nudge

    def _drain(self) -> None:
        """Wait for the apply in flight (with `pipeline`); its failure is the failed cycle's, already counted or
        counted now."""
        if not self.pipeline:
            return
        try:
            self.cache.drain()
        except Exception as exc:
            log.debug("the failed apply's traceback", exc_info=True)
            self._cycle_failed(exc)

    def _first_view_cycle(self) -> None:
        """The first cycle on a partial view (cache/first_view.py), when the cache listed our pods early; the
        full pod list is decoded after it. Anything it cannot do is left to the full view, with one line."""
        early, self.cache.ours_early = self.cache.ours_early, []
        if not early or (self.elector is not None and not self.elector.wait_leader(FIRST_VIEW_LEADER_WAIT)):
            return
        if getattr(self.cache, "active", None) is not None:  # not cut to our shards: the full view decides
            return
        released = self.cache.watcher.pods_released
        released.clear()
        try:
            started = time.monotonic()
            view = prepare(self.cache, self.conf.current(), early, started + FIRST_VIEW_WAIT)
            self.first_view = view
            if isinstance(view, Skip):
                log.info("no first cycle on a partial view: %s", view.why)
                return
            prepared = time.monotonic()
            result = run_cycle(view.snapshot, view.conf, trace=self.trace)
            decided = time.monotonic()
            bound = self.cache.apply_binds(result)
            self.first_view_result = result
            log.info("first cycle on a partial view: %d of %d nodes, %d jobs; bound %d pods in %d gangs "
                     "(view %.3fs, cycle %.3fs, binds %.3fs)", view.nodes, view.of_nodes, len(view.snapshot.jobs),
                     bound, len(result.binds), prepared - started, decided - prepared, time.monotonic() - decided)
        except Exception as exc:  # the full view decides, as without this cycle
            log.debug("the first view's traceback", exc_info=True)
            log.warning("first cycle on a partial view failed (the full view decides): %s: %s",
                        type(exc).__name__, exc)
        finally:
            released.set()

    def _cycle_failed(self, exc: Exception) -> None:
        """A whole cycle failed (what a job's guard could not catch: a plugin's OnSessionOpen as a whole, the
        snapshot, the apply). One line, when the failure differs from the last one or every 60 in a row (its
        traceback is logged at debug level where it was caught)."""
        self.failed_in_a_row += 1
        metrics.observe_cycle_error()
        what = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
        if what != self._last_failure or self.failed_in_a_row % 60 == 0:
            log.error("scheduling cycle failed (%d in a row; liveness fails at %d): %s", self.failed_in_a_row,
                      self.max_failed_cycles, what)
        self._last_failure = what

    def _wait_synced(self, timeout: float) -> bool:
        """Wait for the first lists, in slices, so a stop (SIGTERM from the kubelet, whose grace period is shorter
        than the sync timeout) ends the wait at once when the apiserver cannot be reached."""
        deadline = time.monotonic() + timeout
        while not self.stopping.is_set():
            left = deadline - time.monotonic()
            if self.cache.wait_synced(min(SYNC_SLICE, max(0.0, left))):
                return True
            if left <= SYNC_SLICE:
                return False
        return False

    def _ensure_default_queue(self) -> None:
        try:
            self.cache.ensure_queue(self.default_queue)
        except TRANSPORT_ERRORS as exc:  # e.g. no RBAC to create Queues: schedule anyway
            log.warning("cannot ensure Queue %s exists: %s", self.default_queue, exc)
