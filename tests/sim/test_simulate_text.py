"""`volcano-py simulate`'s text tables read as people read durations and reasons (issue 38): waits in the one
duration grammar (`10m7s`, not `607s`, `204.333s` or `1e+12s`), `never` for a job that never could start, the
REASON column cut to a readable width with the whole reason in --json, per-pod rows saying how far their gang got
("6/8 bound"), the shares of replays side by side over one window, and an empty workload refused in one line."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from scheduler.cli import main
from scheduler.cycle import builtin_default_conf
from scheduler.durations import SECOND, parse_go_duration
from scheduler.sim.naive import per_pod_cycle
from scheduler.sim.replay import Replay, replay
from scheduler.sim.report import REASON_WIDTH, common_window, job_rows, render, show_time, totals
from scheduler.sim.workload import load_cluster, load_workload

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "sim"
CLUSTER, GANGS = EXAMPLES / "gpu-cluster.yaml", EXAMPLES / "two-gangs.yaml"


@pytest.fixture(scope="module")
def gang() -> Replay:
    return replay(load_cluster(CLUSTER), load_workload(GANGS), builtin_default_conf())


@pytest.fixture(scope="module")
def per_pod() -> Replay:
    return replay(load_cluster(CLUSTER), load_workload(GANGS), scheduler=per_pod_cycle)


def _table(text: str) -> list[dict[str, str]]:
    """The job table of one rendered replay, cut at the header's column starts."""
    lines = text.splitlines()
    header = lines[1]
    starts = [m.start() for m in re.finditer(r"\S+", header)]
    names = header.split()
    rows = []
    for line in lines[2:]:
        if not line.strip() or line.startswith("("):
            break
        cells = [line[a:b].strip() for a, b in zip(starts, [*starts[1:], None], strict=True)]
        rows.append(dict(zip(names, cells, strict=True)))
    return rows


def test_waits_are_printed_in_the_duration_grammar(gang: Replay) -> None:
    rows = {row.name: row for row in job_rows(gang)}
    table = _table(render(gang, "gang"))
    assert table and all(cell["WAIT"] != "-" for cell in table)
    for cell in table:
        wait = rows[cell["JOB"]].wait
        assert wait is not None
        parsed = parse_go_duration(cell["WAIT"]) / SECOND  # Go's grammar reads it back
        assert parsed == (round(wait) if wait >= 10 else wait)
    long_wait = max(table, key=lambda c: parse_go_duration(c["WAIT"]))
    assert re.fullmatch(r"\d+m\d+s", long_wait["WAIT"])  # minutes spelt as minutes, not 607s


def test_no_float_spelling_reaches_the_text(gang: Replay, per_pod: Replay) -> None:
    text = render(gang, "gang") + render(per_pod, "per-pod")
    assert not re.search(r"\d\.\d{3,}s|e\+\d", text)  # no 204.333s, no 1e+12s


@pytest.mark.parametrize("value", [math.inf, 1e12, 1e9])
def test_an_infinite_or_absurd_wait_reads_never(value: float) -> None:
    assert show_time(value) == "never"


def test_a_job_that_never_started_waits_never_and_its_row_says_how_far_its_gang_got(per_pod: Replay) -> None:
    table = {c["JOB"]: c for c in _table(render(per_pod, "per-pod"))}
    assert per_pod.stalled
    gpus_bound = 0
    for job in ("llama-a", "llama-b", "notebook"):
        key = f"default/{job}"
        pods = per_pod.cluster.pods_of(key)
        bound = [p for p in pods if p.manifest["spec"].get("nodeName")]
        gpus_bound += sum(p.task.resreq.gpu for p in bound)
        assert table[job]["WAIT"] == "never"
        assert table[job]["PODS"] == f"{len(bound)}/{len(pods)} bound"
    # The per-pod scheduler interleaves two 8-pod gangs on 12 GPUs: all 12 held, neither gang whole.
    assert gpus_bound == per_pod.cluster.total_gpus()
    assert table["llama-a"]["PODS"] == "6/8 bound"


def test_a_long_reason_is_cut_to_a_readable_width_and_whole_in_json(gang: Replay, capsys: pytest.CaptureFixture[
        str]) -> None:
    text = render(gang, "gang")
    rows = {row.name: row for row in job_rows(gang)}
    full = rows["llama-b"].reason
    assert len(full) > REASON_WIDTH  # overcommit's sentence is long: the case this test is about
    cell = _table(text)[1]
    assert cell["JOB"] == "llama-b" and len(cell["REASON"]) == REASON_WIDTH and cell["REASON"].endswith("…")
    assert full.startswith(cell["REASON"][:-1])
    assert max(len(line) for line in text.splitlines()) < 200
    assert "--json" in text  # the note says where the whole reason is
    assert main(["simulate", str(CLUSTER), str(GANGS), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    job = next(j for j in out["volcano-py (gang scheduling)"]["jobs"] if j["name"] == "llama-b")
    assert job["said"][-1]["message"] == full
    assert job["said"][-1]["decision"]["reasons"][0]["kind"] == "OvercommitLimit"


def test_replays_side_by_side_share_one_window(gang: Replay, per_pod: Replay) -> None:
    own = totals(per_pod)
    shared = common_window([totals(gang), own])
    assert shared[0] == totals(gang)  # the longer replay is its own window
    assert shared[1].window == (0.0, totals(gang).window[1])
    # The per-pod replay held every GPU from its first bind on and would hold them for ever: over the gang
    # replay's 20 minutes that is nearly all of the window, more than over its own 31 s.
    first_full = next(t for t, held, _ in per_pod.utilisation if held == 1.0)
    expected = (shared[1].window[1] - first_full) / shared[1].window[1]
    assert shared[1].gpu_held >= expected > own.gpu_held
    assert shared[1].gpu_utilisation == 0.0


def test_the_comparison_says_its_window(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", str(CLUSTER), str(GANGS), "--compare-per-pod"]) == 0
    out = capsys.readouterr().out
    comparison = out[out.index("== comparison =="):]
    held = next(line for line in comparison.splitlines() if line.startswith("GPUs held"))
    per_pod_held = float(held.split()[-1].rstrip("%"))
    assert per_pod_held > 99.0  # not the 96.8% of its own 31 s
    assert "means over the same window, 0s to 20m7s" in comparison


@pytest.mark.parametrize("text", ["jobs: []\n", "", "# nothing yet\n"])
def test_an_empty_workload_is_one_line_and_exit_2(tmp_path: Path, text: str,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "w.yaml").write_text(text)
    assert main(["simulate", str(CLUSTER), str(tmp_path / "w.yaml")]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert len(captured.err.splitlines()) == 1 and "no jobs to replay" in captured.err


def test_a_cluster_without_gpus_reports_its_cpu_shares(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "c.yaml").write_text("nodes:\n- {name: cpu, count: 2, cpu: 8}\n")
    (tmp_path / "w.yaml").write_text(
        "jobs:\n- {kind: Job, metadata: {name: etl}, duration: 30, spec: {minAvailable: 2, tasks: [{name: w, "
        "replicas: 2, template: {spec: {containers: [{name: c, image: x, resources: {requests: {cpu: '6'}}}]}}}]}}\n")
    outcome = replay(load_cluster(tmp_path / "c.yaml"), load_workload(tmp_path / "w.yaml"), builtin_default_conf())
    t = totals(outcome)
    assert t.resource == "cpu" and t.what == "cpu"
    # 12 of the 16 cores held while the gang runs its 30 s: the share is 0.75 of the running stretch, not 0.
    running = [tick for tick in outcome.ticks if tick.busy]
    assert running and {tick.busy for tick in running} == {0.75} and t.gpu_utilisation > 0
    text = render(outcome, "cpu")
    assert "cpu held (mean)" in text and "GPUs" not in text
