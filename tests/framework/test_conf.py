"""Reading volcano-scheduler.conf: the default, real ConfigMaps, switches, arguments and every error."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from scheduler.framework.conf import (
    BUILTIN_SOURCE,
    PLUGIN_SWITCHES,
    VOLCANO_ACTIONS,
    VOLCANO_PLUGINS,
    ConfError,
    PluginOption,
    SchedulerConf,
    arg_bool,
    arg_float,
    arg_int,
    arg_str,
    default_conf,
    describe_conf,
    load_conf_file,
    parse_conf,
)

DATA = Path(__file__).parent / "data"
ACTIONS = frozenset({"enqueue", "allocate", "backfill", "preempt", "reclaim"})
# Volcano's default tiers (pkg/scheduler/util.go DefaultSchedulerConf; the Helm chart's conf adds binpack).
DEFAULT_TIERS = [["priority", "gang", "conformance"],
                 ["overcommit", "drf", "predicates", "proportion", "nodeorder", "binpack"]]
DEFAULT_PLUGINS = frozenset(name for tier in DEFAULT_TIERS for name in tier)
# The plugins the grammar tests take as built: the default's less overcommit, so that a whole Volcano ConfigMap
# (tests/framework/data) exercises the skip path with it.
PLUGINS = DEFAULT_PLUGINS - {"overcommit"}
SOURCE = "test.conf"


def parse(text: str, *, actions: frozenset[str] = ACTIONS, plugins: frozenset[str] = PLUGINS
          ) -> SchedulerConf:
    return parse_conf(textwrap.dedent(text), source=SOURCE, implemented_actions=actions,
                      implemented_plugins=plugins)


def plugin_names(conf: SchedulerConf) -> list[list[str]]:
    return [[option.name for option in tier.plugins] for tier in conf.tiers]


def conf_with(plugin_entry: str, actions: str = '"allocate"') -> str:
    entry = textwrap.indent(textwrap.dedent(plugin_entry).strip(), "  ")
    return f"actions: {actions}\ntiers:\n- plugins:\n{entry}\n"


# ---- the built-in default ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DefaultCase:
    name: str
    actions: frozenset[str]
    plugins: frozenset[str]
    expected_actions: tuple[str, ...]
    expected_tiers: list[list[str]]


DEFAULT_CASES = [
    DefaultCase("with every plugin built the default is Volcano's two tiers", ACTIONS, DEFAULT_PLUGINS,
                ("enqueue", "allocate", "backfill"),
                DEFAULT_TIERS),
    DefaultCase("plugins not built yet are left out of the "
                "default", ACTIONS, frozenset({"gang", "predicates"}),
                ("enqueue", "allocate", "backfill"), [["gang"], ["predicates"]]),
    DefaultCase("actions not built yet are left out of the default", frozenset({"allocate"}), DEFAULT_PLUGINS,
                ("allocate",),
                DEFAULT_TIERS),
]


@pytest.mark.parametrize("case", DEFAULT_CASES, ids=[c.name for c in DEFAULT_CASES])
def test_default_conf(case: DefaultCase) -> None:
    conf = default_conf(implemented_actions=case.actions, implemented_plugins=case.plugins)
    assert conf.actions == case.expected_actions
    assert plugin_names(conf) == case.expected_tiers
    assert conf.source == BUILTIN_SOURCE
    assert conf.skipped == ()
    assert dict(conf.configurations) == {}
    assert all(option.enabled("enableJobOrder") for tier in conf.tiers for option in tier.plugins)


# ---- real Volcano files ------------------------------------------------------------------------------


def test_a_whole_volcano_configmap_loads_with_volcano_only_names_skipped() -> None:
    path = DATA / "volcano-scheduler-configmap.yaml"
    conf = load_conf_file(path, implemented_actions=ACTIONS, implemented_plugins=PLUGINS)

    assert conf.source == str(path)
    assert conf.actions == ("enqueue", "allocate", "backfill", "preempt", "reclaim")
    assert plugin_names(conf) == [["priority", "gang", "conformance"],
                                  ["drf", "predicates", "proportion", "nodeorder", "binpack"]]
    assert conf.skipped == (
        "action 'shuffle' (actions, position 6) is a Volcano action volcano-py does not implement; skipped",
        "plugin 'sla' (tiers[0].plugins[3]) is a Volcano plugin volcano-py does not implement; skipped",
        "plugin 'overcommit' (tiers[1].plugins[0]) is a Volcano plugin volcano-py does not implement; "
        "skipped",
        "plugin 'tdm' (tiers[1].plugins[6]) is a Volcano plugin volcano-py does not implement; skipped",
        "plugin 'numa-aware' (tiers[1].plugins[7]) is a Volcano plugin volcano-py does not implement; "
        "skipped",
        "plugin 'task-topology' (tiers[1].plugins[8]) is a Volcano plugin volcano-py does not implement; "
        "skipped",
        "action 'shuffle' (configurations[2]) is a Volcano action volcano-py does not implement; skipped",
    )
    assert conf.notes == ("read from key 'volcano-scheduler.conf' of ConfigMap "
                          "volcano-system/volcano-scheduler-configmap (a whole manifest was given)",)
    gang = conf.tiers[0].plugins[1]
    assert dict(gang.switches) == {"enablePreemptable": False, "enableJobStarving": False}
    assert not gang.enabled("enablePreemptable") and gang.enabled("enableJobOrder")
    binpack = conf.tiers[1].plugins[4]
    assert arg_int(binpack, "binpack.weight", 1) == 10
    assert arg_int(binpack, "binpack.memory", 1) == 1  # Volcano accepts numbers given as strings
    predicates = conf.tiers[1].plugins[1]
    assert dict(predicates.arguments["predicates.resourceThresholds"]) == {"cpu": "2000m", "memory": "8Gi"}
    assert set(conf.configurations) == {"enqueue", "preempt"}
    assert arg_float(PluginOption("enqueue", conf.configurations["enqueue"]), "overcommit-factor", 1.0) == 1.5


OVERCOMMIT_SKIPPED = ("plugin 'overcommit' (tiers[1].plugins[0]) is a Volcano plugin volcano-py does not "
                      "implement; skipped")


def test_the_installer_conf_file_loads_as_volcano_reads_it() -> None:
    path = DATA / "volcano-scheduler.conf"
    conf = load_conf_file(str(path), implemented_actions=ACTIONS, implemented_plugins=PLUGINS)
    assert conf.actions == ("enqueue", "allocate", "backfill")
    assert plugin_names(conf) == [["priority", "gang", "conformance"],
                                  ["drf", "predicates", "proportion", "nodeorder", "binpack"]]
    assert conf.notes == ()
    assert describe_conf(conf) == textwrap.dedent(f"""\
        scheduler conf: {path}
        actions, in order: enqueue, allocate, backfill
        tier 1 (tiers[0]):
          - priority
          - gang (turned off: enablePreemptable)
          - conformance
        tier 2 (tiers[1]):
          - drf (turned off: enablePreemptable)
          - predicates
          - proportion
          - nodeorder
          - binpack
        warnings (1):
          - {OVERCOMMIT_SKIPPED}
        """)


def test_describe_shows_arguments_configurations_and_the_configmap_note() -> None:
    conf = load_conf_file(DATA / "volcano-scheduler-configmap.yaml", implemented_actions=ACTIONS,
                          implemented_plugins=PLUGINS)
    text = describe_conf(conf)
    assert "note: read from key 'volcano-scheduler.conf' of ConfigMap volcano-system/" in text
    assert "actions, in order: enqueue, allocate, backfill, preempt, reclaim\n" in text
    assert "  - gang (turned off: enableJobStarving, enablePreemptable)\n" in text
    assert ('  - predicates (arguments: predicates.GPUSharingEnable=true, '
            'predicates.resourceThresholds={"cpu": "2000m", "memory": "8Gi"})\n') in text
    assert "action configurations:\n  - enqueue: overcommit-factor=1.5\n" in text
    assert "warnings (7):\n" in text
    assert describe_conf(conf) == text  # stable


def test_a_tier_whose_plugins_are_all_skipped_is_kept_and_described() -> None:
    conf = parse("""\
        actions: "allocate"
        tiers:
        - plugins:
          - name: gang
        - plugins:
          - name: sla
        """)
    assert plugin_names(conf) == [["gang"], []]
    assert "tier 2 (tiers[1]):\n  (no plugin here that volcano-py runs)\n" in describe_conf(conf)


def test_volcano_metrics_section_is_accepted_and_reported() -> None:
    conf = parse("""\
        actions: "allocate"
        tiers:
        - plugins:
          - name: gang
        metrics:
          type: prometheus
          address: http://prometheus:9090
        """)
    assert conf.skipped == ("section 'metrics' is Volcano's metrics-source setting, which volcano-py does "
                            "not "
                            "read; skipped",)


def test_actions_are_split_on_commas_tolerating_whitespace_and_keep_their_order() -> None:
    conf = parse(conf_with("- name: gang", actions='" reclaim ,allocate,  backfill,enqueue "'))
    assert conf.actions == ("reclaim", "allocate", "backfill", "enqueue")


def test_the_registries_know_the_names_volcano_users_write() -> None:
    assert {"enqueue", "allocate", "backfill", "preempt", "reclaim", "shuffle"} <= VOLCANO_ACTIONS
    assert {"sla", "tdm", "numa-aware", "task-topology", "capacity", "network-topology-aware",
            "resource-strategy-fit", "deviceshare", "extender", "overcommit"} <= VOLCANO_PLUGINS
    assert {"enableJobOrder", "enablePreemptable", "enabledVictim", "enabledOverused",
            "enabledAllocatable", "enableJobStarving"} <= PLUGIN_SWITCHES


# ---- switches ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SwitchCase:
    name: str
    entry: str
    switch: str
    expected: bool


SWITCH_CASES = [
    SwitchCase("a switch the user did not set is on", "- name: gang", "enableJobOrder", True),
    SwitchCase("a switch set to false is off", "- name: gang\n  enableJobOrder: "
                                               "false", "enableJobOrder", False),
    SwitchCase("a switch set to true is on", "- name: gang\n  enableJobOrder: true", "enableJobOrder", True),
    SwitchCase("the enabledXxx spelling asks about the same switch",
               "- name: gang\n  enableJobReady: false", "enabledJobReady", False),
    SwitchCase("Volcano's enabledVictim key is read as spelled", "- name: gang\n  enabledVictim: false",
               "enabledVictim", False),
    SwitchCase("Volcano's enabledOverused key answers the enableOverused spelling too",
               "- name: gang\n  enabledOverused: false", "enableOverused", False),
    SwitchCase("YAML 1.1 booleans count as booleans", "- name: gang\n  enablePredicate: no",
               "enablePredicate", False),
    SwitchCase("one switch off leaves the others on", "- name: gang\n  enablePreemptable: false",
               "enableReclaimable", True),
]


@pytest.mark.parametrize("case", SWITCH_CASES, ids=[c.name for c in SWITCH_CASES])
def test_switches(case: SwitchCase) -> None:
    option = parse(conf_with(case.entry)).tiers[0].plugins[0]
    assert option.enabled(case.switch) is case.expected


def test_switches_are_recorded_by_their_exact_volcano_key() -> None:
    option = parse(conf_with("- name: gang\n  enablePreemptable: false\n  enabledVictim: "
                             "true")).tiers[0].plugins[0]
    assert dict(option.switches) == {"enablePreemptable": False, "enabledVictim": True}


def test_asking_about_a_switch_volcano_does_not_have_is_a_bug() -> None:
    with pytest.raises(ValueError, match="'enableTeleport' is not a Volcano plugin switch"):
        PluginOption("gang").enabled("enableTeleport")


# ---- arguments -----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ArgCase:
    name: str
    helper: Callable[[PluginOption, str, Any], Any]
    value: Any
    default: Any
    expected: Any


ABSENT = object()

ARG_CASES = [
    ArgCase("an integer argument is read as given", arg_int, 10, 1, 10),
    ArgCase("an integer given as a string is converted", arg_int, " 7 ", 1, 7),
    ArgCase("a whole float is accepted as an integer", arg_int, 3.0, 1, 3),
    ArgCase("a missing integer argument takes the default", arg_int, ABSENT, 4, 4),
    ArgCase("a float argument is read as given", arg_float, 1.2, 1.0, 1.2),
    ArgCase("an integer is accepted as a float", arg_float, 2, 1.0, 2.0),
    ArgCase("a float given as a string is converted", arg_float, "0.5", 1.0, 0.5),
    ArgCase("a missing float argument takes the default", arg_float, ABSENT, 1.5, 1.5),
    ArgCase("a boolean argument is read as given", arg_bool, False, True, False),
    ArgCase("a boolean given as the string True is converted", arg_bool, "True", False, True),
    ArgCase("a boolean given as the string 0 is converted", arg_bool, "0", True, False),
    ArgCase("a missing boolean argument takes the default", arg_bool, ABSENT, True, True),
    ArgCase("a string argument is read as given", arg_str, "1h2m3s", "", "1h2m3s"),
    ArgCase("a number is accepted as a string", arg_str, 60, "", "60"),
    ArgCase("a missing string argument takes the default", arg_str, ABSENT, "5m", "5m"),
    ArgCase("an argument set to null takes the default", arg_int, None, 9, 9),
]


@pytest.mark.parametrize("case", ARG_CASES, ids=[c.name for c in ARG_CASES])
def test_argument_helpers(case: ArgCase) -> None:
    arguments = {} if case.value is ABSENT else {"k": case.value}
    assert case.helper(PluginOption("binpack", arguments), "k", case.default) == case.expected


@dataclass(frozen=True, slots=True)
class ArgErrorCase:
    name: str
    helper: Callable[[PluginOption, str, Any], Any]
    value: str
    message: str


ARG_ERROR_CASES = [
    ArgErrorCase("a word is not an integer", arg_int, "ten",
                 "argument 'binpack.weight' must be an integer, got 'ten'"),
    ArgErrorCase("a fraction is not an integer", arg_int, "2.5",
                 "argument 'binpack.weight' must be an integer, got 2.5"),
    ArgErrorCase("a fraction given as a string is not an integer", arg_int, '"2.5"',
                 "argument 'binpack.weight' must be an integer, got '2.5'"),
    ArgErrorCase("a boolean is not an integer", arg_int, "true",
                 "argument 'binpack.weight' must be an integer, got True"),
    ArgErrorCase("a word is not a number", arg_float, "high",
                 "argument 'binpack.weight' must be a number, got 'high'"),
    ArgErrorCase("a word is not a boolean", arg_bool, "maybe",
                 "argument 'binpack.weight' must be true or false, got 'maybe'"),
    ArgErrorCase("a mapping is not a string", arg_str, "{a: 1}",
                 "argument 'binpack.weight' must be a string, got mappingproxy({'a': 1})"),
]


@pytest.mark.parametrize("case", ARG_ERROR_CASES, ids=[c.name for c in ARG_ERROR_CASES])
def test_argument_helpers_name_the_file_plugin_and_key(case: ArgErrorCase) -> None:
    conf = parse(conf_with(f"- name: binpack\n  arguments:\n    binpack.weight: {case.value}"))
    with pytest.raises(ConfError) as caught:
        case.helper(conf.tiers[0].plugins[0], "binpack.weight", 0)
    message = str(caught.value)
    assert message.startswith(f"{SOURCE}: tiers[0].plugins[0].arguments.binpack.weight: plugin 'binpack' ")
    assert case.message in message


def test_arguments_are_a_read_only_copy() -> None:
    conf = parse(conf_with("- name: binpack\n  arguments:\n    binpack.resources: {gpu: 2}\n    list: [1, "
                           "2]"))
    arguments = conf.tiers[0].plugins[0].arguments
    with pytest.raises(TypeError):
        arguments["binpack.weight"] = 3  # type: ignore[index]
    with pytest.raises(TypeError):
        arguments["binpack.resources"]["gpu"] = 3
    assert arguments["list"] == (1, 2)


def test_an_entry_without_arguments_has_empty_arguments() -> None:
    assert dict(parse(conf_with("- name: gang\n  arguments:")).tiers[0].plugins[0].arguments) == {}


# ---- errors ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ErrorCase:
    name: str
    text: str
    message: str  # the whole message after "test.conf: "


ERROR_CASES = [
    ErrorCase("an empty file is a mistake, not an empty config", "  \n\n",
              "the file is empty; expected `actions:` and `tiers:`"),
    ErrorCase("a YAML syntax error gives the line", 'actions: "allocate"\ntiers:\n- plugins: [\n',
              "invalid YAML in the file at line 4: expected the node content, but found '<stream end>'"),
    ErrorCase("a key given twice in one mapping is refused with both lines",
              conf_with("- name: gang\n  name: drf"),
              "invalid YAML in the file at line 5: key 'name' appears twice (lines 4 and 5)"),
    ErrorCase("a list at the top level is refused", "- actions\n",
              "expected a mapping with `actions:` and `tiers:` at the top level, got list"),
    ErrorCase("missing actions are refused", "tiers:\n- plugins:\n  - name: gang\n",
              'actions: missing; expected e.g. actions: "enqueue, allocate, backfill"'),
    ErrorCase("an empty action list is refused", conf_with("- name: gang", actions='" , "'),
              'actions: the action list is empty; expected e.g. "enqueue, allocate, backfill"'),
    ErrorCase("actions given as a YAML list are refused", conf_with("- name: gang", actions="[allocate]"),
              "actions: expected a comma-separated string such as \"enqueue, allocate, backfill\", "
              "got ['allocate']"),
    ErrorCase("a stray comma in actions is "
              "refused", conf_with("- name: gang", actions='"allocate,,backfill"'),
              "actions: action 2 is empty (a stray comma in 'allocate,,backfill'?)"),
    ErrorCase("an action listed twice is refused with both positions",
              conf_with("- name: gang", actions='"enqueue, allocate, enqueue"'),
              "actions: action 'enqueue' is listed twice (positions 1 and 3)"),
    ErrorCase("an unknown action is refused with a "
              "suggestion", conf_with("- name: gang", actions='"alocate"'),
              "actions: unknown action 'alocate' (actions, position 1); did you mean 'allocate'?"),
    ErrorCase("actions that are all Volcano-only leave nothing to run",
              conf_with("- name: gang", actions='"shuffle"'),
              "actions: none of the actions 'shuffle' is implemented by volcano-py; "
              "implemented: allocate, backfill, enqueue, preempt, reclaim"),
    ErrorCase("missing tiers are refused", 'actions: "allocate"\n',
              "tiers: missing; expected a list of tiers, each with a list of plugins"),
    ErrorCase("an empty tier list is refused", 'actions: "allocate"\ntiers: []\n',
              "tiers: expected a non-empty list of tiers, got []"),
    ErrorCase("a tier without plugins is refused", 'actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n'
                                                   "- plugins: []\n",
              "tiers[1].plugins: expected a non-empty list of plugins, got []"),
    ErrorCase("a tier that is not a mapping is refused", 'actions: "allocate"\ntiers:\n- gang\n',
              "tiers[0]: expected a mapping with a `plugins` list, got 'gang'"),
    # The misspelt key itself is only a warning (test_conf_warnings.py), as Volcano ignores it; the tier it
    # leaves without plugins is the error, and the error names the misspelling.
    ErrorCase("a tier whose plugins key is misspelt is refused naming the misspelling",
              'actions: "allocate"\ntiers:\n- plugin:\n  - name: gang\n',
              "tiers[0].plugins: expected a non-empty list of plugins, got None "
              "(the key 'plugin' is ignored: did you mean 'plugins'?)"),
    ErrorCase("missing tiers are refused naming a misspelling", 'actions: "allocate"\ntier:\n- plugins: []\n',
              "tiers: missing; expected a list of tiers, each with a list of plugins "
              "(the key 'tier' is ignored: did you mean 'tiers'?)"),
    ErrorCase("an unknown plugin is refused with the closest known name", conf_with("- name: gnag"),
              "tiers[0].plugins[0].name: unknown plugin 'gnag'; did you mean 'gang'?"),
    ErrorCase("a misspelt Volcano-only plugin is refused too", conf_with("- name: numaaware"),
              "tiers[0].plugins[0].name: unknown plugin 'numaaware'; did you mean 'numa-aware'?"),
    ErrorCase("a name far from any known one gets no suggestion", conf_with("- name: zzzzzz"),
              "tiers[0].plugins[0].name: unknown plugin 'zzzzzz'"),
    ErrorCase("a plugin without a name is refused", conf_with("- arguments: {}"),
              "tiers[0].plugins[0].name: expected a non-empty name, got None"),
    ErrorCase("a plugin given as a bare string is refused", conf_with("- gang"),
              "tiers[0].plugins[0]: expected a mapping with a `name`, got 'gang'"),
    ErrorCase("a plugin listed twice is refused naming both positions",
              'actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n- plugins:\n  - name: drf\n'
              "  - name: gang\n",
              "tiers[1].plugins[1].name: plugin 'gang' is listed twice: at tiers[0].plugins[0] and at "
              "tiers[1].plugins[1]"),
    ErrorCase("a switch given as a string is refused", conf_with("- name: gang\n  enableJobOrder: \"false\""),
              "tiers[0].plugins[0].enableJobOrder: expected true or false, got 'false'"),
    ErrorCase("a switch given as a number is refused", conf_with("- name: gang\n  enableJobOrder: 0"),
              "tiers[0].plugins[0].enableJobOrder: expected true or false, got 0"),
    ErrorCase("arguments that are not a mapping are refused", conf_with("- name: binpack\n  arguments: [1]"),
              "tiers[0].plugins[0].arguments: expected a mapping of argument names to values, got [1]"),
    ErrorCase("a switch error is found even on a plugin volcano-py skips",
              conf_with("- name: sla\n  enableJobOrder: yes please"),
              "tiers[0].plugins[0].enableJobOrder: expected true or false, got 'yes please'"),
    ErrorCase("hierarchical drf beside proportion is refused as Volcano does",
              conf_with("- name: drf\n  enableHierarchy: true\n- name: proportion"),
              "tiers[0]: drf with enableHierarchy: true and proportion conflict in one tier; remove one of "
              "them"),
    ErrorCase("configurations that are not a list are refused",
              conf_with("- name: gang") + "configurations: {allocate: {}}\n",
              "configurations: expected a list of {name, arguments} entries, got {'allocate': {}}"),
    ErrorCase("a configuration for an unknown action is refused",
              conf_with("- name: gang") + "configurations:\n- name: allocat\n",
              "configurations[0].name: unknown action 'allocat' (configurations[0]); did you mean "
              "'allocate'?"),
    ErrorCase("an action configured twice is refused naming both positions",
              conf_with("- name: gang") + "configurations:\n- name: allocate\n- name: allocate\n",
              "configurations[1].name: action 'allocate' is configured twice: at configurations[0] and at "
              "configurations[1]"),
    ErrorCase("a ConfigMap without the conf key is refused",
              "kind: ConfigMap\nmetadata: {name: x}\ndata:\n  other: '1'\n",
              "data: expected key 'volcano-scheduler.conf' in the ConfigMap, found ['other']"),
    ErrorCase("a ConfigMap whose conf is empty is refused",
              "kind: ConfigMap\ndata:\n  volcano-scheduler.conf: ''\n",
              "data.volcano-scheduler.conf: the conf in the ConfigMap is empty"),
    ErrorCase("a YAML error inside a ConfigMap's conf says so",
              "kind: ConfigMap\ndata:\n  volcano-scheduler.conf: |\n    actions: [\n",
              "invalid YAML in the ConfigMap's conf at line 2: expected the node content, but found '<stream "
              "end>'"),
]


@pytest.mark.parametrize("case", ERROR_CASES, ids=[c.name for c in ERROR_CASES])
def test_errors_name_the_file_and_the_field(case: ErrorCase) -> None:
    with pytest.raises(ConfError) as caught:
        parse_conf(case.text, source=SOURCE, implemented_actions=ACTIONS, implemented_plugins=PLUGINS)
    assert str(caught.value) == f"{SOURCE}: {case.message}"
    assert caught.value.source == SOURCE


def test_conf_error_is_a_value_error() -> None:
    assert issubclass(ConfError, ValueError)


def test_an_unreadable_file_is_a_conf_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.conf"
    with pytest.raises(ConfError, match=rf"^{missing}: cannot read the file: "):
        load_conf_file(missing, implemented_actions=ACTIONS, implemented_plugins=PLUGINS)


def test_a_configmap_with_a_single_differently_named_conf_key_is_read(tmp_path: Path) -> None:
    path = tmp_path / "cm.yaml"
    path.write_text(textwrap.dedent("""\
        apiVersion: v1
        kind: ConfigMap
        metadata: {name: sched}
        data:
          volcano-scheduler-ci.conf: |
            actions: "allocate"
            tiers:
            - plugins:
              - name: gang
        """))
    conf = load_conf_file(path, implemented_actions=ACTIONS, implemented_plugins=PLUGINS)
    assert conf.notes == ("read from key 'volcano-scheduler-ci.conf' of ConfigMap sched (a whole manifest "
                          "was given)",)
    assert plugin_names(conf) == [["gang"]]


def test_a_billion_laughs_conf_is_refused_fast() -> None:
    """Nine levels of nine aliases would expand to 9^9 nodes; more than 64 aliases is refused as it is read."""
    import time

    from scheduler.cycle import conf_from_text

    lines = ['a0: &a0 ["lol"]']
    for i in range(1, 10):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    text = "actions: enqueue\n" + "\n".join(lines) + "\n"
    started = time.monotonic()
    with pytest.raises(ConfError, match="more than 64 aliases"):
        conf_from_text(text)
    assert time.monotonic() - started < 2.0


def test_a_conf_larger_than_a_configmap_is_refused(tmp_path: Path) -> None:
    from scheduler.cycle import conf_from_text, load_conf

    path = tmp_path / "big.conf"
    path.write_text('actions: "enqueue, allocate"\n' + "#" * (1 << 20) + "\n")
    with pytest.raises(ConfError, match="more than a ConfigMap holds"):
        load_conf(str(path))
    with pytest.raises(ConfError, match="more than a ConfigMap holds"):
        conf_from_text(path.read_text())
