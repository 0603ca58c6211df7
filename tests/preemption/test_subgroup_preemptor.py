"""A job with sub-groups (PodGroup `spec.subGroupPolicy`) as a gangpreempt / gangreclaim preemptor: each
sub-group that needs room gets a HyperNode of its own, a hard one inside one domain of its tier, all or nothing for
the job's minimum (Volcano's BuildNominationPlanInDomain, pkg/scheduler/actions/utils/simulate.go)."""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

import pytest
from test_gang_evict import gang_conf

from scheduler.jobs.partitions import PARTITION_ID_KEY
from scheduler.sim.objects import pod_object
from scheduler.testing import ClusterBuilder, cluster

HARD_RACK = {"mode": "hard", "highestTierAllowed": 1}
CONF = gang_conf(topology=True)


def racks(layout: list[list[str]], *, cpu: str = "4") -> ClusterBuilder:
    """Nodes in tier-1 HyperNodes rack0, rack1, ... (one per entry of `layout`) under one tier-2 `spine`."""
    c = cluster().priority_class("low", 10).priority_class("high", 1000)
    for index, nodes in enumerate(layout):
        for node in nodes:
            c.node(node, cpu=cpu, memory="64Gi")
        c.hypernode(f"rack{index}", 1, nodes)
    c.hypernode("spine", 2, [f"rack{i}" for i in range(len(layout))], kind="HyperNode")
    return c


def pinned_job(c: ClusterBuilder, name: str, node: str, *, cpu: str, pc: str, queue: str = "default") -> None:
    """A one-pod job that can run only on `node`."""
    c.sim.add_podgroup({"metadata": {"name": name, "namespace": "default"},
                        "spec": {"minMember": 1, "priorityClassName": pc, "queue": queue}})
    c.sim.add_pod(pod_object(f"{name}-0", group=name, cpu=cpu, memory="1Gi", priority_class=pc,
                             node_selector={"kubernetes.io/hostname": node}))


def partitioned(c: ClusterBuilder, name: str, *, partitions: int, size: int, min_partitions: int, cpu: str,
                pc: str = "high", queue: str = "default", topology: Mapping[str, Any] | None = HARD_RACK,
                job_topology: Mapping[str, Any] | None = None, running: Mapping[int, str] | None = None,
                interleave: bool = False) -> None:
    """A PodGroup and pods as the job controller writes them for a task `stage` with a partitionPolicy; the pods
    numbered in `running` already run on the node given."""
    policy: dict[str, Any] = {"name": "stage", "subGroupSize": size, "minSubGroups": min_partitions,
                              "labelSelector": {"matchLabels": {"volcano.sh/task-spec": "stage"}},
                              "matchLabelKeys": [PARTITION_ID_KEY]}
    if topology is not None:
        policy["networkTopology"] = dict(topology)
    spec: dict[str, Any] = {"minMember": min_partitions * size, "queue": queue, "priorityClassName": pc,
                            "subGroupPolicy": [policy]}
    if job_topology is not None:
        spec["networkTopology"] = dict(job_topology)
    c.sim.add_podgroup({"metadata": {"name": name, "namespace": "default"}, "spec": spec,
                        "status": {"phase": "Inqueue"}})
    for i in range(partitions * size):
        pod = pod_object(f"{name}-stage-{i}", group=name, role="stage", cpu=cpu, memory="1Gi", priority_class=pc)
        pod["metadata"]["labels"]["volcano.sh/task-spec"] = "stage"
        pod["metadata"]["labels"][PARTITION_ID_KEY] = str(i % partitions if interleave else i // size)
        if running and i in running:
            pod["spec"]["nodeName"] = running[i]
            pod["status"]["phase"] = "Running"
        c.sim.add_pod(pod)


def rack_of(node: str) -> str:
    return node[0]  # nodes are named <rack letter><index>


def partitions_bound(c: ClusterBuilder, job: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for pod in c.sim.pods_of(job):
        node = pod.manifest["spec"].get("nodeName")
        if node:
            out.setdefault(pod.manifest["metadata"]["labels"][PARTITION_ID_KEY], []).append(node)
    return out


def run(c: ClusterBuilder, cycles: int = 3) -> None:
    for _ in range(cycles):
        c.cycle(CONF)


def test_a_sub_grouped_job_preempts_a_rack_per_partition() -> None:
    """Two racks of two 4-cpu nodes, each node holding a 4-cpu low-priority pod; high has two partitions of two
    4-cpu pods, each hard within a rack, both needed. Each partition takes one whole rack."""
    c = racks([["a1", "a2"], ["b1", "b2"]])
    for node in ("a1", "a2", "b1", "b2"):
        pinned_job(c, f"low-{node}", node, cpu="4", pc="low")
    run(c, 1)
    partitioned(c, "high", partitions=2, size=2, min_partitions=2, cpu="4")
    run(c)
    assert len(c.sim.evicted) == 4
    bound = partitions_bound(c, "high")
    assert sorted(bound) == ["0", "1"]
    assert all(len(nodes) == 2 and len({rack_of(n) for n in nodes}) == 1 for nodes in bound.values()), bound


def test_a_partition_is_never_split_across_racks_to_make_room() -> None:
    """One 4-cpu low-priority pod in each rack, the other node of each rack held by a peer of high's priority: the
    victims' room would hold high's one partition (2 x 4 cpu) only split across the racks, so nothing is evicted
    (a flat plan over the cluster would evict both and split the partition)."""
    c = racks([["a1", "a2"], ["b1", "b2"]])
    pinned_job(c, "low-a", "a1", cpu="4", pc="low")
    pinned_job(c, "low-b", "b1", cpu="4", pc="low")
    pinned_job(c, "peer-a", "a2", cpu="4", pc="high")
    pinned_job(c, "peer-b", "b2", cpu="4", pc="high")
    run(c, 1)
    partitioned(c, "high", partitions=1, size=2, min_partitions=1, cpu="4")
    run(c)
    assert c.sim.evicted == []
    assert c.sim.bound("high") == {}


def test_all_or_nothing_for_the_minimum_in_whole_sub_groups() -> None:
    """Three racks of two 4-cpu nodes: rack a holds two low-priority pods, racks b and c one each beside a peer of
    high's priority. The victims free 16 cpu, what high's two partitions (2 x 2 x 4 cpu, both needed) ask, but
    only rack a can hold a whole partition: the second fits in no rack, so the plan is discarded and nothing is
    evicted (a flat plan would evict all four and split a partition). With one partition asked, it takes rack a."""
    def build(partitions: int) -> ClusterBuilder:
        c = racks([["a1", "a2"], ["b1", "b2"], ["c1", "c2"]])
        for node in ("a1", "a2", "b1", "c1"):
            pinned_job(c, f"low-{node}", node, cpu="4", pc="low")
        for node in ("b2", "c2"):
            pinned_job(c, f"peer-{node}", node, cpu="4", pc="high")
        run(c, 1)
        partitioned(c, "high", partitions=partitions, size=2, min_partitions=partitions, cpu="4")
        run(c)
        return c

    both = build(2)
    assert both.sim.evicted == [] and both.sim.bound("high") == {}
    one = build(1)
    assert {"default/low-a1-0", "default/low-a2-0"} <= set(one.sim.evicted)
    assert sorted(one.sim.bound("high").values()) == ["a1", "a2"]


def test_only_the_sub_groups_needed_take_room() -> None:
    """Partition 0 of high already runs in rack a; partition 1 (needed: minSubGroups 2) is pending and racks b
    and c are full of low-priority pods. Partition 1 takes one rack; the other rack keeps at least one pod."""
    c = racks([["a1", "a2"], ["b1", "b2"], ["c1", "c2"]])
    for node in ("b1", "b2", "c1", "c2"):
        pinned_job(c, f"low-{node}", node, cpu="4", pc="low")
    run(c, 1)
    partitioned(c, "high", partitions=2, size=2, min_partitions=2, cpu="4", running={0: "a1", 1: "a2"})
    run(c)
    bound = partitions_bound(c, "high")
    assert sorted(bound["0"]) == ["a1", "a2"]
    assert len(bound["1"]) == 2 and len({rack_of(n) for n in bound["1"]}) == 1, bound
    assert 2 <= len(c.sim.evicted) <= 3


def test_gangreclaim_nominates_a_rack_per_partition() -> None:
    """gangreclaim: q1 deserves the whole cluster and asks for two rack-bound partitions; q2, which deserves no
    cpu, fills it. Each partition reclaims one whole rack."""
    c = racks([["a1", "a2"], ["b1", "b2"]])
    c.queue("q1", deserved={"cpu": "16", "memory": "256Gi"})
    c.queue("q2", deserved={"memory": "1Gi"})
    for node in ("a1", "a2", "b1", "b2"):
        pinned_job(c, f"other-{node}", node, cpu="4", pc="high", queue="q2")
    run(c, 1)
    partitioned(c, "mine", partitions=2, size=2, min_partitions=2, cpu="4", pc="low", queue="q1")
    run(c)
    assert len(c.sim.evicted) == 4
    bound = partitions_bound(c, "mine")
    assert sorted(bound) == ["0", "1"]
    assert all(len(nodes) == 2 and len({rack_of(n) for n in nodes}) == 1 for nodes in bound.values()), bound


def test_a_victims_safe_bundle_keeps_its_minimum_of_whole_sub_groups() -> None:
    """The victim v has two partitions of two pods (minSubGroups 1), its pods numbered across them (0 and 2 in
    partition 0): its safe bundle is one whole partition, not its two first pods, which would leave both
    partitions short and v broken (Volcano's CreateJobBundles, enforceSubJobs). The preemptor needs two pods' room."""
    c = racks([["a1"]])
    partitioned(c, "v", partitions=2, size=2, min_partitions=1, cpu="1", pc="low", topology=None, interleave=True)
    run(c, 1)
    assert len(c.sim.bound("v")) == 4
    c.job("p", replicas=2, cpu="1", memory="1Gi", priority_class="high")
    run(c)
    assert sorted(c.sim.evicted) == ["default/v-stage-0", "default/v-stage-2"]
    assert sorted(c.sim.bound("v")) == ["v-stage-1", "v-stage-3"]
    assert len(c.sim.bound("p")) == 2


# ---- seeded random workloads ---------------------------------------------------------------------------------

def random_workload(seed: int) -> tuple[ClusterBuilder, dict[str, tuple[int, int]]]:
    """Racks a.. of 2-3 nodes (4 cpu) under one spine; in half the workloads a low-priority job of partitions
    (`vic`, no topology, its pods numbered across partitions or not); each node then filled by low- or
    high-priority one-pod jobs; then a high-priority job of partitions (`pre`), hard within a rack. Returns the
    cluster and, per job of partitions, its partition size and minSubGroups."""
    rng = random.Random(seed)
    layout = [[f"{chr(97 + r)}{i}" for i in range(rng.randint(2, 3))] for r in range(rng.randint(2, 4))]
    c = racks(layout)
    jobs: dict[str, tuple[int, int]] = {}
    if rng.random() < 0.5:
        size, partitions = rng.randint(1, 2), rng.randint(2, 3)
        least = rng.randint(1, partitions)
        partitioned(c, "vic", partitions=partitions, size=size, min_partitions=least, cpu="1", pc="low",
                    topology=None, interleave=rng.random() < 0.5)
        jobs["vic"] = (size, least)
    for nodes in layout:
        for node in nodes:
            for j in range(rng.choice([1, 2])):
                pinned_job(c, f"w-{node}-{j}", node, cpu=rng.choice(["1", "2"]), pc=rng.choice(["low", "low", "high"]))
    run(c, 1)
    size, partitions = rng.randint(1, 3), rng.randint(1, 3)
    least = rng.randint(1, partitions)
    partitioned(c, "pre", partitions=partitions, size=size, min_partitions=least, cpu=rng.choice(["2", "3", "4"]))
    jobs["pre"] = (size, least)
    return c, jobs


@pytest.mark.parametrize("seed", range(1, 41))
def test_sub_group_preemptor_invariants(seed: int) -> None:
    """Whatever the workload: a hard partition is never bound across racks; a job of partitions, preemptor or
    victim, is bound with nothing or at least minSubGroups whole partitions; every victim is of lower priority;
    an eviction is never wasted (the preemptor is bound the next cycle)."""
    c, jobs = random_workload(seed)
    for step in range(4):
        result = c.cycle(CONF)
        for partition, nodes in partitions_bound(c, "pre").items():
            assert len({rack_of(n) for n in nodes}) == 1, f"cycle {step}: partition {partition} split: {nodes}"
        for job, (size, least) in jobs.items():
            bound = partitions_bound(c, job)
            whole = [p for p, nodes in bound.items() if len(nodes) >= size]
            assert not bound or len(whole) >= least, f"cycle {step}: {job} partly bound {bound}"
        for eviction in result.evictions:
            assert eviction.cause is not None and eviction.cause.by == "default/pre"
            victim = eviction.job.split("/", 1)[1]
            assert c.sim.podgroups[f"default/{victim}"].manifest["spec"]["priorityClassName"] == "low"
        if result.evictions:
            c.cycle(CONF)
            assert c.sim.bound("pre"), f"cycle {step}: victims evicted, pre still not bound"


def test_the_random_workloads_do_preempt() -> None:
    """The invariants above are asked of workloads where the sub-grouped job does preempt, sub-grouped victims
    among them."""
    preempted, of_partitions = 0, 0
    for seed in range(1, 41):
        evictions = random_workload(seed)[0].cycle(CONF).evictions
        preempted += bool(evictions)
        of_partitions += any(e.job == "default/vic" for e in evictions)
    assert preempted >= 8 and of_partitions >= 2, (preempted, of_partitions)


def test_a_sub_grouped_preemptor_waits_on_its_victims_room_instead_of_evicting_again() -> None:
    """While its victims terminate (30 s grace), the sub-grouped job is pipelined on the room they release, as
    Volcano's allocate pipelines a nominated sub-job onto future idle; so it does not look starving again and
    evicts no second rack. Three racks of two 4-cpu nodes, all held by low-priority pods; high asks one rack."""
    c = racks([["a1", "a2"], ["b1", "b2"], ["c1", "c2"]])
    for node in ("a1", "a2", "b1", "b2", "c1", "c2"):
        pinned_job(c, f"low-{node}", node, cpu="4", pc="low")
    run(c, 1)
    c.sim.graceful = True
    partitioned(c, "high", partitions=1, size=2, min_partitions=1, cpu="4")
    evicted: list[str] = []
    for _ in range(40):  # 40 one-second cycles: past the victims' 30 s grace period
        evicted.extend(e.task for e in c.cycle(CONF).evictions)
        c.sim.reap()
    assert len(evicted) == 2, evicted
    assert len({rack_of(n) for n in c.sim.bound("high").values()}) == 1
    assert len(c.sim.bound("high")) == 2


def test_a_partly_placed_sub_grouped_job_takes_victims_under_its_search_root_only() -> None:
    """Racks a, b under spine s0 and c, d under s1 (two 4-cpu nodes each). high (job-level hard, spine at most)
    runs partition 0 in rack a, so its search root is s0; partition 1 needs a rack. Rack b holds peers of high's
    priority; racks c and d low-priority pods: freeing one would split high across spines, so nothing is evicted.
    With rack b's pods of low priority instead, they go and partition 1 takes rack b."""
    def build(rack_b: str) -> ClusterBuilder:
        c = cluster().priority_class("low", 10).priority_class("high", 1000)
        for r in "abcd":
            for i in (1, 2):
                c.node(f"{r}{i}", cpu="4", memory="64Gi")
            c.hypernode(f"rack-{r}", 1, [f"{r}1", f"{r}2"])
        c.hypernode("s0", 2, ["rack-a", "rack-b"], kind="HyperNode")
        c.hypernode("s1", 2, ["rack-c", "rack-d"], kind="HyperNode")
        for node in ("b1", "b2", "c1", "c2", "d1", "d2"):
            pinned_job(c, f"w-{node}", node, cpu="4", pc=rack_b if node[0] == "b" else "low")
        run(c, 1)
        partitioned(c, "high", partitions=2, size=2, min_partitions=2, cpu="4", running={0: "a1", 1: "a2"},
                    job_topology={"mode": "hard", "highestTierAllowed": 2})
        run(c)
        return c

    held = build("high")
    assert held.sim.evicted == []
    assert sorted(held.sim.bound("high").values()) == ["a1", "a2"]
    freed = build("low")
    assert sorted(freed.sim.evicted) == ["default/w-b1-0", "default/w-b2-0"]
    assert sorted(freed.sim.bound("high").values()) == ["a1", "a2", "b1", "b2"]
