"""A networkTopology names its highest tier by number or by name, never both: /jobs/validate (create and update)
and /podgroups/validate refuse a spec with both, naming the field, as Volcano's webhooks do
(admit_job.go validateNetworkTopology and validateJobUpdate; validate_podgroup.go validateNetworkTopology)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from scheduler.webhook.admission import Queues, admit_job
from scheduler.webhook.podgroups import admit_podgroup, review_podgroup
from scheduler.webhook.server import handlers

QUEUES = {"open": {"metadata": {"name": "open"}, "status": {"state": "Open"}},
          "closed": {"metadata": {"name": "closed"}, "status": {"state": "Closed"}}}
BOTH = {"mode": "hard", "highestTierAllowed": 1, "highestTierName": "volcano.sh/hypernode"}


def queues() -> Queues:
    return Queues(QUEUES.get, lambda name: [])


def job(topology: dict[str, Any] | None = None, partition: dict[str, Any] | None = None) -> dict[str, Any]:
    task: dict[str, Any] = {"name": "w", "replicas": 2,
                            "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}}
    if partition is not None:
        task["partitionPolicy"] = {"totalPartitions": 1, "partitionSize": 2, "networkTopology": partition}
    spec: dict[str, Any] = {"queue": "open", "minAvailable": 2, "tasks": [task]}
    if topology is not None:
        spec["networkTopology"] = topology
    return {"metadata": {"name": "j", "namespace": "ns"}, "spec": spec}


def fields(problems: tuple[str, ...]) -> list[str]:
    return [p.split(":", 1)[0] for p in problems]


@pytest.mark.parametrize(("made", "refused"), [
    (job({"mode": "hard", "highestTierAllowed": 1}), []),
    (job({"mode": "hard", "highestTierName": "volcano.sh/hypernode"}), []),
    (job(BOTH), ["spec.networkTopology"]),
    (job(partition=BOTH), ["spec.tasks[0].partitionPolicy.networkTopology"]),
    (job({**BOTH, "highestTierName": ""}), []),  # an empty name is no name
])
def test_a_job_with_both_tier_fields_is_refused_on_create(made: dict[str, Any], refused: list[str]) -> None:
    decision = admit_job("CREATE", made, None, queues())
    assert fields(decision.problems) == refused and decision.allowed is (not refused)


def test_an_update_that_sets_both_tier_fields_is_refused() -> None:
    old = job({"mode": "hard", "highestTierAllowed": 1})
    new = copy.deepcopy(old)
    new["spec"]["networkTopology"]["highestTierName"] = "volcano.sh/hypernode"
    decision = admit_job("UPDATE", new, old, queues())
    assert "spec.networkTopology" in fields(decision.problems) and not decision.allowed


def podgroup(queue: str = "open", topology: dict[str, Any] | None = None,
             sub_groups: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"minMember": 1, "queue": queue}
    if topology is not None:
        spec["networkTopology"] = topology
    if sub_groups is not None:
        spec["subGroupPolicy"] = sub_groups
    return {"metadata": {"name": "pg", "namespace": "ns"}, "spec": spec}


@pytest.mark.parametrize(("made", "refused"), [
    (podgroup(topology={"mode": "hard", "highestTierName": "volcano.sh/hypernode"}), []),
    (podgroup(topology=BOTH), ["spec.networkTopology"]),
    (podgroup(sub_groups=[{"name": "a", "networkTopology": {"highestTierAllowed": 1}},
                          {"name": "b", "networkTopology": BOTH}, {"name": "c", "networkTopology": BOTH}]),
     ["spec.subGroupPolicy[1].networkTopology"]),  # the first such sub-group only, as Volcano
    (podgroup("missing"), ["spec.queue"]),
    (podgroup("closed", BOTH), ["spec.queue", "spec.networkTopology"]),
])
def test_podgroup_create_is_checked_as_volcano_checks_it(made: dict[str, Any], refused: list[str]) -> None:
    decision = admit_podgroup("CREATE", made, queues())
    assert fields(decision.problems) == refused and decision.allowed is (not refused)


def test_podgroup_updates_are_allowed_so_status_writes_never_fail() -> None:
    assert admit_podgroup("UPDATE", podgroup("missing", BOTH), queues()).allowed


def test_the_podgroups_path_answers_with_our_checks() -> None:
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
              "request": {"uid": "u1", "operation": "CREATE", "object": podgroup(topology=BOTH)}}
    route = handlers(queues(), ["/podgroups/validate"])["/podgroups/validate"]
    answer = route(review)
    assert answer == review_podgroup(review, queues())
    assert answer["response"]["allowed"] is False and answer["response"]["uid"] == "u1"
    assert answer["response"]["status"]["message"].startswith("spec.networkTopology: ")
