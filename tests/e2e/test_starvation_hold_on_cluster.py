"""The starvation guard's held idle room on the real apiserver (issue 35, `starvationHoldIdle`): while a gang that
waited past the threshold reserves two nodes, a pod that fits their free GPUs stays pending; when the nodes' own
pods go, the gang binds whole there.

2 kwok nodes of 8 GPUs, each running one 5-GPU pod of `resident` (3 GPUs free on each). `big` (2 pods x 8 GPUs,
minAvailable 2) waits past the 2 s threshold and reserves both nodes. `small` (one 3-GPU pod) then arrives: without
the hold it would bind beside the reservation (tests/preemption/test_starvation.py has both sides on the simulator).
No queue limit in the conf (no proportion, no overcommit), so nothing but the hold keeps `small` out.
"""

from __future__ import annotations

import pytest
from controlplane import GPU_RESOURCE, wait_for
from vcjob_cluster import BATCH, TIMEOUT, podgroup_of, pods_of, task, vcjob_cluster, wait_running

from scheduler.testing import conf_text_from_tiers

__all__ = ["vcjob_cluster"]  # the fixture
CONF = conf_text_from_tiers(["priority", "gang", "conformance"], ["drf", "predicates", "nodeorder"],
                            actions="enqueue, allocate, backfill",
                            configurations={"allocate": {"starvationThresholdSeconds": 2,
                                                         "starvationHoldIdle": "10m"}})


def gpu_task(name: str, replicas: int, gpus: int) -> dict:
    made = task(name, replicas)
    made["template"]["spec"]["containers"][0]["resources"]["limits"][GPU_RESOURCE] = str(gpus)
    return made


def unschedulable_message(custom, namespace: str, job: str) -> str:
    """The message of the `Unschedulable` condition the scheduler wrote on the job's PodGroup ("" if none)."""
    pg = podgroup_of(custom, namespace, job)
    conditions = ((pg or {}).get("status") or {}).get("conditions") or ()
    return next((c.get("message") or "" for c in conditions
                 if c.get("type") == "Unschedulable" and c.get("status") == "True"), "")


@pytest.mark.scheduler_conf(CONF)
def test_a_reserving_gangs_nodes_keep_their_free_gpus_for_it_until_it_binds_whole(
    vcjob_cluster, core_v1, custom, namespace
):
    nodes = vcjob_cluster.nodes(2, gpus=8)
    queue = vcjob_cluster.queue("hold")
    vcjob_cluster.job("resident", queue, [gpu_task("worker", 2, 5)], 2)
    assert sorted(wait_running(core_v1, namespace, "resident", 2).values()) == sorted(nodes)

    vcjob_cluster.job("big", queue, [gpu_task("worker", 2, 8)], 2)
    reserving = wait_for(lambda: (m := unschedulable_message(custom, namespace, "big")) and "reserving" in m and m,
                         TIMEOUT, interval=0.2, what="big reserving both nodes")
    assert "reserving resources on 2 nodes" in reserving and "2 of its nodes keep their free resources" in reserving

    vcjob_cluster.job("small", queue, [gpu_task("worker", 1, 3)], 1)
    # a cycle looked at small while big reserved: small is bound (no hold) or its PodGroup says why it waits
    def looked_at() -> tuple[list[str | None], str] | None:
        where = [p["spec"].get("nodeName") for p in pods_of(core_v1, namespace, "small")]
        message = unschedulable_message(custom, namespace, "small")
        return (where, message) if any(where) or message else None

    where, message = wait_for(looked_at, TIMEOUT, interval=0.2, what="a cycle to place or hold small")
    assert where == [None], f"small took a reserved node's free GPUs: {where}"
    assert "nvidia.com/gpu" in message, message

    custom.delete_namespaced_custom_object(BATCH, "v1alpha1", namespace, "jobs", "resident",
                                           body={"propagationPolicy": "Background"})
    big = wait_running(core_v1, namespace, "big", 2)
    assert sorted(big.values()) == sorted(nodes), "the gang bound whole on the nodes it reserved"
    assert [p["spec"].get("nodeName") for p in pods_of(core_v1, namespace, "small")] == [None]
