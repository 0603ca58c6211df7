"""overcommit's shareBoundReservations: an admitted job its own queue's share holds back does not keep the jobs of
other queues out at enqueue (it still counts for its own queue's jobs); without the argument, Volcano's rule."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.api.reasons import OvercommitLimit
from scheduler.framework.conf import SchedulerConf
from scheduler.testing import ClusterBuilder, cluster, conf_from_tiers

GPU = "nvidia.com/gpu"


def conf(share_bound: bool | None, *, actions: str = "enqueue, allocate, backfill",
         proportion: dict[str, Any] | None = None) -> SchedulerConf:
    arguments: dict[str, Any] = {"overcommit-factor": 1.0}
    if share_bound is not None:
        arguments["shareBoundReservations"] = share_bound
    return conf_from_tiers(("priority", "gang"),
                           ({"name": "overcommit", "arguments": arguments}, "predicates",
                            {"name": "proportion", "arguments": proportion or {}}), actions=actions)


def held_gang(share_bound: bool | None, proportion: dict[str, Any] | None = None) -> ClusterBuilder:
    """16 GPUs, queues a and b of equal weight. a runs 8 GPUs, b 4; then a's 4-GPU gang `a-big` is admitted (a
    cycle of enqueue alone); then b submits the 4-GPU gang `b-next`. With both queues asking, each deserves 8:
    a holds its 8, so `a-big` cannot run; the cluster's 4 free GPUs are b's to take."""
    c = (cluster().node("n1", gpu=8).node("n2", gpu=8).queue("a").queue("b")
         .job("a-run", queue="a", replicas=8, gpu=1).job("b-run", queue="b", replicas=4, gpu=1))
    c.cycle(conf(share_bound, proportion=proportion))
    assert len(c.sim.bound("a-run")) == 8 and len(c.sim.bound("b-run")) == 4
    c.job("a-big", queue="a", replicas=4, gpu=1, min_resources={GPU: 4})
    c.cycle(conf(share_bound, actions="enqueue", proportion=proportion))
    assert c.sim.podgroup("a-big")["status"]["phase"] == "Inqueue"
    c.job("b-next", queue="b", replicas=4, gpu=1, min_resources={GPU: 4})
    c.cycle(conf(share_bound, proportion=proportion))
    return c


@pytest.mark.parametrize("proportion", [None, {"usage.weight": 1, "usage.halfLife": "4h"}],
                         ids=["proportion", "with time-based fair share"])
def test_a_gang_held_by_its_own_queue_does_not_keep_another_queue_out(proportion: dict[str, Any] | None) -> None:
    c = held_gang(True, proportion)
    assert c.sim.podgroup("b-next")["status"]["phase"] != "Pending"
    assert len(c.sim.bound("b-next")) == 4
    assert c.sim.bound("a-big") == {}  # its queue's share still holds it


@pytest.mark.parametrize("share_bound", [None, False], ids=["absent", "false"])
def test_without_the_argument_the_admitted_gang_counts_against_every_queue(share_bound: bool | None) -> None:
    c = held_gang(share_bound)
    assert c.sim.podgroup("b-next")["status"]["phase"] == "Pending"
    decision = c.sim.decision("b-next")
    assert decision is not None and decision.plugin == "overcommit"
    assert decision.reasons == (OvercommitLimit(GPU, 16_000, 1.0, 16_000, used=12_000, admitted=4_000,
                                                requested=4_000, total=20_000),)


def test_the_held_gang_still_counts_against_its_own_queue() -> None:
    c = held_gang(True)
    c.job("a-more", queue="a", replicas=4, gpu=1, min_resources={GPU: 4})
    c.cycle(conf(True))
    assert c.sim.podgroup("a-more")["status"]["phase"] == "Pending"
    decision = c.sim.decision("a-more")
    assert decision is not None and decision.plugin == "overcommit"
    # 16 used (b-next runs), a-big's 4 still reserved for a's own jobs, a-more's 4
    assert decision.reasons == (OvercommitLimit(GPU, 16_000, 1.0, 16_000, used=16_000, admitted=4_000,
                                                requested=4_000, total=24_000),)
