"""Deferred nodes (adapter/incremental.py `build(..., defer)`, `refresh`): with --active-shards a replica leaves the
usage of nodes outside its last session as it was, and makes a node current once a session needs it. Random deltas
(the incremental snapshot's own world, tests/adapter/test_incremental_snapshot.py) with a random set of nodes
deferred at each build: every node kept is equal to a cold build's, and once all are refreshed the whole snapshot
is; the cache refreshes a deferred node its session keeps (ClusterCache._finish)."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

from hypothesis import given, settings, strategies as st
from snapshot_values import structured
from test_incremental_snapshot import CONF, World, cold, same, sim_rules

from scheduler.api.snapshot import ClusterSnapshot
from scheduler.cycle import run_cycle


def deferring(world: World, chosen: set[str]) -> None:
    """Make the world's builder defer the nodes in `chosen` (the sim calls `build(inputs, delta)`)."""
    builder = world.sim.changes.builder
    assert builder is not None
    build = type(builder).build
    builder.build = lambda inputs, delta, defer=None: build(builder, inputs, delta, chosen.__contains__)  # type: ignore[method-assign]


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_deferred_nodes_refreshed_give_a_cold_snapshot_and_the_sessions_see_no_stale_node(seed: int) -> None:
    world = World(random.Random(seed))
    rng, sim = world.rng, world.sim
    sim.changes.start(sim_rules(sim))
    sim.snapshot()
    builder = sim.changes.builder
    assert builder is not None
    chosen: set[str] = set()
    deferring(world, chosen)
    ops = []
    for _ in range(40):
        ops.append(world.step())
        chosen.clear()
        chosen.update(n for n in sim.nodes if rng.random() < 0.5)
        snapshot = sim.snapshot()
        assert builder.deferred <= chosen
        kept = [n for n in snapshot.nodes if rng.random() < 0.5]  # what a session of this replica is given
        snapshot.nodes.update(builder.refresh(kept))
        reference = cold(sim)
        for name in kept:
            assert structured(replace(snapshot, nodes={name: snapshot.nodes[name]}, jobs={})) == structured(
                replace(reference, nodes={name: reference.nodes[name]}, jobs={})), (ops, name)
        if ops[-1] == "cycle":  # a session on current nodes only, its changes applied
            snapshot.nodes.update(builder.refresh(list(snapshot.nodes)))
            assert same(snapshot, sim) == "", ops
            sim.apply(run_cycle(snapshot, CONF))
    snapshot = sim.snapshot()
    snapshot.nodes.update(builder.refresh(list(snapshot.nodes)))
    assert same(snapshot, sim) == "", ops
    assert not builder.deferred


def test_a_node_whose_pods_changed_outside_the_session_is_deferred_then_made_current_when_needed() -> None:
    world = World(random.Random(7))
    sim = world.sim
    sim.changes.start(sim_rules(sim))
    sim.snapshot()
    builder = sim.changes.builder
    assert builder is not None
    chosen: set[str] = set(sim.nodes)
    deferring(world, chosen)
    name, key = sorted(sim.nodes)[0], sorted(sim.pods)[0]
    sim.pods[key].manifest["spec"]["nodeName"] = name  # another replica binds a pod there
    sim.changes.changed_pod(key)
    snapshot = sim.snapshot()
    assert builder.deferred == {name}
    assert structured(_one(snapshot, name)) != structured(_one(cold(sim), name))  # stale until needed
    snapshot.nodes.update(builder.refresh([name]))
    assert structured(_one(snapshot, name)) == structured(_one(cold(sim), name))
    assert not builder.deferred


def _one(snapshot: ClusterSnapshot, name: str) -> Any:
    return replace(snapshot, nodes={name: snapshot.nodes[name]}, jobs={})


class Keeps:
    """The part of ActiveShards the cache asks in a snapshot: nothing to prepare, `keep` the session's nodes."""

    def __init__(self, keep: set[str]) -> None:
        self.keep, self.scope = keep, None
        self.is_light = None

    def prepare(self) -> None:
        pass

    def refresh_light(self) -> None:
        pass

    def reads_light(self, job: str) -> bool:
        return False

    def defers(self, name: str) -> bool:
        return self.scope is not None and name not in self.scope

    def undeferred(self, names: set[str]) -> set[str]:
        return {name for name in names if not self.defers(name)}

    def restrict(self, snapshot: ClusterSnapshot) -> ClusterSnapshot:
        self.scope = frozenset(self.keep)
        return replace(snapshot, nodes={n: v for n, v in snapshot.nodes.items() if n in self.keep})


def test_the_cache_gives_a_session_a_deferred_node_made_current() -> None:
    from scheduler.cache.cluster_cache import ClusterCache
    from scheduler.sim.objects import node_object, pod_object

    cache = ClusterCache(None)
    keeps = Keeps({"n1"})
    cache.active = keeps  # type: ignore[assignment]
    try:
        for i, name in enumerate(("n1", "n2")):
            node = node_object(name, cpu="8", memory="32Gi")
            node["metadata"].update(uid=f"node-{i}", resourceVersion=str(i + 1))
            cache.nodes.objects[name] = node

        def bound(name: str, rv: int) -> None:
            pod = pod_object(name, cpu="2")
            pod["metadata"].update(uid=f"uid-{name}", resourceVersion=str(rv))
            pod["spec"]["nodeName"] = "n2"
            pod["status"] = {"phase": "Running"}
            cache.pods.objects[f"default/{name}"] = pod

        bound("p1", 10)
        cache.snapshot()  # the first: everything built
        bound("p2", 11)  # another replica binds on n2, outside this replica's session
        assert "n2" not in cache.snapshot().nodes
        assert cache.incremental is not None and cache.incremental.builder.deferred == {"n2"}
        keeps.keep = {"n1", "n2"}  # n2 joins the session (a shard taken, a loan)
        node = cache.snapshot().nodes["n2"]
        assert node.used.cpu == 4000 and sorted(node.tasks) == ["default/p1", "default/p2"]
    finally:
        cache.stop(timeout=1.0)
