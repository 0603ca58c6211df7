"""A NodeShard change that moves one of our shards' nodes starts the next session now (cache/shards.py `ShardWake`),
as Volcano writes a shard's status as soon as a NodeShard changes when no session runs
(pkg/scheduler/cache/shard_coordinator.go `RefreshNodeShards`): the handoff does not wait for the schedule period.
Which events wake, which do not, hostile objects, and the runner's wiring (a 600 s period, a cycle at once)."""

from __future__ import annotations

import threading
import time
from typing import Any

from hypothesis import given, settings, strategies as st
from test_runner_stop import CountingLoop, Synced

from scheduler.api.shard import HARD
from scheduler.cache.shards import ShardCoordinator, ShardWake, node_shards_watched


def shard(name: str, desired: list[str], in_use: list[str] | None = None, rv: str = "1") -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": rv}, "spec": {"nodesDesired": desired},
            "status": {"nodesInUse": in_use if in_use is not None else []}}


class Woken:
    def __init__(self, names: tuple[str, ...] = ("ours",)) -> None:
        self.names = set(names)
        self.count = 0
        self.hook = ShardWake(lambda: self.names, self.wake)

    def wake(self) -> None:
        self.count += 1

    def event(self, obj: Any, kind: str = "MODIFIED") -> int:
        """The wakes this event caused."""
        before = self.count
        self.hook.on_event(kind, obj)
        return self.count - before


def test_our_shards_nodes_desired_changing_wakes_and_our_own_status_coming_back_does_not() -> None:
    w = Woken()
    assert w.event(shard("ours", ["a", "b"]), "ADDED") == 1  # first seen: the session takes what it may
    assert w.event(shard("ours", ["a", "b"], ["a", "b"], rv="2")) == 0  # our status write, back through the watch
    assert w.event(shard("ours", ["a"], ["a", "b"], rv="3")) == 1  # the controller takes b away: release it now
    assert w.event(shard("ours", ["a", "c"], ["a"], rv="4")) == 1  # and gives c
    assert w.hook.wakes == 3


def test_our_release_during_an_apply_coming_back_with_nodes_still_leaving_wakes() -> None:
    w = Woken()
    w.event(shard("ours", ["a", "b", "c"], ["a", "b", "c"]), "ADDED")
    assert w.event(shard("ours", ["a"], ["a", "b", "c"], rv="2")) == 1  # b and c leave
    # the apply let c go as its binds were sent; b, which a bind named, goes at the next step: take it now
    assert w.event(shard("ours", ["a"], ["a", "b"], rv="3")) == 1
    assert w.event(shard("ours", ["a"], ["a"], rv="4")) == 0  # that step's write: nothing left to let go
    assert w.event(shard("ours", ["a"], ["a"], rv="5")) == 0


def test_another_shard_letting_go_of_a_node_we_desire_wakes_and_nothing_else_of_it_does() -> None:
    w = Woken()
    w.event(shard("ours", ["a", "b", "c"], ["a"]), "ADDED")
    assert w.event(shard("other", ["x"], ["b", "c", "x"]), "ADDED") == 0  # first seen: nothing let go
    assert w.event(shard("other", ["x"], ["c", "x", "y"], rv="2")) == 1  # b let go: we desire it
    assert w.event(shard("other", ["x"], ["c", "x"], rv="3")) == 0  # y let go: not ours
    assert w.event(shard("other", ["x", "z"], ["c", "x", "z"], rv="4")) == 0  # it takes z: nothing freed
    assert w.event(shard("other", ["x"], ["c", "x", "z"], rv="5")) == 0  # its spec: not our shard
    assert w.event(shard("third", ["q"], ["q"]), "ADDED") == 0


def test_a_shard_taken_later_wakes_on_its_changes_and_on_others_freeing_its_nodes() -> None:
    """--active-shards: which shards are ours changes with the Leases; every shard's spec is kept meanwhile."""
    w = Woken(names=())
    assert w.event(shard("s1", ["a", "b"]), "ADDED") == 0  # not ours yet
    assert w.event(shard("s0", ["x"], ["a", "x"]), "ADDED") == 0
    w.names.add("s1")
    assert w.event(shard("s0", ["x"], ["x"], rv="2")) == 1  # s0 lets go of a, which s1 desires
    assert w.event(shard("s1", ["a", "b"], ["a", "b"], rv="2")) == 0  # the same spec: its status only
    assert w.event(shard("s1", ["b"], ["a", "b"], rv="3")) == 1


def test_a_deleted_shard_is_forgotten() -> None:
    w = Woken()
    w.event(shard("ours", ["a"]), "ADDED")
    w.event(shard("other", [], ["a"]), "ADDED")
    assert w.event(shard("other", [], ["a"]), "DELETED") == 0
    assert w.event(shard("other", [], []), "ADDED") == 0  # seen anew: nothing it held before is known
    assert w.event(shard("ours", ["a"]), "DELETED") == 0
    assert w.event(shard("ours", ["a"]), "ADDED") == 1  # made again: first seen


JSONISH = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=4),
                       lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner,
                                                                                     max_size=4), max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(events=st.lists(st.tuples(st.sampled_from(["ADDED", "MODIFIED", "DELETED", "BOOKMARK"]),
                                 st.one_of(JSONISH, st.builds(
                                     lambda name, spec, status: {"metadata": {"name": name}, "spec": spec,
                                                                 "status": status},
                                     st.sampled_from(["ours", "other"]) | JSONISH, JSONISH,
                                     JSONISH | st.builds(lambda n: {"nodesInUse": n}, JSONISH)))),
                       max_size=12))
def test_any_object_at_all_is_read_without_raising(events: list[tuple[str, Any]]) -> None:
    w = Woken()
    for kind, obj in events:
        w.event(obj, kind)
    assert w.count == w.hook.wakes >= 0


class ShardedSynced(Synced):
    """test_runner_stop's synced cache, with Volcano's NodeShard contract on."""

    def __init__(self) -> None:
        self.shards = ShardCoordinator(None, node_shards_watched(), threading.Lock(), HARD,  # type: ignore[arg-type]
                                       "ours")


def test_with_sharding_on_a_move_of_our_nodes_starts_the_next_cycle_at_once() -> None:
    loop = CountingLoop()
    loop.cache = ShardedSynced()  # type: ignore[assignment]
    watched = loop.cache.shards.watched  # type: ignore[attr-defined]
    runner = threading.Thread(target=loop.run, daemon=True)
    runner.start()
    try:
        assert loop.cycled.wait(10)
        loop.cycled.clear()
        assert watched.on_event is not None  # installed before the watches start
        started = time.monotonic()
        watched.on_event("ADDED", shard("ours", ["a"]))
        assert loop.cycled.wait(10) and time.monotonic() - started < 10  # the period is 600 s
        loop.cycled.clear()
        watched.on_event("MODIFIED", shard("other", ["z"], ["z"]))  # nothing of ours moved: the period holds
        assert not loop.cycled.wait(0.5)
        assert loop.cycles == 2
    finally:
        loop.stop()
        runner.join(10)
    assert not runner.is_alive()


def test_a_desired_list_of_objects_neither_raises_nor_wakes() -> None:
    w = Woken()
    w.event({"metadata": {"name": "ours"}, "spec": {"nodesDesired": [{"a": 1}, ["b"]]}, "status": {}}, "ADDED")
    w.event(shard("other", [], ["a"]), "ADDED")
    assert w.event(shard("other", [], [], rv="2")) == 0
