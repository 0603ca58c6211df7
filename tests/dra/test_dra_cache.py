"""The cache keeps the four DRA kinds and reads them once per resourceVersion; a bad one is left out, logged once."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from dra_objects import claim, device, device_class, request, slice_, template

from scheduler.api.convert import key_of
from scheduler.cache.dra import DraReader
from scheduler.cache.store import Stores


def put(stores: Stores, kind: str, obj: dict[str, Any], rv: str = "1") -> None:
    obj["metadata"]["resourceVersion"] = rv
    w = {"ResourceSlice": stores.resource_slices, "DeviceClass": stores.device_classes,
         "ResourceClaim": stores.resource_claims, "ResourceClaimTemplate": stores.claim_templates}[kind]
    w.objects[key_of(obj)] = obj


def test_the_four_kinds_are_watched_at_resource_k8s_io_v1() -> None:
    stores = Stores()
    assert [(w.kind, w.path, w.optional) for w in stores.dra] == [
        ("ResourceSlice", "/apis/resource.k8s.io/v1/resourceslices", True),
        ("DeviceClass", "/apis/resource.k8s.io/v1/deviceclasses", True),
        ("ResourceClaim", "/apis/resource.k8s.io/v1/resourceclaims", True),
        ("ResourceClaimTemplate", "/apis/resource.k8s.io/v1/resourceclaimtemplates", True)]
    assert all(w in stores.watched for w in stores.dra)


def test_nothing_is_modelled_until_the_four_kinds_are_listed() -> None:
    stores, reader = Stores(), DraReader()
    put(stores, "ResourceSlice", slice_("n0-gpus", "n0", [device("gpu-0")]))
    for w in stores.dra[:3]:
        w.listed = True
    assert reader.read(stores) is None
    stores.claim_templates.listed = True
    objs = reader.read(stores)
    assert objs is not None and [s.name for s in objs.slices] == ["n0-gpus"]


def listed() -> Stores:
    stores = Stores()
    for w in stores.dra:
        w.listed = True
    return stores


def test_read_parses_once_per_version_and_leaves_a_bad_object_out(caplog: pytest.LogCaptureFixture) -> None:
    stores, reader = listed(), DraReader()
    put(stores, "ResourceSlice", slice_("n0-gpus", "n0", [device("gpu-0")]))
    put(stores, "DeviceClass", device_class("gpu", "true"))
    put(stores, "ResourceClaim", claim("c", request("g", "gpu")))
    put(stores, "ResourceClaimTemplate", template("t", request("g", "gpu")))
    bad = claim("bad", request("g", "gpu", count=0))
    put(stores, "ResourceClaim", bad)
    with caplog.at_level(logging.WARNING, logger="scheduler.cache.dra"):
        first = reader.read(stores)
        second = reader.read(stores)
    assert [s.name for s in first.slices] == ["n0-gpus"] and [c.name for c in first.classes] == ["gpu"]
    assert [c.key for c in first.claims] == ["default/c"] and [t.key for t in first.templates] == ["default/t"]
    assert second.slices[0] is first.slices[0]  # parsed once
    assert reader.problems[("ResourceClaim", "default/bad")].path == "spec.devices.requests[0].exactly.count"
    assert len([r for r in caplog.records if "default/bad" in r.getMessage()]) == 1
    bad["spec"]["devices"]["requests"][0]["exactly"]["count"] = 1
    put(stores, "ResourceClaim", bad, rv="2")
    assert sorted(c.key for c in reader.read(stores).claims) == ["default/bad", "default/c"]
    assert ("ResourceClaim", "default/bad") not in reader.problems
    del stores.resource_slices.objects["n0-gpus"]
    assert reader.read(stores).slices == ()
