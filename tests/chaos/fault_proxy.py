"""A fault-injecting reverse proxy between a Kubernetes client and the test harness's kube-apiserver (issue 22).

It listens on 127.0.0.1 with TLS, presenting the apiserver's own serving certificate (so a kubeconfig keeps its
CA and only changes `server`), and forwards every request over TLS to the apiserver with the admin client
certificate: the proxied client acts as admin, as the chaos suite's scheduler does anyway. HTTP/1.1 only, which
is what urllib3 (the scheduler) and aiohttp (kopf, the controllers) speak.

Rules match a verb and a path regex (and optionally the query string), in order; the first rule that matches and
still has faults left decides. `skip` lets the first matching requests through, `times` bounds how many it
faults. Actions:

- `Respond(status)`: a Kubernetes `Status` body (reason `Conflict`, `InternalError`, `TooManyRequests` with
  `Retry-After`, ...), the request never reaches the apiserver;
- `Delay(seconds)`: hold the request, then forward it; `Delay(seconds, after=True)`: forward it at once and hold
  the response (the apiserver did the work; the client may time out without knowing);
- `Hold(event)`: forward only once the test sets `event` (the test changes the world meanwhile);
- `Reset()`: abort the connection with a TCP RST, nothing forwarded;
- `CutWatch(events)`: forward a watch and abort it in the middle of event `events + 1`.

The proxy runs its own event loop in a thread; `add`, `remove` and the counters are safe to use from the test.
Each rule counts the requests it `matched` and the ones it `fired` on, and `seen` records every request with the
status the client got, so a test can assert that its fault really happened.
"""

from __future__ import annotations

import asyncio
import re
import socket
import ssl
import struct
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web

REASONS = {400: "BadRequest", 404: "NotFound", 409: "Conflict", 410: "Expired", 429: "TooManyRequests",
           500: "InternalError", 503: "ServiceUnavailable", 504: "Timeout"}
HOP_BY_HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
              "transfer-encoding", "upgrade", "host", "content-length", "accept-encoding"}


@dataclass(frozen=True)
class Respond:
    status: int
    message: str = "injected by the fault proxy"
    retry_after: int | None = None


@dataclass(frozen=True)
class Delay:
    seconds: float
    after: bool = False  # False: delay the request; True: forward at once, delay the response


@dataclass(frozen=True)
class Hold:
    release: threading.Event
    timeout: float = 60.0


@dataclass(frozen=True)
class Reset:
    pass


@dataclass(frozen=True)
class CutWatch:
    events: int


Action = Respond | Delay | Hold | Reset | CutWatch


@dataclass
class Rule:
    method: str | None  # None: any verb
    path: str  # a regex, searched in the path (without the query)
    action: Action
    query: str | None = None  # a regex searched in the query string
    skip: int = 0  # let this many matching requests through first
    times: int | None = None  # fault at most this many (None: every matching request after `skip`)
    matched: int = 0
    fired: int = 0
    _path: re.Pattern[str] = field(init=False, repr=False)
    _query: re.Pattern[str] | None = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._path = re.compile(self.path)
        self._query = re.compile(self.query) if self.query is not None else None

    def matches(self, method: str, path: str, query: str) -> bool:
        return ((self.method is None or self.method == method) and self._path.search(path) is not None
                and (self._query is None or self._query.search(query) is not None))


@dataclass(frozen=True)
class Seen:
    method: str
    path: str
    query: str
    status: int | None  # what the client got (None: reset); the apiserver's status when forwarded
    action: str  # "forward" or the fault's class name
    at: float  # time.monotonic()


class Rules:
    """The rule list and its counters, behind one lock (the proxy's loop and the test's thread share it)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.rules: list[Rule] = []
        self.seen: list[Seen] = []
        self.cuts = 0  # watches cut by `CutWatch` (a rule fires when the watch starts, the cut comes later)

    def add(self, rule: Rule) -> Rule:
        with self.lock:
            self.rules.append(rule)
        return rule

    def remove(self, rule: Rule) -> None:
        with self.lock:
            if rule in self.rules:
                self.rules.remove(rule)

    def clear(self) -> None:
        """No rules, nothing seen."""
        with self.lock:
            self.rules.clear()
            self.seen.clear()
            self.cuts = 0

    def decide(self, method: str, path: str, query: str) -> Action | None:
        """The action for one request (None: forward it untouched); counts the match and the fault."""
        with self.lock:
            for rule in self.rules:
                if not rule.matches(method, path, query):
                    continue
                rule.matched += 1
                if rule.matched <= rule.skip or (rule.times is not None and rule.fired >= rule.times):
                    continue
                rule.fired += 1
                return rule.action
        return None

    def record(self, seen: Seen) -> None:
        with self.lock:
            self.seen.append(seen)

    def requests(self, method: str, path: str) -> list[Seen]:
        """The requests seen so far of this verb whose path matches the regex."""
        pattern = re.compile(path)
        with self.lock:
            return [s for s in self.seen if s.method == method and pattern.search(s.path)]


def status_body(status: int, message: str, retry_after: int | None = None) -> dict[str, Any]:
    """The `Status` object the apiserver sends with an error (metav1.Status)."""
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                            "message": message, "reason": REASONS.get(status, "Unknown"), "code": status}
    if retry_after is not None:
        body["details"] = {"retryAfterSeconds": retry_after}
    return body


def _reset(request: web.Request) -> None:
    """Abort the client's connection with a RST (SO_LINGER 0), as a dropped connection looks to the client."""
    transport = request.transport
    if transport is None:
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


class FaultProxy(Rules):
    """`with FaultProxy(upstream, ...) as proxy:` serves on `proxy.url` until the block ends."""

    def __init__(self, upstream: str, *, ca: str, client_cert: str, client_key: str, serving_cert: str,
                 serving_key: str):
        super().__init__()
        self.upstream = upstream.rstrip("/")
        self._client_ctx = ssl.create_default_context(cafile=ca)
        self._client_ctx.load_cert_chain(client_cert, client_key)
        self._server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._server_ctx.load_cert_chain(serving_cert, serving_key)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="fault-proxy", daemon=True)
        self._session: aiohttp.ClientSession | None = None
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def __enter__(self) -> FaultProxy:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(30)
        return self

    def __exit__(self, *exc: object) -> None:
        self.clear()
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    async def _start(self) -> None:
        connector = aiohttp.TCPConnector(ssl=self._client_ctx, limit=0)
        self._session = aiohttp.ClientSession(connector=connector, auto_decompress=False,
                                              timeout=aiohttp.ClientTimeout(total=None, sock_read=None))
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=self._server_ctx)
        await site.start()
        self.port = self._runner.addresses[0][1]

    async def _stop(self) -> None:
        if self._session is not None:
            await self._session.close()  # first: ends the watches still streaming from the apiserver
        if self._runner is not None:
            await self._runner.cleanup()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        method, path, query = request.method, request.path, request.query_string
        action = self.decide(method, path, query)

        def seen(status: int | None, what: str = "forward") -> None:
            self.record(Seen(method, path, query, status, what, time.monotonic()))

        name = type(action).__name__ if action is not None else "forward"
        if isinstance(action, Respond):
            seen(action.status, name)
            headers = {"Retry-After": str(action.retry_after)} if action.retry_after is not None else None
            return web.json_response(status_body(action.status, action.message, action.retry_after),
                                     status=action.status, headers=headers)
        if isinstance(action, Reset):
            seen(None, name)
            _reset(request)
            return web.Response(status=500)  # never sent: the connection is gone
        body = await request.read()  # first: the client may give up while the request is held
        if isinstance(action, Delay) and not action.after:
            await asyncio.sleep(action.seconds)  # forwarded even if the client is gone: a request late in transit
        if isinstance(action, Hold):
            await asyncio.get_running_loop().run_in_executor(None, action.release.wait, action.timeout)
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        assert self._session is not None
        try:
            upstream = await self._session.request(method, f"{self.upstream}{request.rel_url}", data=body or None,
                                                   headers=headers)
        except aiohttp.ClientError as exc:
            seen(502, name)
            return web.json_response(status_body(502, f"fault proxy: upstream unreachable: {exc}"), status=502)
        async with upstream:
            out_headers = {k: v for k, v in upstream.headers.items() if k.lower() not in HOP_BY_HOP}
            seen(upstream.status, name)
            if upstream.headers.get("Content-Length") is not None and not isinstance(action, CutWatch):
                data = await upstream.read()
                if isinstance(action, Delay):  # after=True: the apiserver has answered; the client waits
                    await asyncio.sleep(action.seconds)
                return web.Response(body=data, status=upstream.status, headers=out_headers)
            return await self._stream(request, upstream, out_headers, action)

    async def _stream(self, request: web.Request, upstream: aiohttp.ClientResponse, headers: dict[str, str],
                      action: Action | None) -> web.StreamResponse:
        """A chunked response (a watch): forwarded line by line; `CutWatch` aborts it inside an event."""
        response = web.StreamResponse(status=upstream.status, headers=headers)
        await response.prepare(request)
        limit = action.events if isinstance(action, CutWatch) else None
        events = 0
        try:
            while line := await upstream.content.readline():
                if limit is not None and events >= limit:
                    await response.write(line[: max(1, len(line) // 2)])  # half an event, then the cut
                    _reset(request)
                    with self.lock:
                        self.cuts += 1
                    return response
                await response.write(line)
                events += line.endswith(b"\n")
            await response.write_eof()
        except (ConnectionResetError, aiohttp.ClientConnectionError):
            pass  # the client went away (its watch timed out or was closed)
        except aiohttp.ClientError:
            _reset(request)  # the apiserver's side broke off (e.g. restarted): so does the client's
        return response


def proxy_for(control_plane: Any, workdir: Any) -> tuple[FaultProxy, Any]:
    """A proxy in front of the harness's apiserver, and a kubeconfig (in `workdir`) that points to it."""
    import base64

    import yaml

    config = yaml.safe_load(control_plane.kubeconfig.read_text())
    user = config["users"][0]["user"]
    cert, key = workdir / "proxy-client.crt", workdir / "proxy-client.key"
    cert.write_bytes(base64.b64decode(user["client-certificate-data"]))
    key.write_bytes(base64.b64decode(user["client-key-data"]))
    key.chmod(0o600)
    proxy = FaultProxy(control_plane.server, ca=str(control_plane.serving_ca.crt), client_cert=str(cert),
                       client_key=str(key), serving_cert=str(control_plane.serving_crt),
                       serving_key=str(control_plane.serving_key))
    proxy.__enter__()
    config["clusters"][0]["cluster"]["server"] = proxy.url
    kubeconfig = workdir / "proxied.kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(config))
    kubeconfig.chmod(0o600)
    return proxy, kubeconfig
