"""The starvation guard: a big gang behind a stream of small jobs reserves what it needs and starts."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from preemption_confs import make_conf

from scheduler.actions.allocate import Allocate
from scheduler.actions.starvation import (
    DEFAULT_THRESHOLD,
    HOLD_IDLE_ARG,
    THRESHOLD_ARG,
    hold_idle,
    parse_hold_idle,
    threshold,
)
from scheduler.api.messages import message
from scheduler.api.reasons import Reserving
from scheduler.framework.session import Session
from scheduler.plugins.registry import PLUGINS
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


# ---- starvationHoldIdle: the reserved nodes' idle room held for the gang (actions/starvation.py, 5.) ----

def held_cluster(hold: object | None) -> tuple[ClusterBuilder, object]:
    """2 x 8 GPUs, each running a 5-GPU pod that does not end; a 2 x 8-GPU gang waits past the 60 s threshold,
    so the guard reserves both nodes; 3 GPUs sit idle on each. No queue limit (no `proportion`): the reservation
    is kept for the nodes alone."""
    arguments: dict[str, object] = {"starvationThresholdSeconds": 60}
    if hold is not None:
        arguments[HOLD_IDLE_ARG] = hold
    conf = make_conf("enqueue, allocate, backfill", second=("drf", "predicates", "nodeorder", "binpack"),
                     configurations={"allocate": arguments})
    c = cluster().nodes("n", 2, gpu=8)
    c.job("resident", replicas=2, gpu=5)
    c.cycle(conf)
    assert sorted(c.sim.bound("resident").values()) == ["n0", "n1"]
    c.job("big", replicas=2, gpu=8)
    c.sim.now = 120.0
    return c, conf


@pytest.mark.parametrize("hold", [None, False, "0s"], ids=["unset", "false", "0s"])
def test_without_the_hold_a_small_job_takes_a_reserved_nodes_idle_gpus(hold: object | None) -> None:
    c, conf = held_cluster(hold)
    c.sim.add_pod(pod_object("small", gpu=3))
    c.cycle(conf)
    assert c.sim.bound("big") == {}
    (reserving,) = [r for r in c.sim.reasons("big") if isinstance(r, Reserving)]
    assert (reserving.nodes, reserving.drained) == (2, 0)
    assert list(c.sim.bound("small").values()) in (["n0"], ["n1"])


@pytest.mark.parametrize("hold", [True, "1h", 3600, "true"], ids=["true", "1h", "3600", "'true'"])
def test_with_the_hold_the_reserved_nodes_idle_gpus_wait_for_the_gang(hold: object) -> None:
    c, conf = held_cluster(hold)
    c.sim.add_pod(pod_object("small", gpu=3))
    c.cycle(conf)
    assert c.sim.bound("big") == {} and c.sim.bound("small") == {}
    (reserving,) = [r for r in c.sim.reasons("big") if isinstance(r, Reserving)]
    assert (reserving.nodes, reserving.drained) == (2, 2)
    assert "2 of its nodes keep their free resources for it" in message([reserving])
    assert c.sim.partially_bound_gangs() == []
    # the residents end: the gang has both nodes whole, and the small job still waits behind it
    for key in list(c.sim.bound("resident")):
        c.sim.finish_pod(f"default/{key}")
        c.sim.delete_pod(f"default/{key}")
    c.sim.now += 10
    c.cycle(conf)
    assert sorted(c.sim.bound("big").values()) == ["n0", "n1"]
    assert c.sim.bound("small") == {}


def test_a_held_node_that_frees_nothing_is_let_go_after_the_duration() -> None:
    """The residents never end: the nodes are held 10 minutes from the first reservation, no longer; then the small
    job that waited takes the idle GPUs (so a gang cannot keep them from everyone for ever)."""
    c, conf = held_cluster("10m")
    c.sim.add_pod(pod_object("small", gpu=3))
    first = c.sim.now
    while c.sim.now <= first + 600:
        c.cycle(conf)
        assert c.sim.bound("small") == {}, f"let go at {c.sim.now - first:.0f} s, before the 600 s"
        c.sim.now += 29  # cycle() advanced the clock by a second: a 30 s period
    c.cycle(conf)
    assert list(c.sim.bound("small").values()) in (["n0"], ["n1"])
    assert c.sim.bound("big") == {}
    (reserving,) = [r for r in c.sim.reasons("big") if isinstance(r, Reserving)]
    assert reserving.drained == 0, "neither node is held any more"


@pytest.mark.parametrize(("raw", "seconds"), [
    (True, 3600.0), ("True", 3600.0), (False, 0.0), ("false", 0.0), ("0s", 0.0), (0, 0.0), ("30m", 1800.0),
    (90, 90.0), ("90", 90.0), ("168h", 168 * 3600.0),
])
def test_the_hold_duration_reads_as_the_conf_writes_it(raw: object, seconds: float) -> None:
    assert parse_hold_idle(raw) == seconds
    assert hold_idle({HOLD_IDLE_ARG: raw}) == seconds


@pytest.mark.parametrize("raw", ["-1s", "169h", "soon", float("nan"), [], {"a": 1}, "1e400"])
def test_an_unreadable_hold_duration_is_refused_and_means_off(raw: object) -> None:
    with pytest.raises(ValueError):
        parse_hold_idle(raw)
    assert hold_idle({HOLD_IDLE_ARG: raw}) == 0.0


def test_a_hold_on_an_over_committed_node_never_raises_its_free_room() -> None:
    """Another scheduler put 10 GPUs of pods on an 8-GPU node (its idle GPUs are -2). The gang's reservation takes
    that node too; what it holds there is what is free (cpu, memory), never a negative amount that would raise the
    node's idle GPUs back towards zero for the jobs after it."""
    conf = make_conf("enqueue, allocate, backfill", second=("drf", "predicates", "nodeorder", "binpack"),
                     configurations={"allocate": {"starvationThresholdSeconds": 60, HOLD_IDLE_ARG: "1h"}})
    c = cluster().nodes("n", 2, gpu=8)
    for name, node, gpu in (("svc-0", "n0", 5), ("svc-1", "n0", 5), ("resident", "n1", 5)):
        made = pod_object(name, gpu=gpu, scheduler_name="another-scheduler")
        made["spec"]["nodeName"], made["status"]["phase"] = node, "Running"
        c.sim.add_pod(made)
    c.job("big", replicas=2, gpu=8)
    c.cycle(conf)
    c.sim.now = 120.0
    ssn = Session(c.sim.snapshot(), conf, PLUGINS, memo=c.memo)
    before = {n.name: dict(n.idle.items()) for n in ssn.node_list}
    assert before["n0"]["nvidia.com/gpu"] == -2000
    Allocate().execute(ssn)
    held = ssn.results.held(ssn.jobs["default/big"])
    reserving = [r for r in (held.reasons if held else ()) if isinstance(r, Reserving)]
    assert reserving and reserving[0].nodes == 2
    for node in ssn.node_list:
        for name, units in node.idle.items():
            assert units <= before[node.name][name], (node.name, name, units, before[node.name][name])
        assert all(all(v >= 0 for _, v in t.resreq.items()) for t in node.tasks.values()), node.name
