"""A PodGroup's `spec.subGroupPolicy` is read once, with bounds (api/subgroups.py): a good one becomes typed
policies and sub-groups of the job's pods as Volcano groups them (pkg/scheduler/api/sub_job_info.go); a bad one
leaves the PodGroup out with a FieldInvalid reason naming the field, and nothing else is affected."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.api.convert import job_from_podgroup, task_from_pod
from scheduler.api.field_parsers import FieldError
from scheduler.api.phases import TaskStatus
from scheduler.api.subgroups import SubGroupPolicy, SubGroupTopology, group_of
from scheduler.testing import pod_object

POLICY = {"name": "stage", "subGroupSize": 2, "minSubGroups": 1,
          "labelSelector": {"matchLabels": {"volcano.sh/task-spec": "stage"}},
          "matchLabelKeys": ["volcano.sh/partition-id"], "networkTopology": {"mode": "hard", "highestTierAllowed": 2}}


def podgroup(policies: Any) -> dict[str, Any]:
    return {"metadata": {"name": "pg", "namespace": "ns", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"minMember": 2, "queue": "q", "subGroupPolicy": policies}, "status": {"phase": "Inqueue"}}


def test_a_policy_is_read_into_typed_values() -> None:
    (policy,) = job_from_podgroup(podgroup([POLICY])).sub_groups
    assert policy.name == "stage" and (policy.size, policy.min_groups) == (2, 1)
    assert policy.match_keys == ("volcano.sh/partition-id",)
    assert policy.topology == SubGroupTopology(True, 2)
    assert policy.selector is not None and policy.selector.matches({"volcano.sh/task-spec": "stage"})


def test_absent_fields_take_volcanos_defaults() -> None:
    (policy,) = job_from_podgroup(podgroup([{"name": "s", "matchLabelKeys": ["k"]}])).sub_groups
    assert (policy.size, policy.min_groups, policy.topology, policy.selector) == (1, 0, None, None)


@pytest.mark.parametrize("bad", [
    "not a list",
    [{"name": "s", "subGroupSize": 0}],
    [{"name": "s", "subGroupSize": "2"}],
    [{"name": "s", "minSubGroups": -1}],
    [{"name": "s", "minSubGroups": 2**40}],
    [{"name": "s", "matchLabelKeys": "volcano.sh/partition-id"}],
    [{"name": "s", "matchLabelKeys": ["k"] * 17}],
    [{"name": "s", "networkTopology": {"mode": "sideways"}}],
    [{"name": "s", "networkTopology": {"highestTierAllowed": 1e9}}],
    [{"name": "s", "labelSelector": {"matchExpressions": [{"key": "k", "operator": "Near"}]}}],
    [{"name": "x" * 300}],
    [POLICY] * 65,
])
def test_a_bad_policy_leaves_the_podgroup_out_with_a_reason_naming_the_field(bad: Any) -> None:
    with pytest.raises(FieldError) as caught:
        job_from_podgroup(podgroup(bad))
    reason = caught.value.reason
    assert (reason.object_kind, reason.name, reason.path) == ("PodGroup", "ns/pg", "spec.subGroupPolicy")


def test_pods_are_grouped_by_the_first_policy_that_picks_them_and_whose_keys_they_carry() -> None:
    policies = (
        SubGroupPolicy("a", match_keys=("p",), selector=None),
        SubGroupPolicy("b", match_keys=("p", "q")),
        SubGroupPolicy("none"),  # no matchLabelKeys: takes no pod (Volcano's getOrCreateSubJob)
    )
    assert group_of(policies, {"p": "1"}) == (0, "1")
    assert group_of(policies[1:], {"p": "1", "q": "x"}) == (0, "1-x")  # index within the tuple given
    assert group_of(policies[1:], {"p": "1"}) is None  # a key missing
    assert group_of(policies[1:], {"p": "1", "q": ""}) is None  # a key empty
    assert group_of(policies[2:], {"p": "1"}) is None


def test_sub_group_readiness_follows_the_tasks_statuses() -> None:
    job = job_from_podgroup(podgroup([POLICY]))
    tasks = []
    for i in range(4):
        pod = pod_object(f"p{i}", namespace="ns", group="pg", role="stage")
        pod["metadata"]["labels"]["volcano.sh/partition-id"] = str(i // 2)
        pod["metadata"]["uid"] = f"u{i}"
        task = task_from_pod(pod)
        job.add_task(task)
        tasks.append(task)
    assert job.subs is not None and job.subs.short() == ("stage", 0, 1)
    job.set_status(tasks[0], TaskStatus.ALLOCATED)
    job.set_status(tasks[2], TaskStatus.ALLOCATED)
    assert job.subs.short() == ("stage", 0, 1)  # two sub-groups half placed: none is ready
    job.set_status(tasks[3], TaskStatus.PIPELINED)
    assert job.subs.short() == ("stage", 0, 1) and job.subs.short(waiting=True) is None
    assert job.clone().subs is not None and job.clone().subs.short(waiting=True) is None
