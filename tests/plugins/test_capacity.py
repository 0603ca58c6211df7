"""`capacity`: each queue's share is the `deserved` it declares; queues lend what they do not use and take it
back by reclaim, never below a guarantee, never above a capability (Volcano's capacity-scheduling stories)."""

from __future__ import annotations

import pytest

from scheduler.framework.conf import ConfError
from scheduler.testing import ClusterBuilder, cluster, conf_from_tiers

GPU = "nvidia.com/gpu"
CONF = conf_from_tiers(("priority", "gang", "conformance"), ("drf", "predicates", "capacity", "nodeorder", "binpack"),
                       actions="enqueue, allocate, reclaim, backfill")


def gpus(c: ClusterBuilder, job: str) -> int:
    return c.sim.used_gpus(job) // 1000


def two_orgs(**org1: object) -> ClusterBuilder:
    """4 nodes x 8 GPUs; org1 deserves 8 GPUs, org2 24 (by resource, not by weight: both have weight 1)."""
    c = cluster().nodes("n", 4, gpu=8)
    c.queue("org1", deserved={GPU: 8}, **org1)  # type: ignore[arg-type]
    c.queue("org2", deserved={GPU: 24})
    return c


def test_a_queue_borrows_the_whole_cluster_while_the_other_is_idle() -> None:
    c = two_orgs()
    c.job("org1-train", queue="org1", replicas=40, min_available=1, gpu=1)
    c.cycles(3, CONF)
    assert gpus(c, "org1-train") == 32  # 4x its deserved 8: nobody else wants them


def test_the_other_queue_reclaims_its_deserved_share_and_no_more() -> None:
    c = two_orgs()
    c.job("org1-train", queue="org1", replicas=40, min_available=1, gpu=1)
    c.cycles(2, CONF)
    c.job("org2-train", queue="org2", replicas=40, min_available=1, gpu=1)
    evictions = [len(c.cycle(CONF).evictions) for _ in range(30)]
    assert gpus(c, "org2-train") == 24 and gpus(c, "org1-train") == 8
    assert sum(evictions[10:]) == 0  # settled: no ping-pong


def test_reclaim_stops_at_the_guarantee() -> None:
    c = two_orgs(guarantee={GPU: 16}, capability={GPU: 32})
    c.job("org1-train", queue="org1", replicas=40, min_available=1, gpu=1)
    c.cycles(2, CONF)
    c.job("org2-train", queue="org2", replicas=40, min_available=1, gpu=1)
    c.cycles(30, CONF)
    # org1 deserves max(8, its guarantee 16) = 16; org2 can only take back what org1 holds beyond that
    assert gpus(c, "org1-train") == 16 and gpus(c, "org2-train") == 16


def test_capability_is_a_hard_limit_even_when_the_cluster_is_idle() -> None:
    c = two_orgs(capability={GPU: 12})
    c.job("org1-train", queue="org1", replicas=40, min_available=1, gpu=1)
    c.cycles(3, CONF)
    assert gpus(c, "org1-train") == 12


def test_the_deserved_share_is_a_quantity_not_a_weight() -> None:
    c = cluster().nodes("n", 4, gpu=8)
    c.queue("org1", deserved={GPU: 4})
    c.queue("org2", deserved={GPU: 28})
    c.job("org1-train", queue="org1", replicas=32, min_available=1, gpu=1)
    c.cycles(2, CONF)
    c.job("org2-train", queue="org2", replicas=32, min_available=1, gpu=1)
    c.cycles(30, CONF)
    assert (gpus(c, "org1-train"), gpus(c, "org2-train")) == (4, 28)


def test_a_queue_that_is_not_reclaimable_keeps_what_it_borrowed() -> None:
    c = two_orgs(reclaimable=False)
    c.job("org1-train", queue="org1", replicas=40, min_available=1, gpu=1)
    c.cycles(2, CONF)
    c.job("org2-train", queue="org2", replicas=40, min_available=1, gpu=1)
    c.cycles(10, CONF)
    assert gpus(c, "org1-train") == 32 and gpus(c, "org2-train") == 0


def test_capacity_and_proportion_together_are_rejected_with_both_places_named() -> None:
    with pytest.raises(ConfError) as error:
        conf_from_tiers(("gang",), ("proportion", "capacity"))
    assert "tiers[1].plugins[1]" in str(error.value) and "tiers[1].plugins[0]" in str(error.value)
