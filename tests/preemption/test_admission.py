"""The enqueue gates count what preempt and reclaim could free, so a high-priority job gets into a full cluster."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from preemption_confs import make_conf

from scheduler.api.reasons import OvercommitLimit, QueueLimit
from scheduler.testing import cluster

GPU = "nvidia.com/gpu"


@dataclass(frozen=True)
class Case:
    name: str
    actions: str
    high_priority: bool
    starts: bool


CASES = [
    Case("a high-priority job is admitted to a full cluster and preempts its way in",
         "enqueue, allocate, preempt, reclaim, backfill", True, True),
    Case("without preempt in the actions it waits at enqueue", "enqueue, allocate, backfill", True, False),
    Case("a job of the same priority is not admitted on the strength of preemption",
         "enqueue, allocate, preempt, reclaim, backfill", False, False),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_high_priority_job_into_a_full_cluster(case: Case) -> None:
    conf = make_conf(case.actions)
    c = (
        cluster().priority_class("low", 10).priority_class("high", 1000).nodes("n", 2, gpu=8)
        .job("batch", replicas=16, min_available=1, gpu=1, priority_class="low",
             min_resources={"cpu": "1", "memory": "1Gi", GPU: "1"})
    )
    c.cycle(conf)
    assert c.sim.used_gpus() == 16000
    c.job("urgent", replicas=8, gpu=1, priority_class="high" if case.high_priority else "low",
          min_resources={"cpu": "8", "memory": "8Gi", GPU: "8"})
    for _ in range(4):
        c.cycle(conf)
    phase = c.sim.podgroup("urgent")["status"]["phase"]
    if case.starts:
        assert len(c.sim.bound("urgent")) == 8 and phase == "Running"
        assert len(c.sim.evicted) == 8
    else:
        assert c.sim.bound("urgent") == {} and phase == "Pending" and c.sim.evicted == []
        assert any(isinstance(r, OvercommitLimit | QueueLimit) for r in c.sim.reasons("urgent"))


def test_a_queue_under_its_share_is_admitted_to_a_full_cluster_and_reclaims() -> None:
    conf = make_conf()
    c = cluster().nodes("n", 2, gpu=8).queue("a").queue("b")
    c.job("hog", queue="a", replicas=16, min_available=1, gpu=1, min_resources={GPU: "1"})
    c.cycle(conf)
    c.job("fair", queue="b", replicas=8, gpu=1, min_resources={"cpu": "8", "memory": "8Gi", GPU: "8"})
    for _ in range(4):
        c.cycle(conf)
    assert len(c.sim.bound("fair")) == 8
    assert len(c.sim.bound("hog")) == 8
