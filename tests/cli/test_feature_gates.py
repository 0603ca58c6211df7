"""`--feature-gates` as Volcano's components parse it (component-base's featuregate): the syntax, its errors (one
line each, naming the value), Volcano's default for SchedulingGatesQueueAdmission (off), and one warning for a
gate volcano-py does not act on."""

from __future__ import annotations

import pytest

from scheduler.flags import FlagError, parse_controllers, parse_scheduler, parse_webhook

PARSERS = [parse_scheduler, parse_webhook]


@pytest.mark.parametrize("parse", PARSERS)
@pytest.mark.parametrize(("argv", "on"), [
    ([], False),  # Volcano's default: pkg/features/volcano_features.go, alpha, off
    (["--feature-gates=SchedulingGatesQueueAdmission=true"], True),
    (["--feature-gates", " SchedulingGatesQueueAdmission = True ,"], True),  # trimmed, empty items skipped
    (["--feature-gates=SchedulingGatesQueueAdmission=1"], True),  # strconv.ParseBool's spellings
    (["--feature-gates=SchedulingGatesQueueAdmission=true", "--feature-gates=SchedulingGatesQueueAdmission=false"],
     False),  # a later occurrence replaces an earlier one
    (["--feature-gates=AllAlpha=true"], True),  # every alpha gate not named itself
    (["--feature-gates=AllAlpha=true,SchedulingGatesQueueAdmission=false"], False),
    (["--feature-gates=AllBeta=true"], False),  # it is alpha
])
def test_the_queue_admission_gate(parse, argv, on) -> None:
    assert parse(argv).feature_gates.queue_admission is on


@pytest.mark.parametrize("parse", PARSERS)
@pytest.mark.parametrize(("value", "error"), [
    ("Foo=true", "unrecognized feature gate: Foo"),
    ("SchedulingGatesQueueAdmission", "missing bool value for SchedulingGatesQueueAdmission"),
    ("SchedulingGatesQueueAdmission=yes",
     'invalid value of SchedulingGatesQueueAdmission=yes, err: strconv.ParseBool: parsing "yes": invalid syntax'),
    ("VolcanoJobSupport=true,Nope=false", "unrecognized feature gate: Nope"),
])
def test_a_value_volcano_refuses_is_one_line_naming_it(parse, value, error) -> None:
    with pytest.raises(FlagError) as caught:
        parse([f"--feature-gates={value}"])
    assert str(caught.value) == f"invalid argument {value!r} for --feature-gates: {error}"
    assert "\n" not in str(caught.value)


def test_kubernetes_gates_are_accepted_with_a_warning_as_volcano_accepts_them() -> None:
    opts = parse_scheduler(["--feature-gates=DynamicResourceAllocation=true,VolcanoJobSupport=false,"
                            "PriorityClass=true,SchedulingGatesQueueAdmission=true"])
    assert sorted(i.arg for i in opts.ignored) == ["feature-gates DynamicResourceAllocation",
                                                   "feature-gates VolcanoJobSupport=false"]


def test_the_controllers_accept_the_flag_without_effect() -> None:
    opts = parse_controllers(["--feature-gates=SchedulingGatesQueueAdmission=true"])
    assert [i.arg for i in opts.ignored] == ["feature-gates"]
