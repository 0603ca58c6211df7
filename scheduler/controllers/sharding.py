"""Layer `controllers`: Volcano's sharding controller (`sharding-controller`), run by the Lease holder only and only
when `--controllers` turns it on (Volcano's controller-manager default, `*,-sharding-controller`, leaves it off).

One worker thread syncs every `shardSyncPeriod` (default 60 s; the ConfigMap may change it): it reads the
configuration (`sharding_conf.py`: the ConfigMap if it exists, else `--scheduler-configs`), lists nodes, the pods
bound to them and every NodeShard from the apiserver, works out each scheduler's `spec.nodesDesired`
(`sharding_model.py`) and writes what changed. A watch on the ConfigMap wakes it at once when the configuration
changes, and, with `enableNodeEventTrigger` (the default), a watch on nodes when a node is added or deleted
(Volcano also re-syncs when a node's CPU requests change by half; here the period covers that). A malformed
ConfigMap keeps the last good configuration, said once.

The controller writes the spec only; each scheduler writes its NodeShard's status (`cache/shards.py`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import urllib3

from scheduler.api.objects import MutableObj
from scheduler.api.shard import NODE_SHARDS_PATH
from scheduler.cache.kube import Kube, KubeError
from scheduler.cache.shards import put_nodes_desired
from scheduler.controllers.configmap import entry_text
from scheduler.controllers.sharding_conf import (
    CONFIGMAP_KEY,
    CONFIGMAP_NAME,
    CONFIGMAP_NAMESPACE,
    DEFAULT_SYNC_PERIOD,
    ShardingConf,
    ShardingConfError,
    parse_conf,
    parse_flag_configs,
    sync_period,
)
from scheduler.controllers.sharding_model import ShardWrites, node_uses, plan

log = logging.getLogger("volcano_py.controllers.sharding")

PAGE = 500
WATCH_SECONDS = 60
DEBOUNCE = 0.2
_IO_ERRORS = (KubeError, OSError, urllib3.exceptions.HTTPError, ValueError)


@dataclass(frozen=True, slots=True)
class ShardingOptions:
    """The controller's flags (Volcano's names and defaults, pkg/controllers/sharding/config.go AddFlags)."""

    configmap: str = CONFIGMAP_NAME
    namespace: str = CONFIGMAP_NAMESPACE
    scheduler_configs: tuple[str, ...] = ()
    sync_period: float = DEFAULT_SYNC_PERIOD
    node_event_trigger: bool = True


class ShardingController:
    def __init__(self, kube: Kube, options: ShardingOptions) -> None:
        self.kube = kube
        self.options = options
        self.flag_conf: ShardingConf | None = None
        try:
            self.flag_conf = parse_flag_configs(options.scheduler_configs) if options.scheduler_configs else None
        except ShardingConfError as exc:  # as Volcano (Initialize): said, and the ConfigMap alone configures
            log.warning("sharding: failed to parse scheduler configs from flags: %s", exc)
        self.conf: ShardingConf | None = None  # the last good ConfigMap configuration
        self.period = sync_period(options.sync_period)
        self.node_events = options.node_event_trigger
        self.syncs = 0
        self._conf_version: str | None = None
        self._said: set[str] = set()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._threads: list[threading.Thread] = []

    # ---- the worker --------------------------------------------------------------------------------------
    def start(self) -> None:
        self._stop.clear()
        self._wake.set()  # a new leader syncs at once
        cm = f"/api/v1/namespaces/{quote(self.options.namespace)}/configmaps"
        for target, name in ((self._run, "sharding"),
                             (lambda: self._watch(cm, f"metadata.name={self.options.configmap}", False),
                              "sharding-conf-watch"),
                             (lambda: self._watch("/api/v1/nodes", "", True), "sharding-node-watch")):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        for thread in self._threads:
            thread.join(timeout=5.0)
        self._threads = []

    def _run(self) -> None:
        backoff = 0.0
        while not self._stop.is_set():
            self._wake.wait(backoff or self.period)
            if self._stop.wait(DEBOUNCE if self._wake.is_set() else 0.0):
                return
            self._wake.clear()
            try:
                self.sync()
                backoff = 0.0
            except _IO_ERRORS as exc:
                backoff = min(30.0, max(0.5, backoff * 2))
                log.warning("sharding: %s; again in %.1fs", exc, backoff)
            except Exception:  # a bug: said with its traceback, and the worker goes on
                backoff = 30.0
                log.exception("sharding: the sync failed; again in %.0fs", backoff)

    def _watch(self, path: str, selector: str, nodes: bool) -> None:
        """Wake the worker on any change of the ConfigMap, or on a node added or deleted (from the list's
        resourceVersion on: the nodes that exist are no event)."""
        query: dict[str, Any] = {"watch": "1", "timeoutSeconds": WATCH_SECONDS, "allowWatchBookmarks": "true"}
        if selector:
            query["fieldSelector"] = selector
        backoff = 0.0
        while not self._stop.is_set():
            try:
                if nodes and "resourceVersion" not in query:
                    listed = self.kube.request("GET", path, query={"limit": 1})
                    query["resourceVersion"] = str((listed.get("metadata") or {}).get("resourceVersion") or "")
                for event in self.kube.stream(path, query, read_timeout=WATCH_SECONDS + 15):
                    if self._stop.is_set():
                        return
                    kind = event.get("type")
                    if kind == "ERROR":  # e.g. 410: list again
                        query.pop("resourceVersion", None)
                        break
                    meta = (event.get("object") or {}).get("metadata") or {}
                    if nodes and meta.get("resourceVersion"):
                        query["resourceVersion"] = str(meta["resourceVersion"])
                    wanted = kind in ("ADDED", "DELETED") and self.node_events if nodes else kind != "BOOKMARK"
                    if wanted:
                        self._wake.set()
                backoff = 0.0
            except _IO_ERRORS:
                query.pop("resourceVersion", None)
                backoff = min(30.0, max(1.0, backoff * 2))
            if self._stop.wait(backoff or 0.1):
                return

    # ---- one sync -----------------------------------------------------------------------------------------
    def configuration(self) -> ShardingConf | None:
        """The ConfigMap's configuration (re-read when it changed; a bad one keeps the last good one), else the
        flags' (Volcano falls back to them while the ConfigMap does not exist)."""
        path = (f"/api/v1/namespaces/{quote(self.options.namespace)}/configmaps/"
                f"{quote(self.options.configmap)}")
        cm = self.kube.get_or_none(path) if self.options.configmap else None
        if cm is None:
            self._conf_version = None
            return self.conf or self.flag_conf
        version = str((cm.get("metadata") or {}).get("resourceVersion") or "")
        if version != self._conf_version:
            self._conf_version = version
            try:
                conf = parse_conf(entry_text(cm, CONFIGMAP_KEY, ShardingConfError))
            except ShardingConfError as exc:
                log.error("sharding: ConfigMap %s/%s: %s; keeping the configuration read before",
                          self.options.namespace, self.options.configmap, exc)
                return self.conf or self.flag_conf
            for note in conf.notes:
                self._say(note)
            self.conf = conf
            if conf.sync_period is not None:
                self.period = sync_period(conf.sync_period)
            if conf.node_event_trigger is not None:
                self.node_events = conf.node_event_trigger
            log.info("sharding: %d schedulers from ConfigMap %s/%s: %s (sync every %.0fs)", len(conf.schedulers),
                     self.options.namespace, self.options.configmap,
                     ", ".join(f"{s.name} [{', '.join(p.name for p in s.policies)}]" for s in conf.schedulers),
                     self.period)
        return self.conf or self.flag_conf

    def sync(self) -> ShardWrites | None:
        conf = self.configuration()
        if conf is None:
            self._say("sharding: no configuration (no ConfigMap and no --scheduler-configs): nothing to do")
            return None
        nodes = list(self._list("/api/v1/nodes", {}))
        pods = self._list("/api/v1/pods", {"fieldSelector": "spec.nodeName!=,status.phase!=Succeeded,"
                                                              "status.phase!=Failed"})
        shards = {str((s.get("metadata") or {}).get("name")): s for s in self._list(NODE_SHARDS_PATH, {})}
        current = {name: _desired(obj) for name, obj in shards.items()}
        writes = plan(conf.schedulers, node_uses(nodes, pods), current)
        for name in writes.delete:
            log.info("sharding: deleting NodeShard %s (scheduler no longer configured)", name)
            self.kube.delete(f"{NODE_SHARDS_PATH}/{quote(name)}")
        for name, desired in writes.first.items():
            self._update(shards[name], desired)
        for name, desired in writes.create.items():
            self._create(name, desired)
        for name, desired in writes.second.items():
            self._update(shards[name], desired)
        self.syncs += 1
        sizes = {**current, **writes.create, **writes.first, **writes.second}
        log.info("sharding: %d nodes; desired: %s", len(nodes),
                 ", ".join(f"{s.name} {len(sizes.get(s.name) or ())}" for s in conf.schedulers))
        return writes

    def _create(self, name: str, desired: Sequence[str]) -> None:
        body = {"apiVersion": "shard.volcano.sh/v1alpha1", "kind": "NodeShard", "metadata": {"name": name},
                "spec": {"nodesDesired": list(desired)}}
        try:
            self.kube.request("POST", NODE_SHARDS_PATH, body=body)
            log.info("sharding: created NodeShard %s with %d nodes", name, len(desired))
        except KubeError as exc:
            if exc.status != 409:
                raise
            self._wake.set()  # made meanwhile: look again

    def _update(self, shard: MutableObj, desired: Sequence[str]) -> None:
        answer = put_nodes_desired(self.kube, shard, desired)
        if answer is None:
            self._wake.set()  # changed or gone meanwhile: the next sync looks again
            return
        if isinstance(answer, dict):
            shard.clear()
            shard.update(answer)  # a second write this sync (round two) names the new resourceVersion
        log.info("sharding: NodeShard %s desires %d nodes", (shard.get("metadata") or {}).get("name"), len(desired))

    def _list(self, path: str, query: dict[str, Any]) -> Iterator[MutableObj]:
        cont = ""
        while True:
            more = {"continue": cont} if cont else {}
            page = self.kube.request("GET", path, query={**query, "limit": PAGE, **more})
            yield from page.get("items") or ()
            cont = str((page.get("metadata") or {}).get("continue") or "")
            if not cont:
                return

    def _say(self, message: str) -> None:
        if message not in self._said:
            self._said.add(message)
            log.warning("%s", message)


def _desired(shard: MutableObj) -> list[str]:
    spec = shard.get("spec")
    nodes = spec.get("nodesDesired") if isinstance(spec, dict) else None
    return [n for n in nodes if isinstance(n, str)] if isinstance(nodes, list) else []
