"""Layer `cache`: a paged list (`limit`/`continue`), its pages fetched ahead of their reader on a thread of their own.

The fetcher reads each page's continue token from the head of the raw response and asks for the next page at
once, so the apiserver encodes page after page while the reader decodes them. It can start before its reader
exists: the scheduler starts the pod and node lists (`prefetch`) before it imports its framework, so the apiserver's
work on the two large lists overlaps the process's start-up (issue 20's restart). Nothing here imports more than
the transport, for that reason.
"""

from __future__ import annotations

import logging
import queue
import re
import threading
from collections.abc import Iterator
from typing import Any

from scheduler.api.objects import MutableObj
from scheduler.cache.kube import TRANSPORT_ERRORS, Kube, loads

log = logging.getLogger("volcano_py.cache")

# The two lists that are large in a large cluster; the others are a few objects each.
PREFETCHED = ("/api/v1/pods", "/api/v1/nodes")
PAGE_SIZE = 1000  # the objects per page of every list (ClusterCache's default)
AHEAD = 32  # pages held ahead of the reader: 32 x 1,000 pods is ~50 MB of JSON at most, at start-up only
_END = object()


class Pages:
    """Iterate once: the decoded pages of one list, in order. A fetch that fails raises from the iteration (the
    watch loop retries the list); a page whose real continue token is not the one read from its head (never
    seen: tokens are base64) stops the fetcher, and the rest is fetched one page at a time from the real one."""

    def __init__(self, kube: Kube, path: str, page_size: int, *, ahead: int = AHEAD):
        self.kube = kube
        self.path = path
        self.page_size = page_size
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=ahead)
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._fetch, name=f"list-pages{path.replace('/', '-')}", daemon=True)

    def start(self) -> Pages:
        self._thread.start()
        return self

    def _get(self, token: str | None) -> bytes:
        query = {"limit": self.page_size, **({"continue": token} if token else {})}
        return self.kube.request_bytes("GET", self.path, query=query)

    def _put(self, item: Any) -> bool:
        while not self._stopped.is_set():
            try:
                self._queue.put(item, timeout=0.5)
                return True
            except queue.Full:
                continue
        return False

    def _fetch(self) -> None:
        token: str | None = None
        try:
            while not self._stopped.is_set():
                data = self._get(token)
                token = continue_token(data)
                if not self._put((data, token)) or token is None:
                    break
        except BaseException as exc:  # handed to the reader, who decides
            log.debug("listing pages stopped: %s", exc, exc_info=True)
            self._put(exc)
            return
        self._put(_END)

    def __iter__(self) -> Iterator[MutableObj]:
        try:
            while True:
                item = self._queue.get()
                if item is _END:
                    return
                if isinstance(item, BaseException):
                    raise item
                data, guess = item
                page = loads(data)
                real = (page.get("metadata") or {}).get("continue") or None
                yield page
                if real != guess:
                    self.close()
                    yield from self._one_by_one(real)
                    return
                if real is None:
                    return
        finally:
            self.close()

    def _one_by_one(self, token: str | None) -> Iterator[MutableObj]:
        while token:
            page = loads(self._get(token))
            token = (page.get("metadata") or {}).get("continue") or None
            yield page

    def close(self) -> None:
        """Stop fetching: a page in flight is dropped, a fetcher waiting for room in the queue sees it within
        half a second (`_put`)."""
        self._stopped.set()


def prefetch(kube: Kube, page_size: int) -> dict[str, Pages]:
    """Start the large lists now, on the Kube the cache will use (`ClusterCache(kube=...)`)."""
    return {path: Pages(kube, path, page_size).start() for path in PREFETCHED}


_CONTINUE = re.compile(rb'"continue":"([^"]*)"')


def continue_token(data: bytes) -> str | None:
    """The list's continue token, read from the head of the raw response: the list's own metadata is the
    first `"metadata":{...}` and holds no nested object."""
    start = data.find(b'"metadata":{', 0, 4096)
    end = data.find(b"}", start) if start >= 0 else -1
    match = _CONTINUE.search(data, start, end) if end >= 0 else None
    return (match.group(1).decode() or None) if match else None  # an empty token, as none: the last page


class EarlyList:
    """One unpaged list (a field-selected few objects), requested on a thread of its own as soon as it is made:
    our schedulers' pods, for the first cycle on a partial view (`cache/first_view.py`)."""

    def __init__(self, kube: Kube, path: str, query: dict[str, str]):
        self._done = threading.Event()
        self._data: bytes | Exception = b""
        self._thread = threading.Thread(target=self._fetch, args=(kube, path, query), name="list-early",
                                        daemon=True)
        self._thread.start()

    def _fetch(self, kube: Kube, path: str, query: dict[str, str]) -> None:
        try:
            self._data = kube.request_bytes("GET", path, query=query)
        except TRANSPORT_ERRORS as exc:  # the reader goes without
            self._data = exc
        self._done.set()

    def items(self, timeout: float) -> list[MutableObj] | None:
        """The listed objects; None if the list failed or was not in within `timeout` seconds."""
        if not self._done.wait(max(0.0, timeout)) or isinstance(self._data, Exception):
            return None
        return list(loads(self._data).get("items") or [])


def prefetch_ours(kube: Kube, scheduler_names: list[str] | tuple[str, ...]) -> list[EarlyList]:
    """Start the lists of our schedulers' pods (one field selector each: a field selector cannot OR values)."""
    return [EarlyList(kube, PREFETCHED[0], {"fieldSelector": f"spec.schedulerName={name}"})
            for name in sorted(set(scheduler_names))]
