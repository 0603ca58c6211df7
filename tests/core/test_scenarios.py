"""Gang scheduling scenarios on the in-memory cluster (issue 2's acceptance)."""

from __future__ import annotations

from scheduler.api import reasons as R
from scheduler.api.resources import GPU
from scheduler.sim.objects import pod_object
from scheduler.testing import cluster, node_filters


def test_an_8_pod_gang_on_5_free_gpus_binds_nothing_and_says_what_is_short() -> None:
    c = cluster().node("n1", gpu=5).job("train", replicas=8, gpu=1)
    c.cycle()
    assert c.sim.bound("train") == {}
    condition = c.sim.condition("train")
    assert condition is not None and condition["reason"] == "NotEnoughResources"
    reasons = c.sim.reasons("train")
    assert reasons[0] == R.GangNotReady(8, 8, 0, 8)
    assert R.ResourceShortfall(GPU, 8_000, 5_000, R.NODES, 8, 1) in reasons
    assert R.NodesUnavailable(1, (R.FilterCount(R.NodeFilter(R.INSUFFICIENT, GPU), 1),)) in reasons


def test_after_a_node_is_added_all_8_bind_in_the_same_cycle() -> None:
    c = cluster().node("n1", gpu=5).job("train", replicas=8, gpu=1)
    c.cycle()
    c.node("n2", gpu=8)
    result = c.cycle()
    assert len(c.sim.bound("train")) == 8
    assert len(result.binds) == 1 and len(result.binds[0].binds) == 8
    assert c.sim.condition("train", "Scheduled") is not None
    assert c.sim.condition("train", "Unschedulable") is None


def test_min_available_6_of_8_binds_6_when_only_6_fit_and_more_later() -> None:
    c = cluster().node("n1", gpu=6).job("elastic", replicas=8, min_available=6, gpu=1)
    c.cycle()
    assert len(c.sim.bound("elastic")) == 6
    c.node("n2", gpu=2)
    c.cycle()
    assert len(c.sim.bound("elastic")) == 8


def test_two_gangs_that_each_need_the_whole_cluster_never_both_hold_part_of_it() -> None:
    c = cluster().node("n1", gpu=8).node("n2", gpu=4).job("a", replicas=8, gpu=1).job("b", replicas=8, gpu=1)
    for _ in range(5):
        c.cycle()
        assert c.sim.partially_bound_gangs() == []
    bound = {name: len(c.sim.bound(name)) for name in ("a", "b")}
    assert sorted(bound.values()) == [0, 8]


def test_a_higher_priority_job_is_allocated_first() -> None:
    c = (
        cluster()
        .priority_class("high", 1000)
        .node("n1", gpu=4)
        .job("low", replicas=4, gpu=1)
        .job("high", replicas=4, gpu=1, priority_class="high")
    )
    c.cycle()
    assert len(c.sim.bound("high")) == 4
    assert c.sim.bound("low") == {}


def test_a_pod_that_tolerates_no_taint_never_lands_on_a_tainted_node() -> None:
    c = (
        cluster()
        .node("tainted", gpu=8, taints=[{"key": "dedicated", "value": "infer", "effect": "NoSchedule"}])
        .node("plain", gpu=1)
        .job("j", replicas=2, gpu=1)
    )
    for _ in range(3):
        c.cycle()
    assert c.sim.bound("j") == {}
    unavailable = next(r for r in c.sim.reasons("j") if isinstance(r, R.NodesUnavailable))
    assert R.FilterCount(R.NodeFilter(R.TAINT_TOLERATION, "dedicated: infer"), 1) in unavailable.counts


def test_a_pod_that_tolerates_the_taint_may_use_the_node() -> None:
    c = (
        cluster()
        .node("tainted", gpu=8, taints=[{"key": "dedicated", "value": "infer", "effect": "NoSchedule"}])
        .job("j", replicas=2, gpu=1, tolerations=[{"key": "dedicated", "operator": "Exists"}])
    )
    c.cycle()
    assert set(c.sim.bound("j").values()) == {"tainted"}


def test_a_gang_too_large_for_one_node_spreads_when_nothing_forbids_it() -> None:
    c = cluster().node("n1", gpu=4).node("n2", gpu=4).job("j", replicas=8, gpu=1)
    c.cycle()
    assert sorted(set(c.sim.bound("j").values())) == ["n1", "n2"]


def test_fragmented_free_gpus_are_named_as_fragmentation() -> None:
    c = cluster().node("n1", gpu=2).node("n2", gpu=2).job("j", replicas=1, gpu=3)
    c.cycle()
    fragmented = next(r for r in c.sim.reasons("j") if isinstance(r, R.Fragmented))
    assert (dict(fragmented.needed)[GPU], dict(fragmented.largest)[GPU]) == (3_000, 2_000)


def _ps_worker_group(c: object, min_member: int) -> None:
    from scheduler.testing import pod_object

    c.sim.add_podgroup(  # type: ignore[attr-defined]
        {
            "metadata": {"name": "ps"},
            "spec": {"minMember": min_member, "minTaskMember": {"ps": 1, "worker": 2}, "queue": "default"},
        }
    )
    c.sim.add_pod(pod_object("ps-0", group="ps", role="ps", gpu=1))  # type: ignore[attr-defined]
    c.sim.add_pod(pod_object("worker-0", group="ps", role="worker", gpu=1))  # type: ignore[attr-defined]


def test_per_role_minimums_must_all_be_met_when_min_member_covers_them() -> None:
    from scheduler.testing import pod_object

    c = cluster().node("n1", gpu=4)
    _ps_worker_group(c, 3)  # minMember 3 = 1 + 2: each task's minimum applies (Volcano's CheckTaskValid)
    c.sim.add_pod(pod_object("ps-1", group="ps", role="ps", gpu=1))
    c.cycle()
    assert c.sim.bound("ps") == {}
    assert c.sim.condition("ps")["reason"] == "NotEnoughPodsOfTask"  # type: ignore[index]
    c.sim.add_pod(pod_object("worker-1", group="ps", role="worker", gpu=1))
    c.cycle()
    assert len(c.sim.bound("ps")) == 4


def test_per_role_minimums_are_waived_when_min_member_is_below_their_sum() -> None:
    c = cluster().node("n1", gpu=3)
    _ps_worker_group(c, 2)  # minMember 2 < 1 + 2: only minMember counts (Volcano's job_info.go)
    c.cycle()
    assert c.sim.bound("ps") == {"ps-0": "n1", "worker-0": "n1"}


def test_a_gang_held_by_its_queue_is_not_called_fragmented() -> None:
    c = cluster().node("n1", gpu=8).queue("zero", capability={"nvidia.com/gpu": 0, "cpu": 0, "memory": 0})
    c.job("j", queue="zero", replicas=2, gpu=1)
    c.cycle()
    reasons = c.sim.reasons("j")
    assert R.QueueLimit("zero", R.DESERVED, GPU, limit_amount=0, total=1_000, requested=1_000) in reasons
    assert not any(isinstance(r, R.Fragmented) for r in reasons)


def test_a_gang_one_node_could_hold_is_not_called_fragmented() -> None:
    """Two pods that repel each other (required anti-affinity per host) on one node with room for both: the
    node filter says why; "fragmented, the most on one node is 2 cpu" for a 2-cpu gang would be false."""
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "j"}}, "topologyKey": "kubernetes.io/hostname"}]}}
    c = cluster().node("n1", cpu="2", labels={"kubernetes.io/hostname": "n1"})
    c.sim.add_podgroup({"metadata": {"name": "j"}, "spec": {"minMember": 2, "queue": "default"}})
    for i in range(2):
        pod = pod_object(f"j-{i}", group="j", cpu="1", affinity=anti)
        pod["metadata"].setdefault("labels", {})["app"] = "j"
        c.sim.add_pod(pod)
    c.cycle()
    reasons = c.sim.reasons("j")
    assert c.sim.bound("j") == {}
    assert not any(isinstance(r, R.Fragmented) for r in reasons)
    assert R.POD_ANTI_AFFINITY in {f.filter for f in node_filters(reasons)}


def test_each_queue_reports_what_its_jobs_hold() -> None:
    c = cluster().node("n", gpu=8).queue("a").queue("b")
    c.job("x", queue="a", replicas=2, gpu=1).job("y", queue="b", replicas=3, gpu=1)
    result = c.cycle()
    assert {q.queue: q.allocated.gpu for q in result.queues} == {"default": 0, "a": 2000, "b": 3000}
