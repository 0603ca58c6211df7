"""Layer `plugins`: queue shares, the accounting that `proportion` and `capacity` share (and `drf`, `overcommit`).

Not a plugin: the module the queue-share plugins are composed from, so that no plugin imports another.

- Resource arithmetic without the `pods` count, which takes no part in shares (as in Volcano).
- A queue's *real capability*: its `capability`, or the cluster total less what the other queues are
  guaranteed; resources `capability` does not name (and cpu or memory given as 0) are not limited by it.
- Weighted water-filling of the cluster among queues (`deserved_shares`, proportion's rule; overcommit's
  estimate of what reclaim could free uses it too).
- `QueueBook`: each queue's allocated, requested, admitted and elastic amounts over one session, kept current
  by the Statement's events. The plugin that owns it says which queues a job counts in (its `path`: the queue
  alone, or the queue and its ancestors) and what each queue deserves.
- The enqueue gate on real capability and the reasons it gives; what preempt and reclaim could free for a job.

A queue's *request* is what its jobs hold plus what their pending tasks ask for; *admitted* is the part of
admitted jobs' minResources they do not hold yet; *elastic* is what jobs hold beyond their own minResources.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache
from typing import TypeVar

from scheduler.api.job import JobInfo, TaskInfo
from scheduler.api.node import NodeInfo
from scheduler.api.phases import PodGroupPhase, TaskStatus
from scheduler.api.queue import QueueInfo
from scheduler.api.reasons import CAPABILITY, PARENT_CAPABILITY, REAL_CAPABILITY, QueueLimit
from scheduler.api.resources import CPU, MEMORY, PODS, ZERO, Resource
from scheduler.framework.plugin import Plugin, SessionAPI
from scheduler.framework.victims import gang_safe, is_critical, running_candidates, victim_order

# Water-filling converges in a few rounds; integer crumbs can only shrink. This is a guard, not a tuning knob.
_UNIT_TOLERANCE = 0.1  # what is left to share below this is nothing (Volcano's minResource)
_MAX_ROUNDS = 1000
ADMITTED_PHASES = frozenset({PodGroupPhase.INQUEUE, PodGroupPhase.RUNNING, PodGroupPhase.UNKNOWN})


# ---- resource arithmetic without the pods count -------------------------------------------------------

# A job's part in its queue's amounts (`queue_parts.py`): (allocated, request, admitted, elastic)
Part = tuple[Resource, Resource, Resource, Resource]


def _queue_of(job: JobInfo) -> str:
    return job.queue



def without_pods(resource: Resource) -> Resource:
    return Resource(resource.cpu, resource.memory, 0, resource.scalars) if resource.pods else resource


def held_by(tasks: Sequence[TaskInfo]) -> Resource:
    """What tasks with one request hold, without pods: the request times their number (a bulk run's tasks,
    `EventHandler.allocate_many`); the same value as the sum."""
    return without_pods(tasks[0].resreq).scale(len(tasks))


def dimensions(resource: Resource) -> dict[str, int]:
    """The non-zero resources of `resource` other than pods."""
    return {name: units for name, units in resource.items() if units and name != PODS}


def cluster_total(nodes: Iterable[NodeInfo]) -> Resource:
    return without_pods(Resource.total(node.allocatable for node in nodes))


def session_total(ssn: SessionAPI) -> Resource:
    """`cluster_total` of the session's nodes, summed once per session for every plugin that asks."""
    return without_pods(ssn.allocatable_total())


def still_lacking(job: JobInfo) -> Resource:
    """The part of the job's minResources it does not hold yet (pods excluded): what admitting it asks of its
    queue and of the cluster. A gang that lost pods and is admitted again holds the rest already, and that rest
    is in its queue's allocated and the nodes' use: counting the whole minResources would count it twice.
    Volcano's JobEnqueueable (plugins/proportion/proportion.go, capacity/capacity.go, overcommit/overcommit.go)
    adds the whole minResources; ours does not, as for the reservation of an admitted job below."""
    assert job.min_resources is not None
    return (without_pods(job.min_resources) - without_pods(job.allocated())).clamp_zero()


def reserved_by_admitted(job: JobInfo) -> Resource:
    """What an admitted job's minResources still reserves: the part it does not hold yet."""
    if job.min_resources is None or job.phase not in ADMITTED_PHASES:
        return ZERO
    reserved = still_lacking(job)
    # Pods held by scheduling gates reserve nothing: they would block other jobs for as long as the gates stay
    # (Volcano's DeductSchGatedResources, pkg/scheduler/api/job_info.go). Except a pod whose only gate is Volcano's
    # queue-allocation gate: it waits for exactly this room, so it counts (GetSchGatedPodResources).
    gated = ZERO
    for task in job.with_status(TaskStatus.PENDING):
        if task.gated and not task.only_queue_gate:
            gated = gated + without_pods(task.resreq)
    return reserved if gated.is_zero() else (reserved - gated).clamp_zero()


def elastic_of(job: JobInfo) -> Resource:
    """What a job holds beyond its own minResources (nothing, for a job that declares none)."""
    if job.min_resources is None:
        return ZERO
    return (without_pods(job.allocated()) - without_pods(job.min_resources)).clamp_zero()


@lru_cache(maxsize=1 << 16)
def share_of(allocated: Resource, deserved: Resource) -> Fraction:
    """The largest allocated/deserved ratio over the resources deserved (0 when nothing is deserved). A pure
    function of two values, remembered: jobs of one shape hold the same, and the cluster's total rarely changes,
    so most of a cycle's thousands of shares were worked out before."""
    share = Fraction(0)
    for name, units in dimensions(deserved).items():
        share = max(share, Fraction(allocated.get(name), units))
    return share


def total_guarantee(queues: Iterable[QueueInfo]) -> Resource:
    total = ZERO
    for queue in queues:
        total = total + without_pods(queue.guarantee)
    return total


# ---- real capability and water-filling ----------------------------------------------------------------


def real_capability(
    queue: QueueInfo, total: Resource, total_guarantee: Resource
) -> tuple[dict[str, int], frozenset[str]]:
    """(limit per resource, the resources whose limit is the queue's own `capability`)."""
    limit = {
        name: total.get(name) - total_guarantee.get(name) + queue.guarantee.get(name)
        for name in dimensions(total).keys() | dimensions(total_guarantee).keys()
    }
    own: set[str] = set()
    if queue.capability is not None:
        for name, units in dimensions(queue.capability).items():
            if name not in limit or units < limit[name]:
                limit[name] = units
                own.add(name)
    for name in queue.capability_zero:
        limit[name] = 0
        own.add(name)
    return limit, frozenset(own)


@dataclass(frozen=True, slots=True)
class QueueDemand:
    """One queue's input to water-filling. `limit` maps each limited resource to its real capability."""

    name: str
    weight: int
    request: Resource
    guarantee: Resource = ZERO
    limit: Mapping[str, int] = field(default_factory=dict)


def deserved_shares(total: Resource, queues: Sequence[QueueDemand]) -> dict[str, Resource]:
    """Weighted water-filling of `total` among `queues` (Volcano's proportion), in integer units.

    Every round, each queue not yet satisfied gets `remaining x weight / total weight`, capped per resource by
    its limit and by what it requests; a queue whose request is met (or whose share stopped growing) leaves the
    round robin and what it did not take is shared again among the rest. A queue's guarantee is a floor.

    The rounds run in floating point, as Volcano's do (pkg/scheduler/plugins/proportion/proportion.go, whose
    comparisons then tolerate a tenth of a unit), and each share is rounded to the nearest unit at the end.
    Rounding down every round instead lost a unit per round: a queue due 3500m cpu got 3499m and refused a
    task that fitted exactly (differential seed 108), one due 8 GPUs got 7999 milli-GPUs."""
    names = list(dimensions(total))
    deserved: dict[str, dict[str, float]] = {q.name: {} for q in queues}
    remaining: dict[str, float] = {name: float(total.get(name)) for name in names}
    met: set[str] = set()
    for _ in range(_MAX_ROUNDS):
        active = [q for q in queues if q.name not in met]
        total_weight = sum(max(q.weight, 0) for q in active)
        if total_weight <= 0:
            break
        before = dict(remaining)
        given = dict.fromkeys(names, 0.0)  # every queue of a round shares the same `remaining`
        for queue in active:
            old = deserved[queue.name]
            new = _grown(old, queue, remaining, total_weight, names)
            request = dimensions(queue.request)
            if all(units <= new.get(name, 0) for name, units in request.items()) or new == old:
                met.add(queue.name)
            for name, units in dimensions(queue.guarantee).items():
                new[name] = max(new.get(name, 0), units)
            for name in names:
                given[name] += new.get(name, 0) - old.get(name, 0)
            deserved[queue.name] = new
        remaining = {name: units - given[name] for name, units in remaining.items()}
        if all(units < _UNIT_TOLERANCE for units in remaining.values()) or remaining == before:
            break
    rounded = {name: {k: math.floor(v + 0.5) for k, v in d.items()} for name, d in deserved.items()}
    return {name: Resource.of(d.pop(CPU, 0), d.pop(MEMORY, 0), 0, d) for name, d in rounded.items()}


def _grown(
    old: Mapping[str, float],
    queue: QueueDemand,
    remaining: Mapping[str, float],
    total_weight: int,
    names: list[str],
) -> dict[str, float]:
    new = dict(old)
    for name in names:
        units = old.get(name, 0.0) + max(remaining[name], 0.0) * queue.weight / total_weight
        if name in queue.limit:
            units = min(units, queue.limit[name])
        new[name] = min(units, queue.request.get(name))
    return new


# ---- what preempt and reclaim could free for a job (the enqueue gates count it) ----------------------------


def preemptable_for(ssn: SessionAPI, job: JobInfo) -> Resource:
    """What preempt could free for `job`, if `preempt` runs: running tasks of lower-priority jobs in its queue
    that may be evicted (not non-preemptable, not critical, not below their gang's minAvailable)."""
    if "preempt" not in ssn.conf.actions:
        return ZERO
    candidates = [
        task
        for other in ssn.jobs.values()
        if other.queue == job.queue and other.priority < job.priority
        for task in running_candidates(other.tasks.values())
        if not is_critical(task)
    ]
    total = ZERO
    for task in gang_safe(sorted(candidates, key=lambda t: victim_order(t, ssn.jobs)), ssn.jobs):
        total = total + without_pods(task.resreq)
    return total


def reclaimable_for(ssn: SessionAPI, job: JobInfo) -> Resource:
    """What reclaim could free for `job`, if `reclaim` runs: what other reclaimable queues hold above their
    deserved shares, as the shares would be with `job` admitted, up to what its queue is still short of its own."""
    if "reclaim" not in ssn.conf.actions or job.min_resources is None:
        return ZERO
    total = session_total(ssn)
    allocated: dict[str, Resource] = {name: ZERO for name in ssn.queues}
    request: dict[str, Resource] = {name: ZERO for name in ssn.queues}
    for other in ssn.jobs.values():
        if other.queue not in ssn.queues:
            continue
        held = without_pods(other.allocated())
        allocated[other.queue] = allocated[other.queue] + held
        request[other.queue] = request[other.queue] + held
        if other.phase != PodGroupPhase.PENDING:
            request[other.queue] = request[other.queue] + without_pods(other.pending_request())
    if job.queue not in request:
        return ZERO
    request[job.queue] = request[job.queue] + still_lacking(job)  # what it holds is counted above
    guarantees = total_guarantee(ssn.queues.values())
    demands = [
        QueueDemand(q.name, q.weight, request[q.name], without_pods(q.guarantee),
                    real_capability(q, total, guarantees)[0])
        for q in ssn.queues.values()
    ]
    deserved = deserved_shares(total, demands)
    surplus = ZERO
    for name, queue in ssn.queues.items():
        if name != job.queue and queue.reclaimable:
            surplus = surplus + (allocated[name] - deserved[name]).clamp_zero()
    room = (deserved[job.queue] - allocated[job.queue]).clamp_zero()
    return _least(surplus, room)


def _least(a: Resource, b: Resource) -> Resource:
    return a - (a - b).clamp_zero()


# ---- one session's queue accounting ----------------------------------------------------------------------


@dataclass(slots=True)
class QueueAttr:
    queue: QueueInfo
    limit: dict[str, int]  # the real capability, per limited resource
    own_limit: frozenset[str]  # the resources whose limit is the queue's own `capability`
    parent: str = ""  # the parent queue whose capability bounds the others (capacity's queue tree)
    allocated: Resource = ZERO
    request: Resource = ZERO
    admitted: Resource = ZERO  # minResources admitted jobs still wait for
    elastic: Resource = ZERO
    deserved: Resource = ZERO
    _share: Fraction | None = None

    def update_share(self) -> None:
        """Forget the share; it is computed when QueueOrder next asks (allocations outnumber the asks)."""
        self._share = None

    @property
    def share(self) -> Fraction:
        if self._share is None:
            self._share = share_of(self.allocated, self.deserved)
        return self._share


def task_limit(attr: QueueAttr, limit: str, name: str, limit_amount: int, request: Resource, *, cluster: int = 0,
               guaranteed_to_others: int = 0, parent: str = "") -> QueueLimit:
    """Allocatable's rejection: the task's request on top of what the queue holds passes `limit_amount`."""
    held, asked = attr.allocated.get(name), request.get(name)
    return QueueLimit(attr.queue.name, limit, name, limit_amount, held + asked, asked, held, cluster=cluster,
                      guaranteed_to_others=guaranteed_to_others, parent=parent)


Deserve = Callable[["QueueBook"], None]
MayTake = Callable[[QueueAttr, Resource, TaskInfo, TaskInfo], bool]


class QueueBook:
    """Every queue's amounts over one session. `deserve(book)` sets each attr's `deserved`; it runs again after
    enqueue admits a job (its pending tasks join its queue's request). `path` names the queues a job of a
    queue counts in: by default that queue alone, its attr made on first use from its real capability."""

    def __init__(self, ssn: SessionAPI, deserve: Deserve) -> None:
        self.ssn = ssn
        self.total = session_total(ssn)
        self.total_guarantee = total_guarantee(ssn.queues.values())
        self.attrs: dict[str, QueueAttr] = {}
        self.path: Callable[[str], list[QueueAttr]] = self.flat_path
        self._deserve = deserve
        self._stale = True

    def attr(self, queue_name: str) -> QueueAttr | None:
        """The queue's attr, made on first use from its real capability."""
        attr = self.attrs.get(queue_name)
        if attr is None:
            queue = self.ssn.queues.get(queue_name)
            if queue is None:
                return None
            limit, own = real_capability(queue, self.total, self.total_guarantee)
            attr = self.attrs[queue_name] = QueueAttr(queue, limit, own)
        return attr

    def flat_path(self, queue_name: str) -> list[QueueAttr]:
        attr = self.attr(queue_name)
        return [attr] if attr is not None else []

    # -- accounting ---------------------------------------------------------------------------------
    def count_jobs(self, sums: Mapping[str, Part]) -> None:
        """Add each queue's jobs' parts (`queue_parts.job_parts`) to the queues on its path. The attrs are made in
        the order their queue's first job comes, as a pass over the jobs makes them."""
        for queue in dict.fromkeys(map(_queue_of, self.ssn.jobs.values())):
            part = sums.get(queue)
            for attr in self.path(queue):
                if part is not None:
                    attr.allocated = attr.allocated + part[0]
                    attr.request = attr.request + part[1]
                    attr.admitted = attr.admitted + part[2]
                    attr.elastic = attr.elastic + part[3]
        self._stale = True

    def enqueued(self, job: JobInfo) -> None:
        for attr in self.path(job.queue):
            attr.admitted = attr.admitted + reserved_by_admitted(job)
            self._stale = True

    def allocated(self, task: TaskInfo) -> None:
        for attr in self._task_path(task):
            attr.allocated = attr.allocated + without_pods(task.resreq)
            attr.update_share()

    def allocated_many(self, tasks: Sequence[TaskInfo]) -> None:
        """`allocated` for each of `tasks`, which are one job's with one request (`EventHandler.allocate_many`)."""
        held = held_by(tasks)
        for attr in self._task_path(tasks[0]):
            attr.allocated = attr.allocated + held
            attr.update_share()

    def deallocated(self, task: TaskInfo) -> None:
        for attr in self._task_path(task):
            attr.allocated = attr.allocated - without_pods(task.resreq)
            attr.update_share()

    def _task_path(self, task: TaskInfo) -> list[QueueAttr]:
        job = self.ssn.jobs.get(task.job)
        return self.path(job.queue) if job is not None and job.queue in self.attrs else []

    def deserved(self) -> dict[str, Resource]:
        """Each queue's deserved share, recomputed after enqueue admitted jobs."""
        if self._stale:
            self._deserve(self)
            for attr in self.attrs.values():
                attr.update_share()
            self._stale = False
        return {name: a.deserved for name, a in self.attrs.items()}

    def mark_stale(self) -> None:
        """Deserved shares are computed again when next asked (a plugin changed a queue's request)."""
        self._stale = True

    def fresh(self, queue: str) -> QueueAttr | None:
        if self._stale:
            self.deserved()
        return self.attrs.get(queue)

    def publish(self, overused: Callable[[QueueInfo], bool]) -> None:
        """Each queue's deserved share, share and overused flag, for the queue metrics."""
        self.deserved()
        for name, attr in self.attrs.items():
            self.ssn.set_queue_share(name, attr.deserved, float(attr.share), overused(attr.queue))

    # -- checks -------------------------------------------------------------------------------------
    def placeable(self, task: TaskInfo) -> bool:
        """Some node's idle or future idle holds the task: only then is the queue's share what stops it.

        A task no node can hold is let through, so that it fails on resources and its gang's condition names
        the resource that is short; it is not placed either way.
        """
        if self.ssn.fitting_indices(task).size:
            return True
        request = task.resreq
        feasible = self.ssn.feasible_nodes(task)
        return any(not node.releasing.is_zero() and request <= node.future_idle() for node in feasible)

    def over_limit(self, attr: QueueAttr, job: JobInfo) -> list[QueueLimit]:
        """Why `attr`'s real capability cannot hold the part of the job's minResources it lacks on top of what
        the queue holds and has admitted (empty if it can). What preempt could free for the job counts as free."""
        minimum = still_lacking(job)
        need = minimum + attr.allocated + attr.admitted - attr.elastic
        if any(name in attr.limit and units > attr.limit[name] for name, units in need.items()):
            need = (need - preemptable_for(self.ssn, job)).max_with(minimum)
        return [
            self.limit_reason(attr, name, need.get(name), minimum.get(name), attr.allocated.get(name),
                              attr.elastic.get(name), attr.admitted.get(name))
            for name, units in need.items()
            if name in attr.limit and units > attr.limit[name]
        ]

    def task_over_limit(self, attr: QueueAttr, name: str, request: Resource) -> QueueLimit:
        """Which limit of `attr` a task's request passes on `name` (its capability, its parent's, or the
        cluster's less the others' guarantees)."""
        held, asked = attr.allocated.get(name), request.get(name)
        return self.limit_reason(attr, name, held + asked, asked, held)

    def limit_reason(self, attr: QueueAttr, name: str, total: int, requested: int, allocated: int,
                     elastic: int = 0, admitted: int = 0) -> QueueLimit:
        limit, queue = attr.limit[name], attr.queue.name
        if name in attr.own_limit:
            return QueueLimit(queue, CAPABILITY, name, limit, total, requested, allocated, elastic, admitted)
        if attr.parent:
            return QueueLimit(queue, PARENT_CAPABILITY, name, limit, total, requested, allocated, elastic, admitted,
                              parent=attr.parent)
        others = self.total_guarantee.get(name) - attr.queue.guarantee.get(name)
        return QueueLimit(queue, REAL_CAPABILITY, name, limit, total, requested, allocated, elastic, admitted,
                          cluster=self.total.get(name), guaranteed_to_others=others)

    def reclaimable(self, reclaimer: TaskInfo, candidates: Sequence[TaskInfo], may_take: MayTake) -> list[TaskInfo]:
        """The candidates of reclaimable queues `may_take(attr, held, victim, reclaimer)` lets go, in order, each
        judged with the victims chosen before it gone from its queue."""
        self.fresh("")
        left: dict[str, Resource] = {}  # what each victim queue holds with the victims chosen so far gone
        victims = []
        for task in candidates:
            job = self.ssn.jobs.get(task.job)
            attr = self.attrs.get(job.queue) if job is not None else None
            if attr is None or not attr.queue.reclaimable:
                continue
            held = left.get(attr.queue.name, attr.allocated)
            if may_take(attr, held, task, reclaimer):
                left[attr.queue.name] = held - without_pods(task.resreq)
                victims.append(task)
        return victims


ArgsT = TypeVar("ArgsT", covariant=True)


class QueueSharePlugin(Plugin[ArgsT]):
    """The base of proportion and capacity: the hooks that keep their `QueueBook` (`self.book`, made in their
    `on_session_open`) current with every placement and every job the enqueue action admits."""

    book: QueueBook

    def on_allocate(self, task: TaskInfo) -> None:
        self.book.allocated(task)

    def on_allocate_many(self, tasks: Sequence[TaskInfo]) -> None:
        self.book.allocated_many(tasks)

    def on_deallocate(self, task: TaskInfo) -> None:
        self.book.deallocated(task)

    def on_job_enqueued(self, job: JobInfo) -> None:
        self.book.enqueued(job)
