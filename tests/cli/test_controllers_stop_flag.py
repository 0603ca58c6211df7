"""The controllers' bridge between our stop (a signal, a lost Lease) and kopf's stop flag
(scheduler/controllers/operator.py `_operate`). kopf itself is stood in by a coroutine that is ready at once and
ends when its stop flag is set; the e2e test tests/e2e/test_controllers.py runs the real one under SIGTERM."""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

import pytest

from scheduler.controllers import operator


def test_a_lost_lease_still_stops_kopf_when_the_signals_cannot_be_taken_back(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    ended: list[str] = []

    async def kopf_operator(*, stop_flag: asyncio.Event, ready_flag: asyncio.Event, **_: Any) -> None:
        ready_flag.set()
        await stop_flag.wait()
        ended.append("stopped by its flag")

    def refuse(*_: Any) -> None:
        raise RuntimeError("no signal handlers here")

    monkeypatch.setattr(operator.kopf, "operator", kopf_operator)
    monkeypatch.setattr(asyncio.SelectorEventLoop, "add_signal_handler", refuse)  # (the loop asyncio.run makes here)
    stop = threading.Event()  # what losing the Lease sets
    timer = threading.Timer(0.5, stop.set)
    timer.start()
    with caplog.at_level(logging.WARNING):
        asyncio.run(asyncio.wait_for(operator._operate(None, None, stop), 10))  # type: ignore[arg-type]
    timer.join()
    assert ended == ["stopped by its flag"]
    assert "SIGTERM stays kopf's (no signal handlers here)" in caplog.text
