"""Inter-pod (anti-)affinity and topologySpreadConstraints: the dynamic predicates distributed training uses."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest
from preemption_confs import make_conf

from scheduler.api import reasons as R
from scheduler.testing import ClusterBuilder, cluster, node_filters, pod_object

CONF = make_conf()
HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
SELECT_TRAIN = {"matchLabels": {"app": "train"}}


def gang(c: ClusterBuilder, name: str, replicas: int, *, labels: dict[str, str], spec: dict[str, Any],
         min_available: int | None = None, gpu: int = 1) -> None:
    c.sim.add_podgroup({"metadata": {"name": name, "namespace": "default"},
                        "spec": {"minMember": replicas if min_available is None else min_available}})
    for i in range(replicas):
        pod = pod_object(f"{name}-{i}", group=name, gpu=gpu)
        pod["metadata"]["labels"].update(labels)
        pod["spec"].update(spec)
        c.sim.add_pod(pod)


def anti(topology_key: str = HOST) -> dict[str, Any]:
    return {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": SELECT_TRAIN, "topologyKey": topology_key}]}}}


def spread(max_skew: int, when: str = "DoNotSchedule", key: str = ZONE) -> dict[str, Any]:
    return {"topologySpreadConstraints": [
        {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": when, "labelSelector": SELECT_TRAIN}]}


def zones(c: ClusterBuilder, placement: dict[str, str]) -> Counter[str]:
    return Counter(c.sim.nodes[node].labels[ZONE] for node in placement.values())


@dataclass(frozen=True)
class Case:
    name: str
    replicas: int
    spec: dict[str, Any]
    min_available: int | None = None
    bound: int = 0
    per_node_max: int | None = None
    zone_counts: tuple[int, ...] | None = None
    reason: R.NodeFilter | None = None
    extra: dict[str, Any] = field(default_factory=dict)


CASES = [
    Case("required anti-affinity spreads a 4-pod gang over 4 nodes, one pod each", 4, anti(), bound=4,
         per_node_max=1),
    Case("a 5-pod gang with anti-affinity on 4 nodes binds nothing and says why", 5, anti(), bound=0,
         reason=R.NodeFilter(R.POD_ANTI_AFFINITY)),
    Case("an elastic gang with anti-affinity binds one pod per node and leaves the rest pending", 6, anti(),
         min_available=2, bound=4, per_node_max=1),
    Case("anti-affinity on zones puts at most one pod in each zone", 2, anti(ZONE), bound=2, zone_counts=(1, 1)),
    Case("DoNotSchedule spread with maxSkew 1 splits 4 pods 2 and 2 over two zones", 4, spread(1), bound=4,
         zone_counts=(2, 2)),
    Case("ScheduleAnyway spread prefers the emptier zone", 4, spread(1, "ScheduleAnyway"), bound=4,
         zone_counts=(2, 2)),
]


def build() -> ClusterBuilder:
    # Zone a has n0, n1; zone b has n2, n3. Binpack alone would pack pods onto one node.
    c = cluster()
    for i in range(4):
        c.node(f"n{i}", gpu=8, labels={ZONE: "a" if i < 2 else "b"})
    return c


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_pod_topology(case: Case) -> None:
    c = build()
    gang(c, "train", case.replicas, labels={"app": "train"}, spec=case.spec, min_available=case.min_available)
    c.cycles(2, CONF)
    placement = c.sim.bound("train")
    assert len(placement) == case.bound
    if case.per_node_max is not None:
        assert max(Counter(placement.values()).values()) <= case.per_node_max
    if case.zone_counts is not None:
        assert tuple(sorted(zones(c, placement).values())) == case.zone_counts
    if case.reason:
        assert case.reason in node_filters(c.sim.reasons("train"))


def test_do_not_schedule_spread_filters_a_zone_already_ahead() -> None:
    c = build()
    gang(c, "first", 2, labels={"app": "train"}, spec={"nodeSelector": {ZONE: "a"}})
    c.cycle(CONF)
    assert set(zones(c, c.sim.bound("first"))) == {"a"}
    gang(c, "second", 2, labels={"app": "train"}, spec=spread(1))
    c.cycle(CONF)
    assert zones(c, c.sim.bound("second")) == Counter({"b": 2})


def test_a_node_without_the_topology_label_fails_a_do_not_schedule_spread() -> None:
    c = cluster().node("bare", gpu=8, labels={})
    gang(c, "train", 1, labels={"app": "train"}, spec=spread(1))
    c.cycles(2, CONF)
    assert c.sim.bound("train") == {}
    assert node_filters(c.sim.reasons("train")) == {R.NodeFilter(R.TOPOLOGY_SPREAD_LABEL)}


def test_required_affinity_follows_the_first_pod_of_the_group() -> None:
    c = build()
    together = {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": SELECT_TRAIN, "topologyKey": ZONE}]}}}
    gang(c, "train", 4, labels={"app": "train"}, spec=together, gpu=4)
    c.cycles(2, CONF)
    assert len(zones(c, c.sim.bound("train"))) == 1
