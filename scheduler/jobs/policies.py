"""What happened to a Job and what to do about it. Layer: jobs (pure).

`pod_event` is the event Volcano's job controller raises for a pod change (PodFailed, PodEvicted,
TaskCompleted, TaskFailed, or a plain resync); `select_action` is the action the Job's lifecycle policies pick
for an event: task policies first, then job policies, else SyncJob, with the policy's timeout if it has one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scheduler.durations import parse_seconds
from scheduler.jobs.bus import PolicyAction, PolicyEvent
from scheduler.jobs.expand import normalize_job
from scheduler.jobs.state import JobEvent, JobStatus, PodView
from scheduler.jobs.validate import policy_events


def pod_event(job: Mapping[str, Any], before: PodView | None, after: PodView | None,
              pods: Sequence[PodView]) -> JobEvent:
    """The event Volcano raises for a pod change (`after` None: the pod was deleted)."""
    job = normalize_job(job)
    pod = after or before
    if pod is None:
        return JobEvent()
    task = next((t for t in job["spec"]["tasks"] if t["name"] == pod.task), None)
    if after is None:
        if task is None or _index_of(pod.name) >= int(task["replicas"]):
            return JobEvent(task=pod.task, pod=pod.name)  # scaled down (elastic job): not an eviction
        return JobEvent(PolicyEvent.POD_EVICTED, task=pod.task, pod=pod.name)
    if after.phase == "Failed" and (before is None or before.phase != "Failed"):
        return JobEvent(PolicyEvent.POD_FAILED, task=pod.task, pod=pod.name, exit_code=after.exit_code)
    if task is None:
        return JobEvent(task=pod.task, pod=pod.name)
    if after.phase == "Succeeded" and (before is None or before.phase != "Succeeded"):
        done = sum(1 for p in pods if p.task == pod.task and p.phase == "Succeeded")
        if done >= int(task["replicas"]):
            return JobEvent(PolicyEvent.TASK_COMPLETED, task=pod.task, pod=pod.name)
    if after.phase in ("Pending", "Running") and after.restarts >= int(task["maxRetry"]):
        return JobEvent(PolicyEvent.TASK_FAILED, task=pod.task, pod=pod.name)
    return JobEvent(task=pod.task, pod=pod.name)


def _index_of(pod_name: str) -> int:
    """The replica index of pod `<job>-<task>-<index>` (-1 if the name has none)."""
    tail = pod_name.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else -1

def select_action(job: Mapping[str, Any], status: JobStatus, event: JobEvent) -> tuple[PolicyAction, float | None]:
    """The action for an event and its policy timeout: task policies first, then job policies, else SyncJob."""
    if event.action is not None:
        return event.action, None
    if event.event == PolicyEvent.OUT_OF_SYNC:
        return PolicyAction.SYNC_JOB, None
    if event.job_version is not None and event.job_version < status.version:
        return PolicyAction.SYNC_JOB, None  # raised by a pod of an earlier run
    spec = job["spec"]
    task = next((t for t in spec.get("tasks") or [] if event.task and t.get("name") == event.task), None)
    for policies in ((task or {}).get("policies") or [], spec.get("policies") or []):
        for policy in policies:
            if _matches(policy, event):
                timeout = policy.get("timeout")
                return PolicyAction(policy["action"]), parse_duration(timeout) if timeout is not None else None
    return PolicyAction.SYNC_JOB, None


def _matches(policy: Mapping[str, Any], event: JobEvent) -> bool:
    events = policy_events(policy)
    if events:
        return event.event in events or PolicyEvent.ANY in events
    code = policy.get("exitCode")
    return code is not None and event.exit_code is not None and int(code) == event.exit_code


def parse_duration(text: object) -> float:
    """Seconds in a Go duration (`"1m30s"`, `"500ms"`, Go's `time.ParseDuration` grammar, which Volcano reads
    these fields with) or a bare number of seconds. Raises ValueError on anything else."""
    return parse_seconds(text)

