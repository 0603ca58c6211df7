"""A node is stored as the part of it the scheduler reads (cache/slim.py `Slimmer.node`): on random nodes, hostile
ones among them, it reads the same from the slim node as from the whole one; an update that changes nothing it
reads (a heartbeat, the images) leaves the stored node, and the next snapshot's node, as they were."""

from __future__ import annotations

import copy
import threading
from typing import Any

from hypothesis import HealthCheck, given, settings, strategies as st

from scheduler.api.convert import key_of, node_from_object
from scheduler.cache.cluster_cache import ClusterCache
from scheduler.cache.kube import dumps
from scheduler.cache.parse import ParseCache
from scheduler.cache.slim import Slimmer
from scheduler.sim.objects import node_object
from tests.adapter.snapshot_values import value

_quantity = st.sampled_from(["64", "256Gi", "110", "8", "500m", "-1", "x", 3, None])
_resources = st.one_of(st.dictionaries(st.sampled_from(["cpu", "memory", "pods", "nvidia.com/gpu"]), _quantity,
                                       max_size=4), st.just("none"))
_condition = st.one_of(st.fixed_dictionaries(
    {"type": st.sampled_from(["Ready", "MemoryPressure", "DiskPressure"]),
     "status": st.sampled_from(["True", "False", "Unknown"])},
    optional={"reason": st.just("KubeletReady"), "message": st.just("kubelet is posting ready status"),
              "lastHeartbeatTime": st.just("2026-12-05T10:00:00Z")}), st.just("odd"))
nodes = st.fixed_dictionaries(
    {"metadata": st.fixed_dictionaries({"name": st.sampled_from(["n1", "n2", "", 4])}, optional={
        "uid": st.sampled_from(["u1", "u2"]), "resourceVersion": st.sampled_from(["5", "6", 7]),
        "labels": st.one_of(st.dictionaries(st.sampled_from(["gpu", "zone", "kubernetes.io/hostname"]),
                                            st.sampled_from(["a", "b", "y" * 70]), max_size=3), st.just([1])),
        "annotations": st.just({"node.alpha.kubernetes.io/ttl": "0"}),
        "creationTimestamp": st.just("2026-12-05T10:00:00Z")})},
    optional={
        "spec": st.one_of(st.fixed_dictionaries({}, optional={
            "taints": st.one_of(st.lists(st.fixed_dictionaries(
                {"key": st.sampled_from(["gpu", "dedicated"]), "effect": st.sampled_from(["NoSchedule", "Odd"])},
                optional={"value": st.just("x")}), max_size=2), st.just("none")),
            "unschedulable": st.sampled_from([True, False, "yes"]),
            "podCIDR": st.just("10.0.0.0/24"), "providerID": st.just("kwok://n1")}), st.just([]), st.none()),
        "status": st.one_of(st.fixed_dictionaries({}, optional={
            "allocatable": _resources, "capacity": _resources,
            "conditions": st.one_of(st.lists(_condition, max_size=4), st.just("none")),
            "images": st.just([{"names": ["registry.invalid/train:latest"], "sizeBytes": 1 << 30}] * 20),
            "addresses": st.just([{"type": "InternalIP", "address": "10.0.0.1"}]),
            "nodeInfo": st.just({"kubeletVersion": "v1.34.0", "osImage": "Ubuntu"})}), st.just(3)),
        "kind": st.just("Node"),
    })


def read(node: dict[str, Any]) -> tuple[Any, Any]:
    parser = ParseCache(frozenset({"volcano-py"}), threading.Lock(), lambda *_: None)
    made = parser.read_fields("Node", node, lambda o, sink: node_from_object(o, sink))
    return value(made), sorted(map(repr, parser.problems.values()))


@given(nodes)
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_the_scheduler_reads_the_same_from_the_slim_node(node: dict[str, Any]) -> None:
    whole = copy.deepcopy(node)
    slim = Slimmer(frozenset({"volcano-py"})).node(node)
    assert node == whole
    assert read(slim) == read(whole)
    assert len(dumps(slim)) <= len(dumps(whole))
    if type(whole["metadata"]) is dict:
        assert (slim["metadata"].get("uid"), slim["metadata"].get("resourceVersion")) == (
            whole["metadata"].get("uid"), whole["metadata"].get("resourceVersion"))
        assert key_of(slim) == key_of(whole)


def _heartbeat(node: dict[str, Any], rv: str, when: str) -> dict[str, Any]:
    made = copy.deepcopy(node)
    made["metadata"]["resourceVersion"] = rv
    made["status"]["conditions"] = [{"type": "Ready", "status": "True", "lastHeartbeatTime": when,
                                     "message": "kubelet is posting ready status"}]
    made["status"]["images"] = [{"names": [f"registry.invalid/img-{rv}:1"], "sizeBytes": 1 << 20}]
    return made


def test_an_update_that_changes_nothing_read_keeps_the_stored_node_and_the_snapshots() -> None:
    cache = ClusterCache(None, {"volcano-py"}, "default", clock=lambda: 1_800_000_000.0)
    node = node_object("n1", cpu="16", memory="64Gi")
    node["metadata"].update(uid="u1", resourceVersion="5")
    on = cache.watcher._on_event
    on(cache.nodes, "ADDED", _heartbeat(node, "5", "2026-12-05T10:00:00Z"))
    stored = cache.nodes.objects["n1"]
    assert "images" not in stored["status"] and stored["status"]["conditions"] == [
        {"type": "Ready", "status": "True"}]
    first = cache.snapshot()
    on(cache.nodes, "MODIFIED", _heartbeat(node, "6", "2026-12-05T10:00:10Z"))
    assert cache.nodes.objects["n1"] is stored  # nothing read changed: kept, its resourceVersion too
    again = cache.snapshot()
    assert again.nodes["n1"] is first.nodes["n1"]  # not rebuilt
    relabelled = _heartbeat(node, "7", "2026-12-05T10:00:20Z")
    relabelled["metadata"]["labels"]["gpu"] = "true"
    on(cache.nodes, "MODIFIED", relabelled)
    assert cache.nodes.objects["n1"]["metadata"]["resourceVersion"] == "7"
    assert cache.snapshot().nodes["n1"].labels["gpu"] == "true"
    unready = _heartbeat(node, "8", "2026-12-05T10:00:30Z")
    unready["status"]["conditions"][0]["status"] = "False"
    on(cache.nodes, "MODIFIED", unready)
    assert cache.snapshot().nodes["n1"].ready is False


def test_nodes_of_one_pool_share_one_status_and_read_as_their_own() -> None:
    """A pool's nodes (same resources, same condition types and statuses) are stored with one status dict between
    them (~0.8 KB a node less), and each reads as its whole object does; a node whose status differs has its own."""
    slimmer = Slimmer(frozenset({"volcano-py"}))
    whole = [node_object(f"n{i}", cpu="64", memory="256Gi", gpu=8) for i in range(3)]
    whole.append(node_object("other", cpu="32", memory="256Gi"))
    for obj in whole:
        obj["status"]["conditions"][0]["lastHeartbeatTime"] = "2026-12-06T15:00:00Z"  # dropped: not read
    slim = [slimmer.node(copy.deepcopy(obj)) for obj in whole]
    assert slim[0]["status"] is slim[1]["status"] is slim[2]["status"]
    assert slim[3]["status"] is not slim[0]["status"]
    for obj, kept in zip(whole, slim, strict=True):
        assert value(node_from_object(kept, [])) == value(node_from_object(obj, []))
