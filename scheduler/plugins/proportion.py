"""Layer `plugins`: `proportion` — each queue's deserved share of the cluster, by weight.

Deserved shares come from weighted water-filling of the cluster total (the allocatable of every node):
every round, each queue not yet satisfied gets `remaining x weight / total weight`, capped per resource by its
real capability and by what it requests; a queue whose request is met (or whose share stopped growing) leaves
the round robin and what it did not take is shared again among the rest. A queue's guarantee is a floor.

- A queue's *request* is what its admitted jobs hold plus what their pending tasks ask for. A job still held
  at enqueue asks for nothing yet; when enqueue admits one, its pending tasks join the request and the shares
  are recomputed.
- A queue's *real capability* is its `capability`, or the cluster total less what the other queues are
  guaranteed. Resources `capability` does not name (and cpu or memory given as 0) are not limited by it.
- QueueOrder: lower share first, share being the largest allocated/deserved ratio over the resources deserved.
- Overused: allocated has reached deserved on every resource the queue deserves (cpu, memory and its scalars).
- Allocatable: a task fits while allocated + its request stays within deserved on every resource it asks for.
  A task no node could hold anyway is let through, to fail on resources with a message naming what is short.
- Preemptive (reclaim may take this task for the queue): allocated + the task's request stays within deserved
  on every resource the task asks for. Unlike Allocatable there is no escape hatch.
- Reclaimable: a victim of another, `reclaimable` queue, only while that queue still holds at least its deserved
  share without it, on some resource both the victim and the reclaimer use. Since a reclaimer never goes above
  its share and a victim's queue never goes below it, neither has a reason to take back: no ping-pong.
- JobEnqueueable: a job with minResources is admitted only if the real capability holds its minResources on
  top of what the queue holds and what its admitted jobs still wait for (less the elastic part: what jobs hold
  beyond their own minResources). The rejection says which limit and by how much. A job without
  minResources is admitted. When `preempt` is among the actions, what preemption could free for the job (lower-
  priority running tasks of its queue, see `preemptable_for`) is counted as free, so a high-priority job gets into
  a full queue and then preempts, instead of waiting at enqueue for room that only preemption can make.

The `pods` count takes no part here, as in Volcano. Departures from Volcano: a job without minResources
declares no minimum, so everything it holds counts as held (Volcano counts all of it as elastic, which admits
jobs the queue cannot run without reclaim); an admitted job reserves only the part of its minResources it does
not yet hold (Volcano reserves all of it while the PodGroup is Inqueue, counting the allocated part twice).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from scheduler.api.decision import SUCCESS, Status, unschedulable
from scheduler.api.job import JobInfo, TaskInfo
from scheduler.api.node import NodeInfo
from scheduler.api.queue import QueueInfo
from scheduler.api.reasons import CAPABILITY, DESERVED, REAL_CAPABILITY, QueueLimit
from scheduler.api.resources import CPU, MEMORY, PODS, ZERO, Resource
from scheduler.api.status import PodGroupPhase
from scheduler.framework import points as P
from scheduler.framework.conf_args import NoArgs
from scheduler.framework.plugin import EventHandler, Plugin
from scheduler.framework.session import Session
from scheduler.framework.victims import gang_safe, running_candidates, victim_order
from scheduler.plugins.conformance import is_critical

# Water-filling converges in a few rounds; integer crumbs can only shrink. This is a guard, not a tuning knob.
_MAX_ROUNDS = 1000
ADMITTED_PHASES = frozenset({PodGroupPhase.INQUEUE, PodGroupPhase.RUNNING, PodGroupPhase.UNKNOWN})


def task_limit(attr: QueueAttr, limit: str, name: str, limit_amount: int, request: Resource, *, cluster: int = 0,
               guaranteed_to_others: int = 0, parent: str = "") -> QueueLimit:
    """Allocatable's rejection: the task's request on top of what the queue holds passes `limit_amount`."""
    held, asked = attr.allocated.get(name), request.get(name)
    return QueueLimit(attr.queue.name, limit, name, limit_amount, held + asked, asked, held, cluster=cluster,
                      guaranteed_to_others=guaranteed_to_others, parent=parent)


# ---- resource arithmetic without the pods count -------------------------------------------------------


def without_pods(resource: Resource) -> Resource:
    return Resource(resource.cpu, resource.memory, 0, resource.scalars) if resource.pods else resource


def dimensions(resource: Resource) -> dict[str, int]:
    """The non-zero resources of `resource` other than pods."""
    return {name: units for name, units in resource.items() if units and name != PODS}


def cluster_total(nodes: Iterable[NodeInfo]) -> Resource:
    return without_pods(Resource.total(node.allocatable for node in nodes))


def reserved_by_admitted(job: JobInfo) -> Resource:
    """What an admitted job's minResources still reserves: the part it does not hold yet."""
    if job.min_resources is None or job.phase not in ADMITTED_PHASES:
        return ZERO
    return (without_pods(job.min_resources) - without_pods(job.allocated())).clamp_zero()


def elastic_of(job: JobInfo) -> Resource:
    """What a job holds beyond its own minResources (nothing, for a job that declares none)."""
    if job.min_resources is None:
        return ZERO
    return (without_pods(job.allocated()) - without_pods(job.min_resources)).clamp_zero()


def share_of(allocated: Resource, deserved: Resource) -> Fraction:
    """The largest allocated/deserved ratio over the resources deserved (0 when nothing is deserved)."""
    share = Fraction(0)
    for name, units in dimensions(deserved).items():
        share = max(share, Fraction(allocated.get(name), units))
    return share


# ---- what preempt and reclaim could free for a job (the enqueue gates count it) ----------------------------


def preemptable_for(ssn: Session, job: JobInfo) -> Resource:
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


def reclaimable_for(ssn: Session, job: JobInfo) -> Resource:
    """What reclaim could free for `job`, if `reclaim` runs: what other reclaimable queues hold above their
    deserved shares, as the shares would be with `job` admitted, up to what its queue is still short of its own."""
    if "reclaim" not in ssn.conf.actions or job.min_resources is None:
        return ZERO
    total = cluster_total(ssn.node_list)
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
    request[job.queue] = request[job.queue] + without_pods(job.min_resources)
    guarantees = ZERO
    for queue in ssn.queues.values():
        guarantees = guarantees + without_pods(queue.guarantee)
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


# ---- deserved shares ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class QueueDemand:
    """One queue's input to water-filling. `limit` maps each limited resource to its real capability."""

    name: str
    weight: int
    request: Resource
    guarantee: Resource = ZERO
    limit: Mapping[str, int] = field(default_factory=dict)


def deserved_shares(total: Resource, queues: Sequence[QueueDemand]) -> dict[str, Resource]:
    """Weighted water-filling of `total` among `queues` (Volcano's proportion), in integer units."""
    names = list(dimensions(total))
    deserved: dict[str, dict[str, int]] = {q.name: {} for q in queues}
    remaining = {name: total.get(name) for name in names}
    met: set[str] = set()
    for _ in range(_MAX_ROUNDS):
        active = [q for q in queues if q.name not in met]
        total_weight = sum(max(q.weight, 0) for q in active)
        if total_weight <= 0:
            break
        before = dict(remaining)
        given = dict.fromkeys(names, 0)  # every queue of a round shares the same `remaining`
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
        if all(units <= 0 for units in remaining.values()) or remaining == before:
            break
    return {name: Resource.of(d.pop(CPU, 0), d.pop(MEMORY, 0), 0, d) for name, d in deserved.items()}


def _grown(
    old: Mapping[str, int],
    queue: QueueDemand,
    remaining: Mapping[str, int],
    total_weight: int,
    names: list[str],
) -> dict[str, int]:
    new = dict(old)
    for name in names:
        units = old.get(name, 0) + max(remaining[name], 0) * queue.weight // total_weight
        if name in queue.limit:
            units = min(units, queue.limit[name])
        new[name] = min(units, queue.request.get(name))
    return new


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


# ---- the plugin ----------------------------------------------------------------------------------------


@dataclass(slots=True)
class QueueAttr:
    queue: QueueInfo
    limit: dict[str, int]
    own_limit: frozenset[str]
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


class ProportionPlugin(Plugin[NoArgs]):
    name = "proportion"
    registers_overused = True

    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        self.total = cluster_total(ssn.node_list)
        self.total_guarantee = ZERO
        for queue in ssn.queues.values():
            self.total_guarantee = self.total_guarantee + without_pods(queue.guarantee)
        self.attrs: dict[str, QueueAttr] = {}
        self._prepare()
        for job in ssn.jobs.values():
            for attr in self._path(job.queue):
                self._count_job(attr, job)
        self._stale = True

        ssn.register(P.QUEUE_ORDER, self.queue_order)
        if self.registers_overused:
            ssn.register(P.OVERUSED, self.overused)
        ssn.register(P.ALLOCATABLE, self.allocatable)
        ssn.register(P.JOB_ENQUEUEABLE, self.enqueueable)
        ssn.register(P.PREEMPTIVE, self.preemptive)
        ssn.register(P.RECLAIMABLE, self.reclaimable)
        ssn.add_event_handler(EventHandler(allocate=self._allocated, deallocate=self._deallocated))
        ssn.on_job_enqueued(self._enqueued)

    # -- accounting ---------------------------------------------------------------------------------
    def _prepare(self) -> None:
        """Before jobs are counted: nothing here (capacity builds its queue tree)."""

    def _path(self, queue_name: str) -> list[QueueAttr]:
        """The queues a job of `queue_name` counts in: that queue alone here (and its ancestors in capacity)."""
        attr = self._attr(queue_name)
        return [attr] if attr is not None else []

    def _attr(self, queue_name: str) -> QueueAttr | None:
        attr = self.attrs.get(queue_name)
        if attr is None:
            queue = self.ssn.queues.get(queue_name)
            if queue is None:
                return None
            limit, own = real_capability(queue, self.total, self.total_guarantee)
            attr = self.attrs[queue_name] = QueueAttr(queue, limit, own)
        return attr

    @staticmethod
    def _count_job(attr: QueueAttr, job: JobInfo) -> None:
        held = without_pods(job.allocated())
        attr.allocated = attr.allocated + held
        # Every pending pod asks of its queue, whatever its PodGroup's phase (Volcano's proportion.go counts
        # TaskStatusIndex[Pending] of every job): a bare PodGroup's pods exist before it is admitted, a Volcano
        # Job's are created only after, so only the former weigh on the shares before enqueue.
        attr.request = attr.request + held + without_pods(job.pending_request())
        attr.admitted = attr.admitted + reserved_by_admitted(job)
        attr.elastic = attr.elastic + elastic_of(job)

    def _enqueued(self, job: JobInfo) -> None:
        for attr in self._path(job.queue):
            attr.admitted = attr.admitted + reserved_by_admitted(job)
            self._stale = True

    def _allocated(self, task: TaskInfo) -> None:
        for attr in self._task_path(task):
            attr.allocated = attr.allocated + without_pods(task.resreq)
            attr.update_share()

    def _deallocated(self, task: TaskInfo) -> None:
        for attr in self._task_path(task):
            attr.allocated = attr.allocated - without_pods(task.resreq)
            attr.update_share()

    def _task_path(self, task: TaskInfo) -> list[QueueAttr]:
        job = self.ssn.jobs.get(task.job)
        return self._path(job.queue) if job is not None and job.queue in self.attrs else []

    def deserved(self) -> dict[str, Resource]:
        """Each queue's deserved share, recomputed after enqueue admitted jobs (their requests join in)."""
        if self._stale:
            demands = [
                QueueDemand(a.queue.name, a.queue.weight, a.request, without_pods(a.queue.guarantee), a.limit)
                for a in self.attrs.values()
            ]
            for name, deserved in deserved_shares(self.total, demands).items():
                attr = self.attrs[name]
                attr.deserved = deserved
                attr.update_share()
            self._stale = False
        return {name: a.deserved for name, a in self.attrs.items()}

    def _fresh(self, queue: str) -> QueueAttr | None:
        if self._stale:
            self.deserved()
        return self.attrs.get(queue)

    def on_session_close(self, ssn: Session) -> None:
        """Each queue's deserved share, share and overused flag, for the queue metrics."""
        self.deserved()
        for name, attr in self.attrs.items():
            ssn.queue_shares[name] = (attr.deserved, float(attr.share), self.overused(attr.queue))

    # -- extension points ---------------------------------------------------------------------------
    def queue_order(self, a: QueueInfo, b: QueueInfo) -> int:
        left, right = self._fresh(a.name), self._fresh(b.name)
        share_a = left.share if left else Fraction(0)
        share_b = right.share if right else Fraction(0)
        return (share_a > share_b) - (share_a < share_b)

    def overused(self, queue: QueueInfo) -> bool:
        attr = self._fresh(queue.name)
        if attr is None:
            return False
        deserved = attr.deserved
        names = {CPU, MEMORY, *dimensions(deserved)}
        return all(deserved.get(name) <= attr.allocated.get(name) for name in names)

    def allocatable(self, queue: QueueInfo, task: TaskInfo) -> Status:
        attr = self._fresh(queue.name)
        if attr is None:
            return SUCCESS
        free = (attr.deserved - attr.allocated).clamp_zero()
        request = without_pods(task.resreq)
        if request <= free or not self._placeable(task):
            return SUCCESS
        name = next(n for n, units in request.items() if units > free.get(n))
        return unschedulable(task_limit(attr, DESERVED, name, attr.deserved.get(name), request))

    def preemptive(self, queue: QueueInfo, task: TaskInfo) -> bool:
        attr = self._fresh(queue.name)
        if attr is None:
            return False
        after = attr.allocated + without_pods(task.resreq)
        return all(after.get(name) <= attr.deserved.get(name) for name in dimensions(task.resreq))

    def reclaimable(self, reclaimer: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
        self._fresh("")
        left: dict[str, Resource] = {}  # what each victim queue holds with the victims chosen so far gone
        victims = []
        for task in candidates:
            job = self.ssn.jobs.get(task.job)
            attr = self.attrs.get(job.queue) if job is not None else None
            if attr is None or not attr.queue.reclaimable:
                continue
            held = left.get(attr.queue.name, attr.allocated)
            if self._may_take(attr, held, task, reclaimer):
                left[attr.queue.name] = held - without_pods(task.resreq)
                victims.append(task)
        return victims

    @staticmethod
    def _may_take(attr: QueueAttr, held: Resource, task: TaskInfo, reclaimer: TaskInfo) -> bool:
        """The victim's queue still holds its deserved share without it, on a resource both tasks use."""
        after = held - without_pods(task.resreq)
        shared = set(dimensions(reclaimer.resreq)) & set(dimensions(task.resreq))
        return any(after.get(name) >= attr.deserved.get(name) for name in shared)

    def _placeable(self, task: TaskInfo) -> bool:
        """Some node's idle or future idle holds the task: only then is the queue's share what stops it.

        A task no node can hold is let through, so that it fails on resources and its gang's condition names
        the resource that is short; it is not placed either way.
        """
        if self.ssn.fitting_indices(task).size:
            return True
        request = task.resreq
        feasible = self.ssn.feasible_nodes(task)
        return any(not node.releasing.is_zero() and request <= node.future_idle() for node in feasible)

    def enqueueable(self, job: JobInfo) -> Status:
        attr = self._attr(job.queue)
        if attr is None or job.min_resources is None:
            return SUCCESS
        over = self._over_limit(attr, job)
        if over:
            return unschedulable(*over)
        return SUCCESS

    def _over_limit(self, attr: QueueAttr, job: JobInfo) -> list[QueueLimit]:
        """Why `attr`'s real capability cannot hold the job's minResources on top of what it holds and has
        admitted (empty if it can)."""
        assert job.min_resources is not None
        minimum = without_pods(job.min_resources)
        need = minimum + attr.allocated + attr.admitted - attr.elastic
        if any(name in attr.limit and units > attr.limit[name] for name, units in need.items()):
            need = (need - preemptable_for(self.ssn, job)).max_with(minimum)
        return [
            self._over_reason(attr, name, minimum, need)
            for name, units in need.items()
            if name in attr.limit and units > attr.limit[name]
        ]

    def _over_reason(self, attr: QueueAttr, name: str, minimum: Resource, need: Resource) -> QueueLimit:
        limit, queue = attr.limit[name], attr.queue.name
        total, requested = need.get(name), minimum.get(name)
        allocated, elastic, admitted = attr.allocated.get(name), attr.elastic.get(name), attr.admitted.get(name)
        if name in attr.own_limit:
            return QueueLimit(queue, CAPABILITY, name, limit, total, requested, allocated, elastic, admitted)
        others = self.total_guarantee.get(name) - attr.queue.guarantee.get(name)
        return QueueLimit(queue, REAL_CAPABILITY, name, limit, total, requested, allocated, elastic, admitted,
                          cluster=self.total.get(name), guaranteed_to_others=others)
