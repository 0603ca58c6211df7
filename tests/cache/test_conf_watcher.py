"""The scheduler's conf file, reloaded while it runs (issue 22): a new file changes what the next cycle does; a
broken one keeps the last good conf, logs one error, and raises the stale-conf gauge until a good file loads."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from scheduler.cache.runner import ConfWatcher
from scheduler.testing import cluster

PACKING = """actions: "enqueue, allocate"
tiers:
- plugins: [{name: priority}, {name: gang}]
- plugins: [{name: predicates}, {name: binpack, arguments: {binpack.weight: 10}}]
"""
SPREADING = """actions: "enqueue, allocate"
tiers:
- plugins: [{name: priority}, {name: gang}]
- plugins: [{name: predicates}, {name: nodeorder, arguments: {leastrequested.weight: 10}}]
"""
BROKEN = """actions: "enqueue, allocate"
tiers:
- plugins: [{name: binpack, arguments: {binpack.weight: ten}}]
"""


def write(path: Path, text: str, mtime: int) -> None:
    path.write_text(text)
    os.utime(path, (mtime, mtime))  # a new mtime whatever the file system's resolution


def stale() -> float | None:
    return REGISTRY.get_sample_value("volcano_py_scheduler_conf_stale")


def rejected() -> float:
    return REGISTRY.get_sample_value("volcano_py_scheduler_conf_loads_total", {"result": "rejected"}) or 0.0


def placements(watcher: ConfWatcher) -> set[str]:
    """Two one-cpu pods on two empty 4-cpu nodes, scheduled with the watcher's current conf."""
    c = cluster().node("a", cpu="4").node("b", cpu="4").job("j", replicas=2, cpu="1")
    c.cycle(watcher.current())
    return set(c.sim.bound("j").values())


def test_a_new_file_changes_the_next_cycle(tmp_path: Path) -> None:
    path = tmp_path / "volcano-scheduler.conf"
    write(path, PACKING, 1)
    watcher = ConfWatcher(str(path))
    assert len(placements(watcher)) == 1  # binpack: both pods on one node
    write(path, SPREADING, 2)
    assert placements(watcher) == {"a", "b"}  # least requested: one pod each
    assert stale() == 0


def test_a_broken_file_keeps_the_last_good_conf_says_so_once_and_raises_the_gauge(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "volcano-scheduler.conf"
    write(path, PACKING, 1)
    watcher = ConfWatcher(str(path))
    good = watcher.current()
    before = rejected()
    with caplog.at_level(logging.ERROR, logger="volcano_py"):
        write(path, BROKEN, 2)
        assert watcher.current() is good
        write(path, BROKEN, 3)  # the same bad content again: no second line
        assert watcher.current() is good
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1
    assert (stale(), rejected() - before) == (1, 1)
    write(path, SPREADING, 4)
    assert watcher.current() is not good and stale() == 0


def test_a_file_that_disappears_keeps_the_last_good_conf(tmp_path: Path) -> None:
    path = tmp_path / "volcano-scheduler.conf"
    write(path, PACKING, 1)
    watcher = ConfWatcher(str(path))
    good = watcher.current()
    path.unlink()
    assert watcher.current() is good and stale() == 1
