"""Where a pod's PersistentVolumeClaims let it go, on the in-memory cluster with storage objects: a bound claim's
volume's node affinity and zone (kube-scheduler's VolumeBinding and VolumeZone filters, which Volcano's predicates
run), a WaitForFirstConsumer claim matched to a free volume or to provisioning where the pod lands, an Immediate
claim that is not bound yet keeping the pod pending, and the typed reasons each rejection publishes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from storage_objects import HOSTNAME, ZONE, claim, storage_class, volume

from scheduler.api import reasons as R
from scheduler.api.messages import render
from scheduler.api.reasons import NodeFilter
from scheduler.testing import ClusterBuilder, cluster, node_filters


def zoned(count: int = 4) -> ClusterBuilder:
    """Nodes n0..n3, n0 and n1 in zone a, n2 and n3 in zone b."""
    c = cluster()
    for i in range(count):
        c.node(f"n{i}", cpu="8", labels={ZONE: "a" if i < 2 else "b"})
    return c


def with_storage(c: ClusterBuilder, *objects: dict[str, Any]) -> ClusterBuilder:
    for obj in objects:
        c.sim.add_storage(obj)
    return c


# ---- bound claims: the volume's node affinity and zone ----------------------------------------------------


@dataclass(frozen=True)
class Bound:
    name: str
    volume: dict[str, Any]
    nodes: set[str]  # where the gang's pods may land
    labels: dict[str, dict[str, str]] = field(default_factory=dict)  # extra node labels


BOUND = [
    Bound("a volume pinned to one node takes every pod of the claim there", volume("pv", node="n2"), {"n2"}),
    Bound("a volume in zone b keeps its pods in zone b", volume("pv", zone="b"), {"n2", "n3"}),
    Bound("a volume in two zones (a__b) admits both", volume("pv", zone="a__b"), {"n0", "n1", "n2", "n3"}),
    Bound("a volume without affinity or zone goes anywhere", volume("pv"), {"n0", "n1", "n2", "n3"}),
]


@pytest.mark.parametrize("case", BOUND, ids=[c.name for c in BOUND])
def test_a_bound_claims_volume_decides_the_nodes(case: Bound) -> None:
    c = with_storage(zoned(), storage_class("local"), case.volume, claim("data", bound_to="pv"))
    c.job("j", replicas=2, claims=["data"], cpu="1")
    c.cycles(2)
    bound = c.sim.bound("j")
    assert len(bound) == 2
    assert set(bound.values()) <= case.nodes


def test_a_node_without_zone_labels_accepts_a_zoned_volume_as_kube_scheduler_does() -> None:
    """VolumeZone passes a node that has no zone or region label at all (a one-zone cluster)."""
    c = with_storage(
        cluster().node("plain", cpu="8"), storage_class("local"), volume("pv", zone="b"), claim("data", bound_to="pv")
    )
    c.job("j", replicas=1, claims=["data"])
    c.cycles(2)
    assert c.sim.bound("j") == {"j-0": "plain"}


def test_a_beta_zone_label_on_the_volume_matches_the_nodes_ga_label() -> None:
    pv = volume("pv", labels={"failure-domain.beta.kubernetes.io/zone": "b"})
    c = with_storage(zoned(), storage_class("local"), pv, claim("data", bound_to="pv"))
    c.job("j", replicas=1, claims=["data"])
    c.cycles(2)
    assert set(c.sim.bound("j").values()) <= {"n2", "n3"}


def test_a_gang_its_volume_pins_to_a_full_node_waits_and_says_which_filters_turned_the_others_away() -> None:
    c = with_storage(zoned(), storage_class("local"), volume("pv", node="n0"), claim("data", bound_to="pv"))
    c.job("j", replicas=3, claims=["data"], cpu="3")  # 9 cpu on the one 8-cpu node the volume allows
    c.cycles(2)
    assert c.sim.bound("j") == {}
    filters = node_filters(c.sim.reasons("j"))
    assert NodeFilter(R.VOLUME_NODE_AFFINITY) in filters
    assert NodeFilter(R.INSUFFICIENT, "cpu") in filters


def test_the_zone_filter_is_named_when_it_turns_nodes_away() -> None:
    c = with_storage(zoned(), storage_class("local"), volume("pv", zone="b"), claim("data", bound_to="pv"))
    c.job("j", replicas=3, claims=["data"], cpu="6")  # one pod per node, and zone b has two
    c.cycles(2)
    assert c.sim.bound("j") == {}
    assert NodeFilter(R.VOLUME_ZONE) in node_filters(c.sim.reasons("j"))


# ---- claims no node can use yet ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Blocked:
    name: str
    objects: tuple[dict[str, Any], ...]
    reason: NodeFilter
    message: str


BLOCKED = [
    Blocked(
        "an Immediate claim not bound yet keeps the pod pending (kube-scheduler's rule)",
        (storage_class("fast", mode="Immediate"), claim("data", storage_class="fast")),
        NodeFilter(R.VOLUME_UNBOUND_IMMEDIATE, "data"),
        'pod has unbound immediate PersistentVolumeClaims ("data")',
    ),
    Blocked(
        "a claim without a class, not bound, is Immediate",
        (claim("data", storage_class=None),),
        NodeFilter(R.VOLUME_UNBOUND_IMMEDIATE, "data"),
        'pod has unbound immediate PersistentVolumeClaims ("data")',
    ),
    Blocked(
        "a claim that does not exist",
        (storage_class("local"),),
        NodeFilter(R.VOLUME_CLAIM_MISSING, "data"),
        'persistentvolumeclaim "data" not found',
    ),
    Blocked(
        "a claim bound to a volume that does not exist",
        (claim("data", bound_to="gone"),),
        NodeFilter(R.VOLUME_MISSING),
        "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)",
    ),
]


@pytest.mark.parametrize("case", BLOCKED, ids=[c.name for c in BLOCKED])
def test_a_claim_no_node_can_use_keeps_the_gang_pending_with_its_reason(case: Blocked) -> None:
    c = with_storage(zoned(), *case.objects)
    c.job("j", replicas=2, claims=["data"])
    results = c.cycles(2)
    assert c.sim.bound("j") == {}
    assert all(not r.binds for r in results)
    unavailable = next(r for r in c.sim.reasons("j") if isinstance(r, R.NodesUnavailable))
    assert [(f.filter, f.nodes) for f in unavailable.counts] == [(case.reason, 4)]
    assert render(case.reason) == case.message
    # No node may be used: no resource is said to be short on "the 0 nodes they may use".
    assert [type(r) for r in c.sim.reasons("j")] == [R.GangNotReady, R.NodesUnavailable]


def test_an_immediate_claim_schedules_once_the_pv_controller_bound_it() -> None:
    c = with_storage(
        zoned(),
        storage_class("fast", mode="Immediate"),
        volume("pv", storage_class="fast", zone="b"),
        claim("data", storage_class="fast"),
    )
    c.job("j", replicas=1, claims=["data"])
    c.cycles(2)
    assert c.sim.bound("j") == {}
    c.sim.add_storage(claim("data", storage_class="fast", bound_to="pv"))  # the PV controller's bind
    c.cycles(1)
    assert set(c.sim.bound("j").values()) <= {"n2", "n3"}


def test_a_pod_without_claims_carries_no_volume_constraint() -> None:
    """The hot path's promise: a pod with no claim has nothing for the predicates to check."""
    c = with_storage(zoned(), storage_class("local"), volume("pv"), claim("data", bound_to="pv"))
    c.job("plain", replicas=1)
    c.job("bound", replicas=1, claims=["data"])  # bound to a volume any node may use: nothing to check either
    snapshot = c.sim.snapshot()
    tasks = {t.name: t for job in snapshot.jobs.values() for t in job.tasks.values()}
    assert tasks["plain-0"].constraints.volumes is None and not tasks["plain-0"].constraints.dynamic
    assert tasks["bound-0"].constraints.volumes is None
    assert snapshot.storage is not None and not snapshot.storage.binding


def test_volumes_are_ignored_where_the_cluster_models_none() -> None:
    """The simulator replaying a workload has no storage objects: a pod's claims then constrain nothing."""
    c = zoned()
    c.job("j", replicas=2, claims=["data"])
    c.cycles(2)
    assert len(c.sim.bound("j")) == 2


def test_the_zone_rule_reads_only_the_volume_zone_labels_of_the_node() -> None:
    labels = {HOSTNAME: "n0", ZONE: "a"}
    pv = volume("pv", zone="a")
    from scheduler.api.volumes import Storage, claim_from_object, needs_of, volume_from_object

    storage = Storage(
        volumes={"pv": volume_from_object(pv)}, claims={"default/data": claim_from_object(claim("data", bound_to="pv"))}
    )
    needs = needs_of(("default/data",), storage)
    assert needs is not None
    assert needs.node_conflict(labels) is None
    assert needs.node_conflict({ZONE: "b"}) == NodeFilter(R.VOLUME_ZONE)
    assert needs.node_conflict({"other": "x"}) is None
