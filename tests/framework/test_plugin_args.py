"""Plugin arguments are parsed once, when the conf is loaded, into each plugin's frozen typed value.

A Volcano-style entry reads into the value with Volcano's keys, defaults and spellings; a value the plugin cannot
use rejects the file at load time with an ArgumentError naming the plugin, the key and the value; a value Volcano
replaces by its default is replaced and noted among the conf's warnings.
"""

from __future__ import annotations

import dataclasses
import os
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, strategies as st

from scheduler.cache.runner import ConfWatcher
from scheduler.cycle import builtin_default_conf, conf_from_text, load_conf
from scheduler.framework.conf import ArgumentError, PluginOption, SchedulerConf
from scheduler.framework.conf_args import NO_ARGS, whole_number_or
from scheduler.plugins.binpack import BinpackArgs, BinpackPlugin
from scheduler.plugins.capacity import CapacityArgs
from scheduler.plugins.deviceshare import DeviceShareArgs
from scheduler.plugins.nodeorder import NodeOrderArgs
from scheduler.plugins.overcommit import OvercommitArgs
from scheduler.plugins.registry import PLUGINS
from scheduler.plugins.sla import SlaArgs
from scheduler.plugins.topology import TopologyArgs
from scheduler.solver.topology import TopologyLabels
from scheduler.testing import cluster

GPU = "nvidia.com/gpu"
HYPERNODE = {"metadata": {"name": "s0"}, "spec": {"tier": 1, "members": [{"type": "Node"}]}}


def conf_of(name: str, arguments: str = "", switches: str = "") -> SchedulerConf:
    entry = f"- name: {name}\n"
    if switches:
        entry += textwrap.indent(textwrap.dedent(switches).strip(), "  ") + "\n"
    if arguments:
        entry += "  arguments:\n" + textwrap.indent(textwrap.dedent(arguments).strip(), "    ") + "\n"
    text = 'actions: "enqueue, allocate"\ntiers:\n- plugins:\n' + textwrap.indent(entry, "  ")
    return conf_from_text(text, source="test.conf")


def args_of(name: str, arguments: str = "", switches: str = "") -> object:
    return conf_of(name, arguments, switches).tiers[0].plugins[0].args


# ---- a Volcano-style entry reads into the plugin's typed value -------------------------------------------


@dataclass(frozen=True, slots=True)
class ParseCase:
    name: str
    plugin: str
    arguments: str
    expected: object


PARSE_CASES = [
    ParseCase("binpack without arguments packs cpu, memory and GPUs with weight 1", "binpack", "",
              BinpackArgs(1, MappingProxyType({"cpu": 1, "memory": 1, GPU: 1}))),
    ParseCase("binpack reads Volcano's weights, numbers given as strings too", "binpack", """
        binpack.weight: 10
        binpack.cpu: 2
        binpack.memory: "3"
        binpack.resources: nvidia.com/gpu, example.com/foo
        binpack.resources.nvidia.com/gpu: 4
        binpack.resources.example.com/foo: 5.0
        """, BinpackArgs(10, MappingProxyType({"cpu": 2, "memory": 3, GPU: 4, "example.com/foo": 5}))),
    ParseCase("a listed resource without a weight of its own weighs 1", "binpack",
              "binpack.resources: example.com/foo",
              BinpackArgs(1, MappingProxyType({"cpu": 1, "memory": 1, GPU: 1, "example.com/foo": 1}))),
    ParseCase("binpack.weight 0 is kept: it turns the scorer off", "binpack", "binpack.weight: 0",
              BinpackArgs(0, MappingProxyType({"cpu": 1, "memory": 1, GPU: 1}))),
    ParseCase("nodeorder without arguments takes Volcano's default weights", "nodeorder", "",
              NodeOrderArgs(least=1, most=0, balanced=1, affinity=2, taint=3)),
    ParseCase("nodeorder reads each weight, and ignores the weights of scores it does not have", "nodeorder", """
        leastrequested.weight: 0
        mostrequested.weight: "2"
        balancedresource.weight: 3
        nodeaffinity.weight: 4
        tainttoleration.weight: 5
        podaffinity.weight: 7
        """, NodeOrderArgs(least=0, most=2, balanced=3, affinity=4, taint=5)),
    ParseCase("overcommit without arguments overcommits by 1.2", "overcommit", "", OvercommitArgs(1.2)),
    ParseCase("overcommit reads the factor and per-resource factors", "overcommit", """
        overcommit-factor: 1.5
        overcommit-factor.nvidia.com/gpu: "1.0"
        """, OvercommitArgs(1.5, MappingProxyType({GPU: 1.0}))),
    ParseCase("deviceshare without arguments scores with fgd-next", "deviceshare", "",
              DeviceShareArgs("fgd-next", 1.0, 5000.0)),
    ParseCase("deviceshare reads policy, weight and half-life", "deviceshare", """
        deviceshare.policy: bestfit
        deviceshare.weight: 0.5
        deviceshare.halfLife: 0
        """, DeviceShareArgs("bestfit", 0.5, 0.0)),
    ParseCase("sla without a waiting time sets no SLA", "sla", "", SlaArgs(None)),
    ParseCase("sla reads a Go duration in seconds", "sla", "sla-waiting-time: 1h2m3s", SlaArgs(3723.0)),
    ParseCase("network-topology-aware without arguments takes the solver defaults", "network-topology-aware", "",
              TopologyArgs(200, 500, 2, TopologyLabels(), False, ())),
    ParseCase("network-topology-aware reads the solver.* and topology.* keys", "network-topology-aware", """
        solver.timeLimitMs: 50
        solver.cycleBudgetMs: "900"
        solver.workers: 0
        solver.everyGang: "true"
        topology.zoneLabel: zone
        topology.rackLabel: rack
        topology.nvlinkLabel: nvl
        topology.hypernodes:
        - metadata: {name: s0}
          spec: {tier: 1, members: [{type: Node}]}
        """, TopologyArgs(50, 900, 1, TopologyLabels("zone", "rack", ("nvl",)), True,
                          (MappingProxyType({"metadata": MappingProxyType({"name": "s0"}),
                                             "spec": MappingProxyType({"tier": 1, "members": (
                                                 MappingProxyType({"type": "Node"}),)})}),))),
    ParseCase("a plugin without arguments carries NoArgs", "gang", "", NO_ARGS),
]


@pytest.mark.parametrize("case", PARSE_CASES, ids=[c.name for c in PARSE_CASES])
def test_an_entry_reads_into_the_plugins_typed_arguments(case: ParseCase) -> None:
    assert args_of(case.plugin, case.arguments) == case.expected


@pytest.mark.parametrize(("switches", "expected"), [("", CapacityArgs(hierarchy=False)),
                                                    ("enableHierarchy: false", CapacityArgs(hierarchy=False)),
                                                    ("enableHierarchy: true", CapacityArgs(hierarchy=True))],
                         ids=["capacity is flat by default", "enableHierarchy false keeps it flat",
                              "enableHierarchy true makes the queue tree"])
def test_capacity_reads_its_hierarchy_from_the_switch(switches: str, expected: CapacityArgs) -> None:
    assert args_of("capacity", switches=switches) == expected


def test_every_plugin_entry_of_a_loaded_conf_carries_its_arguments() -> None:
    text = "actions: \"enqueue, allocate\"\ntiers:\n- plugins:\n" + "".join(f"  - name: {n}\n" for n in PLUGINS
                                                                            if n != "capacity")
    conf = conf_from_text(text)
    assert all(option.args is not None for tier in conf.tiers for option in tier.plugins)
    assert all(option.args is not None for tier in builtin_default_conf().tiers for option in tier.plugins)


def test_typed_arguments_are_frozen() -> None:
    args = args_of("binpack", "binpack.cpu: 2")
    assert isinstance(args, BinpackArgs)
    with pytest.raises(dataclasses.FrozenInstanceError):
        args.weight = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        args.resource_weights["cpu"] = 3  # type: ignore[index]


def test_cycles_read_the_arguments_parsed_at_load_and_never_parse_again(monkeypatch: pytest.MonkeyPatch) -> None:
    conf = conf_of("binpack", "binpack.weight: 0")
    parsed = conf.tiers[0].plugins[0].args

    def no_parsing(cls: type, reader: object) -> BinpackArgs:
        raise AssertionError("arguments parsed again in a cycle")

    monkeypatch.setattr(BinpackPlugin, "parse_args", classmethod(no_parsing))
    c = cluster().node("n1", cpu="4").job("j", min_available=1, replicas=1, cpu="1")
    c.cycles(2, conf)
    assert c.sim.bound("j") and BinpackPlugin(conf.tiers[0].plugins[0]).args is parsed


def test_an_entry_built_by_hand_is_parsed_when_its_plugin_is_made() -> None:
    plugin = BinpackPlugin(PluginOption("binpack", {"binpack.weight": 3}))
    assert plugin.args.weight == 3


# ---- Volcano's fallbacks: replaced, with a conf warning ----------------------------------------------------


@dataclass(frozen=True, slots=True)
class FallbackCase:
    name: str
    plugin: str
    arguments: str
    expected: object
    warned_key: str


FALLBACK_CASES = [
    FallbackCase("a negative binpack resource weight is taken as 1", "binpack", "binpack.cpu: -2",
                 BinpackArgs(1, MappingProxyType({"cpu": 1, "memory": 1, GPU: 1})), "binpack.cpu"),
    FallbackCase("a negative binpack weight is taken as it is, as Volcano takes it", "binpack",
                 "binpack.weight: -1", BinpackArgs(-1, MappingProxyType({"cpu": 1, "memory": 1, GPU: 1})),
                 "binpack.weight"),
    FallbackCase("an overcommit factor below 1 is taken as 1.2", "overcommit", "overcommit-factor: 0.5",
                 OvercommitArgs(1.2), "overcommit-factor"),
    FallbackCase("a per-resource overcommit factor below 1 is taken as 1.2", "overcommit",
                 "overcommit-factor.cpu: 0.9", OvercommitArgs(1.2, MappingProxyType({"cpu": 1.2})),
                 "overcommit-factor.cpu"),
]


@pytest.mark.parametrize("case", FALLBACK_CASES, ids=[c.name for c in FALLBACK_CASES])
def test_a_value_volcano_replaces_is_replaced_and_warned_about(case: FallbackCase) -> None:
    conf = conf_of(case.plugin, case.arguments)
    assert conf.tiers[0].plugins[0].args == case.expected
    assert len(conf.skipped) == 1 and repr(case.warned_key) in conf.skipped[0]


# ---- a bad value is an ArgumentError at load time ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BadCase:
    name: str
    plugin: str
    key: str
    text: str  # the value as written in YAML
    value: Any  # as the error reports it


BAD_CASES = [
    BadCase("a word is not a binpack weight", "binpack", "binpack.weight", "abc", "abc"),
    BadCase("a fraction is not a binpack resource weight", "binpack", "binpack.cpu", "1.5", 1.5),
    BadCase("a list is not binpack's resource list", "binpack", "binpack.resources", "[cpu]", ("cpu",)),
    BadCase("a boolean is not a nodeorder weight", "nodeorder", "tainttoleration.weight", "true", True),
    BadCase("a word is not an overcommit factor", "overcommit", "overcommit-factor", "high", "high"),
    BadCase("a word is not a per-resource overcommit factor", "overcommit", "overcommit-factor.cpu", "x", "x"),
    BadCase("a word is not proportion's admitWithinShare", "proportion", "admitWithinShare", "maybe", "maybe"),
    BadCase("an unknown deviceshare policy is refused", "deviceshare", "deviceshare.policy", "tetris", "tetris"),
    BadCase("an infinite deviceshare weight is refused", "deviceshare", "deviceshare.weight", '"inf"', "inf"),
    BadCase("a word is not a deviceshare half-life", "deviceshare", "deviceshare.halfLife", "long", "long"),
    BadCase("a word is not an sla waiting time", "sla", "sla-waiting-time", "soon", "soon"),
    BadCase("a zero sla waiting time is refused", "sla", "sla-waiting-time", "0s", "0s"),
    BadCase("a word is not a solver time limit", "network-topology-aware", "solver.timeLimitMs", "fast", "fast"),
    BadCase("a word is not solver.everyGang", "network-topology-aware", "solver.everyGang", "sometimes",
            "sometimes"),
    BadCase("a mapping is not a topology label", "network-topology-aware", "topology.zoneLabel", "{a: 1}",
            MappingProxyType({"a": 1})),
    BadCase("a single HyperNode is not a list of them", "network-topology-aware", "topology.hypernodes",
            "{metadata: {name: s0}}", MappingProxyType({"metadata": MappingProxyType({"name": "s0"})})),
    BadCase("a list of names is not a list of HyperNodes", "network-topology-aware", "topology.hypernodes",
            "[s0]", ("s0",)),
]


@pytest.mark.parametrize("case", BAD_CASES, ids=[c.name for c in BAD_CASES])
def test_a_bad_value_is_an_argument_error_naming_plugin_key_and_value(case: BadCase) -> None:
    with pytest.raises(ArgumentError) as caught:
        conf_of(case.plugin, f"{case.key}: {case.text}")
    error = caught.value
    assert (error.plugin, error.key, error.value) == (case.plugin, case.key, case.value)
    assert (error.source, error.where) == ("test.conf", f"tiers[0].plugins[0].arguments.{case.key}")
    assert "\n" not in str(error)


def test_a_bad_argument_in_a_file_is_rejected_when_it_is_loaded(tmp_path: Path) -> None:
    path = tmp_path / "volcano-scheduler.conf"
    path.write_text('actions: "allocate"\ntiers:\n- plugins:\n  - name: nodeorder\n'
                    "    arguments: {nodeaffinity.weight: heavy}\n")
    with pytest.raises(ArgumentError) as caught:
        load_conf(str(path))
    assert (caught.value.source, caught.value.plugin, caught.value.key, caught.value.value) == (
        str(path), "nodeorder", "nodeaffinity.weight", "heavy")


def test_the_scheduler_keeps_the_last_good_conf_when_an_argument_goes_bad(tmp_path: Path) -> None:
    path = tmp_path / "volcano-scheduler.conf"
    path.write_text('actions: "allocate"\ntiers:\n- plugins:\n  - name: binpack\n'
                    "    arguments: {binpack.weight: 5}\n")
    watcher = ConfWatcher(str(path))
    good = watcher.current()
    path.write_text('actions: "allocate"\ntiers:\n- plugins:\n  - name: binpack\n'
                    "    arguments: {binpack.weight: five}\n")
    os.utime(path, (1, 1))  # a new mtime, whatever the file system's resolution
    assert watcher.current() is good
    assert good.tiers[0].plugins[0].args == BinpackArgs(5, MappingProxyType({"cpu": 1, "memory": 1, GPU: 1}))


@given(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=30),
                 st.lists(st.integers(), max_size=2)))
def test_an_actions_whole_number_argument_is_in_range_or_the_default(raw: object) -> None:
    value = whole_number_or(raw, 8, 1, 1000)
    assert value == 8 or 1 <= value <= 1000
    ascii_whole = isinstance(raw, str) and re.fullmatch(r"\s*[+-]?[0-9]+\s*", raw) is not None
    if isinstance(raw, bool) or not (isinstance(raw, int) or ascii_whole):
        assert value == 8  # a bool, a fraction, a word, "1_000", a list: never read as a number


def test_an_actions_whole_number_argument_reads_what_confs_write() -> None:
    assert [whole_number_or(raw, 8, 1, 1000) for raw in (3, "3", " 12 ", 0, "1001", "2.0", True, "9" * 5000)] == \
        [3, 3, 12, 8, 8, 8, 8, 8]
