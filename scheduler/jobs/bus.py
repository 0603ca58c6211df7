"""Volcano's bus vocabulary (events and actions) as enums. Layer: jobs (pure, no Kubernetes client)."""

from __future__ import annotations

from enum import StrEnum


class Event(StrEnum):
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


class Action(StrEnum):
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
        Event.ANY,
        Event.POD_FAILED,
        Event.POD_EVICTED,
        Event.POD_PENDING,
        Event.UNKNOWN,
        Event.TASK_COMPLETED,
        Event.TASK_FAILED,
        Event.JOB_UPDATED,
    }
)
POLICY_ACTIONS: frozenset[str] = frozenset(
    {
        Action.ABORT_JOB,
        Action.RESTART_JOB,
        Action.RESTART_TASK,
        Action.RESTART_POD,
        Action.TERMINATE_JOB,
        Action.COMPLETE_JOB,
        Action.RESUME_JOB,
    }
)
