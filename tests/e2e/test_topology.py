"""HyperNode objects in the cluster drive the topology-aware gang placement (issues 4 and 7)."""

from __future__ import annotations

import pytest
from controlplane import wait_for
from inprocess import running_scheduler
from test_scheduler import GROUP, TIMEOUT, bound_pods, gang_pod

CONF = """actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: network-topology-aware
    arguments:
      solver.everyGang: true
"""


@pytest.fixture
def topology_scheduler(control_plane, tmp_path):
    with running_scheduler(control_plane, conf=CONF, conf_dir=tmp_path) as running:
        yield running.cache


def hypernode(name: str, members: list[str]) -> dict:
    return {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": name},
        "spec": {"tier": 1, "members": [{"type": "Node", "selector": {"exactMatch": {"name": m}}} for m in members]},
    }


def test_a_hard_mode_gang_stays_inside_one_hypernode(topology_scheduler, core_v1, custom, namespace, node_set):
    """Four 4-GPU nodes that share one rack label, split by HyperNodes into two tier-1 domains. The first
    domain has a GPU taken, so a hard-mode gang of 2 x 4 GPUs must take both nodes of the second; by labels
    alone any two free nodes would do."""
    nodes = [node_set(gpus=4) for _ in range(4)]
    tag = node_set.tag
    hypers = [hypernode(f"hn-{tag}-a", nodes[:2]), hypernode(f"hn-{tag}-b", nodes[2:])]
    for h in hypers:
        custom.create_cluster_custom_object("topology.volcano.sh", "v1alpha1", "hypernodes", h)
    try:
        wait_for(lambda: len(topology_scheduler.hypernodes.objects) >= 2, TIMEOUT, what="the cache sees HyperNodes")
        blocker = gang_pod("blocker", "blocker", tag, gpus=1)
        del blocker["metadata"]["annotations"]
        blocker["spec"]["nodeName"] = nodes[0]
        core_v1.create_namespaced_pod(namespace, blocker)
        custom.create_namespaced_custom_object(GROUP, "v1beta1", namespace, "podgroups", {
            "apiVersion": f"{GROUP}/v1beta1", "kind": "PodGroup", "metadata": {"name": "ring"},
            "spec": {"minMember": 2, "queue": "default",
                     "networkTopology": {"mode": "hard", "highestTierAllowed": 1}},
        })
        for i in range(2):
            core_v1.create_namespaced_pod(namespace, gang_pod(f"ring-{i}", "ring", tag, gpus=4))
        wait_for(lambda: {"ring-0", "ring-1"} <= set(bound_pods(core_v1, namespace)), TIMEOUT, what="the gang binds")
        assert {bound_pods(core_v1, namespace)[f"ring-{i}"] for i in range(2)} == set(nodes[2:])
    finally:
        for h in hypers:
            custom.delete_cluster_custom_object("topology.volcano.sh", "v1alpha1", "hypernodes", h["metadata"]["name"])


DEVICESHARE_CONF = """actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: deviceshare
"""


def test_a_gpu_pod_is_bound_with_the_card_it_was_given(control_plane, tmp_path, core_v1, namespace, node_set):
    """deviceshare's chosen card reaches the pod as volcano.sh/gpu-index before the pod is bound (the API
    takes only whole nvidia.com/gpu; shares use volcano.sh/gpu-memory, covered on the in-memory cluster)."""
    with running_scheduler(control_plane, conf=DEVICESHARE_CONF, conf_dir=tmp_path):
        node_set(gpus=2)
        pod = gang_pod("share", "share", node_set.tag)
        del pod["metadata"]["annotations"]
        pod["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": "1"}
        core_v1.create_namespaced_pod(namespace, pod)
        wait_for(lambda: "share" in bound_pods(core_v1, namespace), TIMEOUT, what="the share binds")
        annotations = core_v1.read_namespaced_pod("share", namespace).metadata.annotations or {}
        assert annotations.get("volcano.sh/gpu-index") in ("0", "1")
        assert "volcano.sh/predicate-time" in annotations
