"""The webhook's liveness (`--enable-healthz`, the chart's probes): `/healthz` is 200 only while the admission
server itself answers. Layer: webhook.

The health address is a separate plain-HTTP server (the kubelet's probes need no certificate), so on its own it
would stay green while the HTTPS admission server were stuck. `AdmissionHealth` makes it mean something: it is
false when the admission server's accept loop thread has ended, and otherwise it asks the admission server
itself, a TLS handshake and `GET /healthz` on its port over loopback within `timeout` (the certificate is not
verified: this checks that the server answers, not who it is). That one call covers every way the server can stop
answering: an accept loop that is stuck, a server held at its connection cap (the new connection is closed at
accept), a TLS context that no longer loads, threads that cannot start. The answer is kept for `reuse` seconds
and one check runs at a time, so a flood of probes costs the admission server at most one connection a second.
A server at its cap for a moment fails one probe; the kubelet restarts the pod only after `failureThreshold`
probes in a row (30 s with the chart's 10 s period and 3 failures).
"""

from __future__ import annotations

import logging
import socket
import ssl
import threading
import time
from collections.abc import Callable
from typing import Protocol

log = logging.getLogger("volcano_py.webhook")


class Thread(Protocol):
    def is_alive(self) -> bool: ...


def loopback(host: str) -> str:
    """Where to reach a server bound to `host` from this process."""
    if host in ("", "0.0.0.0"):
        return "127.0.0.1"
    if host == "::":
        return "::1"
    return host


class AdmissionHealth:
    """`healthy()` for the webhook's health address."""

    def __init__(self, accept_loop: Thread, address: tuple[str, int], *, timeout: float = 2.0, reuse: float = 1.0,
                 clock: Callable[[], float] = time.monotonic):
        """`accept_loop` and `address`: a `WebhookServer`'s `thread` and `httpd.server_address`."""
        self.accept_loop, self.address = accept_loop, address
        self.timeout, self.reuse, self.clock = timeout, reuse, clock
        self._lock = threading.Lock()
        self._at: float | None = None
        self._ok = False
        self._was_ok = True
        self.checks = 0  # self-checks made (for tests)

    def __call__(self) -> bool:
        if not self.accept_loop.is_alive():
            self._note(False, "its accept loop has ended")
            return False
        with self._lock:
            now = self.clock()
            if self._at is not None and now - self._at < self.reuse:
                return self._ok
            ok, why = self._self_check()
            self._ok, self._at = ok, self.clock()
        self._note(ok, why)
        return ok

    def _note(self, ok: bool, why: str) -> None:
        if ok != self._was_ok:  # one line when it turns, not one per probe
            if ok:
                log.info("the admission server answers again: /healthz is 200")
            else:
                log.warning("the admission server does not answer (%s): /healthz is 503", why)
        self._was_ok = ok

    def _self_check(self) -> tuple[bool, str]:
        self.checks += 1
        host, port = self.address[:2]
        deadline = time.monotonic() + self.timeout
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        try:
            with socket.create_connection((loopback(host), port), timeout=self.timeout) as raw:
                raw.settimeout(max(0.001, deadline - time.monotonic()))
                with context.wrap_socket(raw) as tls:  # the handshake: one deadline for all of it
                    tls.settimeout(max(0.001, deadline - time.monotonic()))
                    tls.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                    head = b""
                    while b"\r\n" not in head and len(head) < 64:
                        tls.settimeout(max(0.001, deadline - time.monotonic()))
                        chunk = tls.recv(64)
                        if not chunk:
                            break
                        head += chunk
        except OSError as exc:  # refused, closed at the cap, timed out, TLS failed (ssl.SSLError is an OSError)
            return False, f"{type(exc).__name__}: {exc}"
        status = head.split(b"\r\n", 1)[0]
        if status.split(b" ")[1:2] != [b"200"]:
            return False, f"it answered {status[:40]!r}"
        return True, ""
