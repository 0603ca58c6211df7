"""A store's journal (store.Journaled) lets the incremental snapshot compare only the objects written since the
last snapshot: what it finds changed is what comparing every object finds (`snapshots._changes`), the new and
the renewed in the order the dict holds them, for any sequence of writes the watches make."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings, strategies as st

from scheduler.cache.cluster_cache import ClusterCache
from scheduler.cache.snapshots import CacheSnapshots, _changes
from scheduler.cache.store import Journaled, journal_of

OPS = st.lists(st.tuples(st.sampled_from(["add", "modify", "delete", "pop", "again", "back", "same", "take"]),
                         st.integers(0, 11)), max_size=80)


def fresh_snapshots() -> CacheSnapshots:
    snapshots = ClusterCache(None, {"volcano-py"}, "default").incremental
    assert snapshots is not None
    return snapshots


def obj(key: str, uid: int, version: int) -> dict:
    return {"metadata": {"name": key, "uid": f"u{uid}", "resourceVersion": str(version)}}


@settings(max_examples=300, deadline=None)
@given(OPS)
def test_the_journal_finds_what_comparing_every_object_finds(ops: list[tuple[str, int]]) -> None:
    uids, versions = itertools.count(), itertools.count()
    store = Journaled()
    for i in range(4):
        store[f"k{i}"] = obj(f"k{i}", next(uids), next(versions))
    store.take()
    before = dict(store)
    for op, n in [*ops, ("take", 0)]:
        key = f"k{n}"
        if op == "add" and key not in store:
            store[key] = obj(key, next(uids), next(versions))
        elif op == "modify" and key in store:  # the watch's MODIFIED: a new object, the same uid
            store[key] = {**store[key], "metadata": {**store[key]["metadata"], "resourceVersion": str(next(versions))}}
        elif op == "delete" and key in store:
            del store[key]
        elif op == "pop":
            store.pop(key, None)
        elif op == "again" and key in store:  # deleted and made again: a new uid, last in the dict
            del store[key]
            store[key] = obj(key, next(uids), next(versions))
        elif op == "back" and key in store:  # deleted and put back as it was (its uid kept): last in the dict
            was = store.pop(key)
            store[key] = was
        elif op == "same" and key in store:  # written back as it was: no change
            store[key] = store[key]
        elif op == "take":
            written, now = store.take(), dict(store)
            assert written is not None
            walked, read = _changes(before, now), _changes(before, now, written)
            assert walked is not None and read is not None
            assert sorted(read, key=lambda c: c[0]) == sorted(walked, key=lambda c: c[0])
            placed = [c[0] for c in walked if c[1] is not None and (c[2] or c[0] not in before)]
            assert [c[0] for c in read if c[1] is not None and (c[2] or c[0] not in before)] == placed
            before = now


@settings(max_examples=300, deadline=None)
@given(OPS)
def test_the_snapshots_mirror_of_the_pods_follows_the_store_in_its_order_from_the_journal_alone(
        ops: list[tuple[str, int]]) -> None:
    """`CacheSnapshots.take_pods` keeps one dict of the pods up to date from the journal (no copy of every pod each
    cycle): after every take it holds the store's objects in the store's order, and the changes it notes are the
    ones comparing every object finds."""
    uids, versions = itertools.count(), itertools.count()
    store = Journaled()
    for i in range(4):
        store[f"k{i}"] = obj(f"k{i}", next(uids), next(versions))
    snapshots = fresh_snapshots()
    mirror = snapshots.take_pods(store)
    assert mirror is not store and list(mirror.items()) == list(store.items())
    snapshots._untaken = True  # as a build does
    before = dict(store)
    for op, n in [*ops, ("take", 0)]:
        key = f"k{n}"
        if op == "add" and key not in store:
            store[key] = obj(key, next(uids), next(versions))
        elif op == "modify" and key in store:
            store[key] = {**store[key], "metadata": {**store[key]["metadata"], "resourceVersion": str(next(versions))}}
        elif op in ("delete", "pop") and key in store:
            del store[key]
        elif op == "again" and key in store:
            del store[key]
            store[key] = obj(key, next(uids), next(versions))
        elif op == "back" and key in store:
            was = store.pop(key)
            store[key] = was
        elif op == "same" and key in store:
            store[key] = store[key]
        elif op == "take":
            taken = snapshots.take_pods(store)
            assert taken is mirror  # updated in place, not copied
            assert list(mirror.items()) == list(store.items())
            walked = _changes(before, dict(store))
            assert walked is not None and snapshots._pod_changes is not None
            assert sorted((k, o is None, r) for k, o, r, _ in snapshots._pod_changes) == \
                sorted((k, o is None, r) for k, o, r in walked)
            assert all(existed == (k in before) for k, _, _, existed in snapshots._pod_changes)
            snapshots._untaken = True
            before = dict(store)


def test_a_journal_nobody_takes_is_dropped_and_then_everything_is_compared_once() -> None:
    store = Journaled()
    for i in range(2000):  # a standby's store: pods come and go, never snapshot
        store[f"p{i}"] = obj(f"p{i}", i, i)
        store.pop(f"p{i - 5}", None)
    assert len(store) == 5
    assert store.take() is None  # dropped past twice the dict's size (+1,024)
    assert store.take() == {}


def test_a_plain_dict_has_no_journal_and_a_take_no_build_used_makes_the_next_one_compare_everything() -> None:
    assert journal_of({"a": {}}) is None
    snapshots = CacheSnapshots.__new__(CacheSnapshots)
    snapshots._written = [{}, {}]
    snapshots.written({"a": False}, None)
    assert snapshots._written == [{"a": False}, None]
    snapshots.written({"b": True}, {})  # the build after the first take failed before it was made
    assert snapshots._written == [None, None]


def test_a_pod_take_no_build_used_makes_the_next_build_a_full_one() -> None:
    store = Journaled({"a": obj("a", 1, 1)})
    snapshots = fresh_snapshots()
    snapshots.take_pods(store)
    snapshots._untaken, snapshots._dicts = True, ("as built",)
    store["b"] = obj("b", 2, 2)
    snapshots.take_pods(store)
    assert snapshots._dicts == ("as built",)
    store["c"] = obj("c", 3, 3)
    snapshots.take_pods(store)  # the take before was never built: its changes are in the mirror only
    assert snapshots._dicts == ()  # so the next build is a full one


@pytest.mark.parametrize("method", ["popitem"])
def test_what_a_journal_cannot_follow_is_refused(method: str) -> None:
    with pytest.raises(TypeError):
        getattr(Journaled({"a": {}}), method)()


def test_a_snapshot_reads_the_pods_written_since_not_a_copy_of_every_pod() -> None:
    """The cache's incremental snapshot keeps one dict of the pods, brought up to date by the keys written since
    the last snapshot (550,000 pods cost 20-30 ms a cycle to copy and as much to free)."""
    cache = ClusterCache(None, {"volcano-py"}, "default")
    for i in range(200):
        cache.pods.objects[f"ns/p{i}"] = {"metadata": {"name": f"p{i}", "namespace": "ns", "uid": f"u{i}",
                                                       "resourceVersion": str(i)},
                                          "spec": {"schedulerName": "other", "nodeName": "n1"}}
    cache.snapshot()
    first = cache._snapshot_pods
    cache.pods.objects["ns/p7"] = {**cache.pods.objects["ns/p7"], "status": {"phase": "Running"}}
    del cache.pods.objects["ns/p8"]
    cache.snapshot()
    assert cache._snapshot_pods is first
    assert list(first.items()) == list(cache.pods.objects.items())
    cache.stop(timeout=1.0)
