"""Layer `controllers`: one due time per key, in a heap, and one thread that acts on each key when its time comes.

The CronJob controller keeps each CronJob's next look here, so it re-checks a CronJob at its next start without
looking at every CronJob every second. Times come from an injected clock (seconds since the epoch); the thread
waits in real time for the earliest of them, at most `max_wait` at once (so a wall clock that jumps is noticed),
and `wake()` makes it look again at once (a test that moved its clock calls it). A test without the thread calls
`run_due()` itself.
"""

from __future__ import annotations

import heapq
import logging
import threading
from collections.abc import Callable

log = logging.getLogger("volcano_py.controllers")


class DueTimes:
    def __init__(self, clock: Callable[[], float], action: Callable[[str], None], *, max_wait: float = 30.0):
        self.clock = clock
        self.action = action
        self.max_wait = max_wait
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, str]] = []
        self._entry: dict[str, tuple[float, int]] = {}  # key -> its live (time, seq); other heap entries are stale
        self._seq = 0
        self._stopped = False
        self._thread: threading.Thread | None = None

    # ---- the times ---------------------------------------------------------------------------------------------
    def at(self, key: str, when: float) -> None:
        """`key` is next due at `when` (replacing any earlier or later time it had)."""
        with self._cond:
            self._seq += 1
            self._entry[key] = (when, self._seq)
            heapq.heappush(self._heap, (when, self._seq, key))
            self._cond.notify()

    def forget(self, key: str) -> None:
        with self._cond:
            self._entry.pop(key, None)

    def when(self, key: str) -> float | None:
        with self._cond:
            entry = self._entry.get(key)
            return entry[0] if entry else None

    def take_due(self) -> list[str]:
        """The keys whose time has come, earliest first; they are no longer due (their action sets the next)."""
        now = self.clock()
        due = []
        with self._cond:
            while self._heap and self._heap[0][0] <= now:
                when, seq, key = heapq.heappop(self._heap)
                if self._entry.get(key) == (when, seq):
                    del self._entry[key]
                    due.append(key)
        return due

    def run_due(self) -> list[str]:
        """Run the action of every key that is due; an action that fails is logged (it re-arms itself)."""
        keys = self.take_due()
        for key in keys:
            try:
                self.action(key)
            except Exception:  # one CronJob's failure must not stop the others' starts
                log.exception("due action for %s failed", key)
        return keys

    # ---- the thread --------------------------------------------------------------------------------------------
    def start(self) -> DueTimes:
        self._thread = threading.Thread(target=self._loop, name="cronjob-due", daemon=True)
        self._thread.start()
        return self

    def wake(self) -> None:
        with self._cond:
            self._cond.notify()

    def stop(self, timeout: float = 10.0) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join(timeout)

    def _loop(self) -> None:
        while True:
            with self._cond:
                if self._stopped:
                    return
                self._drop_stale()
                delay = self._heap[0][0] - self.clock() if self._heap else self.max_wait
                if delay > 0:
                    self._cond.wait(min(delay, self.max_wait))
                    continue
            self.run_due()

    def _drop_stale(self) -> None:
        while self._heap and self._entry.get(self._heap[0][2]) != (self._heap[0][0], self._heap[0][1]):
            heapq.heappop(self._heap)
