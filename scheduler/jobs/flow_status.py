"""A JobFlow's status from the Jobs it owns, and its phase, as Volcano writes them. Layer: jobs (pure).

Volcano's getAllJobStatus and getRunningHistories (pkg/controllers/jobflow/jobflow_controller_action.go) and the
phase rules of its states (pkg/controllers/jobflow/state/pending.go, running.go):
- `pendingJobs`, `runningJobs`, `completedJobs`, `failedJobs`, `terminatedJobs` name the Jobs in that phase;
  `unKnowJobs` those in any other phase but Completing and Terminating, which no list names. Empty lists are
  left out, as Go's `omitempty` leaves them.
- `conditions` maps each Job to its phase, creation time, running duration and task counts.
- `jobStatusList` keeps every entry it ever had (a deleted Job's too) and updates those of the Jobs there are:
  state, start (the Job's creation), end (creation + running duration), restarts, and `runningHistories`, one
  entry per phase the Job was seen in, closed when the next one opens.
- Pending (or no phase yet) -> Running once a Job runs or completed and none failed; -> Failed once one failed or
  terminated. Running -> Succeed once as many Jobs completed as there are flows; -> Failed as before.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any

from scheduler.api.timestamps import parse_time, rfc3339
from scheduler.durations import SECOND, DurationError, format_duration, parse_go_duration
from scheduler.jobs.state import Phase


class FlowPhase(StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEED = "Succeed"
    FAILED = "Failed"
    TERMINATING = "Terminating"  # in Volcano's enum; nothing in Volcano sets it


LISTS: dict[str, str] = {
    Phase.PENDING: "pendingJobs",
    Phase.RUNNING: "runningJobs",
    Phase.COMPLETED: "completedJobs",
    Phase.FAILED: "failedJobs",
    Phase.TERMINATED: "terminatedJobs",
}
UNKNOWN_LIST = "unKnowJobs"  # Volcano's spelling
UNLISTED = frozenset({Phase.COMPLETING, Phase.TERMINATING})  # Volcano counts them and writes them nowhere
# Where Volcano's job controller has written `runningDuration` (it does when it kills the pods, on the way to
# these phases); a Job without one (volcano-py's job controller does not write it) gets the same value from
# its last transition.
ENDED = frozenset({Phase.COMPLETED, Phase.FAILED, Phase.TERMINATED, Phase.ABORTED})


def _phase(job: Mapping[str, Any]) -> str:
    return str(((job.get("status") or {}).get("state") or {}).get("phase") or "")


def _name(job: Mapping[str, Any]) -> str:
    return str(job["metadata"]["name"])


def job_lists(jobs: Sequence[Mapping[str, Any]]) -> dict[str, list[str]]:
    lists: dict[str, list[str]] = {}
    for job in jobs:
        phase = _phase(job)
        if phase in UNLISTED:
            continue
        lists.setdefault(LISTS.get(phase, UNKNOWN_LIST), []).append(_name(job))
    return lists


def running_duration(job: Mapping[str, Any]) -> tuple[str, float] | None:
    """The Job's running duration as Volcano's Job status spells it (a Go duration) and in seconds."""
    status = job.get("status") or {}
    text = status.get("runningDuration")
    if isinstance(text, str) and text:
        try:
            return text, parse_go_duration(text) / SECOND
        except DurationError:
            return None
    ended = parse_time((status.get("state") or {}).get("lastTransitionTime"))
    created = parse_time((job.get("metadata") or {}).get("creationTimestamp"))
    if _phase(job) in ENDED and ended and created:
        seconds = max(0.0, ended - created)
        return format_duration(seconds), seconds
    return None


def condition(job: Mapping[str, Any]) -> dict[str, Any]:
    meta, status = job.get("metadata") or {}, job.get("status") or {}
    out: dict[str, Any] = {}
    if _phase(job):
        out["phase"] = _phase(job)
    if meta.get("creationTimestamp"):
        out["createTime"] = meta["creationTimestamp"]
    duration = running_duration(job)
    if duration is not None:
        out["runningDuration"] = duration[0]
    if status.get("taskStatusCount"):
        out["taskStatusCount"] = status["taskStatusCount"]
    return out


def running_histories(old: Sequence[Mapping[str, Any]], phase: str, now: float) -> list[dict[str, Any]]:
    """The phases a Job went through: the last entry is closed at `now` and a new one opened when the phase
    changed; a Job seen for the first time starts with its current phase (none while it has none)."""
    histories = [dict(h) for h in old]
    if not histories:
        return [_history(phase, now)] if phase else []
    if histories[-1].get("state", "") != phase:
        histories[-1]["endTimestamp"] = rfc3339(now)
        histories.append(_history(phase, now))
    return histories


def _history(phase: str, now: float) -> dict[str, Any]:
    entry: dict[str, Any] = {"startTimestamp": rfc3339(now)}
    if phase:
        entry["state"] = phase
    return entry


def job_status_entry(job: Mapping[str, Any], old: Mapping[str, Any] | None, now: float) -> dict[str, Any]:
    meta, status = job.get("metadata") or {}, job.get("status") or {}
    entry: dict[str, Any] = {"name": _name(job)}
    if _phase(job):
        entry["state"] = _phase(job)
    created = meta.get("creationTimestamp")
    if created:
        entry["startTimestamp"] = created
    duration = running_duration(job)
    if created and duration is not None:
        entry["endTimestamp"] = rfc3339(parse_time(created) + duration[1])
    if int(status.get("retryCount") or 0):
        entry["restartCount"] = int(status["retryCount"])
    histories = running_histories((old or {}).get("runningHistories") or (), _phase(job), now)
    if histories:
        entry["runningHistories"] = histories
    return entry


def job_status_list(
    old: Sequence[Mapping[str, Any]], jobs: Sequence[Mapping[str, Any]], now: float
) -> list[dict[str, Any]]:
    entries = [dict(e) for e in old]
    position = {str(e.get("name")): i for i, e in enumerate(entries)}
    for job in jobs:
        i = position.get(_name(job))
        entry = job_status_entry(job, entries[i] if i is not None else None, now)
        if i is None:
            position[_name(job)] = len(entries)
            entries.append(entry)
        else:
            entries[i] = entry
    return entries


def flow_status(jobflow: Mapping[str, Any], jobs: Sequence[Mapping[str, Any]], now: float) -> dict[str, Any]:
    """The JobFlow's whole status from its Jobs, its state (phase) as it was: `next_phase` decides the new one.
    Jobs are taken in the order of the flows that make them, so the lists read in spec order."""
    order = {
        f"{jobflow['metadata']['name']}-{f.get('name')}": i
        for i, f in reversed(list(enumerate((jobflow.get("spec") or {}).get("flows") or ())))
    }
    jobs = sorted(jobs, key=lambda j: (order.get(_name(j), len(order)), _name(j)))
    old = jobflow.get("status") or {}
    status: dict[str, Any] = dict(job_lists(jobs))
    entries = job_status_list(old.get("jobStatusList") or (), jobs, now)
    if entries:
        status["jobStatusList"] = entries
    conditions = {_name(j): condition(j) for j in jobs}
    if conditions:
        status["conditions"] = conditions
    status["state"] = dict(old.get("state") or {})
    return status


def next_phase(current: str, status: Mapping[str, Any], flows: int) -> FlowPhase:
    """The phase Volcano's state for `current` moves the flow to, given the new status and the number of
    entries in `spec.flows`."""
    running, completed = status.get(LISTS[Phase.RUNNING]) or (), status.get(LISTS[Phase.COMPLETED]) or ()
    failed, terminated = status.get(LISTS[Phase.FAILED]) or (), status.get(LISTS[Phase.TERMINATED]) or ()
    if current in ("", FlowPhase.PENDING):
        if (running or completed) and not failed:
            return FlowPhase.RUNNING
        if failed or terminated:
            return FlowPhase.FAILED
        return FlowPhase.PENDING
    if current == FlowPhase.RUNNING:
        if len(completed) == flows:
            return FlowPhase.SUCCEED
        if failed or terminated:
            return FlowPhase.FAILED
        return FlowPhase.RUNNING
    return FlowPhase(current)
