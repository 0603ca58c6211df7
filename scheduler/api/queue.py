"""Layer `api`: a Queue as the session sees it."""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.api.min_runtime import NO_MIN_RUNTIME, QueueMinRuntime
from scheduler.api.phases import QueueState
from scheduler.api.resources import ZERO, Resource
from scheduler.api.usage import QueueUsage


@dataclass(slots=True, eq=False)
class QueueInfo:
    name: str
    weight: int = 1
    capability: Resource | None = None  # None: unlimited
    guarantee: Resource = ZERO
    state: QueueState = QueueState.OPEN
    reclaimable: bool = True
    priority: int = 0
    creation: float = 0.0
    # Extended resources `capability` names at 0 (Resource drops zeros): the queue may use none of them.
    # As in Volcano; cpu or memory at 0 still means "not limited".
    capability_zero: frozenset[str] = frozenset()
    deserved: Resource | None = None  # `spec.deserved`: the share the `capacity` plugin gives (proportion ignores it)
    parent: str = ""  # `spec.parent`, for capacity with enableHierarchy ("" is the root queue's child)
    # Seconds a victim of this queue is warned before its eviction (annotation volcano-py.io/eviction-notice,
    # api/evictions.py); 0: evicted at once, as in Volcano.
    eviction_notice: float = 0.0
    # Its decayed usage history (annotation volcano-py.io/usage, api/usage.py); None: none, or unreadable.
    usage: QueueUsage | None = None
    # How long its running jobs are kept from eviction once started (annotations volcano-py.io/min-runtime,
    # preempt-min-runtime, reclaim-min-runtime; api/min_runtime.py), for the minruntime plugin.
    min_runtime: QueueMinRuntime = NO_MIN_RUNTIME

    def clone(self) -> QueueInfo:
        return QueueInfo(
            self.name,
            self.weight,
            self.capability,
            self.guarantee,
            self.state,
            self.reclaimable,
            self.priority,
            self.creation,
            self.capability_zero,
            self.deserved,
            self.parent,
            self.eviction_notice,
            self.usage,
            self.min_runtime,
        )

    def __repr__(self) -> str:
        return f"Queue({self.name} w={self.weight} {self.state.value})"
