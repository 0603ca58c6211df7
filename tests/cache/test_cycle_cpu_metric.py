"""`volcano_py_cycle_cpu_milliseconds`: the scheduler's loop records the process's CPU time over each cycle beside
its wall-clock latency, so a cycle that waits costs little CPU and a cycle that computes costs what it computed."""

from __future__ import annotations

import threading
import time

import pytest

from scheduler.api.snapshot import CycleResult
from scheduler.cache import runner
from scheduler.cache.runner import ConfWatcher, SchedulerLoop
from scheduler.testing import LoopCache


class Cache(LoopCache):
    """A small cluster; `apply` either computes for `burn` CPU seconds or waits `wait` wall seconds."""

    def __init__(self, burn: float = 0.0, wait: float = 0.0) -> None:
        super().__init__()
        self.burn, self.wait = burn, wait

    def apply(self, result: CycleResult) -> None:
        if self.burn:
            end = time.process_time() + self.burn
            while time.process_time() < end:  # CPU spent inside the cycle
                pass
        if self.wait:
            threading.Event().wait(self.wait)  # a cycle waiting on the apiserver: wall time, no CPU


def observed(monkeypatch: pytest.MonkeyPatch, cache: Cache) -> dict[str, float]:
    seen: dict[str, float] = {}

    def observe(result: CycleResult, seconds: float, snapshot: object = None, *, snapshot_seconds: float = 0.0,
                cpu_seconds: float | None = None) -> None:
        assert cpu_seconds is not None
        seen.update(wall=seconds, cpu=cpu_seconds)

    monkeypatch.setattr(runner.metrics, "observe_cycle", observe)
    SchedulerLoop(cache, ConfWatcher(None), period=1.0).run_once()  # type: ignore[arg-type]
    return seen


def test_a_cycle_that_computes_records_that_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = observed(monkeypatch, Cache(burn=0.15))
    assert seen["cpu"] >= 0.15
    assert seen["wall"] >= 0.15


def test_a_cycle_that_waits_records_its_wall_time_but_not_as_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = observed(monkeypatch, Cache(wait=0.3))
    assert seen["wall"] >= 0.3
    assert seen["cpu"] < seen["wall"] - 0.2
