"""Seeded random slices and claims: an allocation never gives one device twice (within a gang, or against what
other claims hold), every device it gives satisfies its class's and its request's selectors and is reachable
from the node, counts are exact, and matchAttribute holds."""

from __future__ import annotations

from itertools import combinations, permutations

from hypothesis import given, settings, strategies as st

from scheduler.api.dra import (
    ALL,
    EXACT_COUNT,
    Allocation,
    ClaimSpec,
    Device,
    DeviceClass,
    DeviceRequest,
    MatchAttribute,
    PodClaim,
    PodClaims,
    ResourceClaim,
    ResourceSlice,
)
from scheduler.dra.allocator import Allocator, PodRef

DRV = "gpu.example.com"
MODELS = ("a100", "h100")
CLASSES = {
    "any": DeviceClass("any", (f'device.driver == "{DRV}"',)),
    "big": DeviceClass("big", (f'device.capacity["{DRV}"].memory.compareTo(quantity("40Gi")) >= 0',)),
}
REQUEST_SELECTORS = ((), (f'device.attributes["{DRV}"].model == "a100"',), (f'device.attributes["{DRV}"].numa == 1',))


def model_of(d: Device) -> object:
    return d.attributes[DRV]["model"]


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[list[ResourceSlice], list[ResourceClaim], list[str]]:
    nodes = [f"n{i}" for i in range(draw(st.integers(1, 4)))]
    slices = []
    for node in nodes:
        devs = tuple(Device(f"d{i}", {DRV: {"model": draw(st.sampled_from(MODELS)), "numa": draw(st.integers(0, 1))}},
                            {DRV: {"memory": draw(st.sampled_from((20, 40, 80))) * 2**30}})
                     for i in range(draw(st.integers(0, 6))))
        slices.append(ResourceSlice(f"{node}-s", DRV, node, 1, 1, node_name=node, devices=devs))
    claims = []
    for c in range(draw(st.integers(1, 8))):
        reqs = []
        for r in range(draw(st.integers(1, 3))):
            mode = draw(st.sampled_from((EXACT_COUNT, EXACT_COUNT, ALL)))
            reqs.append(DeviceRequest(f"r{r}", draw(st.sampled_from(sorted(CLASSES))),
                                      draw(st.sampled_from(REQUEST_SELECTORS)), mode,
                                      draw(st.integers(1, 3)) if mode == EXACT_COUNT else 0))
        match = (MatchAttribute(f"{DRV}/model"),) if draw(st.booleans()) else ()
        claims.append(ResourceClaim("default", f"c{c}", f"u{c}", ClaimSpec(tuple(reqs), match)))
    order = [draw(st.sampled_from(nodes)) for _ in claims]
    return slices, claims, order


@settings(max_examples=150, deadline=None, derandomize=True)
@given(scenarios(), st.lists(st.booleans(), min_size=8, max_size=8))
def test_allocations_are_distinct_and_satisfy_every_rule(case: tuple[list[ResourceSlice], list[ResourceClaim],
                                                                      list[str]], released: list[bool]) -> None:
    """Placed one after another (a pod released now and then, as a statement discards a task, and placed again
    elsewhere), the claims' devices are distinct, satisfy every rule, and are exactly the devices held."""
    slices, claims, order = case
    alloc = Allocator(slices, CLASSES.values(), claims)
    trial = alloc.tentative()
    for i, (claim, node) in enumerate(zip(claims, order, strict=True)):
        pod = PodRef("default", f"p{i}", f"pu{i}")
        trial.place(pod, PodClaims((PodClaim("x", claim.name),)), node, {})
        if released[i]:
            trial.release(pod)
            trial.place(pod, PodClaims((PodClaim("x", claim.name),)), order[-1 - i], {})
    by_id = alloc.inventory.by_id
    given_out = []
    specs = {c.name: c.spec for c in claims}
    for write in trial.plan():
        assert isinstance(write.allocation, Allocation)
        spec = specs[write.name]
        results = write.allocation.results
        for req in spec.requests:
            mine = [r for r in results if r.request == req.name]
            if req.mode == EXACT_COUNT:
                assert len(mine) == req.count
            else:
                assert mine
            for r in mine:
                cand = by_id[r.device]
                assert cand.slice.node_name == write.allocation.node  # reachable from the pod's node
                for expr in CLASSES[req.device_class].selectors + req.selectors:
                    assert alloc.selectors.matches(expr, cand.device, DRV)
        if spec.constraints:
            assert len({model_of(by_id[r.device].device) for r in results}) == 1
        given_out += [r.device for r in results]
    assert len(given_out) == len(set(given_out))  # never one device twice
    assert set(given_out) == trial.held


@settings(max_examples=80, deadline=None, derandomize=True)
@given(scenarios())
def test_a_claim_is_refused_only_when_no_choice_exists(case: tuple[list[ResourceSlice], list[ResourceClaim],
                                                                     list[str]]) -> None:
    """Alone on the cluster, an ExactCount claim is placed on a node exactly when a brute force over the node's
    devices finds a choice meeting every selector and the constraint (the search misses none)."""
    slices, claims, order = case
    for claim, node in zip(claims, order, strict=True):
        if any(r.mode == ALL for r in claim.spec.requests):
            continue
        alloc = Allocator(slices, CLASSES.values(), [claim])
        refused = alloc.tentative().place(PodRef("default", "p", "u"), PodClaims((PodClaim("x", claim.name),)),
                                          node, {})
        devs = list(alloc.inventory.devices(node, {}))
        slots = [r for r in claim.spec.requests for _ in range(r.count)]
        if len(slots) > len(devs):
            assert refused
            continue

        def ok(req: DeviceRequest, d: Device, alloc: Allocator = alloc) -> bool:
            return all(alloc.selectors.matches(e, d, DRV) for e in CLASSES[req.device_class].selectors + req.selectors)

        possible = any(
            all(ok(r, c.device) for r, c in zip(slots, perm, strict=True))
            and (not claim.spec.constraints or len({model_of(c.device) for c in perm}) == 1)
            for chosen in combinations(devs, len(slots)) for perm in permutations(chosen))
        assert (refused == ()) == possible
