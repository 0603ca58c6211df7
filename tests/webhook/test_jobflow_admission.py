"""volcano-py's /jobflows/validate refuses what Volcano's does (pkg/webhooks/admission/jobflows/validate/
validate_jobflow.go): a JobFlow whose dependsOn targets name no flow of it, or go round in a cycle."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.webhook.admission import admit_jobflow
from scheduler.webhook.server import handlers


def jobflow(*flows: tuple[str, list[str]], **entry: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "f", "namespace": "ns"},
        "spec": {"flows": [{"name": n, **({"dependsOn": {"targets": t}} if t else {}), **entry} for n, t in flows]},
    }


CASES = [
    (
        "Volcano's example, a DAG, is admitted",
        jobflow(("a", []), ("b", ["a"]), ("c", ["b"]), ("d", ["b"]), ("e", ["c", "d"])),
        [],
    ),
    (
        "a target that is no flow is refused at its field",
        jobflow(("a", []), ("b", ["x"])),
        ["spec.flows[1].dependsOn.targets[0]"],
    ),
    ("a cycle is refused", jobflow(("a", ["c"]), ("b", ["a"]), ("c", ["b"])), ["spec.flows"]),
    ("a flow depending on itself is refused", jobflow(("a", ["a"])), ["spec.flows"]),
    (
        "a patch is admitted (as by Volcano; the controller says it is not applied)",
        jobflow(("a", []), ("b", ["a"]), patch={"jobSpec": {}}),
        [],
    ),
    ("a flow named twice is admitted, as Volcano's graph merges the two", jobflow(("a", []), ("a", [])), []),
]


@pytest.mark.parametrize(("flow", "refused_at"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_jobflow_admission(flow: dict[str, Any], refused_at: list[str]) -> None:
    decision = admit_jobflow(flow)
    assert decision.allowed is (not refused_at)
    assert [p.split(": ", 1)[0] for p in decision.problems] == refused_at


def test_the_review_answers_through_the_servers_handler() -> None:
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": "u-2", "operation": "CREATE", "object": jobflow(("a", ["b"]), ("b", ["a"]))},
    }
    answer = handlers(None, ["/jobflows/validate"])["/jobflows/validate"](review)  # type: ignore[arg-type]
    assert answer["response"]["uid"] == "u-2" and answer["response"]["allowed"] is False
    assert answer["response"]["status"]["code"] == 400
