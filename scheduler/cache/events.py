"""Layer `cache`: Kubernetes events on Pods and PodGroups, sent off the bind path by their own threads.

An event is queued where it happens (a bind, an eviction, an unreadable object, a cycle's result) and sent in
the background. Binds go first, for a while: an event waits while any binds are in flight, but never more than
DEFER seconds after it was queued. A burst of binds (a restart, a large gang, the throughput sizes of `make
bench-peers`) then sends its events once its binds are done, as before; a steady stream of cycles that bind, where
some binds are always out, sends them DEFER seconds late instead of holding them until the stream pauses (waiting
for every bind with no limit, at 120% of kube-scheduler's rate in the churn size two thirds of the `Scheduled`
events were still queued when the run ended). Two threads send them; while more than SURGE_BACKLOG wait, `surge`
more threads help, so a backlog stops growing: at 120% two threads sent 570 events per 1,000 binds by the run's
end, with the surge every one. Below the backlog the extra threads stay out of the way of the cycle (eight threads
at all times cost 8% of binds/s in the throughput size, 2026-12-05). The same event is sent once. An event the
apiserver did not take for a passing reason (no answer, a 5xx; a 429 is waited out by `Kube`) is sent again, up to
SEND_TRIES times, as client-go's recorder does (tools/record/event.go, maxTriesPerEvent), so a bound pod does not
lose its `Scheduled` event to one dropped connection. The bodies go as protobuf (cache/protobuf.py).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable

from scheduler.api.objects import MutableObj
from scheduler.api.snapshot import Event
from scheduler.api.timestamps import rfc3339
from scheduler.cache.kube import TRANSPORT_ERRORS, Kube, KubeError
from scheduler.cache.store import Stores

log = logging.getLogger("volcano_py.cache")

COMPONENT = "volcano-py"
# Above this many remembered events, those about objects that no longer exist are forgotten (a long-lived
# scheduler sees every pod and PodGroup it ever warned about come and go).
SENT_LIMIT = 20_000
SEND_TRIES = 4
EVENT_NAME_BASE = 200  # characters of the object's name in an event's name (a name may have 253)
RETRY_SECONDS = 1.0  # before the second try; doubled before each next one
DEFER = 10.0  # the longest an event waits, from when it was queued, for binds in flight to return
SURGE_BACKLOG = 500  # events waiting above which the surge threads send too
# An idle surge thread sleeps until `record` signals a backlog above SURGE_BACKLOG (or `close`); this is only its
# longest sleep, for a stop set without `close` (seconds). It used to look every 0.25 s: 24 wake-ups a second from
# six idle threads, whatever the scheduler was doing.
SURGE_IDLE = 5.0
# Events waiting above which a new one is dropped (~1.4 KB each queued: 70 MB at the bound). Only an apiserver that
# has not taken events for minutes gets here: the largest burst, a cycle binding 10,000 pods, queues 10,000.
# client-go's recorder keeps 1,000 and drops the rest the same way (tools/record/event.go maxQueuedEvents,
# watch.DropIfChannelFull); memory that grows without end would cost every team its scheduler, not one event.
QUEUE_LIMIT = 50_000
DROP_LOG_SECONDS = 60.0  # at most one line this often about events dropped


class EventRecorder:
    def __init__(
        self, kube: Kube, stores: Stores, clock: Callable[[], float], instance: str, stop: threading.Event,
        workers: int = 2, *, surge: int = 6, sleep: Callable[[float], object] | None = None,
    ):
        self._sleep = sleep or stop.wait  # between tries: a stop ends the wait (shutdown joins these threads)
        self.kube = kube
        self.stores = stores
        self.clock = clock
        self.instance = instance
        self._stop = stop
        # (when it was queued, monotonic; the body)
        self.queue: queue.Queue[tuple[float, MutableObj] | None] = queue.Queue()
        self._sent: set[tuple[str, str, str, str, str]] = set()
        self.sent_limit = SENT_LIMIT
        self.queue_limit = QUEUE_LIMIT
        self.dropped = 0  # events not queued: the queue was at its limit
        self._dropped_said = (-DROP_LOG_SECONDS, 0)  # (when the last line about drops was logged, the count then)
        self._prune_at = 0  # 0: at sent_limit
        # Batches of binds submitted (`binds_out`) and not yet returned (`binds_back`): events wait while any is
        self._binds = threading.Condition()
        self._pending = 0
        self._names_lock = threading.Lock()
        self._last_name = 0
        self._closing = False
        self._surge = threading.Event()  # set: more than SURGE_BACKLOG events wait, or closing (wakes the surge)
        self._threads = [
            threading.Thread(target=self._send_events, name=f"events-{i}", daemon=True) for i in range(workers)
        ] + [threading.Thread(target=self._surge_events, name=f"events-surge-{i}", daemon=True) for i in range(surge)]

    def _unique(self) -> int:
        """Nanoseconds since the epoch, strictly increasing across calls: two events of one object never share a
        name."""
        with self._names_lock:
            self._last_name = max(time.time_ns(), self._last_name + 1)
            return self._last_name

    @property
    def threads(self) -> list[threading.Thread]:
        return self._threads

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def running(self) -> bool:
        return self._threads[0].is_alive()

    def close(self) -> None:
        """Ask the sending threads to end (the caller joins them)."""
        self._closing = True  # (the surge threads end at their next look, which this wakes)
        self._surge.set()
        for _ in self._threads:
            self.queue.put(None)
        with self._binds:
            self._binds.notify_all()  # (a sender waiting for binds sees the stop)

    def binds_out(self) -> None:
        """A batch of binds was submitted (cache/binder.py): events wait (DEFER at most) until it returns."""
        with self._binds:
            self._pending += 1

    def binds_back(self) -> None:
        """A batch of binds out has returned."""
        with self._binds:
            self._pending = max(0, self._pending - 1)
            self._binds.notify_all()

    def binds_pending(self) -> int:
        """Batches of binds submitted and not returned (tests, logs)."""
        with self._binds:
            return self._pending

    def _after_binds(self, queued: float) -> None:
        """Wait while binds are out, until DEFER seconds after the event was queued at most, or a stop."""
        deadline = queued + DEFER
        with self._binds:
            while self._pending and not self._stop.is_set():
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self._binds.wait(left)

    def emit(self, events: Iterable[Event]) -> None:
        for e in events:
            self.record(e.kind, e.key, e.type, e.reason, e.message)

    def _forget_vanished(self) -> None:
        """Under the lock: drop the marks of objects that are gone. If most are still there, the next pruning
        waits until the set has doubled, so a cluster with many live warned-about objects does not rebuild the
        set on every event."""
        self._sent = {m for m in self._sent
                      if m[1] in (self.stores.pods if m[0] == "Pod" else self.stores.podgroups).objects}
        self._prune_at = 2 * len(self._sent)

    def record(self, kind: str, key: str, type_: str, reason: str, message: str,
               annotations: dict[str, str] | None = None) -> None:
        """Queue an event (once); `annotations` go on the Event's metadata (what `explain` reads as data)."""
        mark = (kind, key, type_, reason, message)
        with self.stores.lock:
            if mark in self._sent:
                return
            store = self.stores.pods if kind == "Pod" else self.stores.podgroups
            obj = store.objects.get(key)
            if obj is None and kind != "Pod":
                return  # an implicit gang has no PodGroup to attach the event to
            waiting = self.queue.qsize()
            full = waiting >= self.queue_limit
            if full:  # not remembered as sent: one recorded again later (an `Unschedulable`) goes once there is room
                self.dropped += 1
            else:
                if len(self._sent) >= max(self.sent_limit, self._prune_at):
                    self._forget_vanished()
                self._sent.add(mark)
        if full:
            self._said_dropped()
            return
        namespace, name = key.split("/", 1)
        uid = ((obj or {}).get("metadata") or {}).get("uid")
        api_version = "v1" if kind == "Pod" else "scheduling.volcano.sh/v1beta1"
        now = rfc3339(self.clock())
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            # Named here, as client-go's recorder names events (`<object>.<unix nanoseconds, hex>`), not by the
            # server: a retry of an event whose answer was lost is then refused as AlreadyExists, never a second
            # event (tools/record/event.go makeEvent).
            "metadata": {"name": f"{name[:EVENT_NAME_BASE]}.{self._unique():x}", "namespace": namespace,
                         **({"annotations": annotations} if annotations else {})},
            "involvedObject": {
                "apiVersion": api_version,
                "kind": kind,
                "name": name,
                "namespace": namespace,
                **({"uid": uid} if uid else {}),
            },
            "type": type_,
            "reason": reason,
            "message": message,
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "reportingInstance": self.instance,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        self.queue.put((time.monotonic(), body))
        if waiting >= SURGE_BACKLOG:  # (more than SURGE_BACKLOG wait now: the surge threads send too)
            self._surge.set()

    def _said_dropped(self) -> None:
        """An event was dropped (the queue at its limit): one line a minute says how many went."""
        now = time.monotonic()
        with self._names_lock:
            said_at, said = self._dropped_said
            if now - said_at < DROP_LOG_SECONDS:
                return
            self._dropped_said = (now, self.dropped)
        log.warning("events dropped: %d since the last line (%d in all): %d wait to be sent, the apiserver is not "
                    "taking them as fast as they come", self.dropped - said, self.dropped, self.queue_limit)

    def _send_events(self) -> None:
        while True:
            item = self.queue.get()
            try:
                if item is None or not self._after_binds_send(item):
                    return
            finally:
                self.queue.task_done()

    def _surge_events(self) -> None:
        """Send events too while more than SURGE_BACKLOG wait; otherwise sleep until `record` says more do."""
        while not (self._closing or self._stop.is_set()):
            if self.queue.qsize() <= SURGE_BACKLOG:
                # cleared, then the backlog looked at again: an event queued in between has set it once more, so
                # the wait cannot miss a backlog (nor a close: `_closing` is set before its wake-up)
                self._surge.clear()
                if self.queue.qsize() <= SURGE_BACKLOG and not self._closing:
                    self._surge.wait(SURGE_IDLE)
                continue
            try:
                item = self.queue.get_nowait()
            except queue.Empty:
                continue
            try:
                if item is None:  # a sending thread's end, taken in passing: given back, and this one ends too
                    self.queue.put(None)
                    return
                if not self._after_binds_send(item):
                    return
            finally:
                self.queue.task_done()

    def _after_binds_send(self, item: tuple[float, MutableObj]) -> bool:
        """Send a queued event once the binds let it (`_after_binds`); False if the recorder stopped instead."""
        queued, body = item
        self._after_binds(queued)
        if self._stop.is_set():
            return False
        try:
            self._send(body)
        except Exception as exc:  # a fault in one event (a body the client cannot encode, a bug) costs that event
            log.warning("event %s not written: %s", (body.get("metadata") or {}).get("name"), exc)  # alone: the
            log.debug("the event's traceback", exc_info=True)  # thread goes on with the others
        return True

    def _send(self, body: MutableObj) -> None:
        namespace = body["metadata"]["namespace"]
        for attempt in range(SEND_TRIES):
            try:
                self.kube.request("POST", f"/api/v1/namespaces/{namespace}/events", body=body, protobuf=True)
                return
            except TRANSPORT_ERRORS as exc:
                # refused for good (a 4xx: the namespace is going, the body is invalid), or out of tries: dropped
                final = isinstance(exc, KubeError) and 400 <= exc.status < 500
                if final or attempt == SEND_TRIES - 1 or self._stop.is_set():
                    log.debug("event not written: %s", exc)
                    return
            self._sleep(RETRY_SECONDS * 2 ** attempt)
            if self._stop.is_set():  # stopped while waiting to try again
                return

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until the queued events were sent (tests, shutdown)."""
        deadline = time.monotonic() + timeout
        while self.queue.unfinished_tasks and time.monotonic() < deadline:
            time.sleep(0.01)
        return not self.queue.unfinished_tasks
