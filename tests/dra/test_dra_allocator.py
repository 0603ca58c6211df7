"""The allocator: counts and modes, constraints, admin access, shared and template claims, all or nothing."""

from __future__ import annotations

from typing import Any

from dra_objects import DRIVER, claim, device, device_class, pod, request, slice_, template

from scheduler.api import reasons_dra as R
from scheduler.api.dra import Allocation, Consumer, PodClaims
from scheduler.api.dra_parse import (
    claim_from_object,
    class_from_object,
    pod_claims_from_object,
    slice_from_object,
    template_from_object,
)
from scheduler.dra.allocator import Allocator, PodRef

GPU = f'device.driver == "{DRIVER}"'
MIG = f'device.attributes["{DRIVER}"].type == "mig"'


def cluster(nodes: int = 2, per_node: int = 2, **kw: Any) -> dict[str, Any]:
    slices = [slice_(f"n{n}-gpus", f"n{n}", [device(f"gpu-{i}", type="gpu", index=i, nic=f"nic{i % 2}")
                                             for i in range(per_node)]) for n in range(nodes)]
    return {"slices": slices, "classes": [device_class("gpu", GPU)], "claims": [], "templates": [], **kw}


def allocator(c: dict[str, Any], **kw: Any) -> Allocator:
    return Allocator([slice_from_object(s) for s in c["slices"]], [class_from_object(d) for d in c["classes"]],
                     [claim_from_object(x) for x in c["claims"]], [template_from_object(t) for t in c["templates"]],
                     **kw)


def ref(name: str) -> PodRef:
    return PodRef("default", name, f"uid-{name}")


def claims_of(name: str, *claims: tuple[str, str, str], generated: Any = None) -> PodClaims:
    return pod_claims_from_object(pod(name, list(claims), generated=generated))


def devices(write_alloc: Allocation | None) -> list[str]:
    assert write_alloc is not None
    return [r.device.device for r in write_alloc.results]


def test_exact_count_takes_distinct_free_devices_and_names_the_node() -> None:
    c = cluster(claims=[claim("c", request("g", "gpu", count=2))])
    t = allocator(c).tentative()
    assert t.place(ref("p"), claims_of("p", ("x", "c", "")), "n1", {}) == ()
    (write,) = t.plan()
    assert (write.name, write.consumers) == ("c", (Consumer("pods", "p", "uid-p"),))
    assert write.allocation is not None and write.allocation.node == "n1"
    assert sorted(devices(write.allocation)) == ["gpu-0", "gpu-1"]


def test_short_reason_names_request_class_and_count() -> None:
    c = cluster(claims=[claim("c", request("g", "gpu", count=3))])
    reasons = allocator(c).tentative().place(ref("p"), claims_of("p", ("x", "c", "")), "n0", {})
    assert reasons == (R.ClaimDevicesShort("default/c", "g", "gpu", 3, 2, "n0"),)
    assert reasons[0].short == 1


def test_held_devices_are_not_given_again_and_all_mode_fails_on_one_held() -> None:
    held = {"allocation": {"devices": {"results": [{"request": "g", "driver": DRIVER, "pool": "n0",
                                                    "device": "gpu-0"}]}}}
    c = cluster(claims=[claim("old", request("g", "gpu"), status=held), claim("one", request("g", "gpu")),
                        claim("all", request("g", "gpu", mode="All"))])
    a = allocator(c)
    t = a.tentative()
    assert t.place(ref("p"), claims_of("p", ("x", "one", "")), "n0", {}) == ()
    assert devices(t.plan()[0].allocation) == ["gpu-1"]
    assert a.tentative().fits(ref("q"), claims_of("q", ("x", "all", "")), "n0", {}) == \
        (R.ClaimDevicesShort("default/all", "g", "gpu", 2, 1, "n0"),)
    t2 = a.tentative()
    assert t2.place(ref("q"), claims_of("q", ("x", "all", "")), "n1", {}) == ()
    assert devices(t2.plan()[0].allocation) == ["gpu-0", "gpu-1"]


def test_class_and_request_selectors_both_apply() -> None:
    c = cluster(claims=[claim("c", request("g", "gpu", f'device.attributes["{DRIVER}"].index == 1'))])
    c["classes"] = [device_class("gpu", GPU, f'device.attributes["{DRIVER}"].type == "gpu"')]
    t = allocator(c).tentative()
    assert t.place(ref("p"), claims_of("p", ("x", "c", "")), "n0", {}) == ()
    assert devices(t.plan()[0].allocation) == ["gpu-1"]


def test_match_attribute_finds_the_agreeing_pair_a_greedy_pick_misses() -> None:
    # gpu-0 nic0, gpu-1 nic1, gpu-2 nic0: the first pick (gpu-0) for "a" and gpu-1 for "b" disagree
    c = cluster(nodes=1, per_node=3, claims=[claim("c", request("a", "gpu"), request("b", "gpu"),
                                                   match=[(f"{DRIVER}/nic", [])])])
    t = allocator(c).tentative()
    assert t.place(ref("p"), claims_of("p", ("x", "c", "")), "n0", {}) == ()
    got = devices(t.plan()[0].allocation)
    assert sorted(got) == ["gpu-0", "gpu-2"]
    c2 = cluster(nodes=1, per_node=2, claims=[claim("c", request("a", "gpu"), request("b", "gpu"),
                                                    match=[(f"{DRIVER}/nic", ["a", "b"])])])
    assert allocator(c2).tentative().place(ref("p"), claims_of("p", ("x", "c", "")), "n0", {}) == \
        (R.ClaimConstraintUnmet("default/c", f"{DRIVER}/nic", ("a", "b"), "n0"),)


def test_admin_access_refused_unless_allowed_and_then_takes_held_devices() -> None:
    held = {"allocation": {"devices": {"results": [{"request": "g", "driver": DRIVER, "pool": "n0",
                                                    "device": f"gpu-{i}"} for i in range(2)]}}}
    c = cluster(nodes=1, claims=[claim("old", request("g", "gpu", count=2), status=held),
                                 claim("mon", request("g", "gpu", mode="All", admin=True))])
    assert allocator(c).tentative().place(ref("p"), claims_of("p", ("x", "mon", "")), "n0", {}) == \
        (R.AdminAccessRefused("default/mon", "g"),)
    a = allocator(c, admin_access=True)
    t = a.tentative()
    assert t.place(ref("p"), claims_of("p", ("x", "mon", "")), "n0", {}) == ()
    write = t.plan()[0]
    assert write.allocation is not None and all(r.admin_access for r in write.allocation.results)
    assert t.held == set()  # admin access holds nothing


def test_shared_claim_allocated_once_reused_on_its_node_only() -> None:
    c = cluster(claims=[claim("shared", request("g", "gpu"))])
    t = allocator(c).tentative()
    assert t.place(ref("p1"), claims_of("p1", ("x", "shared", "")), "n0", {}) == ()
    assert t.place(ref("p2"), claims_of("p2", ("x", "shared", "")), "n0", {}) == ()
    assert t.place(ref("p3"), claims_of("p3", ("x", "shared", "")), "n1", {}) == \
        (R.ClaimNotReachable("default/shared", "n1"),)
    (write,) = t.plan()
    assert [x.name for x in write.consumers] == ["p1", "p2"] and len(devices(write.allocation)) == 1


def test_claim_already_allocated_in_the_cluster_only_gains_a_consumer() -> None:
    status = {"allocation": {"devices": {"results": [{"request": "g", "driver": DRIVER, "pool": "n1",
                                                      "device": "gpu-0"}]},
                             "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                                 {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}},
              "reservedFor": [{"resource": "pods", "name": "p0", "uid": "uid-p0"}]}
    c = cluster(claims=[claim("s", request("g", "gpu"), status=status)])
    t = allocator(c).tentative()
    assert t.place(ref("p1"), claims_of("p1", ("x", "s", "")), "n1", {}) == ()
    (write,) = t.plan()
    assert write.allocation is None and write.consumers == (Consumer("pods", "p1", "uid-p1"),)


def test_template_claim_is_the_claim_the_pod_would_get() -> None:
    c = cluster(templates=[template("one-gpu", request("g", "gpu"))])
    t = allocator(c).tentative()
    assert t.place(ref("p"), claims_of("p", ("mine", "", "one-gpu")), "n0", {}) == ()
    assert t.place(ref("q"), claims_of("q", ("mine", "", "one-gpu")), "n0", {}) == ()
    assert t.place(ref("r"), claims_of("r", ("mine", "", "one-gpu")), "n0", {}) == \
        (R.ClaimDevicesShort("default/r-mine", "g", "gpu", 1, 0, "n0"),)
    writes = t.plan()
    assert [(w.name, w.template) for w in writes] == [("p-mine", "mine"), ("q-mine", "mine")]
    assert sorted(d for w in writes for d in devices(w.allocation)) == ["gpu-0", "gpu-1"]
    assert allocator(c).tentative().place(ref("z"), claims_of("z", ("mine", "", "nope")), "n0", {}) == \
        (R.ClaimMissing("default/z", "nope", True),)


def test_a_pod_whose_second_claim_fails_keeps_nothing_and_release_gives_back_the_rest() -> None:
    c = cluster(nodes=1, claims=[claim("a", request("g", "gpu")), claim("b", request("g", "gpu", count=2))])
    a = allocator(c)
    t = a.tentative()
    assert t.place(ref("p"), claims_of("p", ("x", "a", ""), ("y", "b", "")), "n0", {}) == \
        (R.ClaimDevicesShort("default/b", "g", "gpu", 2, 1, "n0"),)
    assert t.plan() == [] and t.held == set()
    assert t.place(ref("p"), claims_of("p", ("x", "a", "")), "n0", {}) == ()
    assert t.fits(ref("q"), claims_of("q", ("y", "b", "")), "n0", {}) == \
        (R.ClaimDevicesShort("default/b", "g", "gpu", 2, 1, "n0"),)
    t.release(ref("p"))
    assert t.plan() == [] and t.held == set()
    assert t.place(ref("q"), claims_of("q", ("y", "b", "")), "n0", {}) == ()


def test_missing_class_and_bad_selector_are_typed() -> None:
    c = cluster(claims=[claim("c", request("g", "nope")), claim("d", request("g", "gpu", "device.driver"))])
    a = allocator(c)
    assert a.tentative().fits(ref("p"), claims_of("p", ("x", "c", "")), "n0", {}) == \
        (R.DeviceClassMissing("default/c", "g", "nope"),)
    (reason,) = a.tentative().fits(ref("p"), claims_of("p", ("x", "d", "")), "n0", {})
    assert isinstance(reason, R.ClaimSelectorInvalid) and "not a boolean" in reason.problem
    assert a.tentative().fits(ref("p"), claims_of("p", ("x", "gone", "")), "n0", {}) == \
        (R.ClaimMissing("default/p", "gone"),)


def test_network_devices_reach_every_node_and_leave_the_allocation_unpinned() -> None:
    c = cluster(nodes=0, claims=[claim("c", request("g", "gpu"))])
    c["slices"] = [slice_("fabric", "", [device("link-0", type="gpu")], pool="fabric", all_nodes=True)]
    t = allocator(c).tentative()
    assert t.place(ref("p"), claims_of("p", ("x", "c", "")), "any-node", {}) == ()
    alloc = t.plan()[0].allocation
    assert alloc is not None and alloc.reachable("other-node", {})


def _selected(name: str, rack: str) -> dict[str, Any]:
    raw = slice_(name, "", [device(f"{name}-0", type="gpu")], pool=name)
    del raw["spec"]["nodeName"]
    raw["spec"]["nodeSelector"] = {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": rack, "operator": "In", "values": ["yes"]}]}]}
    return raw


def test_devices_from_slices_selecting_different_nodes_pin_the_claim_to_the_node() -> None:
    """One device from a slice for nodes labelled a=yes, one from a slice for b=yes: the allocation is pinned to
    the node both reach (Kubernetes would write a=yes AND b=yes); from one such slice, its selector is kept."""
    labels = {"a": "yes", "b": "yes"}
    c = cluster(nodes=0, claims=[claim("two", request("g", "gpu", count=2)), claim("one", request("g", "gpu"))])
    c["slices"] = [_selected("sa", "a"), _selected("sb", "b")]
    t = allocator(c).tentative()
    assert t.place(ref("p"), claims_of("p", ("x", "two", "")), "n0", labels) == ()
    (write,) = t.plan()
    assert write.allocation is not None and sorted(devices(write.allocation)) == ["sa-0", "sb-0"]
    assert write.allocation.node == "n0" and write.allocation.node_selector == ()
    assert not write.allocation.reachable("n1", {"a": "yes"})

    c["slices"] = [_selected("sa", "a")]
    t = allocator(c).tentative()
    assert t.place(ref("q"), claims_of("q", ("x", "one", "")), "n0", labels) == ()
    (write,) = t.plan()
    assert write.allocation is not None and write.allocation.node == ""
    assert write.allocation.reachable("n1", {"a": "yes"}) and not write.allocation.reachable("n2", {"b": "yes"})


def test_older_pool_generation_is_ignored() -> None:
    old = slice_("n0-old", "n0", [device("gpu-9", type="gpu")], pool="n0")
    new = slice_("n0-new", "n0", [device("gpu-0", type="gpu")], pool="n0")
    new["spec"]["pool"]["generation"] = 2
    c = cluster(nodes=0, claims=[claim("c", request("g", "gpu", count=2))])
    c["slices"] = [old, new]
    assert allocator(c).tentative().fits(ref("p"), claims_of("p", ("x", "c", "")), "n0", {}) == \
        (R.ClaimDevicesShort("default/c", "g", "gpu", 2, 1, "n0"),)


def test_a_remembered_result_names_each_pods_claim_and_is_dropped_when_the_node_changes() -> None:
    c = cluster(nodes=2, per_node=1, templates=[template("one-gpu", request("g", "gpu"))])
    a = allocator(c)
    t = a.tentative()
    assert t.place(ref("p"), claims_of("p", ("g", "", "one-gpu")), "n0", {}) == ()
    for name in ("q", "r"):  # the same spec on the same node: one answer, each naming its own claim
        assert t.fits(ref(name), claims_of(name, ("g", "", "one-gpu")), "n0", {}) == \
            (R.ClaimDevicesShort(f"default/{name}-g", "g", "gpu", 1, 0, "n0"),)
    assert t.fits(ref("q"), claims_of("q", ("g", "", "one-gpu")), "n1", {}) == ()
    assert t.place(ref("q"), claims_of("q", ("g", "", "one-gpu")), "n1", {}) == ()
    assert t.fits(ref("r"), claims_of("r", ("g", "", "one-gpu")), "n1", {}) == \
        (R.ClaimDevicesShort("default/r-g", "g", "gpu", 1, 0, "n1"),)
    t.release(ref("q"))  # n1's GPU given back: the remembered answer for n1 is stale
    assert t.fits(ref("r"), claims_of("r", ("g", "", "one-gpu")), "n1", {}) == ()


def test_release_of_one_pod_gives_back_what_only_it_held_and_keeps_shared_claims() -> None:
    c = cluster(nodes=1, claims=[claim("shared", request("g", "gpu"))],
                templates=[template("one-gpu", request("g", "gpu"))])
    t = allocator(c).tentative()
    assert t.place(ref("p"), claims_of("p", ("s", "shared", "")), "n0", {}) == ()
    assert t.place(ref("q"), claims_of("q", ("s", "shared", ""), ("own", "", "one-gpu")), "n0", {}) == ()
    assert t.fits(ref("r"), claims_of("r", ("own", "", "one-gpu")), "n0", {}) == \
        (R.ClaimDevicesShort("default/r-own", "g", "gpu", 1, 0, "n0"),)
    t.release(ref("q"))  # q's own claim gives its GPU back; the shared claim stays p's
    assert [(w.name, [x.name for x in w.consumers]) for w in t.plan()] == [("shared", ["p"])]
    assert t.fits(ref("r"), claims_of("r", ("own", "", "one-gpu")), "n0", {}) == ()
    t.release(ref("p"))
    assert t.plan() == [] and t.held == set()


def test_all_mode_with_no_matching_device_does_not_allocate() -> None:
    """A difference from kube-scheduler, on purpose: a claim asking for every matching device gets at least one."""
    c = cluster(nodes=1, claims=[claim("c", request("g", "gpu", f'device.attributes["{DRIVER}"].index > 5',
                                                    mode="All"))])
    assert allocator(c).tentative().fits(ref("p"), claims_of("p", ("x", "c", "")), "n0", {}) == \
        (R.ClaimDevicesShort("default/c", "g", "gpu", 1, 0, "n0"),)


def test_the_search_gives_up_after_its_step_bound(monkeypatch: Any) -> None:
    import scheduler.dra.allocator as A

    # 6 devices, 3 requests that must agree on `nic`, which takes 2 values (3 devices each): a choice exists
    c = cluster(nodes=1, per_node=6, claims=[claim("c", request("a", "gpu"), request("b", "gpu"), request("d", "gpu"),
                                                   match=[(f"{DRIVER}/nic", [])])])
    assert allocator(c).tentative().fits(ref("p"), claims_of("p", ("x", "c", "")), "n0", {}) == ()
    # a: gpu-0 (nic0); b: gpu-1 (nic1) disagrees; the next pick would be the third step: given up, though a
    # choice exists (gpu-0, gpu-2, gpu-4)
    monkeypatch.setattr(A, "SEARCH_STEPS_MAX", 2)
    assert allocator(c).tentative().fits(ref("p"), claims_of("p", ("x", "c", "")), "n0", {}) == \
        (R.ClaimConstraintUnmet("default/c", f"{DRIVER}/nic", (), "n0"),)


def test_a_device_published_twice_is_offered_once_from_the_first_slice_by_name() -> None:
    dup_a = slice_("a-first", "n0", [device("gpu-0", type="gpu")], pool="n0")
    dup_b = slice_("b-second", "n0", [device("gpu-0", type="gpu")], pool="n0")
    dup_a["spec"]["pool"]["resourceSliceCount"] = dup_b["spec"]["pool"]["resourceSliceCount"] = 2
    c = cluster(nodes=0, claims=[claim("c", request("g", "gpu", count=2))])
    c["slices"] = [dup_b, dup_a]
    a = allocator(c)
    assert [x.slice.name for x in a.inventory.devices("n0", {})] == ["a-first"]
    assert a.tentative().fits(ref("p"), claims_of("p", ("x", "c", "")), "n0", {}) == \
        (R.ClaimDevicesShort("default/c", "g", "gpu", 2, 1, "n0"),)


def test_a_claim_never_gets_more_devices_than_an_allocation_may_hold() -> None:
    """32 requests of 32 devices under a constraint (1,024 picks deep) and `All` on a node of 40 devices are both
    refused with a reason, not searched (Python's recursion limit) nor allocated past AllocationResultsMaxSize."""
    many = [slice_(f"s{j}", "n0", [device(f"g{j}-{i}", type="gpu") for i in range(128)], pool=f"p{j}")
            for j in range(8)]
    deep = claim("c", *(request(f"r{i}", "gpu", count=32) for i in range(32)), match=[(f"{DRIVER}/type", [])])
    c = cluster(nodes=0, claims=[deep])
    c["slices"] = many
    (reason,) = allocator(c).tentative().fits(ref("p"), claims_of("p", ("x", "c", "")), "n0", {})
    assert isinstance(reason, R.ClaimUnusable) and "1024 devices" in reason.problem
    c = cluster(nodes=1, per_node=40, claims=[claim("c", request("g", "gpu", mode="All"))])
    trial = allocator(c).tentative()
    (reason,) = trial.place(ref("p"), claims_of("p", ("x", "c", "")), "n0", {})
    assert isinstance(reason, R.ClaimUnusable) and "40 devices" in reason.problem and trial.plan() == []
    c = cluster(nodes=1, per_node=32, claims=[claim("c", request("g", "gpu", mode="All"))])
    trial = allocator(c).tentative()
    assert trial.place(ref("p"), claims_of("p", ("x", "c", "")), "n0", {}) == ()
    assert len(devices(trial.plan()[0].allocation)) == 32


def test_all_mode_waits_while_a_pool_the_node_reaches_is_being_updated() -> None:
    """Generation 2 of n0's pool says 2 slices and one is published: `All` would take a subset, so it waits;
    `ExactCount` takes from what is published; n1's complete pool is not concerned."""
    c = cluster(nodes=2, per_node=2, claims=[claim("all", request("g", "gpu", mode="All")),
                                             claim("one", request("g", "gpu"))])
    first = c["slices"][0]
    first["spec"]["pool"].update(generation=2, resourceSliceCount=2)
    a = allocator(c)
    (reason,) = a.tentative().fits(ref("p"), claims_of("p", ("x", "all", "")), "n0", {})
    assert isinstance(reason, R.ClaimUnusable) and f"pool {DRIVER}/n0 is being updated" in reason.problem
    assert a.tentative().fits(ref("p"), claims_of("p", ("x", "one", "")), "n0", {}) == ()
    assert a.tentative().fits(ref("p"), claims_of("p", ("x", "all", "")), "n1", {}) == ()


def test_device_taints_are_not_read_so_a_tainted_device_is_allocated() -> None:
    """A difference from Kubernetes (DRADeviceTaints): a device tainted NoSchedule is allocated here."""
    tainted = device("gpu-0", type="gpu")
    tainted["taints"] = [{"key": "broken", "value": "ecc", "effect": "NoSchedule"}]
    c = cluster(nodes=0, claims=[claim("c", request("g", "gpu"))])
    c["slices"] = [slice_("n0-gpus", "n0", [tainted])]
    t = allocator(c).tentative()
    assert t.place(ref("p"), claims_of("p", ("x", "c", "")), "n0", {}) == ()
    assert devices(t.plan()[0].allocation) == ["gpu-0"]


def test_shared_counters_are_not_read_so_partitions_of_one_gpu_are_both_allocated() -> None:
    """A difference from Kubernetes (partitionable devices): two partitions that each consume the whole of one
    counter are both allocated here; Kubernetes would allocate one."""
    parts = [device(f"gpu-0-half-{i}", type="gpu") for i in range(2)]
    for part in parts:
        part["consumesCounters"] = [{"counterSet": "gpu-0", "counters": {"memory": {"value": "80Gi"}}}]
    raw = slice_("n0-gpus", "n0", parts)
    raw["spec"]["sharedCounters"] = [{"name": "gpu-0", "counters": {"memory": {"value": "80Gi"}}}]
    c = cluster(nodes=0, claims=[claim("c", request("g", "gpu", count=2))])
    c["slices"] = [raw]
    t = allocator(c).tentative()
    assert t.place(ref("p"), claims_of("p", ("x", "c", "")), "n0", {}) == ()
    assert sorted(devices(t.plan()[0].allocation)) == ["gpu-0-half-0", "gpu-0-half-1"]
