"""overcommit's admitStarvingAfter: a job that has waited that long is admitted past the factor while the cluster
is within it without the job, one job a session; without the argument, Volcano's rule keeps it Pending."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.framework.conf import SchedulerConf
from scheduler.testing import ClusterBuilder, cluster, conf_from_tiers

GPU = "nvidia.com/gpu"


def conf(starving_after: str | None) -> SchedulerConf:
    arguments: dict[str, Any] = {"overcommit-factor": 1.0}
    if starving_after is not None:
        arguments["admitStarvingAfter"] = starving_after
    return conf_from_tiers(("priority", "gang"), ({"name": "overcommit", "arguments": arguments}, "predicates"))


def two_gangs_waiting(starving_after: str | None, cycles: int) -> ClusterBuilder:
    """10 GPUs, 8 used; two 4-GPU gangs submitted together (8 + 4 > 10: over the factor), then `cycles` cycles,
    one simulated second apart."""
    c = cluster().node("n1", gpu=10).job("running", replicas=8, gpu=1)
    c.cycle(conf(starving_after))
    assert len(c.sim.bound("running")) == 8
    for name in ("big-a", "big-b"):
        c.job(name, replicas=4, gpu=1, min_resources={GPU: 4})
    for _ in range(cycles):
        c.cycle(conf(starving_after))
    return c


def phases(c: ClusterBuilder) -> dict[str, str]:
    return {name: c.sim.podgroup(name)["status"]["phase"] for name in ("big-a", "big-b")}


def test_before_the_threshold_both_wait() -> None:
    c = two_gangs_waiting("5s", cycles=2)
    assert phases(c) == {"big-a": "Pending", "big-b": "Pending"}
    decision = c.sim.decision("big-a")
    assert decision is not None and decision.plugin == "overcommit"


def test_past_the_threshold_one_is_admitted_and_the_cluster_is_then_past_the_factor() -> None:
    c = two_gangs_waiting("2s", cycles=6)
    admitted = {name for name, phase in phases(c).items() if phase != "Pending"}
    assert len(admitted) == 1  # the second one: 8 used + 4 admitted > 10, so no bypass for it
    other = ({"big-a", "big-b"} - admitted).pop()
    decision = c.sim.decision(other)
    assert decision is not None and decision.plugin == "overcommit"


@pytest.mark.parametrize("starving_after", [None], ids=["absent"])
def test_without_the_argument_both_wait_however_long(starving_after: str | None) -> None:
    c = two_gangs_waiting(starving_after, cycles=6)
    assert phases(c) == {"big-a": "Pending", "big-b": "Pending"}
