"""Layer `plugins`: `capacity` — each queue's share is the `deserved` it declares, not a weight.

Volcano's capacity plugin (the alternative to `proportion`, never both). Where proportion water-fills the cluster
by weight, capacity takes each queue's `spec.deserved` as written, so an administrator can give a queue 20 A100s
and 50 V100s rather than a percentage. Queues lend what they do not use and take it back by reclaim. The
accounting (allocated, admitted minResources, elastic, real capability) is proportion's.

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

With `enableHierarchy: true` queues form a tree by `spec.parent` under `root` (a Queue named `root`, or an
unlimited one if there is none). Jobs go to leaf queues only (a job in a queue with children is held at enqueue
and never placed). What a leaf holds counts in each of its ancestors too, and a task or job must fit the real
capability of the leaf and of every ancestor. A child's real capability is its parent's, less what the parent's
other children are guaranteed, capped by its own `capability`; `root` is unlimited unless it has a capability
(the cluster's size does not cap it, as in Volcano). `root` deserves what its children do. Leaves go before
inner queues; two leaves compare the shares of their ancestors just below where their paths part. Reclaim and
preemptive look at leaf queues, as Volcano's default (`ancestorReclaimLevel` 0). A queue whose parent does not
exist, or that is in a cycle of parents, holds its jobs with the reason (Volcano stops scheduling everything).
"""

from __future__ import annotations

import logging

from scheduler.api.decision import SUCCESS, Status, unresolvable, unschedulable
from scheduler.api.job import JobInfo, TaskInfo
from scheduler.api.queue import QueueInfo
from scheduler.api.reasons import (
    CAPABILITY,
    PARENT_CAPABILITY,
    REAL_CAPABILITY,
    QueueLimit,
    QueueNotLeaf,
    QueueParentCycle,
    QueueParentMissing,
    Reason,
)
from scheduler.api.resources import Resource
from scheduler.plugins.proportion import ProportionPlugin, QueueAttr, dimensions, task_limit, without_pods

log = logging.getLogger("volcano_py.plugins.capacity")
ROOT = "root"


class CapacityPlugin(ProportionPlugin):
    name = "capacity"
    registers_overused = False

    # ---- the queue tree (enableHierarchy) -----------------------------------------------------------------
    def _prepare(self) -> None:
        self.hierarchy = bool(self.option.switches.get("enableHierarchy"))
        self.ancestors: dict[str, list[str]] = {}  # queue -> parent, grandparent, ..., root
        self.children: dict[str, list[str]] = {}
        self.broken: dict[str, Reason] = {}  # queue -> why it is not in the tree
        if not self.hierarchy:
            return
        queues = dict(self.ssn.queues)
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
            self._tree_attr(queues[name])

    def _tree_attr(self, queue: QueueInfo) -> None:
        """The queue's attr with its real capability from its parent's (parents are made first)."""
        own = {name: units for name, units in dimensions(without_pods(queue.capability or Resource())).items()}
        own.update(dict.fromkeys(queue.capability_zero, 0))
        limit: dict[str, int] = {}
        if queue.name != ROOT:
            parent = self.attrs[self.ancestors[queue.name][0]]
            siblings = Resource.total(
                without_pods(self.ssn.queues[c].guarantee) for c in self.children.get(parent.queue.name, [])
                if c in self.ssn.queues
            )
            mine = without_pods(queue.guarantee)
            limit = {n: units - siblings.get(n) + mine.get(n) for n, units in parent.limit.items()}
        binding = set()
        for name, units in own.items():
            if name not in limit or units < limit[name]:
                limit[name] = units
                binding.add(name)
        self.attrs[queue.name] = QueueAttr(queue, limit, frozenset(binding))

    def _attr(self, queue_name: str) -> QueueAttr | None:
        if not self.hierarchy:
            return super()._attr(queue_name)
        return self.attrs.get(queue_name)

    def _path(self, queue_name: str) -> list[QueueAttr]:
        if not self.hierarchy:
            return super()._path(queue_name)
        if queue_name not in self.ancestors:
            return []
        return [self.attrs[n] for n in (queue_name, *self.ancestors[queue_name])]

    def _leaf(self, queue_name: str) -> bool:
        return not self.children.get(queue_name)

    # ---- shares --------------------------------------------------------------------------------------------
    def deserved(self) -> dict[str, Resource]:
        """Each queue's declared deserved share, clamped to [guarantee, real capability] per resource; with the
        hierarchy, root deserves what its children do."""
        if self._stale:
            for attr in self.attrs.values():
                declared = without_pods(attr.queue.deserved) if attr.queue.deserved is not None else Resource()
                units = {n: min(v, attr.limit[n]) if n in attr.limit else v for n, v in dimensions(declared).items()}
                for name, value in dimensions(without_pods(attr.queue.guarantee)).items():
                    units[name] = max(units.get(name, 0), value)
                attr.deserved = Resource.of(units.pop("cpu", 0), units.pop("memory", 0), 0, units)
            if self.hierarchy and ROOT in self.attrs:
                root = self.attrs[ROOT]
                root.deserved = Resource.total(self.attrs[c].deserved for c in self.children.get(ROOT, []))
            for attr in self.attrs.values():
                attr.update_share()
            self._stale = False
        return {name: a.deserved for name, a in self.attrs.items()}

    def overused(self, queue: QueueInfo) -> bool:
        """Above its deserved share (share > 1), for the queue metrics only: capacity never stops a queue there."""
        attr = self._fresh(queue.name)
        return attr is not None and attr.share > 1

    # ---- extension points ----------------------------------------------------------------------------------
    def queue_order(self, a: QueueInfo, b: QueueInfo) -> int:
        if a.priority != b.priority:
            return -1 if a.priority > b.priority else 1
        if self.hierarchy and a.name in self.ancestors and b.name in self.ancestors:
            leaf_a, leaf_b = self._leaf(a.name), self._leaf(b.name)
            if leaf_a != leaf_b:
                return -1 if leaf_a else 1
            path_a = [*reversed(self.ancestors[a.name]), a.name]
            path_b = [*reversed(self.ancestors[b.name]), b.name]
            for x, y in zip(path_a, path_b, strict=False):
                if x != y:
                    return self._compare(x, y)
        return self._compare(a.name, b.name)

    def _compare(self, a: str, b: str) -> int:
        left, right = self._fresh(a), self._fresh(b)
        if left is None or right is None:
            return 0
        if left.share != right.share:
            return -1 if left.share < right.share else 1
        deserves_a, deserves_b = not left.deserved.is_zero(), not right.deserved.is_zero()
        return (deserves_b - deserves_a) if deserves_a != deserves_b else 0

    def allocatable(self, queue: QueueInfo, task: TaskInfo) -> Status:
        if self.hierarchy and queue.name in self.broken:
            return unresolvable(self.broken[queue.name])
        if self.hierarchy and not self._leaf(queue.name):
            return unresolvable(QueueNotLeaf(queue.name, tuple(sorted(self.children[queue.name]))))
        self._fresh(queue.name)
        path = self._path(queue.name)
        if not path:
            return SUCCESS
        request = without_pods(task.resreq)
        asked = dimensions(task.resreq)
        for attr in path:
            after = attr.allocated + request
            over = [name for name in asked if name in attr.limit and after.get(name) > attr.limit[name]]
            if over:
                return SUCCESS if not self._placeable(task) else unschedulable(self._task_limit(attr, over[0], request))
        return SUCCESS

    def _task_limit(self, attr: QueueAttr, name: str, request: Resource) -> QueueLimit:
        """Which limit of `attr` the task passes: its capability, its parent's, or the cluster's less guarantees."""
        limit = attr.limit[name]
        if name in attr.own_limit:
            return task_limit(attr, CAPABILITY, name, limit, request)
        if self.hierarchy and attr.queue.name in self.ancestors and self.ancestors[attr.queue.name]:
            return task_limit(attr, PARENT_CAPABILITY, name, limit, request, parent=self.ancestors[attr.queue.name][0])
        others = self.total_guarantee.get(name) - attr.queue.guarantee.get(name)
        return task_limit(attr, REAL_CAPABILITY, name, limit, request, cluster=self.total.get(name),
                          guaranteed_to_others=others)

    def enqueueable(self, job: JobInfo) -> Status:
        if not self.hierarchy:
            return super().enqueueable(job)
        if job.queue in self.broken:
            return unresolvable(self.broken[job.queue])
        if job.queue in self.ancestors and not self._leaf(job.queue):
            return unresolvable(QueueNotLeaf(job.queue, tuple(sorted(self.children[job.queue]))))
        if job.min_resources is None:
            return SUCCESS
        over = [reason for attr in self._path(job.queue) for reason in self._over_limit(attr, job)]
        return unschedulable(*over) if over else SUCCESS

    def _over_reason(self, attr: QueueAttr, name: str, minimum: Resource, need: Resource) -> QueueLimit:
        if not self.hierarchy or name in attr.own_limit:
            return super()._over_reason(attr, name, minimum, need)
        parent = self.ancestors[attr.queue.name][0]
        return QueueLimit(attr.queue.name, PARENT_CAPABILITY, name, attr.limit[name], need.get(name),
                          minimum.get(name), attr.allocated.get(name), attr.elastic.get(name),
                          attr.admitted.get(name), parent=parent)

    def preemptive(self, queue: QueueInfo, task: TaskInfo) -> bool:
        attr = self._fresh(queue.name)
        if attr is None:
            return False
        after = attr.allocated + without_pods(task.resreq)
        asked = dimensions(task.resreq)
        if any(after.get(name) > attr.limit[name] for name in asked if name in attr.limit):
            return False
        return any(attr.deserved.get(name) and after.get(name) <= attr.deserved.get(name) for name in asked)

    @staticmethod
    def _may_take(attr: QueueAttr, held: Resource, task: TaskInfo, reclaimer: TaskInfo) -> bool:
        """The victim's queue holds more than it deserves on a resource the victim uses (or deserves none of
        them), and keeps its guarantee without the victim."""
        used = dimensions(task.resreq)
        after = held - without_pods(task.resreq)
        guarantee = without_pods(attr.queue.guarantee)
        if any(after.get(name) < units for name, units in dimensions(guarantee).items() if name in used):
            return False  # the queue's guarantee is never lent
        unearned = not any(attr.deserved.get(name) for name in used)
        return unearned or any(held.get(name) > attr.deserved.get(name) for name in used)
