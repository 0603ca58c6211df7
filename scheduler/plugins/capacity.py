"""Layer `plugins`: `capacity` — each queue's share is the `deserved` it declares, not a weight.

Volcano's capacity plugin (the alternative to `proportion`, never both). Where proportion water-fills the cluster
by weight, capacity takes each queue's `spec.deserved` as written, so an administrator can give a queue 20 A100s
and 50 V100s rather than a percentage. Queues lend what they do not use and take it back by reclaim. The
accounting (allocated, admitted minResources, elastic, real capability) is `shares.py`'s, as proportion's is.

- Deserved: `spec.deserved`, at most the real capability and at least the guarantee, per resource. A resource
  `deserved` does not name is not deserved at all (the share ignores it, and reclaim takes it back first).
- Real capability: `capability`, or the cluster total less what the other queues are guaranteed (as proportion).
- QueueOrder: higher `spec.priority` first, then the lower share (largest allocated/deserved ratio); at equal
  shares a queue that deserves something goes before one that deserves nothing.
- Allocatable: a queue may grow past its deserved share up to its real capability, on every resource the task
  asks for (borrowing what others do not use). A task no node could hold is let through, as in proportion.
- Preemptive (reclaim for this queue): its allocation plus the task stays within the real capability, and within
  deserved on at least one resource the task asks for.
- Reclaimable: a task of another reclaimable queue that holds more than it deserves on a resource the task uses
  (or deserves none of what it uses), never taking that queue below its guarantee.
- JobEnqueueable: proportion's gate on the real capability.
- No Overused: a queue over its deserved share keeps borrowing; only capability stops it.
- Scheduling gates (the feature gate SchedulingGatesQueueAdmission; Volcano's queueGateReservedTasks): a pod
  opted in with `scheduling.volcano.sh/queue-allocation-gate: "true"` that passes Allocatable keeps that room
  reserved in its queue until it is placed; one found pending and ungated at session open reserves it too. A
  task's Allocatable counts what the others reserve in its (leaf) queue. Without the feature gate, nothing is
  reserved.

With `enableHierarchy: true` queues form a tree by `spec.parent` under `root` (a Queue named `root`, or an
unlimited one if there is none). Jobs go to leaf queues only (a job in a queue with children is held at enqueue
and never placed). What a leaf holds counts in each of its ancestors too, and a task or job must fit the real
capability of the leaf and of every ancestor. A child's real capability is its parent's, less what the parent's
other children are guaranteed, capped by its own `capability`; `root` is unlimited unless it has a capability
(the cluster's size does not cap it, as in Volcano). `root` deserves what its children do. Leaves go before
inner queues; two leaves compare the shares of their ancestors just below where their paths part. Reclaim and
preemptive look at leaf queues, as Volcano's default (`ancestorReclaimLevel` 0). A queue whose parent does not
exist, or that is in a cycle of parents, holds its jobs with the reason (Volcano stops scheduling everything).

Time-based fair share (beyond Volcano; off unless `usage.weight` > 0, the same `usage.*` arguments as proportion,
read by `framework/fair_share.py`; docs/configuration.md): a queue's deserved share stays what it declares, and
Allocatable, reclaim and the enqueue gate do not change. What history moves is who gets the room nobody deserves:
above its deserved share, QueueOrder compares `1 + (share - 1) / m`, `m = 1 + k x (1 - u / f)` (at least 1%),
`f` the fraction of the cluster the queue deserves and `u` its usage fraction, so queues that keep asking split
the borrowed room in proportion to deserved x m, and a queue that used more than it deserved recently borrows
less. At equal shares, the queue that used less against what it deserves goes first. The usage is folded every
session from what each queue held (with the hierarchy, an inner queue holds what its leaves hold) and written
back by the status writer to the Queue's `volcano-py.io/usage` annotation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from scheduler.api.decision import SUCCESS, Status, unresolvable, unschedulable
from scheduler.api.job import JobInfo, TaskInfo
from scheduler.api.phases import TaskStatus
from scheduler.api.queue import QueueInfo
from scheduler.api.reasons import QueueNotLeaf, QueueParentCycle, QueueParentMissing, Reason
from scheduler.api.resources import CPU, MEMORY, Resource
from scheduler.api.usage import QueueUsage, moved_fraction
from scheduler.framework.conf_args import ArgReader
from scheduler.framework.evictable import EvictionContext, EvictionKind
from scheduler.framework.fair_share import UsageArgs, fold_queues, parse_usage_args
from scheduler.framework.plugin import SessionAPI
from scheduler.plugins.queue_parts import job_parts
from scheduler.plugins.shares import QueueAttr, QueueBook, QueueSharePlugin, dimensions, without_pods

ROOT = "root"
HIERARCHY = "enableHierarchy"


@dataclass(frozen=True, slots=True)
class CapacityArgs:
    hierarchy: bool = False  # the entry's `enableHierarchy: true`: queues form a tree by `spec.parent`
    usage: UsageArgs = UsageArgs()  # time-based fair share (framework/fair_share.py); off by default


class QueueTree:
    """The queues as a tree by `spec.parent` under `root`, each with its real capability from its parent's."""

    def __init__(self, book: QueueBook) -> None:
        self.book = book
        self.ancestors: dict[str, list[str]] = {}  # queue -> parent, grandparent, ..., root
        self.children: dict[str, list[str]] = {}
        self.broken: dict[str, Reason] = {}  # queue -> why it is not in the tree
        queues = dict(book.ssn.queues)
        if ROOT not in queues:
            queues[ROOT] = QueueInfo(ROOT)  # Volcano's controller makes one; without it, an unlimited root
        for name, queue in queues.items():
            if name != ROOT:
                self.children.setdefault(queue.parent or ROOT, []).append(name)
        for name in queues:
            chain, seen, at = [], {name}, name
            while at != ROOT:
                parent = queues[at].parent or ROOT
                if parent not in queues:
                    self.broken[name] = QueueParentMissing(name, at, parent)
                    break
                if parent in seen:
                    self.broken[name] = QueueParentCycle(name, at, parent)
                    break
                chain.append(parent)
                seen.add(parent)
                at = parent
            else:
                self.ancestors[name] = chain
        for name in sorted((n for n in queues if n in self.ancestors), key=lambda n: len(self.ancestors[n])):
            self._add(queues[name])

    def _add(self, queue: QueueInfo) -> None:
        """The queue's attr with its real capability from its parent's (parents are made first)."""
        own = {name: units for name, units in dimensions(without_pods(queue.capability or Resource())).items()}
        own.update(dict.fromkeys(queue.capability_zero, 0))
        attrs, queues = self.book.attrs, self.book.ssn.queues
        limit: dict[str, int] = {}
        parent_name = ""
        if queue.name != ROOT:
            parent_name = self.ancestors[queue.name][0]
            parent = attrs[parent_name]
            siblings = Resource.total(
                without_pods(queues[c].guarantee) for c in self.children.get(parent_name, []) if c in queues
            )
            mine = without_pods(queue.guarantee)
            limit = {n: units - siblings.get(n) + mine.get(n) for n, units in parent.limit.items()}
        binding = set()
        for name, units in own.items():
            if name not in limit or units < limit[name]:
                limit[name] = units
                binding.add(name)
        attrs[queue.name] = QueueAttr(queue, limit, frozenset(binding), parent=parent_name)

    def path(self, queue_name: str) -> list[QueueAttr]:
        """The queue and its ancestors: a job counts in each (none, for a queue not in the tree)."""
        if queue_name not in self.ancestors:
            return []
        return [self.book.attrs[n] for n in (queue_name, *self.ancestors[queue_name])]

    def leaf(self, queue_name: str) -> bool:
        return not self.children.get(queue_name)

    def not_leaf(self, queue_name: str) -> QueueNotLeaf:
        return QueueNotLeaf(queue_name, tuple(sorted(self.children[queue_name])))

    def parting(self, a: str, b: str) -> tuple[str, str]:
        """The two queues just below where the paths from root to `a` and to `b` part (`a` and `b` if one path
        contains the other)."""
        path_a = [*reversed(self.ancestors[a]), a]
        path_b = [*reversed(self.ancestors[b]), b]
        for x, y in zip(path_a, path_b, strict=False):
            if x != y:
                return x, y
        return a, b


def declared_deserved(book: QueueBook) -> None:
    """Each queue's declared deserved share, clamped to [guarantee, real capability] per resource."""
    for attr in book.attrs.values():
        declared = without_pods(attr.queue.deserved) if attr.queue.deserved is not None else Resource()
        units = {n: min(v, attr.limit[n]) if n in attr.limit else v for n, v in dimensions(declared).items()}
        for name, value in dimensions(without_pods(attr.queue.guarantee)).items():
            units[name] = max(units.get(name, 0), value)
        attr.deserved = Resource.of(units.pop(CPU, 0), units.pop(MEMORY, 0), 0, units)


class CapacityPlugin(QueueSharePlugin[CapacityArgs]):
    name = "capacity"

    @classmethod
    def parse_args(cls, reader: ArgReader) -> CapacityArgs:
        return CapacityArgs(hierarchy=bool(reader.switch(HIERARCHY)), usage=parse_usage_args(reader))

    def on_session_open(self, ssn: SessionAPI) -> None:
        self.ssn = ssn
        self.book = QueueBook(ssn, self._deserve)
        self.tree = QueueTree(self.book) if self.args.hierarchy else None
        if self.tree is not None:
            self.book.path = self.tree.path
        self.book.count_jobs(job_parts(ssn))
        self.usage: dict[str, QueueUsage] = {}
        self.history: dict[str, Fraction] = {}  # queue -> its history multiplier `m` (time-based fair share)
        if self.args.usage.on:
            held = {name: attr.allocated for name, attr in self.book.attrs.items()}
            self.usage = fold_queues(ssn.queues, held, self.book.total, ssn.now, self.args.usage)
        # queue -> task uid -> task: room held for opted-in tasks that passed Allocatable and are not placed yet
        # (Volcano's buildQueueReservedTasksCache: pending, no scheduling gate left, opted in).
        self.reserved: dict[str, dict[str, TaskInfo]] = {}
        if ssn.queue_allocation_gate:
            for job in ssn.jobs.values():
                for task in job.with_status(TaskStatus.PENDING):
                    if not task.gated and task.queue_gate_opt_in:
                        self.reserved.setdefault(job.queue, {})[task.key] = task

    def _reserved(self, queue: str, task: TaskInfo) -> Resource:
        """What the queue's other opted-in tasks reserve (the candidate's own request counts as the request)."""
        held = self.reserved.get(queue)
        if not held:
            return Resource()
        return Resource.total(without_pods(t.resreq) for uid, t in held.items() if uid != task.key)

    def on_allocate(self, task: TaskInfo) -> None:
        super().on_allocate(task)
        self._unreserve(task)

    def on_allocate_many(self, tasks: Sequence[TaskInfo]) -> None:
        super().on_allocate_many(tasks)
        for task in tasks:
            self._unreserve(task)

    def on_deallocate(self, task: TaskInfo) -> None:
        super().on_deallocate(task)
        job = self.ssn.jobs.get(task.job)
        if self.ssn.queue_allocation_gate and task.queue_gate_opt_in and job is not None:
            self.reserved.setdefault(job.queue, {})[task.key] = task  # rolled back: its room is held again

    def _unreserve(self, task: TaskInfo) -> None:
        for held in self.reserved.values():
            if held.pop(task.key, None) is not None:
                return

    def on_session_close(self, ssn: SessionAPI) -> None:
        self.book.publish(self._overused)
        for name, usage in self.usage.items():
            ssn.set_queue_usage(name, usage)

    def _deserve(self, book: QueueBook) -> None:
        """Declared deserved shares; with the hierarchy, root deserves what its children do."""
        declared_deserved(book)
        if self.tree is not None and ROOT in book.attrs:
            book.attrs[ROOT].deserved = Resource.total(
                book.attrs[c].deserved for c in self.tree.children.get(ROOT, []))

    def _overused(self, queue: QueueInfo) -> bool:
        """Above its deserved share (share > 1), for the queue metrics only: capacity never stops a queue there."""
        attr = self.book.fresh(queue.name)
        return attr is not None and attr.share > 1

    # ---- extension points ----------------------------------------------------------------------------------
    def queue_order(self, a: QueueInfo, b: QueueInfo) -> int:
        if a.priority != b.priority:
            return -1 if a.priority > b.priority else 1
        tree = self.tree
        if tree is not None and a.name in tree.ancestors and b.name in tree.ancestors:
            leaf_a, leaf_b = tree.leaf(a.name), tree.leaf(b.name)
            if leaf_a != leaf_b:
                return -1 if leaf_a else 1
            return self._compare(*tree.parting(a.name, b.name))
        return self._compare(a.name, b.name)

    def _compare(self, a: str, b: str) -> int:
        left, right = self.book.fresh(a), self.book.fresh(b)
        if left is None or right is None:
            return 0
        share_a, share_b = capacity_share(left), capacity_share(right)
        if self.usage:
            share_a, share_b = self._borrowing_share(left, share_a), self._borrowing_share(right, share_b)
        if share_a != share_b:
            return -1 if share_a < share_b else 1
        deserves_a, deserves_b = not left.deserved.is_zero(), not right.deserved.is_zero()
        if deserves_a != deserves_b:
            return deserves_b - deserves_a
        if self.usage:  # history: the queue that used less against what it deserves first
            used_a, used_b = self._used_per_deserved(left), self._used_per_deserved(right)
            return (used_a > used_b) - (used_a < used_b)
        return 0

    # ---- time-based fair share (off unless `usage.weight` > 0) --------------------------------------------------
    def _deserved_fraction(self, attr: QueueAttr) -> float:
        """`f`: the largest fraction of the cluster the queue deserves, over the resources it deserves."""
        return max((units / total for name, units in dimensions(attr.deserved).items()
                    if (total := self.book.total.get(name)) > 0), default=0.0)

    def _used_per_deserved(self, attr: QueueAttr) -> float:
        usage = self.usage.get(attr.queue.name)
        if usage is None:
            return 0.0
        fraction = self._deserved_fraction(attr)
        return usage.share / fraction if fraction > 0 else usage.share

    def _borrowing_share(self, attr: QueueAttr, share: Fraction) -> Fraction:
        """The share QueueOrder compares with history: unchanged up to the deserved share (what a queue deserves
        does not depend on its past); above it, the borrowed part divided by the queue's history multiplier `m`,
        so the room nobody deserves is split in proportion to deserved x m (KAI's over-quota share, moved by
        usage)."""
        if share <= 1:
            return share
        multiplier = self.history.get(attr.queue.name)
        if multiplier is None:
            multiplier = self.history[attr.queue.name] = self._multiplier(attr)
        return 1 + (share - 1) / multiplier

    def _multiplier(self, attr: QueueAttr) -> Fraction:
        """`m`: the deserved fraction `f` moved by history (`api/usage.moved_fraction`, as proportion moves a
        weight's fraction) over `f` itself, i.e. `1 + k x (1 - u / f)`, at least `WEIGHT_FLOOR`; 1 for a queue
        that deserves nothing of the cluster (no `f` to divide by)."""
        fraction = self._deserved_fraction(attr)
        if fraction <= 0:
            return Fraction(1)
        usage = self.usage.get(attr.queue.name)
        return Fraction(moved_fraction(fraction, usage.share if usage is not None else 0.0, self.args.usage.weight)
                        / fraction)

    def allocatable(self, queue: QueueInfo, task: TaskInfo) -> Status:
        tree = self.tree
        if tree is not None and queue.name in tree.broken:
            return unresolvable(tree.broken[queue.name])
        if tree is not None and not tree.leaf(queue.name):
            return unresolvable(tree.not_leaf(queue.name))
        self.book.fresh(queue.name)
        path = self.book.path(queue.name)
        if not path:
            return SUCCESS
        request = without_pods(task.resreq)
        asked = dimensions(task.resreq)
        for attr in path:
            held = attr.allocated + self._reserved(attr.queue.name, task)
            after = held + request
            over = [name for name in asked if name in attr.limit and after.get(name) > attr.limit[name]]
            if over:
                if not task.gated and not self.book.placeable(task):
                    return SUCCESS  # never for a gated task: its gate would go while the queue is full
                name = over[0]
                return unschedulable(self.book.limit_reason(attr, name, after.get(name), request.get(name),
                                                            held.get(name)))
        if self.ssn.queue_allocation_gate and task.queue_gate_opt_in:
            self.reserved.setdefault(queue.name, {})[task.key] = task
        return SUCCESS

    def allocatable_count(self, queue: QueueInfo, task: TaskInfo, n: int) -> int:
        """How many of n tasks like `task` in a row `allocatable` lets through without its escape hatch (a task no
        node could hold): the i-th (from 0) passes while every queue on the path stays within its capability
        with allocated + (i + 1) x request, on every resource the task asks for."""
        tree = self.tree
        if tree is not None and (queue.name in tree.broken or not tree.leaf(queue.name)):
            return 0
        if self.ssn.queue_allocation_gate and (task.queue_gate_opt_in or self.reserved.get(queue.name)):
            return 0  # room reserved by gated pods: the per-task loop asks `allocatable` one task at a time
        self.book.fresh(queue.name)
        request = without_pods(task.resreq)
        asked = dimensions(task.resreq)
        for attr in self.book.path(queue.name):
            for name in asked:
                if name not in attr.limit:
                    continue
                room, units = attr.limit[name] - attr.allocated.get(name), request.get(name)
                if units > 0:
                    n = min(n, max(0, room // units))
                elif room < 0:
                    n = 0
        return n

    def job_enqueueable(self, job: JobInfo) -> Status:
        tree = self.tree
        if tree is not None and job.queue in tree.broken:
            return unresolvable(tree.broken[job.queue])
        if tree is not None and job.queue in tree.ancestors and not tree.leaf(job.queue):
            return unresolvable(tree.not_leaf(job.queue))
        if job.min_resources is None:
            return SUCCESS
        over = [reason for attr in self.book.path(job.queue) for reason in self.book.over_limit(attr, job)]
        return unschedulable(*over) if over else SUCCESS

    def preemptive(self, queue: QueueInfo, request: Resource) -> bool:
        attr = self.book.fresh(queue.name)
        if attr is None:
            return False
        after = attr.allocated + without_pods(request)
        asked = dimensions(request)
        if any(after.get(name) > attr.limit[name] for name in asked if name in attr.limit):
            return False
        return any(attr.deserved.get(name) and after.get(name) <= attr.deserved.get(name) for name in asked)

    def reclaimable(self, reclaimer: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
        return self.book.reclaimable(reclaimer, candidates, may_take)

    def evictable(self, ctx: EvictionContext, candidates: Sequence[TaskInfo]) -> list[TaskInfo] | None:
        """Gang eviction (Volcano's capacity UnifiedEvictableFn, plugins/capacity/capacity.go): gangpreempt stays
        inside one queue, so capacity lets every candidate go; gangreclaim takes a task only if its queue keeps
        its guarantee without it (on every resource the guarantee names) and, unless the task asks for nothing
        the queue deserves, the queue holds more than it deserves on a resource the task asks for. Each victim
        counts as gone for the next. A broken queue tree refuses every candidate."""
        if ctx.kind == EvictionKind.GANG_PREEMPT:
            return list(candidates)
        if self.tree is not None and self.tree.broken:
            return []
        held: dict[str, Resource] = {}
        victims = []
        for task in candidates:
            job = self.ssn.jobs.get(task.job)
            attr = self.book.fresh(job.queue) if job is not None else None
            if attr is None:
                continue
            allocated = held.get(attr.queue.name, attr.allocated)
            request = without_pods(task.resreq)
            after = allocated - request
            guarantee = dimensions(without_pods(attr.queue.guarantee))
            if any(after.get(name) < units for name, units in guarantee.items()):
                continue
            deserved = dimensions(attr.deserved)
            asked = dimensions(request)
            if any(name in deserved for name in asked) and not any(
                    allocated.get(name) > deserved[name] for name in asked if name in deserved):
                continue
            held[attr.queue.name] = after
            victims.append(task)
        return victims

    def victim_queue_order(self, a: QueueInfo, b: QueueInfo, preemptor: QueueInfo) -> int:
        """gangreclaim takes first from the queue that shares the deeper ancestor with the reclaimer's queue
        (Volcano's capacity VictimQueueOrderFn); no opinion for flat queues."""
        tree = self.tree
        if tree is None or not all(q.name in tree.ancestors for q in (a, b, preemptor)):
            return 0

        def level(x: str, y: str) -> int:
            path_x = [*reversed(tree.ancestors[x]), x]
            path_y = [*reversed(tree.ancestors[y]), y]
            shared = 0
            for i, (u, v) in enumerate(zip(path_x, path_y, strict=False)):
                if u != v:
                    break
                shared = i
            return shared

        left, right = level(a.name, preemptor.name), level(b.name, preemptor.name)
        return 0 if left == right else (-1 if left > right else 1)


def capacity_share(attr: QueueAttr) -> Fraction:
    """capacity's share (Volcano's updateQueueAttrShare, plugins/capacity/capacity.go): a queue that deserves
    nothing is best-effort, share 1 whatever it holds, so it goes after every queue below its deserved share
    (the tie then goes to the queue that deserves something). proportion's share stays 0 there."""
    return attr.share if dimensions(attr.deserved) else Fraction(1)


def may_take(attr: QueueAttr, held: Resource, task: TaskInfo, reclaimer: TaskInfo) -> bool:
    """The victim's queue holds more than it deserves on a resource the victim uses (or deserves none of
    them), and keeps its guarantee without the victim."""
    used = dimensions(task.resreq)
    after = held - without_pods(task.resreq)
    guarantee = without_pods(attr.queue.guarantee)
    if any(after.get(name) < units for name, units in dimensions(guarantee).items() if name in used):
        return False  # the queue's guarantee is never lent
    unearned = not any(attr.deserved.get(name) for name in used)
    return unearned or any(held.get(name) > attr.deserved.get(name) for name in used)
