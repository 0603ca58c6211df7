"""A ready job with a hard network topology on the real control plane: its pods beyond minAvailable are placed
only inside its HyperNode (Volcano's allocate sends such a job through allocateForJob on every turn, searching
from getSearchRoot: pkg/scheduler/actions/allocate/allocate.go, plugins/network-topology-aware), never in another
HyperNode that has room, and they wait until room is freed inside it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from controlplane import wait_for
from inprocess import running_scheduler
from test_scheduler import GROUP, TIMEOUT, bound_pods, gang_pod
from test_topology_hypernodes import CONF, hypernode, work


@pytest.fixture
def two_racks(control_plane, custom, node_set) -> Iterator[tuple[list[str], list[str]]]:
    """Five 64-cpu nodes: three in one tier-1 HyperNode (rack-x), two in another (rack-y)."""
    nodes = [node_set(gpus=0) for _ in range(5)]
    made = [hypernode(f"rack-x-{node_set.tag}", nodes[:3]), hypernode(f"rack-y-{node_set.tag}", nodes[3:])]
    for h in made:
        custom.create_cluster_custom_object("topology.volcano.sh", "v1alpha1", "hypernodes", h)
    try:
        yield nodes[:3], nodes[3:]
    finally:
        for h in made:
            custom.delete_cluster_custom_object("topology.volcano.sh", "v1alpha1", "hypernodes", h["metadata"]["name"])


def test_a_ready_hard_job_takes_its_extras_only_inside_its_hypernode(
        control_plane, tmp_path, custom, core_v1, namespace, node_set, two_racks):
    """rack-x's nodes hold 40 cpu of work each: its hypernode binpack score wins, and it has room for three of
    the job's four 15-cpu pods (one per node). minMember is 2, so the job is ready there; the fourth pod fits
    only in rack-y, and stays pending while the scheduler runs, until work in rack-x ends: then it binds there."""
    x_nodes, y_nodes = two_racks
    with running_scheduler(control_plane, conf=CONF, conf_dir=tmp_path) as running:
        wait_for(lambda: len(running.cache.hypernodes.objects) >= 2, TIMEOUT, what="the cache sees the HyperNodes")
        for i, node in enumerate(x_nodes):
            work(core_v1, namespace, f"work-{i}", node, node_set.tag, "40")
        custom.create_namespaced_custom_object(GROUP, "v1beta1", namespace, "podgroups", {
            "apiVersion": f"{GROUP}/v1beta1", "kind": "PodGroup", "metadata": {"name": "ring"},
            "spec": {"minMember": 2, "queue": "default",
                     "networkTopology": {"mode": "hard", "highestTierAllowed": 1}}})
        for i in range(4):
            core_v1.create_namespaced_pod(namespace, gang_pod(f"ring-{i}", "ring", node_set.tag, cpu="15"))

        def ring() -> dict[str, str]:
            return {pod: node for pod, node in bound_pods(core_v1, namespace).items() if pod.startswith("ring-")}

        wait_for(lambda: len(ring()) >= 3, TIMEOUT, what="the minimum and the extra rack-x holds bind")
        cycles = len(running.results)
        wait_for(lambda: len(running.results) >= cycles + 5, TIMEOUT, what="five more scheduling cycles")
        placed = ring()
        assert len(placed) == 3 and set(placed.values()) == set(x_nodes), placed
        core_v1.delete_namespaced_pod("work-0", namespace, grace_period_seconds=0)
        wait_for(lambda: len(ring()) == 4, TIMEOUT, what="the last pod binds once rack-x has room")
        assert set(ring().values()) <= set(x_nodes) and not set(ring().values()) & set(y_nodes)
