"""Layer `cache`: a lean HTTP/1.1 transport for the apiserver's one-shot calls (binds, events, status writes, lists).

Each bind is a small request, and the scheduler sends two per pod (the Binding and its `Scheduled` event).
`bench/bench_transport.py` (16 threads, 6,000 binds against a local TLS server answering as the apiserver does)
measures the scheduler's CPU per request through `Kube`: 446-487 µs over the official client's urllib3 pool,
117-123 µs here, where the request goes out in one `sendall` on a kept-alive TLS connection and the status line
and headers are read by hand. The standard library's `http.client` alone takes 171-183 µs, half of it in
`email.feedparser` reading the response headers: that is why this is not `http.client`.

What it handles, and nothing more: HTTP/1.1 over TLS (or plain TCP for an `http://` server) with the kubeconfig's
CA, client certificate and server name; `Content-Length` and chunked bodies; keep-alive, with `Connection: close`
obeyed; a connection idle longer than IDLE_SECONDS is not reused; a reused connection that breaks before any byte
of the answer arrives is replaced and the request sent once more (the server closed it while idle: the request
never reached it); a timeout per request. Proxies, compression, HTTP/2 and watches stay with urllib3
(`scheduler/cache/kube.py` uses this only for a plain `urllib3.PoolManager`).
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

IDLE_SECONDS = 30.0  # a kept-alive connection unused this long is closed rather than reused
MAX_IDLE = 64  # idle connections kept
MAX_HEADER_BYTES = 1 << 20


class Response:
    """What `Kube` reads of a response: the status, a header, the body."""

    __slots__ = ("status", "headers", "data")

    def __init__(self, status: int, headers: dict[str, str], data: bytes):
        self.status, self.headers, self.data = status, _Headers(headers), data

    def release_conn(self) -> None:
        """Nothing to release: the body is read and the connection back in the pool."""


class _Headers(dict[str, str]):
    """Response headers by lower-case name; `get` takes any case, as urllib3's does."""

    def get(self, key: str, default: Any = None) -> Any:
        return super().get(key.lower(), default)


class _BrokenConnectionError(ConnectionError):
    """The connection ended before any byte of the answer: on a reused connection, send again."""


class _Conn:
    __slots__ = ("sock", "buf", "used")

    def __init__(self, sock: socket.socket):
        self.sock, self.buf, self.used = sock, b"", time.monotonic()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


class Http1:
    """A pool of kept-alive connections to one server; `request` is thread-safe."""

    def __init__(self, url: str, context: ssl.SSLContext | None, server_hostname: str | None = None,
                 before_request: Callable[[], None] | None = None):
        parts = urlsplit(url)
        self.tls = parts.scheme == "https"
        self.host = parts.hostname or "localhost"
        self.port = parts.port or (443 if self.tls else 80)
        self.prefix = f"{parts.scheme}://{parts.netloc}"
        self.host_header = parts.netloc.encode()
        self.context = context
        self.server_hostname = server_hostname or self.host
        self.before_request = before_request
        self._idle: list[_Conn] = []
        self._lock = threading.Lock()

    @classmethod
    def from_configuration(cls, cfg: Any, before_request: Callable[[], None] | None = None) -> Http1:
        """The server, CA, client certificate and TLS server name of a `kubernetes.client.Configuration`."""
        context = None
        if str(cfg.host).startswith("https"):
            context = ssl.create_default_context(cafile=cfg.ssl_ca_cert or None, cadata=cfg.ca_cert_data or None)
            if cfg.cert_file:
                context.load_cert_chain(cfg.cert_file, cfg.key_file or None)
            if not cfg.verify_ssl or cfg.assert_hostname is False:
                context.check_hostname = False
            if not cfg.verify_ssl:
                context.verify_mode = ssl.CERT_NONE
        return cls(cfg.host, context, cfg.tls_server_name or None, before_request)

    def path_of(self, url: str) -> str:
        """The request target of a full URL on this server (the official client builds every URL on it)."""
        if not url.startswith(self.prefix):
            raise ValueError(f"{url} is not on {self.prefix}")
        return url[len(self.prefix):] or "/"

    # ---- connections -----------------------------------------------------------------------------------------
    def _connect(self, timeout: float) -> _Conn:
        try:
            sock = socket.create_connection((self.host, self.port), timeout=timeout)
        except TimeoutError:
            raise
        except OSError as exc:
            raise ConnectionError(f"{self.host}:{self.port}: cannot connect: {exc}") from exc
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.context is not None:
            try:
                sock = self.context.wrap_socket(sock, server_hostname=self.server_hostname)
            except ssl.SSLError as exc:
                sock.close()
                raise ConnectionError(f"{self.host}:{self.port}: TLS handshake failed: {exc}") from exc
            except BaseException:
                sock.close()
                raise
        return _Conn(sock)

    def _checkout(self) -> _Conn | None:
        now = time.monotonic()
        with self._lock:
            while self._idle:
                conn = self._idle.pop()
                if now - conn.used < IDLE_SECONDS:
                    return conn
                conn.close()
        return None

    def _checkin(self, conn: _Conn) -> None:
        conn.used = time.monotonic()
        with self._lock:
            if len(self._idle) < MAX_IDLE:
                self._idle.append(conn)
                return
        conn.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    # ---- requests --------------------------------------------------------------------------------------------
    def request(self, method: str, target: str, headers: Mapping[str, str], body: bytes | None,
                timeout: float) -> Response:
        if self.before_request is not None:
            self.before_request()
        head = [f"{method} {target} HTTP/1.1\r\nHost: ".encode(), self.host_header, b"\r\n"]
        head += [f"{k}: {v}\r\n".encode() for k, v in headers.items()]
        if body is not None or method in ("POST", "PUT", "PATCH"):
            head.append(f"Content-Length: {len(body or b'')}\r\n".encode())
        head.append(b"\r\n")
        message = b"".join(head) + (body or b"")
        deadline = time.monotonic() + timeout
        conn = self._checkout()
        if conn is not None:
            try:
                return self._exchange(conn, method, message, deadline)
            except _BrokenConnectionError:
                pass  # closed by the server while idle: the request never got there; send it on a new one
        conn = self._connect(max(0.001, deadline - time.monotonic()))
        return self._exchange(conn, method, message, deadline)

    def _exchange(self, conn: _Conn, method: str, message: bytes, deadline: float) -> Response:
        try:
            conn.sock.settimeout(max(0.001, deadline - time.monotonic()))
            try:
                conn.sock.sendall(message)
            except (BrokenPipeError, ConnectionResetError) as exc:
                raise _BrokenConnectionError(str(exc)) from exc
            response, keep = self._read(conn, method, deadline)
        except BaseException:
            conn.close()
            raise
        if keep:
            self._checkin(conn)
        else:
            conn.close()
        return response

    def _recv(self, conn: _Conn, deadline: float) -> bytes:
        # Past the deadline, what has arrived is still read (a process paused by SIGSTOP or a long GC wakes with
        # the answer in the socket: it must see that answer, not a timeout); only an empty socket times out.
        conn.sock.settimeout(max(0.001, deadline - time.monotonic()))
        return conn.sock.recv(262144)

    def _read(self, conn: _Conn, method: str, deadline: float) -> tuple[Response, bool]:
        buf = conn.buf
        conn.buf = b""
        while (end := buf.find(b"\r\n\r\n")) < 0:
            try:
                chunk = self._recv(conn, deadline)
            except ConnectionResetError as exc:
                if not buf:
                    raise _BrokenConnectionError(str(exc)) from exc
                raise
            if not chunk:
                if not buf:
                    raise _BrokenConnectionError("the connection closed before the answer")
                raise ConnectionError("the connection closed inside the answer's headers")
            buf += chunk
            if len(buf) > MAX_HEADER_BYTES:
                raise ConnectionError("the answer's headers are too long")
        lines = buf[:end].decode("latin-1").split("\r\n")
        buf = buf[end + 4:]
        version, _, rest = lines[0].partition(" ")
        status = int(rest[:3])
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        keep = version == "HTTP/1.1" and headers.get("connection", "").lower() != "close"
        if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
            data = b""
        elif "chunked" in headers.get("transfer-encoding", "").lower():
            data, buf = self._chunked(conn, buf, deadline)
        elif "content-length" in headers:
            size = int(headers["content-length"])
            parts, have = [buf], len(buf)
            while have < size:
                chunk = self._recv(conn, deadline)
                if not chunk:
                    raise ConnectionError("the connection closed inside the answer")
                parts.append(chunk)
                have += len(chunk)
            whole = b"".join(parts)
            data, buf = whole[:size], whole[size:]
        else:  # no length: the body runs to the end of the connection
            parts = [buf]
            while chunk := self._recv(conn, deadline):
                parts.append(chunk)
            data, buf, keep = b"".join(parts), b"", False
        conn.buf = buf
        return Response(status, headers, data), keep

    def _chunked(self, conn: _Conn, buf: bytes, deadline: float) -> tuple[bytes, bytes]:
        """The chunks' data, and what follows the last chunk. `at` walks `buf`, which is only cut when more is
        read (a page of a list is a few MB in many small chunks: slicing at each one would copy it over and over)."""
        parts: list[bytes] = []
        at = 0
        while True:
            while (eol := buf.find(b"\r\n", at)) < 0:
                buf, at = buf[at:] + self._more(conn, deadline), 0
            size = int(buf[at:eol].split(b";", 1)[0], 16)
            at = eol + 2
            if size == 0:  # the last chunk, then trailers (none from the apiserver) and an empty line
                while (end := buf.find(b"\r\n", at)) != at:
                    if end > at:
                        at = end + 2
                    else:
                        buf, at = buf[at:] + self._more(conn, deadline), 0
                return b"".join(parts), buf[at + 2:]
            while len(buf) - at < size + 2:
                buf, at = buf[at:] + self._more(conn, deadline), 0
            parts.append(buf[at:at + size])
            at += size + 2

    def _more(self, conn: _Conn, deadline: float) -> bytes:
        chunk = self._recv(conn, deadline)
        if not chunk:
            raise ConnectionError("the connection closed inside a chunked answer")
        return chunk
