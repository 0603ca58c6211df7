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


def test_a_skipped_gang_keeps_the_queue_limit_its_last_try_met() -> None:
    """A gang held by its queue's capability on the way to a node failure: the cycles that skip it (nothing it
    needs changed) say the same whole message, so its PodGroup is not written again without the queue's line."""
    from scheduler.testing import conf_from_tiers

    conf = conf_from_tiers(("priority", "gang", "conformance"),
                           ("drf", "predicates", "capacity", "nodeorder", "binpack"))
    c = cluster().node("n1", gpu=8, cpu="16").queue(
        "q", capability={"nvidia.com/gpu": "2", "cpu": "100", "memory": "1Ti"})
    c.job("t", queue="q", replicas=0, min_available=3)
    c.pod("t-0", group="t", gpu=2)
    c.pod("t-1", group="t", gpu=1)  # over the queue's 2 GPUs once t-0 is placed
    c.pod("t-2", group="t", cpu="64")  # no node has the cpu
    first = c.cycle(conf)
    (status,) = [s for s in first.podgroups if s.job == "default/t"]
    assert "queue q capability nvidia.com/gpu 2" in status.conditions[-1].message
    reasons = c.sim.reasons("t")
    second = c.cycle(conf)
    assert c.memo.skipped == 1
    assert [s for s in second.podgroups if s.job == "default/t"] == []  # nothing to write: the same condition
    assert c.sim.reasons("t") == reasons
