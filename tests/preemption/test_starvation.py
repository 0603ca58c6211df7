"""The starvation guard: a big gang behind a stream of small jobs reserves what it needs and starts."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from preemption_confs import make_conf

from scheduler.actions.starvation import DEFAULT_THRESHOLD, THRESHOLD_ARG, threshold
from scheduler.api.reasons import Reserving
from scheduler.testing import ClusterBuilder, cluster, pod_object

SMALL_RUNS = 600.0  # each 1-GPU job runs 10 minutes
GANG_ARRIVES = 60.0
HORIZON = GANG_ARRIVES + 15 * 60  # the gang must start within 15 simulated minutes


def finish_due(c: ClusterBuilder) -> None:
    """Kubelets: a small job's pod ends 10 minutes after it started, and its Job deletes it."""
    for key, pod in list(c.sim.pods.items()):
        if pod.started_at is not None and c.sim.now - pod.started_at >= SMALL_RUNS and key.startswith("default/s-"):
            c.sim.finish_pod(key)
            c.sim.delete_pod(key)


def gang_start(threshold: float, period: float = 10.0) -> float | None:
    """Replay the stream with the guard at `threshold` seconds (negative: off); when the gang started, if it did."""
    arguments = {"starvationThresholdSeconds": threshold}
    conf = make_conf("enqueue, allocate, backfill", configurations={"allocate": arguments})
    c = cluster().nodes("n", 8, gpu=8)
    arrived = 0
    while c.sim.now <= HORIZON:
        while arrived <= c.sim.now:  # one 1-GPU job a second
            c.sim.add_pod(pod_object(f"s-{arrived}", gpu=1))
            arrived += 1
        if c.sim.now == GANG_ARRIVES:  # a multiple of the period
            c.job("big", replicas=32, gpu=1)
        finish_due(c)
        c.cycle(conf)
        assert c.sim.partially_bound_gangs() == []
        if len(c.sim.bound("big")) == 32:
            return c.sim.now - 1 - GANG_ARRIVES
        c.sim.now += period - 1  # cycle() already advanced the clock by a second
    return None


@dataclass(frozen=True)
class Case:
    name: str
    threshold: float
    starts: bool


CASES = [
    Case("with the guard a 32-GPU gang behind a stream of 1-GPU jobs starts within 15 minutes", 300, True),
    Case("without the guard the stream keeps it out for the whole 15 minutes", -1, False),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_big_gang_behind_a_stream_of_small_jobs(case: Case) -> None:
    waited = gang_start(case.threshold)
    if case.starts:
        assert waited is not None and waited <= 15 * 60
    else:
        assert waited is None


def test_a_reservation_holds_its_nodes_and_small_jobs_fit_around_it() -> None:
    conf = make_conf("enqueue, allocate, backfill", configurations={"allocate": {"starvationThresholdSeconds": 60}})
    c = cluster().node("n0", gpu=8, labels={"pool": "train"}).node("n1", gpu=8)
    c.job("resident", replicas=6, gpu=1, node_selector={"pool": "train"})
    c.cycle(conf)
    c.job("big", replicas=4, gpu=1, node_selector={"pool": "train"})
    c.sim.now = 120.0  # big has waited past the threshold: it reserves n0's 2 idle GPUs
    c.sim.add_pod(pod_object("small", gpu=1))
    c.cycle(conf)
    assert c.sim.bound("big") == {}
    assert c.sim.bound("small") == {"small": "n1"}, "the small job fits around the reservation, on n1"
    c.sim.add_pod(pod_object("pinned", gpu=1, node_selector={"pool": "train"}))
    c.cycle(conf)
    assert c.sim.bound("pinned") == {}, "n0's idle GPUs are held for big"
    reserving = [r for r in c.sim.reasons("big") if isinstance(r, Reserving)]
    assert reserving and reserving[0].nodes == 1 and reserving[0].min_available == 4
    for key in [k for k in c.sim.pods if k.startswith("default/resident-")][:2]:
        c.sim.finish_pod(key)
    c.cycle(conf)
    assert len(c.sim.bound("big")) == 4


@pytest.mark.parametrize(("raw", "seconds"), [("5m", 300.0), ("90s", 90.0), (60, 60.0), ("120", 120.0),
                                              ("-1s", None), (-1, None), ("abc", DEFAULT_THRESHOLD),
                                              ("5 minutes", DEFAULT_THRESHOLD), (True, DEFAULT_THRESHOLD)])
def test_the_threshold_reads_the_one_duration_grammar(raw: object, seconds: float | None) -> None:
    assert threshold({THRESHOLD_ARG: raw}) == seconds
