"""A JobFlow's status and phase from the Jobs it owns, as Volcano's jobflow controller writes them
(pkg/controllers/jobflow/jobflow_controller_action.go getAllJobStatus, state/*.go), and what a finished flow
does: pure functions of `scheduler.jobs.flow`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from scheduler.api.timestamps import rfc3339
from scheduler.jobs.flow import FlowPlan, Problem, ProblemKind, plan, spec_problems
from scheduler.jobs.flow_status import FlowPhase, next_phase

NS = "ns"
T0 = 1_800_000_000.0


def flow_entry(name: str, *targets: str) -> dict[str, Any]:
    return {"name": name, "dependsOn": {"targets": list(targets)}} if targets else {"name": name}


def template(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": NS}, "spec": {"schedulerName": "volcano-py", "tasks": []}}


def job(name: str, phase: str, created: float = T0, **status: Any) -> dict[str, Any]:
    state: dict[str, Any] = {"phase": phase} if phase else {}
    if phase:
        state["lastTransitionTime"] = rfc3339(created + 90)
    return {
        "metadata": {
            "name": f"test-{name}",
            "namespace": NS,
            "creationTimestamp": rfc3339(created),
            "ownerReferences": [{"kind": "JobFlow", "uid": "u", "controller": True}],
        },
        "status": {"state": state, **status},
    }


def flow_of(*names: str, status: Mapping[str, Any] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": "test", "namespace": NS, "uid": "u"},
        "spec": {"flows": [flow_entry(n) for n in names]},
        "status": dict(status or {}),
    }


def test_status_lists_each_job_by_phase_as_volcano_does() -> None:
    phases = {
        "p": "Pending",
        "r": "Running",
        "c": "Completed",
        "f": "Failed",
        "t": "Terminated",
        "a": "Aborted",
        "n": "",
        "g": "Completing",
        "x": "Terminating",
    }
    jobs = [job(n, p, taskStatusCount={"w": {"phase": {"Running": 1}}}) for n, p in phases.items()]
    status = plan(flow_of(*phases, status={"state": {"phase": "Running"}}), {}, jobs, T0 + 100).status
    assert status is not None
    lists = {k: v for k, v in status.items() if k.endswith("Jobs")}
    assert lists == {
        "pendingJobs": ["test-p"],
        "runningJobs": ["test-r"],
        "completedJobs": ["test-c"],
        "failedJobs": ["test-f"],
        "terminatedJobs": ["test-t"],
        "unKnowJobs": ["test-a", "test-n"],
    }
    assert set(status["conditions"]) == {f"test-{n}" for n in phases}
    assert status["conditions"]["test-c"] == {
        "phase": "Completed",
        "createTime": rfc3339(T0),
        "runningDuration": "1m30s",
        "taskStatusCount": {"w": {"phase": {"Running": 1}}},
    }
    assert "runningDuration" not in status["conditions"]["test-r"]
    assert status["state"] == {"phase": "Failed"}


def test_job_status_list_keeps_each_jobs_times_restarts_and_phase_history() -> None:
    flow = flow_of("a", "gone", status={"jobStatusList": [{"name": "test-gone", "state": "Completed"}]})
    a = job("a", "Pending")
    first = plan(flow, {}, [a], T0 + 1).status
    assert first is not None
    flow["status"] = first
    a["status"] = {"state": {"phase": "Running"}, "retryCount": 2}
    second = plan(flow, {}, [a], T0 + 5).status
    assert second is not None
    flow["status"] = second
    a["status"] = {
        "state": {"phase": "Completed", "lastTransitionTime": rfc3339(T0 + 60)},
        "runningDuration": "1m0.5s",
        "retryCount": 2,
    }
    third = plan(flow, {}, [a], T0 + 61).status
    assert third is not None
    gone, entry = third["jobStatusList"]
    assert gone == {"name": "test-gone", "state": "Completed"}  # a deleted job's entry stays
    assert entry == {
        "name": "test-a",
        "state": "Completed",
        "startTimestamp": rfc3339(T0),
        "endTimestamp": rfc3339(T0 + 60),
        "restartCount": 2,
        "runningHistories": [
            {"startTimestamp": rfc3339(T0 + 1), "endTimestamp": rfc3339(T0 + 5), "state": "Pending"},
            {"startTimestamp": rfc3339(T0 + 5), "endTimestamp": rfc3339(T0 + 61), "state": "Running"},
            {"startTimestamp": rfc3339(T0 + 61), "state": "Completed"},
        ],
    }
    assert third["conditions"]["test-a"]["runningDuration"] == "1m0.5s"
    assert third["state"] == {"phase": "Running"}
    assert plan({**flow, "status": third}, {}, [a], T0 + 99).status is None, "nothing changed: nothing written"


@pytest.mark.parametrize(
    "phase, lists, flows, wanted",
    [
        ("", {}, 2, FlowPhase.PENDING),
        ("Pending", {"pendingJobs": ["x"]}, 2, FlowPhase.PENDING),
        ("Pending", {"runningJobs": ["x"]}, 2, FlowPhase.RUNNING),
        ("Pending", {"completedJobs": ["x"], "terminatedJobs": ["y"]}, 2, FlowPhase.RUNNING),
        ("Pending", {"runningJobs": ["x"], "failedJobs": ["y"]}, 2, FlowPhase.FAILED),
        ("Pending", {"terminatedJobs": ["y"]}, 2, FlowPhase.FAILED),
        ("Running", {"completedJobs": ["x", "y"]}, 2, FlowPhase.SUCCEED),
        ("Running", {"completedJobs": ["x"], "runningJobs": ["y"]}, 2, FlowPhase.RUNNING),
        ("Running", {"completedJobs": ["x"], "terminatedJobs": ["y"]}, 2, FlowPhase.FAILED),
        ("Running", {}, 2, FlowPhase.RUNNING),
        ("Succeed", {"failedJobs": ["x"]}, 2, FlowPhase.SUCCEED),
    ],
    ids=lambda v: str(v),
)
def test_phase_moves_as_volcanos_states_move_it(
    phase: str, lists: dict[str, list[str]], flows: int, wanted: FlowPhase
) -> None:
    assert next_phase(phase, lists, flows) == wanted


def test_a_failed_or_terminating_flow_does_nothing() -> None:
    for phase in ("Failed", "Terminating"):
        result = plan(flow_of("a", status={"state": {"phase": phase}}), {"a": template("a")}, [], T0)
        assert result == FlowPlan(problems=(), steps=result.steps)


@pytest.mark.parametrize(
    "flows, wanted",
    [
        ([flow_entry("a"), flow_entry("b", "d"), flow_entry("c", "b"), flow_entry("d", "c")], [("b", "c", "d", "b")]),
        # b and c wait on each other too, a shorter cycle; the one told goes through a, the first flow.
        ([flow_entry("a", "c"), flow_entry("b", "a", "c"), flow_entry("c", "b")], [("a", "b", "c", "a")]),
        ([flow_entry("x", "x"), flow_entry("p", "q"), flow_entry("q", "p")], [("x", "x"), ("p", "q", "p")]),
    ],
    ids=["a ring of three", "the cycle told goes through the first flow", "two groups, in spec order"],
)
def test_spec_problems_name_each_cycle_from_its_first_flow(flows: list[dict[str, Any]], wanted: list[tuple]) -> None:
    flow = {"metadata": {"name": "f"}, "spec": {"flows": flows}}
    assert spec_problems(flow) == [Problem(ProblemKind.CYCLE, "spec.flows", path) for path in wanted]
