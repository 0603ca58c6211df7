"""A pod's DRA claims reach its task through the field table, and the DRA objects reach the snapshot."""

from __future__ import annotations

import pytest
from dra_objects import device, pod, slice_

from scheduler.adapter.snapshot import AdapterRules, SnapshotInputs, build_snapshot
from scheduler.api.convert import task_from_pod
from scheduler.api.dra import DraObjects, PodClaim, PodClaims
from scheduler.api.dra_parse import slice_from_object
from scheduler.api.field_parsers import FieldError
from scheduler.sim.objects import pod_object


def test_a_pods_claims_and_generated_names_are_on_its_task() -> None:
    raw = pod("p", [("gpu", "", "one-gpu"), ("nic", "shared", "")], generated=[("gpu", "p-gpu-x7")])
    task = task_from_pod(raw)
    assert task.device_claims == PodClaims((PodClaim("gpu", "", "one-gpu"), PodClaim("nic", "shared", "")),
                                           (("gpu", "p-gpu-x7"),))
    assert task.clone().device_claims == task.device_claims
    assert task_from_pod(pod("q", [])).device_claims is None


@pytest.mark.parametrize("bad, problem", [
    ([{"name": "gpu"}], "sets not exactly one"),
    ([{"name": "a", "resourceClaimName": "c"}, {"name": "a", "resourceClaimName": "d"}], "names a claim twice"),
    ([{"name": "x" * 64, "resourceClaimName": "c"}], "[0].name"),
    ("not a list", "list"),
])
def test_an_unreadable_claim_list_leaves_the_pod_out_with_the_field(bad: object, problem: str) -> None:
    raw = pod("p", [])
    raw["spec"]["resourceClaims"] = bad
    with pytest.raises(FieldError) as err:
        task_from_pod(raw)
    assert err.value.reason.path == "spec.resourceClaims" and problem in err.value.reason.problem


def test_the_snapshot_carries_the_dra_objects_when_a_pending_pod_names_claims() -> None:
    """Only then: a session without such a pod keeps bulk placement (the DRA filter is per placement)."""
    dra = DraObjects(slices=(slice_from_object(slice_("n0-gpus", "n0", [device("gpu-0")])),))
    rules = AdapterRules(frozenset({"volcano-py"}))
    with_claims = pod_object("p", namespace="default")
    with_claims["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "c"}]
    plain = pod_object("q", namespace="default")
    records = [(with_claims, task_from_pod(with_claims)), (plain, task_from_pod(plain))]
    assert build_snapshot(SnapshotInputs([], [], [], records, 0.0, dra=dra), rules).dra is dra
    assert build_snapshot(SnapshotInputs([], [], [], records[1:], 0.0, dra=dra), rules).dra is None
    assert build_snapshot(SnapshotInputs([], [], [], records, 0.0), rules).dra is None


def test_a_cycle_without_a_pending_pod_naming_claims_does_not_read_the_dra_objects() -> None:
    """The cache hands the snapshot a reader: a cycle whose pending pods name no claims never calls it (it walks
    every slice and claim of the cluster), one with such a pod calls it once."""
    dra = DraObjects(slices=(slice_from_object(slice_("n0-gpus", "n0", [device("gpu-0")])),))
    rules = AdapterRules(frozenset({"volcano-py"}))
    with_claims = pod_object("p", namespace="default")
    with_claims["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "c"}]
    plain = pod_object("q", namespace="default")
    records = [(with_claims, task_from_pod(with_claims)), (plain, task_from_pod(plain))]
    reads: list[int] = []

    def read() -> DraObjects:
        reads.append(1)
        return dra

    assert build_snapshot(SnapshotInputs([], [], [], records[1:], 0.0, dra=read), rules).dra is None
    assert reads == []
    assert build_snapshot(SnapshotInputs([], [], [], records, 0.0, dra=read), rules).dra is dra
    assert reads == [1]
