"""A stop (SIGTERM) while the scheduler still waits for its first lists ends the wait, not the sync timeout."""

from __future__ import annotations

import threading

from scheduler.cache.runner import ConfWatcher, SchedulerLoop


class NeverSynced:
    """A cache whose apiserver cannot be reached: its lists never complete."""

    def __init__(self) -> None:
        self.waiting = threading.Event()
        self.waits: list[float] = []
        self.ours_early: list[object] = []  # no first cycle on a partial view

    def start(self) -> None:
        pass

    def wait_synced(self, timeout: float) -> bool:
        self.waits.append(timeout)
        self.waiting.set()
        threading.Event().wait(timeout)  # as the real one blocks on its watches' events
        return False

    def snapshot(self) -> None:
        raise AssertionError("no cycle may run after a stop")


def test_a_stop_during_the_first_sync_ends_the_run_without_a_cycle() -> None:
    cache = NeverSynced()
    loop = SchedulerLoop(cache, ConfWatcher(None))  # type: ignore[arg-type]
    runner = threading.Thread(target=loop.run, kwargs={"sync_timeout": 600.0}, daemon=True)
    runner.start()
    assert cache.waiting.wait(10)
    loop.stop()
    runner.join(10)  # far below the 600 s sync timeout
    assert not runner.is_alive()
    assert loop.cycles == 0
