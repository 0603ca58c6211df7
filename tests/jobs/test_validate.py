from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from scheduler.jobs import validate_job


def job(**spec: Any) -> dict[str, Any]:
    tasks = spec.pop("tasks", [task("a", 2), task("b", 4)])
    return {"metadata": {"name": "j"}, "spec": {"tasks": tasks, **spec}}


def task(name: str, replicas: int, **extra: Any) -> dict[str, Any]:
    return {"name": name, "replicas": replicas, "template": {"spec": {"containers": [{"name": "c"}]}}, **extra}


@dataclass(frozen=True, slots=True)
class Case:
    name: str
    job: dict[str, Any]
    error: str | None


CASES = [
    Case("a plain job is valid", job(), None),
    Case("task minAvailable above replicas names the field", job(tasks=[task("a", 1), task("b", 4, minAvailable=5)]),
         "spec.tasks[1].minAvailable: 5 must be <= replicas 4"),
    Case("job minAvailable above total replicas is rejected", job(minAvailable=7),
         "spec.minAvailable: 7 must be <= total replicas 6"),
    Case("negative job minAvailable is rejected", job(minAvailable=-1), "spec.minAvailable: -1 must be >= 0"),
    Case("negative maxRetry is rejected", job(maxRetry=-1), "spec.maxRetry: -1 must be >= 0"),
    Case("a job without tasks is rejected", job(tasks=[]), "spec.tasks: at least one task is required"),
    Case("duplicate task names are rejected", job(tasks=[task("a", 1), task("a", 1)]),
         "spec.tasks[1].name: duplicated task name 'a'"),
    Case("a task name must be a DNS-1123 label", job(tasks=[task("Worker_1", 1)]),
         "spec.tasks[0].name: 'Worker_1' must be a DNS-1123 label"),
    Case("a policy with both event and exitCode is rejected",
         job(policies=[{"event": "PodFailed", "exitCode": 3, "action": "RestartJob"}]),
         "spec.policies[0]: must not specify event and exitCode simultaneously"),
    Case("a policy with neither event nor exitCode is rejected", job(policies=[{"action": "RestartJob"}]),
         "spec.policies[0]: either event or exitCode must be specified"),
    Case("exit code zero is not an error code", job(policies=[{"exitCode": 0, "action": "RestartJob"}]),
         "spec.policies[0].exitCode: 0 is not a valid error code"),
    Case("an unknown event is rejected", job(policies=[{"event": "PodExploded", "action": "RestartJob"}]),
         "spec.policies[0].event: 'PodExploded'"),
    Case("an internal event is rejected in a policy", job(policies=[{"event": "OutOfSync", "action": "SyncJob"}]),
         "spec.policies[0].action: 'SyncJob'"),
    Case("an unknown action is rejected", job(policies=[{"event": "PodFailed", "action": "Explode"}]),
         "spec.policies[0].action: 'Explode'"),
    Case("task policies are checked too",
         job(tasks=[task("a", 1, policies=[{"events": ["PodFailed"], "action": "Nope"}])]),
         "spec.tasks[0].policies[0].action: 'Nope'"),
    Case("star must be the only event policy",
         job(policies=[{"event": "*", "action": "AbortJob"}, {"event": "PodFailed", "action": "RestartJob"}]),
         "spec.policies: a policy on '*' must be the only event policy"),
    Case("duplicate events across policies are rejected",
         job(policies=[{"event": "PodFailed", "action": "AbortJob"}, {"events": ["PodFailed"],
                                                                       "action": "RestartJob"}]),
         "spec.policies[1].event: duplicate event 'PodFailed' across policies"),
    Case("a bad timeout is rejected", job(policies=[{"event": "PodFailed", "action": "AbortJob", "timeout": "soon"}]),
         "spec.policies[0].timeout: 'soon'"),
    Case("PodPending with a timeout is a valid policy",
         job(policies=[{"event": "PodPending", "action": "RestartJob", "timeout": "5m"}]), None),
    Case("an unknown plugin is rejected", job(plugins={"magic": []}), "spec.plugins.magic: unknown job plugin"),
    Case("a Volcano plugin volcano-py does not implement is accepted", job(plugins={"mpi": []}), None),
    Case("a dependsOn cycle is rejected",
         job(tasks=[task("a", 1, dependsOn={"name": ["b"]}), task("b", 1, dependsOn={"name": ["a"]})]),
         "spec.tasks: dependsOn must form a directed acyclic graph"),
    # Volcano's jobp specs "Invalid CPU unit" / "Invalid memory unit": Kubernetes' pod validation refuses them.
    Case("a negative cpu request is rejected",
         job(tasks=[dict(task("a", 1), template={"spec": {"containers": [
             {"name": "c", "resources": {"requests": {"cpu": "-1"}}}]}})]),
         "spec.tasks[0].template.spec.containers[0].resources.requests.cpu: -1 must be greater than or equal to 0"),
    Case("a memory limit that is not a quantity is rejected",
         job(tasks=[dict(task("a", 1), template={"spec": {"containers": [
             {"name": "c", "resources": {"limits": {"memory": "1x"}}}]}})]),
         "spec.tasks[0].template.spec.containers[0].resources.limits.memory: '1x' is not a Kubernetes quantity"),
    Case("a request above its limit is rejected",
         job(tasks=[dict(task("a", 1), template={"spec": {"containers": [
             {"name": "c", "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}}]}})]),
         "spec.tasks[0].template.spec.containers[0].resources.requests.cpu: 2 must be less than or equal"),
    Case("a volume needs a mountPath", job(volumes=[{"volumeClaimName": "x"}]), "spec.volumes[0].mountPath: required"),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_validate_job(case: Case) -> None:
    errors = validate_job(case.job)
    if case.error is None:
        assert errors == []
    else:
        assert any(e.startswith(case.error) for e in errors), errors
