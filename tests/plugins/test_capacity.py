"""`capacity`: each queue's share is the `deserved` it declares; queues lend what they do not use and take it
back by reclaim, never below a guarantee, never above a capability (Volcano's capacity-scheduling stories)."""

from __future__ import annotations

import pytest

from scheduler.api.reasons import QueueNotLeaf, QueueParentMissing
from scheduler.framework.conf import ConfError
from scheduler.testing import ClusterBuilder, cluster, conf_from_tiers

GPU = "nvidia.com/gpu"
CONF = conf_from_tiers(("priority", "gang", "conformance"), ("drf", "predicates", "capacity", "nodeorder", "binpack"),
                       actions="enqueue, allocate, reclaim, backfill")


def gpus(c: ClusterBuilder, job: str) -> int:
    """GPUs held by the job, or by the jobs `<job>-<i>` that `claim` submits."""
    if f"default/{job}" in c.sim.podgroups:
        return c.sim.used_gpus(job) // 1000
    names = [key.split("/", 1)[1] for key in c.sim.podgroups]
    return sum(c.sim.used_gpus(name) for name in names if name.startswith(f"{job}-")) // 1000


def claim(c: ClusterBuilder, prefix: str, queue: str, count: int) -> None:
    """A queue that wants `count` GPUs as many one-pod jobs. Reclaim serves a job only while it is starving,
    which with priority and gang in one tier means short of its minAvailable (Volcano's JobStarving,
    pkg/scheduler/framework/session_plugins.go): an elastic job of minAvailable 1 reclaims one pod, so
    demand that reclaim is to serve in full comes as jobs of one."""
    for i in range(count):
        c.job(f"{prefix}-{i}", queue=queue, replicas=1, gpu=1)


def two_orgs(**org1: object) -> ClusterBuilder:
    """4 nodes x 8 GPUs; org1 deserves 8 GPUs, org2 24 (by resource, not by weight: both have weight 1)."""
    c = cluster().nodes("n", 4, gpu=8)
    c.queue("org1", deserved={GPU: 8}, **org1)  # type: ignore[arg-type]
    c.queue("org2", deserved={GPU: 24})
    return c


def borrow_then_claim(c: ClusterBuilder, cycles: int, per_job: int = 40) -> list[int]:
    """org1 fills what it may of the idle cluster; then org2 wants as much; the evictions of each later cycle."""
    c.job("org1-train", queue="org1", replicas=per_job, min_available=1, gpu=1)
    c.cycles(2, CONF)
    claim(c, "org2-train", "org2", per_job)
    return [len(c.cycle(CONF).evictions) for _ in range(cycles)]


def test_a_queue_borrows_the_whole_cluster_while_the_other_is_idle() -> None:
    c = two_orgs()
    c.job("org1-train", queue="org1", replicas=40, min_available=1, gpu=1)
    c.cycles(3, CONF)
    assert gpus(c, "org1-train") == 32  # 4x its deserved 8: nobody else wants them


def test_the_other_queue_reclaims_its_deserved_share_and_no_more() -> None:
    c = two_orgs()
    evictions = borrow_then_claim(c, 30)
    assert gpus(c, "org2-train") == 24 and gpus(c, "org1-train") == 8
    assert sum(evictions[10:]) == 0  # settled: no ping-pong


def test_reclaim_stops_at_the_guarantee() -> None:
    c = two_orgs(guarantee={GPU: 16}, capability={GPU: 32})
    borrow_then_claim(c, 30)
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
    borrow_then_claim(c, 30, per_job=32)
    assert (gpus(c, "org1-train"), gpus(c, "org2-train")) == (4, 28)


def test_a_queue_that_is_not_reclaimable_keeps_what_it_borrowed() -> None:
    c = two_orgs(reclaimable=False)
    borrow_then_claim(c, 10)
    assert gpus(c, "org1-train") == 32 and gpus(c, "org2-train") == 0


def test_capacity_and_proportion_together_are_rejected_with_both_places_named() -> None:
    with pytest.raises(ConfError) as error:
        conf_from_tiers(("gang",), ("proportion", "capacity"))
    assert "tiers[1].plugins[1]" in str(error.value) and "tiers[1].plugins[0]" in str(error.value)


# ---- enableHierarchy: queues under queues ------------------------------------------------------------------

TREE = conf_from_tiers(("priority", "gang", "conformance"),
                       ("drf", "predicates", {"name": "capacity", "enableHierarchy": True}, "nodeorder", "binpack"),
                       actions="enqueue, allocate, reclaim, backfill")


def org_tree(**team1: object) -> ClusterBuilder:
    """root -> org-a (at most 16 GPUs) -> team-1, team-2; root -> org-b; 4 nodes x 8 GPUs."""
    c = cluster().nodes("n", 4, gpu=8)
    c.queue("org-a", capability={GPU: 16}, deserved={GPU: 16})
    c.queue("org-b", deserved={GPU: 16})
    c.queue("team-1", parent="org-a", deserved={GPU: 8}, **team1)  # type: ignore[arg-type]
    c.queue("team-2", parent="org-a", deserved={GPU: 8})
    return c


def test_a_leaf_queue_is_held_to_its_ancestors_capability() -> None:
    c = org_tree()
    c.job("t1", queue="team-1", replicas=32, min_available=1, gpu=1)
    c.cycles(3, TREE)
    assert gpus(c, "t1") == 16  # team-1 has no capability of its own; org-a's 16 stops it


def test_without_the_switch_parents_are_ignored() -> None:
    c = org_tree()
    c.job("t1", queue="team-1", replicas=32, min_available=1, gpu=1)
    c.cycles(3, CONF)
    assert gpus(c, "t1") == 32


def test_a_job_in_a_queue_with_children_is_held_at_enqueue_with_the_reason() -> None:
    c = org_tree()
    c.job("inner", queue="org-a", replicas=2, min_available=2, gpu=1)
    result = c.cycle(TREE)
    assert gpus(c, "inner") == 0
    status = next(s for s in result.podgroups if s.job == "default/inner")
    assert status.decision is not None and status.decision.plugin == "capacity"
    assert status.decision.reasons == (QueueNotLeaf("org-a", ("team-1", "team-2")),)


def test_a_queue_whose_parent_does_not_exist_holds_its_jobs_and_the_others_run() -> None:
    c = org_tree()
    c.queue("lost", parent="org-z")
    c.job("stray", queue="lost", replicas=1, gpu=1)
    c.job("t2", queue="team-2", replicas=2, gpu=1)
    result = c.cycle(TREE)
    assert gpus(c, "stray") == 0 and gpus(c, "t2") == 2
    status = next(s for s in result.podgroups if s.job == "default/stray")
    assert status.decision is not None and status.decision.reasons == (QueueParentMissing("lost", "lost", "org-z"),)


def test_the_less_used_subtree_goes_first() -> None:
    c = org_tree()
    c.job("a-big", queue="team-1", replicas=8, gpu=1)  # org-a now uses 8 of its 16 deserved
    c.cycle(TREE)
    # org-b (share 0) comes before team-2 (whose org-a is at 8/16), though team-2 itself holds nothing
    c.job("b", queue="org-b", replicas=1, min_available=1, gpu=24)
    c.job("t2", queue="team-2", replicas=1, min_available=1, gpu=24)
    c.node("big", gpu=24)
    c.cycle(TREE)
    assert gpus(c, "b") == 24 and gpus(c, "t2") == 0


def test_teams_reclaim_from_each_other_inside_their_org() -> None:
    c = org_tree()
    c.job("t1", queue="team-1", replicas=32, min_available=1, gpu=1)
    c.cycles(2, TREE)
    assert gpus(c, "t1") == 16
    claim(c, "t2", "team-2", 16)
    c.cycles(30, TREE)
    assert (gpus(c, "t1"), gpus(c, "t2")) == (8, 8)
