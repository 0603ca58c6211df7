"""The command line: user errors name the file and field, exit 2, and never print a traceback."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from scheduler.cli import main
from scheduler.durations import parse_go_duration

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "sim"
GOOD_CLUSTER = "nodes:\n- {name: n, gpu: 8}\n"
GOOD_WORKLOAD = (EXAMPLES / "two-gangs.yaml").read_text()


@dataclass(frozen=True)
class Bad:
    name: str
    cluster: str
    workload: str
    expect: tuple[str, ...]


BAD = [
    Bad("a cluster file that is not YAML names the line", "nodes: [\n", GOOD_WORKLOAD, ("cluster.yaml", "line")),
    Bad("a cluster without nodes says nodes are expected", "queues: []\n", GOOD_WORKLOAD, ("cluster.yaml", "nodes")),
    Bad(
        "a bad node quantity names the node and resource",
        "nodes:\n- {name: n, cpu: lots}\n",
        GOOD_WORKLOAD,
        ("cluster.yaml", "nodes[0]", "cpu", "lots"),
    ),
    Bad(
        "an unknown node key is named",
        "nodes:\n- {name: n, gpus: 8}\n",
        GOOD_WORKLOAD,
        ("nodes[0].gpus", "unknown key"),
    ),
    Bad(
        "a negative arrival names the job",
        GOOD_CLUSTER,
        "jobs:\n- arrival: -1\n  kind: Job\n  metadata: {name: j}\n  spec: {tasks: [{name: w, replicas: 1}]}\n",
        ("workload.yaml", "jobs[0].arrival"),
    ),
    Bad(
        "an invalid Job names the field as the admission webhook would",
        GOOD_CLUSTER,
        "jobs:\n- kind: Job\n  metadata: {name: j}\n  spec: {minAvailable: 5, tasks: [{name: w, replicas: 2}]}\n",
        ("workload.yaml", "jobs[0]", "minAvailable"),
    ),
    Bad(
        "an unknown kind is named",
        GOOD_CLUSTER,
        "jobs:\n- kind: DaemonSet\n  metadata: {name: d}\n",
        ("jobs[0].kind", "DaemonSet"),
    ),
]


@pytest.mark.parametrize("case", BAD, ids=lambda c: c.name)
def test_bad_simulator_input_exits_2_with_file_and_field(
    case: Bad, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "cluster.yaml").write_text(case.cluster)
    (tmp_path / "workload.yaml").write_text(case.workload)
    code = main(["simulate", str(tmp_path / "cluster.yaml"), str(tmp_path / "workload.yaml")])
    err = capsys.readouterr().err
    assert code == 2
    assert "Traceback" not in err
    for needle in case.expect:
        assert needle in err


def test_a_missing_file_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["simulate", str(tmp_path / "nope.yaml"), str(tmp_path / "w.yaml")])
    assert code == 2 and "nope.yaml" in capsys.readouterr().err


def test_a_conf_with_a_typo_is_rejected_with_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    conf = tmp_path / "volcano-scheduler.conf"
    conf.write_text('actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: gnag\n')
    code = main(["simulate", str(EXAMPLES / "gpu-cluster.yaml"), str(EXAMPLES / "two-gangs.yaml"), "--conf", str(conf)])
    err = capsys.readouterr().err
    assert code == 2 and "tiers[0].plugins[0]" in err and "gang" in err


def test_conf_check_lists_used_and_skipped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    conf = tmp_path / "volcano-scheduler.conf"
    conf.write_text('actions: "enqueue, allocate, backfill"\ntiers:\n- plugins:\n  - name: gang\n  - name: sla\n')
    assert main(["conf", "check", str(conf)]) == 0
    out = capsys.readouterr().out
    assert "gang" in out and "sla" in out


def test_simulate_prints_the_report(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["simulate", str(EXAMPLES / "gpu-cluster.yaml"), str(EXAMPLES / "two-gangs.yaml"), "--compare-per-pod"])
    out = capsys.readouterr().out
    assert code == 0
    assert "volcano-py (gang scheduling)" in out and "per-pod baseline" in out and "STALLED" in out


def test_simulate_compares_two_confs_side_by_side(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    no_gang = tmp_path / "no-gang.conf"
    no_gang.write_text('actions: "enqueue, allocate, backfill"\ntiers:\n- plugins:\n  - name: priority\n'
                       "  - name: conformance\n- plugins:\n  - name: predicates\n")
    args = ["simulate", str(EXAMPLES / "gpu-cluster.yaml"), str(EXAMPLES / "two-gangs.yaml"), "--compare", str(no_gang)]
    code = main(args)
    out = capsys.readouterr().out
    assert code == 1  # the conf without the gang plugin left gangs partly bound
    table = out[out.index("== comparison =="):].splitlines()
    assert table[1] == "[1] volcano-py with built-in default" and table[2] == f"[2] volcano-py with {no_gang}"
    partial = next(line for line in table if line.startswith("cycles with a partly bound gang")).split()
    wait = next(line for line in table if line.startswith("wait mean")).split()
    assert partial[-2] == "0" and int(partial[-1]) > 0
    # gangs held GPUs while waiting for siblings (waits print in the duration grammar: `3m24s`)
    assert parse_go_duration(wait[-2]) < parse_go_duration(wait[-1])

    assert main([*args, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["volcano-py with built-in default"]["finished"] == 3
    assert report[f"volcano-py with {no_gang}"]["partial_gang_cycles"] > 0
