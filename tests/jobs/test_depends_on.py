"""Task launch order (`tasks[].dependsOn`): a task's pods are created once the tasks it waits for run."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from scheduler.jobs import JobEvent, JobStatus, Phase, PodView, decide, normalize_job, podgroup_for, validate_job
from scheduler.jobs.expand import min_pod_specs
from scheduler.jobs.lifecycle import waiting_tasks
from scheduler.jobs.state import pod_view


def mpi(**spec: Any) -> dict[str, Any]:
    """Volcano's task-start-dependency example: the master starts once its workers run."""
    container = {"name": "c", "resources": {"requests": {"cpu": "1"}}}
    return {"metadata": {"name": "j"}, "spec": {"tasks": [
        {"name": "master", "replicas": 1, "dependsOn": {"name": ["worker"]},
         "template": {"spec": {"containers": [container]}}},
        {"name": "worker", "replicas": 3, "template": {"spec": {"containers": [container]}}},
    ], **spec}}


def created(job: dict[str, Any], pods: list[PodView]) -> set[str]:
    return set(decide(job, JobStatus(), pods, "Inqueue", JobEvent()).pods_to_create())


def workers(phase: str, running: int, *, ready: bool = True) -> list[PodView]:
    return [PodView(f"j-worker-{i}", "worker", phase if i < running else "Pending", ready=ready) for i in range(3)]


def test_only_the_tasks_without_dependencies_get_pods_at_first() -> None:
    assert created(mpi(), []) == {"j-worker-0", "j-worker-1", "j-worker-2"}
    decision = decide(mpi(), JobStatus(), workers("Running", 2), "Inqueue", JobEvent())
    assert decision.waiting == {"master": "waits for worker 2/3 ready"}  # said on the Job as an event
    assert decide(mpi(), JobStatus(), workers("Running", 3), "Inqueue", JobEvent()).waiting == {}


def test_the_dependent_task_gets_its_pods_once_all_its_dependency_pods_run_and_are_ready() -> None:
    assert created(mpi(), workers("Running", 2)) == set()
    assert created(mpi(), workers("Running", 3, ready=False)) == set()
    assert created(mpi(), workers("Running", 3)) == {"j-master-0"}
    assert created(mpi(), workers("Succeeded", 3)) == {"j-master-0"}


def test_a_dependency_with_a_task_minimum_needs_only_that_many_ready_pods() -> None:
    job = mpi()
    job["spec"]["tasks"][1]["minAvailable"] = 2
    assert created(job, workers("Running", 2)) == {"j-master-0"}


def test_iteration_any_starts_the_task_when_one_dependency_is_ready() -> None:
    container = {"name": "c"}
    job = {"metadata": {"name": "j"}, "spec": {"tasks": [
        {"name": "a", "replicas": 1, "template": {"spec": {"containers": [container]}}},
        {"name": "b", "replicas": 1, "template": {"spec": {"containers": [container]}}},
        {"name": "c", "replicas": 1, "dependsOn": {"name": ["a", "b"], "iteration": "any"},
         "template": {"spec": {"containers": [container]}}},
        {"name": "d", "replicas": 1, "dependsOn": {"name": ["a", "b"]},
         "template": {"spec": {"containers": [container]}}},
    ]}}
    one_ready = [PodView("j-a-0", "a", "Running"), PodView("j-b-0", "b", "Pending")]
    assert created(job, one_ready) == {"j-c-0"}
    waiting = waiting_tasks(normalize_job(job), one_ready)
    assert set(waiting) == {"d"}
    assert waiting["d"] == "waits for b 0/1 ready"


def test_pods_of_a_started_task_stay_when_its_dependency_stops_running() -> None:
    pods = [*workers("Running", 2), PodView("j-master-0", "master", "Running")]
    decision = decide(mpi(), JobStatus(Phase.RUNNING), pods, "Running", JobEvent())
    assert decision.pods_to_delete() == ()
    assert decision.pods_to_create() == ()


def test_the_gang_is_made_of_the_tasks_that_start_first() -> None:
    pg = podgroup_for(mpi())
    assert pg["spec"]["minMember"] == 3
    assert pg["spec"]["minTaskMember"] == {"worker": 3}
    assert pg["spec"]["minResources"] == {"cpu": "3", "requests.cpu": "3", "pods": "3", "count/pods": "3"}
    assert len(min_pod_specs(normalize_job(mpi()))) == 3


def test_a_gang_larger_than_the_first_tasks_is_rejected_with_the_field_named() -> None:
    errors = validate_job(mpi(minAvailable=4))
    assert len(errors) == 1
    assert errors[0].startswith("spec.minAvailable: 4 must be <= 3")
    assert "master" in errors[0]
    assert validate_job(mpi(minAvailable=3)) == []
    assert validate_job(mpi()) == []


def test_a_pod_is_ready_only_when_every_container_reports_ready() -> None:
    pod = {"metadata": {"name": "p"}, "status": {"phase": "Running", "containerStatuses": [
        {"name": "a", "ready": True}, {"name": "b", "ready": False}]}}
    assert not pod_view(pod).ready
    pod["status"]["containerStatuses"][1]["ready"] = True
    assert pod_view(pod).ready
    assert pod_view({"metadata": {"name": "p"}, "status": {"phase": "Running"}}).ready


def test_the_job_runs_to_completion_starting_the_master_last() -> None:
    job, status, pods = mpi(), JobStatus(), {}
    order: list[str] = []
    for step in range(6):
        decision = decide(job, status, list(pods.values()), "Inqueue", JobEvent())
        for name in decision.pods_to_create():
            order.append(name)
            pods[name] = PodView(name, name.split("-")[1], "Pending")
        status = JobStatus(decision.phase, decision.retry_count, decision.version)
        pods = {n: replace(p, phase="Running") for n, p in pods.items()}  # the scheduler binds, kubelets start
        if step == 4:
            pods = {n: replace(p, phase="Succeeded") for n, p in pods.items()}
    assert order[-1] == "j-master-0" and len(order) == 4
    assert status.phase == Phase.COMPLETED
