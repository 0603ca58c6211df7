"""What a session of an active replica sees of the nodes, worked out from the last answer when nothing changed
(cache/active.py `_kept_nodes`, `undeferred`): always what walking every node would give, order included."""

from __future__ import annotations

from types import SimpleNamespace

from hypothesis import given, settings, strategies as st

from scheduler.cache.active import ActiveShards

NAMES = [f"n{i}" for i in range(12)]
STEPS = st.lists(st.tuples(st.permutations(NAMES).map(lambda p: p[: len(p) // 2 + 3]),
                           st.sets(st.sampled_from(NAMES))), min_size=1, max_size=12)


@settings(max_examples=300, deadline=None)
@given(STEPS, st.booleans())
def test_the_kept_nodes_are_those_a_walk_of_every_node_keeps_in_its_order(steps, repeat: bool) -> None:
    shards = SimpleNamespace(_kept=(set(), [], []))
    for order, keep in steps:
        for _ in range(2 if repeat else 1):  # the same snapshot names and keep again: the last answer reused
            nodes = {name: object() for name in order}
            got = ActiveShards._kept_nodes(shards, nodes, set(keep))  # type: ignore[arg-type]
            assert list(got.items()) == [(name, node) for name, node in nodes.items() if name in keep]


@settings(max_examples=200, deadline=None)
@given(st.sets(st.sampled_from(NAMES)), st.none() | st.frozensets(st.sampled_from(NAMES)))
def test_undeferred_is_what_asking_defers_of_each_name_gives(deferred: set[str], scope) -> None:
    shards = SimpleNamespace(_scope=scope)
    assert ActiveShards.undeferred(shards, deferred) == {  # type: ignore[arg-type]
        name for name in deferred if not ActiveShards.defers(shards, name)}  # type: ignore[arg-type]
