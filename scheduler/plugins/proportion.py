"""Layer `plugins`: `proportion` — each queue's deserved share of the cluster, by weight.

Deserved shares come from weighted water-filling of the cluster total (the allocatable of every node):
every round, each queue not yet satisfied gets `remaining x weight / total weight`, capped per resource by its
real capability and by what it requests; a queue whose request is met (or whose share stopped growing) leaves
the round robin and what it did not take is shared again among the rest. A queue's guarantee is a floor.
The accounting, the water-filling and the enqueue gate are in `shares.py`, which `capacity` uses too.

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

Time-based fair share (beyond Volcano; off unless `usage.weight` > 0, docs/configuration.md): each queue's
decayed usage (`api/usage.py`, kept in its `volcano-py.io/usage` annotation) moves the weights water-filling
uses, `f + k x (f - u)` for weight fraction `f` among the queues that request something and usage fraction `u`,
so a queue that used more than its weight's share recently deserves less until its usage decays; at equal
shares QueueOrder puts the queue with the lower usage per weight first. The usage is folded every session
from what each queue held since the last fold, and written back by the status writer.

`admitWithinShare: true` (beyond Volcano; off by default): JobEnqueueable also asks that the queue's deserved
share, water-filled with the job's minResources added to the queue's request (and with time-based fair share when
it is on), holds what the queue holds (less the elastic part), what its admitted jobs still wait for, and the part
of the job's minResources it lacks. A job its queue's share could not run now waits at admission, where it
reserves nothing, instead of being admitted and then held in allocate while its minResources fill overcommit's
admission room (QueueLimit with limit `deserved`).

The `pods` count takes no part here, as in Volcano. Departures from Volcano: a job without minResources
declares no minimum, so everything it holds counts as held (Volcano counts all of it as elastic, which admits
jobs the queue cannot run without reclaim); an admitted job reserves only the part of its minResources it does
not yet hold (Volcano reserves all of it while the PodGroup is Inqueue, counting the allocated part twice).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from scheduler.api.decision import SUCCESS, Status, unschedulable
from scheduler.api.job import JobInfo, TaskInfo
from scheduler.api.queue import QueueInfo
from scheduler.api.reasons import DESERVED, QueueLimit
from scheduler.api.resources import CPU, MEMORY, Resource
from scheduler.api.usage import QueueUsage, history_weights
from scheduler.framework.conf_args import ArgReader
from scheduler.framework.fair_share import UsageArgs, fold_queues, parse_usage_args
from scheduler.framework.plugin import SessionAPI
from scheduler.plugins.queue_parts import job_parts
from scheduler.plugins.shares import (
    QueueAttr,
    QueueBook,
    QueueDemand,
    QueueSharePlugin,
    deserved_shares,
    dimensions,
    real_capability,
    still_lacking,
    task_limit,
    without_pods,
)

__all__ = ["ProportionPlugin", "QueueDemand", "deserved_shares", "real_capability"]


ADMIT_WITHIN_SHARE = "admitWithinShare"


@dataclass(frozen=True, slots=True)
class ProportionArgs:
    usage: UsageArgs = UsageArgs()
    within_share: bool = False  # admitWithinShare


def water_fill(book: QueueBook, weights: dict[str, int] | None = None) -> None:
    """Each queue's deserved share: the cluster water-filled by weight among the queues' requests (`weights`
    instead of the queues' own, with history)."""
    demands = [
        QueueDemand(a.queue.name, a.queue.weight if weights is None else weights.get(a.queue.name, a.queue.weight),
                    a.request, without_pods(a.queue.guarantee), a.limit)
        for a in book.attrs.values()
    ]
    for name, deserved in deserved_shares(book.total, demands).items():
        book.attrs[name].deserved = deserved


class ProportionPlugin(QueueSharePlugin[ProportionArgs]):
    name = "proportion"

    @classmethod
    def parse_args(cls, reader: ArgReader) -> ProportionArgs:
        return ProportionArgs(parse_usage_args(reader), reader.boolean(ADMIT_WITHIN_SHARE, False))

    def on_session_open(self, ssn: SessionAPI) -> None:
        self.ssn = ssn
        history = self.args.usage.weight > 0
        self.book = QueueBook(ssn, self._with_history if history else water_fill)
        self.book.count_jobs(job_parts(ssn))
        self.usage: dict[str, QueueUsage] = self._fold(ssn) if history else {}

    def _fold(self, ssn: SessionAPI) -> dict[str, QueueUsage]:
        """Each queue's usage at this session: its record decayed, plus what it held since (framework/fair_share.py)."""
        held = {name: attr.allocated for name, attr in self.book.attrs.items()}
        return fold_queues(ssn.queues, held, self.book.total, ssn.now, self.args.usage)

    def _with_history(self, book: QueueBook) -> None:
        weights = {name: a.queue.weight for name, a in book.attrs.items() if not a.request.is_zero()}
        shares = {name: self.usage[name].share for name in weights if name in self.usage}
        water_fill(book, history_weights(weights, shares, self.args.usage.weight))

    def on_session_close(self, ssn: SessionAPI) -> None:
        self.book.publish(self.overused)
        for name, usage in self.usage.items():
            ssn.set_queue_usage(name, usage)

    # -- extension points ---------------------------------------------------------------------------
    def queue_order(self, a: QueueInfo, b: QueueInfo) -> int:
        left, right = self.book.fresh(a.name), self.book.fresh(b.name)
        share_a = left.share if left else Fraction(0)
        share_b = right.share if right else Fraction(0)
        if share_a == share_b and self.usage:  # history: the queue that used less per weight first
            used_a, used_b = self._used_per_weight(a), self._used_per_weight(b)
            return (used_a > used_b) - (used_a < used_b)
        return (share_a > share_b) - (share_a < share_b)

    def _used_per_weight(self, queue: QueueInfo) -> float:
        usage = self.usage.get(queue.name)
        return usage.share / max(queue.weight, 1) if usage is not None else 0.0

    def overused(self, queue: QueueInfo) -> bool:
        attr = self.book.fresh(queue.name)
        if attr is None:
            return False
        deserved = attr.deserved
        names = {CPU, MEMORY, *dimensions(deserved)}
        return all(deserved.get(name) <= attr.allocated.get(name) for name in names)

    def allocatable(self, queue: QueueInfo, task: TaskInfo) -> Status:
        attr = self.book.fresh(queue.name)
        if attr is None:
            return SUCCESS
        free = (attr.deserved - attr.allocated).clamp_zero()
        request = without_pods(task.resreq)
        if request <= free or not self.book.placeable(task):
            return SUCCESS
        name = next(n for n, units in request.items() if units > free.get(n))
        return unschedulable(task_limit(attr, DESERVED, name, attr.deserved.get(name), request))

    def allocatable_count(self, queue: QueueInfo, task: TaskInfo, n: int) -> int:
        """How many of n tasks like `task` in a row `allocatable` lets through by the share alone: the i-th (from
        0) passes while allocated + (i + 1) x request stays within deserved on every resource it asks for."""
        attr = self.book.fresh(queue.name)
        if attr is None:
            return n
        for name, units in without_pods(task.resreq).items():
            if units > 0:
                n = min(n, max(0, (attr.deserved.get(name) - attr.allocated.get(name)) // units))
        return n

    def preemptive(self, queue: QueueInfo, request: Resource) -> bool:
        attr = self.book.fresh(queue.name)
        if attr is None:
            return False
        after = attr.allocated + without_pods(request)
        return all(after.get(name) <= attr.deserved.get(name) for name in dimensions(request))

    def reclaimable(self, reclaimer: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
        return self.book.reclaimable(reclaimer, candidates, may_take)

    def job_enqueueable(self, job: JobInfo) -> Status:
        attr = self.book.attr(job.queue)
        if attr is None or job.min_resources is None:
            return SUCCESS
        over = self.book.over_limit(attr, job)
        if over:
            return unschedulable(*over)
        if self.args.within_share:
            return self._within_share(attr, job)
        return SUCCESS

    def _within_share(self, attr: QueueAttr, job: JobInfo) -> Status:
        """admitWithinShare: the job's queue, its request grown by the job's minResources, must deserve what it
        holds, what its admitted jobs still wait for and what the job lacks, on every resource the job asks for."""
        lacking = still_lacking(job)
        extra = (lacking - without_pods(job.pending_request())).clamp_zero()  # a bare PodGroup's pods ask already
        attr.request = attr.request + extra
        self.book.mark_stale()
        deserved = self.book.deserved()[attr.queue.name]
        attr.request = attr.request - extra
        self.book.mark_stale()
        need = attr.allocated - attr.elastic + attr.admitted + lacking
        over = [QueueLimit(attr.queue.name, DESERVED, name, deserved.get(name), need.get(name), units,
                           attr.allocated.get(name), attr.elastic.get(name), attr.admitted.get(name))
                for name, units in dimensions(lacking).items() if need.get(name) > deserved.get(name)]
        return unschedulable(*over) if over else SUCCESS


def may_take(attr: QueueAttr, held: Resource, task: TaskInfo, reclaimer: TaskInfo) -> bool:
    """The victim's queue still holds its deserved share without it, on a resource both tasks use."""
    after = held - without_pods(task.resreq)
    shared = set(dimensions(reclaimer.resreq)) & set(dimensions(task.resreq))
    return any(after.get(name) >= attr.deserved.get(name) for name in shared)
