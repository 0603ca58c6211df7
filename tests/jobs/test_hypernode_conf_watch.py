"""HyperNode discovery's conf ConfigMap is watched (as Volcano's hypernode controller watches it:
pkg/controllers/hypernode/configmap_handler.go), so a changed conf is applied at once, without a restart and
without waiting for the poll; a watch that cannot be opened says so once and the poll carries on."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from scheduler.cache.kube import KubeError
from scheduler.controllers.hypernode_conf import ConfigMapRef
from scheduler.controllers.hypernode_discovery import HYPERNODES, HyperNodeDiscovery

CONF = """\
networkTopologyDiscovery:
  - source: label
    enabled: true
    config:
      networkTopologyTypes:
        rack:
          - nodeLabel: example.com/rack
          - nodeLabel: kubernetes.io/hostname
"""


class _Kube:
    """One ConfigMap, two labelled nodes, the HyperNodes created; `stream` is the ConfigMap's watch."""

    def __init__(self) -> None:
        self.cm: dict[str, Any] | None = None
        self.changed = threading.Event()  # the test changed the ConfigMap: the watch tells
        self.created = threading.Event()
        self.closed = threading.Event()
        self.read = threading.Event()  # the worker read the ConfigMap
        self.hypernodes: list[dict[str, Any]] = []
        self.watch_queries: list[dict[str, Any]] = []

    def get_or_none(self, path: str) -> dict[str, Any] | None:
        assert path == "/api/v1/namespaces/ns/configmaps/cm"
        cm = self.cm  # as it was when read
        self.read.set()
        return cm

    def stream(self, path: str, query: dict[str, Any], read_timeout: float) -> Iterator[dict[str, Any]]:
        assert path == "/api/v1/namespaces/ns/configmaps"
        self.watch_queries.append(query)
        if self.changed.wait(30):
            self.changed.clear()
            yield {"type": "MODIFIED", "object": self.cm}
        self.closed.wait(30)

    def request(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
        if method == "GET" and path == "/api/v1/nodes":
            return {"items": [{"metadata": {"name": f"n{i}", "labels": {"example.com/rack": "r1"}}}
                              for i in range(2)]}
        if method == "GET" and path == HYPERNODES:
            return {"items": list(self.hypernodes)}
        if method == "POST" and path == HYPERNODES:
            self.hypernodes.append(kw["body"])
            self.created.set()
            return dict(kw["body"])
        raise AssertionError(f"unexpected {method} {path}")

    def put(self, version: str, text: str) -> None:
        self.cm = {"metadata": {"name": "cm", "resourceVersion": version}, "data": {"volcano-controller.conf": text}}
        self.changed.set()


def test_a_changed_conf_is_applied_at_once_not_at_the_next_poll() -> None:
    kube = _Kube()
    discovery = HyperNodeDiscovery(kube, ConfigMapRef("ns", "cm"), poll=3600.0)  # type: ignore[arg-type]
    discovery.start()
    try:
        # No ConfigMap yet: nothing discovered, and the worker sleeps until the poll. Then the conf is written:
        # the watch wakes the worker.
        assert kube.read.wait(20)
        kube.put("7", CONF)
        assert kube.created.wait(20), "the conf change was not applied before the poll"
        assert kube.watch_queries[0]["fieldSelector"] == "metadata.name=cm"
        assert [h["spec"]["tier"] for h in kube.hypernodes] == [1]
        assert discovery.conf.label is not None and discovery.conf.label[0].name == "rack"
    finally:
        kube.closed.set()
        discovery.stop()


class _NoWatch:
    def __init__(self, discovery: list[HyperNodeDiscovery]) -> None:
        self.discovery = discovery
        self.calls = 0

    def stream(self, path: str, query: dict[str, Any], read_timeout: float) -> Iterator[dict[str, Any]]:
        self.calls += 1
        if self.calls == 3:
            self.discovery[0]._stop.set()  # three refusals are enough to see
        raise KubeError(403, "GET", path, b"forbidden")


def test_a_watch_refused_is_said_once_and_the_poll_carries_on(caplog: pytest.LogCaptureFixture) -> None:
    holder: list[HyperNodeDiscovery] = []
    kube = _NoWatch(holder)
    discovery = HyperNodeDiscovery(kube, ConfigMapRef("ns", "cm"), max_backoff=0.0)  # type: ignore[arg-type]
    holder.append(discovery)
    with caplog.at_level(logging.WARNING, "volcano_py.controllers.hypernode"):
        discovery._watch_conf()  # returns once stopped
    said = [r.getMessage() for r in caplog.records if "cannot watch ConfigMap" in r.getMessage()]
    assert kube.calls == 3 and len(said) == 1 and "reading it every 5s" in said[0]
    assert not discovery.conf_watched


class _Closing:
    """A watch the server (or a proxy) closes at once, empty, every time."""

    def __init__(self) -> None:
        self.calls = 0

    def stream(self, path: str, query: dict[str, Any], read_timeout: float) -> Iterator[dict[str, Any]]:
        self.calls += 1
        return iter(())


class _Waits(threading.Event):
    """The watch's `_stop`: records each wait and says stop after three."""

    def __init__(self) -> None:
        super().__init__()
        self.waits: list[float] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append(float(timeout or 0.0))
        if len(self.waits) == 3:
            self.set()
        return self.is_set()


def test_a_watch_closed_at_once_is_opened_again_after_a_backoff_not_in_a_busy_loop() -> None:
    kube = _Closing()
    discovery = HyperNodeDiscovery(kube, ConfigMapRef("ns", "cm"), max_backoff=4.0)  # type: ignore[arg-type]
    stop = discovery._stop = _Waits()
    discovery._watch_conf()  # returns once stopped
    assert kube.calls == 3 and stop.waits == [1.0, 2.0, 4.0]
