"""The plugin runtime (`scheduler/framework/runtime.py`): what a plugin serves is found from its methods, a name the
runtime does not know is an error at registration, and the conf's switches and a plugin's `inactive_points` hold."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path

import pytest

from scheduler import metrics
from scheduler.api.decision import SUCCESS, Status
from scheduler.api.job import JobInfo, TaskInfo
from scheduler.api.queue import QueueInfo
from scheduler.cache.runner import ConfWatcher
from scheduler.cycle import builtin_default_conf, bulk_blockers, conf_from_text
from scheduler.framework import points as P
from scheduler.framework.conf import PluginOption
from scheduler.framework.conf_args import NoArgs
from scheduler.framework.plugin import Plugin
from scheduler.framework.runtime import KNOWN, PluginDefinitionError, check_plugin_class, serve, served_points
from scheduler.framework.tiers import TierRunner
from scheduler.plugins.registry import PLUGINS

ROOT = Path(__file__).resolve().parents[2]


def public_methods(cls: type) -> set[str]:
    return {name for klass in cls.__mro__ if klass not in (Plugin, object)
            for name, value in vars(klass).items() if not name.startswith("_") and callable(getattr(cls, name))}


@pytest.mark.parametrize("name", sorted(PLUGINS))
def test_every_public_method_of_a_plugin_is_a_point_an_acceleration_or_a_hook(name: str) -> None:
    cls = PLUGINS[name]
    stray = public_methods(cls) - KNOWN
    assert not stray, f"plugin {name} has public methods that serve nothing: {sorted(stray)}"
    assert served_points(cls), f"plugin {name} serves no point"


class Misspelt(Plugin[NoArgs]):
    name = "misspelt"

    def job_orderr(self, a: JobInfo, b: JobInfo) -> int:
        return 0


class Orphan(Plugin[NoArgs]):
    name = "orphan"

    def allocatable_count(self, queue: QueueInfo, task: TaskInfo, n: int) -> int:
        return n


def test_a_misspelt_point_is_an_error_naming_it() -> None:
    with pytest.raises(PluginDefinitionError, match="job_orderr"):
        check_plugin_class(Misspelt)


def test_an_acceleration_without_its_plain_method_is_an_error() -> None:
    with pytest.raises(PluginDefinitionError, match="allocatable_count without the plain method .allocatable"):
        check_plugin_class(Orphan)


class Serving(Plugin[NoArgs]):
    name = "serving"
    off: frozenset[str] = frozenset()

    def job_order(self, a: JobInfo, b: JobInfo) -> int:
        return P.compare(self.job_order_key(a), self.job_order_key(b))

    def job_order_key(self, job: JobInfo) -> int:
        return -job.priority

    def allocatable(self, queue: QueueInfo, task: TaskInfo) -> Status:
        return SUCCESS

    def preemptable(self, preemptor: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
        return list(candidates)

    def on_allocate(self, task: TaskInfo) -> None:
        pass

    def inactive_points(self) -> frozenset[str]:
        return self.off


def served(plugin: Plugin[object], *, accelerate: bool = True) -> TierRunner:
    tiers = TierRunner()
    serve(plugin, tiers, tier=0, option=plugin.option, accelerate=accelerate)
    return tiers


def test_the_runtime_serves_each_method_at_its_point_with_its_acceleration() -> None:
    tiers = served(Serving(PluginOption("serving")))
    assert [type(f) for f in tiers.functions(P.JOB_ORDER)] == [P.KeyedOrdering]
    assert len(tiers.functions(P.ALLOCATABLE)) == len(tiers.functions(P.PREEMPTABLE)) == 1
    assert not tiers.has(P.JOB_READY)
    assert tiers.handlers_batched() is False  # on_allocate without on_allocate_many
    plain = served(Serving(PluginOption("serving")), accelerate=False)
    assert [type(f) for f in plain.functions(P.JOB_ORDER)] != [P.KeyedOrdering]


def test_an_enable_switch_of_the_conf_turns_a_method_off() -> None:
    tiers = served(Serving(PluginOption("serving", switches={"enableJobOrder": False, "enablePreemptable": False})))
    assert not tiers.has(P.JOB_ORDER) and not tiers.has(P.PREEMPTABLE)
    assert tiers.has(P.ALLOCATABLE)


def test_inactive_points_are_not_served_and_must_be_implemented() -> None:
    plugin = Serving(PluginOption("serving"))
    plugin.off = frozenset({"allocatable", "on_allocate"})
    tiers = served(plugin)
    assert not tiers.has(P.ALLOCATABLE) and tiers.handlers_batched()
    plugin.off = frozenset({"job_ready"})
    with pytest.raises(PluginDefinitionError, match="job_ready"):
        served(plugin)


def test_bulk_blockers_name_the_plugin_and_what_it_lacks() -> None:
    assert bulk_blockers(builtin_default_conf()) == []
    gang_eviction = conf_from_text((ROOT / "examples/sim/gang-eviction.conf").read_text(), source="x")
    assert bulk_blockers(gang_eviction) == []  # capacity has its accelerations
    conf = conf_from_text('actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n  - name: deviceshare\n'
                          '    arguments: {deviceshare.GPUSharingEnable: true}\n', source="x")
    assert sorted((b.plugin, b.method, b.missing) for b in bulk_blockers(conf)) == [
        ("deviceshare", "batch_node_order", "batch_node_order_one"), ("deviceshare", "on_allocate", "on_allocate_many")]


def test_bulk_placement_off_is_logged_once_per_conf_load_and_exported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "volcano-scheduler.conf"
    path.write_text('actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n  - name: deviceshare\n')
    watcher = ConfWatcher(str(path))
    with caplog.at_level(logging.INFO, logger="volcano_py.scheduler"):
        for _ in range(3):
            watcher.current()
    lines = [r.getMessage() for r in caplog.records if "bulk placement off" in r.getMessage()]
    assert len(lines) == 1 and "plugin deviceshare serves batch_node_order without batch_node_order_one" in lines[0]
    gauge = metrics.default().bulk_off
    assert gauge.labels("deviceshare")._value.get() == 1
    path.write_text('actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n')
    os.utime(path, (1, 1))  # a new mtime: the watcher reads the file again
    watcher.current()
    assert not [s for m in gauge.collect() for s in m.samples]  # cleared: no plugin turns it off now
