"""The HTTP(S) server for `/metrics`, `/healthz`, `/livez` and `/readyz`. Layer: metrics."""

from __future__ import annotations

import logging
import os
import socket
import ssl
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from scheduler.metrics.auth import MetricsAuth
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
    """One thread per connection; with `tls`, the handshake runs on that thread (never on the accept loop, where
    one peer that opens a connection and sends nothing would stall every probe) within `timeout`."""

    daemon_threads = True
    tls: ServingCert | None = None
    timeout_s: float = 10.0

    def finish_request(self, request: Any, client_address: Any) -> None:
        if self.tls is None:
            super().finish_request(request, client_address)
            return
        conn = self.tls.context().wrap_socket(request, server_side=True, do_handshake_on_connect=False)
        try:
            conn.settimeout(self.timeout_s)  # CPython's handshake: one deadline for all its reads and writes
            conn.do_handshake()
            super().finish_request(conn, client_address)
        finally:
            conn.close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A peer that stalls, drops or speaks no TLS: one debug line, not socketserver's traceback on stderr.
        exc = sys.exc_info()[1]
        log.debug("metrics connection from %s: %s: %s", client_address[0], type(exc).__name__, exc)


class _Server6(_Server):
    address_family = socket.AF_INET6


class ServingCert:
    """The certificate `--metrics-secure` serves. Files given are read again when they change (cert-manager and
    the kubelet's Secret volumes replace them in place; controller-runtime's certwatcher does the same), checked at
    most once every `recheck` seconds on a new connection; a pair that does not load (a half-written renewal) keeps
    the previous certificate and is tried again. Without files: a self-signed certificate made once, at start."""

    def __init__(self, cert_file: str | None, key_file: str | None, *, recheck: float = 1.0,
                 clock: Callable[[], float] = time.monotonic):
        given = bool(cert_file and key_file)
        self.cert_file: str | None = cert_file if given else None
        self.key_file: str | None = key_file if given else None
        self.recheck, self.clock = recheck, clock
        self._lock = threading.Lock()
        self._checked = clock()
        self._signature = self._stat()
        self._context = self._load()  # a bad file here is the caller's error to report (the CLI: exit 2)
        self._failed: tuple[object, ...] | None = None

    def _stat(self) -> tuple[object, ...]:
        if self.cert_file is None or self.key_file is None:
            return ()
        out: list[object] = []
        for path in (self.cert_file, self.key_file):
            st = os.stat(path)
            out += [st.st_ino, st.st_mtime_ns, st.st_size]
        return tuple(out)

    def _load(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        if self.cert_file is not None and self.key_file is not None:
            context.load_cert_chain(self.cert_file, self.key_file)
            return context
        cert, key = self_signed()
        with tempfile.TemporaryDirectory(prefix="volcano-py-metrics-") as tmp:  # load_cert_chain reads files only
            cert_path, key_path = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
            key_path.touch(0o600)
            key_path.write_bytes(key)
            cert_path.write_bytes(cert)
            context.load_cert_chain(str(cert_path), str(key_path))
        return context

    def context(self) -> ssl.SSLContext:
        if self.cert_file is None:
            return self._context
        with self._lock:
            now = self.clock()
            if now - self._checked < self.recheck:
                return self._context
            self._checked = now
            signature: tuple[object, ...] = ("unreadable",)
            try:
                signature = self._stat()
                if signature != self._signature and signature != self._failed:
                    self._context, self._signature = self._load(), signature
                    log.info("--metrics-secure: serving the renewed certificate %s", self.cert_file)
            except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
                if signature != self._failed:
                    log.warning("--metrics-secure: cannot load %s (%s: %s); still serving the previous certificate",
                                self.cert_file, type(exc).__name__, exc)
                self._failed = signature
            return self._context


def tls_context(cert_file: str | None, key_file: str | None) -> ServingCert:
    """The certificate of `--metrics-secure`: the given certificate and key, or (neither given) a self-signed
    certificate made now, as controller-runtime's secure metrics serve one when given no certificate."""
    return ServingCert(cert_file, key_file)


def self_signed(name: str = "volcano-py-metrics", days: int = 365) -> tuple[bytes, bytes]:
    """(certificate, key) in PEM: an ECDSA P-256 certificate for `name`, `localhost` and this host's name."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    names = sorted(n for n in {name, "localhost", socket.gethostname()} if n and n.isascii())
    cert = (
        x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), critical=False)
        .sign(key, hashes.SHA256())
    )
    return (cert.public_bytes(serialization.Encoding.PEM),
            key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()))


class MetricsServer:
    """A small threaded HTTP server. `/readyz` is 200 once `ready()` is true (the caches have synced; with
    leader election a standby is ready too, so it can take over at once), `/healthz` and `/livez` while
    `healthy()` is (the scheduler: not too many failed cycles in a row, no stuck cycle; `cache/runner.py`).

    Secure (`tls` and `auth` given, `--metrics-secure`): HTTPS, and `/metrics` answers only a bearer token that
    Kubernetes authenticates and authorizes for `get` on the path (`metrics/auth.py`: 401 without one, 403 for a
    user without the right). The probes stay open: the kubelet's probes carry no token (an HTTPS probe does not
    verify the certificate either). `metrics=False` serves the probes alone (Volcano's health address, plain
    HTTP, beside a secure metrics address)."""

    def __init__(
        self,
        address: str,
        *,
        registry: CollectorRegistry | None = None,
        ready: Callable[[], bool] = lambda: True,
        healthy: Callable[[], bool] = lambda: True,
        tls: ServingCert | None = None,
        auth: MetricsAuth | None = None,
        metrics: bool = True,
        timeout: float = 10.0,
    ) -> None:
        if auth is not None and tls is None:
            raise ValueError("a guarded /metrics is served over TLS only: the bearer token must not travel in clear")
        host, port = parse_address(address)
        registry = registry if registry is not None else REGISTRY
        routes: dict[str, Callable[[], tuple[int, str, bytes]]] = {
            "/healthz": lambda: _check(healthy),
            "/livez": lambda: _check(healthy),
            "/readyz": lambda: _check(ready),
        }
        if metrics:
            routes["/metrics"] = lambda: (200, CONTENT_TYPE_LATEST, exposition(registry))
        guarded = frozenset({"/metrics"} if auth is not None else ())
        self.secure = tls is not None

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                route = routes.get(path)
                if route is None:
                    status, content_type, body = 404, "text/plain", b"not found\n"
                elif path in guarded and auth is not None:
                    verdict = auth.check(self.headers.get("Authorization"), path, "get")
                    status, content_type, body = route() if verdict.allowed else (
                        verdict.status, "text/plain", f"{verdict.message}\n".encode())
                else:
                    status, content_type, body = route()
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, fmt: str, *args: Any) -> None:  # not logged: probes come every few seconds
                return

        Handler.timeout = timeout  # each read and write of a connection (an idle peer is cut after it)
        server = _Server6 if ":" in host else _Server
        self.httpd = server((host or "0.0.0.0", port), Handler, bind_and_activate=False)
        self.httpd.tls, self.httpd.timeout_s = tls, timeout
        try:
            self.httpd.server_bind()
            self.httpd.server_activate()
        except BaseException:
            self.httpd.server_close()
            raise
        self.paths = tuple(routes)
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="metrics-http", daemon=True)

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    def start(self) -> MetricsServer:
        self.thread.start()
        log.info("serving %s on port %d over %s", ", ".join(self.paths), self.port,
                 "HTTPS (/metrics for authorized bearer tokens)" if self.secure else "HTTP")
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _check(probe: Callable[[], bool]) -> tuple[int, str, bytes]:
    try:
        ok = bool(probe())
    except Exception:  # a failing probe is a failed check, not a crashed server
        log.debug("a probe failed", exc_info=True)
        ok = False
    return (200, "text/plain", b"ok\n") if ok else (503, "text/plain", b"not ready\n")


def serve(address: str, *, ready: Callable[[], bool] = lambda: True,
          healthy: Callable[[], bool] = lambda: True, tls: ServingCert | None = None,
          auth: MetricsAuth | None = None, metrics: bool = True) -> MetricsServer:
    """Start serving the default registry on `address` (the CLI's --listen-address)."""
    default()
    return MetricsServer(address, ready=ready, healthy=healthy, tls=tls, auth=auth, metrics=metrics).start()
