"""A replica of `--active-shards 2` killed (SIGKILL) in the middle of a large gang's binds, on a real control plane:
the gang is left partly bound by the dead replica, the survivor takes the dead replica's shard Lease and binds the
rest of the gang (the allocate action completes a partly bound gang first), so once things settle the gang is
wholly bound, every pod once, and no node is over-committed.

Every scheduler is a process (`python -m scheduler.cli scheduler`), with the replicas and the shard Leases of
tests/e2e/test_active_shards_on_cluster.py.
"""

from __future__ import annotations

import time
import uuid

from controlplane import assert_no_overcommit, create_gpu_node, delete_node_and_pods, node_is_ready, wait_for
from kubernetes import client
from test_active_shards_on_cluster import LEASE, LEASE_NS, RACK, SHARDS, desired, holder, in_use, pinned_gang, replicas
from test_scheduler import NODE_SET, TIMEOUT, bound_pods

from scheduler.cache.kube import Kube

__all__ = ["replicas"]  # the fixture
SIZE = 400  # one-GPU pods: at several hundred binds a second on this machine, the kill lands mid-gang
PER_NODE = 300  # pods and GPUs of each node: a rack of two holds the gang, one node does not
BOUND_BY = "scheduling.volcano-py.io/bound-by"
LEASE_ANNOTATION = "scheduling.volcano-py.io/lease"


def kill_at_first_bind(control_plane, namespace: str, victim) -> None:
    """SIGKILL `victim` the moment a watch sees the first pod of the namespace bound (a poll is too slow: a cycle
    binds hundreds of pods in a fraction of a second)."""
    api = control_plane.api_client()
    kube = Kube(api)
    try:
        listed = kube.request("GET", f"/api/v1/namespaces/{namespace}/pods")
        if not any(p["spec"].get("nodeName") for p in listed["items"]):
            query = {"watch": "1", "resourceVersion": listed["metadata"]["resourceVersion"], "timeoutSeconds": TIMEOUT}
            for event in kube.stream(f"/api/v1/namespaces/{namespace}/pods", query, read_timeout=TIMEOUT + 5):
                if ((event.get("object") or {}).get("spec") or {}).get("nodeName") or not victim.alive():
                    break
        victim.kill()
    finally:
        kube.close_streams()
        api.close()


def test_a_replica_killed_mid_gang_leaves_the_gang_to_the_survivor_which_binds_it_whole(
        replicas, control_plane, core_v1, custom, namespace, api_client):
    coordination = client.CoordinationV1Api(api_client)
    tag = uuid.uuid4().hex[:8]
    racks = {"a": [f"kill-{tag}-a{i}" for i in range(2)], "b": [f"kill-{tag}-b{i}" for i in range(2)]}
    ours = {n for names in racks.values() for n in names}
    try:
        for rack, names in racks.items():
            for name in names:  # the heaviest racks of the cluster: the plan puts one in each shard
                create_gpu_node(core_v1, name, gpus=PER_NODE, pods=str(PER_NODE), cpu="256",
                                labels={NODE_SET: tag, RACK: f"{rack}-{tag}"})
        wait_for(lambda: all(node_is_ready(core_v1, n) for n in ours), TIMEOUT, what="nodes Ready")
        lease = f"ak-{uuid.uuid4().hex[:8]}"
        leases = [f"{lease}-shard-0", f"{lease}-shard-1"]
        one, two = replicas(f"one-{lease}", lease), replicas(f"two-{lease}", lease)
        wait_for(lambda: {holder(coordination, n) for n in leases} == {one.name, two.name}, TIMEOUT,
                 what="each replica holds one shard's Lease")
        victim = one if holder(coordination, leases[1]) == one.name else two
        survivor = two if victim is one else one
        wait_for(lambda: all(desired(custom, s) & ours for s in SHARDS), TIMEOUT, what="the plan written")
        shard_nodes = [desired(custom, s) & ours for s in SHARDS]
        wait_for(lambda: all(in_use(custom, s) & ours == shard_nodes[i] for i, s in enumerate(SHARDS)), TIMEOUT,
                 what="each shard's nodes in use")

        pinned_gang(core_v1, custom, namespace, "big", 1, SIZE, tag, gpus=1)  # the victim's shard
        kill_at_first_bind(control_plane, namespace, victim)
        killed = time.monotonic()
        at_kill = bound_pods(core_v1, namespace)
        assert 0 < len(at_kill) < SIZE, f"{len(at_kill)} of {SIZE} bound at the kill: no bind was in flight"
        assert set(at_kill.values()) <= shard_nodes[1], "the victim bound onto a node not of its shard"

        wait_for(lambda: holder(coordination, leases[1]) == survivor.name, TIMEOUT, what="the survivor takes shard 1")
        wait_for(lambda: len(bound_pods(core_v1, namespace)) == SIZE, TIMEOUT, what="the gang wholly bound")
        print(f"{len(at_kill)}/{SIZE} bound at the kill; whole {time.monotonic() - killed:.2f}s after it "
              f"(lease duration {LEASE}s)")
        placed = bound_pods(core_v1, namespace)
        assert set(placed.values()) <= ours, placed
        by: dict[str, int] = {}
        for pod in core_v1.list_namespaced_pod(namespace).items:
            who = pod.metadata.annotations.get(BOUND_BY)
            by[who] = by.get(who, 0) + 1
            if who == survivor.name:  # the survivor's binds carry the Lease of the shard owning their node
                shard = 0 if pod.spec.node_name in shard_nodes[0] else 1
                assert pod.metadata.annotations[LEASE_ANNOTATION] == f"{LEASE_NS}/{leases[shard]}", pod.metadata.name
        assert set(by) == {victim.name, survivor.name}, by
        assert by[victim.name] >= len(at_kill) and by[survivor.name] > 0, by
        assert holder(coordination, leases[0]) == survivor.name  # its own shard never changed hands
        assert_no_overcommit(core_v1)
    finally:
        for name in ours:
            try:
                delete_node_and_pods(core_v1, name)
            except client.ApiException as exc:
                if exc.status != 404:
                    raise
