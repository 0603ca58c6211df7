"""drf orders jobs by dominant share; overcommit admits jobs while the overcommitted cluster holds them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from scheduler.api.reasons import OvercommitLimit
from scheduler.framework.conf import SchedulerConf
from scheduler.testing import cluster, conf_from_tiers, pod_object

GPU = "nvidia.com/gpu"


def conf(*second_tier: str | dict[str, Any]) -> SchedulerConf:
    return conf_from_tiers(("priority", "gang"), second_tier)


# ---- drf ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DrfCase:
    name: str
    plugins: tuple[str, ...]
    winner: str


DRF_CASES = [
    DrfCase("with drf the last free GPU goes to the job holding less", ("drf", "predicates"), "small-extra"),
    DrfCase("without drf it goes to the older job, whatever it holds", ("predicates",), "big-extra"),
]


@pytest.mark.parametrize("case", DRF_CASES, ids=lambda c: c.name)
def test_drf_job_order(case: DrfCase) -> None:
    c = cluster().node("n1", gpu=8).job("big", replicas=6, gpu=1).job("small", replicas=1, gpu=1)
    c.cycle(conf(*case.plugins))
    c.sim.add_pod(pod_object("big-extra", group="big", gpu=1))
    c.sim.add_pod(pod_object("small-extra", group="small", gpu=1))
    c.cycle(conf(*case.plugins))
    bound = {**c.sim.bound("big"), **c.sim.bound("small")}
    assert len(bound) == 8
    loser = ({"big-extra", "small-extra"} - {case.winner}).pop()
    assert case.winner in bound and loser not in bound


# ---- overcommit --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class OvercommitCase:
    name: str
    arguments: dict[str, Any]
    jobs: tuple[tuple[str, int | None], ...]  # (name, minResources GPUs) of 4-GPU gangs, submitted together
    admitted: tuple[str, ...]
    held: dict[str, OvercommitLimit] = field(default_factory=dict)  # job -> the reason it is held


OVERCOMMIT_CASES = [
    OvercommitCase("with the default factor 1.2, 8 used and 4 requested fit in 12",
                   {}, (("next", 4),), ("next",)),
    OvercommitCase(
        "with factor 1.0, 8 used and 4 requested do not fit in 10",
        {"overcommit-factor": 1.0}, (("next", 4),), (),
        {"next": OvercommitLimit(GPU, 10_000, 1.0, 10_000, used=8_000, admitted=0, requested=4_000, total=12_000)},
    ),
    OvercommitCase(
        "a factor for GPUs overrides the default factor",
        {"overcommit-factor": 2.0, "overcommit-factor.nvidia.com/gpu": 1.0}, (("next", 4),), (),
        {"next": OvercommitLimit(GPU, 10_000, 1.0, 10_000, used=8_000, admitted=0, requested=4_000, total=12_000)},
    ),
    OvercommitCase("a factor below 1 falls back to 1.2",
                   {"overcommit-factor": 0.5}, (("next", 4),), ("next",)),
    OvercommitCase("a job without minResources is admitted however full the cluster is",
                   {"overcommit-factor": 1.0}, (("next", None),), ("next",)),
    OvercommitCase(
        "an admitted job counts: the second of two 4-GPU jobs waits",
        {}, (("first", 4), ("second", 4)), ("first",),
        {"second": OvercommitLimit(GPU, 10_000, 1.2, 12_000, used=8_000, admitted=4_000, requested=4_000,
                                   total=16_000)},
    ),
]


@pytest.mark.parametrize("case", OVERCOMMIT_CASES, ids=lambda c: c.name)
def test_overcommit_enqueue_gate(case: OvercommitCase) -> None:
    scheduler_conf = conf("predicates", {"name": "overcommit", "arguments": case.arguments})
    c = cluster().node("n1", gpu=10).job("running", replicas=8, gpu=1)
    c.cycle(scheduler_conf)
    assert len(c.sim.bound("running")) == 8
    for name, minimum in case.jobs:
        c.job(name, replicas=4, gpu=1, min_resources={GPU: minimum} if minimum is not None else None)
    c.cycle(scheduler_conf)
    phases = {name: c.sim.podgroup(name)["status"]["phase"] for name, _ in case.jobs}
    assert {n for n, p in phases.items() if p != "Pending"} == set(case.admitted)
    for name, reason in case.held.items():
        condition = c.sim.condition(name)
        assert condition is not None and condition["reason"] == "NotEnqueued"
        decision = c.sim.decision(name)
        assert decision is not None and decision.plugin == "overcommit" and decision.reasons == (reason,)
