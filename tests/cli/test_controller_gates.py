"""`volcano-py controllers --controllers`, Volcano's controller gates (cmd/controller-manager/app/server.go
isControllerEnabled and its TestIsControllerEnabled cases; options.go checkControllers and the default
`*,-sharding-controller`), and which of volcano-py's controllers each list turns off."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from scheduler.controllers.operator import OPTIONAL
from scheduler.flags import FlagError, parse_controllers
from scheduler.flags.controller_gates import KNOWN, ControllerGates, parse_controller_gates


@pytest.mark.parametrize(("name", "items", "on"), [
    ("job-controller", ("*",), True),
    ("job-controller", ("*, -job-controller",), False),  # one item, not split: no '*' in the list
    ("sharding-controller", ("-sharding-controller, *, -job-controller",), False),
    ("gc-controller", ("-gc-controller", "+jobtemplate-controller", "+jobflow-controller", "+pg-controller",
                       "+queue-controller"), False),
    ("job-controller", tuple(sorted(KNOWN)), True),
    ("job-controller", ("+gc-controller", "+jobtemplate-controller", "+jobflow-controller"), False),
], ids=["star", "not-split", "not-split-2", "minus-gc", "all-known", "not-listed"])
def test_volcanos_cases(name: str, items: tuple[str, ...], on: bool) -> None:
    assert ControllerGates(items).enabled(name) is on


def test_the_default_is_volcanos_and_runs_every_volcano_py_controller() -> None:
    opts = parse_controllers([])
    assert opts.controllers.items == ("*", "-sharding-controller")
    assert not opts.controllers.enabled("sharding-controller") and opts.controllers.enabled("hyperNode-controller")
    assert opts.controllers.volcano_py >= OPTIONAL and "sharding-controller" not in opts.controllers.volcano_py
    assert opts.controllers.warnings() == ()
    asked = parse_controller_gates(("*", "+sharding-controller"))
    assert asked.warnings() == () and "sharding-controller" in asked.volcano_py  # run only when turned on
    asked = parse_controller_gates(("*", "+colocation-config-controller")).warnings()
    assert asked == ("--controllers: volcano-py has no colocation-config-controller",)


def test_minus_hypernode_controller_turns_discovery_and_node_counts_off_only() -> None:
    opts = parse_controllers(["--controllers=*,-hyperNode-controller"])
    assert OPTIONAL - opts.controllers.volcano_py == {"hyperNode-controller"}


def test_without_a_star_only_the_named_run_and_the_always_on_ones_are_said() -> None:
    gates = parse_controllers(["--controllers", "-hyperNode-controller"]).controllers
    assert OPTIONAL & gates.volcano_py == set()  # Volcano turns every controller no entry names off
    said = gates.warnings()
    assert sum("cannot be turned off" in w for w in said) == 3  # job, queue and gc run all the same


def test_jobflow_and_jobtemplate_are_one_controller_here() -> None:
    one = parse_controllers(["--controllers=*,-jobflow-controller"]).controllers
    assert {"jobflow-controller", "jobtemplate-controller"} <= one.volcano_py
    assert any("jobflow-controller runs" in w for w in one.warnings())
    both = parse_controllers(["--controllers=*,-jobflow-controller,-jobtemplate-controller"]).controllers
    assert not {"jobflow-controller", "jobtemplate-controller"} & both.volcano_py and both.warnings() == ()


@pytest.mark.parametrize("value", ["*,-pg-controller,+pg-controller", "pg-controller,pg-controller",
                                   "-cronjob-controller,cronjob-controller"])
def test_a_controller_named_twice_is_refused(value: str) -> None:
    with pytest.raises(FlagError, match="cannot have both"):
        parse_controllers([f"--controllers={value}"])


def test_an_unknown_name_is_a_warning() -> None:
    assert any("'-nope' names no controller" in w for w in parse_controller_gates(("*", "-nope")).warnings())


NAMES = st.sampled_from(KNOWN)


@given(st.lists(st.tuples(st.sampled_from(("", "+", "-")), NAMES), unique_by=lambda t: t[1], max_size=6),
       st.booleans(), st.integers(0, 6), NAMES)
def test_the_first_entry_naming_a_controller_decides_else_the_star(
        entries: list[tuple[str, str]], star: bool, at: int, name: str) -> None:
    items = [prefix + n for prefix, n in entries]
    if star:
        items.insert(min(at, len(items)), "*")
    gates = parse_controller_gates(items)
    named = [prefix for prefix, n in entries if n == name]
    expected = (named[0] != "-") if named else (star or not items)
    assert gates.enabled(name) is expected


def _handlers(enabled: frozenset[str]) -> set[str]:
    from types import SimpleNamespace

    from scheduler.controllers.operator import build, registry_for

    api = SimpleNamespace(kube=None)
    registry = registry_for(build(api, ["volcano-py"], False), lambda: None, enabled)  # type: ignore[arg-type,return-value]
    return {str(h.id).rsplit(".", 1)[-1] for h in registry._watching.get_all_handlers()}


@pytest.mark.parametrize(("off", "gone"), [
    ("-hyperNode-controller", {"node_event", "hypernode_event"}),
    ("-pg-controller", {"plain_pod_event", "replicaset_event", "statefulset_event"}),
    ("-cronjob-controller", {"cronjob_job_event", "cronjob_event"}),
    ("-jobflow-controller,-jobtemplate-controller", {"jobflow_job_event", "jobflow_event", "jobtemplate_event"}),
])
def test_a_controller_turned_off_registers_no_handler(off: str, gone: set[str]) -> None:
    every = _handlers(parse_controllers([]).controllers.volcano_py)
    assert gone <= every
    assert every - _handlers(parse_controllers([f"--controllers=*,{off}"]).controllers.volcano_py) == gone
