"""Keys volcano-py ignores: each is accepted, as Volcano accepts it, with one warning that says why.

A misspelt argument gets the closest known name; an argument Volcano's plugin reads and volcano-py's does not is
named as not supported; a key of the conf's own structure that Volcano's yaml.v2 would ignore is ignored too.
The warnings are compared as `KeyWarning` values; what is printed is their `render()`, checked to be among the
conf's `skipped` in order.
"""

from __future__ import annotations

import logging
import textwrap
from dataclasses import dataclass
from types import MappingProxyType

import pytest

from scheduler.actions import ACTIONS
from scheduler.framework.conf import KeyKind, KeyPlace, KeyWarning, PluginOption, SchedulerConf, parse_conf
from scheduler.framework.conf_args import parse_unloaded
from scheduler.plugins.binpack import BinpackPlugin
from scheduler.plugins.registry import PLUGIN_ARGS

UNKNOWN, UNLISTED, UNSUPPORTED = KeyKind.UNKNOWN, KeyKind.UNLISTED, KeyKind.UNSUPPORTED
VOLCANO_IGNORES = KeyKind.VOLCANO_IGNORES
ARGUMENT, SWITCH, FIELD = KeyPlace.ARGUMENT, KeyPlace.SWITCH, KeyPlace.FIELD


def load(text: str) -> SchedulerConf:
    return parse_conf(textwrap.dedent(text), source="test.conf", implemented_actions=ACTIONS.keys(),
                      implemented_plugins=PLUGIN_ARGS)


def one_plugin(entry: str, extra: str = "") -> str:
    """A conf whose single tier holds `entry` (a plugin entry, as YAML lines) at tiers[0].plugins[0]."""
    body = textwrap.indent(textwrap.dedent(entry).strip(), "  ")
    return f'actions: "enqueue, allocate, backfill"\ntiers:\n- plugins:\n{body}\n{extra}'


AT = "tiers[0].plugins[0]"


@dataclass(frozen=True, slots=True)
class Case:
    name: str
    conf: str
    warnings: tuple[KeyWarning, ...]


CASES = [
    # misspelt arguments: unknown to both, with the closest name volcano-py's plugin or Volcano's knows
    Case("a misspelt binpack weight is ignored with the right spelling suggested",
         one_plugin("- name: binpack\n  arguments:\n    binpack.wieght: 5"),
         (KeyWarning(AT, "binpack.wieght", UNKNOWN, ARGUMENT, "binpack", "binpack.weight"),)),
    Case("a misspelt nodeorder weight is ignored with the right spelling suggested",
         one_plugin("- name: nodeorder\n  arguments:\n    leastrequested.wieght: 2"),
         (KeyWarning(AT, "leastrequested.wieght", UNKNOWN, ARGUMENT, "nodeorder", "leastrequested.weight"),)),
    Case("a misspelt Volcano-only argument is suggested from Volcano's names",
         one_plugin("- name: deviceshare\n  arguments:\n    deviceshare.VGPUEnabled: true"),
         (KeyWarning(AT, "deviceshare.VGPUEnabled", UNKNOWN, ARGUMENT, "deviceshare", "deviceshare.VGPUEnable"),)),
    Case("an unknown argument that merely shares the plugin's namespace gets no suggestion",
         one_plugin("- name: predicates\n  arguments:\n    predicate.GPUSharingEnable: true"),
         (KeyWarning(AT, "predicate.GPUSharingEnable", UNKNOWN, ARGUMENT, "predicates"),)),
    Case("an argument of a plugin that reads none is unknown with nothing to suggest",
         one_plugin("- name: gang\n  arguments:\n    minAvailable: 3"),
         (KeyWarning(AT, "minAvailable", UNKNOWN, ARGUMENT, "gang"),)),
    Case("a binpack resource weight for a resource binpack.resources does not list is read by neither",
         one_plugin("- name: binpack\n  arguments:\n    binpack.resources.example.com/foo: 3"),
         (KeyWarning(AT, "binpack.resources.example.com/foo", UNLISTED, ARGUMENT, "binpack", "binpack.resources"),)),
    # arguments Volcano's plugin reads and volcano-py's does not act on
    Case("a Volcano deviceshare argument is named as not supported",
         one_plugin("- name: deviceshare\n  arguments:\n    deviceshare.VGPUEnable: true\n"
                    "    deviceshare.SchedulePolicy: binpack"),
         (KeyWarning(AT, "deviceshare.VGPUEnable", UNSUPPORTED, ARGUMENT, "deviceshare"),
          KeyWarning(AT, "deviceshare.SchedulePolicy", UNSUPPORTED, ARGUMENT, "deviceshare"))),
    Case("nodeorder weights volcano-py does not score with are named, the ones it does are not",
         one_plugin("- name: nodeorder\n  arguments:\n    leastrequested.weight: 1\n    podaffinity.weight: 2\n"
                    "    imagelocality.weight: 1\n    podtopologyspread.weight: 2"),
         (KeyWarning(AT, "podaffinity.weight", UNSUPPORTED, ARGUMENT, "nodeorder"),
          KeyWarning(AT, "imagelocality.weight", UNSUPPORTED, ARGUMENT, "nodeorder"),
          KeyWarning(AT, "podtopologyspread.weight", UNSUPPORTED, ARGUMENT, "nodeorder"))),
    Case("a predicate switch of Volcano's is named as not supported",
         one_plugin("- name: predicates\n  arguments:\n    predicate.NodeAffinityEnable: false"),
         (KeyWarning(AT, "predicate.NodeAffinityEnable", UNSUPPORTED, ARGUMENT, "predicates"),)),
    Case("Volcano's CI conf's dynamic resource allocation argument is read (volcano-py's predicates allocate claims)",
         one_plugin("- name: predicates\n  arguments:\n    predicate.DynamicResourceAllocationEnable: true"),
         ()),
    Case("hierarchical drf is named as not supported",
         one_plugin("- name: drf\n  enableHierarchy: true"),
         (KeyWarning(AT, "enableHierarchy", UNSUPPORTED, SWITCH, "drf"),)),
    Case("enableHierarchy on a plugin that Volcano reads it on neither is ignored by both",
         one_plugin("- name: gang\n  enableHierarchy: true"),
         (KeyWarning(AT, "enableHierarchy", VOLCANO_IGNORES, SWITCH, "gang"),)),
    # valid keys: no warning
    Case("every argument volcano-py reads gives no warning",
         one_plugin("""\
             - name: binpack
               arguments:
                 binpack.weight: 10
                 binpack.cpu: 5
                 binpack.memory: 1
                 binpack.resources: nvidia.com/gpu, example.com/foo
                 binpack.resources.nvidia.com/gpu: 2
                 binpack.resources.example.com/foo: 3
             - name: nodeorder
               arguments: {leastrequested.weight: 1, mostrequested.weight: 0, balancedresource.weight: 1,
                           nodeaffinity.weight: 2, tainttoleration.weight: 3}
             - name: overcommit
               arguments: {overcommit-factor: 1.2, overcommit-factor.cpu: 2}
             - name: sla
               arguments: {sla-waiting-time: 1h}
             - name: deviceshare
               arguments: {deviceshare.policy: bestfit, deviceshare.weight: 2, deviceshare.halfLife: 100}
             - name: capacity
               enableHierarchy: true
             """),
         ()),
    # keys of the conf's structure, which Volcano's yaml.v2 ignores
    Case("disableTaskOrder, which Volcano ignores, is ignored with the real switch suggested",
         one_plugin("- name: gang\n  disableTaskOrder: true"),
         (KeyWarning(AT, "disableTaskOrder", UNKNOWN, FIELD, "gang", "enableTaskOrder"),)),
    Case("a switch spelt the way Volcano silently ignores gets the right spelling",
         one_plugin("- name: gang\n  enabledPreemptable: false"),
         (KeyWarning(AT, "enabledPreemptable", UNKNOWN, FIELD, "gang", "enablePreemptable"),)),
    Case("an unknown key in a plugin entry far from any known one gets no suggestion",
         one_plugin("- name: gang\n  weight: 3"),
         (KeyWarning(AT, "weight", UNKNOWN, FIELD, "gang"),)),
    Case("an argument written beside arguments instead of under it is an unknown key of the entry",
         one_plugin("- name: overcommit\n  arguments:\n  overcommit-factor: 1.0"),
         (KeyWarning(AT, "overcommit-factor", UNKNOWN, FIELD, "overcommit"),)),
    Case("an unknown key on a Volcano plugin volcano-py skips is still named",
         one_plugin("- name: gang\n- name: tdm\n  enabledJobOrder: true"),
         (KeyWarning("tiers[0].plugins[1]", "enabledJobOrder", UNKNOWN, FIELD, "tdm", "enableJobOrder"),)),
    Case("an unknown top-level key is ignored with a suggestion",
         one_plugin("- name: gang", "tier: []\n"),
         (KeyWarning("", "tier", UNKNOWN, FIELD, "", "tiers"),)),
    Case("an unknown key in a tier is ignored with a suggestion",
         'actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n  plugin: []\n',
         (KeyWarning("tiers[0]", "plugin", UNKNOWN, FIELD, "", "plugins"),)),
    Case("an unknown key in a configuration is ignored with a suggestion",
         one_plugin("- name: gang", "configurations:\n- name: allocate\n  args: {}\n"),
         (KeyWarning("configurations[0]", "args", UNKNOWN, FIELD, "", "arguments"),)),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_ignored_keys_are_warned_about_as_values(case: Case) -> None:
    conf = load(case.conf)
    assert conf.key_warnings == case.warnings
    rendered = [warning.render() for warning in case.warnings]
    assert [line for line in conf.skipped if line in rendered] == rendered  # each printed once, in order


def test_an_ignored_key_does_not_change_what_the_plugin_reads() -> None:
    with_typo = load(one_plugin("- name: binpack\n  arguments:\n    binpack.weight: 7\n    binpack.wieght: 5"))
    without = load(one_plugin("- name: binpack\n  arguments:\n    binpack.weight: 7"))
    assert with_typo.tiers[0].plugins[0].args == without.tiers[0].plugins[0].args
    assert without.key_warnings == ()


def test_every_key_warning_kind_renders_one_distinct_line() -> None:
    warnings = [KeyWarning(AT, "k", kind, place, "gang", "x") for kind in KeyKind for place in KeyPlace]
    assert len({warning.render() for warning in warnings}) == len(warnings)


def test_an_entry_built_by_hand_logs_its_ignored_keys(caplog: pytest.LogCaptureFixture) -> None:
    option = PluginOption("binpack", MappingProxyType({"binpack.wieght": 5}))
    with caplog.at_level(logging.WARNING, logger="volcano_py.conf"):
        parse_unloaded(option, BinpackPlugin.parse_args)
    expected = KeyWarning("", "binpack.wieght", UNKNOWN, ARGUMENT, "binpack", "binpack.weight")
    assert [record.getMessage() for record in caplog.records] == [f"scheduler conf: {expected.render()}"]
