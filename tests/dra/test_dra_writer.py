"""The binder writes a gang's DRA claims before its pods: allocation and reservedFor (the pods' UIDs added), on
the resourceVersion the decision was made on; a refused write releases what the gang wrote and binds no pod."""

from __future__ import annotations

import copy
from typing import Any

from dra_objects import DRIVER, claim, request

from scheduler.api.dra import Allocation, ClaimWrite, Consumer, DeviceId, DeviceResult
from scheduler.api.dra_parse import claim_from_object
from scheduler.api.snapshot import GangBind
from scheduler.cache.dra_writer import ClaimWriter
from scheduler.cache.kube import MERGE_PATCH, KubeError
from scheduler.cache.store import Stores

PATH = "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/{}/status"


class FakeApiserver:
    """Applies merge patches of a claim's status (a key set to None is removed); refuses the claims in `refuse`
    with 409, and a patch whose resourceVersion is not the claim's."""

    request_timeout = 30.0

    def __init__(self, claims: dict[str, dict[str, Any]], refuse: frozenset[str] = frozenset()) -> None:
        self.claims = claims
        self.refuse = refuse
        self.calls: list[tuple[str, Any]] = []

    def request(self, method: str, path: str, *, body: Any = None, content_type: str | None = None,
                **_: Any) -> dict[str, Any]:
        assert method == "PATCH" and content_type == MERGE_PATCH
        self.calls.append((path, copy.deepcopy(body)))
        name = path.split("/")[-2]
        obj = self.claims[name]
        version = (body.get("metadata") or {}).get("resourceVersion")
        if name in self.refuse or (version is not None and version != obj["metadata"]["resourceVersion"]):
            raise KubeError(409, method, path, b'{"message": "the object has been modified"}')
        status = obj.setdefault("status", {})
        for key, value in body["status"].items():
            if value is None:
                status.pop(key, None)
            else:
                status[key] = value
        obj["metadata"]["resourceVersion"] = str(int(obj["metadata"]["resourceVersion"]) + 1)
        return copy.deepcopy(obj)


def setup(refuse: frozenset[str] = frozenset()) -> tuple[ClaimWriter, FakeApiserver, Stores]:
    stores = Stores()
    claims = {}
    for name in ("a", "b"):
        raw = claim(name, request("g", "gpu"), namespace="ns")
        raw["metadata"]["resourceVersion"] = "5"
        stores.resource_claims.objects[f"ns/{name}"] = copy.deepcopy(raw)
        claims[name] = raw
    for pod in ("p", "q"):
        stores.pods.objects[f"ns/{pod}"] = {"metadata": {"name": pod, "namespace": "ns", "uid": f"uid-{pod}"}}
    server = FakeApiserver(claims, refuse)
    return ClaimWriter(server, stores, lambda: True), server, stores  # type: ignore[arg-type]


def write(name: str, pod: str, device: str) -> ClaimWrite:
    alloc = Allocation((DeviceResult("g", DeviceId(DRIVER, "n1", device)),), "n1")
    return ClaimWrite("ns", name, alloc, (Consumer("pods", pod, ""),))


def test_claims_are_allocated_and_reserved_with_the_pods_uids_on_their_version() -> None:
    writer, server, stores = setup()
    assert writer.write(GangBind("ns/g", (("ns/p", "n1"), ("ns/q", "n1")), (),
                                 (write("a", "p", "gpu-0"), write("b", "q", "gpu-1"))))
    for name, pod, device in (("a", "p", "gpu-0"), ("b", "q", "gpu-1")):
        back = claim_from_object(server.claims[name])
        assert back.allocation == write(name, pod, device).allocation
        assert back.reserved_for == (Consumer("pods", pod, f"uid-{pod}"),)
        assert claim_from_object(stores.resource_claims.objects[f"ns/{name}"]) == back  # the answer is kept
    assert [body["metadata"]["resourceVersion"] for _, body in server.calls] == ["5", "5"]


def test_the_binder_writes_the_status_only_and_adds_no_finalizer() -> None:
    """A difference from kube-scheduler, which also adds the resource.kubernetes.io/delete-protection finalizer
    (with it the claim controller deallocates a claim nobody holds any more): only status/ is patched here."""
    writer, server, _ = setup()
    assert writer.write(GangBind("ns/g", (("ns/p", "n1"),), (), (write("a", "p", "gpu-0"),)))
    assert [(path, sorted(body), body["metadata"]) for path, body in server.calls] == \
        [(PATH.format("a"), ["metadata", "status"], {"resourceVersion": "5"})]
    assert "finalizers" not in server.claims["a"]["metadata"]


def test_a_refused_write_releases_what_the_gang_wrote() -> None:
    writer, server, _ = setup(refuse=frozenset({"b"}))
    assert not writer.write(GangBind("ns/g", (("ns/p", "n1"), ("ns/q", "n1")), (),
                                     (write("a", "p", "gpu-0"), write("b", "q", "gpu-1"))))
    released = claim_from_object(server.claims["a"])
    assert released.allocation is None and released.reserved_for == ()
    assert [path for path, _ in server.calls] == [PATH.format("a"), PATH.format("b"), PATH.format("a")]


def test_a_claim_allocated_meanwhile_or_a_pod_gone_is_not_written() -> None:
    writer, server, stores = setup()
    stores.resource_claims.objects["ns/a"]["status"] = {"allocation": {"devices": {"results": []}}}
    assert not writer.write(GangBind("ns/g", (("ns/p", "n1"),), (), (write("a", "p", "gpu-0"),)))
    del stores.pods.objects["ns/q"]
    assert not writer.write(GangBind("ns/g", (("ns/q", "n1"),), (), (write("b", "q", "gpu-1"),)))
    assert server.calls == []


def test_a_shared_claim_keeps_its_consumers() -> None:
    writer, server, stores = setup()
    assert writer.write(GangBind("ns/g", (("ns/p", "n1"),), (), (write("a", "p", "gpu-0"),)))
    stores.resource_claims.objects["ns/a"] = copy.deepcopy(server.claims["a"])
    assert writer.write(GangBind("ns/h", (("ns/q", "n1"),), (), (ClaimWrite("ns", "a", None,
                                                                             (Consumer("pods", "q", ""),)),)))
    back = claim_from_object(server.claims["a"])
    assert back.reserved_for == (Consumer("pods", "p", "uid-p"), Consumer("pods", "q", "uid-q"))
    assert back.allocation == write("a", "p", "gpu-0").allocation


class ChangedMeanwhile(FakeApiserver):
    """Before refusing claim `b`, another writer adds a consumer to claim `a` (a new resourceVersion); with
    `fail`, claim `b`'s answer cannot be read at all."""

    def __init__(self, claims: dict[str, dict[str, Any]], *, fail: bool = False) -> None:
        super().__init__(claims, frozenset({"b"}))
        self.fail = fail

    def request(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
        if path == PATH.format("b"):
            if self.fail:
                raise RuntimeError("an answer nobody expected")
            a = self.claims["a"]
            a["status"]["reservedFor"].append({"resource": "pods", "name": "r", "uid": "uid-r"})
            a["metadata"]["resourceVersion"] = str(int(a["metadata"]["resourceVersion"]) + 1)
        return super().request(method, path, **kw)


def test_the_release_keeps_a_consumer_added_since_the_gang_wrote() -> None:
    _, plain, stores = setup()
    server = ChangedMeanwhile(plain.claims)
    writer = ClaimWriter(server, stores, lambda: True)  # type: ignore[arg-type]
    assert not writer.write(GangBind("ns/g", (("ns/p", "n1"), ("ns/q", "n1")), (),
                                     (write("a", "p", "gpu-0"), write("b", "q", "gpu-1"))))
    kept = claim_from_object(server.claims["a"])
    assert Consumer("pods", "r", "uid-r") in kept.reserved_for and kept.allocation is not None


def test_an_unreadable_answer_mid_gang_still_releases_what_the_gang_wrote() -> None:
    _, plain, stores = setup()
    server = ChangedMeanwhile(plain.claims, fail=True)
    writer = ClaimWriter(server, stores, lambda: True)  # type: ignore[arg-type]
    assert not writer.write(GangBind("ns/g", (("ns/p", "n1"), ("ns/q", "n1")), (),
                                     (write("a", "p", "gpu-0"), write("b", "q", "gpu-1"))))
    released = claim_from_object(server.claims["a"])
    assert released.allocation is None and released.reserved_for == ()
