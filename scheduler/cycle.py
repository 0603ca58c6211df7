"""One scheduling cycle: open a session on a snapshot, run the configured actions, close it.

This sits above `actions` and `plugins` and below the adapters (`cache`, `sim`), which call it every period.
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from scheduler.actions import ACTIONS
from scheduler.actions.consolidate import Consolidate
from scheduler.actions.holds import honour_holds
from scheduler.api.snapshot import ClusterSnapshot, CycleResult
from scheduler.framework.conf import SchedulerConf, default_conf, load_conf_file, parse_conf
from scheduler.framework.memo import CycleMemo
from scheduler.framework.runtime import BulkBlocker, bulk_blockers as runtime_blockers
from scheduler.framework.session import Session
from scheduler.plugins.registry import PLUGIN_ARGS, PLUGINS

log = logging.getLogger("volcano_py.scheduler")


def builtin_default_conf() -> SchedulerConf:
    return default_conf(implemented_actions=ACTIONS.keys(), implemented_plugins=PLUGIN_ARGS)


def load_conf_or_default(path: str | None) -> SchedulerConf:
    """The conf file at `path` (`load_conf`), or the built-in default when no path is given."""
    return load_conf(path) if path else builtin_default_conf()


def conf_from_text(text: str, source: str = "<text>") -> SchedulerConf:
    """A volcano-scheduler.conf given as text, read against the built-in actions and plugins (each plugin's
    arguments parsed into its typed value: a bad one is a ConfError here)."""
    return parse_conf(text, source=source, implemented_actions=ACTIONS.keys(), implemented_plugins=PLUGIN_ARGS)


def load_conf(path: str) -> SchedulerConf:
    """The file, read and its plugins' arguments parsed: a bad argument (ConfError) rejects the file here,
    before any cycle runs with it."""
    return load_conf_file(path, implemented_actions=ACTIONS.keys(), implemented_plugins=PLUGIN_ARGS)


def run_cycle(
    snapshot: ClusterSnapshot,
    conf: SchedulerConf,
    *,
    trace: Callable[[str], None] | None = None,
    memo: CycleMemo | None = None,
    accelerate: bool = True,
) -> CycleResult:
    """One cycle. Pass the same `memo` to every cycle to carry predicate results and known-failing gangs.
    `accelerate=False` runs the plugins' plain methods alone (the same decisions, slower: for tests)."""
    opening = time.perf_counter()
    ssn = Session(snapshot, conf, PLUGINS, trace=trace, memo=memo, accelerate=accelerate)
    ssn.timings["session:open"] = time.perf_counter() - opening  # volcano_open_session_duration_milliseconds
    if Consolidate.name in conf.actions:  # the room held for moved jobs, before any action can take it
        ssn.faults.action = Consolidate.name
        honour_holds(ssn)
    for name in conf.actions:
        action = ACTIONS.get(name)
        if action is not None:
            started = time.perf_counter()
            ssn.faults.action = name
            action().execute(ssn)
            ssn.timings[f"action:{name}"] = time.perf_counter() - started
    return ssn.close()


def bulk_blockers(conf: SchedulerConf) -> list[BulkBlocker]:
    """The conf's plugins that turn bulk placement off (`framework/runtime.py`)."""
    named = [(option.name, PLUGINS[option.name]) for tier in conf.tiers for option in tier.plugins
             if option.name in PLUGINS]
    return runtime_blockers(named)


FULL_PASS_EVERY = 600.0  # seconds between the collector's passes over everything (`collect_between_cycles`)
_last_full_pass = [time.monotonic()]


@contextmanager
def collector_paused() -> Iterator[None]:
    """Run a cycle with the cyclic garbage collector off; call `collect_between_cycles` after it.

    A busy cycle allocates hundreds of thousands of objects (task and node infos, resources, statement
    operations) that live until it ends, so the collector's automatic passes mid-cycle find nothing to free
    but walk all of them, more than once (80-200 ms of a 5,000-node x 20,000-pod cycle, BENCHMARKS.md).
    Reference counting still frees everything without cycles as the cycle goes.

    On the way out, still paused, one pass over the young generations frees the cycle's reference cycles (the
    session and its plugins point at each other), and what is left (the watches' new objects, the snapshot kept
    for the next cycle) is frozen out of the collector's sight, as the first lists were once synced. Turned back
    on first, the collector would walk all the cycle made in its first automatic pass and again in the next, and
    its full passes would walk every object the watches stored since the start: 27% of the CPU of 12 cycles over
    200,000 pods with gangs arriving, 8% once frozen (bench/bench_gc_cycles.py; BENCHMARKS.md, 2026-12-05).
    """
    was_enabled = gc.isenabled()
    gc.disable()
    _paused[0] = was_enabled
    try:
        yield
    finally:
        _paused[0] = False
        if was_enabled:
            gc.collect(1)
            gc.freeze()
            gc.enable()


_paused = [False]  # inside `collector_paused`, which will collect the young generations and freeze at its end


def freeze_snapshot() -> None:
    """Inside `collector_paused`, once the cycle's snapshot is built: freeze what exists now (the snapshot, and
    what the watches stored since the last cycle), as the end of the cycle would, so the young pass there walks
    only what the session made and what the watches stored meanwhile. Building a snapshot leaves no reference
    cycles behind (tests/framework/test_collector.py), so nothing collectable is frozen; the session's cycles are
    made after this and collected at the end. A 4-replica burst at 50,000 nodes spent ~7% of a replica's GIL
    time in that pass, most of it walking the snapshot's new objects. Outside `collector_paused`, nothing."""
    if _paused[0]:
        gc.freeze()


def collect_between_cycles(now: Callable[[], float] = time.monotonic) -> int:
    """Every FULL_PASS_EVERY seconds, one pass over everything frozen so far: a reference cycle that became
    garbage after it was frozen (none is known; a safety net) is freed at most that late. Returns the objects it
    found unreachable (0 between passes)."""
    at = now()
    if at - _last_full_pass[0] < FULL_PASS_EVERY:
        return 0
    _last_full_pass[0] = at
    gc.unfreeze()
    found = gc.collect()
    gc.freeze()
    if found:
        log.info("garbage collector: its periodic full pass freed %d objects in reference cycles", found)
    return found
