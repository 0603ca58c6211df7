"""What the Job lifecycle reads and what it answers, as frozen values. Layer: jobs (pure).

In: the Job's `JobStatus` (phase, retries, version), a `PodView` of each of its pods and the `JobEvent` that
happened. Out: a `Decision`, the new status and the `Op`s (create or delete pods, ensure or delete the
PodGroup) that the simulator and the kopf controller both carry out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from scheduler.api.pod import TASK_SPEC_KEY
from scheduler.jobs.bus import PolicyAction, PolicyEvent


class Phase(StrEnum):
    PENDING = "Pending"
    ABORTING = "Aborting"
    ABORTED = "Aborted"
    RUNNING = "Running"
    RESTARTING = "Restarting"
    COMPLETING = "Completing"
    COMPLETED = "Completed"
    TERMINATING = "Terminating"
    TERMINATED = "Terminated"
    FAILED = "Failed"


FINISHED = frozenset({Phase.COMPLETED, Phase.TERMINATED, Phase.FAILED})


# ---------------------------------------------------------------------------------------------- inputs


@dataclass(frozen=True, slots=True)
class PodView:
    """What the lifecycle needs to know about one pod of the job."""

    name: str
    task: str
    phase: str = "Pending"  # Pending | Running | Succeeded | Failed | Unknown
    exit_code: int | None = None
    deleting: bool = False
    restarts: int = 0
    ready: bool = True  # every container reports ready (a pod without container statuses counts as ready)


@dataclass(frozen=True, slots=True)
class JobStatus:
    phase: Phase = Phase.PENDING
    retry_count: int = 0
    version: int = 0

    @classmethod
    def of(cls, job: Mapping[str, Any]) -> JobStatus:
        status = job.get("status") or {}
        phase = (status.get("state") or {}).get("phase") or Phase.PENDING
        return cls(Phase(phase), int(status.get("retryCount", 0)), int(status.get("version", 0)))


@dataclass(frozen=True, slots=True)
class JobEvent:
    """A request to the lifecycle: what happened, to which task/pod, or the command's action."""

    event: PolicyEvent = PolicyEvent.OUT_OF_SYNC
    task: str = ""
    pod: str = ""
    exit_code: int | None = None
    action: PolicyAction | None = None  # set by CommandIssued, or by a deferred policy coming due
    job_version: int | None = None  # the job-version annotation of the pod that raised it


def pod_view(pod: Mapping[str, Any]) -> PodView:
    """A PodView from a Pod manifest (first container's exit code, as Volcano reads it)."""
    meta, status = pod.get("metadata") or {}, pod.get("status") or {}
    statuses = status.get("containerStatuses") or []
    terminated = ((statuses[0].get("state") or {}).get("terminated") or {}) if statuses else {}
    return PodView(
        name=str(meta.get("name")),
        task=str((meta.get("annotations") or {}).get(TASK_SPEC_KEY, "")),
        phase=str(status.get("phase") or "Pending"),
        exit_code=terminated.get("exitCode"),
        deleting=bool(meta.get("deletionTimestamp")),
        restarts=sum(int(s.get("restartCount", 0)) for s in statuses),
        ready=all(bool(s.get("ready")) for s in statuses),
    )


# ---------------------------------------------------------------------------------------------- outputs


class OpKind(StrEnum):
    CREATE_PODS = "CreatePods"
    DELETE_PODS = "DeletePods"
    ENSURE_PODGROUP = "EnsurePodGroup"
    DELETE_PODGROUP = "DeletePodGroup"


@dataclass(frozen=True, slots=True)
class Op:
    kind: OpKind
    names: tuple[str, ...] = ()
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Counts:
    pending: int = 0
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    terminating: int = 0
    unknown: int = 0

    @property
    def alive(self) -> int:
        return self.pending + self.running + self.terminating


@dataclass(frozen=True, slots=True)
class Deferred:
    """A policy with a `timeout`: run `action` after `seconds` unless the pod recovers first."""

    action: PolicyAction
    seconds: float
    event: PolicyEvent
    pod: str = ""


@dataclass(frozen=True, slots=True)
class Decision:
    phase: Phase
    retry_count: int
    version: int
    action: PolicyAction
    counts: Counts
    min_available: int
    ops: tuple[Op, ...] = ()
    task_counts: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    deferred: Deferred | None = None
    waiting: Mapping[str, str] = field(default_factory=dict)  # task -> why its pods are not created (dependsOn)

    def pods_to_create(self) -> tuple[str, ...]:
        return tuple(n for op in self.ops if op.kind is OpKind.CREATE_PODS for n in op.names)

    def pods_to_delete(self) -> tuple[str, ...]:
        return tuple(n for op in self.ops if op.kind is OpKind.DELETE_PODS for n in op.names)

    def status(self) -> dict[str, Any]:
        """The Job `status` this decision writes."""
        c = self.counts
        return {
            "state": {"phase": str(self.phase)},
            "minAvailable": self.min_available,
            "pending": c.pending, "running": c.running, "succeeded": c.succeeded,
            "failed": c.failed, "terminating": c.terminating, "unknown": c.unknown,
            "retryCount": self.retry_count, "version": self.version,
            "taskStatusCount": {t: {"phase": dict(p)} for t, p in self.task_counts.items()},
        }

