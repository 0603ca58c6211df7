"""gangpreempt and gangreclaim: whole gangs take room from bundles of victims, as Volcano's gang-aware eviction
(pkg/scheduler/actions/gangpreempt, gangreclaim, utils/bundle.go). Each test names the rule it pins; each
argument (maxDomains, allowWholeBundle, predicateErrorCacheEnable) is shown to change the outcome."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.framework.conf import SchedulerConf
from scheduler.testing import ClusterBuilder, cluster, conf_from_tiers, pod_object

GANG_ACTIONS = "allocate, backfill, gangreclaim, gangpreempt"


def gang_conf(*, gangpreempt: dict[str, Any] | None = None, gangreclaim: dict[str, Any] | None = None,
              allocate: dict[str, Any] | None = None, topology: bool = False,
              topology_args: dict[str, Any] | None = None) -> SchedulerConf:
    """Volcano's gang-eviction conf (examples/sim/gang-eviction.conf)."""
    second: list[Any] = [{"name": "drf", "enablePreemptable": False}, "predicates", "capacity", "nodeorder",
                         "binpack"]
    if topology:
        second.append({"name": "network-topology-aware", "arguments": dict(topology_args or {})})
    configurations = {k: v for k, v in (("gangpreempt", gangpreempt), ("gangreclaim", gangreclaim),
                                        ("allocate", allocate)) if v is not None}
    return conf_from_tiers(["priority", {"name": "gang", "enablePreemptable": False}, "conformance"], second,
                           actions=GANG_ACTIONS, configurations=configurations or None)


CONF = gang_conf()


def base(*, nodes: int = 2, gpu: int = 4) -> ClusterBuilder:
    return (cluster().priority_class("low", 10).priority_class("mid", 100).priority_class("high", 1000)
            .nodes("n", nodes, gpu=gpu, cpu="64", memory="256Gi"))


def run(c: ClusterBuilder, conf: SchedulerConf = CONF, cycles: int = 3) -> None:
    for _ in range(cycles):
        c.cycle(conf)


def evicted_of(c: ClusterBuilder, job: str) -> set[str]:
    return {key for key in c.sim.evicted if key.split("/", 1)[1].rsplit("-", 1)[0] == job}


def test_a_high_priority_rigid_gang_preempts_a_whole_low_priority_rigid_gang() -> None:
    """The issue's case: low (8 x 1 GPU, minAvailable 8) fills 2 x 4 GPUs; high (4 x 1 GPU, minAvailable 4)
    arrives. low cannot lose 4 pods and stay a gang, so its whole bundle goes, and high starts."""
    c = base()
    c.job("low", replicas=8, gpu=1, priority_class="low")
    run(c, cycles=1)
    assert len(c.sim.bound("low")) == 8
    c.job("high", replicas=4, gpu=1, priority_class="high")
    run(c)
    assert evicted_of(c, "low") == {f"default/low-{i}" for i in range(8)}
    assert len(c.sim.bound("high")) == 4


def test_without_whole_bundles_a_rigid_gang_is_never_broken() -> None:
    """allowWholeBundle: false keeps only safe bundles: a rigid gang has none, so nothing is evicted."""
    c = base()
    c.job("low", replicas=8, gpu=1, priority_class="low")
    run(c, cycles=1)
    c.job("high", replicas=4, gpu=1, priority_class="high")
    conf = gang_conf(gangpreempt={"allowWholeBundle": False})
    run(c, conf)
    assert c.sim.evicted == []
    assert c.sim.bound("high") == {}


def test_safe_bundles_go_before_whole_ones() -> None:
    """An elastic gang's extras (a safe bundle) are taken before a rigid gang is broken, although the victim-job
    order alone (the reverse of JobOrder: drf's larger share first) would take the rigid gang first."""
    c = base()
    c.job("rigid", replicas=5, gpu=1, priority_class="low")
    c.job("elastic", replicas=3, min_available=1, gpu=1, priority_class="low")
    run(c, cycles=1)
    assert len(c.sim.bound("rigid")) == 5 and len(c.sim.bound("elastic")) == 3
    c.job("high", replicas=2, gpu=1, priority_class="high")
    run(c)
    assert evicted_of(c, "rigid") == set()
    assert len(evicted_of(c, "elastic")) == 2
    assert len(c.sim.bound("high")) == 2


def test_an_equal_priority_gang_is_never_a_victim() -> None:
    """gangpreempt takes only from lower-priority jobs (priority's Evictable; no second tier falls through)."""
    c = base()
    c.job("peer", replicas=8, gpu=1, priority_class="high")
    run(c, cycles=1)
    c.job("high", replicas=4, gpu=1, priority_class="high")
    run(c)
    assert c.sim.evicted == []


def test_nothing_is_evicted_when_the_preemptor_would_still_not_fit() -> None:
    """The plan is kept only if the preemptor is then pipelined."""
    c = base()
    c.job("low", replicas=8, gpu=1, priority_class="low")
    run(c, cycles=1)
    c.job("huge", replicas=3, gpu=4, priority_class="high")  # 12 GPUs on an 8-GPU cluster
    run(c)
    assert c.sim.evicted == []


def test_a_podgroup_marked_not_preemptable_is_never_a_gang_victim() -> None:
    c = base()
    c.job("low", replicas=8, gpu=1, priority_class="low")
    c.sim.podgroups["default/low"].manifest["metadata"]["annotations"] = {"volcano.sh/preemptable": "false"}
    run(c, cycles=1)
    c.job("high", replicas=4, gpu=1, priority_class="high")
    run(c)
    assert c.sim.evicted == []


def test_role_minimums_keep_a_role_out_of_the_safe_bundle() -> None:
    """A victim with minAvailable 3 = its task minimums (ps 1, worker 2) and 2 spare workers: its safe bundle
    holds only spare workers, never its ps; the ps goes only with the whole gang."""
    c = base(nodes=1, gpu=6)
    c.sim.add_podgroup({"metadata": {"name": "train", "namespace": "default"},
                        "spec": {"minMember": 3, "minTaskMember": {"ps": 1, "worker": 2},
                                 "priorityClassName": "low"}})
    c.sim.add_pod(pod_object("train-ps-0", group="train", role="ps", gpu=2, priority_class="low"))
    for i in range(4):
        c.sim.add_pod(pod_object(f"train-worker-{i}", group="train", role="worker", gpu=1, priority_class="low"))
    run(c, cycles=1)
    assert len(c.sim.bound("train")) == 5
    c.job("high", replicas=2, gpu=1, priority_class="high")  # needs 2 GPUs: the two spare workers suffice
    run(c)
    lost = set(c.sim.evicted)
    assert len(lost) == 2 and all("worker" in key for key in lost)
    assert len(c.sim.bound("high")) == 2


def test_the_predicate_error_cache_changes_the_plan() -> None:
    """allocate's predicateErrorCacheEnable: a node that turned away one task of a role is not asked again for
    the role's next task in the same plan (Volcano's PredicateHelper, keyed by job and role). Here the role's
    first task (4 GPUs) is turned away by the 2-GPU node; its second (2 GPUs) would fit there."""
    def build() -> ClusterBuilder:
        c = cluster().priority_class("low", 10).priority_class("high", 1000)
        c.node("a", gpu=4, cpu="64", memory="256Gi").node("b", gpu=2, cpu="64", memory="256Gi")
        c.job("low", replicas=6, gpu=1, priority_class="low")
        run(c, cycles=1)
        c.sim.add_podgroup({"metadata": {"name": "high", "namespace": "default"},
                            "spec": {"minMember": 2, "priorityClassName": "high"}})
        c.sim.add_pod(pod_object("high-0", group="high", role="w", gpu=4, priority_class="high"))
        c.sim.now += 1
        c.sim.add_pod(pod_object("high-1", group="high", role="w", gpu=2, priority_class="high"))
        return c

    cached, uncached = build(), build()
    run(cached, gang_conf())
    run(uncached, gang_conf(allocate={"predicateErrorCacheEnable": False}))
    assert cached.sim.evicted == [] and cached.sim.bound("high") == {}
    assert len(uncached.sim.evicted) == 6
    assert uncached.sim.bound("high") == {"high-0": "a", "high-1": "b"}


def topology_cluster() -> ClusterBuilder:
    """Four tier-1 HyperNodes of two 2-GPU nodes each, under one tier-2 HyperNode. Only hn-d's gang is of low
    priority: hn-a..hn-c hold gangs of the preemptor's own priority."""
    c = cluster().priority_class("low", 10).priority_class("high", 1000)
    for domain in "abcd":
        c.nodes(f"{domain}-", 2, gpu=2, cpu="64", memory="256Gi")
        c.hypernode(f"hn-{domain}", 1, [f"{domain}-0", f"{domain}-1"])
    c.hypernode("spine", 2, [f"hn-{d}" for d in "abcd"], kind="HyperNode")
    for domain in "abcd":
        pc = "low" if domain == "d" else "high"
        c.sim.add_podgroup({"metadata": {"name": f"busy-{domain}", "namespace": "default"},
                            "spec": {"minMember": 2, "priorityClassName": pc}})
        for i in range(2):
            pod = pod_object(f"busy-{domain}-{i}", group=f"busy-{domain}", gpu=2, priority_class=pc,
                             node_selector={"kubernetes.io/hostname": f"{domain}-{i}"})
            c.sim.add_pod(pod)
    return c


@pytest.mark.parametrize(("max_domains", "preempted"), [(2, False), (4, True)])
def test_max_domains_bounds_where_a_hard_topology_gang_looks(max_domains: int, preempted: bool) -> None:
    """A gang with a hard topology (highestTierAllowed 1) looks for victims only inside one tier-1 HyperNode,
    and only in the first `maxDomains` of them (by name here); hn-d is the fourth."""
    conf = gang_conf(gangpreempt={"maxDomains": max_domains}, topology=True)
    c = topology_cluster()
    run(c, conf, cycles=1)
    assert sum(len(c.sim.bound(f"busy-{d}")) for d in "abcd") == 8
    c.sim.add_podgroup({"metadata": {"name": "high", "namespace": "default"},
                        "spec": {"minMember": 2, "priorityClassName": "high",
                                 "networkTopology": {"mode": "hard", "highestTierAllowed": 1}}})
    for i in range(2):
        c.sim.add_pod(pod_object(f"high-{i}", group="high", gpu=2, priority_class="high"))
    run(c, conf)
    assert (evicted_of(c, "busy-d") == {"default/busy-d-0", "default/busy-d-1"}) is preempted
    assert len(c.sim.evicted) == (2 if preempted else 0)
    if preempted:
        assert set(c.sim.bound("high").values()) == {"d-0", "d-1"}


def reclaim_cluster(*, reclaimable: bool = True) -> ClusterBuilder:
    """q2 deserves no GPU and runs a rigid 8-GPU gang; q1 deserves 8 GPUs."""
    c = base()
    c.queue("q1", deserved={"nvidia.com/gpu": "8", "cpu": "32", "memory": "128Gi"})
    c.queue("q2", deserved={"cpu": "32", "memory": "128Gi"}, reclaimable=reclaimable)
    c.job("other", queue="q2", replicas=8, gpu=1, priority_class="high")
    run(c, cycles=1)
    assert len(c.sim.bound("other")) == 8
    c.job("mine", queue="q1", replicas=4, gpu=1, priority_class="low")
    return c


def test_gangreclaim_takes_a_whole_gang_from_a_queue_that_deserves_none_of_it() -> None:
    """Across queues priority does not count (priority's Evictable lets every candidate go for reclaim); the
    victim queue deserves no GPU, so capacity lets each of its GPU tasks go."""
    c = reclaim_cluster()
    run(c)
    assert evicted_of(c, "other") == {f"default/other-{i}" for i in range(8)}
    assert len(c.sim.bound("mine")) == 4


def test_gangreclaim_never_takes_from_a_queue_that_is_not_reclaimable() -> None:
    c = reclaim_cluster(reclaimable=False)
    run(c)
    assert c.sim.evicted == []


def capacity_first_conf() -> SchedulerConf:
    """The gang-eviction conf with capacity in the first tier, where its Evictable is asked."""
    return conf_from_tiers(
        ["priority", {"name": "gang", "enablePreemptable": False}, "conformance", "capacity"],
        [{"name": "drf", "enablePreemptable": False}, "predicates", "nodeorder", "binpack"],
        actions=GANG_ACTIONS)


@pytest.mark.parametrize(("conf", "reclaimed"), [(capacity_first_conf(), False), (CONF, True)],
                         ids=["capacity-in-tier-1", "capacity-in-tier-2"])
def test_capacity_protects_a_deserved_share_only_where_its_tier_is_asked(conf: SchedulerConf,
                                                                         reclaimed: bool) -> None:
    """capacity's Evictable counts each victim as gone for the next: q2 deserves 4 of the 8 GPUs its rigid gang
    holds, so only 4 of the gang's tasks may go, and a whole bundle survives only whole: nothing is reclaimed.
    But Volcano's UnifiedEvictable returns the first tier with an answer: with capacity in the second tier,
    tier 1 (priority, gang, conformance: every candidate, for reclaim) answers and capacity is never asked."""
    c = base()
    c.queue("q1", deserved={"nvidia.com/gpu": "4"})
    c.queue("q2", deserved={"nvidia.com/gpu": "4"})
    c.job("other", queue="q2", replicas=8, gpu=1)
    run(c, conf, cycles=1)
    assert len(c.sim.bound("other")) == 8
    c.job("mine", queue="q1", replicas=4, gpu=1)
    run(c, conf)
    assert (len(c.sim.evicted) == 8) is reclaimed
    assert (len(c.sim.bound("mine")) == 4) is reclaimed


def test_a_hard_topology_gang_waits_on_its_victims_room_instead_of_evicting_a_second_domain() -> None:
    """While the victims terminate (30 s grace here), the preemptor is reserved on the room they release, in
    their domain, as Volcano's allocate pipelines onto future idle; so gangpreempt does not see it starving
    again and evicts no other domain (differential preemption seeds 8, 12: twice Volcano's evictions)."""
    conf = gang_conf(gangpreempt={"maxDomains": 4}, topology=True)
    c = cluster().priority_class("low", 10).priority_class("high", 1000)
    for domain in "abcd":
        c.nodes(f"{domain}-", 1, gpu=4, cpu="64", memory="256Gi")
        c.hypernode(f"hn-{domain}", 1, [f"{domain}-0"])
    c.sim.graceful = True
    c.job("low", replicas=16, gpu=1, priority_class="low")
    run(c, conf, cycles=1)
    assert len(c.sim.bound("low")) == 16
    c.sim.add_podgroup({"metadata": {"name": "high", "namespace": "default"},
                        "spec": {"minMember": 4, "priorityClassName": "high",
                                 "networkTopology": {"mode": "hard", "highestTierAllowed": 1}}})
    for i in range(4):
        c.sim.add_pod(pod_object(f"high-{i}", group="high", gpu=1, priority_class="high"))
    evicted: list[str] = []
    for _ in range(40):  # 40 one-second cycles: past the victims' 30 s grace period
        evicted.extend(e.task for e in c.cycle(conf).evictions)
        c.sim.reap()  # terminated victims go (the replay's loop does this)
    assert len(evicted) == 4, "the whole bundle is low's pods in one domain (its node), taken once"
    assert len(c.sim.bound("high")) == 4


def test_a_gang_broken_by_eviction_does_not_take_back_its_preemptors_room() -> None:
    """The victim's pods, recreated by its controller, wait their turn in JobOrder (Volcano has no precedence
    for partly bound gangs): the higher-priority preemptor binds in the room made for it, and no second domain
    is evicted (differential preemption seeds 8, 12, ...: twice Volcano's evictions, or a loop)."""
    conf = gang_conf(topology=True)
    c = cluster().priority_class("low", 10).priority_class("high", 1000)
    for i in range(4):
        c.node(f"n{i}", cpu="4", memory="4000Mi")
        c.hypernode(f"hn-{i}", 1, [f"n{i}"])
    c.job("v0", replicas=16, cpu="1", memory="1000Mi", priority_class="low")
    c.cycle(conf)
    c.sim.add_podgroup({"metadata": {"name": "hi", "namespace": "default"},
                        "spec": {"minMember": 4, "priorityClassName": "high",
                                 "networkTopology": {"mode": "hard", "highestTierAllowed": 1}}})
    for i in range(4):
        c.sim.add_pod(pod_object(f"hi-{i}", group="hi", cpu="1", memory="1000Mi", priority_class="high"))
    evicted: list[str] = []
    for _ in range(4):
        result = c.cycle(conf)
        evicted.extend(e.task for e in result.evictions)
        for e in result.evictions:  # the victim's controller recreates each evicted pod
            c.sim.add_pod(pod_object(e.task.split("/", 1)[1], group="v0", cpu="1", memory="1000Mi",
                                     priority_class="low"))
    assert len(evicted) == 4
    assert len(c.sim.bound("hi")) == 4 and len(c.sim.bound("v0")) == 12
