"""bench/py_variant.py, the `volcano-py-off` contender of `make bench-peers`: each switch turns off only its own
kind of write, and the cycle's apply still runs through (a switched-off PodGroup writer that raised would fail
every cycle's apply, and the events, emitted after the status writes, with it)."""

from __future__ import annotations

import importlib
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from scheduler.api.phases import PodGroupPhase
from scheduler.api.snapshot import CycleResult, PodGroupStatus
from scheduler.cache.status_writer import StatusWriter
from scheduler.cache.store import Stores
from scheduler.cli import bench_module

bench_module("peers")  # puts bench/ first on sys.path
variant = importlib.import_module("py_variant")


class Recording:
    request_timeout = 5.0

    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []

    def request(self, method: str, path: str, **_: Any) -> dict[str, Any]:
        self.sent.append((method, path))
        return {}


def test_podgroup_status_off_writes_no_podgroup_and_the_rest_of_the_apply_still_runs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(StatusWriter, "write_podgroups", StatusWriter.write_podgroups)  # restored afterwards
    variant.switch_off({"podgroup-status"})
    kube, stores = Recording(), Stores()
    stores.podgroups.objects["ns/pg"] = {"metadata": {"name": "pg", "namespace": "ns"}, "spec": {"minMember": 1}}
    writer = StatusWriter(kube, stores, ThreadPoolExecutor(1), frozenset({"volcano-py"}),  # type: ignore[arg-type]
                          lambda: True, threading.Event())
    result = CycleResult(podgroups=[PodGroupStatus("ns/pg", PodGroupPhase.INQUEUE, (), 0, 0, 0)])
    writer.write(result, 1_000_000.0, {})  # as ClusterCache.apply calls it, failed binds included
    assert not [path for _, path in kube.sent if "podgroups" in path]
