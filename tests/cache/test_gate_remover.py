"""The cache's removal of Volcano's queue-allocation gate (`cache/gates.py`): one JSON Patch that the apiserver
applies only to the pod the cycle decided for and only while that gate is its one gate; sent only while this
replica may write; a refusal is logged and left for the next cycle to decide again."""

from __future__ import annotations

import copy
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import jsonpatch
import pytest

from scheduler.api.fields import QUEUE_ALLOCATION_GATE
from scheduler.cache.gates import JSON_PATCH, GateRemover
from scheduler.cache.kube import KubeError
from scheduler.cache.store import Stores

KEY = "ns/p"


def served_pod(uid: str = "u1", gates: tuple[str, ...] = (QUEUE_ALLOCATION_GATE,), rv: int = 5) -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": "ns", "uid": uid, "resourceVersion": str(rv)},
            "spec": {"schedulingGates": [{"name": g} for g in gates]}}


class FakeApiserver:
    """Applies a JSON Patch to the one pod it serves, as the apiserver does: a failed `test` is a 422."""

    def __init__(self, pod: dict[str, Any]) -> None:
        self.pod = pod
        self.sent: list[Any] = []

    def request(self, method: str, path: str, *, body: Any = None, content_type: str | None = None,
                **_: object) -> dict[str, Any]:
        assert (method, path, content_type) == ("PATCH", "/api/v1/namespaces/ns/pods/p", JSON_PATCH)
        self.sent.append(copy.deepcopy(body))
        try:
            patched = jsonpatch.apply_patch(self.pod, body)
        except (jsonpatch.JsonPatchTestFailed, jsonpatch.JsonPointerException) as exc:
            raise KubeError(422, method, path, str(exc).encode()) from None
        patched["metadata"]["resourceVersion"] = str(int(patched["metadata"]["resourceVersion"]) + 1)
        self.pod = patched
        return copy.deepcopy(patched)


def remove(server: FakeApiserver, decided_uid: str, *, may_write: bool = True) -> Stores:
    stores = Stores()
    stores.pods.objects[KEY] = copy.deepcopy(server.pod)
    with ThreadPoolExecutor(1) as pool:
        remover = GateRemover(server, stores, pool, lambda: may_write)  # type: ignore[arg-type]
        for future in remover.submit([KEY], lambda key: decided_uid):
            future.result()
    return stores


def test_the_gate_goes_and_the_cache_sees_it() -> None:
    server = FakeApiserver(served_pod())
    stores = remove(server, "u1")
    assert "schedulingGates" not in server.pod["spec"]
    assert "schedulingGates" not in stores.pods.objects[KEY]["spec"]


@pytest.mark.parametrize(("pod", "why"), [
    (served_pod(gates=(QUEUE_ALLOCATION_GATE, "example.com/other")), "another gate remains"),
    (served_pod(gates=("example.com/other", QUEUE_ALLOCATION_GATE)), "another gate remains"),
    (served_pod(uid="u2"), "a pod recreated under that name"),
])
def test_the_apiserver_refuses_and_nothing_changes(pod, why) -> None:
    server = FakeApiserver(pod)
    before = copy.deepcopy(pod)
    stores = remove(server, "u1")
    assert len(server.sent) == 1, why
    assert server.pod == before and stores.pods.objects[KEY] == before, why


def test_nothing_is_sent_by_a_replica_that_may_not_write() -> None:
    server = FakeApiserver(served_pod())
    remove(server, "u1", may_write=False)
    assert server.sent == []
