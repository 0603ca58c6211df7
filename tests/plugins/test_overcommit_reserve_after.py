"""overcommit's reserveAfter: a job refused at admission that long reserves the room it lacks, and the jobs behind
it are admitted only into room beyond it (off by default: Volcano's rule, nothing reserved)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from scheduler.api.reasons import OvercommitLimit
from scheduler.framework.conf import SchedulerConf
from scheduler.framework.conf_values import ArgumentError
from scheduler.testing import ClusterBuilder, cluster, conf_from_tiers

GPU = "nvidia.com/gpu"
HOUR = 3600.0


def conf(arguments: dict[str, Any]) -> SchedulerConf:
    # proportion before overcommit, as the argument asks (a job its queue refuses is never asked by overcommit)
    return conf_from_tiers(("priority", "gang"), ("predicates", "proportion",
                                                  {"name": "overcommit", "arguments": arguments}))


def gang(c: ClusterBuilder, name: str, gpus: int, **kwargs: Any) -> None:
    c.job(name, replicas=gpus, gpu=1, min_resources={GPU: gpus}, **kwargs)


def full_cluster(scheduler_conf: SchedulerConf, running: int = 12) -> ClusterBuilder:
    """16 GPUs, admission room 19.2 (factor 1.2); `running` GPUs busy in queue b (with 12 an 8-GPU gang does not fit,
    a 4-GPU one does). The gangs under test go to queue a, whose share the cluster holds (proportion permits them)."""
    c = cluster().node("n1", gpu=16).queue("a").queue("b")
    if running:
        gang(c, "running", running, queue="b")
        c.cycle(scheduler_conf)
        assert len(c.sim.bound("running")) == running
    return c


@dataclass(frozen=True)
class Case:
    name: str
    arguments: dict[str, Any]
    waited: float  # seconds the 8-GPU gang has waited when the 4-GPU job arrives
    small_admitted: bool
    small_held: OvercommitLimit | None = field(default=None)


CASES = [
    Case("without the argument the small job takes the room the big gang waits for", {}, 2 * HOUR, True),
    Case("an hour's wait reserves the big gang's 8 GPUs: the small job does not fit beside them",
         {"reserveAfter": "1h"}, 2 * HOUR, False,
         OvercommitLimit(GPU, 16_000, 1.2, 19_200, used=12_000, admitted=8_000, requested=4_000, total=24_000)),
    Case("a gang that waited less than reserveAfter reserves nothing", {"reserveAfter": "3h"}, 2 * HOUR, True),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_an_aged_refused_gang_reserves_its_admission_room(case: Case) -> None:
    scheduler_conf = conf(case.arguments)
    c = full_cluster(scheduler_conf)
    gang(c, "big", 8, queue="a")
    c.cycle(scheduler_conf)
    assert c.sim.podgroup("big")["status"]["phase"] == "Pending"
    c.sim.now += case.waited
    gang(c, "small", 4, queue="a")
    c.cycle(scheduler_conf)
    assert c.sim.podgroup("big")["status"]["phase"] == "Pending"
    small = c.sim.podgroup("small")["status"]["phase"]
    assert (small != "Pending") == case.small_admitted
    if case.small_held is not None:
        decision = c.sim.decision("small")
        assert decision is not None and decision.plugin == "overcommit" and decision.reasons == (case.small_held,)


def test_an_older_job_is_not_held_by_a_younger_gangs_reservation() -> None:
    """EASY's order: the reservation holds the jobs behind the reserving one, not those ahead of it. The older
    4-GPU job is in a queue enqueue visits after the big gang's (its queue holds more), and still gets in."""
    scheduler_conf = conf({"reserveAfter": "1h"})
    c = full_cluster(scheduler_conf)
    gang(c, "older", 4, queue="b")
    c.sim.now += 60.0
    gang(c, "big", 8, queue="a")
    c.sim.now += 2 * HOUR
    c.cycle(scheduler_conf)
    assert c.sim.podgroup("big")["status"]["phase"] == "Pending"
    assert c.sim.podgroup("older")["status"]["phase"] != "Pending"


@settings(max_examples=40, deadline=None)
@given(running=st.integers(0, 16), big=st.integers(1, 16), small=st.integers(1, 16),
       after=st.sampled_from([None, "30m", "2h"]))
def test_property_nothing_behind_an_aged_refused_gang_takes_its_room(running: int, big: int, small: int,
                                                                      after: str | None) -> None:
    """After an hour, the small job is admitted as without the argument, except while the big gang ahead of it is
    refused and has waited reserveAfter: then it is not admitted into the room the gang lacks (and with `running`
    + big over the room, no room is left beyond it)."""
    scheduler_conf = conf({} if after is None else {"reserveAfter": after})
    c = full_cluster(scheduler_conf, running)
    gang(c, "big", big, queue="a")
    c.sim.now += HOUR
    gang(c, "small", small, queue="a")
    c.cycle(scheduler_conf)
    big_in = c.sim.podgroup("big")["status"]["phase"] != "Pending"
    small_in = c.sim.podgroup("small")["status"]["phase"] != "Pending"
    room, share = 19, 16
    assert big_in == (running + big <= room)
    ahead = big if big_in else 0
    plain = ahead + small <= share and running + ahead + small <= room
    reserving = after == "30m" and not big_in
    assert small_in == (plain and not reserving)


def test_a_bad_duration_is_a_conf_error() -> None:
    with pytest.raises(ArgumentError):
        conf({"reserveAfter": "soon"})
