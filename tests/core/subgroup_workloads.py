"""Jobs with sub-groups (PodGroup `spec.subGroupPolicy`, as the job controller writes one per partitioned task)
on the in-memory cluster, and the check that each hard sub-group sits inside one domain of its tier."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scheduler.jobs.partitions import PARTITION_ID_KEY
from scheduler.solver.topology import Topology, from_hypernodes
from scheduler.testing import ClusterBuilder, pod_object

TASK_SPEC = "volcano.sh/task-spec"
# allocate with binpack and network-topology-aware (CP-SAT held to 100 ms on one worker); a test appends its own
# arguments to the plugin's (the last lines).
TOPOLOGY_CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: predicates
  - name: binpack
  - name: network-topology-aware
    arguments:
      solver.timeLimitMs: 100
      solver.workers: 1
"""


def partitioned_job(c: ClusterBuilder, name: str, *, partitions: int, size: int, min_partitions: int,
                    topology: Mapping[str, Any] | None = None, cpu: str = "1", master: int = 0,
                    min_member: int | None = None, job_topology: Mapping[str, Any] | None = None) -> ClusterBuilder:
    """A PodGroup and pods as the job controller makes them for a task `stage` with a partitionPolicy (and
    `master` pods of an unpartitioned task `master`)."""
    policy: dict[str, Any] = {
        "name": "stage", "subGroupSize": size, "minSubGroups": min_partitions,
        "labelSelector": {"matchLabels": {TASK_SPEC: "stage"}}, "matchLabelKeys": [PARTITION_ID_KEY],
    }
    if topology is not None:
        policy["networkTopology"] = dict(topology)
    minimum = master + (min_partitions or partitions) * size if min_member is None else min_member
    spec: dict[str, Any] = {"minMember": minimum, "queue": "default", "subGroupPolicy": [policy],
                            "minTaskMember": {"stage": (min_partitions or partitions) * size, "master": master}}
    if job_topology is not None:
        spec["networkTopology"] = dict(job_topology)
    c.sim.add_podgroup({"metadata": {"name": name, "namespace": "default"}, "spec": spec,
                        "status": {"phase": "Inqueue"}})
    for i in range(master):
        c.sim.add_pod(pod_object(f"{name}-master-{i}", group=name, role="master", cpu=cpu, memory="1Gi"))
    for i in range(partitions * size):
        pod = pod_object(f"{name}-stage-{i}", group=name, role="stage", cpu=cpu, memory="1Gi")
        pod["metadata"]["labels"][PARTITION_ID_KEY] = str(i // size)
        c.sim.add_pod(pod)
    return c


def racks(c: ClusterBuilder, layout: Sequence[Sequence[str]], *, cpu: str = "4") -> ClusterBuilder:
    """Nodes in tier-1 HyperNodes `rack<i>` (one per entry of `layout`), all under one tier-2 `spine`."""
    for index, nodes in enumerate(layout):
        for node in nodes:
            c.node(node, cpu=cpu, memory="64Gi")
        c.hypernode(f"rack{index}", 1, list(nodes))
    c.hypernode("spine", 2, [f"rack{i}" for i in range(len(layout))], kind="HyperNode")
    return c


def running(c: ClusterBuilder, name: str, node: str, cpu: str) -> None:
    pod = pod_object(name, cpu=cpu, memory="1Gi")
    pod["spec"]["nodeName"] = node
    pod["status"]["phase"] = "Running"
    c.sim.add_pod(pod)


def topology_of(c: ClusterBuilder) -> Topology:
    names = sorted(c.sim.nodes)
    return from_hypernodes(names, list(c.sim.hypernodes.values()))


def partitions_bound(c: ClusterBuilder, job: str) -> dict[str, list[str]]:
    """Per partition id, the nodes its bound pods are on."""
    out: dict[str, list[str]] = {}
    for pod in c.sim.pods_of(job):
        node = pod.manifest["spec"].get("nodeName")
        partition = pod.manifest["metadata"]["labels"].get(PARTITION_ID_KEY)
        if node and partition is not None:
            out.setdefault(partition, []).append(node)
    return out


def domains_spanned(topo: Topology, nodes: Sequence[str], tier: int) -> int:
    index = {n: i for i, n in enumerate(topo.node_names)}
    return len({int(topo.domain[tier, index[n]]) for n in nodes})
