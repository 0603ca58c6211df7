"""`volcano-py bench packing` on a tiny trace: seeds from --first-seed, and the scoring-cost mode. The benchmark
is bench/bench_packing.py, outside the product package; the CLI finds it in the clone."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from scheduler.cli import bench_module, main as volcano_py

packing = bench_module("packing")
load_nodes, load_pods = packing.load_nodes, packing.load_pods
run_once, score_cost = packing.run_once, packing.score_cost

NODES = "sn,cpu_milli,memory_mib,gpu,model\n" + "".join(
    f"n{i},32000,131072,{g},T4\n" for i, g in enumerate([8, 4, 2, 2])
)
PODS = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
PODS += "".join(
    f"p{i},{cpu},1024,{n},{m},,,,0,0,0\n"
    for i, (cpu, n, m) in enumerate([(2000, 1, 1000), (1000, 1, 500), (1000, 1, 300), (4000, 2, 1000), (500, 0, 0)])
)


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    (tmp_path / "openb_node_list_gpu_node.csv").write_text(NODES)
    (tmp_path / "openb_pod_list_default.csv").write_text(PODS)
    return tmp_path


def test_the_seeds_start_at_first_seed(trace: Path) -> None:
    out = trace / "out"
    args = ["--trace-dir", str(trace), "--policies", "fgd-blend,bestfit", "--seeds", "2", "--workers", "1"]
    assert volcano_py(["bench", "packing", *args, "--first-seed", "100", "--out", str(out)]) == 0
    rows = list(csv.DictReader((out / "packing_summary.csv").open()))
    assert [(r["policy"], r["seeds"]) for r in rows] == [("fgd-blend", "2"), ("bestfit", "2")]
    nodes, pods = load_nodes(trace / "openb_node_list_gpu_node.csv"), load_pods(trace / "openb_pod_list_default.csv")

    def mean(seeds: tuple[int, int]) -> float:
        return 100 * sum(run_once("fgd-blend", nodes, pods, s).allocated[-1] for s in seeds) / 2

    assert float(rows[0]["allocated_pct_at_130"]) == pytest.approx(mean((100, 101)), abs=0.006)
    assert mean((0, 1)) != pytest.approx(mean((100, 101)), abs=0.006)  # so the seeds really were 100 and 101


def test_score_cost_times_shares_and_whole_gpus(trace: Path) -> None:
    nodes, pods = load_nodes(trace / "openb_node_list_gpu_node.csv"), load_pods(trace / "openb_pod_list_default.csv")
    cost = score_cost("fgd-blend", nodes, pods, samples=20)
    assert set(cost) == {"share", "whole"}
    assert all(0 < med <= p99 for med, p99 in cost.values())


def test_an_installed_package_without_bench_says_it_needs_a_clone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("scheduler.cli.BENCH_DIR", tmp_path / "bench")
    assert volcano_py(["bench", "packing", "--seeds", "1"]) == 2
    assert "runs from a clone of volcano-py" in capsys.readouterr().err
