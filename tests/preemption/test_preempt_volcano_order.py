"""Legacy preempt as Volcano's normalPreempt (pkg/scheduler/actions/preempt/preempt.go): the queue's Allocatable
is part of "the preemptor fits", so a queue at its capability makes room inside itself."""

from __future__ import annotations

from preemption_confs import make_conf

from scheduler.testing import cluster

CAPACITY = make_conf(second=("drf", "predicates", "capacity", "nodeorder", "binpack"))


def test_a_gang_in_a_queue_at_its_capability_preempts_surplus_pods_of_that_queue() -> None:
    """q holds 4 of the 8 GPUs, its capability; `elastic` (4 x 1 GPU, minAvailable 1, low) uses them all.
    `urgent` (2 x 1 GPU, high) arrives in q: the nodes have room, the queue has none, so allocate cannot place
    it; preempt evicts two of elastic's surplus pods (the queue's Allocatable then lets urgent in)."""
    c = cluster().priority_class("low", 10).priority_class("high", 1000).nodes("n", 2, gpu=4)
    c.queue("q", capability={"nvidia.com/gpu": "4", "cpu": "64", "memory": "256Gi"})
    c.job("elastic", queue="q", replicas=4, min_available=1, gpu=1, priority_class="low")
    c.cycle(CAPACITY)
    assert len(c.sim.bound("elastic")) == 4
    c.job("urgent", queue="q", replicas=2, gpu=1, priority_class="high")
    for _ in range(3):
        c.cycle(CAPACITY)
    assert len(c.sim.evicted) == 2 and all(key.startswith("default/elastic-") for key in c.sim.evicted)
    assert len(c.sim.bound("urgent")) == 2
