"""`make bench-day`'s measures (bench/gpu_day_metrics.py) on cases worked out by hand, the workload's shape
(bench/gpu_day_workload.py), the targets' verdicts, and a `--quick` day end to end (bench/bench_gpu_day.py).
The full day is `make bench-day`, not part of `make test`."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from scheduler.cli import bench_module

bench = bench_module("gpu_day")
import gpu_day_metrics as m  # noqa: E402  (bench_module put bench/ on the path)
import gpu_day_workload as w  # noqa: E402

H = 3600.0


def job(gpus: int, arrival: float, started: float | None, until: float = 0.0, queue: str = "a",
        lost: tuple[tuple[float, float], ...] = (), every: float | None = None) -> m.JobOutcome:
    return m.JobOutcome(f"j{gpus}-{arrival}", queue, gpus, arrival, started, until, lost, every)


def test_jain_index_is_one_for_equal_values_and_one_over_n_when_one_has_everything() -> None:
    assert m.jain([1.0, 1.0, 1.0]) == pytest.approx(1.0)
    assert m.jain([4 / 3, 0.0]) == pytest.approx(0.5)
    assert m.jain([1.0, 0.5]) == pytest.approx(1.5**2 / (2 * 1.25))  # 0.9


def test_max_min_fair_shares_fill_the_small_demands_and_split_the_rest_evenly() -> None:
    assert m.max_min_fair({"a": 8, "b": 2}, 8) == pytest.approx({"a": 6, "b": 2})
    assert m.max_min_fair({"a": 10, "b": 10, "c": 1}, 9) == pytest.approx({"a": 4, "b": 4, "c": 1})
    assert m.max_min_fair({"a": 3, "b": 3}, 8) == pytest.approx({"a": 3, "b": 3})  # enough for everyone


def test_hourly_fairness_skips_hours_with_one_queue_and_divides_by_the_fair_share() -> None:
    # 8 GPUs. Hour 0: a asks 8 and holds 6, b asks 2 and holds 2 (fair: 6 and 2) -> x = 1, 1.
    # Hour 1: a holds all 8, b holds none of its 2 -> x = 8/6, 0 -> 0.5. Hour 2: only a asks -> not counted.
    demand = {"a": [8.0, 8.0, 8.0], "b": [2.0, 2.0, 0.0]}
    held = {"a": [6.0, 8.0, 8.0], "b": [2.0, 0.0, 0.0]}
    out = m.hourly_fairness(held, demand, 8.0, 3)
    assert [h for h, _ in out] == [0, 1]
    assert [v for _, v in out] == pytest.approx([1.0, 0.5])


def test_hourly_demand_and_held_split_a_job_over_the_hours_it_spans() -> None:
    demand = m.hourly_demand([job(8, 0.5 * H, 0.5 * H, until=1.5 * H, queue="b")], ["a", "b"], 3)
    assert demand == {"a": [0.0, 0.0, 0.0], "b": pytest.approx([4.0, 4.0, 0.0])}
    # 8 GPUs held from 0.5 h, 2 from 1.5 h: step samples
    assert m.hourly([(0.5 * H, 8.0), (1.5 * H, 2.0)], 2) == pytest.approx([4.0, 5.0])


def test_lost_gpu_hours_since_start_and_since_the_last_checkpoint() -> None:
    # 16 GPUs broke after 45 min of running, checkpointing every 30 min: 12 GPU-h since its start, 4 since its
    # last checkpoint (15 min); 1 GPU broke after 1 h with no checkpoint: 1 and 1.
    jobs = [job(16, 0, 0, lost=((2700.0, 2700.0),), every=1800.0), job(1, 0, 0, lost=((3600.0, 3600.0),))]
    assert m.lost_gpu_hours(jobs) == pytest.approx((13.0, 5.0))


def test_waits_by_class_count_each_class_and_leave_small_classes_not_measured() -> None:
    ones = [job(1, 0.0, 60.0 * k) for k in range(1, 51)]  # 50 jobs waiting 1..50 min
    smalls = [job(4, 0.0, 10.0) for _ in range(49)]
    bigs = [job(16, 100.0, None)]  # never started: waits until the replay's end
    waits = m.waits_by_class([*ones, *smalls, *bigs], end=1000.0)
    assert (waits["1"].jobs, waits["2-8"].jobs, waits["16-64"].jobs) == (50, 49, 1)
    assert waits["1"].p50 == 25 * 60.0 and waits["1"].p95 == 48 * 60.0  # nearest rank: 25th and 48th of 50
    assert not waits["2-8"].measured and waits["2-8"].p95 is None
    assert waits["16-64"].never_started == 1 and not waits["16-64"].measured


def test_targets_compare_with_volcanos_conf_and_the_day_budget() -> None:
    def result(name: str, p95: float, work: float, lost: float, fair: float) -> object:
        waits = {c: m.ClassWaits(c, 60, p95 / 2, p95, 0) for c in w.CLASSES}
        return bench.Result(name, waits, work, 0, 0, lost, lost, [(0, fair)], 0.0, 0, 0)

    base = result("volcano", 100.0, 1000.0, 0.0, 0.8)
    good = bench.targets(result("all", 50.0, 1000.0, 38.4, 0.95), base, 80, 24 * H)
    bad = bench.targets(result("all", 51.0, 999.0, 38.5, 0.949), base, 80, 24 * H)
    assert [met for _, met, _ in good] == [True, True, True, True]  # 2% of 80 x 24 GPU-h is 38.4
    assert [met for _, met, _ in bad] == [False, False, False, False]


def test_the_workload_is_seeded_and_has_the_queues_and_classes_it_says() -> None:
    spec = w.DaySpec()
    docs = w.workload_docs(spec)
    assert docs == w.workload_docs(spec)
    sizes = [w.class_of(w.gpus_of(d)) for d in docs]
    assert [sizes.count(c) for c in w.CLASSES] == list(spec.per_class)
    assert min(spec.per_class) >= m.MIN_CLASS_JOBS
    per_queue = {q: [d for d in docs if d["spec"]["queue"] == q] for q in w.QUEUES}
    assert len(per_queue["heavy"]) > 2 * max(len(per_queue[q]) for q in ("team-b", "team-c", "night"))
    night = [d["arrival"] for d in per_queue["night"]]
    assert sum(1 for t in night if t < 6 * H) >= 0.7 * len(night)
    assert all(d["spec"]["ttlSecondsAfterFinished"] == w.TTL for d in docs)
    big = [d for d in docs if w.gpus_of(d) > 8]
    assert all(d["spec"]["minAvailable"] == d["spec"]["tasks"][0]["replicas"] == w.gpus_of(d) // 8 for d in big)


def test_a_quick_day_runs_every_variant_and_writes_the_tables_csv_and_plots(tmp_path: Path) -> None:
    results = bench.run(["--quick", "--out", str(tmp_path)])
    assert [r.variant for r in results] == list(bench.VARIANTS)
    for r in results:
        assert [r.waits[c].jobs for c in w.CLASSES] == [8, 6, 4]
        assert not any(r.waits[c].measured for c in w.CLASSES)  # below 50 jobs: not measured, not met
        assert 0 < r.work <= 4 * 8 * 6  # 4 nodes x 8 GPUs x 6 h
    text = (tmp_path / "gpu-day.md").read_text()
    assert "not measured (4 jobs)" in text and "16-64 p95 wait <= 0.5 x volcano" in text
    with open(tmp_path / "gpu-day.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["variant"] for r in rows] == list(bench.VARIANTS)
    for name in ("gpu-day-waits.png", "gpu-day-evictions.png", "gpu-day-shares.png"):
        assert (tmp_path / name).stat().st_size > 1000
