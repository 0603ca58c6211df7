"""N active replicas on a real control plane (`volcano-py scheduler --active-shards 2`): two replicas each take one
shard's Lease, the holder of shard 0 splits the nodes by rack into the two shards' NodeShards, each replica binds
only the gangs routed to its shard onto its shard's nodes, and after one replica is killed (SIGKILL) the survivor
takes the dead replica's shard Lease and binds that shard's pending gang (on either shard's nodes: it holds both).

Every scheduler is a process (`python -m scheduler.cli scheduler`); the Leases have names of this test's own.
"""

from __future__ import annotations

import json
import time
import uuid

import pytest
from controlplane import assert_no_overcommit, wait_for
from kubernetes import client
from processes import Process
from test_scheduler import GROUP, TIMEOUT, bound_pods, gang_pod, podgroup

SHARD = ("shard.volcano.sh", "v1alpha1", "nodeshards")
SHARDS = ("volcano-py-shard-0", "volcano-py-shard-1")  # <scheduler-name>-shard-<i>
RACK = "e2e.volcano-py.io/rack"
LEASE_NS = "volcano-py-system"
LEASE = 4.0
CONF = (
    'actions: "enqueue, allocate, backfill"\ntiers:\n- plugins:\n  - name: priority\n  - name: gang\n'
    "- plugins:\n  - name: predicates\n  - name: proportion\n"
)


@pytest.fixture
def replicas(control_plane, tmp_path, custom):
    for name in SHARDS:  # NodeShards of an earlier run: the plan is written afresh
        _delete_shard(custom, name)
    started: list[Process] = []
    conf = tmp_path / "volcano-scheduler.conf"
    conf.write_text(CONF)

    def start(name: str, lease: str) -> Process:
        p = Process(control_plane, tmp_path, name, "scheduler", "--scheduler-conf", str(conf), "--schedule-period",
                    "200ms", "--log-level", "debug", "--leader-elect-identity", name, "--active-shards", "2",
                    "--shard-topology-label", RACK, "--leader-elect-lease-name", lease,
                    "--leader-elect-lease-duration", f"{LEASE}s", "--leader-elect-renew-deadline", "3s",
                    "--leader-elect-retry-period", "500ms")
        started.append(p)
        return p

    yield start
    for p in started:
        p.stop()
    for name in SHARDS:
        _delete_shard(custom, name)


def _delete_shard(custom, name: str) -> None:
    try:
        custom.delete_cluster_custom_object(*SHARD, name)
    except client.ApiException as exc:
        if exc.status != 404:
            raise


def holder(coordination, name: str) -> str:
    try:
        return coordination.read_namespaced_lease(name, LEASE_NS).spec.holder_identity or ""
    except client.ApiException as exc:
        if exc.status == 404:
            return ""
        raise


def desired(custom, name: str) -> set[str]:
    try:
        return set(custom.get_cluster_custom_object(*SHARD, name)["spec"].get("nodesDesired") or ())
    except client.ApiException as exc:
        if exc.status == 404:
            return set()
        raise


def in_use(custom, name: str) -> set[str]:
    try:
        return set((custom.get_cluster_custom_object(*SHARD, name).get("status") or {}).get("nodesInUse") or ())
    except client.ApiException as exc:
        if exc.status == 404:
            return set()
        raise


def scheduled_by(core_v1, namespace: str) -> dict[str, str]:
    raw = json.loads(core_v1.list_namespaced_event(namespace, _preload_content=False).data)["items"]
    return {e["involvedObject"]["name"]: e.get("reportingInstance", "") for e in raw
            if e.get("reason") == "Scheduled" and e["involvedObject"].get("kind") == "Pod"}


def pinned_gang(core_v1, custom, namespace: str, name: str, shard: int, size: int, tag: str, gpus: int) -> None:
    group = podgroup(name, size)
    group["metadata"]["annotations"] = {"scheduling.volcano-py.io/shard": str(shard)}
    custom.create_namespaced_custom_object(GROUP, "v1beta1", namespace, "podgroups", group)
    for i in range(size):
        core_v1.create_namespaced_pod(namespace, gang_pod(f"{name}-{i}", name, tag, gpus=gpus))


def two_racks(core_v1, node_set, gpus: int) -> dict[str, list[str]]:
    """Racks a and b of two nodes of `gpus` GPUs each, labelled by rack (unique to this test's nodes)."""
    racks = {"a": [node_set(gpus=gpus) for _ in range(2)], "b": [node_set(gpus=gpus) for _ in range(2)]}
    for rack, names in racks.items():
        for name in names:
            core_v1.patch_node(name, {"metadata": {"labels": {RACK: f"{rack}-{node_set.tag}"}}})
    return racks


def two_replicas(replicas, coordination, prefix: str):
    """Two replicas on Leases of this test's own; returns once each holds one shard's Lease."""
    lease = f"{prefix}-{uuid.uuid4().hex[:8]}"
    leases = [f"{lease}-shard-0", f"{lease}-shard-1"]
    one, two = replicas(f"one-{lease}", lease), replicas(f"two-{lease}", lease)
    wait_for(lambda: {holder(coordination, n) for n in leases} == {one.name, two.name}, TIMEOUT,
             what="each replica holds one shard's Lease")
    return lease, leases, one, two


def test_two_active_replicas_bind_their_shards_and_a_survivor_takes_over_a_killed_ones_shard(
        replicas, core_v1, custom, namespace, node_set, api_client):
    coordination = client.CoordinationV1Api(api_client)
    # Two racks of two nodes, 200 GPUs each: the heaviest domains of any cluster here, so the plan puts one rack
    # in each shard whatever other nodes exist.
    racks = two_racks(core_v1, node_set, 200)
    tag = node_set.tag
    lease, leases, one, two = two_replicas(replicas, coordination, "as")
    owner = {i: holder(coordination, n) for i, n in enumerate(leases)}

    ours = set(racks["a"]) | set(racks["b"])
    wait_for(lambda: all(desired(custom, s) & ours for s in SHARDS), TIMEOUT, what="the plan written")
    shard_nodes = [desired(custom, s) & ours for s in SHARDS]
    assert sorted(map(sorted, shard_nodes)) == sorted(map(sorted, racks.values())), "a rack was split"
    wait_for(lambda: all(in_use(custom, s) & ours == shard_nodes[i] for i, s in enumerate(SHARDS)), TIMEOUT,
             what="each shard's nodes in use")

    pinned_gang(core_v1, custom, namespace, "g0", 0, 2, tag, gpus=100)
    pinned_gang(core_v1, custom, namespace, "g1", 1, 2, tag, gpus=100)
    wait_for(lambda: len(bound_pods(core_v1, namespace)) == 4, TIMEOUT, what="both gangs bound")
    placed = bound_pods(core_v1, namespace)
    for i in (0, 1):
        assert {placed[f"g{i}-{k}"] for k in (0, 1)} <= shard_nodes[i], (i, placed, shard_nodes)
    events = wait_for(lambda: (e := scheduled_by(core_v1, namespace)) and len(e) == 4 and e, TIMEOUT,
                      what="4 Scheduled events")
    assert {events[f"g{i}-{k}"] for i in (0, 1) for k in (0, 1)} == {owner[0], owner[1]}
    assert all(events[f"g{i}-{k}"] == owner[i] for i in (0, 1) for k in (0, 1)), (events, owner)
    assert_no_overcommit(core_v1)

    victim = one if owner[1] == one.name else two
    survivor = two if victim is one else one
    victim.kill()
    killed = time.monotonic()
    pinned_gang(core_v1, custom, namespace, "late", 1, 2, tag, gpus=100)  # the dead replica's shard
    wait_for(lambda: holder(coordination, leases[1]) == survivor.name, TIMEOUT, what="the survivor takes shard 1")
    print(f"shard 1 taken over {time.monotonic() - killed:.2f}s after kill -9 (lease duration {LEASE}s)")
    wait_for(lambda: len(bound_pods(core_v1, namespace)) == 6, TIMEOUT, what="the late gang bound")
    placed = bound_pods(core_v1, namespace)
    # The survivor schedules both shards now: the late gang may go to any node of either, and each bind carries
    # the Lease of the shard that owns its node (the bind fence's).
    assert {placed["late-0"], placed["late-1"]} <= ours, placed
    events = wait_for(lambda: (e := scheduled_by(core_v1, namespace)) and len(e) == 6 and e, TIMEOUT,
                      what="6 Scheduled events")
    assert events["late-0"] == events["late-1"] == survivor.name
    assert holder(coordination, leases[0]) == owner[0]  # the survivor's own shard never changed hands
    assert_no_overcommit(core_v1)
    for pod_name in ("late-0", "late-1"):
        pod = core_v1.read_namespaced_pod(pod_name, namespace)
        shard = 0 if pod.spec.node_name in shard_nodes[0] else 1
        assert pod.metadata.annotations["scheduling.volcano-py.io/lease"] == f"{LEASE_NS}/{leases[shard]}"
        assert pod.metadata.annotations["scheduling.volcano-py.io/bound-by"] == survivor.name
