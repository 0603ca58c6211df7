"""`network-topology-aware` through full scheduling cycles on the in-memory cluster."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from scheduler.api.reasons import Reason, TopologyLimit
from scheduler.api.resources import GPU
from scheduler.cycle import conf_from_text
from scheduler.framework.conf import SchedulerConf
from scheduler.framework.session import Session
from scheduler.plugins.registry import PLUGINS
from scheduler.testing import ClusterBuilder, cluster, pod_object

BASE = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: predicates
  - name: binpack
"""
TOPOLOGY = BASE + """  - name: network-topology-aware
    arguments:
      solver.everyGang: true
      solver.timeLimitMs: 2000
      solver.workers: 1
"""
VOLCANOS = TOPOLOGY.replace("      solver.everyGang: true\n", "")  # the plugin's default: Volcano's rule


def conf(text: str) -> SchedulerConf:
    return conf_from_text(text, source="test")


def rack(name: str, zone: str = "z", nvlink: str | None = None) -> dict[str, str]:
    labels = {"volcano.sh/rack": name, "topology.kubernetes.io/zone": zone}
    if nvlink:
        labels["volcano.sh/nvlink-domain"] = nvlink
    return labels


def gang(c: ClusterBuilder, name: str, roles: Mapping[str, tuple[int, int]],
         topology: Mapping[str, Any] | None = None, **pod: Any) -> ClusterBuilder:
    """A PodGroup with pods `<name>-<role>-<i>`; roles map to (replicas, GPUs per pod)."""
    spec: dict[str, Any] = {"minMember": sum(n for n, _ in roles.values()), "queue": "default"}
    if topology:
        spec["networkTopology"] = dict(topology)
    c.sim.add_podgroup({"metadata": {"name": name}, "spec": spec, "status": {"phase": "Inqueue"}})
    for role, (replicas, gpus) in roles.items():
        for i in range(replicas):
            c.sim.add_pod(pod_object(f"{name}-{role}-{i}", group=name, role=role, gpu=gpus, **pod))
    return c


def running(c: ClusterBuilder, name: str, node: str, card: str | None = None, **pod: Any) -> ClusterBuilder:
    """A pod already running on `node` (on GPU card `card`)."""
    obj = pod_object(name, **pod)
    obj["spec"]["nodeName"] = node
    if card is not None:
        obj["metadata"]["annotations"]["volcano.sh/gpu-index"] = card
    obj["status"]["phase"] = "Running"
    c.sim.add_pod(obj)
    return c


@dataclass(frozen=True)
class Case:
    name: str
    build: Callable[[], ClusterBuilder]
    bound_with_solver: Mapping[str, str] | Callable[[Mapping[str, str]], bool]
    bound_without: int  # pods the pod-by-pod allocate binds with the same conf minus the plugin
    reason: Reason | None = field(default=None)  # a reason the solver publishes on the PodGroup


def mixed_roles() -> ClusterBuilder:
    c = cluster().node("n0", gpu=5, labels=rack("a")).node("n1", gpu=3, labels=rack("a"))
    return gang(c, "g", {"a": (1, 2), "b": (2, 3)})


def fragments_in_two_racks() -> ClusterBuilder:
    c = cluster().node("a0", gpu=2, labels=rack("a")).node("b0", gpu=2, labels=rack("b"))
    c.node("c0", gpu=8, labels=rack("c"))
    return gang(c, "g", {"w": (4, 2)})


def two_nvlink_domains() -> ClusterBuilder:
    c = cluster()
    for name, domain in (("n0", "x"), ("n1", "y"), ("n2", "y"), ("n3", "x")):
        c.node(name, gpu=4, labels=rack("a", nvlink=domain))
    return gang(c, "g", {"w": (2, 4)})


def split_racks(mode: str) -> Callable[[], ClusterBuilder]:
    def build() -> ClusterBuilder:
        c = cluster().node("a0", gpu=4, labels=rack("a")).node("a1", gpu=2, labels=rack("a"))
        c.node("b0", gpu=4, labels=rack("b"))
        return gang(c, "g", {"w": (2, 4)}, {"mode": mode, "highestTierAllowed": 2})
    return build


def one_nvlink_domain(bound: Mapping[str, str]) -> bool:
    return set(bound.values()) in ({"n0", "n3"}, {"n1", "n2"})


CASES = [
    Case("roles of different shapes that pod-by-pod allocation strands are all bound by the solver",
         mixed_roles, lambda b: b["g-a-0"] == "n0" and {b["g-b-0"], b["g-b-1"]} == {"n0", "n1"}, 0),
    Case("a gang that fits one node goes there instead of fragments in other racks",
         fragments_in_two_racks, {f"g-w-{i}": "c0" for i in range(4)}, 4),
    Case("a gang is kept inside one NVLink domain when one holds it", two_nvlink_domains, one_nvlink_domain, 2),
    Case("hard mode leaves a gang pending, saying why, rather than spanning racks", split_racks("hard"), {}, 2,
         TopologyLimit(tier=2, domain="rack", resource=GPU, needed=8_000, best=6_000, usable=4_000,
                       best_domain="zone:z/rack:a")),
    Case("soft mode spans racks when it must", split_racks("soft"), {"g-w-0": "a0", "g-w-1": "b0"}, 2),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_gang_placement_through_a_cycle(case: Case) -> None:
    c = case.build()
    c.cycle(conf(TOPOLOGY))
    bound = c.sim.bound("g")
    if callable(case.bound_with_solver):
        assert case.bound_with_solver(bound), bound
    else:
        assert bound == dict(case.bound_with_solver)
    if case.reason:
        decision = c.sim.decision("g")
        assert decision is not None and case.reason in decision.reasons, decision
        assert decision.plugin == "gang" and c.sim.condition("g") is not None
    plain = case.build()
    plain.cycle(conf(BASE))
    assert len(plain.sim.bound("g")) == case.bound_without


def test_single_pods_and_gangs_past_the_cycle_budget_are_left_to_pod_by_pod_allocation() -> None:
    text = TOPOLOGY.replace("solver.timeLimitMs: 2000", "solver.cycleBudgetMs: 0")
    c = cluster().node("n0", gpu=5, labels=rack("a")).node("n1", gpu=3, labels=rack("a"))
    gang(c, "g", {"a": (1, 2), "b": (2, 3)})
    c.job("single", replicas=1, gpu=1)
    c.cycle(conf(text))
    assert c.sim.bound("g") == {}  # the budget is spent: pod by pod, which strands capacity
    assert len(c.sim.bound("single")) == 1


HYPERNODES = TOPOLOGY + """      topology.hypernodes:
      - metadata: {name: s0}
        spec:
          tier: 1
          members:
          - {type: Node, selector: {exactMatch: {name: n0}}}
          - {type: Node, selector: {regexMatch: {pattern: "^n3$"}}}
      - metadata: {name: s1}
        spec: {tier: 1, members: [{type: Node, selector: {regexMatch: {pattern: "^n[12]$"}}}]}
      - metadata: {name: spine}
        spec:
          tier: 2
          members:
          - {type: HyperNode, selector: {exactMatch: {name: s0}}}
          - {type: HyperNode, selector: {exactMatch: {name: s1}}}
"""


def test_hypernodes_define_the_tiers_when_given_and_hard_mode_keeps_the_gang_in_one() -> None:
    c = cluster()
    for name in ("n0", "n1", "n2", "n3"):
        c.node(name, gpu=4)
    gang(c, "g", {"w": (2, 4)}, {"mode": "hard", "highestTierAllowed": 1})
    c.cycle(conf(HYPERNODES))
    assert set(c.sim.bound("g").values()) in ({"n0", "n3"}, {"n1", "n2"})


def test_hypernodes_the_cluster_holds_define_the_tiers_as_in_production() -> None:
    """The simulator holds HyperNodes as the apiserver does; the shared snapshot builder hands them to the plugin."""
    c = cluster()
    for name in ("n0", "n1", "n2", "n3"):
        c.node(name, gpu=4)
    c.hypernode("s0", 1, ["n0", "n3"]).hypernode("s1", 1, ["n1", "n2"])
    c.hypernode("spine", 2, ["s0", "s1"], kind="HyperNode")
    gang(c, "g", {"w": (2, 4)}, {"mode": "hard", "highestTierAllowed": 1})
    c.cycle(conf(TOPOLOGY))
    assert set(c.sim.bound("g").values()) in ({"n0", "n3"}, {"n1", "n2"})


def test_by_default_only_a_job_that_asks_for_a_topology_is_placed_whole() -> None:
    """Volcano's network-topology-aware shapes only jobs with a networkTopology; a gang without one is allocated
    pod by pod with the configured scorers (binpack: the fuller node first), as Volcano allocates it. With
    solver.everyGang the same gang is placed whole, inside one rack."""

    def build() -> ClusterBuilder:
        c = cluster().node("a0", gpu=8, labels=rack("a")).node("b0", gpu=8, labels=rack("b"))
        c.node("b1", gpu=8, labels=rack("b"))
        c.job("filler", replicas=1, gpu=6)
        c.sim.pods["default/filler-0"].manifest["spec"]["nodeName"] = "a0"
        gang(c, "g", {"w": (4, 1)})
        return c

    by_pod = build()
    by_pod.cycle(conf(VOLCANOS))
    nodes = list(by_pod.sim.bound("g").values())
    assert (len(nodes), nodes.count("a0")) == (4, 2)  # the 2 GPUs left on a0 fill first: split over two racks
    whole = build()
    whole.cycle(conf(TOPOLOGY))
    assert len(set(whole.sim.bound("g").values())) == 1 and "a0" not in whole.sim.bound("g").values()


# ---- one scoring model: the solver ranks by the configured scorers after its topology terms ------------------

def node_score_sum(c: ClusterBuilder, text: str, bound: Mapping[str, str]) -> float:
    """The configured scorers' sum over a placement, each pod scored on its node as the cluster was before it."""
    ssn = Session(c.sim.snapshot(), conf(text), PLUGINS)
    tasks = {t.name: t for job in ssn.jobs.values() for t in job.tasks.values()}
    return sum(float(ssn.fit.node_scores(tasks[pod], np.array([ssn.arrays.position[node]]))[0])
               for pod, node in bound.items())


def test_a_gang_the_solver_places_gets_the_node_scores_it_gets_pod_by_pod() -> None:
    """Two empty 8-GPU nodes in one rack strand nothing for an 8-GPU gang either way; binpack prefers the one
    whose cpu is partly used, pod by pod and now also in the solver (which used to take the first by name)."""

    def build() -> ClusterBuilder:
        c = cluster().node("n0", gpu=8, labels=rack("a")).node("n1", gpu=8, labels=rack("a"))
        running(c, "cpu-user", "n1", cpu="4")
        return gang(c, "g", {"w": (8, 1)})

    by_pod, whole = build(), build()
    by_pod.cycle(conf(BASE))  # no gang placer: allocate places the gang pod by pod with binpack
    whole.cycle(conf(TOPOLOGY))
    solver, pod_by_pod = (node_score_sum(build(), TOPOLOGY, c.sim.bound("g")) for c in (whole, by_pod))
    first_by_name = node_score_sum(build(), TOPOLOGY, {f"g-w-{i}": "n0" for i in range(8)})
    assert solver >= pod_by_pod > first_by_name
    assert by_pod.sim.bound("g") == whole.sim.bound("g") == {f"g-w-{i}": "n1" for i in range(8)}


PREFERRED = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
    {"weight": 10, "preference": {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["fast"]}]}}]}}


def test_the_solver_honours_a_preferred_node_affinity_among_placements_that_pack_as_well() -> None:
    c = cluster()
    for name in ("n0", "n1", "n2", "n3"):
        c.node(name, gpu=8, labels={**rack("a"), **({"pool": "fast"} if name == "n2" else {})})
    gang(c, "g", {"w": (2, 4)}, affinity=PREFERRED)
    c.cycle(conf(TOPOLOGY + "  - name: nodeorder\n"))
    assert set(c.sim.bound("g").values()) == {"n2"}


def test_stranding_fewer_gpus_still_outranks_the_scorers() -> None:
    """The preferred node would strand 4 GPUs; the exact hole elsewhere in the rack wins."""
    c = cluster().node("n0", gpu=4, labels=rack("a")).node("n1", gpu=8, labels={**rack("a"), "pool": "fast"})
    gang(c, "g", {"w": (2, 2)}, affinity=PREFERRED)
    c.cycle(conf(TOPOLOGY + "  - name: nodeorder\n"))
    assert set(c.sim.bound("g").values()) == {"n0"}


def test_a_node_whose_cards_a_scorer_vetoes_is_no_candidate_for_the_solver() -> None:
    """n0 has a whole GPU free, but split over two cards: deviceshare vetoes it for whole-GPU pods, and the
    solver no longer puts a task there (the first node by name, for a gang that strands nothing anywhere)."""
    text = TOPOLOGY + "  - name: deviceshare\n"
    c = cluster()
    for name, gpus in (("n0", 2), ("n1", 1), ("n2", 1)):
        c.node(name, gpu=gpus, labels=rack("a"))
    for card in ("0", "1"):
        running(c, f"half-{card}", "n0", card, gpu="0.5")
    gang(c, "g", {"w": (2, 1)})
    c.cycle(conf(text))
    assert sorted(c.sim.bound("g").values()) == ["n1", "n2"]
