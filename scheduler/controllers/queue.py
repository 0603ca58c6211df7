"""Layer `controllers`: the Queue controller.

It owns two things of a Queue's status: `state` (Open, Closing, Closed) and the counts of the queue's
PodGroups by phase (`pending`, `inqueue`, `running`, `unknown`, `completed`), which `kubectl get queue` shows.
`status.allocated` is the scheduler's: this controller writes merge patches that never name it.

State follows requests: an `OpenQueue`/`CloseQueue` Command, or `spec.state` when a user sets it (it then wins).
A closed queue with PodGroups still in it is `Closing` until the last one goes; the scheduler admits nothing
from a queue that is not Open, so its jobs create no pods.

Hierarchical queues follow their parent as Volcano's queue controller has them (pkg/controllers/queue/
queue_controller_action.go): closing a queue closes its open children, marking them `volcano.sh/closed-by-parent`;
a queue whose parent is Closing or Closed is not opened; opening a queue reopens the children its closing closed.

The `default` queue is recreated whenever it is deleted (issue 31): jobs and PodGroups that name no queue go to it,
and the webhook that refuses its deletion (Volcano's /queues/validate) may be off. The scheduler creates it at its
start only. The PodGroups of any other deleted queue wait, and the scheduler tells why on each of them (its
`QueueMissing` reason); the job controller gives their Jobs a `QueueNotFound` condition and event.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Mapping
from typing import Any

from scheduler import metrics
from scheduler.api.objects import MutableObj
from scheduler.controllers.client import Api
from scheduler.controllers.timers import Retries, Timers

log = logging.getLogger("volcano_py.controllers.queue")

OPEN, CLOSING, CLOSED = "Open", "Closing", "Closed"
CLOSED_BY_PARENT = "volcano.sh/closed-by-parent"
ROOT = "root"
DEFAULT = "default"
# The `default` queue as the scheduler (cache.ensure_queue) and the chart (templates/default-queue.yaml) create it.
DEFAULT_QUEUE_SPEC = {"weight": 1, "reclaimable": True}
COUNTED = {"Pending": "pending", "Inqueue": "inqueue", "Running": "running", "Unknown": "unknown",
           "Completed": "completed"}


def podgroup_counts(phases: list[str]) -> dict[str, int]:
    """Counts by phase, every key present (0 included) so `kubectl get queue` never shows a blank."""
    counts = Counter(COUNTED.get(p, "pending") for p in phases)
    return {key: counts.get(key, 0) for key in COUNTED.values()}


def next_state(current: str | None, requested: str | None, counts: Mapping[str, int]) -> str:
    """The queue state after a request (Open/Close), given how many PodGroups are still in it."""
    state = current or OPEN
    if requested == OPEN:
        state = OPEN
    elif requested in ("Close", CLOSED, CLOSING):
        state = CLOSED if state == CLOSED else CLOSING
    live = sum(n for key, n in counts.items() if key != "completed")
    if state == CLOSING and live == 0:
        state = CLOSED
    return state


class QueueController:
    def __init__(self, api: Api):
        self.api = api
        self._lock = threading.Lock()
        self._groups: dict[str, tuple[str, str]] = {}  # PodGroup key -> (queue, phase)
        # queue name -> (spec.parent, status.state) as last seen or written: the hierarchy, read without a GET per
        # PodGroup event
        self._queues: dict[str, tuple[str, str]] = {}
        self.retries = Retries(Timers())  # a failed status write runs again (kopf does not retry watch handlers)

    def on_podgroup(self, kind: str | None, podgroup: MutableObj) -> None:
        meta = podgroup.get("metadata") or {}
        key = f"{meta.get('namespace')}/{meta.get('name')}"
        queue = str((podgroup.get("spec") or {}).get("queue") or "default")
        phase = str((podgroup.get("status") or {}).get("phase") or "Pending")
        with self._lock:
            old = self._groups.pop(key, None)
            if kind != "DELETED":
                self._groups[key] = (queue, phase)
        for name in {queue, old[0] if old else queue}:
            if old is None or old != (queue, phase) or kind == "DELETED":
                self._sync_or_retry(name)

    def on_queue(self, kind: str | None, queue: MutableObj) -> None:
        name = str(queue["metadata"]["name"])
        with self._lock:
            if kind == "DELETED":
                self._queues.pop(name, None)
            else:
                self._queues[name] = (str((queue.get("spec") or {}).get("parent") or ""),
                                      str((queue.get("status") or {}).get("state") or OPEN))
        if kind == "DELETED":
            metrics.observe_controllers(lambda m: m.remove_queue(name))  # Volcano's DeleteQueueMetrics
            self.retries.forget(name)
            if name == DEFAULT:
                self.retries.run(name, f"queue {name}: recreate failed", log, self.recreate_default)
        else:
            self._sync_or_retry(name)

    def recreate_default(self) -> None:
        """The `default` queue was deleted: create it again (a no-op if someone already has)."""
        body = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": DEFAULT},
                "spec": dict(DEFAULT_QUEUE_SPEC)}
        if self.api.create_queue(body) is not None:
            log.warning("queue %s was deleted; created it again (jobs that name no queue go to it)", DEFAULT)

    def _sync_or_retry(self, name: str) -> None:
        self.retries.run(name, f"queue {name}: status sync failed", log, lambda: self.sync(name))

    def _children(self, name: str) -> list[str]:
        with self._lock:
            return sorted(q for q, (parent, _) in self._queues.items() if parent == name)

    def _parent_closed(self, queue: MutableObj) -> bool:
        parent = str((queue.get("spec") or {}).get("parent") or "")
        if not parent or parent == ROOT:
            return False
        with self._lock:
            seen = self._queues.get(parent)
        return seen is not None and seen[1] in (CLOSING, CLOSED)

    def phases(self, queue: str) -> list[str]:
        with self._lock:
            return [phase for q, phase in self._groups.values() if q == queue]

    def sync(self, name: str, request: str | None = None) -> dict[str, Any] | None:
        """Bring the queue's state and counts up to date; `request` is a Command's Open or Close. Then its
        children follow it (closed with it; reopened with it if its closing closed them)."""
        wanted = self._sync_one(name, request)
        if wanted is not None:
            self._follow(name, wanted["state"])
        return wanted

    def _sync_one(self, name: str, request: str | None) -> dict[str, Any] | None:
        queue = self.api.queue(name)
        if queue is None:
            return None
        parent_closed = self._parent_closed(queue)
        closed_by_parent = ((queue.get("metadata") or {}).get("annotations") or {}).get(CLOSED_BY_PARENT) == "true"
        requested = request or (queue.get("spec") or {}).get("state")
        if requested == OPEN and parent_closed:
            log.warning("queue %s: not opened: its parent is closing or closed; open the parent first", name)
            requested = None
        elif requested is None and parent_closed and (queue.get("status") or {}).get("state") in (None, OPEN):
            self.api.annotate_queue(name, {CLOSED_BY_PARENT: "true"})  # its parent closed while it was away
            requested = CLOSED
        elif requested is None and closed_by_parent and not parent_closed:
            requested = OPEN  # the parent that closed it is open again
        if requested == OPEN and closed_by_parent:
            self.api.annotate_queue(name, {CLOSED_BY_PARENT: "false"})
        with self._lock:  # one writer of queue status at a time: counts and state move together
            status = queue.get("status") or {}
            counts = podgroup_counts([phase for q, phase in self._groups.values() if q == name])
            wanted = {"state": next_state(status.get("state"), requested, counts), **counts}
            metrics.observe_controllers(lambda m: m.record_queue(name, counts))  # Volcano's UpdateQueueMetrics
            if all(status.get(k) == v for k, v in wanted.items()):
                return wanted
            self.api.patch_queue_status(name, wanted)
            if name in self._queues:
                self._queues[name] = (self._queues[name][0], str(wanted["state"]))
            if status.get("state") != wanted["state"]:
                log.info("queue %s: %s -> %s", name, status.get("state") or "(none)", wanted["state"])
            return wanted

    def _follow(self, name: str, state: str) -> None:
        for child in self._children(name):
            queue = self.api.queue(child)
            if queue is None:
                continue
            child_state = (queue.get("status") or {}).get("state") or OPEN
            marked = ((queue.get("metadata") or {}).get("annotations") or {}).get(CLOSED_BY_PARENT) == "true"
            if state in (CLOSING, CLOSED) and child_state not in (CLOSING, CLOSED):
                self.api.annotate_queue(child, {CLOSED_BY_PARENT: "true"})
                self.sync(child, CLOSED)
            elif state == OPEN and marked and child_state in (CLOSING, CLOSED):
                self.sync(child, OPEN)
