"""Layer `cache`: one thread per kind lists and watches it as raw JSON and keeps the latest objects in `Stores`.

A list is paged, its pages fetched ahead of their decoding (scheduler/cache/pages.py); a watch that fails is
retried with backoff, and a watch position the apiserver no longer has (410 Gone) is relisted. Pods are read
(`ParseCache.preparse`) on these threads as they arrive.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator

import urllib3

from scheduler.api.convert import key_of
from scheduler.api.objects import MutableObj
from scheduler.cache.kube import Kube, KubeError, loads
from scheduler.cache.pages import Pages
from scheduler.cache.parse import ParseCache
from scheduler.cache.slim import Slimmer, same_but_version
from scheduler.cache.store import STORAGE_KINDS, Journaled, Stores, Watched, trim
from scheduler.retry import Backoff, Outage

log = logging.getLogger("volcano_py.cache")


class GoneError(Exception):
    """The watch position is too old (410): relist."""


HOLD_MAX = 10.0  # seconds the first pod list may wait for the first cycle on a partial view


class Watcher:
    def __init__(
        self, kube: Kube, stores: Stores, parser: ParseCache, stop: threading.Event, *, watch_timeout: int,
        page_size: int, prefetched: dict[str, Pages] | None = None,
    ):
        self.kube = kube
        self.stores = stores
        self.parser = parser
        # Another scheduler's pod is stored as the part of it the scheduler reads (cache/slim.py)
        slimmer = Slimmer(parser.scheduler_names if parser is not None else frozenset())
        self.slim = slimmer.slim if parser is not None else _whole
        self.slim_node = slimmer.node  # and a node as the part of it the scheduler reads
        self._stop = stop
        self.watch_timeout = watch_timeout
        self.page_size = page_size
        self.prefetched = dict(prefetched or {})  # path -> a first list already under way
        self.threads: list[threading.Thread] = []
        self.outage = Outage(log)
        # called (on the pod watch's thread) when a pending pod of ours is added: the loop's early cycle
        self.on_pending: Callable[[], None] | None = None
        # Cleared while the first cycle on a partial view runs (cache/first_view.py): the full pod list is fetched
        # meanwhile but decoded after it, so that cycle has the interpreter to itself; HOLD_MAX at most.
        self.pods_released = threading.Event()
        self.pods_released.set()

    def start(self) -> None:
        for w in self.stores.watched:
            t = threading.Thread(target=self._run, args=(w,), name=f"watch-{w.kind}", daemon=True)
            t.start()
            self.threads.append(t)

    def close_prefetched(self) -> None:
        """At shutdown: stop the early lists no watch thread took."""
        for pages in list(self.prefetched.values()):  # a watch thread may be taking one meanwhile
            pages.close()

    def _run(self, w: Watched) -> None:
        backoff = Backoff(0.2, 30.0)  # jittered: the kinds' threads do not retry in lockstep (scheduler/retry.py)
        while not self._stop.is_set():
            try:
                if w.resource_version is None:
                    self._list(w)
                    self.outage.recovered()
                self._watch(w)
                backoff.reset()
            except GoneError:
                log.info("watch %s: resourceVersion too old, relisting", w.kind)
                w.resource_version = None
            except Exception as exc:  # any I/O error: back off and retry, never die
                log.debug("watch %s failed", w.kind, exc_info=True)
                if self._stop.is_set():
                    return
                if isinstance(exc, KubeError) and exc.status == 410:
                    w.resource_version = None
                    continue
                if w.optional and isinstance(exc, KubeError) and exc.status in (403, 404):
                    if exc.status == 403 and not w.synced.is_set():
                        log.warning("may not list %s (%s): going on without them; the scheduler's ClusterRole "
                                    "should allow it (manifests/01-rbac-scheduler.yaml)", w.kind, exc)
                    w.synced.set()  # the CRD is not installed, or not readable: nothing to watch; look again later
                    self._stop.wait(60.0)
                    continue
                delay = backoff.next()
                if isinstance(exc, OSError | urllib3.exceptions.HTTPError):  # no answer: one warning for all kinds
                    self.outage.failed(f"watch {w.kind}", exc, delay)
                else:  # the apiserver answered, with an error about this kind
                    log.warning("watch %s failed (retrying in %.1fs): %s", w.kind, delay, exc)
                self._stop.wait(delay)

    def _list(self, w: Watched) -> None:
        pods, nodes = w is self.stores.pods, w is self.stores.nodes
        if pods:
            # Pods are parsed as they arrive, with the priority classes: list those first (a small list).
            self.stores.priority_classes.synced.wait(10.0)
            self.pods_released.wait(HOLD_MAX)
        objects = Journaled()
        meta: MutableObj = {}
        scope = self.stores.pod_scope if pods else None
        for page in self._pages(w.path):
            for obj in page.get("items") or ():
                if scope is not None and not scope.keeps(obj):  # another scheduler's, outside the scope
                    scope.dropped += 1
                    continue
                trim(obj)
                key = key_of(obj)
                if pods:
                    obj = self.slim(obj)
                    self.parser.preparse(obj, key)
                elif nodes:
                    obj = self.slim_node(obj)
                dict.__setitem__(objects, key, obj)  # (no journal for a list: it is a new dict)
            meta = page.get("metadata") or {}
        with self.stores.lock:
            w.objects = objects
            w.listed = True
            if pods:  # a bind the list shows needs its assumption no more (no older event follows a list)
                assumed = self.stores.assumed
                for key in [key for key in assumed if _node_name(objects.get(key) or {})]:
                    del assumed[key]
            if w is self.stores.priority_classes:
                self.parser.priority_classes_changed(w.objects.values())
            if w.kind in STORAGE_KINDS:
                self.stores.storage_version += 1
        w.resource_version = str(meta.get("resourceVersion") or "")
        w.synced.set()
        if w.on_event is not None:
            for obj in objects.values():
                self._tell(w, "ADDED", obj)
        log.debug("listed %d %s at resourceVersion %s", len(objects), w.kind, w.resource_version)

    def _pages(self, path: str) -> Iterator[MutableObj]:
        """The list's pages, fetched ahead of this thread (scheduler/cache/pages.py); the first list of a kind
        the process started before its cache existed (`prefetched`) takes those pages."""
        early = self.prefetched.pop(path, None)
        return iter(early if early is not None else Pages(self.kube, path, self.page_size).start())

    def _watch(self, w: Watched) -> None:
        query = {
            "watch": "1",
            "resourceVersion": w.resource_version or "",
            "allowWatchBookmarks": "true",
            "timeoutSeconds": self.watch_timeout,
        }
        skipped: bytes | None = None  # the last event read and not decoded (cache/scope.py `PodScope.skips`)
        try:
            for line in self.kube.stream_lines(w.path, query, read_timeout=self.watch_timeout + 15):
                if self._stop.is_set():
                    return
                if self.outage.failing:
                    self.outage.recovered()
                skipped = line if self._on_line(w, line) else None
        finally:
            if skipped is not None:  # where the watch goes on from: that event's resourceVersion, decoded now
                self._resume_after(w, skipped)

    def _on_line(self, w: Watched, line: bytes) -> bool:
        """One event of the watch, as the line the server sent; whether it was skipped undecoded (`PodScope.skips`:
        another scheduler's pod bound outside this replica's scope, or the delete of a pod the store does not hold;
        `w.resource_version` is not moved past it, `_resume_after` does that when the stream ends)."""
        if w is self.stores.pods and (scope := self.stores.pod_scope) is not None and scope.skips(line, w.objects):
            scope.skipped += 1
            return True
        event = loads(line)
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            if obj.get("code") == 410:
                raise GoneError()
            raise RuntimeError(f"watch error: {obj.get('message')}")
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        if kind != "BOOKMARK":
            self._on_event(w, str(kind), obj)
        if rv:
            w.resource_version = str(rv)
        return False

    @staticmethod
    def _resume_after(w: Watched, line: bytes) -> None:
        """The watch resumes after the last event it read, one it skipped: its resourceVersion. A line that does
        not decode leaves the position where it was (the events since are sent again: each is read as before)."""
        try:
            event = loads(line)
            rv = event["object"]["metadata"]["resourceVersion"]
        except (ValueError, KeyError, TypeError):
            return
        if rv and type(rv) is str:
            w.resource_version = rv

    def _on_event(self, w: Watched, kind: str, obj: MutableObj) -> None:
        trim(obj)
        key = key_of(obj)
        pods, nodes = w is self.stores.pods, w is self.stores.nodes
        if pods and kind != "DELETED" and (scope := self.stores.pod_scope) is not None and not scope.keeps(obj):
            scope.dropped += 1  # another scheduler's pod outside this replica's scope: a copy held goes (scope.py)
            kind = "DELETED"
        if nodes and kind != "DELETED":
            obj = self.slim_node(obj)
        elif pods and kind != "DELETED":
            obj = self.slim(obj)
            self.parser.preparse(obj, key)  # here, on the watch thread, not in the next cycle's snapshot
            if (kind == "ADDED" and self.on_pending is not None and self._pending_ours(obj)
                    and not self.parser.is_light(key)):  # (read light: another active replica's job)
                self.on_pending()
        with self.stores.lock:
            if kind == "DELETED":
                w.objects.pop(key, None)
                if pods:
                    self.stores.assumed.pop(key, None)
                    self.parser.forget(key)
            elif nodes and same_but_version(w.objects.get(key), obj):
                pass  # a heartbeat (or its images): the store keeps the node it has, and no snapshot rebuilds it
            else:
                w.objects[key] = obj
                if pods and _node_name(obj):
                    self.stores.assumed.pop(key, None)
            if w is self.stores.priority_classes:
                self.parser.priority_classes_changed(w.objects.values())
            elif w.kind in STORAGE_KINDS:
                self.stores.storage_version += 1
        if w.on_event is not None:
            self._tell(w, kind, obj)

    def _tell(self, w: Watched, kind: str, obj: MutableObj) -> None:
        """The kind's hook (`Watched.on_event`), after the store holds the object: a fault in it is logged and costs
        neither the watch nor the other objects."""
        assert w.on_event is not None
        try:
            w.on_event(kind, obj)
        except Exception:
            log.exception("watch %s: the hook for an event failed (the object is stored)", w.kind)

    def _pending_ours(self, obj: MutableObj) -> bool:
        spec = obj.get("spec")
        if not isinstance(spec, dict) or _node_name(obj):
            return False
        name = spec.get("schedulerName", "default-scheduler")
        return isinstance(name, str) and name in self.parser.scheduler_names


def _whole(obj: MutableObj) -> MutableObj:
    return obj


def _node_name(pod: MutableObj) -> bool:
    """The pod names a node. A spec that is not an object (which the apiserver never sends, but a watch of
    anything else might) names none, rather than stopping the watch thread."""
    spec = pod.get("spec")
    return isinstance(spec, dict) and bool(spec.get("nodeName"))
