"""The pods given an Unschedulable `PodScheduled` condition are found from the cycle's snapshot (the pending pods
of the gangs a PodGroup says are Unschedulable), not by walking every pod of the cluster each cycle: the same
conditions, and none for a gang the snapshot does not hold (another shard's, with --active-shards)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from hypothesis import given, settings, strategies as st

from scheduler.cache.status_writer import StatusWriter
from scheduler.cache.store import Stores

GROUP = "scheduling.k8s.io/group-name"
OURS = "volcano-py"


def writer(stores: Stores) -> StatusWriter:
    return StatusWriter(None, stores, ThreadPoolExecutor(1), frozenset({OURS}),  # type: ignore[arg-type]
                        lambda: True, threading.Event())


def podgroup(name: str, unschedulable: bool) -> dict[str, Any]:
    conditions = [{"type": "Unschedulable", "status": "True", "message": f"{name}: 3/4 tasks fit"}] \
        if unschedulable else []
    return {"metadata": {"name": name, "namespace": "ns"}, "status": {"conditions": conditions}}


def pod(name: str, group: str, *, node: str = "", scheduler: str = OURS, gated: bool = False,
        told: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulerName": scheduler}
    if node:
        spec["nodeName"] = node
    if gated:
        spec["schedulingGates"] = [{"name": "wait"}]
    status: dict[str, Any] = {"phase": "Pending"}
    if told:  # the condition already written, with the gang's message
        status["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                 "message": f"{group}: 3/4 tasks fit"}]
    return {"metadata": {"name": name, "namespace": "ns", "annotations": {GROUP: group}}, "spec": spec,
            "status": status}


POD = st.fixed_dictionaries({
    "group": st.sampled_from(["g0", "g1", "g2", "g3"]),
    "node": st.sampled_from(["", "", "n1"]),
    "scheduler": st.sampled_from([OURS, OURS, "default-scheduler"]),
    "gated": st.booleans(),
    "told": st.booleans(),
})


def stores_of(unschedulable: list[bool], pods: list[dict[str, Any]]) -> Stores:
    stores = Stores()
    for i, flag in enumerate(unschedulable):
        stores.podgroups.objects[f"ns/g{i}"] = podgroup(f"g{i}", flag)
    for i, p in enumerate(pods):
        stores.pods.objects[f"ns/p{i}"] = pod(f"p{i}", **p)
    return stores


def snapshot_pending(stores: Stores) -> dict[str, tuple[str, ...]]:
    """What a snapshot holds as each gang's pending tasks: our scheduler's pods not yet on a node."""
    out: dict[str, list[str]] = {}
    for key, obj in stores.pods.objects.items():
        if obj["spec"]["schedulerName"] == OURS and not obj["spec"].get("nodeName"):
            out.setdefault(f"ns/{obj['metadata']['annotations'][GROUP]}", []).append(key)
    return {job: tuple(keys) for job, keys in out.items()}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.booleans(), min_size=4, max_size=4), st.lists(POD, max_size=30), st.sets(st.integers(0, 29)))
def test_the_snapshots_pending_pods_give_the_conditions_a_walk_of_every_pod_gives(unschedulable, pods, assumed):
    stores = stores_of(unschedulable, pods)
    stores.assumed.update({f"ns/p{i}": ("n2", 0.0) for i in assumed})
    walked = writer(stores)
    scoped = writer(stores)
    scoped.pending = snapshot_pending(stores)
    expected = sorted(walked._conditions_to_write())  # (sent concurrently: the order is not kept)
    assert sorted(scoped._conditions_to_write()) == expected
    assert {key for key, _ in expected} <= {f"ns/p{i}" for i, p in enumerate(pods)
                                            if unschedulable[int(p["group"][1])]}


class NoWalk(dict):  # type: ignore[type-arg]
    """A pod store that fails a walk of all its pods."""

    def items(self):  # type: ignore[no-untyped-def]
        raise AssertionError("walked every pod of the cluster")

    def __iter__(self):  # type: ignore[no-untyped-def]
        raise AssertionError("walked every pod of the cluster")


def test_only_the_pods_of_the_snapshots_unschedulable_gangs_are_looked_at() -> None:
    stores = stores_of([True, False, True], [{"group": "g0"}, {"group": "g1"}, {"group": "g2"}, {"group": "g0"}])
    stores.pods.objects = NoWalk(stores.pods.objects)
    w = writer(stores)
    w.pending = {"ns/g0": ("ns/p0", "ns/p3"), "ns/g1": ("ns/p1",)}  # g2: another shard's gang, not in the snapshot
    assert w._conditions_to_write() == [("ns/p0", "g0: 3/4 tasks fit"), ("ns/p3", "g0: 3/4 tasks fit")]


def test_the_cache_hands_the_writer_each_snapshots_pending_pods_by_gang() -> None:
    from scheduler.cache.cluster_cache import ClusterCache

    cache = ClusterCache(None)
    try:
        cache.podgroups.objects["ns/g0"] = {**podgroup("g0", True), "spec": {"minMember": 2}}
        cache.podgroups.objects["ns/g0"]["metadata"].update(uid="pg0", resourceVersion="1")
        for i, node in enumerate(["", "", "n1"]):
            made = pod(f"p{i}", "g0", node=node)
            made["metadata"].update(uid=f"u{i}", resourceVersion=str(10 + i))
            made["spec"]["containers"] = [{"name": "c"}]
            cache.pods.objects[f"ns/p{i}"] = made
        cache.snapshot()
        assert {job: sorted(keys) for job, keys in cache.status_writer.pending.items()} == {"ns/g0": ["ns/p0", "ns/p1"]}
    finally:
        cache.stop(timeout=1.0)
