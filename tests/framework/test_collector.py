"""The scheduler runs each cycle with the cyclic garbage collector paused, frees the cycle's reference cycles on the
way out and freezes what is left, and passes over everything frozen once every FULL_PASS_EVERY seconds."""

from __future__ import annotations

import copy
import gc
import itertools
import random
import weakref
from collections.abc import Iterator
from typing import Any

import pytest

from scheduler.cache.cluster_cache import ClusterCache
from scheduler.cache.runner import ConfWatcher, SchedulerLoop
from scheduler.cycle import (
    FULL_PASS_EVERY,
    builtin_default_conf,
    collect_between_cycles,
    collector_paused,
    freeze_snapshot,
    run_cycle,
)
from scheduler.sim.objects import node_object, pod_object
from scheduler.testing import LoopCache


@pytest.fixture(autouse=True)
def _unfrozen() -> Iterator[None]:
    yield
    gc.unfreeze()  # what these tests froze goes back to the collector of the test process


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def test_collector_is_off_inside_a_cycle_and_back_on_after() -> None:
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_collector_stays_off_after_a_cycle_if_it_was_off_before() -> None:
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_collector_comes_back_when_the_cycle_raises() -> None:
    try:
        with collector_paused():
            raise RuntimeError("a bug in one cycle")
    except RuntimeError:
        pass
    assert gc.isenabled()


def test_reference_cycles_made_in_a_cycle_are_freed_as_it_ends() -> None:
    with collector_paused():
        a, b = _Node(), _Node()
        a.other, b.other = b, a  # like a session and its plugins
        gone = weakref.ref(a)
        del a, b
        assert gone() is not None  # reference counting alone cannot free a cycle
    assert gone() is None


def test_what_outlives_a_cycle_is_frozen_and_a_periodic_full_pass_frees_cycles_among_it() -> None:
    gc.unfreeze()
    with collector_paused():
        kept = _Node()
        kept.other = _Node()
        kept.other.other = kept  # a reference cycle still in use as the cycle ends (the next snapshot's, say)
    assert gc.get_freeze_count() > 0
    gone = weakref.ref(kept)
    del kept
    gc.collect()  # frozen: the collector does not see it
    assert gone() is not None
    start = 1e9
    assert collect_between_cycles(now=lambda: start) >= 2  # the first call at this clock: the period has passed
    assert gone() is None
    again = weakref.ref(_cycle_frozen())
    assert collect_between_cycles(now=lambda: start + FULL_PASS_EVERY - 1) == 0  # not yet
    assert again() is not None
    assert collect_between_cycles(now=lambda: start + FULL_PASS_EVERY) >= 2
    assert again() is None


def _cycle_frozen() -> _Node:
    """A reference cycle, frozen by a cycle's end, then dropped: returned only for a weak reference to it."""
    with collector_paused():
        node = _Node()
        node.other = _Node()
        node.other.other = node
    return node


def test_freezing_after_the_snapshot_still_frees_the_sessions_cycles_and_does_nothing_outside_a_cycle() -> None:
    gc.unfreeze()
    freeze_snapshot()  # outside a cycle: nothing frozen
    assert gc.get_freeze_count() == 0
    with collector_paused():
        snapshot = _Node()  # made before the freeze, still in use: frozen, out of the end's young pass
        freeze_snapshot()
        assert gc.get_freeze_count() > 0
        a, b = _Node(), _Node()
        a.other, b.other = b, a  # the session's cycle, made after the freeze
        gone = weakref.ref(a)
        del a, b
    assert gone() is None
    assert snapshot.other is None


@pytest.mark.parametrize("seed", range(4))
def test_taking_a_snapshot_leaves_no_reference_cycle_behind(seed: int) -> None:
    """What `freeze_snapshot` relies on: the cache's snapshot, full or incremental, with pods of ours and of other
    schedulers coming, bound, deleted and made again, and a cycle between, leaves nothing only the collector
    could free (nothing collectable is frozen with it)."""
    rng = random.Random(seed)
    cache = ClusterCache(None, {"volcano-py"}, "default", clock=lambda: 1.8e9)
    cache.events.record = lambda *_: None  # type: ignore[method-assign]
    on, rv = cache.watcher._on_event, itertools.count(1)

    def event(kind: str, type_: str, obj: dict[str, Any]) -> None:
        obj["metadata"]["resourceVersion"] = str(next(rv))
        on(getattr(cache, kind), type_, obj)

    event("queues", "ADDED", {"metadata": {"name": "default"}, "spec": {"weight": 1}})
    for i in range(6):
        event("nodes", "ADDED", node_object(f"n{i}", gpu=8, cpu="32", memory="128Gi"))
    made = itertools.count()
    conf = builtin_default_conf()
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        for _ in range(6):
            for _ in range(rng.randint(1, 3)):
                group, size = f"pg{next(made)}", rng.randint(1, 4)
                event("podgroups", "ADDED", {"metadata": {"name": group, "namespace": "ns", "uid": group},
                                             "spec": {"minMember": size, "queue": "default"}})
                for j in range(size):
                    pod = pod_object(f"{group}-{j}", namespace="ns", group=group, gpu=1, cpu="1")
                    pod["metadata"]["uid"] = f"{group}-{j}-{next(made)}"
                    event("pods", "ADDED", pod)
            other = pod_object(f"o{next(made)}", namespace="x", cpu="1", scheduler_name="default-scheduler")
            other["spec"]["nodeName"] = f"n{rng.randrange(6)}"
            other["status"] = {"phase": "Running"}
            other["metadata"]["uid"] = other["metadata"]["name"]
            event("pods", "ADDED", other)
            for key in rng.sample(sorted(cache.pods.objects), k=min(2, len(cache.pods.objects))):
                event("pods", "DELETED", cache.pods.objects[key])
            gc.collect()
            del gc.garbage[:]
            gc.freeze()  # as the cycle before ended: only what the snapshot makes is seen by the collector now
            snapshot = cache.snapshot()
            assert gc.collect() == 0, [type(o).__qualname__ for o in gc.garbage][:20]
            result = run_cycle(snapshot, conf)
            for gang in result.binds:  # each bind lands, as the watch shows it
                for key, name in gang.binds:
                    pod = copy.deepcopy(cache.pods.objects[key])
                    pod["spec"]["nodeName"] = name
                    event("pods", "MODIFIED", pod)
            del snapshot, result
    finally:
        gc.set_debug(0)
        del gc.garbage[:]
        cache.stop(timeout=1.0)


class _Marker:
    pass


class _Cache(LoopCache):
    """The loop's small cluster, whose snapshot and apply each leave one marker object, to see which it froze."""

    def __init__(self) -> None:
        super().__init__()
        self.made: dict[str, _Marker] = {}

    def snapshot(self) -> Any:
        self.made["snapshot"] = _Marker()
        return super().snapshot()

    def apply(self, result: Any) -> None:
        self.made["apply"] = _Marker()


def test_the_loop_freezes_the_snapshot_before_the_session_and_not_what_the_session_makes() -> None:
    gc.unfreeze()
    gc.enable()  # (as the scheduler runs: collector_paused freezes nothing when the collector was off)
    cache = _Cache()
    with collector_paused():
        SchedulerLoop(cache, ConfWatcher(None), period=1.0).run_once()  # type: ignore[arg-type]
        young = gc.get_objects()  # every tracked object the collector still sees (frozen ones are not)
        assert not any(o is cache.made["snapshot"] for o in young)  # frozen with the snapshot
        assert any(o is cache.made["apply"] for o in young)  # made after: left to the cycle's young pass
        del young
