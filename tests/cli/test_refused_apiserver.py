"""A refused apiserver (issue 38): the scheduler says so in one warning, not one per watch per retry, and its
watches retry with exponential backoff and jitter, not in lockstep."""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from scheduler.retry import Backoff, Outage

REPO = Path(__file__).resolve().parents[2]


def test_backoff_doubles_and_spreads_each_delay() -> None:
    low = Backoff(0.2, 30.0, rng=lambda: 0.0)
    high = Backoff(0.2, 30.0, rng=lambda: 0.999999)
    steps = [min(30.0, 0.2 * 2**i) for i in range(10)]  # the step doubles up to the cap
    for step in steps:
        assert low.next() == pytest.approx(min(30.0, step * 0.5))
        assert high.next() == pytest.approx(min(30.0, step * 1.5), rel=1e-5)
    assert Backoff(0.2, 30.0).step == 0.2


def test_threads_that_fail_together_do_not_retry_together() -> None:
    import random

    sequences = []
    for seed in range(9):  # nine watch threads failing at the same instant
        rng = random.Random(seed)
        backoff = Backoff(0.2, 30.0, rng=rng.random)
        sequences.append(tuple(round(backoff.next(), 6) for _ in range(5)))
    assert len(set(sequences)) == 9
    firsts = sorted(s[0] for s in sequences)
    assert firsts[-1] - firsts[0] > 0.05  # spread over the [0.1, 0.3) window, not one instant


def test_backoff_reset_starts_again() -> None:
    backoff = Backoff(1.0, 30.0, rng=lambda: 0.5)
    assert [backoff.next() for _ in range(3)] == [1.0, 2.0, 4.0]
    backoff.reset()
    assert backoff.next() == 1.0


def test_an_outage_is_one_warning_until_it_ends(caplog: pytest.LogCaptureFixture) -> None:
    log = logging.getLogger("test.outage")
    outage = Outage(log)
    with caplog.at_level(logging.DEBUG, logger="test.outage"):
        threads = [threading.Thread(target=outage.failed, args=(f"watch {k}", ConnectionError("refused"), 0.2))
                   for k in range(20)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        outage.recovered()
        outage.recovered()
        outage.failed("watch Node", ConnectionError("refused"), 0.2)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 3
    assert warnings[0].startswith("cannot reach the apiserver (watch ")
    assert warnings[1] == "the apiserver answers again"
    assert warnings[2].startswith("cannot reach the apiserver (watch Node")
    assert sum(r.levelno == logging.DEBUG for r in caplog.records) == 19


def test_the_scheduler_warns_once_of_a_refused_apiserver(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: connections are refused
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(f"""apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "http://127.0.0.1:{port}"}}}}]
users: [{{name: u, user: {{token: t}}}}]
contexts: [{{name: x, context: {{cluster: c, user: u}}}}]
current-context: x
""")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "scheduler.cli", "scheduler", "--kubeconfig", str(kubeconfig)],
                            stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stderr.readline, "")), daemon=True)  # type: ignore[union-attr]
    reader.start()
    try:
        deadline = time.monotonic() + 30
        while not any("cannot reach the apiserver" in line for line in lines) and time.monotonic() < deadline:
            reader.join(0.1)
        assert any("cannot reach the apiserver" in line for line in lines), lines
        # Watch it retry for a while: the first retries of every kind's watch come within 0.3 s, the next
        # within 0.6 s, ... With a warning per retry this window held dozens of them.
        window_end = time.monotonic() + 4
        while time.monotonic() < window_end and proc.poll() is None:
            reader.join(0.2)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        reader.join(5)
    warnings = [line for line in lines if " WARNING " in line]
    assert len(warnings) == 1, warnings
    assert f"127.0.0.1:{port}" in warnings[0]
