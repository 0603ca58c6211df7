"""WaitForFirstConsumer claims, bound by the scheduler as kube-scheduler's volume binder binds them, but for a whole
gang: a free volume whose node affinity admits the node (the smallest that fits), else provisioning where the class
allows it; pods that share a claim never pick two volumes; a volume one claim takes is free for no other; and the
bindings reach the adapter only for a committed gang, never for one that did not fit whole."""

from __future__ import annotations

from typing import Any

from storage_objects import ZONE, claim, storage_class, volume

from scheduler.api import reasons as R
from scheduler.api.reasons import NodeFilter
from scheduler.api.snapshot import VolumeBind
from scheduler.api.volumes import BIND_COMPLETED, SELECTED_NODE
from scheduler.testing import ClusterBuilder, cluster, node_filters


def nodes(count: int = 4, cpu: str = "8") -> ClusterBuilder:
    """n0..n3; n0, n1 in zone a, n2, n3 in zone b."""
    c = cluster()
    for i in range(count):
        c.node(f"n{i}", cpu=cpu, labels={ZONE: "a" if i < 2 else "b"})
    return c


def add(c: ClusterBuilder, *objects: dict[str, Any]) -> ClusterBuilder:
    for obj in objects:
        c.sim.add_storage(obj)
    return c


def volume_binds(results: list[Any]) -> list[VolumeBind]:
    return [v for r in results for gang in r.binds for v in gang.volumes]


# ---- static volumes ---------------------------------------------------------------------------------------


def test_a_claim_takes_the_free_volume_whose_node_the_pod_can_use_and_is_bound_before_its_pods() -> None:
    c = add(nodes(), storage_class("local"), volume("pv-n3", node="n3"), claim("data"))
    c.job("j", replicas=1, claims=["data"])
    results = c.cycles(2)
    assert c.sim.bound("j") == {"j-0": "n3"}
    assert volume_binds(results) == [VolumeBind("default/data", "n3", "pv-n3")]
    assert c.sim.storage is not None
    bound = c.sim.storage.claim("default/data")
    assert bound["spec"]["volumeName"] == "pv-n3" and BIND_COMPLETED in bound["metadata"]["annotations"]


def test_the_smallest_volume_that_holds_the_request_is_chosen() -> None:
    c = add(
        nodes(),
        storage_class("local"),
        volume("big", size="100Gi"),
        volume("small", size="6Gi"),
        volume("tiny", size="1Gi"),
        claim("data", size="5Gi"),
    )
    c.job("j", replicas=1, claims=["data"])
    results = c.cycles(1)
    assert [v.volume for v in volume_binds(results)] == ["small"]


def test_volumes_of_another_class_access_mode_or_already_claimed_are_not_candidates() -> None:
    c = add(
        nodes(),
        storage_class("local"),
        storage_class("other"),
        volume("other-class", storage_class="other", node="n0"),
        volume("read-only-many", node="n1", modes=("ReadOnlyMany",)),
        volume("claimed", node="n2", claim="default/someone-else"),
        volume("free", node="n3"),
        claim("data"),
    )
    c.job("j", replicas=1, claims=["data"])
    c.cycles(1)
    assert c.sim.bound("j") == {"j-0": "n3"}


def test_pods_sharing_one_claim_in_a_gang_use_one_volume() -> None:
    """Two free volumes on two nodes; the gang's two pods share the claim: both go where the first pod's volume
    is, and the claim is bound once."""
    c = add(
        nodes(),
        storage_class("local"),
        volume("pv-n1", node="n1"),
        volume("pv-n2", node="n2"),
        claim("shared", modes=("ReadWriteMany",)),
    )
    for name in ("pv-n1", "pv-n2"):
        c.sim.storage.volume(name)["spec"]["accessModes"] = ["ReadWriteMany"]  # type: ignore[union-attr]
    c.job("j", replicas=2, claims=["shared"], cpu="1")
    results = c.cycles(1)
    placed = set(c.sim.bound("j").values())
    binds = volume_binds(results)
    assert len(placed) == 1 and len(binds) == 1
    assert binds[0].volume == f"pv-{placed.pop()}"


def test_two_claims_of_one_gang_never_take_the_same_volume() -> None:
    """One free volume, a gang of two pods with a claim each: the gang cannot be placed whole, and nothing is
    bound or annotated."""
    c = add(nodes(), storage_class("local"), volume("only"), claim("a"), claim("b"))
    c.sim.add_podgroup(
        {"metadata": {"name": "j", "namespace": "default"}, "spec": {"minMember": 2}, "status": {"phase": "Inqueue"}}
    )
    from scheduler.sim.objects import pod_object

    c.sim.add_pod(pod_object("j-0", group="j", claims=["a"]))
    c.sim.add_pod(pod_object("j-1", group="j", claims=["b"]))
    results = c.cycles(2)
    assert c.sim.bound("j") == {}
    assert volume_binds(results) == []
    assert c.sim.storage is not None
    assert "volumeName" not in c.sim.storage.claim("default/a")["spec"]
    assert "volumeName" not in c.sim.storage.claim("default/b")["spec"]
    assert NodeFilter(R.VOLUME_BIND_CONFLICT) in node_filters(c.sim.reasons("j"))


def test_a_volume_one_gang_takes_is_not_free_for_the_next_gang_of_the_cycle() -> None:
    c = add(nodes(), storage_class("local"), volume("only", node="n0"), claim("a"), claim("b"))
    c.job("first", replicas=1, claims=["a"])
    c.job("second", replicas=1, claims=["b"])
    results = c.cycles(1)
    assert [v.claim for v in volume_binds(results)] == ["default/a"]
    assert c.sim.bound("first") == {"first-0": "n0"} and c.sim.bound("second") == {}


def test_a_pod_with_two_claims_on_one_node_takes_two_volumes() -> None:
    c = add(
        nodes(),
        storage_class("local"),
        volume("x", node="n1"),
        volume("y", node="n1"),
        volume("z", node="n2"),
        claim("a"),
        claim("b"),
    )
    c.job("j", replicas=1, claims=["a", "b"])
    results = c.cycles(1)
    assert c.sim.bound("j") == {"j-0": "n1"}
    assert sorted(v.volume for v in volume_binds(results)) == ["x", "y"]


def test_a_volume_prebound_to_the_claim_is_the_claims_and_no_other() -> None:
    """A claimRef the scheduler wrote last cycle (or a user's pre-binding) which the PV controller has not completed
    yet: more pods of the claim go where that volume is."""
    c = add(
        nodes(),
        storage_class("local"),
        volume("mine", node="n2", claim="default/data"),
        volume("free", node="n0"),
        claim("data"),
    )
    c.sim.storage.volume("mine")["status"]["phase"] = "Available"  # type: ignore[union-attr]
    c.job("j", replicas=1, claims=["data"])
    c.cycles(1)
    assert c.sim.bound("j") == {"j-0": "n2"}


# ---- dynamic provisioning ---------------------------------------------------------------------------------


def test_a_class_that_provisions_gets_the_pods_node_as_the_claims_selected_node() -> None:
    c = add(
        nodes(), storage_class("csi", provisioner="csi.example.com", zones=("b",)), claim("data", storage_class="csi")
    )
    c.job("j", replicas=1, claims=["data"])
    results = c.cycles(1)
    (node,) = c.sim.bound("j").values()
    assert node in {"n2", "n3"}  # allowedTopologies: zone b
    assert volume_binds(results) == [VolumeBind("default/data", node, "")]
    assert c.sim.storage is not None
    assert c.sim.storage.claim("default/data")["metadata"]["annotations"][SELECTED_NODE] == node


def test_a_claim_with_a_selected_node_is_provisioned_there_only() -> None:
    c = add(nodes(), storage_class("csi", provisioner="csi.example.com"), claim("data", storage_class="csi"))
    c.sim.storage.claim("default/data")["metadata"]["annotations"] = {SELECTED_NODE: "n1"}  # type: ignore[union-attr]
    c.job("j", replicas=1, claims=["data"])
    c.cycles(1)
    assert c.sim.bound("j") == {"j-0": "n1"}


def test_pods_sharing_a_claim_to_provision_land_on_one_node() -> None:
    c = add(nodes(), storage_class("csi", provisioner="csi.example.com"), claim("data", storage_class="csi"))
    c.job("j", replicas=3, claims=["data"], cpu="2")
    results = c.cycles(1)
    assert len(set(c.sim.bound("j").values())) == 1 and len(c.sim.bound("j")) == 3
    assert len(volume_binds(results)) == 1


def test_no_free_volume_and_no_provisioner_leaves_the_pod_pending_with_the_binders_reason() -> None:
    c = add(nodes(), storage_class("local"), volume("small", size="1Gi"), claim("data", size="5Gi"))
    c.job("j", replicas=1, claims=["data"])
    c.cycles(2)
    assert c.sim.bound("j") == {}
    assert node_filters(c.sim.reasons("j")) == {NodeFilter(R.VOLUME_BIND_CONFLICT)}
    # The nodes have room: their free resources are not "fragmented", the volumes are what is missing.
    assert [type(r) for r in c.sim.reasons("j")] == [R.GangNotReady, R.NodesUnavailable]


# ---- only a committed gang's claims are bound ---------------------------------------------------------------


def test_a_gang_that_cannot_fit_whole_binds_no_claim_and_annotates_none() -> None:
    """The first pods of the gang found their volume and node, the last did not fit: the statement is discarded
    and neither the claim nor the volume is touched."""
    c = add(
        nodes(count=2, cpu="4"),
        storage_class("csi", provisioner="csi.example.com"),
        storage_class("local"),
        volume("pv", node="n0"),
        claim("static"),
        claim("dynamic", storage_class="csi"),
    )
    c.job("j", replicas=3, claims=["static", "dynamic"], cpu="3")  # 3 x 3 cpu on two 4-cpu nodes
    results = c.cycles(3)
    assert c.sim.bound("j") == {}
    assert volume_binds(results) == []
    assert c.sim.storage is not None
    assert "annotations" not in c.sim.storage.claim("default/dynamic")["metadata"]
    assert "claimRef" not in c.sim.storage.volume("pv")["spec"]


def test_the_gang_placer_keeps_to_the_volumes_too() -> None:
    """A gang placed whole by the network-topology-aware plugin (which checks only the static predicates) is not
    committed where its claims have no volume: the claim's pods share the one volume's node."""
    from scheduler.testing import conf_from_tiers

    conf = conf_from_tiers(
        ["priority", "gang"],
        [
            "predicates",
            "proportion",
            "nodeorder",
            {"name": "network-topology-aware", "arguments": {"solver.everyGang": True}},
        ],
    )
    c = add(
        nodes(),
        storage_class("local"),
        volume("pv", node="n3", modes=("ReadWriteMany",)),
        claim("data", modes=("ReadWriteMany",)),
    )
    c.job("j", replicas=2, claims=["data"], cpu="2")
    c.cycles(2, conf)
    assert set(c.sim.bound("j").values()) == {"n3"}


def test_a_gang_placer_that_gives_two_claims_one_volume_is_not_committed() -> None:
    """The network-topology-aware plugin sizes each group of identical pods on its own; two pods with a claim each
    both see the one free volume. Replayed, the second finds it taken: JobReady refuses the gang, nothing binds."""
    from scheduler.sim.objects import pod_object
    from scheduler.testing import conf_from_tiers

    conf = conf_from_tiers(
        ["priority", "gang"],
        [
            "predicates",
            "proportion",
            "nodeorder",
            {"name": "network-topology-aware", "arguments": {"solver.everyGang": True}},
        ],
    )
    c = add(nodes(), storage_class("local"), volume("only", node="n0"), claim("a"), claim("b"))
    c.sim.add_podgroup(
        {"metadata": {"name": "j", "namespace": "default"}, "spec": {"minMember": 2}, "status": {"phase": "Inqueue"}}
    )
    c.sim.add_pod(pod_object("j-0", group="j", claims=["a"]))
    c.sim.add_pod(pod_object("j-1", group="j", claims=["b"]))
    results = c.cycles(2, conf)
    assert c.sim.bound("j") == {}
    assert volume_binds(results) == []
