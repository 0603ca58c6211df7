"""A gang larger than its shard, on a real control plane (`volcano-py scheduler --active-shards 2`): the holder of
shard 0 lends the gang's shard a whole rack of the other shard through the NodeShards' two-phase handoff, the gang
is bound whole on the two racks by the replica holding its shard, no node is over-committed, and once the gang's
pods are gone the rack goes back.

The replicas fixture and the NodeShard readers are those of test_active_shards_on_cluster.py.
"""

from __future__ import annotations

from controlplane import assert_no_overcommit, wait_for
from kubernetes import client
from test_active_shards_on_cluster import (  # noqa: F401 (replicas: a fixture, used by name)
    LEASE_NS,
    SHARDS,
    desired,
    holder,
    in_use,
    pinned_gang,
    replicas,
    two_racks,
    two_replicas,
)
from test_scheduler import TIMEOUT, bound_pods


def test_a_gang_larger_than_its_shard_borrows_a_rack_and_gives_it_back(
        replicas, core_v1, custom, namespace, node_set, api_client):  # noqa: F811
    coordination = client.CoordinationV1Api(api_client)
    # Two racks of two nodes, 1,000 GPUs each: by far the heaviest domains, so the plan puts one in each shard.
    racks = two_racks(core_v1, node_set, 1000)
    tag = node_set.tag
    _, leases, _, _ = two_replicas(replicas, coordination, "ln")
    ours = set(racks["a"]) | set(racks["b"])
    wait_for(lambda: all(len(desired(custom, s) & ours) == 2 for s in SHARDS), TIMEOUT, what="the plan written")
    base = [desired(custom, s) & ours for s in SHARDS]
    assert sorted(map(sorted, base)) == sorted(map(sorted, racks.values())), "a rack was split"

    # Three pods of 1,000 GPUs pinned to shard 1, which has one rack of 2,000: it can only run on both racks.
    pinned_gang(core_v1, custom, namespace, "big", 1, 3, tag, gpus=1000)
    wait_for(lambda: len(bound_pods(core_v1, namespace)) == 3, TIMEOUT, what="the big gang bound whole")
    assert desired(custom, SHARDS[1]) & ours == ours and not desired(custom, SHARDS[0]) & ours  # the rack lent
    placed = bound_pods(core_v1, namespace)
    assert set(placed.values()) <= ours and len(set(placed.values())) == 3, placed
    shard_1 = holder(coordination, leases[1])
    for name in placed:
        pod = core_v1.read_namespaced_pod(name, namespace)
        assert pod.metadata.annotations["scheduling.volcano-py.io/bound-by"] == shard_1
        assert pod.metadata.annotations["scheduling.volcano-py.io/lease"] == f"{LEASE_NS}/{leases[1]}"
    assert_no_overcommit(core_v1)

    for name in placed:  # the gang ends: the loan is given back
        core_v1.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
    wait_for(lambda: [desired(custom, s) & ours for s in SHARDS] == base, TIMEOUT, what="the rack given back")
    wait_for(lambda: [in_use(custom, s) & ours for s in SHARDS] == base, TIMEOUT, what="each rack in use again")
