"""Layer `controllers`: timers that re-enter a controller, and the retry of a sync that failed.

kopf only logs the exception of a watch handler (`on.event` handlers are not retried: kopf's
`process_resource_watching_cause` runs them with errors ignored). A Job whose sync failed on an API error (a
pod create answered 500, a status write that timed out) would then wait for its next event, which may never
come: nothing else changes while its pods are not created. Volcano's Job controller puts the request back on
its rate-limited work queue (pkg/controllers/job/job_controller.go, `processNextReq`: `AddRateLimited`, with
client-go's per-item exponential backoff). `Retries` does the same with one timer per job: the failed sync runs
again after 0.5 s, doubling up to 30 s, until one succeeds. Volcano drops a request after --max-requeue-num (15)
requeues and waits for the job's next event; volcano-py keeps retrying at the capped period (CONFORMANCE.md).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TypeVar

import urllib3

from scheduler.cache.kube import KubeError

log = logging.getLogger("volcano_py.controllers")

RETRY_FIRST, RETRY_MOST = 0.5, 30.0  # seconds: the first retry of a failed sync, doubling up to this
T = TypeVar("T")
PENDING_MOST = 32  # failed syncs of one job kept to run again (beyond: a plain sync, which reads all afresh)


class Timers:
    """One pending timer per (job, purpose); re-arming an armed timer keeps the earlier one."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._timers: dict[tuple[str, str], threading.Timer] = {}

    def arm(self, key: str, purpose: str, delay: float, action: Callable[[], None]) -> None:
        with self._lock:
            if (key, purpose) in self._timers:
                return

            def fire() -> None:
                with self._lock:
                    self._timers.pop((key, purpose), None)
                try:
                    action()
                except Exception:  # a timer must never kill its thread silently
                    log.exception("timer %s for %s failed", purpose, key)

            timer = threading.Timer(max(0.0, delay), fire)
            timer.daemon = True
            self._timers[(key, purpose)] = timer
            timer.start()

    def cancel(self, key: str) -> None:
        with self._lock:
            for k in [k for k in self._timers if k[0] == key]:
                self._timers.pop(k).cancel()

    def cancel_all(self) -> None:
        with self._lock:
            for timer in self._timers.values():
                timer.cancel()
            self._timers.clear()


class Retries:
    """The failed syncs of each job, run again on a `retry` timer with exponential backoff."""

    def __init__(self, timers: Timers, first: float = RETRY_FIRST, most: float = RETRY_MOST) -> None:
        self.timers, self.first, self.most = timers, first, most
        self._lock = threading.Lock()
        self._failures: dict[str, int] = {}  # job key -> failures in a row
        self._pending: dict[str, list[Callable[[], object]]] = {}

    def run(self, key: str, what: str, logger: logging.Logger, sync: Callable[[], T]) -> T | None:
        """`sync()`; if it raises, it is logged (`what` failed) and run again after the key's backoff: None."""
        try:
            result = sync()
        except Exception as exc:  # kopf would only log it: the sync runs again with backoff
            log.debug("%s failed", what, exc_info=True)
            delay = self.failed(key, lambda: self.run(key, what, logger, sync))
            log_failure(logger, what, exc, delay)
            return None
        self.succeeded(key)
        return result

    def failed(self, key: str, again: Callable[[], object]) -> float:
        """A sync of `key` failed: run `again` after the job's backoff (returned, in seconds)."""
        with self._lock:
            count = self._failures.get(key, 0)
            self._failures[key] = count + 1
            pending = self._pending.setdefault(key, [])
            if len(pending) < PENDING_MOST:
                pending.append(again)
        delay = float(min(self.first * 2**count, self.most))
        self.timers.arm(key, "retry", delay, lambda: self._run(key))
        return delay

    def succeeded(self, key: str) -> None:
        with self._lock:
            self._failures.pop(key, None)

    def forget(self, key: str) -> None:
        """The job is gone: nothing of it to run again."""
        with self._lock:
            self._failures.pop(key, None)
            self._pending.pop(key, None)

    def failures(self, key: str) -> int:
        with self._lock:
            return self._failures.get(key, 0)

    def _run(self, key: str) -> None:
        with self._lock:
            pending = self._pending.pop(key, [])
        for again in pending:  # each re-enters the sync, which calls `failed` again if it fails again
            again()


class AlreadySaidError(Exception):
    """A failure already said on the object it concerns (a condition and an event, once): its retries log at debug
    only. The failure itself is the `__cause__`."""


def log_failure(logger: logging.Logger, what: str, exc: BaseException, delay: float) -> None:
    """One line: for an API error (the apiserver's answer, a refused or broken connection, a timeout), its
    answer; for anything else, which is a bug or an object the controller cannot read, the exception's type and
    message, the traceback only with debug logging (issue 31: no traceback reaches a user who did not ask)."""
    if isinstance(exc, AlreadySaidError):  # already said on the object (a condition and an event), once
        logger.debug("%s: %s; retrying in %.1f s", what, exc, delay)
    elif isinstance(exc, (KubeError, OSError, urllib3.exceptions.HTTPError)):
        logger.warning("%s: %s; retrying in %.1f s", what, exc, delay)
    else:
        text = " ".join(str(exc).split())[:300]
        logger.error("%s: %s: %s; retrying in %.1f s", what, type(exc).__name__, text, delay,
                     exc_info=exc if logger.isEnabledFor(logging.DEBUG) else None)
