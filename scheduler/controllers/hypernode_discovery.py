"""Layer `controllers`: HyperNode discovery from node labels, run by the Lease holder only.

The controllers' kopf handlers pass node and HyperNode events in (`on_node`, `on_hypernode`); one worker thread,
started when this replica leads (operator.run), re-reads the conf ConfigMap (hypernode_conf.py) every `poll`
seconds and, when the conf changed or a node's topology labels did or a HyperNode was deleted (Volcano's label
discoverer reacts to those: discovery/label/label.go AddNode/UpdateNode/DeleteNode/DeleteHyperNode), reconciles.

A reconcile reads every Node and HyperNode from the apiserver (never from a cache a former leader filled), works
out the writes (hypernode_model.py) and makes them. The same worker keeps every HyperNode's `status.nodeCount`
(hypernode_count.py): recounted when a HyperNode is added or changed, or a node comes, goes or is relabelled, and
written only when it differs. It is idempotent: run again on the same labels it writes
nothing, and a replica that takes the Lease over halfway through a reconcile finishes it, keeping the names the
first one already created (a label-made HyperNode is found again by its <key>=<value> label).
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import quote

import urllib3

from scheduler.api.objects import MutableObj
from scheduler.cache.kube import Kube, KubeError
from scheduler.controllers.configmap import entry_text
from scheduler.controllers.hypernode_conf import NO_DISCOVERY, ConfError, ConfigMapRef, DiscoveryConf, parse
from scheduler.controllers.hypernode_count import NodeCounts
from scheduler.controllers.hypernode_model import (
    NamingError,
    Plan,
    hypernode_view,
    node_view,
    plan,
    wanted,
)

log = logging.getLogger("volcano_py.controllers.hypernode")

HYPERNODES = "/apis/topology.volcano.sh/v1alpha1/hypernodes"
PAGE = 500
CONF_WATCH_SECONDS = 60  # each watch of the conf ConfigMap ends after this and is opened again
DEBOUNCE = 0.2  # node events come in bursts (a rack relabelled): one reconcile for the burst
_IO_ERRORS = (KubeError, OSError, urllib3.exceptions.HTTPError, ValueError)


class HyperNodeDiscovery:
    def __init__(self, kube: Kube, ref: ConfigMapRef, *, poll: float = 5.0, rng: random.Random | None = None,
                 max_backoff: float = 30.0):
        self.kube, self.ref, self.poll, self.max_backoff = kube, ref, poll, max_backoff
        self.rng = rng or random.Random()
        self.conf: DiscoveryConf = NO_DISCOVERY
        self._conf_version: str | None = None  # the ConfigMap's resourceVersion last read ("" for none)
        self._noted: set[str] = set()
        self._seen: dict[str, Mapping[str, str]] = {}  # node -> its labels, last event
        self._lock = threading.Lock()
        self._dirty = threading.Event()  # a reconcile is due
        self._wake = threading.Event()  # the worker has something to do (a reconcile, a recount)
        self.counts = NodeCounts()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._conf_watch: threading.Thread | None = None
        self.conf_watched = False  # the conf ConfigMap's watch is open (else only the poll reads it)
        self.reconciles = 0  # completed reconciles (tests, logs)

    # ---- events, from kopf's handler threads ---------------------------------------------------------------
    def on_node(self, kind: str | None, obj: MutableObj) -> None:
        """Every node's labels are kept, whatever the conf, so that a change is told from the labels the node had
        (a conf change or a new leader in between included), not from the last event's."""
        node = node_view(obj)
        if node is None:
            return
        with self._lock:
            before = self._seen.pop(node.name, None) if kind == "DELETED" else self._seen.get(node.name)
            if kind != "DELETED":
                self._seen[node.name] = node.labels
            keys = self.conf.label_keys
        now = {} if kind == "DELETED" else node.labels
        if any((before or {}).get(k) != now.get(k) for k in keys):
            self._mark_dirty()
        after = None if kind == "DELETED" else node.labels
        if before != after and self.counts.on_nodes_changed(node.name, before, after):
            self._wake.set()

    def on_hypernode(self, kind: str | None, obj: MutableObj) -> None:
        name = (obj.get("metadata") or {}).get("name")
        if isinstance(name, str) and self.counts.on_hypernode(kind, name, obj):
            self._wake.set()  # hypernode_handler.go: an added or updated HyperNode is recounted
        if kind == "DELETED":  # label.go DeleteHyperNode: a deleted HyperNode is rebuilt if the labels want it
            self._mark_dirty()

    def _mark_dirty(self) -> None:
        self._dirty.set()
        self._wake.set()

    # ---- the worker --------------------------------------------------------------------------------------
    def start(self) -> None:
        self._stop.clear()
        self._mark_dirty()  # a new leader reconciles once whatever happened before
        self._thread = threading.Thread(target=self._run, name="hypernode-discovery", daemon=True)
        self._thread.start()
        if self._conf_watch is None or not self._conf_watch.is_alive():
            self._conf_watch = threading.Thread(target=self._watch_conf, name="hypernode-conf-watch", daemon=True)
            self._conf_watch.start()

    def stop(self) -> None:
        self._stop.set()
        self._mark_dirty()
        if self._thread is not None:
            self._thread.join(timeout=30.0)
            self._thread = None

    def _run(self) -> None:
        backoff = 0.0
        while not self._stop.is_set():
            self._wake.wait(self.poll)
            if self._stop.wait(DEBOUNCE if self._wake.is_set() else 0.0):
                return
            self._wake.clear()  # what comes in from here on wakes the next round
            try:
                self.step()
                backoff = 0.0
            except (*_IO_ERRORS, NamingError) as exc:
                backoff = self._failed(backoff)
                log.warning("HyperNode discovery: %s; again in %.1fs", exc, backoff)
            except Exception:  # a bug: said with its traceback, and the worker goes on
                backoff = self._failed(backoff)
                log.exception("HyperNode discovery failed; again in %.1fs", backoff)
            if backoff and self._stop.wait(backoff):
                return

    def _failed(self, backoff: float) -> float:
        self._wake.set()
        return min(self.max_backoff, max(0.5, backoff * 2))

    def step(self) -> bool:
        """Read the conf; reconcile if anything asked for it; write the node counts that changed. True when a
        reconcile ran to its end."""
        self.refresh_conf()
        reconciled = False
        if self._dirty.is_set():
            self._dirty.clear()
            if self.conf.label is not None:
                try:
                    self.reconcile()
                    reconciled = True
                finally:
                    if not reconciled:
                        self._mark_dirty()  # not finished: again
        self.write_counts()
        return reconciled

    def write_counts(self) -> int:
        """PATCH `status.nodeCount` of each HyperNode due a recount whose count changed (hypernode_handler.go
        syncHyperNodeStatus writes it with UpdateStatus); the number written. A HyperNode gone meanwhile is
        skipped; a failure leaves the rest due again."""
        with self._lock:
            nodes = dict(self._seen)
        due = self.counts.due(nodes)
        written = 0
        for index, (name, count) in enumerate(due):
            if self._stop.is_set():
                self.counts.again(n for n, _ in due[index:])
                return written
            try:
                self.kube.request("PATCH", f"{HYPERNODES}/{quote(name)}/status",
                                  body={"status": {"nodeCount": count}},
                                  content_type="application/merge-patch+json")
            except KubeError as exc:
                if exc.status == 404:
                    continue
                self.counts.again(n for n, _ in due[index:])
                raise
            except BaseException:
                self.counts.again(n for n, _ in due[index:])
                raise
            self.counts.written(name, count)
            written += 1
            log.debug("HyperNode %s: status.nodeCount %d", name, count)
        return written

    # ---- the conf ---------------------------------------------------------------------------------------------
    def _watch_conf(self) -> None:
        """Wake the worker whenever the conf ConfigMap changes (configmap_handler.go: Volcano's informer on that one
        ConfigMap queues a reload), so a changed conf is applied at once, without a restart; the worker's poll
        (every `poll` seconds) stays as the fallback when the watch cannot be opened. The watch only wakes: the
        worker reads the ConfigMap and parses it (refresh_conf), so a malformed one keeps the last good one."""
        path = f"/api/v1/namespaces/{self.ref.namespace}/configmaps"
        query = {"watch": "1", "fieldSelector": f"metadata.name={self.ref.name}",
                 "timeoutSeconds": CONF_WATCH_SECONDS}
        backoff, said = 0.0, False
        while not self._stop.is_set():
            try:
                opened, seen = time.monotonic(), False
                for event in self.kube.stream(path, query, read_timeout=CONF_WATCH_SECONDS + 15):
                    if self._stop.is_set():
                        return
                    self.conf_watched, backoff, seen = True, 0.0, True
                    if event.get("type") != "BOOKMARK":
                        self._wake.set()
                if not seen and time.monotonic() - opened < 1.0:  # closed at once, unasked: not again at once
                    backoff = min(self.max_backoff * 2, max(1.0, backoff * 2))
            except _IO_ERRORS as exc:
                self.conf_watched = False
                backoff = min(self.max_backoff * 2, max(1.0, backoff * 2))
                if not said:  # once: the poll carries on meanwhile
                    said = True
                    log.warning("HyperNode discovery: cannot watch ConfigMap %s/%s (%s); reading it every %.0fs",
                                self.ref.namespace, self.ref.name, exc, self.poll)
            except Exception:  # a bug: said, and the poll carries on
                self.conf_watched = False
                log.exception("HyperNode discovery: the conf watch failed")
                backoff = self.max_backoff
            if self._stop.wait(backoff):
                return

    def refresh_conf(self) -> None:
        cm = self.kube.get_or_none(f"/api/v1/namespaces/{self.ref.namespace}/configmaps/{self.ref.name}")
        version = str(((cm or {}).get("metadata") or {}).get("resourceVersion") or "")
        if version == self._conf_version:
            return
        self._conf_version = version
        if cm is None:  # Volcano: no ConfigMap is an empty conf; what discovery made stays
            self._set_conf(NO_DISCOVERY)
            return
        try:
            conf = parse(entry_text(cm, self.ref.key, ConfError))
        except ConfError as exc:
            log.error("HyperNode discovery: ConfigMap %s/%s: %s; keeping the conf read before",
                      self.ref.namespace, self.ref.name, exc)
            return
        self._set_conf(conf)

    def _set_conf(self, conf: DiscoveryConf) -> None:
        for note in conf.notes:
            if note not in self._noted:
                self._noted.add(note)
                log.warning("HyperNode discovery: %s", note)
        with self._lock:
            changed = conf.label != self.conf.label
            self.conf = conf
        if changed:
            topologies = ", ".join(f"{t.name}: {' < '.join(t.tiers)}" for t in conf.label or ()) or "none"
            log.info("HyperNode discovery from node labels %s (topologies %s)",
                     "on" if conf.label is not None else "off", topologies)
            self._dirty.set()

    # ---- one reconcile ----------------------------------------------------------------------------------------
    def reconcile(self) -> Plan:
        topologies = self.conf.label or ()
        nodes = [n for n in map(node_view, self._list("/api/v1/nodes")) if n is not None]
        existing = [h for h in map(hypernode_view, self._list(HYPERNODES)) if h is not None]
        writes = plan(wanted(topologies, nodes, existing, self.rng), existing)
        self._write(writes)
        self.reconciles += 1
        if writes.empty:
            log.info("HyperNode discovery: reconciled %d nodes, nothing to change", len(nodes))
        else:
            log.info("HyperNode discovery: %d created, %d updated, %d deleted", len(writes.create),
                     len(writes.update), len(writes.delete))
        return writes

    def _write(self, writes: Plan) -> None:
        for obj in writes.create:
            if self._stop.is_set():
                return
            self._guarded("POST", HYPERNODES, obj)
        for obj in writes.update:
            if self._stop.is_set():
                return
            self._guarded("PUT", f"{HYPERNODES}/{_name(obj)}", obj)
        for name in writes.delete:
            if self._stop.is_set():
                return
            log.info("HyperNode discovery: deleting HyperNode %s", name)
            self.kube.delete(f"{HYPERNODES}/{quote(name)}")

    def _guarded(self, method: str, path: str, obj: MutableObj) -> None:
        """One write; a 409 (created or changed meanwhile) or a 422 (refused) is logged and the next reconcile
        looks again; anything else ends this reconcile."""
        what = "create" if method == "POST" else "update"
        log.info("HyperNode discovery: %s HyperNode %s", "creating" if what == "create" else "updating", _name(obj))
        try:
            self.kube.request(method, path, body=obj)
        except KubeError as exc:
            if exc.status == 409:
                self._mark_dirty()
                return
            if exc.status == 422:
                log.error("HyperNode discovery: %s of HyperNode %s refused: %s", what, _name(obj), exc)
                return
            raise

    def _list(self, path: str) -> Iterator[MutableObj]:
        cont = ""
        while True:
            query: dict[str, Any] = {"limit": PAGE}
            if cont:
                query["continue"] = cont
            page = self.kube.request("GET", path, query=query)
            yield from page.get("items") or ()
            cont = str((page.get("metadata") or {}).get("continue") or "")
            if not cont:
                return


def _name(obj: MutableObj) -> str:
    return quote(str((obj.get("metadata") or {}).get("name")))

