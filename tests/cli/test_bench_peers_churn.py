"""The churn size of `make bench-peers` (bench/peers_churn.py): the offered loads derived from kube-scheduler's
sustained rate, the plan that follows from it, medians where an unbound pod makes a quantile infinite, and the
goals judged on them. The generator's own schedule and quantiles are tested in Go (tools/k8s/churngen); the live
run is `make bench-peers BENCH_PEERS_ARGS='--size churn:300x30'`, not part of `make test`."""

from __future__ import annotations

import argparse
import importlib

import pytest

from scheduler.cli import bench_module

peers = bench_module("peers")  # puts bench/ first on sys.path
churn = importlib.import_module("peers_churn")


def test_the_two_offered_loads_are_half_and_six_fifths_of_the_sustained_rate() -> None:
    assert churn.offered_loads(400.0) == [(0.5, 200.0), (1.2, 480.0)]
    assert churn.offered_loads(333.3) == [(0.5, 166.7), (1.2, 400.0)]
    with pytest.raises(ValueError):
        churn.offered_loads(0.0)


def test_the_plan_fills_half_the_gpus_at_the_top_load_and_clamps_the_life() -> None:
    # 300 nodes x 16 GPUs, 480 pods/s at the top load: half of 4,800 GPUs in use when each lives 5 s
    plan = churn.churn_plan(300, 400.0)
    assert plan["lifetime_s"] == 5.0
    assert plan["other_rate"] == 40.0
    assert churn.churn_plan(300, 10_000.0)["lifetime_s"] == 2.0  # 0.2 s computed: at least 2 s
    assert churn.churn_plan(300, 1.0)["lifetime_s"] == 60.0  # 2,000 s computed: at most 60 s
    with pytest.raises(ValueError):
        churn.churn_plan(0, 400.0)


def test_a_median_over_rounds_counts_an_unbound_quantile_as_infinite() -> None:
    assert churn.median_or_inf([1.0, None, 2.0]) == 2.0
    assert churn.median_or_inf([None, None, 1.0]) is None
    assert churn.median_or_inf([]) is None


def run(contender: str, load: float, rnd: int, binds: float, p99: float | None) -> dict:
    return {"contender": contender, "load": load, "round": rnd, "binds_per_s": binds, "p99_s": p99}


def test_medians_are_per_load_and_contender() -> None:
    runs = [run("volcano-py", 0.5, r, b, p) for r, (b, p) in enumerate([(100, 0.5), (120, 0.9), (110, None)])]
    runs.append(run("volcano-py", 1.2, 0, 300, 4.0))
    med = churn.summarise(runs)
    assert med["0.5"]["volcano-py"]["binds_per_s"] == 110
    assert med["0.5"]["volcano-py"]["p99_s"] == 0.9
    assert med["0.5"]["volcano-py"]["rounds"] == 3
    assert med["1.2"]["volcano-py"]["binds_per_s"] == 300


def test_goals_compare_with_kube_scheduler_volcano_and_the_schedule_period() -> None:
    med = {
        "0.5": {"volcano-py": {"binds_per_s": 200.0, "p99_s": 0.8}, "volcano": {"binds_per_s": 100.0, "p99_s": 1.5},
                "kube-scheduler": {"binds_per_s": 201.0, "p99_s": 0.05}},
        "1.2": {"volcano-py": {"binds_per_s": 480.0, "p99_s": None}, "volcano": {"binds_per_s": 200.0, "p99_s": 9.0},
                "kube-scheduler": {"binds_per_s": 400.0, "p99_s": 6.0}},
    }
    checks = {(c["load"], c["what"]): c["met"] for c in churn.goal_checks(med, period=1.0)}
    assert checks == {
        ("0.5", "binds/s >= kube-scheduler's"): False,  # 200 < 201
        ("0.5", "binds/s >= 2 x Volcano's"): True,  # 200 >= 2 x 100
        ("0.5", "p99 <= one schedule period"): True,  # 0.8 <= 1.0
        ("1.2", "binds/s >= kube-scheduler's"): True,
        ("1.2", "binds/s >= 2 x Volcano's"): True,  # 480 >= 400
        ("1.2", "p99 <= kube-scheduler's"): False,  # unbound pods: infinite
    }


def test_goals_without_a_contender_are_not_measured() -> None:
    med = {"0.5": {"volcano-py": {"binds_per_s": 200.0, "p99_s": 0.8}}}
    checks = {c["what"]: c["met"] for c in churn.goal_checks(med, period=1.0)}
    assert checks["binds/s >= kube-scheduler's"] is None
    assert checks["binds/s >= 2 x Volcano's"] is None


def test_the_churn_size_is_nodes_by_seconds_longer_than_the_warm_up() -> None:
    assert peers.parse_size("churn:300x30") == ("churn", 300, 30)
    with pytest.raises(argparse.ArgumentTypeError):
        peers.parse_size("churn:300x5")


def test_the_comparison_with_kube_scheduler_allows_two_gangs_over_the_span() -> None:
    # 8-pod gangs over the 25 s measured of a 30 s window: 0.64 binds/s
    slack = churn.count_slack(8, 30)
    assert slack == 0.64
    med = {"0.5": {"volcano-py": {"binds_per_s": 68.5, "p99_s": 0.5}, "kube-scheduler": {"binds_per_s": 69.1}}}
    checks = {c["what"]: c["met"] for c in churn.goal_checks(med, period=1.0, slack=slack)}
    assert checks["binds/s >= kube-scheduler's - 0.64"] is True
    med["0.5"]["volcano-py"]["binds_per_s"] = 68.4
    checks = {c["what"]: c["met"] for c in churn.goal_checks(med, period=1.0, slack=slack)}
    assert checks["binds/s >= kube-scheduler's - 0.64"] is False


def test_a_run_of_the_overload_alone_is_held_to_the_overload_goals_only() -> None:
    """`--churn-load 1.2`: the one load is the top one; the light load's latency goal (one period) is not applied to
    a load beyond kube-scheduler's rate."""
    med = {"1.2": {"volcano-py": {"binds_per_s": 172.0, "p99_s": 7.9},
                   "kube-scheduler": {"binds_per_s": 174.0, "p99_s": 2.0}}}
    checks = {c["what"]: c["met"] for c in churn.goal_checks(med, period=1.0)}
    assert checks == {"binds/s >= kube-scheduler's": False, "binds/s >= 2 x Volcano's": None,
                      "p99 <= kube-scheduler's": False}
