"""The CP-SAT / topology-greedy gang placer does not model sub-groups: for a job with a subGroupPolicy it abstains,
with one log line per job, and the sub-group placer (actions/subgroups.py) places the job."""

from __future__ import annotations

import logging

import pytest

from scheduler.api.convert import job_from_podgroup, task_from_pod
from scheduler.api.job import JobInfo
from scheduler.solver.subgroups import abstain_for_sub_groups
from scheduler.testing import pod_object

POLICY = {"name": "stage", "subGroupSize": 2, "matchLabelKeys": ["volcano.sh/partition-id"],
          "networkTopology": {"mode": "hard", "highestTierAllowed": 1}}


def podgroup(name: str, policies: list | None) -> dict:
    spec: dict = {"minMember": 2, "queue": "q", "networkTopology": {"mode": "hard", "highestTierAllowed": 2}}
    if policies is not None:
        spec["subGroupPolicy"] = policies
    return {"metadata": {"name": name, "namespace": "ns"}, "spec": spec}


def with_pod(job: JobInfo) -> JobInfo:
    pod = pod_object("p0", namespace="ns", group=job.name)
    pod["metadata"]["labels"]["volcano.sh/partition-id"] = "0"
    pod["metadata"]["uid"] = "u0"
    job.add_task(task_from_pod(pod))
    return job


def test_it_abstains_for_a_job_with_sub_groups_with_one_log_line(caplog: pytest.LogCaptureFixture) -> None:
    job = with_pod(job_from_podgroup(podgroup("abstain-once", [POLICY])))
    with caplog.at_level(logging.INFO, logger="scheduler.solver.subgroups"):
        assert abstain_for_sub_groups(job) and abstain_for_sub_groups(job)
    lines = [r.getMessage() for r in caplog.records if "abstains" in r.getMessage()]
    assert lines == [lines[0]] and "ns/abstain-once" in lines[0]


def test_it_serves_a_job_without_sub_groups() -> None:
    assert not abstain_for_sub_groups(with_pod(job_from_podgroup(podgroup("plain", None))))
