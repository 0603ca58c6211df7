from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from jobs_seeds import seed

from scheduler.jobs import JobEvent, JobStatus, Phase, PodView, PolicyAction, PolicyEvent, decide, desired_pods, expired
from scheduler.jobs.policies import pod_event
from scheduler.jobs.state import Decision, OpKind


def job(tasks: list[tuple[str, int]], **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "j"}, "spec": {
        "tasks": [{"name": n, "replicas": r, "template": {"spec": {"containers": [{"name": "c"}]}}} for n, r in tasks],
        **spec}}


class World:
    """A tiny in-memory cluster that carries out Decisions, to run lifecycle sequences."""

    def __init__(self, job: dict[str, Any]) -> None:
        self.job, self.status, self.pods = job, JobStatus(), {}  # type: ignore[var-annotated]
        self.pg = "Inqueue"
        self.phases: list[Phase] = []

    def send(self, event: JobEvent | None = None) -> Decision:
        event = event or JobEvent()
        d = decide(self.job, self.status, list(self.pods.values()), self.pg, event)
        for name in d.pods_to_delete():
            self.pods[name] = replace(self.pods[name], deleting=True)
        for name in d.pods_to_create():
            self.pods[name] = PodView(name, name.split("-")[1], "Pending")
        self.status = JobStatus(d.phase, d.retry_count, d.version)
        if not self.phases or self.phases[-1] != d.phase:
            self.phases.append(d.phase)
        return d

    def set(self, phase: str, *names: str, exit_code: int | None = None) -> None:
        for name in names or tuple(self.pods):
            self.pods[name] = replace(self.pods[name], phase=phase, exit_code=exit_code)

    def finish_deletions(self) -> None:
        self.pods = {n: p for n, p in self.pods.items() if not p.deleting}

    def run_all(self) -> None:
        self.send()
        self.set("Running")
        self.send()


def test_pods_are_created_only_once_the_podgroup_left_pending() -> None:
    j = job([("w", 2)])
    assert desired_pods(j, "Pending", []) == []
    assert desired_pods(j, None, []) == []
    assert [p["metadata"]["name"] for p in desired_pods(j, "Inqueue", ["j-w-0"])] == ["j-w-1"]
    assert decide(j, JobStatus(), [], "Pending", JobEvent()).pods_to_create() == ()


def test_pod_failed_restart_job_goes_restarting_pending_running_with_retry_one() -> None:
    w = World(job([("w", 2)], policies=[{"event": "PodFailed", "action": "RestartJob"}]))
    w.run_all()
    w.set("Failed", "j-w-0", exit_code=1)
    d = w.send(JobEvent(PolicyEvent.POD_FAILED, task="w", pod="j-w-0", exit_code=1))
    assert d.phase is Phase.RESTARTING and d.retry_count == 1
    assert set(d.pods_to_delete()) == {"j-w-0", "j-w-1"}
    assert any(op.kind is OpKind.DELETE_PODGROUP for op in d.ops)
    assert w.send().phase is Phase.RESTARTING  # pods still terminating
    w.finish_deletions()
    assert w.send().phase is Phase.PENDING
    w.run_all()
    assert w.phases == [Phase.PENDING, Phase.RUNNING, Phase.RESTARTING, Phase.PENDING, Phase.RUNNING]
    assert w.status.retry_count == 1 and w.status.version == 1


def test_pod_evicted_terminate_job_ends_terminated() -> None:
    w = World(job([("w", 2)], policies=[{"event": "PodEvicted", "action": "TerminateJob"}]))
    w.run_all()
    assert w.send(JobEvent(PolicyEvent.POD_EVICTED, task="w", pod="j-w-1")).phase is Phase.TERMINATING
    w.finish_deletions()
    assert w.send().phase is Phase.TERMINATED


def test_task_completed_complete_job_deletes_the_other_tasks_pods() -> None:
    j = job([("master", 1), ("worker", 2)])
    j["spec"]["tasks"][0]["policies"] = [{"event": "TaskCompleted", "action": "CompleteJob"}]
    w = World(j)
    w.run_all()
    w.set("Succeeded", "j-master-0")
    event = pod_event(j, PodView("j-master-0", "master", "Running"), w.pods["j-master-0"], list(w.pods.values()))
    assert event.event is PolicyEvent.TASK_COMPLETED
    d = w.send(event)
    assert d.phase is Phase.COMPLETING and set(d.pods_to_delete()) == {"j-worker-0", "j-worker-1"}
    w.finish_deletions()
    assert w.send().phase is Phase.COMPLETED


def test_max_retry_two_ends_failed_with_retry_count_two() -> None:
    w = World(job([("w", 1)], maxRetry=2, policies=[{"event": "PodFailed", "action": "RestartJob"}]))
    for _ in range(2):
        w.run_all()
        w.set("Failed", exit_code=1)
        w.send(JobEvent(PolicyEvent.POD_FAILED, task="w", pod="j-w-0", exit_code=1))
        w.finish_deletions()
        w.send()
    assert w.status.phase is Phase.FAILED and w.status.retry_count == 2


def test_min_success_two_completes_after_two_pods_succeed() -> None:
    w = World(job([("w", 4)], minSuccess=2, minAvailable=2))
    w.run_all()
    w.set("Succeeded", "j-w-0")
    assert w.send().phase is Phase.RUNNING
    w.set("Succeeded", "j-w-1")
    assert w.send().phase is Phase.COMPLETED


@dataclass(frozen=True, slots=True)
class Case:
    name: str
    pod_phases: tuple[str, ...]
    expected: Phase
    spec: tuple[tuple[str, Any], ...] = ()


RUNNING_CASES = [
    Case("all pods succeeded completes the job", ("Succeeded",) * 3, Phase.COMPLETED),
    Case("a failed pod without policy waits for the others", ("Failed", "Running", "Running"), Phase.RUNNING),
    Case("finished with fewer successes than minAvailable fails", ("Succeeded", "Failed", "Failed"), Phase.FAILED,
         (("minAvailable", 2),)),
    Case("finished with enough successes for a smaller minAvailable completes", ("Succeeded", "Succeeded", "Failed"),
         Phase.COMPLETED, (("minAvailable", 2),)),
]


@pytest.mark.parametrize("case", RUNNING_CASES, ids=[c.name for c in RUNNING_CASES])
def test_running_without_policies(case: Case) -> None:
    j = job([("w", 3)], **dict(case.spec))
    if "minAvailable" in dict(case.spec):
        j["spec"]["tasks"][0]["minAvailable"] = dict(case.spec)["minAvailable"]
    pods = [PodView(f"j-w-{i}", "w", p) for i, p in enumerate(case.pod_phases)]
    assert decide(j, JobStatus(Phase.RUNNING), pods, "Running", JobEvent()).phase is case.expected


def test_task_policy_first_then_job_policy_then_exit_code_and_star() -> None:
    from scheduler.jobs.policies import select_action

    j = job([("w", 2)], policies=[{"exitCode": 3, "action": "AbortJob"}, {"event": "PodEvicted",
                                                                          "action": "RestartJob"}])
    j["spec"]["tasks"][0]["policies"] = [{"event": "PodEvicted", "action": "RestartTask"}]
    st = JobStatus(Phase.RUNNING)
    assert select_action(j, st, JobEvent(PolicyEvent.POD_EVICTED, task="w"))[0] is PolicyAction.RESTART_TASK
    assert select_action(j, st, JobEvent(PolicyEvent.POD_FAILED, task="w", exit_code=3))[0] is PolicyAction.ABORT_JOB
    assert select_action(j, st, JobEvent(PolicyEvent.POD_FAILED, task="w", exit_code=4))[0] is PolicyAction.SYNC_JOB
    star = job([("w", 2)], policies=[{"event": "*", "action": "TerminateJob"}])
    assert select_action(star, st, JobEvent(PolicyEvent.TASK_FAILED, task="w"))[0] is PolicyAction.TERMINATE_JOB
    earlier_run = JobEvent(PolicyEvent.POD_FAILED, job_version=1)
    assert select_action(star, JobStatus(version=2), earlier_run)[0] is PolicyAction.SYNC_JOB


def test_restart_pod_deletes_only_that_pod() -> None:
    w = World(job([("w", 3)], policies=[{"event": "PodFailed", "action": "RestartPod"}]))
    w.run_all()
    w.set("Failed", "j-w-1", exit_code=2)
    d = w.send(JobEvent(PolicyEvent.POD_FAILED, task="w", pod="j-w-1", exit_code=2))
    assert d.pods_to_delete() == ("j-w-1",) and d.phase is Phase.RESTARTING and d.retry_count == 1
    w.finish_deletions()
    assert w.send().phase is Phase.PENDING
    assert w.send().pods_to_create() == ("j-w-1",)  # only the restarted pod comes back


def test_abort_then_resume() -> None:
    w = World(job([("w", 2)]))
    w.run_all()
    assert w.send(JobEvent(PolicyEvent.COMMAND_ISSUED, action=PolicyAction.ABORT_JOB)).phase is Phase.ABORTING
    w.finish_deletions()
    assert w.send().phase is Phase.ABORTED
    d = w.send(JobEvent(PolicyEvent.COMMAND_ISSUED, action=PolicyAction.RESUME_JOB))
    assert d.phase is Phase.RESTARTING and d.retry_count == 1
    assert w.send().phase is Phase.PENDING


def test_a_policy_timeout_defers_the_action() -> None:
    j = job([("w", 1)], policies=[{"event": "PodPending", "action": "RestartJob", "timeout": "5m"}])
    pending = JobEvent(PolicyEvent.POD_PENDING, task="w")
    d = decide(j, JobStatus(Phase.PENDING), [PodView("j-w-0", "w")], "Inqueue", pending)
    assert d.deferred is not None and d.deferred.action is PolicyAction.RESTART_JOB and d.deferred.seconds == 300
    assert d.phase is Phase.PENDING and d.pods_to_delete() == ()


def test_seed_distributed_training_restarts_on_eviction() -> None:
    w = World(seed("distributed-training"))
    w.run_all()
    assert w.status.phase is Phase.RUNNING
    d = w.send(JobEvent(PolicyEvent.POD_EVICTED, task="worker", pod="distributed-training-worker-2"))
    assert d.phase is Phase.RESTARTING and len(d.pods_to_delete()) == 4


def test_status_dict_has_volcano_fields() -> None:
    d = decide(job([("w", 2)]), JobStatus(), [], "Inqueue", JobEvent())
    status = d.status()
    assert status["state"] == {"phase": "Pending"} and status["pending"] == 2 and status["minAvailable"] == 2


def test_ttl_after_finished() -> None:
    j = job([("w", 1)], ttlSecondsAfterFinished=60)
    done = datetime(2024, 1, 1, tzinfo=UTC)
    assert not expired(j, done + timedelta(seconds=59), finished_at=done)
    assert expired(j, done + timedelta(seconds=60), finished_at=done)
    j["status"] = {"state": {"phase": "Completed", "lastTransitionTime": "2024-01-01T00:00:00Z"}}
    assert expired(j, done + timedelta(minutes=2))
    assert not expired(job([("w", 1)]), done + timedelta(days=9), finished_at=done)


@pytest.mark.parametrize("ttl", ["60", 60.0, True, -1, 2**31, 10**400, [60], {"s": 60}])
def test_an_unreadable_ttl_is_no_ttl_and_never_raises(ttl: object) -> None:
    """ttlSecondsAfterFinished is Volcano's *int32: anything else reads as none (the job is kept), never as an
    exception in the controller's reconcile or the replay."""
    j = job([("w", 1)], ttlSecondsAfterFinished=ttl)
    done = datetime(2024, 1, 1, tzinfo=UTC)
    assert not expired(j, done + timedelta(days=365 * 100), finished_at=done)


def test_the_largest_ttl_from_the_last_representable_day_never_raises() -> None:
    j = job([("w", 1)], ttlSecondsAfterFinished=2**31 - 1)
    done = datetime(9999, 12, 31, tzinfo=UTC)
    assert not expired(j, done, finished_at=done)
    assert expired(job([("w", 1)], ttlSecondsAfterFinished=2**31 - 1), datetime(2200, 1, 1, tzinfo=UTC),
                   finished_at=datetime(2024, 1, 1, tzinfo=UTC))


def test_policy_timeouts_read_go_durations() -> None:
    """Volcano reads a policy's timeout with Go's time.ParseDuration: `1m30s`, `2h`, `.5s`, `300ms` all work."""
    from scheduler.jobs.policies import parse_duration

    assert [parse_duration(t) for t in ("1m30s", "2h", ".5s", "300ms", "90")] == [90.0, 7200.0, 0.5, 0.3, 90.0]
    with pytest.raises(ValueError):
        parse_duration("1.5.5s")


@pytest.mark.parametrize("stamp", ["yesterday", "2024-13-01T00:00:00Z", 17, "", "2" * 100_000,
                                   "0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"])
def test_an_unreadable_finish_time_never_expires_a_job_and_never_raises(stamp: object) -> None:
    """lastTransitionTime is written by anyone who can patch a Job's status: an unreadable one reads as missing."""
    j = job([("w", 1)], ttlSecondsAfterFinished=60)
    j["status"] = {"state": {"phase": "Completed", "lastTransitionTime": stamp}}
    assert not expired(j, datetime(2030, 1, 1, tzinfo=UTC))


def test_a_finish_time_without_an_offset_is_utc() -> None:
    j = job([("w", 1)], ttlSecondsAfterFinished=60)
    j["status"] = {"state": {"phase": "Completed", "lastTransitionTime": "2024-01-01T00:00:00"}}
    assert not expired(j, datetime(2024, 1, 1, 0, 0, 59, tzinfo=UTC))
    assert expired(j, datetime(2024, 1, 1, 0, 1, 0, tzinfo=UTC))
