"""One duration grammar for every option and field (issue 38): each duration-typed option of every command line
reads Go's durations (and plain seconds, as before) through the one parser, and so do the duration fields of a
workload and of a scheduler conf."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from scheduler.cli import parser
from scheduler.durations import Seconds
from scheduler.flags import CONTROLLERS, SCHEDULER, WEBHOOK, FlagSet, Kind

# An option whose name says it holds a time. Every one must read durations; a new one that does not fails here.
TIME_WORDS = re.compile(r"(timeout|period|horizon|duration|deadline|interval|frequency|delay|ttl|grace|wait)")


def parsers(p: argparse.ArgumentParser, path: str = "volcano-py") -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield path, p
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from parsers(child, f"{path} {name}")


def options(p: argparse.ArgumentParser) -> Iterator[argparse.Action]:
    return (a for a in p._actions if a.option_strings)


ALL = list(parsers(parser()))


def test_the_walk_reaches_every_command() -> None:
    paths = {path for path, _ in ALL}
    assert {"volcano-py simulate", "volcano-py explain", "volcano-py job run", "volcano-py queue list",
            "volcano-py pod list", "volcano-py jobflow describe", "volcano-py conf check"} <= paths


@pytest.mark.parametrize(("path", "p"), ALL, ids=[path for path, _ in ALL])
def test_every_time_option_reads_the_one_grammar(path: str, p: argparse.ArgumentParser) -> None:
    for action in options(p):
        names = " ".join(action.option_strings)
        if TIME_WORDS.search(names):
            assert isinstance(action.type, Seconds), f"{path} {names} does not read durations"
        if isinstance(action.type, Seconds):
            assert action.type("1m30s") == 90.0
            assert action.type("90") == 90.0  # plain numbers stay seconds
            assert action.type("1.5") == 1.5


def test_the_walk_found_duration_options() -> None:
    found = {(path, a.dest) for path, p in ALL for a in options(p) if isinstance(a.type, Seconds)}
    assert ("volcano-py simulate", "period") in found
    assert ("volcano-py simulate", "horizon") in found
    assert ("volcano-py job list", "request_timeout") in found
    assert ("volcano-py explain", "request_timeout") in found


@pytest.mark.parametrize("flags", [SCHEDULER, CONTROLLERS, WEBHOOK], ids=lambda f: f.command)
def test_every_time_flag_of_the_components_is_a_go_duration(flags: FlagSet) -> None:
    timed = [f for f in flags.flags if TIME_WORDS.search(f.name)]
    assert timed or flags is WEBHOOK
    for flag in timed:
        assert flag.kind is Kind.DURATION, f"--{flag.name} of {flags.command} does not read durations"
    for flag in (f for f in timed if f.honoured):
        parsed = flags.parse([f"--{flag.name}=1m30s"])
        assert parsed.values[flag.dest] == 90.0  # type: ignore[index]
        assert flags.parse([f"--{flag.name}", "90"]).values[flag.dest] == 90.0  # type: ignore[index]


def test_the_commands_issue_38_names_accept_go_durations() -> None:
    sim = parser().parse_args(["simulate", "c.yaml", "w.yaml", "--period", "1s", "--horizon", "10m"])
    assert (sim.period, sim.horizon) == (1.0, 600.0)
    ctl = parser().parse_args(["job", "list", "--request-timeout", "5s"])
    assert ctl.request_timeout == 5.0
    assert SCHEDULER.parse(["--request-timeout", "5s"]).values["request_timeout"] == 5.0


@pytest.mark.parametrize("bad", ["soon", "5", "-1s", "0"])
def test_a_bad_period_is_refused_in_one_line(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    if bad == "5":
        assert parser().parse_args(["simulate", "--period", bad]).period == 5.0
        return
    with pytest.raises(SystemExit) as exc:
        parser().parse_args(["simulate", f"--period={bad}"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--period" in err and repr(bad) in err


def test_workload_arrival_and_duration_take_go_durations(tmp_path: Path) -> None:
    from scheduler.sim.workload import load_workload

    job = ("- apiVersion: batch.volcano.sh/v1alpha1\n  kind: Job\n  metadata: {{name: {name}}}\n  arrival: {arrival}\n"
           "  duration: {duration}\n  spec:\n    minAvailable: 1\n    tasks:\n    - replicas: 1\n      template:\n"
           "        spec:\n          containers:\n          - {{name: c, image: x, resources: {{requests: {{cpu: "
           "'1'}}}}}}\n")
    text = "jobs:\n" + job.format(name="a", arrival="1m30s", duration="2h") + job.format(name="b", arrival=90,
                                                                                         duration=7200)
    (tmp_path / "w.yaml").write_text(text)
    items = load_workload(tmp_path / "w.yaml").items
    assert [(i.arrival, i.duration) for i in items] == [(90.0, 7200.0), (90.0, 7200.0)]


def test_the_sla_waiting_time_of_a_conf_is_a_go_duration() -> None:
    from scheduler.cycle import conf_from_text

    conf = conf_from_text('actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: sla\n    arguments:\n'
                          "      sla-waiting-time: 1m30s\n")
    (sla,) = [p for t in conf.tiers for p in t.plugins if p.name == "sla"]
    assert sla.args.waiting_time == 90.0  # type: ignore[attr-defined]


def test_simulate_prints_durations_in_the_one_grammar(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from scheduler.cli import main

    def vcjob(name: str, created: str) -> dict[str, object]:
        return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                "metadata": {"name": name, "namespace": "t", "creationTimestamp": created},
                "spec": {"minAvailable": 1, "tasks": [{"name": "w", "replicas": 1, "template": {"spec": {
                    "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}]},
                "status": {"state": {"phase": "Pending", "lastTransitionTime": created}}}

    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
            "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}}}
    dump = tmp_path / "dump.json"
    dump.write_text(json.dumps({"kind": "List", "items": [
        node, vcjob("a", "2026-11-30T10:00:00Z"), vcjob("b", "2026-11-30T11:01:30Z")]}))
    assert main(["simulate", "--from-cluster", str(dump), "--json"]) == 0
    err = capsys.readouterr().err
    assert "the dump was taken 1h1m30s after its first arrival" in err
