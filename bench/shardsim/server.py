"""The simulated apiserver's HTTP/1.1 front (plain TCP on loopback, JSON only): routes each request to the store,
streams watches, and charges each request its calibrated cost to the replica that sent it (known by its bearer
token). A protobuf body is refused with 415, as a server that does not take protobuf answers, and the scheduler's
client sends JSON from then on (scheduler/cache/kube.py).

Also `/sim/...`, the harness's own endpoints (no Kubernetes API): `/sim/replicas` (POST {token: pid}),
`/sim/stats`, `/sim/check`.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import orjson

from shardsim.accounting import Accounting
from shardsim.selectors import SelectorError, parse_selector
from shardsim.store import ApiError, Kind, Store

PROTOBUF = "application/vnd.kubernetes.protobuf"
MAX_BODY = 16 << 20


class Request:
    __slots__ = ("method", "path", "query", "headers", "body")

    def __init__(self, method: str, path: str, query: dict[str, str], headers: dict[str, str], body: bytes):
        self.method, self.path, self.query, self.headers, self.body = method, path, query, headers, body


def _date() -> str:
    return email.utils.formatdate(usegmt=True)


def parse_path(path: str) -> tuple[str, list[str]]:
    """(groupVersion, the segments after it) of an API path; ValueError for anything else."""
    segs = [unquote(s) for s in path.strip("/").split("/")]
    if len(segs) >= 2 and segs[0] == "api" and segs[1] == "v1":
        return "v1", segs[2:]
    if len(segs) >= 3 and segs[0] == "apis":
        return f"{segs[1]}/{segs[2]}", segs[3:]
    raise ValueError(path)


class Server:
    def __init__(self, store: Store, accounting: Accounting, extra: dict[str, Callable[[Request], Any]] | None = None,
                 watch_delay: float = 0.0, bind_cap: float = 0.0):
        self.store = store
        self.watch_delay = watch_delay  # seconds between a write and its watch event (wall-clock)
        # binds per wall second the server takes at most (0: no cap): a bind beyond it waits its turn, as
        # kube-apiserver's priority and fairness queues a request over its level's share (never refused here:
        # APF's 429 when its queues are full is not modelled)
        self.bind_cap = bind_cap
        self._next_bind = 0.0  # the wall time (monotonic) of the next free bind slot
        self.acct = accounting
        self.extra = extra or {}
        self.stopping = asyncio.Event()

    # ---- HTTP ---------------------------------------------------------------------------------------------------
    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, target, _ = lines[0].split(" ", 2)
                headers = {}
                for line in lines[1:]:
                    if line:
                        name, _, value = line.partition(":")
                        headers[name.strip().lower()] = value.strip()
                size = int(headers.get("content-length") or 0)
                if size > MAX_BODY:
                    await self._send(writer, 413, b'{"message":"too large"}')
                    return
                body = await reader.readexactly(size) if size else b""
                url = urlsplit(target)
                query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
                req = Request(method, url.path, query, headers, body)
                if method == "GET" and query.get("watch") in ("1", "true"):
                    await self._watch(req, writer)
                    continue
                if self.bind_cap > 0 and method == "POST" and url.path.endswith("/binding"):
                    await self._bind_turn()
                status, data = self.dispatch(req)
                await self._send(writer, status, data)
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    async def _bind_turn(self) -> None:
        """Wait for this bind's slot: slots are 1/bind_cap apart, in the order binds arrive."""
        now = time.monotonic()
        turn = max(self._next_bind, now)
        self._next_bind = turn + 1.0 / self.bind_cap
        if turn > now:
            await asyncio.sleep(turn - now)

    async def _send(self, writer: asyncio.StreamWriter, status: int, data: bytes) -> None:
        writer.write(f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nDate: {_date()}\r\n"
                     f"Content-Length: {len(data)}\r\n\r\n".encode() + data)
        await writer.drain()

    # ---- requests -----------------------------------------------------------------------------------------------
    def replica(self, req: Request) -> str:
        auth = req.headers.get("authorization", "")
        return auth[7:] if auth.startswith("Bearer ") else ""

    def dispatch(self, req: Request) -> tuple[int, bytes]:
        if req.path.startswith("/sim/"):
            handler = self.extra.get(req.path[5:])
            if handler is None:
                return 404, b'{"message":"no such endpoint"}'
            return 200, orjson.dumps(handler(req))
        who = self.replica(req)
        self.store.writer = who
        try:
            if req.method in ("POST", "PUT", "PATCH") and req.headers.get("content-type", "").startswith(PROTOBUF):
                raise ApiError(415, "UnsupportedMediaType", f"the body type {PROTOBUF} is not supported here")
            status, data, cost_key, items = self._route(req)
        except ApiError as exc:
            self.acct.charge(who, "error", 0, exc.code)
            return exc.code, exc.body()
        self.acct.charge(who, cost_key, items, status)
        return status, data

    def _body(self, req: Request) -> Any:
        try:
            return orjson.loads(req.body)
        except orjson.JSONDecodeError:
            raise ApiError(400, "BadRequest", "the body is not JSON") from None

    def _target(self, req: Request) -> tuple[Kind, str, str, str]:
        """(kind, namespace, name, subresource) of a request path."""
        try:
            gv, rest = parse_path(req.path)
        except ValueError:
            raise ApiError(404, "NotFound", f"the server could not find the requested resource ({req.path})") from None
        namespace = ""
        if len(rest) >= 3 and rest[0] == "namespaces" and (gv, rest[2]) in self.store.by_resource:
            namespace, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3:
            raise ApiError(404, "NotFound", f"the server could not find the requested resource ({req.path})")
        kind = self.store.kind(gv, rest[0])
        return kind, namespace, rest[1] if len(rest) > 1 else "", rest[2] if len(rest) > 2 else ""

    def _route(self, req: Request) -> tuple[int, bytes, str, int]:
        kind, namespace, name, sub = self._target(req)
        store, m = self.store, req.method
        if not name:
            if m == "GET":
                selector = self._selector(req, kind)
                try:
                    limit = int(req.query.get("limit") or 0)
                except ValueError:
                    raise ApiError(400, "BadRequest", "limit is not an integer") from None
                data, items = store.list(kind, namespace, selector, limit, req.query.get("continue", ""))
                return 200, data, "list", items
            if m == "POST":
                data = store.create(kind, namespace, self._body(req))
                return 201, data, "event" if kind.resource == "events" else "create", 0
            raise ApiError(405, "MethodNotAllowed", f"{m} is not allowed on a collection")
        if sub == "binding" and kind.resource == "pods" and m == "POST":
            store.bind(namespace, name, self._body(req))
            self.acct.bound(self.replica(req), f"{namespace}/{name}")
            return 201, b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success","code":201}', "bind", 0
        if sub not in ("", "status"):
            raise ApiError(404, "NotFound", f"{kind.resource}/{sub}: no such subresource")
        if sub == "status" and not kind.status_subresource:
            raise ApiError(404, "NotFound", f"{kind.resource} has no status subresource")
        write_key = f"{kind.resource}{'/status' if sub else ''}"
        if m == "GET":
            return 200, store.get(kind, namespace, name).data, "get", 0
        if m == "PUT":
            return 200, store.update(kind, namespace, name, self._body(req), sub), write_key, 0
        if m == "PATCH":
            ctype = req.headers.get("content-type", "").split(";")[0].strip()
            return 200, store.patch(kind, namespace, name, ctype, self._body(req), sub), write_key, 0
        if m == "DELETE" and not sub:
            options = self._body(req) if req.body else None
            preconditions = options.get("preconditions") if isinstance(options, dict) else None
            return 200, store.delete(kind, namespace, name, preconditions), "delete", 0
        raise ApiError(405, "MethodNotAllowed", f"{m} is not allowed here")

    def _selector(self, req: Request, kind: Kind) -> Any:
        try:
            return parse_selector(req.query.get("labelSelector", ""), req.query.get("fieldSelector", ""),
                                  kind.resource)
        except SelectorError as exc:
            raise ApiError(400, "BadRequest", str(exc)) from None

    # ---- watches ------------------------------------------------------------------------------------------------
    async def _watch(self, req: Request, writer: asyncio.StreamWriter) -> None:
        who = self.replica(req)
        try:
            kind, namespace, name, sub = self._target(req)
            if name or sub:
                raise ApiError(404, "NotFound", "a watch is on a collection")
            selector = self._selector(req, kind)
            timeout = min(float(req.query.get("timeoutSeconds") or 1800), 3600.0)
        except (ApiError, ValueError) as exc:
            error = exc if isinstance(exc, ApiError) else ApiError(400, "BadRequest", str(exc))
            await self._send(writer, error.code, error.body())
            return
        if namespace:  # a namespaced watch: the namespace as a field
            selector = parse_selector(req.query.get("labelSelector", ""),
                                      ",".join(filter(None, [req.query.get("fieldSelector", ""),
                                                             f"metadata.namespace={namespace}"])), kind.resource)
        writer.write(f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nDate: {_date()}\r\n"
                     "Transfer-Encoding: chunked\r\n\r\n".encode())
        wake = asyncio.Event()
        callback = wake.set
        kind.watchers.add(callback)
        deadline = time.monotonic() + timeout
        self.acct.charge(who, "watch", 0, 200)
        try:
            rv = req.query.get("resourceVersion", "")
            if rv in ("", "0"):
                lines = self.store.initial_events(kind, namespace, selector)
                at = self.store.kind(kind.group_version, kind.resource).base + len(kind.log)
                await self._chunk(writer, lines, who)
            else:
                at = self.store.watch_start(kind, rv)
            while time.monotonic() < deadline and not self.stopping.is_set():
                wake.clear()
                first = kind.log[at - kind.base].at if 0 <= at - kind.base < len(kind.log) else None
                lines, at = self.store.watch_read(kind, at, selector, delay=self.watch_delay)
                if lines:
                    await self._chunk(writer, lines, who)
                    if first is not None:  # the oldest event read (sent or filtered out), once the socket drained
                        self.acct.lagged(who, kind.resource, time.monotonic() - first)
                    continue
                if self.watch_delay > 0 and at - kind.base < len(kind.log):  # written, not yet due
                    await asyncio.sleep(min(self.watch_delay, max(0.0, deadline - time.monotonic())))
                    continue
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wake.wait(), timeout=max(0.01, deadline - time.monotonic()))
        except ApiError as exc:  # too old a resourceVersion: the watch cache's ERROR event
            status = orjson.loads(exc.body())
            await self._chunk(writer, [b'{"type":"ERROR","object":' + orjson.dumps(status) + b"}\n"], who)
        finally:
            kind.watchers.discard(callback)
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    async def _chunk(self, writer: asyncio.StreamWriter, lines: list[bytes], who: str) -> None:
        data = b"".join(lines)
        self.acct.charge(who, "watch_event", len(lines), 200)
        writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        await writer.drain()


async def serve(server: Server, host: str, port: int, ready: Callable[[int], None] | None = None) -> None:
    srv = await asyncio.start_server(server.handle, host, port, limit=MAX_BODY, backlog=1024)
    bound = srv.sockets[0].getsockname()[1]
    if ready is not None:
        ready(bound)
    async with srv:
        await server.stopping.wait()
