"""Layer `plugins`: `capacity` — each queue's share is the `deserved` it declares, not a weight.

Volcano's capacity plugin (the alternative to `proportion`, never both), for flat queues: where proportion
water-fills the cluster by weight, capacity takes each queue's `spec.deserved` as written, so an administrator
can give a queue 20 A100s and 50 V100s rather than a percentage. Queues lend what they do not use and take it
back by reclaim. The accounting (allocated, admitted minResources, elastic, real capability) is proportion's.

- Deserved: `spec.deserved`, at most the real capability and at least the guarantee, per resource. A resource
  `deserved` does not name is not deserved at all (the share ignores it, and reclaim takes it back first).
- Real capability: `capability`, or the cluster total less what the other queues are guaranteed (as proportion).
- QueueOrder: higher `spec.priority` first, then the lower share (largest allocated/deserved ratio).
- Allocatable: a queue may grow past its deserved share up to its real capability, on every resource the task
  asks for (borrowing what others do not use). A task no node could hold is let through, as in proportion.
- Preemptive (reclaim for this queue): its allocation plus the task stays within the real capability, and within
  deserved on at least one resource the task asks for.
- Reclaimable: a task of another reclaimable queue that holds more than it deserves on a resource the task uses
  (or deserves none of what it uses), never taking that queue below its guarantee.
- JobEnqueueable: proportion's gate on the real capability.
- No Overused: a queue over its deserved share keeps borrowing; only capability stops it.

Not implemented: `enableHierarchy` (queues with `parent`); the plugin says so once and treats queues as flat.
"""

from __future__ import annotations

import logging

from scheduler.api.job import TaskInfo
from scheduler.api.queue import QueueInfo
from scheduler.api.resources import Resource
from scheduler.framework.session import Session
from scheduler.plugins.proportion import ProportionPlugin, QueueAttr, dimensions, without_pods

log = logging.getLogger("volcano_py.plugins.capacity")
_warned_hierarchy = False


class CapacityPlugin(ProportionPlugin):
    name = "capacity"
    registers_overused = False

    def on_session_open(self, ssn: Session) -> None:
        global _warned_hierarchy
        if self.option.switches.get("enableHierarchy") and not _warned_hierarchy:
            log.warning("capacity: enableHierarchy is not implemented in volcano-py; queues are treated as flat")
            _warned_hierarchy = True
        super().on_session_open(ssn)

    def deserved(self) -> dict[str, Resource]:
        """Each queue's declared deserved share, clamped to [guarantee, real capability] per resource."""
        if self._stale:
            for attr in self.attrs.values():
                declared = without_pods(attr.queue.deserved) if attr.queue.deserved is not None else Resource()
                units = {}
                for name, value in dimensions(declared).items():
                    units[name] = min(value, attr.limit[name]) if name in attr.limit else value
                for name, value in dimensions(without_pods(attr.queue.guarantee)).items():
                    units[name] = max(units.get(name, 0), value)
                attr.deserved = Resource.of(units.pop("cpu", 0), units.pop("memory", 0), 0, units)
                attr.update_share()
            self._stale = False
        return {name: a.deserved for name, a in self.attrs.items()}

    def overused(self, queue: QueueInfo) -> bool:
        """Above its deserved share (share > 1), for the queue metrics only: capacity never stops a queue there."""
        attr = self._fresh(queue.name)
        return attr is not None and attr.share > 1

    def queue_order(self, a: QueueInfo, b: QueueInfo) -> int:
        if a.priority != b.priority:
            return -1 if a.priority > b.priority else 1
        return super().queue_order(a, b)

    def allocatable(self, queue: QueueInfo, task: TaskInfo) -> bool:
        attr = self._fresh(queue.name)
        if attr is None:
            return True
        after = attr.allocated + without_pods(task.resreq)
        within = all(after.get(name) <= attr.limit[name] for name in dimensions(task.resreq) if name in attr.limit)
        return within or not self._placeable(task)

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
