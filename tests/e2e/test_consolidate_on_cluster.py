"""Consolidation on the real apiserver (issue 35): a 16-GPU gang whose free GPUs are scattered over half-used
nodes is placed after the `consolidate` action moves two opted-in jobs; each moved job runs whole again on the
node its plan held for it, and a job that arrives meanwhile takes none of the held room.

4 kwok nodes of 8 GPUs; four Volcano Jobs of one 4-GPU pod each, marked `volcano-py.io/movable: "true"`, one per
node (created one after the other under a spreading conf: nodeorder without binpack). Then `big` (2 pods x 8
GPUs, minAvailable 2) arrives: 16 GPUs are free, no node has 8. The scheduler and the Job controller run as
processes; the Job controller recreates each evicted pod (PodEvicted -> SyncJob, as Volcano's).
"""

from __future__ import annotations

import pytest
from controlplane import GPU_RESOURCE, wait_for
from vcjob_cluster import TIMEOUT, pods_of, scheduler_events, task, vcjob_cluster, wait_running

from scheduler.actions.movable import MOVABLE
from scheduler.api.evictions import POD_CAUSE, read_cause
from scheduler.testing import conf_text_from_tiers

__all__ = ["vcjob_cluster"]  # the fixture
CONF = conf_text_from_tiers(["priority", "gang", "conformance"], ["drf", "predicates", "proportion", "nodeorder"],
                            actions="enqueue, allocate, consolidate, backfill",
                            configurations={"allocate": {"starvationThresholdSeconds": -1}})
GATE = "volcano-py.test/hold-back"


def gpu_task(name: str, replicas: int, gpus: int, *, movable: bool = False, gated: bool = False) -> dict:
    made = task(name, replicas, annotations={MOVABLE: "true"} if movable else None)
    made["template"]["spec"]["containers"][0]["resources"]["limits"][GPU_RESOURCE] = str(gpus)
    if gated:
        made["template"]["spec"]["schedulingGates"] = [{"name": GATE}]
    return made


def moves(core_v1, namespace: str) -> dict[str, str]:
    """victim pod name -> the node its move holds for it, from the scheduler's Evict events' causes."""
    out = {}
    for event in scheduler_events(core_v1, namespace, "Evict"):
        read = read_cause(((event.get("metadata") or {}).get("annotations") or {}).get(POD_CAUSE))
        if read is not None and read[0].action == "consolidate":
            out[read[1].split("/")[-1]] = read[0].rule.split(" to ")[1].split(" ")[0]
    return out


def where_all(core_v1, namespace: str) -> dict[str, tuple[str | None, str | None]]:
    """Every pod of the namespace: (its node, its phase), with a deleting pod marked."""
    pods = core_v1.list_namespaced_pod(namespace).items
    return {p.metadata.name + (" (deleting)" if p.metadata.deletion_timestamp else ""): (p.spec.node_name,
                                                                                      p.status.phase) for p in pods}


def consolidate_lines(log_text: str) -> list[str]:
    """The scheduler's log lines about holds and moves."""
    return [line for line in log_text.splitlines() if "consolidate" in line or "held" in line][-12:]


@pytest.mark.scheduler_conf(CONF)
def test_a_16_gpu_gang_is_placed_after_consolidation_and_the_moved_jobs_run_whole_on_their_held_nodes(
    vcjob_cluster, core_v1, namespace
):
    nodes = vcjob_cluster.nodes(4, gpus=8)
    queue = vcjob_cluster.queue("consolidate")
    placed: dict[str, str] = {}
    for i in range(4):
        vcjob_cluster.job(f"small{i}", queue, [gpu_task("worker", 1, 4, movable=True)], 1)
        placed.update(wait_running(core_v1, namespace, f"small{i}", 1))
    assert sorted(placed.values()) == sorted(nodes), "one small job per node: the free GPUs are scattered"
    vcjob_cluster.job("intruder", queue, [gpu_task("worker", 1, 4, gated=True)], 1)
    intruder = wait_for(lambda: pods_of(core_v1, namespace, "intruder"), TIMEOUT, interval=0.2,
                        what="the intruder's pod, held back by a scheduling gate")[0]["metadata"]["name"]

    vcjob_cluster.job("big", queue, [gpu_task("worker", 2, 8)], 2)
    moved = wait_for(lambda: (m := moves(core_v1, namespace)) and len(m) == 2 and m, TIMEOUT, interval=0.2,
                     what="two consolidate evictions")
    # the intruder (one 4-GPU pod, exactly a held room) may be placed from now on: the held rooms must stay free
    core_v1.patch_namespaced_pod(intruder, namespace, [{"op": "remove", "path": "/spec/schedulingGates"}])

    big = wait_running(core_v1, namespace, "big", 2)
    moved_jobs = {name.rsplit("-", 2)[0] for name in moved}
    assert len(moved_jobs) == 2
    for job in moved_jobs:  # each moved job runs whole again, on the node its plan held for it
        try:
            again = wait_running(core_v1, namespace, job, 1)
        except AssertionError as exc:  # say where everything is: a hold lost, or a pod never recreated
            raise AssertionError(f"{exc}; pods: {where_all(core_v1, namespace)}; the scheduler said: "
                                 f"{consolidate_lines(vcjob_cluster.scheduler_log())}") from exc
        pod = pods_of(core_v1, namespace, job)[0]
        assert pod["metadata"]["name"] in moved and set(again.values()) == {moved[pod["metadata"]["name"]]}
    assert not set(big.values()) & set(moved.values()), "big went where the moved jobs were, not their new room"
    intruder_pod = pods_of(core_v1, namespace, "intruder")[0]
    assert not intruder_pod["spec"].get("nodeName"), "nothing else took the held room"
