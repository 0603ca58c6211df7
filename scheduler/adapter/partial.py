"""Layer `adapter`: the partly-bound-gang timeout, a policy the scheduler loop and the simulator run after every cycle.

A gang is *partly bound* when some of its pods are bound (or running) but fewer than `minMember` are, while
others still wait: a scheduler crashed between the binds of one gang, a bind failed, or a pod of a running
gang was lost and its replacement does not fit. The allocate action already completes such gangs first, ahead
of queue order. If one still cannot be completed `timeout` seconds after it became partly bound, holding its
pods only wastes their resources, so the gang is given up:

- its bound pods that a controller owns (an ownerReference with `controller: true`) are evicted, so the
  controller recreates them and the whole gang is scheduled again from scratch;
- bound pods that nobody owns would be lost for good if evicted, so they are left, and the PodGroup is marked
  phase `Unknown` with an `Unschedulable` condition (reason `PartialGangTimeout`) that says so.

"Became partly bound" is read from the objects, not from this process's memory, so a restarted scheduler
keeps the clock: the latest bind among the gang's bound pods (their `PodScheduled` transition) or the latest
creation among its waiting pods (a replacement pod), whichever is later. The simulator answers the same
questions (`GangFacts`) from its objects and its simulated clock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from scheduler.api.convert import F_OWNERS, F_POD_CONDITIONS
from scheduler.api.decision import Code, Status
from scheduler.api.job import JobInfo
from scheduler.api.messages import UNSCHEDULABLE, render, unschedulable_condition
from scheduler.api.phases import PodGroupPhase, TaskStatus
from scheduler.api.reasons import PartialGangTimeout
from scheduler.api.snapshot import ClusterSnapshot, CycleResult, Event, EvictCause, Eviction, PodGroupStatus

REASON = "PartialGangTimeout"
# Kubernetes timestamps are whole seconds, truncated: an event stamped 10:00:00 happened before 10:00:01. Count
# from the end of the second, so a gang is never given up early.
TIMESTAMP_RESOLUTION = 1.0
HOLDING = (TaskStatus.BINDING, TaskStatus.BOUND, TaskStatus.RUNNING)
DEFAULT_TIMEOUT = 60.0  # seconds; the scheduler's --partial-gang-timeout default


class GangFacts(Protocol):
    """What the policy asks the cluster adapter about a gang's pods and PodGroup."""

    def bound_at(self, pod_key: str) -> float | None: ...

    def controller_owned(self, pod_key: str) -> bool: ...

    def has_podgroup(self, key: str) -> bool: ...


def owned_by_controller(pod: Mapping[str, Any]) -> bool:
    """The pod has an ownerReference with `controller: true` (a controller recreates it if evicted); read
    through the table (api/fields.py), an unreadable list reading as no owner."""
    meta = pod.get("metadata")
    refs = meta.get("ownerReferences") if isinstance(meta, Mapping) else None
    return any(controller for _, controller in F_OWNERS.read(refs, "", None))


def bound_since(pod: Mapping[str, Any]) -> float | None:
    """When the pod was bound, as the pod says: its `PodScheduled=True` transition; None if it does not say (or
    its conditions cannot be read: api/fields.py)."""
    status = pod.get("status")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    return F_POD_CONDITIONS.read(conditions, "", None)  # type: ignore[no-any-return]


@dataclass(frozen=True, slots=True)
class PartialGang:
    job: str
    since: float  # when it became partly bound
    bound: tuple[tuple[str, str], ...]  # (task uid, node) of the pods that hold resources
    ready: int
    min_available: int


def partly_bound(job: JobInfo) -> bool:
    waiting = any(not t.best_effort for t in job.with_status(TaskStatus.PENDING))
    return waiting and job.count(*HOLDING) > 0 and not job.is_ready()


def overdue_partial_gangs(
    jobs: Iterable[JobInfo],
    completed: set[str],
    now: float,
    timeout: float,
    bound_at: Callable[[str], float | None],
) -> list[PartialGang]:
    """Gangs still partly bound after this cycle (not in `completed`) for longer than `timeout` seconds.

    `bound_at(task_uid)` is when a pod was bound, if known.
    """
    overdue = []
    for job in jobs:
        if job.key in completed or not partly_bound(job):
            continue
        holding = [t for status in HOLDING for t in job.with_status(status)]
        times = [at for t in holding if (at := bound_at(t.key)) is not None]
        times += [t.creation for t in job.with_status(TaskStatus.PENDING) if t.creation]
        since = max(times) + TIMESTAMP_RESOLUTION if times else now
        if now - since >= timeout:
            overdue.append(
                PartialGang(job.key, since, tuple((t.key, t.node_name) for t in holding), job.ready_task_num(),
                            job.min_available)
            )
    return overdue


def give_up(
    result: CycleResult,
    gangs: Iterable[PartialGang],
    jobs: Mapping[str, JobInfo],
    owned: Callable[[str], bool],
    has_podgroup: Callable[[str], bool],
    timeout: float,
) -> None:
    """Add to `result` what giving up these gangs means: evictions, an `Unknown` phase, a condition, an event."""
    statuses = {s.job: i for i, s in enumerate(result.podgroups)}
    for gang in gangs:
        evict = [(task, node) for task, node in gang.bound if owned(task)]
        kept = [task for task, _ in gang.bound if not owned(task)]
        head = (
            f"gang partly bound ({gang.ready}/{gang.min_available} pods) for more than {timeout:g}s "
            "and cannot be completed"
        )
        cause = EvictCause("partial-gang", gang.job, "partly bound past its timeout", breaks_gang=True)
        for task, node in evict:
            result.evictions.append(Eviction(gang.job, task, node, f"{head}: evicted so its controller recreates it",
                                             cause))
        if evict:
            evicted = PartialGangTimeout(gang.ready, gang.min_available, timeout, len(evict), 0)
            result.events.append(Event("PodGroup", gang.job, "Warning", REASON, render(evicted)))
        if not kept or not has_podgroup(gang.job):
            continue
        decision = Status(Code.UNSCHEDULABLE, (
            PartialGangTimeout(gang.ready, gang.min_available, timeout, len(evict), len(kept)),), "partial-gang")
        condition = unschedulable_condition(REASON, decision)
        index = statuses.get(gang.job)
        job = jobs[gang.job]
        conditions = result.podgroups[index].conditions if index is not None else job.conditions
        status = PodGroupStatus(
            gang.job,
            PodGroupPhase.UNKNOWN,
            (*(c for c in conditions if c.type != UNSCHEDULABLE), condition),
            job.count(TaskStatus.RUNNING),
            job.count(TaskStatus.SUCCEEDED),
            job.count(TaskStatus.FAILED),
            decision=decision,
        )
        if index is None:
            result.podgroups.append(status)
        else:
            result.podgroups[index] = status
        result.events.append(Event("PodGroup", gang.job, "Warning", REASON, condition.message))


@dataclass(frozen=True, slots=True)
class PartialGangPolicy:
    """Give up gangs partly bound for longer than `timeout` seconds, after a cycle and before it is applied."""

    timeout: float = DEFAULT_TIMEOUT

    def apply(self, snapshot: ClusterSnapshot, result: CycleResult, facts: GangFacts) -> list[PartialGang]:
        """Add the give-ups to `result`; returns the gangs given up (the caller may log them)."""
        completed = {g.job for g in result.binds}
        overdue = overdue_partial_gangs(snapshot.jobs.values(), completed, snapshot.now, self.timeout, facts.bound_at)
        if overdue:
            give_up(result, overdue, snapshot.jobs, facts.controller_owned, facts.has_podgroup, self.timeout)
        return overdue
