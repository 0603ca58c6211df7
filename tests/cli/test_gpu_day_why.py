"""bench/gpu_day_why.py: a large gang's wait split by what the scheduler said of it, the unfair hours explained,
and a `--quick` day end to end (its breakdown adds up to each late gang's wait)."""

from __future__ import annotations

import pytest

from scheduler.cli import bench_module

bench_module("gpu_day")  # puts bench/ on the path
import gpu_day_why as why  # noqa: E402

H = 3600.0


def test_cause_is_the_first_gate_named_admission_before_allocate() -> None:
    assert why.cause(["GangNotReady", "Reserving", "OvercommitLimit"]) == "admission: overcommit"
    assert why.cause(["GangNotReady", "Reserving", "ResourceShortfall"]) == "reserving: nodes draining"
    assert why.cause(["QueueShareExceeded", "ResourceShortfall"]) == "allocate: its queue's share"
    assert why.cause(["GangNotReady", "NodesUnavailable"]) == "other: GangNotReady+NodesUnavailable"
    assert why.cause([]) == "other"


def test_wait_breakdown_counts_each_entry_until_the_next_and_stops_at_the_start() -> None:
    said = [(10.0, ["OvercommitLimit"]), (610.0, ["QueueLimit"]), (910.0, ["OvercommitLimit"]),
            (1210.0, ["GangNotReady", "Reserving"]), (4000.0, ["ResourceShortfall"])]  # the last: after the start
    out = why.wait_breakdown(said, started=3010.0, end=9 * H)
    assert out == {"admission: overcommit": 600.0 + 300.0, "admission: its queue": 300.0,
                   "reserving: nodes draining": 1800.0}


def test_wait_breakdown_of_a_gang_that_never_ran_counts_until_the_end() -> None:
    assert why.wait_breakdown([(0.0, ["Fragmented"])], started=None, end=2 * H) == {"fragmented": 2 * H}


def test_unfair_hours_name_the_queue_over_its_share_and_the_one_short_of_it() -> None:
    # 8 GPUs. Hour 0: a asks 8 and holds 6, b asks 2 and holds 2: index 1, not listed. Hour 1: a holds all 8,
    # b none of its 2: fair shares 6 and 2, index 0.5.
    demand = {"a": [8.0, 8.0], "b": [2.0, 2.0]}
    held = {"a": [6.0, 8.0], "b": [2.0, 0.0]}
    out = why.unfair_hours(held, demand, 8.0, 2)
    assert [(u.hour, u.over, u.under) for u in out] == [(1, "a", "b")]
    assert out[0].index == pytest.approx(0.5)
    assert out[0].queues["a"] == why.QueueHour(8.0, 6.0, 8.0)
    assert out[0].queues["b"] == why.QueueHour(0.0, 2.0, 2.0)


def test_an_unfair_hour_names_no_queue_when_none_is_a_whole_gpu_hour_off_its_share() -> None:
    # 2 GPUs, both queues ask 2: fair 1 each; a holds 1.6, b 0.4: index 0.735, but each is 0.6 off its share
    out = why.unfair_hours({"a": [1.6], "b": [0.4]}, {"a": [2.0], "b": [2.0]}, 2.0, 1)
    assert [(u.hour, u.over, u.under) for u in out] == [(0, None, None)]
    assert out[0].index == pytest.approx(2.0**2 / (2 * (1.6**2 + 0.4**2)))


def test_a_quick_day_explains_every_late_gang_and_traces_the_nodes() -> None:
    lines: list[str] = []
    found = why.run(["--quick", "--variant", "volcano-py", "--over", "5", "--trace", "team-b-0016-g16"],
                    write=lines.append)
    late = found["late"]
    assert late, "the quick day has a large gang waiting over 5 minutes"
    for wait, run in late:
        assert wait > 5 * 60
        accounted = sum(why.wait_breakdown([(t, [r.kind for r in s.reasons]) for t, s in run.said], run.started,
                                           1e12).values())
        # the first cycle after its arrival is the first word said of it: at most one period (10 s) unaccounted
        assert wait - 10.0 <= accounted <= wait
    traced = [line for line in lines if line.startswith("  gpu-")]
    assert traced and {line.split(":")[0].strip() for line in traced} == {f"gpu-{i}" for i in range(4)}
    assert found["alone_p95"] is not None and found["alone_p95"] >= 0


def test_a_conf_file_is_explained_as_a_variant_is() -> None:
    lines: list[str] = []
    by_file = why.run(["--quick", "--conf", str(why.day.ALL_CONF), "--over", "5"], write=lines.append)
    by_name = why.run(["--quick", "--variant", "all", "--over", "5"], write=lambda _: None)
    assert [(w, r.key) for w, r in by_file["late"]] == [(w, r.key) for w, r in by_name["late"]]
    assert any(line.startswith(f"\n{why.day.ALL_CONF}, seed 35") for line in lines)
