"""Retrying against an apiserver that does not answer: exponential backoff with jitter, and one warning for the
outage rather than one per thread per retry.

Every watch thread of the scheduler (one per kind) retries on its own. With a fixed doubling they all retry in
the same instants, a burst of requests at an apiserver that is coming back, and each logged each failure: 59
warnings in 20 s for one refused address. `Backoff` spreads each delay over [0.5, 1.5) of the doubled step, as
client-go's wait.Backoff does with its Jitter; `Outage` logs the first failure as a warning and the rest at
debug, until a request succeeds again.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable


class Backoff:
    """Delays of `first`, doubling up to `cap`, each spread by a random factor in [1 - jitter, 1 + jitter)."""

    def __init__(self, first: float = 0.2, cap: float = 30.0, jitter: float = 0.5,
                 rng: Callable[[], float] = random.random) -> None:
        self.first, self.cap, self.jitter, self.rng = first, cap, jitter, rng
        self.step = first

    def next(self) -> float:
        delay = self.step * (1.0 - self.jitter + 2.0 * self.jitter * self.rng())
        self.step = min(self.cap, self.step * 2.0)
        return min(self.cap, delay)

    def reset(self) -> None:
        self.step = self.first


class Outage:
    """One warning when requests start failing, debug lines while they go on failing, one line when one succeeds
    again; shared by the threads that talk to one apiserver."""

    def __init__(self, log: logging.Logger, what: str = "the apiserver") -> None:
        self.log, self.what = log, what
        self._lock = threading.Lock()
        self._failing = False

    @property
    def failing(self) -> bool:
        return self._failing

    def failed(self, who: str, exc: BaseException, retry_in: float) -> None:
        with self._lock:
            first, self._failing = not self._failing, True
        if first:
            self.log.warning("cannot reach %s (%s: %s); retrying with backoff, each watch on its own (up to 30s "
                             "apart); said again when it answers", self.what, who, exc)
        else:
            self.log.debug("%s: %s; retrying in %.1fs", who, exc, retry_in)

    def recovered(self) -> None:
        with self._lock:
            was, self._failing = self._failing, False
        if was:
            self.log.warning("%s answers again", self.what)
