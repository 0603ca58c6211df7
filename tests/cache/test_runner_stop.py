"""A stop (SIGTERM) while the scheduler still waits for its first lists ends the wait, not the sync timeout."""

from __future__ import annotations

import threading
import time

import pytest

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


class Synced:
    """A cache whose lists are in: the loop cycles at once (none of our pods listed early: no first-view cycle)."""

    ours_early: list[object] = []

    def start(self) -> None:
        pass

    def wait_synced(self, timeout: float) -> bool:
        return True

    def ensure_queue(self, name: str) -> None:
        pass


class CountingLoop(SchedulerLoop):
    """Cycles that only count themselves: each one sets `cycled`."""

    def __init__(self, **kw: float) -> None:
        super().__init__(Synced(), ConfWatcher(None), period=600.0, **kw)  # type: ignore[arg-type]
        self.cycled = threading.Event()

        self.started: list[float] = []  # monotonic: when each cycle ran

    def run_once(self) -> None:  # type: ignore[override]
        self.started.append(time.monotonic())
        self.cycles += 1
        self.cycled.set()


def run_in_thread(loop: SchedulerLoop) -> threading.Thread:
    runner = threading.Thread(target=loop.run, daemon=True)
    runner.start()
    return runner


def test_an_arrival_starts_the_next_cycle_long_before_the_period_ends() -> None:
    loop = CountingLoop(arrival_delay=0.05)
    runner = run_in_thread(loop)
    assert loop.cycled.wait(10)
    loop.cycled.clear()
    loop.wake()
    assert loop.cycled.wait(10)  # the period is 600 s
    assert loop.cycles == 2
    loop.stop()
    runner.join(10)
    assert not runner.is_alive()


def test_without_an_arrival_delay_an_arrival_waits_for_the_period() -> None:
    loop = CountingLoop()
    runner = run_in_thread(loop)
    assert loop.cycled.wait(10)
    loop.cycled.clear()
    loop.wake()
    assert not loop.cycled.wait(1.0)  # a 600 s period: no cycle follows the arrival
    loop.stop()  # and a stop still ends the period's wait at once
    runner.join(10)
    assert not runner.is_alive()
    assert loop.cycles == 1


def test_a_flood_of_arrivals_spaces_the_cycles_by_the_delay_not_back_to_back() -> None:
    """Pending pods arriving without pause (a burst the cluster cannot place) wake every cycle, but each one still
    starts the arrival delay after the one before ended: the wake never turns the loop into a busy loop."""
    delay = 0.1
    loop = CountingLoop(arrival_delay=delay)
    done = threading.Event()

    def flood() -> None:
        while not done.is_set():
            loop.wake()
            done.wait(0.001)  # pacing of the flood, not synchronisation

    runner, flooder = run_in_thread(loop), threading.Thread(target=flood, daemon=True)
    flooder.start()
    deadline = time.monotonic() + 20
    while loop.cycles < 5 and time.monotonic() < deadline:
        loop.cycled.wait(1)
        loop.cycled.clear()
    done.set()
    loop.stop()
    runner.join(10)
    flooder.join(10)
    assert loop.cycles >= 5, "the flood woke no cycle before the 600 s period"
    gaps = [b - a for a, b in zip(loop.started, loop.started[1:], strict=False)]
    assert min(gaps) >= delay * 0.99, gaps


def test_the_next_cycle_starts_the_delay_after_the_first_arrival_and_the_cycle_start() -> None:
    from scheduler.cache.runner import next_start

    # a pod arrived 0.01 s into a 0.02 s cycle: 0.1 s after the arrival
    assert next_start(started=10.0, arrived_at=10.01, delay=0.1, period=1.0, now=10.02) == pytest.approx(10.11)
    # the cycle and its apply took 0.4 s, the pod arrived at its start: at once (0.1 s after both passed)
    assert next_start(started=10.0, arrived_at=10.0, delay=0.1, period=1.0, now=10.4) == pytest.approx(10.1)
    # arrivals before the cycle began count from its start: never sooner than the delay after it
    assert next_start(started=10.0, arrived_at=9.5, delay=0.1, period=1.0, now=10.01) == pytest.approx(10.1)
    # never past the period's end; an arrival time lost to a race counts as now
    assert next_start(started=10.0, arrived_at=10.95, delay=0.1, period=1.0, now=10.96) == pytest.approx(11.0)
    assert next_start(started=10.0, arrived_at=None, delay=0.1, period=1.0, now=10.3) == pytest.approx(10.4)


@pytest.mark.parametrize("delay", [0.0, 0.05])
def test_a_nudge_starts_the_next_cycle_at_once_whatever_the_period(delay: float) -> None:
    """`--active-shards`: a replica that has just taken a shard (its pending gangs waited for a Lease to lapse)
    starts a cycle now, not at the end of a 600 s period; with or without an arrival delay."""
    loop = CountingLoop(arrival_delay=delay)
    runner = run_in_thread(loop)
    assert loop.cycled.wait(10)
    loop.cycled.clear()
    loop.nudge()
    assert loop.cycled.wait(10)  # the period is 600 s
    assert loop.cycles == 2 and not loop.nudged  # consumed by the cycle it started
    loop.cycled.clear()
    loop.wake()  # and an arrival after it still follows the rules above: with no delay it waits for the period
    assert loop.cycled.wait(1.0) is (delay > 0)
    loop.stop()
    runner.join(10)
    assert not runner.is_alive()
