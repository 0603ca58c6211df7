"""`make bench-day-slice`'s cut and compression of the day (bench/gpu_day_slice.py) and its measures, on jobs and
observations worked out by hand. The control-plane side is `make bench-day-slice`, not part of `make test`."""

from __future__ import annotations

import pytest

from scheduler.cli import bench_module

bench_module("gpu_day")  # puts bench/ on the path
import gpu_day_slice as s  # noqa: E402
import gpu_day_workload as w  # noqa: E402

H = 3600.0


def doc(name: str, gpus: int, arrival: float, duration: int, queue: str = "heavy") -> dict:
    return w.job_doc(name, queue, gpus, arrival, duration, 1800)


DOCS = [
    doc("ended", 1, 1000, 600),  # ran 1000-1600: over before the slice
    doc("running", 16, 2 * H, 2 * H),  # started at 3 h, runs to 5 h: 1 h left at 4 h
    doc("waiting", 32, 3 * H, 1200),  # arrived at 3 h, first ran at 4.5 h: waiting at 4 h
    doc("never", 8, 3.5 * H, 600),  # never ran in the day
    doc("arrives", 4, 4 * H + 600, 900),  # 10 min into the slice
    doc("edge", 2, 5 * H, 300),  # arrives at the slice's end: not in it
    doc("ends-at-start", 1, 3 * H, 1800),  # started 3.5 h, ran 30 min: ended exactly at 4 h
]
STARTED = {"ended": 1000.0, "running": 3 * H, "waiting": 4.5 * H, "arrives": 4 * H + 700,
           "ends-at-start": 3.5 * H, "never": None}


def test_the_slice_carries_over_running_and_waiting_jobs_and_compresses_arrivals_and_durations() -> None:
    sl = s.slice_day(DOCS, STARTED, 4 * H, H, 10.0)
    got = {j.name: (j.role, j.arrival, j.duration, j.gpus, j.pods) for j in sl.jobs}
    assert got == {
        "running": ("running", 0.0, 360.0, 16, 2),  # 1 h left / 10
        "waiting": ("waiting", 0.0, 120.0, 32, 4),  # its whole 1200 s / 10
        "never": ("waiting", 0.0, 60.0, 8, 1),
        "arrives": ("arrives", 60.0, 90.0, 4, 1),  # (600 s into the slice) / 10, 900 s / 10
    }
    assert [j.name for j in sl.jobs] == ["running", "never", "waiting", "arrives"]  # carried over first, by name
    assert sl.window == 360.0
    job = next(j for j in sl.jobs if j.name == "arrives")
    assert job.manifest["spec"]["schedulerName"] == "volcano"
    assert job.manifest["metadata"]["annotations"][s.ROLE] == "arrives"
    assert "arrival" not in job.manifest and "duration" not in job.manifest
    assert DOCS[4]["spec"]["schedulerName"] == "volcano-py"  # the day's documents are left as they were


def test_the_simulators_documents_put_the_slices_time_zero_after_the_warm_up() -> None:
    sl = s.slice_day(DOCS, STARTED, 4 * H, H, 10.0)
    first = {d["metadata"]["name"]: (d["arrival"], d["duration"]) for d in s.sim_docs(sl, 10.0)}
    assert first == {"running": (0.0, 370.0), "waiting": (10.0, 120.0), "never": (10.0, 60.0),
                     "arrives": (70.0, 90.0)}
    # placed 3 s in: its work (360 s left) ends 360 s after the slice's time 0, at 370
    again = {d["metadata"]["name"]: d["duration"] for d in s.sim_docs(sl, 10.0, {"running": 3.0})}
    assert again["running"] == 367.0


def test_a_compression_or_length_that_is_not_positive_is_refused() -> None:
    with pytest.raises(ValueError, match="positive"):
        s.slice_day(DOCS, STARTED, 4 * H, H, 0.0)


def obs(name: str, gpus: int, submitted: float, whole: float | None, done: float | None = None,
        role: str = "arrives") -> s.Observed:
    return s.Observed(name, gpus, role, submitted, whole, done)


def test_waits_are_per_class_in_minutes_of_the_day_with_percentiles_from_five_jobs() -> None:
    # factor 10, window 360 s: five 1-GPU jobs waiting 0, 6, 12, 18, 24 compressed s = 0, 1, 2, 3, 4 min
    ones = [obs(f"a{i}", 1, 10.0, 10.0 + 6 * i, 400.0) for i in range(5)]
    # two 16-GPU jobs: one waits 30 s (5 min), one never runs (360 - 60 = 300 s: 50 min, a lower bound)
    big = [obs("b0", 16, 0.0, 30.0, 90.0), obs("b1", 16, 60.0, None)]
    running = [obs("r", 8, 0.0, -2.0, 36.0, role="running")]  # placed in the warm-up: no wait counted
    got = s.measure(ones + big + running, 360.0, 10.0)
    assert (got["1"].jobs, got["1"].p50, got["1"].p95, got["1"].never) == (5, pytest.approx(2.0),
                                                                           pytest.approx(4.0), 0)
    assert (got["16-64"].jobs, got["16-64"].p50, got["16-64"].never) == (2, None, 1)  # fewer than 5: not measured
    assert got["2-8"].jobs == 0
    # GPU-hours of the day inside the window: the 8-GPU job held 0..36 s (360 s of the day): 0.8 GPU-h; the
    # 16-GPU job 30..90 s (600 s): 2.67; the 1-GPU jobs from their start to the window's end
    assert got["2-8"].gpu_hours == pytest.approx(8 * 360 / H)
    assert got["16-64"].gpu_hours == pytest.approx(16 * 600 / H)
    assert got["1"].gpu_hours == pytest.approx(sum(350 - 6 * i for i in range(5)) * 10 / H)


def test_the_comparison_flags_differences_over_ten_percent_of_volcanos_number() -> None:
    def m(p50: float | None, hours: float) -> s.ClassMeasure:
        return s.ClassMeasure("x", 5, p50, p50, 0, hours)

    real = {"1": m(10.0, 2.0), "2-8": m(0.0, 4.0), "16-64": m(None, 10.0)}
    sim = {"1": m(10.5, 2.5), "2-8": m(1.0, 4.0), "16-64": m(30.0, 10.0)}
    rows = {r.what: r for r in s.compare(real, sim)}
    assert (rows["1 GPU p50 wait (min)"].relative, rows["1 GPU p50 wait (min)"].over) == (pytest.approx(0.05), False)
    assert (rows["1 GPU-h held"].relative, rows["1 GPU-h held"].over) == (pytest.approx(0.25), True)
    assert (rows["2-8 GPU p50 wait (min)"].relative, rows["2-8 GPU p50 wait (min)"].over) == (None, True)  # 0 vs 1
    assert rows["16-64 GPU p50 wait (min)"].over is None  # not measured on Volcano's side
    assert (rows["all GPU-h held"].real, rows["all GPU-h held"].sim) == (16.0, 16.5)
    text = s.table(list(rows.values()))
    assert "| 1 GPU-h held | 2.0 | 2.5 | +25.0% | yes |" in text
    # a second simulator run in three more columns, row by row
    other = s.compare(real, {**sim, "1": m(10.0, 2.1)})
    text = s.table(list(rows.values()), other, "other")
    assert "| 1 GPU-h held | 2.0 | 2.5 | +25.0% | yes | 2.1 | +5.0% | no |" in text
    assert text.splitlines()[0].endswith("| other | relative difference | over 10% |")
