"""A task's partitionPolicy becomes a PodGroup sub-group and a partition label on each pod, as Volcano's job
controller does (pkg/controllers/job/job_controller_actions.go getSubGroupPolicy, job_controller_util.go
createJobPod), and its admission checks are Volcano's (pkg/webhooks/admission/jobs/validate/admit_job.go
validatePartitionPolicy)."""

from __future__ import annotations

from typing import Any

import pytest
from fake_api import FakeApi

from scheduler.controllers.job import JobController
from scheduler.jobs import podgroup_for, pods_for, validate_job

CONTAINER = {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}


def task(name: str, replicas: int, partition: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "replicas": replicas, "template": {"spec": {"containers": [CONTAINER]}},
                           **extra}
    if partition is not None:
        out["partitionPolicy"] = partition
    return out


def job(*tasks: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": "pp", "namespace": "ns", "uid": "u1"},
            "spec": {"schedulerName": "volcano-py", "queue": "default", "tasks": list(tasks)}}


PIPELINE = job(
    task("master", 1),
    task("stage", 6, {"totalPartitions": 3, "partitionSize": 2, "minPartitions": 2,
                      "networkTopology": {"mode": "hard", "highestTierAllowed": 1}}),
)


def test_a_partitioned_task_becomes_one_sub_group_named_as_volcano_names_it() -> None:
    spec = podgroup_for(PIPELINE)["spec"]
    assert spec["subGroupPolicy"] == [{
        "name": "stage",
        "subGroupSize": 2,
        "minSubGroups": 2,
        "labelSelector": {"matchLabels": {"volcano.sh/task-spec": "stage"}},
        "matchLabelKeys": ["volcano.sh/partition-id"],
        "networkTopology": {"mode": "hard", "highestTierAllowed": 1},
    }]
    # the task's minimum is minPartitions x partitionSize; the unpartitioned task keeps its replicas
    assert spec["minTaskMember"] == {"master": 1, "stage": 4}


def test_a_job_without_partitions_has_no_sub_group_policy() -> None:
    assert "subGroupPolicy" not in podgroup_for(job(task("w", 2)))["spec"]


def test_each_pod_of_a_partitioned_task_is_labelled_with_its_partition() -> None:
    labels = {p["metadata"]["name"]: p["metadata"]["labels"] for p in pods_for(PIPELINE)}
    assert {name: lab.get("volcano.sh/partition-id") for name, lab in labels.items()} == {
        "pp-master-0": None,
        "pp-stage-0": "0", "pp-stage-1": "0", "pp-stage-2": "1", "pp-stage-3": "1", "pp-stage-4": "2",
        "pp-stage-5": "2",
    }
    # the label is not an annotation (Volcano sets it on labels only)
    assert all("volcano.sh/partition-id" not in p["metadata"]["annotations"] for p in pods_for(PIPELINE))


def test_a_soft_partition_topology_is_copied_without_empty_fields() -> None:
    partitioned = job(task("s", 4, {"totalPartitions": 2, "partitionSize": 2, "networkTopology": {"mode": "soft"}}))
    (entry,) = podgroup_for(partitioned)["spec"]["subGroupPolicy"]
    assert entry["networkTopology"] == {"mode": "soft"}
    assert entry["minSubGroups"] == 0


def test_the_controller_creates_the_podgroup_with_sub_groups_and_updates_them_when_the_job_changes() -> None:
    api = FakeApi()
    api.put("Job", PIPELINE)
    ctl = JobController(api, clock=lambda: 1_800_000_000.0)  # type: ignore[arg-type]
    ctl.reconcile("ns", "pp")
    (pg,) = api.of_kind("PodGroup").values()
    assert [g["name"] for g in pg["spec"]["subGroupPolicy"]] == ["stage"]
    pg["status"] = {"phase": "Inqueue"}
    # the partition policy changes (the webhook would refuse it; an object written around it is still followed)
    stored = api.objects[("Job", "ns", "pp")]
    stored["spec"]["tasks"][1]["partitionPolicy"]["minPartitions"] = 3
    stored["spec"]["tasks"][1]["minAvailable"] = 6
    ctl.reconcile("ns", "pp")
    (pg,) = api.of_kind("PodGroup").values()
    assert pg["spec"]["subGroupPolicy"][0]["minSubGroups"] == 3
    pods = api.of_kind("Pod")
    assert pods["pp-stage-5"]["metadata"]["labels"]["volcano.sh/partition-id"] == "2"


@pytest.mark.parametrize(("partition", "replicas", "minimum", "field"), [
    ({"totalPartitions": 0, "partitionSize": 2}, 4, None, "spec.tasks[0].partitionPolicy.totalPartitions"),
    ({"totalPartitions": 2, "partitionSize": 0}, 4, None, "spec.tasks[0].partitionPolicy.partitionSize"),
    ({"totalPartitions": 2, "partitionSize": 2}, 5, None, "spec.tasks[0].replicas"),
    ({"totalPartitions": 2, "partitionSize": 2, "minPartitions": 1}, 4, 3, "spec.tasks[0].minAvailable"),
    ({"totalPartitions": 2, "partitionSize": 2, "networkTopology": {"highestTierAllowed": 1,
                                                                   "highestTierName": "rack"}},
     4, None, "spec.tasks[0].partitionPolicy.networkTopology"),
    ({"totalPartitions": "2", "partitionSize": 2}, 4, None, "spec.tasks[0].partitionPolicy.totalPartitions"),
])
def test_a_bad_partition_policy_is_refused_naming_the_field(partition: dict[str, Any], replicas: int,
                                                           minimum: int | None, field: str) -> None:
    extra = {} if minimum is None else {"minAvailable": minimum}
    problems = validate_job(job(task("w", replicas, partition, **extra)))
    assert [p.split(":", 1)[0] for p in problems] == [field]


@pytest.mark.parametrize("partition", [
    {"totalPartitions": 2, "partitionSize": 2},
    {"totalPartitions": 2, "partitionSize": 2, "minPartitions": 1},
    {"totalPartitions": 2, "partitionSize": 2, "networkTopology": {"mode": "hard", "highestTierAllowed": 2}},
])
def test_a_good_partition_policy_is_admitted(partition: dict[str, Any]) -> None:
    assert validate_job(job(task("w", 4, partition))) == []


def test_minavailable_is_not_checked_against_partitions_when_min_partitions_is_unset() -> None:
    """Volcano enforces minAvailable = minPartitions x partitionSize only when minPartitions > 0."""
    assert validate_job(job(task("w", 4, {"totalPartitions": 2, "partitionSize": 2}, minAvailable=3))) == []
