"""`--pipeline-apply` on a real kube-apiserver: gangs arriving in waves onto two small nodes, the first ones
deleted as they bind, so cycles compute while the last cycle's binds and status writes are still out. Every gang
binds whole, no node is ever over-committed, and every bound gang's PodGroup ends Running with a `Scheduled` event
per pod (tests/cache/test_pipelined_apply.py checks the ordering rules on test doubles)."""

from __future__ import annotations

from controlplane import assert_no_overcommit, create_gpu_node, delete_node_and_pods, node_is_ready, wait_for
from inprocess import running_scheduler
from test_scheduler import GROUP, NODE_SET, bound_pods, gang_pod, pg_status, podgroup

TIMEOUT = 60
WAVES, PER_WAVE = 3, 5  # gangs of 2 pods of 500m: the two nodes of 2 CPUs hold 4 gangs at a time


def live_gangs(bound: dict[str, str]) -> dict[str, int]:
    """Gang -> how many of its pods are bound."""
    out: dict[str, int] = {}
    for pod in bound:
        gang = pod.rsplit("-", 1)[0]
        out[gang] = out.get(gang, 0) + 1
    return out


def test_gangs_in_waves_bind_whole_without_overcommit_with_the_apply_pipelined(control_plane, core_v1, custom,
                                                                                namespace, node_set):
    tag = node_set.tag
    nodes = [f"pipe-{tag}-{i}" for i in range(2)]
    for name in nodes:
        create_gpu_node(core_v1, name, gpus=0, cpu="2", labels={NODE_SET: tag})
    try:
        for name in nodes:
            wait_for(lambda n=name: node_is_ready(core_v1, n), TIMEOUT, what=f"node {name} Ready")
        made: list[str] = []
        deleted: set[str] = set()
        with running_scheduler(control_plane, pipeline=True) as scheduler:
            for wave in range(WAVES):
                for g in range(wave * PER_WAVE, (wave + 1) * PER_WAVE):
                    custom.create_namespaced_custom_object(GROUP, "v1beta1", namespace, "podgroups",
                                                           podgroup(f"g{g}", 2))
                    for i in range(2):
                        core_v1.create_namespaced_pod(namespace, gang_pod(f"g{g}-{i}", f"g{g}", tag, cpu="500m"))
                    made.append(f"g{g}")
                # the nodes full: 4 gangs bound, whole, the fifth waiting
                bound = wait_for(lambda: len(bound_pods(core_v1, namespace)) == 8 and bound_pods(core_v1, namespace),
                                 TIMEOUT, what=f"wave {wave}: the nodes full")
                assert_no_overcommit(core_v1)
                assert set(live_gangs(bound).values()) == {2}, f"a gang bound in part: {bound}"
                for gang in live_gangs(bound):
                    wait_for(lambda gang=gang: pg_status(custom, namespace, gang).get("phase") == "Running",
                             TIMEOUT, what=f"PodGroup {gang} Running")
                    for i in range(2):  # done: its room is free for the next cycles
                        core_v1.delete_namespaced_pod(f"{gang}-{i}", namespace, grace_period_seconds=0)
                    deleted.add(gang)
            left = [g for g in made if g not in deleted]
            bound = wait_for(lambda: {f"{g}-{i}" for g in left for i in range(2)} <= set(bound_pods(core_v1, namespace))
                             and bound_pods(core_v1, namespace), TIMEOUT, what="the gangs left bound")
            assert_no_overcommit(core_v1)
            keys = {f"{namespace}/{g}-{i}" for g in made for i in range(2)}
            assert [k for k in keys if len(scheduler.bind_cycles({k})) != 1] == [], "a pod decided by two cycles"
    finally:
        for name in nodes:
            delete_node_and_pods(core_v1, name)
