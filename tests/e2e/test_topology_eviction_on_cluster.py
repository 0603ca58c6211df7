"""Gang eviction for a job with sub-groups on the real control plane: a high-priority PodGroup whose one partition
must sit inside one tier-1 HyperNode preempts low-priority pods of one rack only, and its pods bind there
(Volcano's gangpreempt with BuildNominationPlanInDomain, pkg/scheduler/actions/utils/simulate.go; the scheduler
in-process, under Volcano's gang-eviction conf with network-topology-aware)."""

from __future__ import annotations

import json
import uuid

from controlplane import assert_no_overcommit, wait_for
from inprocess import running_scheduler
from kubernetes import client
from test_scheduler import GROUP, TIMEOUT, bound_pods, gang_pod

REPO_CONF = """actions: "allocate, backfill, gangreclaim, gangpreempt"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: capacity
  - name: nodeorder
  - name: binpack
  - name: network-topology-aware
"""
TOPOLOGY = "topology.volcano.sh"
PARTITION = "volcano.sh/partition-id"
TASK_SPEC = "volcano.sh/task-spec"


def hypernode(name: str, members: list[str]) -> dict:
    return {"apiVersion": f"{TOPOLOGY}/v1alpha1", "kind": "HyperNode", "metadata": {"name": name},
            "spec": {"tier": 1, "members": [{"type": "Node", "selector": {"exactMatch": {"name": m}}}
                                            for m in members]}}


def group(name: str, minimum: int, priority_class: str, **spec) -> dict:
    return {"apiVersion": f"{GROUP}/v1beta1", "kind": "PodGroup", "metadata": {"name": name},
            "spec": {"minMember": minimum, "queue": "default", "priorityClassName": priority_class, **spec}}


def pod(name: str, pg: str, tag: str, gpus: int, priority_class: str, node: str | None = None,
        labels: dict[str, str] | None = None) -> dict:
    out = gang_pod(name, pg, tag, gpus=gpus)
    out["spec"]["priorityClassName"] = priority_class
    out["spec"]["terminationGracePeriodSeconds"] = 0
    if node:
        out["spec"]["nodeName"] = node
    if labels:
        out["metadata"]["labels"] = labels
    return out


def live_pods(core_v1, namespace: str) -> dict[str, str]:
    """name -> node of the pods not being deleted."""
    raw = json.loads(core_v1.list_namespaced_pod(namespace, _preload_content=False).data)["items"]
    return {p["metadata"]["name"]: p["spec"].get("nodeName") or "" for p in raw
            if not p["metadata"].get("deletionTimestamp")}


def test_a_hard_rack_partition_preempts_low_priority_pods_of_one_rack_only(
        control_plane, tmp_path, custom, core_v1, namespace, node_set):
    """Four 2-GPU nodes, a0 a1 in rack a and b0 b1 in rack b. Low-priority one-pod gangs hold a0 and a1 (2 GPUs
    each); a peer of the preemptor's priority holds 1 GPU of b1, and b0 is free. `high` asks one partition of
    two 2-GPU pods inside one rack. Rack b holds it only split; evicting a0's pod alone would hold it only split
    with b0. So both of rack a's low pods go, nothing in rack b, and high's two pods bind in rack a. Without
    gang eviction for sub-grouped jobs nothing is evicted and high never runs."""
    a0, a1, b0, b1 = (node_set(gpus=2) for _ in range(4))
    tag = node_set.tag
    racks = [hypernode(f"rack-a-{tag}", [a0, a1]), hypernode(f"rack-b-{tag}", [b0, b1])]
    scheduling = client.SchedulingV1Api(core_v1.api_client)
    low, high = f"low-{uuid.uuid4().hex[:6]}", f"high-{uuid.uuid4().hex[:6]}"
    for name, value in ((low, 10), (high, 1000)):
        scheduling.create_priority_class({"metadata": {"name": name}, "value": value})
    for h in racks:
        custom.create_cluster_custom_object(TOPOLOGY, "v1alpha1", "hypernodes", h)
    try:
        for name, node in (("low-a0", a0), ("low-a1", a1)):
            custom.create_namespaced_custom_object(GROUP, "v1beta1", namespace, "podgroups", group(name, 1, low))
            core_v1.create_namespaced_pod(namespace, pod(f"{name}-0", name, tag, 2, low, node))
        custom.create_namespaced_custom_object(GROUP, "v1beta1", namespace, "podgroups", group("peer", 1, high))
        core_v1.create_namespaced_pod(namespace, pod("peer-0", "peer", tag, 1, high, b1))
        with running_scheduler(control_plane, conf=REPO_CONF, conf_dir=tmp_path) as running:
            wait_for(lambda: len(running.cache.hypernodes.objects) >= 2, TIMEOUT, what="the cache sees the HyperNodes")
            policy = {"name": "stage", "subGroupSize": 2, "minSubGroups": 1,
                      "labelSelector": {"matchLabels": {TASK_SPEC: "stage"}}, "matchLabelKeys": [PARTITION],
                      "networkTopology": {"mode": "hard", "highestTierAllowed": 1}}
            custom.create_namespaced_custom_object(GROUP, "v1beta1", namespace, "podgroups",
                                                   group("high", 2, high, subGroupPolicy=[policy]))
            for i in range(2):
                core_v1.create_namespaced_pod(namespace, pod(f"high-{i}", "high", tag, 2, high,
                                                             labels={TASK_SPEC: "stage", PARTITION: "0"}))
            placed = wait_for(lambda: (b := bound_pods(core_v1, namespace)) and {"high-0", "high-1"} <= set(b) and b,
                              TIMEOUT, interval=0.2, what="high's two pods bound")
            assert {placed["high-0"], placed["high-1"]} == {a0, a1}, placed
            left = live_pods(core_v1, namespace)
            assert "low-a0-0" not in left and "low-a1-0" not in left, left
            assert left["peer-0"] == b1
            evicted = {e.task.split("/", 1)[1] for r in running.results for e in r.evictions}
            assert evicted == {"low-a0-0", "low-a1-0"}, evicted
            assert all(e.cause is not None and e.cause.action == "gangpreempt"
                       for r in running.results for e in r.evictions)
        assert_no_overcommit(core_v1)
    finally:
        for h in racks:
            custom.delete_cluster_custom_object(TOPOLOGY, "v1alpha1", "hypernodes", h["metadata"]["name"])
        for name in (low, high):
            scheduling.delete_priority_class(name)

