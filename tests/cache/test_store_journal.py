"""A store's journal (store.Journaled) lets the incremental snapshot compare only the objects written since the
last snapshot: what it finds changed is what comparing every object finds (`snapshots._changes`), the new and
the renewed in the order the dict holds them, for any sequence of writes the watches make."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings, strategies as st

from scheduler.cache.snapshots import CacheSnapshots, _changes
from scheduler.cache.store import Journaled, journal_of

OPS = st.lists(st.tuples(st.sampled_from(["add", "modify", "delete", "pop", "again", "same", "take"]),
                         st.integers(0, 11)), max_size=80)


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
    snapshots._written = [{}, {}, {}]
    snapshots.written({"a": None}, {}, None)
    assert snapshots._written == [{"a": None}, {}, None]
    snapshots.written({"b": None}, {}, {})  # the build after the first take failed before it was made
    assert snapshots._written == [None, {}, None]


@pytest.mark.parametrize("method", ["popitem"])
def test_what_a_journal_cannot_follow_is_refused(method: str) -> None:
    with pytest.raises(TypeError):
        getattr(Journaled({"a": {}}), method)()
