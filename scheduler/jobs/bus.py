"""Volcano's bus vocabulary (events and actions) as enums. Layer: jobs (pure, no Kubernetes client).

Named `PolicyEvent` and `PolicyAction` (what a Job's lifecycle policies match and do) so that neither is
mistaken for the scheduler's `Action` (scheduler/actions) or a Kubernetes `Event` (api/snapshot.py).
"""

from __future__ import annotations

from enum import StrEnum


class PolicyEvent(StrEnum):
    """What happened to a Job (bus.volcano.sh/v1alpha1 Event)."""

    ANY = "*"
    POD_FAILED = "PodFailed"
    POD_EVICTED = "PodEvicted"
    POD_PENDING = "PodPending"
    POD_RUNNING = "PodRunning"
    UNKNOWN = "Unknown"
    TASK_COMPLETED = "TaskCompleted"
    TASK_FAILED = "TaskFailed"
    OUT_OF_SYNC = "OutOfSync"
    COMMAND_ISSUED = "CommandIssued"
    JOB_UPDATED = "JobUpdated"


class PolicyAction(StrEnum):
    """What the job controller does about it (bus.volcano.sh/v1alpha1 Action)."""

    ABORT_JOB = "AbortJob"
    RESTART_JOB = "RestartJob"
    RESTART_TASK = "RestartTask"
    RESTART_POD = "RestartPod"
    TERMINATE_JOB = "TerminateJob"
    COMPLETE_JOB = "CompleteJob"
    RESUME_JOB = "ResumeJob"
    SYNC_JOB = "SyncJob"
    ENQUEUE_JOB = "EnqueueJob"
    SYNC_QUEUE = "SyncQueue"
    OPEN_QUEUE = "OpenQueue"
    CLOSE_QUEUE = "CloseQueue"


# What a user may write in a lifecycle policy; the rest are internal to the controllers.
POLICY_EVENTS: frozenset[str] = frozenset(
    {
        PolicyEvent.ANY,
        PolicyEvent.POD_FAILED,
        PolicyEvent.POD_EVICTED,
        PolicyEvent.POD_PENDING,
        PolicyEvent.UNKNOWN,
        PolicyEvent.TASK_COMPLETED,
        PolicyEvent.TASK_FAILED,
        PolicyEvent.JOB_UPDATED,
    }
)
POLICY_ACTIONS: frozenset[str] = frozenset(
    {
        PolicyAction.ABORT_JOB,
        PolicyAction.RESTART_JOB,
        PolicyAction.RESTART_TASK,
        PolicyAction.RESTART_POD,
        PolicyAction.TERMINATE_JOB,
        PolicyAction.COMPLETE_JOB,
        PolicyAction.RESUME_JOB,
    }
)
