"""The webhook's /healthz means the admission server answers (issue 31; webhook/health.py): the health address
is its own plain server, so it reports 503 when the HTTPS admission server's accept loop has ended, when that
loop is stuck, or while the server is held at its connection cap, and 200 again once it answers."""

from __future__ import annotations

import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from scheduler.cli import _serve_webhook_health
from scheduler.metrics.server import self_signed
from scheduler.webhook.admission import Queues
from scheduler.webhook.health import AdmissionHealth
from scheduler.webhook.server import Limits, WebhookServer, handlers

HOST = "127.0.0.1"


@pytest.fixture(scope="module")
def cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    directory = tmp_path_factory.mktemp("tls")
    crt, key = self_signed("localhost")
    (directory / "tls.crt").write_bytes(crt)
    (directory / "tls.key").write_bytes(key)
    return str(directory / "tls.crt"), str(directory / "tls.key")


@pytest.fixture
def webhook(cert: tuple[str, str]) -> Iterator[Callable[..., WebhookServer]]:
    started: list[WebhookServer] = []

    def start(limits: Limits = Limits(), run: bool = True) -> WebhookServer:
        server = WebhookServer(HOST, 0, *cert, handlers(Queues(lambda name: None, lambda name: []),
                                                        ["/jobs/validate"]), limits)
        started.append(server)
        return server.start() if run else server

    yield start
    for server in started:
        if server.thread.is_alive():
            server.stop()
        else:
            server.httpd.server_close()


def health_of(server: WebhookServer, **kw: Any) -> AdmissionHealth:
    return AdmissionHealth(server.thread, server.httpd.server_address, reuse=0.0, **kw)


def test_a_running_admission_server_is_healthy(webhook):
    health = health_of(webhook())
    assert health() is True
    assert health.checks == 1


def test_an_ended_accept_loop_is_unhealthy(webhook):
    server = webhook()
    health = health_of(server)
    assert health() is True
    server.httpd.shutdown()  # the accept loop returns; the socket stays bound (nothing else would notice)
    server.thread.join(5)
    assert health() is False


def test_an_accept_loop_that_never_started_is_unhealthy(webhook):
    assert health_of(webhook(run=False))() is False


def test_a_stuck_accept_loop_is_unhealthy_within_the_timeout():
    """A listening socket nobody accepts on: what a stuck accept loop looks like from outside."""
    stuck = socket.create_server((HOST, 0), backlog=8)
    alive = threading.Event()  # a thread that is alive but does nothing, as a stuck loop's
    loop = threading.Thread(target=alive.wait, daemon=True)
    loop.start()
    try:
        health = AdmissionHealth(loop, stuck.getsockname(), timeout=0.5, reuse=0.0)
        started = time.monotonic()
        assert health() is False
        assert time.monotonic() - started < 1.5
    finally:
        alive.set()
        stuck.close()


def test_a_server_held_at_its_connection_cap_is_unhealthy_until_a_slot_frees(webhook):
    server = webhook(Limits(connections=3, handshake=30.0))
    health = health_of(server)
    idle = [socket.create_connection((HOST, server.port)) for _ in range(3)]  # each holds a slot, no handshake
    try:
        deadline = time.monotonic() + 5
        while server.httpd.open < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert server.httpd.open == 3
        assert health() is False
    finally:
        for s in idle:
            s.close()
    deadline = time.monotonic() + 5
    while server.httpd.open and time.monotonic() < deadline:
        time.sleep(0.01)
    assert health() is True


def test_the_answer_is_reused_so_a_probe_flood_costs_one_check_a_second(webhook):
    now = [0.0]
    server = webhook()
    health = AdmissionHealth(server.thread, server.httpd.server_address, reuse=1.0, clock=lambda: now[0])
    for _ in range(20):
        assert health() is True
    assert health.checks == 1
    now[0] += 1.0
    assert health() is True
    assert health.checks == 2


def probe(port: int, path: str = "/healthz") -> int:
    try:
        with urllib.request.urlopen(f"http://{HOST}:{port}{path}", timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def test_the_health_address_reports_the_admission_server(webhook):
    """The CLI's wiring: --enable-healthz serves the check above, for liveness and readiness."""
    server = webhook(Limits(connections=2, handshake=30.0))
    health = _serve_webhook_health(f"{HOST}:0", server)
    try:
        assert probe(health.port) == 200 and probe(health.port, "/readyz") == 200
        idle = [socket.create_connection((HOST, server.port)) for _ in range(2)]
        try:
            deadline = time.monotonic() + 5
            while server.httpd.open < 2 and time.monotonic() < deadline:
                time.sleep(0.01)
            deadline = time.monotonic() + 5  # the check's answer is reused for 1 s: the next one says 503
            while probe(health.port) != 503 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert probe(health.port) == 503
        finally:
            for s in idle:
                s.close()
        server.stop()
        deadline = time.monotonic() + 5
        while probe(health.port) != 503 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert probe(health.port) == 503
    finally:
        health.stop()
