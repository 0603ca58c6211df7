"""What a gang-eviction plan counts as room: a node's future idle (idle plus what pods already releasing free, less
what is pipelined, this plan's own tasks included), as Volcano's simulatePredicate asks of every node
(pkg/scheduler/actions/utils/simulate.go); a node's idle is not lowered by a pipelined task, so idle alone would
promise one node's room to two tasks."""

from __future__ import annotations

import pytest
from test_gang_evict import gang_conf, pod_object

from scheduler.testing import ClusterBuilder, cluster

CONF = gang_conf()


def pinned(c: ClusterBuilder, job: str, node: str, cpu: str, pc: str) -> None:
    c.sim.add_podgroup({"metadata": {"name": job, "namespace": "default"},
                        "spec": {"minMember": 1, "priorityClassName": pc}})
    c.sim.add_pod(pod_object(f"{job}-0", group=job, cpu=cpu, memory="1Gi", priority_class=pc,
                             node_selector={"kubernetes.io/hostname": node}))


def gang(c: ClusterBuilder, name: str, replicas: int, cpu: str) -> None:
    c.job(name, replicas=replicas, cpu=cpu, memory="1Gi", priority_class="high")


def base() -> ClusterBuilder:
    return cluster().priority_class("low", 10).priority_class("high", 1000)


def test_a_plan_never_promises_one_nodes_idle_room_twice() -> None:
    """a has 3 cpu idle, b 2 (and a 2-cpu low-priority pod), c 2. The gang asks 2 x 3 cpu: the sums hold it
    (3 + 2 + 2 + the victim's 2), but once one task is pipelined on a, no node holds the other, even with the
    victim gone: nothing is evicted (counting a's idle for both tasks, a plan evicted the victim in vain)."""
    c = base()
    for node in "abc":
        c.node(node, cpu="4", memory="64Gi")
    pinned(c, "peer-a", "a", "1", "high")
    pinned(c, "peer-b", "b", "2", "high")
    pinned(c, "low-b", "b", "2", "low")
    pinned(c, "peer-c", "c", "2", "high")
    c.cycle(CONF)
    gang(c, "g", 2, "3")
    for _ in range(3):
        c.cycle(CONF)
    assert c.sim.evicted == []
    assert c.sim.bound("g") == {}


@pytest.mark.parametrize("releasing", [True, False])
def test_room_already_being_released_is_counted(releasing: bool) -> None:
    """a's 4-cpu pod is already being deleted; b holds a 4-cpu low-priority pod. The gang (2 x 4 cpu) needs a's
    room and b's: only b's pod is evicted. Were a's pod not releasing (and of high priority), nothing would be."""
    c = base()
    for node in "ab":
        c.node(node, cpu="4", memory="64Gi")
    pinned(c, "going", "a", "4", "high")
    pinned(c, "low-b", "b", "4", "low")
    c.cycle(CONF)
    if releasing:
        c.sim.pods["default/going-0"].manifest["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    gang(c, "g", 2, "4")
    result = c.cycle(CONF)
    assert [e.task for e in result.evictions] == (["default/low-b-0"] if releasing else [])
