"""binpack and nodeorder: which node a task goes to."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from scheduler.api.job import TaskInfo
from scheduler.api.node import NodeInfo
from scheduler.api.phases import TaskStatus
from scheduler.api.resources import GPU, Resource
from scheduler.framework.conf import SchedulerConf
from scheduler.plugins.nodeorder import balanced_allocation, least_requested
from scheduler.testing import cluster, conf_from_tiers


def conf(*second_tier: str | dict[str, Any]) -> SchedulerConf:
    return conf_from_tiers(("priority", "gang"), second_tier)


# ---- binpack -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PackCase:
    name: str
    conf: SchedulerConf
    small_on: str
    whole_fits: bool


PACK_CASES = [
    PackCase("with binpack, 1-GPU jobs fill the half-used node and an 8-GPU pod still fits on the empty one",
             conf("predicates", "binpack"), "n1", True),
    PackCase("with nodeorder and binpack.weight 10, GPUs are packed the same way",
             conf("predicates", "nodeorder", {"name": "binpack", "arguments": {"binpack.weight": 10}}),
             "n1", True),
    PackCase("GPUs are packed without being listed in binpack.resources",
             conf("predicates", {"name": "binpack", "arguments": {"binpack.resources": "example.com/foo"}}),
             "n1", True),
    PackCase("with nodeorder alone, 1-GPU jobs spread and the 8-GPU pod finds no node",
             conf("predicates", "nodeorder"), "n2", False),
    # With cpu packing on as well, Volcano's BalancedAllocation (which weighs GPUs in) scores both nodes alike
    # and cpu packing alone takes the small jobs to the used node; so cpu packing is off here too.
    PackCase("binpack.resources.nvidia.com/gpu 0 stops packing GPUs",
             conf("predicates", "nodeorder",
                  {"name": "binpack", "arguments": {"binpack.resources.nvidia.com/gpu": 0, "binpack.cpu": 0}}),
             "n2", False),
]


@pytest.mark.parametrize("case", PACK_CASES, ids=lambda c: c.name)
def test_binpack_keeps_a_whole_node_free(case: PackCase) -> None:
    c = cluster().node("n1", gpu=8).job("running", replicas=4, gpu=1)
    c.cycle(conf("predicates"))
    c.node("n2", gpu=8)
    for i in range(4):
        c.job(f"small-{i}", gpu=1)
    c.cycle(case.conf)
    assert {node for i in range(4) for node in c.sim.bound(f"small-{i}").values()} == {case.small_on}
    c.job("whole", gpu=8)
    c.cycle(case.conf)
    assert c.sim.bound("whole") == ({"whole-0": "n2"} if case.whole_fits else {})


# ---- nodeorder ---------------------------------------------------------------------------------------------
PREFER_NO_SCHEDULE = [{"key": "spot", "value": "true", "effect": "PreferNoSchedule"}]


def preferred(*terms: tuple[int, str, str]) -> dict[str, Any]:
    return {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": w, "preference": {"matchExpressions": [{"key": k, "operator": "In", "values": [v]}]}}
        for w, k, v in terms
    ]}}


@dataclass(frozen=True)
class OrderCase:
    name: str
    nodes: tuple[tuple[str, dict[str, Any]], ...]
    pod: dict[str, Any]
    expected: str | None
    arguments: dict[str, Any] = field(default_factory=dict)
    filler_cpu: str = ""  # a pod of this much cpu runs on n1 first


ORDER_CASES = [
    OrderCase("least requested picks the emptier node", (("n1", {}), ("n2", {})), {}, "n2", filler_cpu="32"),
    OrderCase("most requested picks the fuller node", (("n1", {}), ("n2", {})), {}, "n1",
              {"leastrequested.weight": 0, "mostrequested.weight": 1, "balancedresource.weight": 0},
              filler_cpu="32"),
    OrderCase("a PreferNoSchedule taint is avoided when another node fits",
              (("n1", {"taints": PREFER_NO_SCHEDULE}), ("n2", {})), {}, "n2"),
    OrderCase("a tolerated PreferNoSchedule taint is not avoided",
              (("n1", {"taints": PREFER_NO_SCHEDULE}), ("n2", {})),
              {"tolerations": [{"key": "spot", "operator": "Exists"}]}, "n1"),
    OrderCase("a PreferNoSchedule node is used when it is the only one that fits",
              (("n1", {"taints": PREFER_NO_SCHEDULE}), ("n2", {"gpu": 0})), {"gpu": 1}, "n1"),
    OrderCase("preferred node affinity is honoured",
              (("n1", {"labels": {"zone": "a"}}), ("n2", {"labels": {"zone": "b"}})),
              {"affinity": preferred((10, "zone", "b"))}, "n2"),
    OrderCase("the heavier preferred term wins",
              (("n1", {"labels": {"zone": "a"}}), ("n2", {"labels": {"zone": "b", "gpu": "h100"}})),
              {"affinity": preferred((80, "zone", "a"), (20, "gpu", "h100"))}, "n1"),
    OrderCase("preferred affinity outweighs a half-used node",
              (("n1", {"labels": {"zone": "b"}}), ("n2", {})),
              {"affinity": preferred((50, "zone", "b"))}, "n1", filler_cpu="32"),
    OrderCase("nodeaffinity.weight 0 ignores preferences",
              (("n1", {"labels": {"zone": "b"}}), ("n2", {})),
              {"affinity": preferred((50, "zone", "b"))}, "n2", {"nodeaffinity.weight": 0}, filler_cpu="32"),
]


@pytest.mark.parametrize("case", ORDER_CASES, ids=lambda c: c.name)
def test_nodeorder_picks_the_node(case: OrderCase) -> None:
    c = cluster()
    for name, kwargs in case.nodes:
        c.node(name, **{"gpu": 8, **kwargs})
    if case.filler_cpu:
        c.pod("filler", cpu=case.filler_cpu)
        c.sim.pods["default/filler"].manifest["spec"]["nodeName"] = "n1"
    c.job("j", **case.pod)
    c.cycle(conf("predicates", {"name": "nodeorder", "arguments": case.arguments}))
    assert c.sim.bound("j") == ({"j-0": case.expected} if case.expected else {})


# ---- kube-scheduler's formulas, as Volcano's nodeorder calls them ------------------------------------------
def _node(cpu: int, memory: int, gpu: int = 0, *held: Resource) -> NodeInfo:
    node = NodeInfo("n", Resource.of(cpu, memory, 110, {GPU: gpu} if gpu else None))
    for i, request in enumerate(held):
        node.add_task(TaskInfo(f"t{i}", f"held-{i}", "default", "default/held", request, status=TaskStatus.RUNNING))
    return node


GI = 1024**3


def test_balanced_allocation_scores_the_change_in_balance() -> None:
    """noderesources.balancedResourceScorer (k8s 1.36): 50 + (50 + balance after - balance before) / 2."""
    empty = _node(8000, 32 * GI)
    # A task that fills cpu and memory evenly keeps the balance: 75.
    assert balanced_allocation(Resource.of(2000, 8 * GI), empty) == 75
    # cpu 1/2 and memory 0: std 0.25, balance 75 after, 100 before -> 50 + (50 - 25) // 2 = 62.
    assert balanced_allocation(Resource.of(4000, 0), empty) == 62
    # A task that evens out a lopsided node raises the score above 75.
    lopsided = _node(8000, 32 * GI, 0, Resource.of(4000, 0))
    assert balanced_allocation(Resource.of(0, 16 * GI), lopsided) == 87  # balance 75 -> 100
    # GPUs count only for a task that asks for them, and a task asking for nothing scores 0.
    gpu_node = _node(8000, 32 * GI, 8000)
    assert balanced_allocation(Resource.of(2000, 8 * GI), gpu_node) == 75
    assert balanced_allocation(Resource.of(2000, 8 * GI, 1, {GPU: 2000}), gpu_node) == 75
    assert balanced_allocation(Resource.of(0, 0, 1), gpu_node) == 0


def test_least_requested_counts_a_task_without_requests_at_the_default() -> None:
    """schedutil.DefaultMilliCPURequest (100m) and DefaultMemoryRequest (200 MiB), for the task and the node."""
    node = _node(1000, 2000 * 1024 * 1024, 0, Resource.of(0, 0, 1))  # one best-effort pod already there
    # cpu: (1000 - 200) / 1000 -> 80; memory: (2000 - 400) MiB / 2000 MiB -> 80.
    assert least_requested(Resource.of(0, 0, 1), node) == 80
    assert node.no_cpu_request == node.no_memory_request == 1
