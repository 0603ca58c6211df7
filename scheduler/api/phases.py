"""Layer `api`: task statuses and PodGroup phases, and what each status means for node accounting."""

from __future__ import annotations

from enum import Enum
from typing import TypeVar

E = TypeVar("E", bound=Enum)


class TaskStatus(Enum):
    PENDING = "Pending"
    ALLOCATED = "Allocated"
    PIPELINED = "Pipelined"
    BINDING = "Binding"
    BOUND = "Bound"
    RUNNING = "Running"
    RELEASING = "Releasing"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"

    # Members are singletons compared by identity, so identity hashing agrees with equality. Enum's own
    # __hash__ is a Python function (hash of the name): ~200k calls per 20,000-task cycle, keying the jobs'
    # per-status task dicts. Nothing iterates a set of statuses where the order would show.
    __hash__ = object.__hash__


# A task in one of these holds its node's resources and counts towards its gang's minAvailable.
READY_STATUSES = frozenset(
    {TaskStatus.ALLOCATED, TaskStatus.BINDING, TaskStatus.BOUND, TaskStatus.RUNNING, TaskStatus.SUCCEEDED}
)
# These hold a node's resources right now (Succeeded/Failed pods have released them).
OCCUPYING_STATUSES = frozenset(
    {TaskStatus.ALLOCATED, TaskStatus.BINDING, TaskStatus.BOUND, TaskStatus.RUNNING, TaskStatus.RELEASING}
)


class PodGroupPhase(Enum):
    PENDING = "Pending"
    INQUEUE = "Inqueue"
    RUNNING = "Running"
    UNKNOWN = "Unknown"
    COMPLETED = "Completed"

    @staticmethod
    def parse(value: object) -> PodGroupPhase:
        return _parse(PodGroupPhase, value, PodGroupPhase.PENDING)


class QueueState(Enum):
    OPEN = "Open"
    CLOSED = "Closed"
    CLOSING = "Closing"
    UNKNOWN = "Unknown"

    @staticmethod
    def parse(value: object) -> QueueState:
        return _parse(QueueState, value, QueueState.OPEN)


_BY_VALUE: dict[type[Enum], dict[object, Enum]] = {}


def _parse(kind: type[E], value: object, default: E) -> E:
    """The member whose value is `value`; an unknown or missing value, or one that is not a string, reads as
    `default`. One look-up (every PodGroup read parses its phase: a walk of the members cost ~2 us)."""
    if not isinstance(value, str):
        return default
    table = _BY_VALUE.get(kind)
    if table is None:
        table = _BY_VALUE[kind] = {member.value: member for member in kind}
    return table.get(value, default)  # type: ignore[return-value]
