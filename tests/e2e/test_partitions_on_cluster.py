"""A Volcano Job with a partitionPolicy on the real control plane: the job controller writes the PodGroup's
subGroupPolicy and labels each pod with its partition (pkg/controllers/job/job_controller_actions.go,
job_controller_util.go), and the scheduler keeps each partition in hard mode inside one tier-1 HyperNode
(pkg/scheduler/actions/allocate/allocate.go allocateForSubJob)."""

from __future__ import annotations

from controlplane import GPU_RESOURCE, wait_for
from test_webhook import BATCH, job as webhook_job, refusal, webhook
from vcjob_cluster import SCHED, TIMEOUT, pods_of, task, vcjob_cluster

__all__ = ["vcjob_cluster", "webhook"]  # fixtures the tests below use, defined in those modules

TOPOLOGY = "topology.volcano.sh"


def hypernode(name: str, members: list[str]) -> dict:
    return {"apiVersion": f"{TOPOLOGY}/v1alpha1", "kind": "HyperNode", "metadata": {"name": name},
            "spec": {"tier": 1, "members": [{"type": "Node", "selector": {"exactMatch": {"name": m}}}
                                            for m in members]}}


def blocker(name: str, node: str) -> dict:
    """A running pod that leaves its node 1 GPU and 4 cpu: binpack then prefers that node."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"nodeName": node, "terminationGracePeriodSeconds": 0, "containers": [{
                "name": "main", "image": "busybox",
                "resources": {"requests": {"cpu": "12", "memory": "64Mi"}, "limits": {GPU_RESOURCE: "1"}}}]}}


def test_each_hard_partition_of_a_job_lands_inside_one_hypernode(vcjob_cluster, core_v1, custom, namespace):
    """Four 2-GPU nodes in two tier-1 HyperNodes; the first node of each has a GPU and most of its cpu taken, so
    binpack pod by pod would put a partition's two pods on those two nodes, one in each HyperNode. Each
    partition must instead take two GPUs inside one HyperNode."""
    nodes = vcjob_cluster.nodes(4, gpus=2)
    tag = vcjob_cluster.tag
    hypers = [hypernode(f"rack-{tag}-a", nodes[:2]), hypernode(f"rack-{tag}-b", nodes[2:])]
    for h in hypers:
        custom.create_cluster_custom_object(TOPOLOGY, "v1alpha1", "hypernodes", h)
    try:
        for i, node in ((0, nodes[0]), (1, nodes[2])):
            core_v1.create_namespaced_pod(namespace, blocker(f"busy-{i}", node))
        stage = task("stage", 4)
        stage["partitionPolicy"] = {"totalPartitions": 2, "partitionSize": 2, "minPartitions": 2,
                                    "networkTopology": {"mode": "hard", "highestTierAllowed": 1}}
        vcjob_cluster.job("pipe", "default", [stage], 4)

        def podgroup() -> dict | None:
            groups = custom.list_namespaced_custom_object(SCHED, "v1beta1", namespace, "podgroups")["items"]
            return next((g for g in groups if g["metadata"]["name"].startswith("pipe-")), None)

        pg = wait_for(podgroup, TIMEOUT, what="the job's PodGroup")
        assert pg["spec"]["subGroupPolicy"] == [{
            "name": "stage", "subGroupSize": 2, "minSubGroups": 2,
            "labelSelector": {"matchLabels": {"volcano.sh/task-spec": "stage"}},
            "matchLabelKeys": ["volcano.sh/partition-id"],
            "networkTopology": {"mode": "hard", "highestTierAllowed": 1}}]
        assert pg["spec"]["minTaskMember"] == {"stage": 4}

        def bound() -> dict[str, list[str]] | None:
            pods = pods_of(core_v1, namespace, "pipe")
            placed = [p for p in pods if p["spec"].get("nodeName")]
            if len(placed) < 4:
                return None
            out: dict[str, list[str]] = {}
            for p in placed:
                out.setdefault(p["metadata"]["labels"]["volcano.sh/partition-id"], []).append(p["spec"]["nodeName"])
            return out

        partitions = wait_for(bound, TIMEOUT, interval=0.2, what="the job's 4 pods bound")
        labels = {p["metadata"]["name"]: p["metadata"]["labels"]["volcano.sh/partition-id"]
                  for p in pods_of(core_v1, namespace, "pipe")}
        assert labels == {"pipe-stage-0": "0", "pipe-stage-1": "0", "pipe-stage-2": "1", "pipe-stage-3": "1"}
        racks = {n: "a" for n in nodes[:2]} | {n: "b" for n in nodes[2:]}
        assert {p: len({racks[n] for n in where}) for p, where in partitions.items()} == {"0": 1, "1": 1}
        assert {racks[where[0]] for where in partitions.values()} == {"a", "b"}
    finally:
        for h in hypers:
            custom.delete_cluster_custom_object(TOPOLOGY, "v1alpha1", "hypernodes", h["metadata"]["name"])


def test_the_apiserver_refuses_a_bad_partition_policy_naming_the_field(webhook, custom, namespace) -> None:
    """Volcano's validatePartitionPolicy (pkg/webhooks/admission/jobs/validate/admit_job.go) through the
    apiserver: replicas must be totalPartitions x partitionSize, minAvailable minPartitions x partitionSize, and a
    partition's networkTopology may not name both a tier and a tier name."""
    queue = f"open-{namespace[-6:]}"
    custom.create_cluster_custom_object(SCHED, "v1beta1", "queues", {
        "apiVersion": f"{SCHED}/v1beta1", "kind": "Queue", "metadata": {"name": queue}, "spec": {"weight": 1}})
    custom.patch_cluster_custom_object_status(SCHED, "v1beta1", "queues", queue, {"status": {"state": "Open"}})

    def create(name: str, replicas: int, policy: dict, **extra) -> tuple[int, str] | None:
        body = webhook_job(name, queue, replicas)
        body["spec"]["tasks"][0].update(partitionPolicy=policy, **extra)
        return refusal(lambda: custom.create_namespaced_custom_object(BATCH, "v1alpha1", namespace, "jobs", body))

    try:
        probes = iter(range(10_000))
        wait_for(lambda: create(f"probe-{next(probes)}", 5, {"totalPartitions": 2, "partitionSize": 2}) is not None,
                 TIMEOUT, what="the apiserver calling the webhook")
        assert create("uneven", 5, {"totalPartitions": 2, "partitionSize": 2}) == (400, "spec.tasks[0].replicas")
        assert create("short", 4, {"totalPartitions": 2, "partitionSize": 2, "minPartitions": 1},
                      minAvailable=3) == (400, "spec.tasks[0].minAvailable")
        both = {"totalPartitions": 2, "partitionSize": 2,
                "networkTopology": {"mode": "hard", "highestTierAllowed": 1, "highestTierName": "rack"}}
        assert create("both", 4, both) == (400, "spec.tasks[0].partitionPolicy.networkTopology")
        assert create("good", 4, {"totalPartitions": 2, "partitionSize": 2, "minPartitions": 1}) is None
        made = custom.get_namespaced_custom_object(BATCH, "v1alpha1", namespace, "jobs", "good")
        assert made["spec"]["tasks"][0]["minAvailable"] == 2  # the mutating webhook: minPartitions x partitionSize
    finally:
        custom.delete_cluster_custom_object(SCHED, "v1beta1", "queues", queue)
