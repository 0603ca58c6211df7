"""Liveness that means something (issue 31): `/healthz` fails after `max_failed_cycles` whole cycles failed in a
row, and when no cycle has ended within 10 schedule periods (a stuck cycle); it recovers with the next good
cycle. The scheduler's loop runs for real on an in-memory cluster; only the cache around it is a stand-in."""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable

import pytest

from scheduler.api.snapshot import ClusterSnapshot, CycleResult
from scheduler.cache.runner import STUCK_PERIODS, ConfWatcher, SchedulerLoop
from scheduler.metrics import MetricsServer
from scheduler.testing import LoopCache


class Cache(LoopCache):
    """Synced at once; `snapshot` does what the test says (raise, block, or give a small cluster)."""

    def __init__(self) -> None:
        super().__init__()
        self.mode = "ok"
        self.release = threading.Event()
        self.calls = 0
        self.applied = 0
        self.raises_left = 0  # mode "some": raise this many times, then give snapshots again
        self.health: list[tuple[int, bool]] = []  # (failed in a row, healthy) as each snapshot was asked
        self.loop: SchedulerLoop | None = None
        self.ours_early: list[object] = []  # no first cycle on a partial view

    def start(self) -> None:
        pass

    def wait_synced(self, timeout: float) -> bool:
        return True

    def ensure_queue(self, name: str) -> None:
        pass

    def snapshot(self) -> ClusterSnapshot:
        self.calls += 1
        if self.loop is not None:
            self.health.append((self.loop.failed_in_a_row, self.loop.healthy()))
        if self.mode == "raise":
            raise RuntimeError("the snapshot is broken")
        if self.mode == "some" and self.raises_left:
            self.raises_left -= 1
            raise RuntimeError("the snapshot is broken, for now")
        if self.mode == "block":
            self.release.wait(30)
        return super().snapshot()

    def apply(self, result: CycleResult) -> None:
        self.applied += 1


def wait_for(predicate: Callable[[], bool], seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        threading.Event().wait(0.01)


def probe(server: MetricsServer) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/healthz", timeout=5) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return exc.code


@pytest.fixture()
def running() -> object:
    cache = Cache()
    loop = SchedulerLoop(cache, ConfWatcher(None), period=0.02, max_failed_cycles=3)  # type: ignore[arg-type]
    cache.loop = loop
    server = MetricsServer("127.0.0.1:0", healthy=loop.healthy).start()
    thread = threading.Thread(target=loop.run, kwargs={"sync_timeout": 1.0}, daemon=True)
    thread.start()
    yield cache, loop, server
    cache.release.set()
    loop.stop()
    thread.join(10)
    server.stop()


def test_liveness_fails_after_failed_cycles_in_a_row_and_recovers(running: tuple[Cache, SchedulerLoop,
                                                                                 MetricsServer]) -> None:
    cache, loop, server = running
    wait_for(lambda: loop.cycles >= 2)
    assert probe(server) == 200
    cache.mode = "raise"
    wait_for(lambda: loop.failed_in_a_row >= 3)
    assert not loop.healthy()
    assert probe(server) == 503
    cycles = loop.cycles
    cache.mode = "ok"
    wait_for(lambda: loop.cycles > cycles)
    assert loop.failed_in_a_row == 0
    assert probe(server) == 200


def test_fewer_failed_cycles_in_a_row_than_the_limit_keep_liveness(
    running: tuple[Cache, SchedulerLoop, MetricsServer],
) -> None:
    cache, loop, server = running
    wait_for(lambda: loop.cycles >= 1)
    cycles = loop.cycles
    cache.raises_left = 2  # the limit is 3
    cache.mode = "some"
    wait_for(lambda: cache.raises_left == 0 and loop.cycles > cycles + 1)
    seen = cache.health[-4:]
    assert max(failed for failed, _ in cache.health) == 2
    assert all(healthy for _, healthy in cache.health), seen
    assert loop.failed_in_a_row == 0 and probe(server) == 200


def test_liveness_fails_while_a_cycle_is_stuck(running: tuple[Cache, SchedulerLoop, MetricsServer]) -> None:
    cache, loop, server = running
    wait_for(lambda: loop.cycles >= 1)
    cache.mode = "block"
    started = time.monotonic()
    wait_for(lambda: not loop.healthy())
    assert time.monotonic() - started >= STUCK_PERIODS * loop.period * 0.9  # not before 10 periods
    assert probe(server) == 503
    cycles = loop.cycles
    cache.mode = "ok"
    cache.release.set()
    wait_for(lambda: loop.cycles > cycles)
    assert loop.healthy()
    assert probe(server) == 200
