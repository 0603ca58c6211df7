"""What the binder writes on a claim, and the release of a discarded plan, read back by the edge parser."""

from __future__ import annotations

from dra_objects import DRIVER, claim, request

from scheduler.api.dra import Allocation, ClaimWrite, Consumer, DeviceId, DeviceResult
from scheduler.api.dra_parse import claim_from_object
from scheduler.api.selectors import NodeSelectorTerm, Requirement
from scheduler.dra.status import release_patch, status_patch

P0, P1, P2 = (Consumer("pods", f"p{i}", f"u{i}") for i in range(3))


def applied(raw: dict, patch: dict) -> dict:
    status = dict(raw.get("status") or {})
    for k, v in patch["status"].items():
        if v is None:
            status.pop(k, None)
        else:
            status[k] = v
    return {**raw, "status": status}


def test_allocation_and_consumers_round_trip_through_the_parser() -> None:
    allocation = Allocation((DeviceResult("g", DeviceId(DRIVER, "n1", "gpu-0")),
                             DeviceResult("m", DeviceId(DRIVER, "n1", "gpu-1"), admin_access=True)), "n1")
    raw = claim("c", request("g", "gpu"), request("m", "gpu"))
    written = applied(raw, status_patch(ClaimWrite("default", "c", allocation, (P1, P2)), ()))
    back = claim_from_object(written)
    assert back.allocation == allocation and back.reserved_for == (P1, P2)
    wide = Allocation(allocation.results[:1], "", (NodeSelectorTerm((Requirement("rack", "In", ("r1",)),)),))
    back = claim_from_object(applied(raw, status_patch(ClaimWrite("default", "c", wide, (P0,)), ())))
    assert back.allocation == wide


def test_a_shared_claim_keeps_its_consumers_and_release_undoes_only_the_plan() -> None:
    allocation = Allocation((DeviceResult("g", DeviceId(DRIVER, "n1", "gpu-0")),), "n1")
    raw = applied(claim("c", request("g", "gpu")),
                  status_patch(ClaimWrite("default", "c", allocation, (P0,)), ()))
    write = ClaimWrite("default", "c", None, (P1, P2))
    added = claim_from_object(applied(raw, status_patch(write, (P0,))))
    assert added.reserved_for == (P0, P1, P2) and added.allocation == allocation
    released = claim_from_object(applied(raw, release_patch(write, (P0, P1, P2))))
    assert released.reserved_for == (P0,) and released.allocation == allocation
    fresh = ClaimWrite("default", "c", allocation, (P0,))
    gone = claim_from_object(applied(raw, release_patch(fresh, (P0,))))
    assert gone.reserved_for == () and gone.allocation is None
