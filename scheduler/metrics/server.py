"""The HTTP server for `/metrics`, `/healthz`, `/livez` and `/readyz`. Layer: metrics."""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from scheduler.metrics.client_golang import exposition
from scheduler.metrics.scheduler_metrics import default

log = logging.getLogger("volcano_py.metrics")


def parse_address(address: str) -> tuple[str, int]:
    """`:8080`, `0.0.0.0:8080`, `127.0.0.1:0` or `[::]:8080` -> (host, port)."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"--listen-address: expected [HOST]:PORT such as :8080, got {address!r}")
    return host.strip("[]"), int(port)


class _Server(ThreadingHTTPServer):
    daemon_threads = True


class _Server6(_Server):
    address_family = socket.AF_INET6


class MetricsServer:
    """A small threaded HTTP server. `/readyz` is 200 once `ready()` is true (the caches have synced; with
    leader election a standby is ready too, so it can take over at once), `/healthz` and `/livez` while
    `healthy()` is (the scheduler: not too many failed cycles in a row, no stuck cycle; `cache/runner.py`)."""

    def __init__(
        self,
        address: str,
        *,
        registry: CollectorRegistry | None = None,
        ready: Callable[[], bool] = lambda: True,
        healthy: Callable[[], bool] = lambda: True,
    ) -> None:
        host, port = parse_address(address)
        registry = registry if registry is not None else REGISTRY
        routes: dict[str, Callable[[], tuple[int, str, bytes]]] = {
            "/metrics": lambda: (200, CONTENT_TYPE_LATEST, exposition(registry)),
            "/healthz": lambda: _check(healthy),
            "/livez": lambda: _check(healthy),
            "/readyz": lambda: _check(ready),
        }

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the http.server API
                route = routes.get(self.path.split("?", 1)[0])
                status, content_type, body = route() if route else (404, "text/plain", b"not found\n")
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - probes every few seconds
                return

        server = _Server6 if ":" in host else _Server
        self.httpd = server((host or "0.0.0.0", port), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="metrics-http", daemon=True)

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    def start(self) -> MetricsServer:
        self.thread.start()
        log.info("serving /metrics, /healthz and /readyz on port %d", self.port)
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _check(probe: Callable[[], bool]) -> tuple[int, str, bytes]:
    try:
        ok = bool(probe())
    except Exception:  # noqa: BLE001 - a failing probe is a failed check, not a crashed server
        ok = False
    return (200, "text/plain", b"ok\n") if ok else (503, "text/plain", b"not ready\n")


def serve(address: str, *, ready: Callable[[], bool] = lambda: True,
          healthy: Callable[[], bool] = lambda: True) -> MetricsServer:
    """Start serving the default registry on `address` (the CLI's --listen-address)."""
    default()
    return MetricsServer(address, ready=ready, healthy=healthy).start()
