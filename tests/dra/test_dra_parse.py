"""The DRA objects are read once at the edge: typed values, bounds, a typed reason for a bad object."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from dra_objects import DRIVER, claim, device, device_class, pod, request, slice_, template

from scheduler.api import dra as D
from scheduler.api.dra_parse import (
    claim_from_object,
    class_from_object,
    pod_claims_from_object,
    slice_from_object,
    template_from_object,
)
from scheduler.api.field_parsers import FieldError


def test_slice_devices_attributes_and_capacity_by_domain() -> None:
    raw = slice_("n1-gpus", "n1", [device("gpu-0", model="a100", index=0, memory="80Gi"),
                                   device("gpu-1", model="a100", index=1, memory="80Gi")])
    raw["spec"]["devices"][0]["attributes"]["other.io/numa"] = {"int": 1}
    s = slice_from_object(raw)
    assert (s.driver, s.pool, s.node_name, s.all_nodes) == (DRIVER, "n1", "n1", False)
    gpu0 = s.devices[0]
    assert gpu0.attributes[DRIVER] == {"model": "a100", "index": 0}
    assert gpu0.attributes["other.io"] == {"numa": 1}
    assert gpu0.capacity[DRIVER]["memory"] == 80 * 2**30
    assert gpu0.attribute(f"{DRIVER}/model", DRIVER) == "a100"
    assert gpu0.attribute("model", DRIVER) == "a100"
    assert s.on_node("n1", {}) and not s.on_node("n2", {})


def test_slice_node_selector_and_all_nodes() -> None:
    raw = slice_("net", "", [device("d0")], pool="net")
    del raw["spec"]["nodeName"]
    raw["spec"]["nodeSelector"] = {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "rack", "operator": "In", "values": ["r1"]}]}]}
    s = slice_from_object(raw)
    assert s.on_node("a", {"rack": "r1"}) and not s.on_node("b", {"rack": "r2"})
    assert slice_from_object(slice_("all", "", [device("d0")], all_nodes=True)).on_node("any", {})


def test_a_slice_node_selector_with_several_terms_is_read_as_their_or() -> None:
    """A difference from Kubernetes, whose allocator refuses a slice selector of more than one term."""
    raw = slice_("net", "", [device("d0")], pool="net")
    del raw["spec"]["nodeName"]
    raw["spec"]["nodeSelector"] = {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "rack", "operator": "In", "values": [r]}]} for r in ("r1", "r2")]}
    s = slice_from_object(raw)
    assert [s.on_node(n, {"rack": r}) for n, r in (("a", "r1"), ("b", "r2"), ("c", "r3"))] == [True, True, False]


@pytest.mark.parametrize("mutate, path", [
    (lambda o: o["spec"].update(devices=[device(f"d{i}") for i in range(D.DEVICES_PER_SLICE_MAX + 1)]),
     "spec.devices"),
    (lambda o: o["spec"].update(allNodes=True), "spec"),
    (lambda o: o["spec"]["devices"][0]["attributes"].update(x={"int": 2**64}), "spec.devices[0].attributes[x].int"),
    (lambda o: o["spec"]["devices"][0]["attributes"].update(x={"int": 1, "bool": True}),
     "spec.devices[0].attributes[x]"),
    (lambda o: o["spec"]["devices"][0]["capacity"].update(m={"value": "lots"}), "spec.devices[0].capacity[m].value"),
    (lambda o: o["spec"]["devices"].append(device("gpu-0")), "spec.devices"),
    (lambda o: o["spec"].update(driver=7), "spec.driver"),
])
def test_bad_slice_is_refused_with_a_typed_reason(mutate: Any, path: str) -> None:
    raw = slice_("s", "n1", [device("gpu-0", model="a")])
    raw = copy.deepcopy(raw)
    mutate(raw)
    with pytest.raises(FieldError) as err:
        slice_from_object(raw)
    reason = err.value.reason
    assert (reason.object_kind, reason.name, reason.path) == ("ResourceSlice", "s", path)


def test_class_and_claim_requests_constraints_and_status() -> None:
    cls = class_from_object(device_class("gpu", f'device.driver == "{DRIVER}"'))
    assert cls == D.DeviceClass("gpu", (f'device.driver == "{DRIVER}"',))
    raw = claim("c", request("a", "gpu", "true", count=2), request("b", "gpu", mode="All", admin=True),
                match=[(f"{DRIVER}/model", ["a", "b"])],
                status={"allocation": {"devices": {"results": [
                    {"request": "a", "driver": DRIVER, "pool": "n1", "device": "gpu-0"}]},
                    "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                        {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}},
                    "reservedFor": [{"resource": "pods", "name": "p", "uid": "u1"}]})
    c = claim_from_object(raw)
    assert c.spec.requests == (D.DeviceRequest("a", "gpu", ("true",), D.EXACT_COUNT, 2, False),
                               D.DeviceRequest("b", "gpu", (), D.ALL, 0, True))
    assert c.spec.constraints == (D.MatchAttribute(f"{DRIVER}/model", ("a", "b")),)
    assert c.allocation == D.Allocation((D.DeviceResult("a", D.DeviceId(DRIVER, "n1", "gpu-0")),), "n1", ())
    assert c.reserved_for == (D.Consumer("pods", "p", "u1"),)
    assert c.key == "default/c" and not c.deleting


def test_v1beta1_request_shape_is_read() -> None:
    raw = claim("c")
    raw["spec"]["devices"]["requests"] = [{"name": "a", "deviceClassName": "gpu", "count": 3}]
    assert claim_from_object(raw).spec.requests == (D.DeviceRequest("a", "gpu", (), D.EXACT_COUNT, 3),)


@pytest.mark.parametrize("mutate, path", [
    (lambda o: o["spec"]["devices"]["requests"][0]["exactly"].update(count=0),
     "spec.devices.requests[0].exactly.count"),
    (lambda o: o["spec"]["devices"]["requests"][0]["exactly"].update(count=D.COUNT_MAX + 1),
     "spec.devices.requests[0].exactly.count"),
    (lambda o: o["spec"]["devices"]["requests"][0]["exactly"].update(allocationMode="Some"),
     "spec.devices.requests[0].exactly.allocationMode"),
    (lambda o: o["spec"]["devices"]["requests"][0].update(firstAvailable=[]),
     "spec.devices.requests[0].firstAvailable"),
    (lambda o: o["spec"]["devices"]["requests"][0]["exactly"].update(
        selectors=[{"cel": {"expression": "x" * (D.CEL_MAX + 1)}}]),
     "spec.devices.requests[0].exactly.selectors[0].cel.expression"),
    (lambda o: o["spec"]["devices"].update(constraints=[{"matchAttribute": "model"}]),
     "spec.devices.constraints[0].matchAttribute"),
    (lambda o: o["spec"]["devices"].update(constraints=[{"matchAttribute": "a.io/m", "requests": ["zz"]}]),
     "spec.devices.constraints[0].requests"),
    (lambda o: o.update(status={"reservedFor": [{"resource": "pods", "name": "p", "uid": f"u{i}"}
                                                for i in range(D.RESERVED_FOR_MAX + 1)]}), "status.reservedFor"),
])
def test_bad_claim_is_refused_with_a_typed_reason(mutate: Any, path: str) -> None:
    raw = claim("c", request("a", "gpu"))
    mutate(raw)
    with pytest.raises(FieldError) as err:
        claim_from_object(raw)
    assert (err.value.reason.object_kind, err.value.reason.name, err.value.reason.path) == \
        ("ResourceClaim", "default/c", path)


def test_template_and_pod_claims() -> None:
    t = template_from_object(template("t", request("gpu", "gpu", count=2)))
    assert t.key == "default/t" and t.spec.requests[0].count == 2
    p = pod_claims_from_object(pod("p", [("one", "shared", ""), ("own", "", "t")], generated=[("own", "p-own-x")]))
    assert p.claims == (D.PodClaim("one", "shared", ""), D.PodClaim("own", "", "t"))
    assert [p.claim_name(c) for c in p.claims] == ["shared", "p-own-x"]
    assert pod_claims_from_object(pod("q", [("own", "", "t")])).claim_name(D.PodClaim("own", "", "t")) == ""
    with pytest.raises(FieldError) as err:
        pod_claims_from_object(pod("r", [("both", "c", "t")]))
    assert err.value.reason.path == "spec.resourceClaims[0]"
