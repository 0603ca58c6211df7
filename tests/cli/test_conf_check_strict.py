"""`volcano-py conf check`: action arguments checked like plugin arguments, `--strict` for CI, `-o json`, and a
conf of comments only said in one clear line (issue 38)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scheduler.cli import main

HEAD = 'actions: "enqueue, allocate, backfill"\ntiers:\n- plugins:\n  - name: gang\n'


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["conf", "check", *args])
    out, err = capsys.readouterr()
    return code, out, err


def conf(tmp_path: Path, configurations: str = "") -> str:
    path = tmp_path / "volcano-scheduler.conf"
    path.write_text(HEAD + configurations)
    return str(path)


MISSPELT = "configurations:\n- name: allocate\n  arguments:\n    starvationThresholdSecond: 60\n"
BAD_VALUE = "configurations:\n- name: allocate\n  arguments:\n    starvationThresholdSeconds: abc\n"


def test_a_misspelt_action_argument_is_a_warning_naming_action_key_and_the_value_used(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, conf(tmp_path, MISSPELT), "-o", "json")
    assert code == 0
    doc = json.loads(out)
    assert doc["argumentWarnings"] == [{
        "action": "allocate", "key": "starvationThresholdSecond", "value": 60, "problem": "unknown argument",
        "suggestion": "starvationThresholdSeconds",
        "using": "allocate uses starvationThresholdSeconds=300 (the default)"}]
    assert len(doc["warnings"]) == 1


def test_a_bad_action_argument_value_is_a_warning_with_the_default_used(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, conf(tmp_path, BAD_VALUE))
    assert code == 0
    lines = out.splitlines()
    assert "warnings (1):" in lines
    (warning,) = [line for line in lines[lines.index("warnings (1):"):] if "abc" in line]
    assert "allocate" in warning and "'abc'" in warning and "uses 300 (the default)" in warning
    assert "warnings: none" not in out


@pytest.mark.parametrize(("action", "key", "value", "default"), [
    ("gangpreempt", "maxDomains", "0", 8), ("gangreclaim", "allowWholeBundle", "sometimes", True),
    ("preempt", "enableTopologyAwarePreemption", "yes", False), ("allocate", "predicateErrorCacheEnable", "2", True),
    ("allocate", "starvationHoldIdle", "soon", "off"), ("allocate", "starvationHoldIdle", "-5m", "off"),
])
def test_every_action_argument_is_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str], action: str,
                                          key: str, value: str, default: object) -> None:
    text = f"configurations:\n- name: {action}\n  arguments:\n    {key}: '{value}'\n"
    _, out, _ = run(capsys, conf(tmp_path, text), "-o", "json")
    (warning,) = json.loads(out)["argumentWarnings"]
    assert (warning["action"], warning["key"], warning["value"]) == (action, key, value)
    assert (default if isinstance(default, str) else json.dumps(default)) in warning["using"]


def test_good_action_arguments_warn_of_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = ("configurations:\n- name: allocate\n  arguments:\n    starvationThresholdSeconds: -1\n"
            "    predicateErrorCacheEnable: 'false'\n    starvationHoldIdle: 1h\n"
            "- name: gangpreempt\n  arguments:\n    maxDomains: 3\n")
    code, out, _ = run(capsys, conf(tmp_path, text), "--strict")
    assert code == 0
    assert "warnings: none" in out.splitlines()


def test_strict_exits_non_zero_on_warnings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = conf(tmp_path, MISSPELT)
    assert run(capsys, path)[0] == 0
    code, _, err = run(capsys, path, "--strict")
    assert code == 1
    assert err.strip().count("\n") == 0 and "1 warning" in err


def test_strict_counts_the_loaders_own_warnings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "c.conf"
    path.write_text(HEAD + "disableTaskOrder: true\n")  # a key Volcano ignores: the loader warns
    assert run(capsys, str(path), "--strict")[0] == 1


def test_json_output_is_the_conf_as_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, conf(tmp_path), "-o", "json")
    doc = json.loads(out)
    assert code == 0
    assert doc["actions"] == ["enqueue", "allocate", "backfill"]
    assert [[p["name"] for p in tier] for tier in doc["tiers"]] == [["gang"]]
    assert doc["warnings"] == [] and doc["argumentWarnings"] == []


def test_a_conf_of_comments_only_says_so_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "comments.conf"
    path.write_text("# actions: \"enqueue, allocate\"\n\n# tiers: []\n")
    code, out, err = run(capsys, str(path))
    assert code == 2 and out == ""
    assert err.strip().count("\n") == 0
    assert "only comments" in err and str(path) in err and "NoneType" not in err


def test_simulate_warns_of_bad_action_arguments_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from scheduler.conf_check import action_warnings
    from scheduler.cycle import load_conf

    (warning,) = action_warnings(load_conf(conf(tmp_path, BAD_VALUE)))
    assert (warning.action, warning.key, warning.value) == ("allocate", "starvationThresholdSeconds", "abc")


def test_the_scheduler_logs_bad_action_arguments_when_it_loads_the_conf(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    import logging

    from scheduler.cache.runner import ConfWatcher

    with caplog.at_level(logging.WARNING, logger="volcano_py.scheduler"):
        loaded = ConfWatcher(conf(tmp_path, BAD_VALUE)).current()
    assert loaded.configurations["allocate"]["starvationThresholdSeconds"] == "abc"
    (line,) = [r.getMessage() for r in caplog.records if "starvationThresholdSeconds" in r.getMessage()]
    assert line.startswith("scheduler conf: configurations (allocate)") and "uses 300 (the default)" in line


def test_an_argument_only_volcanos_action_reads_is_a_warning_saying_so(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = ("configurations:\n- name: preempt\n  arguments:\n    minCandidateNodesPercentage: 10\n")
    _, out, _ = run(capsys, conf(tmp_path, text), "-o", "json")
    (warning,) = json.loads(out)["argumentWarnings"]
    assert (warning["action"], warning["key"], warning["problem"]) == (
        "preempt", "minCandidateNodesPercentage", "not supported by volcano-py")
    assert warning["using"] == "volcano-py's preempt does not read it (Volcano's does)"
