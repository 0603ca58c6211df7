"""Layer `cache`: a thin raw-JSON client over the official client's authenticated connection pool.

The generated models are slow to build and drop fields they do not know, so every call here sends and
receives plain JSON. Authentication (bearer token or client certificate) and TLS come from the
`kubernetes.client.ApiClient` configuration.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import urllib3

from scheduler.api.objects import MutableObj
from scheduler.cache import protobuf as pb
from scheduler.cache.clock import ApiClock
from scheduler.cache.http1 import Http1

log = logging.getLogger("volcano_py.cache")

try:  # orjson parses pod lists 3-5x faster than json; optional, so a bare environment still works
    import orjson

    def loads(data: bytes | str) -> Any:
        return orjson.loads(data)

    def dumps(obj: Any) -> bytes:
        return orjson.dumps(obj)

except ImportError:  # pragma: no cover - depends on the environment

    def loads(data: bytes | str) -> Any:
        return json.loads(data)

    def dumps(obj: Any) -> bytes:
        return json.dumps(obj).encode()


def watch_lines(lines: Iterable[bytes]) -> Iterator[bytes]:
    """A watch's events, one line of JSON each, from the lines urllib3 cuts the response into (`HTTPResponse`'s
    iteration splits each chunk once and joins a line spread over chunks once: linear however many events the server
    packs into a chunk, as it does for a client that is behind; splitting off one line at a time, as this did
    before, copied the rest of the buffer per line, a fifth of a lagging replica's CPU). A last line the stream did
    not end is an event cut off: dropped; the watch resumes from the last resourceVersion it saw and is sent it
    again."""
    for line in lines:
        if line.endswith(b"\n") and line.strip():
            yield line


MAX_RETRIES = 10  # client-go's default maxRetries for a response that says Retry-After
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"


class KubeError(Exception):
    def __init__(self, status: int, method: str, path: str, body: bytes):
        self.status = status
        self.body = body
        message = body.decode("utf-8", "replace")
        try:
            decoded = loads(body)
        except ValueError:  # a non-JSON error body is shown as is
            decoded = None
        if isinstance(decoded, dict):
            message = str(decoded.get("message", message))
        super().__init__(f"{method} {path}: {status} {message}")


# What a call to the apiserver raises when it fails for a reason outside our code: an error status (KubeError), the
# network (OSError, urllib3's own errors) or an answer that is not JSON (ValueError; orjson's error is one). Callers
# that retry catch these; anything else is a bug, which the cycle's guard logs with its traceback.
TRANSPORT_ERRORS: tuple[type[Exception], ...] = (KubeError, OSError, urllib3.exceptions.HTTPError, ValueError)


def retry_after(status: int, header: str | None) -> float | None:
    """Seconds to wait before sending a request again, when the response says so (429 or 5xx with an integer
    `Retry-After`); None: not to be sent again."""
    if not (status == 429 or status >= 500) or header is None:
        return None
    try:
        seconds = int(header.strip())
    except ValueError:
        return None  # an HTTP date: the apiserver never sends one
    return float(max(0, seconds))


def lean_transport(api_client: Any) -> Http1 | None:
    """The lean HTTP/1.1 transport (scheduler/cache/http1.py) to the client's server, for a plain urllib3 pool
    (a client-side rate limit wrapping it, `before_request`, is kept); None for a proxy or anything else."""
    pool = getattr(getattr(api_client, "rest_client", None), "pool_manager", None)
    hook = getattr(pool, "before_request", None)
    before = hook if callable(hook) else None
    inner = getattr(pool, "inner", None) if before is not None else pool
    cfg = getattr(api_client, "configuration", None)
    if type(inner) is not urllib3.PoolManager or cfg is None:
        return None
    try:
        return Http1.from_configuration(cfg, before)
    except (OSError, ValueError):  # e.g. a CA file it cannot read: urllib3 will say what is wrong
        return None


class Kube:
    """Raw JSON calls: `request` for one response, `stream` for a watch."""

    def __init__(self, api_client: Any, *, request_timeout: float = 30.0,
                 local_clock: Callable[[], float] = time.time):
        self.api = api_client
        self.request_timeout = request_timeout
        # The apiserver's clock, read from its answers' Date headers: the cache's `now` (cache/clock.py).
        self.clock = ApiClock(local_clock)
        self._streams: set[Any] = set()
        self._streams_lock = threading.Lock()
        self._http1 = lean_transport(api_client)
        # Whether the server takes protobuf bodies (`request(..., protobuf=True)`): until it answers one with 415
        self.protobuf_ok = True

    def _payload(self, body: Any, content_type: str | None, proto: bool) -> tuple[str, bytes]:
        """The Content-Type and bytes of a body: protobuf when asked for, taken by the server and encodable (a
        Binding or an Event, cache/protobuf.py), JSON otherwise."""
        if proto and self.protobuf_ok and pb.ENABLED:
            try:
                return pb.CONTENT_TYPE, pb.encode(body)
            except pb.UnencodableError as exc:
                log.debug("sent as JSON: %s", exc)
        try:
            return content_type or "application/json", dumps(body)
        except TypeError as exc:  # orjson's JSONEncodeError (a lone surrogate, a key not a string): a ValueError,
            raise ValueError(f"the body has no JSON form: {exc}") from None  # as callers catch (TRANSPORT_ERRORS)

    def _prepare(
        self, method: str, path: str, query: Mapping[str, Any] | None, body: Any, content_type: str | None,
        proto: bool = False,
    ) -> tuple[str, dict[str, str], bytes | None]:
        """The full URL, the headers (auth included) and the payload of one request."""
        headers = {"Accept": "application/json"}
        payload = None
        if body is not None:
            headers["Content-Type"], payload = self._payload(body, content_type, proto)
        _, url, headers, _, _ = self.api.param_serialize(
            method,
            path,
            query_params=[(k, v) for k, v in (query or {}).items()],
            header_params=headers,
            auth_settings=["BearerToken"],
        )
        return url, headers, payload

    def _send(self, method: str, path: str, query: Mapping[str, Any] | None, body: Any, content_type: str | None,
              seconds: float, *, stream: bool = False, proto: bool = False) -> Any:
        """One request: over the lean transport (its answer read whole) unless it is a watch or there is none."""
        url, headers, payload = self._prepare(method, path, query, body, content_type, proto)
        if self._http1 is not None and not stream:
            return self._http1.request(method, self._http1.path_of(url), headers, payload, seconds)
        timeout = urllib3.Timeout(connect=min(10.0, self.request_timeout if stream else seconds), read=seconds)
        return self.api.rest_client.pool_manager.request(
            method, url, body=payload, headers=headers, timeout=timeout, preload_content=False
        )

    def close(self) -> None:
        """Close the lean transport's idle connections (the official client's pool closes with it)."""
        if self._http1 is not None:
            self._http1.close()

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str | None = None,
        timeout: float | None = None,
        protobuf: bool = False,
    ) -> MutableObj:
        """One call; `timeout` (seconds, default `request_timeout`) bounds the connect and the read. `protobuf`:
        the body (a Binding or an Event) goes as protobuf while the server takes it; the answer is JSON."""
        data = self.request_bytes(method, path, query=query, body=body, content_type=content_type, timeout=timeout,
                                  protobuf=protobuf)
        return loads(data) if data else {}

    def request_bytes(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str | None = None,
        timeout: float | None = None,
        protobuf: bool = False,
    ) -> bytes:
        """One call whose body the caller parses (or looks into first): the raw response bytes.

        A 429 (or 5xx) that carries `Retry-After` is sent again after that many seconds, up to MAX_RETRIES times
        and never past `timeout` from the first send, as client-go does (rest/request.go, `checkWait`: the
        apiserver's priority-and-fairness throttling says when to come back, and Volcano's binds go through it).
        """
        seconds = self.request_timeout if timeout is None else timeout
        deadline = time.monotonic() + seconds
        for attempt in range(MAX_RETRIES + 2):
            left = max(0.001, deadline - time.monotonic())
            clock = self.clock
            sent = clock.local()
            proto = protobuf and self.protobuf_ok
            resp = self._send(method, path, query, body, content_type, left, proto=proto)
            try:
                data: bytes = resp.data
            finally:
                resp.release_conn()
            received = clock.local()
            if clock.due(received):
                clock.observe(resp.headers.get("Date"), sent, received)
            if resp.status < 400:
                return data
            if resp.status == 415 and proto:  # Unsupported Media Type: this server (or a proxy) wants JSON
                self.protobuf_ok = False
                log.info("the API server refused a protobuf body (415): sending JSON from now on")
                continue
            wait = retry_after(resp.status, resp.headers.get("Retry-After"))
            if wait is None or attempt == MAX_RETRIES or time.monotonic() + wait >= deadline:
                break
            time.sleep(wait)  # the server said when; nothing else is waiting on this thread
        raise KubeError(resp.status, method, path, data)

    def delete(self, path: str, body: Mapping[str, Any] | None = None) -> bool:
        """DELETE an object; False when it was already gone (404)."""
        try:
            self.request("DELETE", path, body=body)
        except KubeError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def get_or_none(self, path: str) -> MutableObj | None:
        """GET an object; None when it does not exist (404)."""
        try:
            return self.request("GET", path)
        except KubeError as exc:
            if exc.status == 404:
                return None
            raise

    def stream(self, path: str, query: Mapping[str, Any], read_timeout: float) -> Iterator[MutableObj]:
        """The events of a watch, one dict each; ends when the server closes the stream."""
        for line in self.stream_lines(path, query, read_timeout):
            yield loads(line)

    def stream_lines(self, path: str, query: Mapping[str, Any], read_timeout: float) -> Iterator[bytes]:
        """The events of a watch, one line of JSON each, undecoded (the cache's pod watch reads some no further:
        cache/scope.py `PodScope.skips`); ends when the server closes the stream."""
        resp = self._send("GET", path, query, None, None, read_timeout, stream=True)
        with self._streams_lock:
            self._streams.add(resp)
        try:
            if resp.status >= 400:
                raise KubeError(resp.status, "GET", path, resp.data)
            yield from watch_lines(resp)
        finally:
            with self._streams_lock:
                self._streams.discard(resp)
            resp.release_conn()

    def close_streams(self) -> None:
        """Interrupt every open watch (at shutdown, so no thread waits for its watch to time out)."""
        with self._streams_lock:
            streams = list(self._streams)
        for resp in streams:
            # Already closed: the socket (OSError, HTTPError), or the watch ended between the copy above and here and
            # gave its connection back to the pool (urllib3 says so with a RuntimeError, or a ValueError when the
            # socket was never shut down): nothing is left to interrupt.
            with contextlib.suppress(OSError, urllib3.exceptions.HTTPError, RuntimeError, ValueError):
                resp.shutdown()
