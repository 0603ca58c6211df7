"""binpack and nodeorder: which node a task goes to."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from scheduler.framework.conf import SchedulerConf
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
    PackCase("binpack.resources.nvidia.com/gpu 0 stops packing GPUs (cpu still packs toward the used node)",
             conf("predicates", "nodeorder",
                  {"name": "binpack", "arguments": {"binpack.resources.nvidia.com/gpu": 0}}), "n2", False),
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
