"""proportion's admitWithinShare: a job is admitted only when its queue's deserved share, with the job asking too,
holds what the queue holds, what its admitted jobs still wait for and the job's minResources; without the
argument only the queue's capability is checked at admission, as in Volcano."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.api.reasons import DESERVED, QueueLimit
from scheduler.framework.conf import SchedulerConf
from scheduler.testing import ClusterBuilder, cluster, conf_from_tiers

GPU = "nvidia.com/gpu"


def conf(within_share: bool | None, actions: str = "enqueue, allocate, backfill") -> SchedulerConf:
    arguments: dict[str, Any] = {} if within_share is None else {"admitWithinShare": within_share}
    return conf_from_tiers(("priority", "gang"), ("predicates", {"name": "proportion", "arguments": arguments}),
                           actions=actions)


def busy(within_share: bool | None) -> ClusterBuilder:
    """16 GPUs, queues a and b of equal weight; a runs 8 GPUs, b 4 (what it asks for)."""
    c = (cluster().node("n1", gpu=8).node("n2", gpu=8).queue("a").queue("b")
         .job("a-run", queue="a", replicas=8, gpu=1).job("b-run", queue="b", replicas=4, gpu=1))
    c.cycle(conf(within_share))
    assert len(c.sim.bound("a-run")) == 8 and len(c.sim.bound("b-run")) == 4
    return c


def test_a_gang_its_queue_would_not_deserve_waits_at_admission() -> None:
    c = busy(True)
    c.job("a-big", queue="a", replicas=8, gpu=1, min_resources={GPU: 8})
    c.cycle(conf(True))
    assert c.sim.podgroup("a-big")["status"]["phase"] == "Pending"
    decision = c.sim.decision("a-big")
    assert decision is not None and decision.plugin == "proportion"
    # with a-big asking, a deserves 16 - b's 4 = 12 GPUs; it holds 8 and a-big lacks 8
    assert decision.reasons == (QueueLimit("a", DESERVED, GPU, 12_000, 16_000, 8_000, allocated=8_000),)


def test_a_gang_its_queue_deserves_is_admitted() -> None:
    c = busy(True)
    c.job("a-small", queue="a", replicas=4, gpu=1, min_resources={GPU: 4})
    c.cycle(conf(True))
    assert c.sim.podgroup("a-small")["status"]["phase"] != "Pending"
    assert len(c.sim.bound("a-small")) == 4


@pytest.mark.parametrize("within_share", [None, False], ids=["absent", "false"])
def test_without_the_argument_the_gang_is_admitted_and_waits_in_allocate(within_share: bool | None) -> None:
    c = busy(within_share)
    c.job("a-big", queue="a", replicas=8, gpu=1, min_resources={GPU: 8})
    c.cycle(conf(within_share))
    assert c.sim.podgroup("a-big")["status"]["phase"] == "Inqueue"
    assert c.sim.bound("a-big") == {}


def test_the_condition_names_the_share_and_counts_what_the_queue_has_admitted() -> None:
    c = busy(True)
    c.job("a-first", queue="a", replicas=2, gpu=1, min_resources={GPU: 2})
    c.cycle(conf(True, actions="enqueue"))  # admitted, not placed: it still lacks its 2 GPUs
    assert c.sim.podgroup("a-first")["status"]["phase"] == "Inqueue"
    c.job("a-big", queue="a", replicas=4, gpu=1, min_resources={GPU: 4})
    c.cycle(conf(True, actions="enqueue"))
    condition = c.sim.condition("a-big")
    assert condition is not None and condition["reason"] == "NotEnqueued"
    decision = c.sim.decision("a-big")
    # a asks 8 + 2 + 4 and b 4 of 16 GPUs: a deserves 12, short of 8 held + 2 admitted + 4
    assert decision is not None and decision.reasons == (
        QueueLimit("a", DESERVED, GPU, 12_000, 14_000, 4_000, allocated=8_000, admitted=2_000),)
    assert "deserved share nvidia.com/gpu 12" in condition["message"] and "2 admitted" in condition["message"]
