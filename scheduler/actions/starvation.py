"""Layer `actions`: the starvation guard of `allocate` — a gang that waited too long reserves what it needs.

A gang (minAvailable > 1) that has waited longer than `starvationThresholdSeconds` (an `allocate` argument in
`configurations`, default 300; a negative value turns the guard off) goes ahead of queue order, right after
partly bound gangs, oldest first:

1. Its tasks take idle resources as usual (and releasing resources, pipelined), pod by pod.
2. If that makes it ready, it is committed and bound like any gang (unless a gang placer such as the topology
   solver declined it: then its placement must come from the placer, and this stays a reservation).
3. Otherwise the placements are kept in the session, never bound, and each task still missing is pipelined
   onto the node closest to holding it. Later jobs in the cycle see those resources as taken, so a stream of
   small jobs cannot take them; a small job still uses a reserved node if it fits beside the reservation.
   Every cycle the reservation is made afresh (nothing reaches the API), and as running pods finish, the gang
   collects what they free until it is ready.
4. The queue's limits hold for a reservation as for a placement: each task, placed or pipelined, passes
   `Allocatable` (proportion's deserved share, capacity's capability ...). Where the queue refuses one, the
   reservation is kept only while the queue holds bound pods of other jobs that, once they finish, would free
   at least what the gang still lacks; otherwise it could never complete (a gang larger than its queue's share,
   or a queue whose room is all reserved): it is dropped, and the gang waits with the queue's reason. A kept
   reservation counts in the queue's allocation, so without this a queue could sit on a reservation forever
   with none of its jobs allowed to run (the simulated GPU day, docs/simulator.md).
5. With `starvationHoldIdle` (an `allocate` argument; off by default, and Volcano has no guard at all) a
   reservation also holds the idle room of the nodes its missing tasks are pipelined on, up to each task's
   request, for the rest of the cycle (placeholders that belong to no job, as `consolidate`'s held room,
   `holds.py`): no later job of the cycle takes a GPU freed there, so the nodes drain for the gang. Off, a small
   job still uses a reserved node when it fits beside the reservation, and on a busy cluster the small jobs take
   each freed GPU before the gang has them all (the simulated GPU day, docs/simulator.md). The value is a
   duration (`true`: 1h): a node held for a gang that has freed nothing more for the gang in that long (its pods
   may never end: a service) is held no longer, so a gang cannot keep a node's idle GPUs from everyone forever.
   Progress is remembered from cycle to cycle in the `CycleMemo` (`framework/holds.py`, `DrainBook`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.actions.holds import hold_room
from scheduler.api.decision import Code, Status
from scheduler.api.job import JobInfo, TaskInfo
from scheduler.api.node import NodeInfo
from scheduler.api.phases import OCCUPYING_STATUSES, TaskStatus
from scheduler.api.queue import QueueInfo
from scheduler.api.reasons import QueueShareExceeded, Reserving, amounts
from scheduler.api.resources import Resource
from scheduler.durations import parse_seconds
from scheduler.framework import points as P
from scheduler.framework.conf_args import as_bool
from scheduler.framework.holds import HeldPod
from scheduler.framework.session import Session
from scheduler.plugins.shares import without_pods

THRESHOLD_ARG = "starvationThresholdSeconds"
DEFAULT_THRESHOLD = 300.0
HOLD_IDLE_ARG = "starvationHoldIdle"
DEFAULT_HOLD_IDLE = 3600.0  # seconds a held node may go without freeing anything for its gang (`true`)
HOLD_IDLE_TOP = 7 * 24 * 3600.0


def parse_threshold(raw: object) -> float:
    """`starvationThresholdSeconds` in the one duration grammar (`scheduler/durations.py`): a Go duration such as
    `5m`, or a plain number of seconds; negative turns the guard off. A ValueError names what is wrong."""
    value = parse_seconds(raw)
    if value != value:  # NaN
        raise ValueError(f"not a duration: {raw!r}")
    return value


def threshold(arguments: Mapping[str, Any]) -> float | None:
    """The configured threshold in seconds, or None when the guard is off (an unreadable value: the default,
    which `conf check` and the conf loader name)."""
    try:
        value = parse_threshold(arguments.get(THRESHOLD_ARG, DEFAULT_THRESHOLD))
    except ValueError:
        return DEFAULT_THRESHOLD
    return None if value < 0 else value


def parse_hold_idle(raw: object) -> float:
    """`starvationHoldIdle` in seconds (0: off): a duration (`30m`, or seconds) from 0 to 7 days, or a boolean
    (`true`: 1h, `false`: off). A ValueError names what is wrong."""
    switch = as_bool(raw) if isinstance(raw, bool | str) else None
    if switch is not None:
        return DEFAULT_HOLD_IDLE if switch else 0.0
    value = parse_seconds(raw)
    if not 0 <= value <= HOLD_IDLE_TOP:  # NaN fails too
        raise ValueError(f"not a duration from 0s to 168h: {raw!r}")
    return value


def hold_idle(arguments: Mapping[str, Any]) -> float:
    """The configured `starvationHoldIdle` in seconds, 0 when off or unreadable (`conf check` names it)."""
    try:
        return parse_hold_idle(arguments.get(HOLD_IDLE_ARG, 0))
    except ValueError:
        return 0.0


def starving_gangs(ssn: Session, jobs: list[JobInfo]) -> list[JobInfo]:
    limit = threshold(ssn.conf.configurations.get("allocate") or {})
    if limit is None:
        return []
    waiting = [
        j for j in jobs
        if j.min_available > 1 and not j.is_started() and not j.is_ready() and ssn.now - j.creation >= limit
    ]
    return sorted(waiting, key=lambda j: (j.creation, j.key))


def lacking(request: Resource, available: Resource) -> float:
    """How far `available` is from holding `request`: each resource's shortfall as a share of the request, summed
    (0: it holds it)."""
    return sum(units / max(1, request.get(name)) for name, units in request.shortfall(available).items())


def _closest(ssn: Session, task: TaskInfo, held: dict[str, int]) -> NodeInfo | None:
    """The feasible node whose future idle is closest to holding the task and that can still be reserved."""
    request = task.resreq
    best: tuple[float, str, NodeInfo] | None = None
    for node in ssn.fit.feasible_nodes(task):
        if not request <= node.allocatable - node.pipelined:
            continue
        key = lacking(request, node.future_idle())
        candidate = (key + held.get(node.name, 0) * 1e-9, node.name, node)
        if best is None or candidate[:2] < best[:2]:
            best = candidate
    return best[2] if best is not None else None


def releasable(ssn: Session, queue: QueueInfo, job: JobInfo) -> Resource:
    """What the queue's other jobs hold in pods that are bound (or committed this cycle) and will free when they
    finish: not other reservations (an uncommitted placement of a gang that is not ready), which free nothing."""
    held: list[Resource] = []
    for other in ssn.jobs.values():
        if other.queue != queue.name or other is job:
            continue
        ready = other.is_ready()
        held.extend(without_pods(t.resreq) for t in other.tasks.values()
                    if t.status in OCCUPYING_STATUSES and (ready or t.status is not TaskStatus.ALLOCATED))
    return Resource.total(held)


def can_complete(ssn: Session, queue: QueueInfo, job: JobInfo, unplaced: list[TaskInfo]) -> bool:
    """Whether a reservation the queue refused to grow could still complete: the tasks the gang still lacks
    (its first unplaced ones, up to minAvailable with the placed and pipelined) ask no more than the queue's
    other jobs will free."""
    lacking = max(0, job.min_available - job.ready_task_num() - job.waiting_task_num())
    need = Resource.total(without_pods(t.resreq) for t in unplaced[:lacking])
    return need <= releasable(ssn, queue, job)


def _within_share(ssn: Session, queue: QueueInfo, task: TaskInfo) -> Status:
    """Allocatable for a task no node holds now, which the guard reserves on the closest node: proportion and
    capacity let such a task through Allocatable (it is to fail on resources, `QueueBook.placeable`), so their
    count without that escape hatch (`allocatable_count`, as bulk placement asks it) must also take it."""
    allowed = ssn.tiers.run(P.ALLOCATABLE, queue, task)
    if allowed.ok and any(fn.many(queue, task, 1) < 1 for fn in ssn.tiers.functions(P.ALLOCATABLE)
                          if isinstance(fn, P.CountedDecision)):
        return Status(Code.UNSCHEDULABLE, (QueueShareExceeded(queue.name, amounts(task.resreq)),), "allocate")
    return allowed


def reserve(ssn: Session, queue: QueueInfo, job: JobInfo, pending: list[TaskInfo],
            place: Any, placer_declined: bool, hold_for: float = 0.0) -> None:
    """Place `job` as far as it goes; commit it if ready, else keep it as a reservation (see the module doc)."""
    stmt = ssn.statement()
    tasks = job.minimums_first(ssn.order.task_order(pending))
    missing: list[TaskInfo] = []
    refused: Status | None = None
    for task in tasks:
        allowed = ssn.tiers.run(P.ALLOCATABLE, queue, task)
        if not allowed.ok:
            refused = allowed
            break
        node, pipelined = place(ssn, task)
        if node is None:
            missing.append(task)
        elif pipelined:
            stmt.pipeline(task, node)
        else:
            stmt.allocate(task, node)
        if ssn.tiers.run(P.JOB_READY, job):
            break
    if ssn.tiers.run(P.JOB_READY, job) and not placer_declined:
        stmt.commit()
        return
    held: dict[str, int] = {}
    for task in missing:
        if not ssn.tiers.run(P.JOB_PIPELINED, job).rejected:
            break
        allowed = _within_share(ssn, queue, task)  # the tasks with no node took no share above
        if not allowed.ok:
            refused = allowed
            break
        node = _closest(ssn, task, held)
        if node is None:
            break
        held[node.name] = held.get(node.name, 0) + 1
        stmt.pipeline(task, node)
    if refused is not None:
        placed = {op.task.key for op in stmt.operations}
        unplaced = [t for t in tasks if t.key not in placed]
        if not can_complete(ssn, queue, job, unplaced):
            stmt.discard()
            ssn.results.hold(job, refused)
            return
    drained = 0
    if hold_for > 0:
        drained = _hold_idle(ssn, job, [(op.task, op.node) for op in stmt.operations if op.kind == "pipeline"],
                             hold_for)
    reserving = Reserving(ssn.now - job.creation, len({op.node for op in stmt.operations}),
                          sum(1 for op in stmt.operations), job.min_available, drained)
    ssn.results.hold(job, Status(Code.UNSCHEDULABLE, (reserving,), "allocate"))


def _hold_idle(ssn: Session, job: JobInfo, pipelined: list[tuple[TaskInfo, str]], hold_for: float) -> int:
    """5.: for each reserved task, a placeholder on its node taking what of the node's idle the task asks for,
    unless the node freed nothing more for the gang in `hold_for` seconds; the number of nodes that keep their free
    room for the gang (held now, or with none free yet). What to hold is worked out first and placed at the end
    (`holds.hold_room`), so a failure on this gang leaves no placeholder behind. A placeholder belongs to no job and
    no queue, is no victim and is never bound; the session ends with the cycle, and with it the placeholder."""
    drains = ssn.holds.drains
    drains.forget(job.key, {name for _, name in pipelined}, ssn.now, hold_for, ssn.jobs)
    drained: set[str] = set()
    held: list[HeldPod] = []
    for task, name in pipelined:
        node = ssn.nodes.get(name)
        # what the node still lacks for the task (its own pipelined place counts in future idle: the same offset
        # every cycle, so a smaller number is progress)
        if node is None or not drains.progressing(job.key, name, lacking(task.resreq, node.future_idle()),
                                                  ssn.now, hold_for):
            continue
        drained.add(name)
        room = task.resreq.min_with(node.idle.clamp_zero())  # an over-committed node's idle is below zero
        if not without_pods(room).is_zero():
            held.append(HeldPod(task.key, name, room))
    hold_room(ssn, held)
    return len(drained)
