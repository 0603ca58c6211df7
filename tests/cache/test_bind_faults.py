"""What the binder does when the apiserver's answer is a fault (issue 22), without a control plane: a bind names its
pod's UID, a bind with no answer is checked before it counts as failed. tests/chaos/test_api_faults.py runs the
same faults through a proxy against a real apiserver."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
import urllib3

from scheduler.cache.binder import Binder
from scheduler.cache.kube import KubeError
from scheduler.cache.store import Stores

BIND = "/api/v1/namespaces/ns/pods/p/binding"


class FakeKube:
    """Answers a bind with `bind_answer` (an exception to raise, or None for success) and a GET of the pod with
    `pod`; records what was sent."""

    request_timeout = 5.0

    def __init__(self, bind_answer: Exception | None, pod: dict | None = None):
        self.bind_answer, self.pod = bind_answer, pod
        self.sent: list[tuple[str, str, dict | None]] = []

    def request(self, method, path, *, body=None, **_):
        self.sent.append((method, path, body))
        if path == BIND and self.bind_answer is not None:
            raise self.bind_answer
        return {}

    def get_or_none(self, path: str) -> dict | None:
        self.sent.append(("GET", path, None))
        return self.pod

    def close_streams(self) -> None: ...

    def close(self) -> None: ...


class Events:
    def __init__(self) -> None:
        self.recorded: list[tuple] = []

    def record(self, *args: object) -> None:
        self.recorded.append(args)


def binder(kube: FakeKube) -> tuple[Binder, Stores, Events]:
    stores, events = Stores(), Events()
    stores.pods.objects["ns/p"] = {"metadata": {"name": "p", "namespace": "ns", "uid": "u1"}, "spec": {}}
    return Binder(kube, stores, ThreadPoolExecutor(1), events, lambda: True), stores, events  # type: ignore[arg-type]


def bound_pod(node: str, uid: str) -> dict:
    return {"metadata": {"name": "p", "namespace": "ns", "uid": uid}, "spec": {"nodeName": node}}


def test_a_binding_names_the_uid_of_the_pod_the_cycle_decided_for():
    kube = FakeKube(None)
    b, _, _ = binder(kube)
    assert b.bind("ns/p", "n1", now=0.0, uid="u1")
    (method, path, body), = kube.sent
    assert (method, path, body["metadata"]["uid"], body["target"]["name"]) == ("POST", BIND, "u1", "n1")


def test_a_bind_refused_409_fails_without_asking_again():
    kube = FakeKube(KubeError(409, "POST", BIND, b'{"reason": "Conflict"}'))
    b, stores, events = binder(kube)
    assert not b.bind("ns/p", "n1", now=0.0, uid="u1")
    assert [m for m, _, _ in kube.sent] == ["POST"] and stores.assumed == {} and events.recorded == []


@pytest.mark.parametrize("fault", [urllib3.exceptions.ReadTimeoutError(None, BIND, "read timed out"),
                                   urllib3.exceptions.ProtocolError("connection reset"),
                                   KubeError(500, "POST", BIND, b"{}")])
def test_a_bind_without_an_answer_that_was_carried_out_counts_as_done(fault):
    kube = FakeKube(fault, bound_pod("n1", "u1"))
    b, stores, events = binder(kube)
    assert b.bind("ns/p", "n1", now=7.0, uid="u1")
    assert stores.assumed == {"ns/p": ("n1", 7.0)}
    assert [e[3] for e in events.recorded] == ["Scheduled"]


@pytest.mark.parametrize("pod", [None, {"metadata": {"uid": "u1"}, "spec": {}}, bound_pod("n2", "u1"),
                                 bound_pod("n1", "u2")], ids=["gone", "pending", "elsewhere", "another-pod"])
def test_a_bind_without_an_answer_not_carried_out_fails(pod):
    kube = FakeKube(urllib3.exceptions.ReadTimeoutError(None, BIND, "read timed out"), pod)
    b, stores, events = binder(kube)
    assert not b.bind("ns/p", "n1", now=7.0, uid="u1")
    assert stores.assumed == {} and events.recorded == []


@pytest.mark.parametrize(("bound_by", "counts"), [("me", True), ("standby", False), (None, False)])
def test_with_the_fence_a_bind_without_an_answer_counts_only_if_this_replica_sent_it(bound_by, counts):
    """The frozen-leader chaos test: a leader woken after a takeover found its pod bound to the node it wanted, by
    the standby that had placed it the same way, and sent a second `Scheduled` event for it."""
    from scheduler.cache.leader import BOUND_BY_ANNOTATION, LEASE_ANNOTATION

    pod = bound_pod("n1", "u1")
    if bound_by:
        pod["metadata"]["annotations"] = {BOUND_BY_ANNOTATION: bound_by}
    kube = FakeKube(TimeoutError("timed out"), pod)
    b, stores, events = binder(kube)
    b.fence_annotations = {LEASE_ANNOTATION: "ns/lease", BOUND_BY_ANNOTATION: "me"}
    assert b.bind("ns/p", "n1", now=7.0, uid="u1") is counts
    assert [e[3] for e in events.recorded] == (["Scheduled"] if counts else [])


def test_the_cache_binds_the_uid_its_snapshot_saw_not_the_pod_recreated_since():
    from scheduler.api.snapshot import CycleResult, GangBind
    from scheduler.cache.cluster_cache import ClusterCache

    def pod(uid: str) -> dict:
        return {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "p", "namespace": "ns", "uid": uid, "resourceVersion": uid[1:]},
                "spec": {"schedulerName": "volcano-py", "containers": [{"name": "c"}]}, "status": {"phase": "Pending"}}

    cache = ClusterCache(None)
    kube = FakeKube(KubeError(409, "POST", BIND, b"{}"))
    cache.kube = kube  # type: ignore[assignment]
    cache.pods.objects["ns/p"] = pod("u1")
    cache.snapshot()
    cache.pods.objects["ns/p"] = pod("u2")  # deleted and recreated under the same name, as the watch shows it
    try:
        cache.apply(CycleResult(binds=[GangBind("ns/p", (("ns/p", "n1"),))]))
    finally:
        cache.stop(timeout=1.0)
    binds = [body for method, path, body in kube.sent if path == BIND]
    assert [b["metadata"]["uid"] for b in binds] == ["u1"]
