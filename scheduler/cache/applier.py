"""Layer `cache`: a cycle's apply carried on behind the next cycle (`--pipeline-apply`).

A pipelined apply sends the cycle's binds at once (the binder assumes each pod on its node as it submits it, so
the next snapshot accounts them) and leaves the rest to one applier thread: waiting for the binds, then the
PodGroup / Queue / pod status writes, then the events. Applies run there one after the other, in cycle order, so
the status writes of cycle k land before those of cycle k+1, and each sees its own cycle's bind results.

At most one apply is in flight behind the computing cycle: handing over the apply of cycle k+1 waits until the
apply of cycle k is done (so the snapshot of cycle k+2 sees every result of cycle k). A snapshot taken while an
apply was in flight assumed that apply's binds would land; the gangs for which one did not are left out of the
status writes of the cycle that decided on that snapshot (its view of them was wrong); the cycle after writes
them. The status of a PodGroup that apply wrote is rebased onto what was written (adapter/podgroup_status.py
`rebase`): the snapshot read the status from before.

Volcano binds asynchronously too: a committed allocation (pkg/scheduler/framework/statement.go Commit) goes to
pkg/scheduler/cache/cache.go AddBindTask, which marks the task Binding on its node and hands it to a bind worker
(processBindTask) while the next session runs. Its evictions are asynchronous as well (cache.go Evict: the task
Releasing, the delete in a goroutine); here a cycle that evicts still applies in line (ClusterCache.apply).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field

from scheduler.adapter.podgroup_status import rebase
from scheduler.api.snapshot import PodGroupStatus

log = logging.getLogger("volcano_py.cache")

@dataclass(frozen=True, slots=True)
class Applied:
    """What an apply did that a cycle whose snapshot was taken before it ended did not see."""

    failed: dict[str, int] = field(default_factory=dict)  # gang -> binds that failed
    written: frozenset[str] = frozenset()  # the PodGroups whose status it wrote (or tried to)


class Applier:
    """One thread running applies in the order they were handed over; at most one waits behind the running one."""

    def __init__(self) -> None:
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="volcano-py-apply")
        self._in_flight: Future[Applied] | None = None
        self._lock = threading.Lock()  # `_in_flight`, read by a snapshot on another thread than the loop's (tests)

    def in_flight(self) -> Future[Applied] | None:
        """The apply not done yet (its binds' outcome not known to a snapshot taken now), or None."""
        with self._lock:
            future = self._in_flight
        return future if future is not None and not future.done() else None

    def hand_over(self, finish: Callable[[Future[Applied] | None], Applied]) -> None:
        """Run `finish` on the applier thread once the apply handed over before it is done, with that apply's future
        (None if there was none); then wait until that one is done (the backpressure: never two applies behind the
        computing cycle). Its exception, if any, is raised here: the cycle that handed it over fails, as it would
        have had it applied in line."""
        with self._lock:
            before = self._in_flight

            def run() -> Applied:
                if before is not None:
                    wait((before,))  # its exception is raised to the loop by `hand_over`, below
                return finish(before)

            self._in_flight = self._thread.submit(run)
        if before is not None:
            before.result()

    def drain(self) -> None:
        """Wait until every apply handed over is done (shutdown, a cycle that applies in line, tests); raise the last
        one's exception."""
        with self._lock:
            last, self._in_flight = self._in_flight, None
        if last is not None:
            last.result()

    def close(self) -> None:
        try:
            self.drain()
        except Exception as exc:  # noqa: BLE001 - the loop has stopped: nobody left to fail
            log.warning("the last apply failed at shutdown: %s: %s", type(exc).__name__, exc)
        self._thread.shutdown(wait=True)


def behind(statuses: list[PodGroupStatus], before: Applied,
           stored: Callable[[str], object]) -> list[PodGroupStatus]:
    """A cycle's statuses, whose snapshot was taken while the apply `before` was in flight: a gang with a bind that
    failed in it was seen bound, its status is left to the next cycle; a PodGroup it wrote was read as it was before
    that write, its status is rebased onto what the PodGroup holds now (`stored(job)`: its status in the cache)."""
    skipped = sorted({s.job for s in statuses if s.job in before.failed})
    if skipped:
        log.info("not writing the status of %s: the cycle saw binds of the last one that failed", ", ".join(skipped))
    return [rebase(status, stored(status.job)) if status.job in before.written else status
            for status in statuses if status.job not in before.failed]
