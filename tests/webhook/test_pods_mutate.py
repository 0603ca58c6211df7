"""`/pods/mutate` (Volcano's pkg/webhooks/admission/pods/mutate/mutate_pod.go `patchSchedulingGates`): with
SchedulingGatesQueueAdmission, an opted-in pod gets the queue-allocation gate, once, after the gates it has."""

from __future__ import annotations

import base64
import json
from typing import Any

import jsonpatch
import pytest

from scheduler.api.fields import QUEUE_ALLOCATION_GATE
from scheduler.webhook.pods import review_pod
from scheduler.webhook.server import handlers

GATE = {"name": QUEUE_ALLOCATION_GATE}


def review(pod: dict[str, Any], operation: str = "CREATE") -> dict[str, Any]:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u1", "operation": operation, "object": pod}}


def pod(annotation: str | None = "true", gates: list[dict[str, str]] | None = None,
        scheduler: str = "volcano") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p", "namespace": "ns"}
    if annotation is not None:
        meta["annotations"] = {QUEUE_ALLOCATION_GATE: annotation}
    spec: dict[str, Any] = {"schedulerName": scheduler, "containers": [{"name": "c", "image": "x"}]}
    if gates is not None:
        spec["schedulingGates"] = gates
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def mutated(answer: dict[str, Any], original: dict[str, Any]) -> dict[str, Any]:
    response = answer["response"]
    assert response["allowed"] is True and response["uid"] == "u1"
    if "patch" not in response:
        return original
    assert response["patchType"] == "JSONPatch"
    return jsonpatch.apply_patch(original, json.loads(base64.b64decode(response["patch"])))


@pytest.mark.parametrize(("gates", "wanted"), [
    (None, [GATE]),
    ([], [GATE]),
    ([{"name": "example.com/other"}], [{"name": "example.com/other"}, GATE]),
    ([GATE], [GATE]),  # never twice
])
def test_an_opted_in_pod_gets_the_gate(gates, wanted) -> None:
    original = pod(gates=gates)
    assert mutated(review_pod(review(original), True), original)["spec"]["schedulingGates"] == wanted


@pytest.mark.parametrize("scheduler", ["volcano", "default-scheduler"])  # Volcano does not look at it
def test_any_scheduler_name(scheduler) -> None:
    original = pod(scheduler=scheduler)
    assert mutated(review_pod(review(original), True), original)["spec"]["schedulingGates"] == [GATE]


@pytest.mark.parametrize(("annotation", "feature", "operation"), [
    ("true", False, "CREATE"),  # the feature gate is off
    (None, True, "CREATE"),  # not opted in
    ("True", True, "CREATE"),  # exactly "true", as Volcano compares it
    ("false", True, "CREATE"),
    ("true", True, "UPDATE"),
])
def test_the_pod_is_left_alone(annotation, feature, operation) -> None:
    original = pod(annotation=annotation)
    answer = review_pod(review(original, operation), feature)
    assert "patch" not in answer["response"] and mutated(answer, original) == original


def test_the_route_follows_the_feature_gate() -> None:
    original = pod()
    for feature, wanted in ((True, [GATE]), (False, None)):
        route = handlers(None, ["/pods/mutate"], queue_allocation_gate=feature)["/pods/mutate"]  # type: ignore[arg-type]
        assert mutated(route(review(original)), original)["spec"].get("schedulingGates") == wanted
