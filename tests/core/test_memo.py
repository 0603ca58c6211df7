"""Between cycles the scheduler remembers predicate answers and gangs that did not fit (issue 9)."""

from __future__ import annotations

from scheduler.testing import cluster


def test_an_unschedulable_gang_is_not_retried_while_nothing_it_needs_changes() -> None:
    c = cluster().node("n1", gpu=5).job("train", replicas=8, gpu=1)
    c.cycle()
    first = c.sim.reasons("train")
    c.cycle()
    assert c.memo.skipped == 1
    assert c.sim.bound("train") == {}
    assert first and c.sim.reasons("train") == first  # the remembered failure says the same


def test_a_node_that_frees_gpus_makes_the_gang_try_again_and_bind() -> None:
    c = cluster().node("n1", gpu=8).job("small", replicas=1, gpu=4)
    c.cycle()
    c.job("train", replicas=8, gpu=1)
    c.cycle()
    c.cycle()
    assert c.memo.skipped == 1 and c.sim.bound("train") == {}
    c.sim.finish_pod("default/small-0")
    c.cycle()
    assert c.memo.skipped == 0
    assert len(c.sim.bound("train")) == 8


def test_a_new_node_resets_what_was_remembered() -> None:
    c = cluster().node("n1", gpu=5).job("train", replicas=8, gpu=1)
    c.cycle()
    c.cycle()
    assert c.memo.skipped == 1
    c.node("n2", gpu=8)
    c.cycle()
    assert c.memo.skipped == 0 and len(c.sim.bound("train")) == 8


def test_a_gang_that_changed_is_tried_again() -> None:
    c = cluster().node("n1", gpu=5).job("train", replicas=8, gpu=1, min_available=8)
    c.cycle()
    c.sim.delete_pod("default/train-7")
    c.sim.delete_pod("default/train-6")
    c.sim.delete_pod("default/train-5")
    c.sim.podgroup("train")["spec"]["minMember"] = 5
    c.cycle()
    assert len(c.sim.bound("train")) == 5
