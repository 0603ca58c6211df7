"""A job with a hard network topology that is already ready takes its further pods (the extras beyond minAvailable,
a replacement for a killed pod) only inside its search root: the domain of its highestTierAllowed around the pods
it holds (Volcano's allocate sends such a job through allocateForJob on every turn, and network-topology-aware's
hyperNodeGradientFn searches from getSearchRoot: pkg/scheduler/actions/allocate/allocate.go,
pkg/scheduler/plugins/network-topology-aware/network_topology_aware.go)."""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

import pytest
from subgroup_workloads import TOPOLOGY_CONF, partitioned_job

from scheduler.actions.domain_reserve import in_search_root
from scheduler.api.job import JobInfo, TaskInfo
from scheduler.api.phases import TaskStatus
from scheduler.api.reasons import TopologyLimit
from scheduler.api.resources import Resource
from scheduler.api.topology import NodeDomains
from scheduler.cycle import conf_from_text
from scheduler.framework import points as P
from scheduler.framework.conf import SchedulerConf
from scheduler.framework.evictable import Domain
from scheduler.framework.session import Session
from scheduler.plugins.registry import PLUGINS
from scheduler.plugins.topology import NetworkTopologyAwarePlugin
from scheduler.solver.topology import Topology, from_domains, from_hypernodes
from scheduler.testing import ClusterBuilder, cluster, pod_object

RACK = "volcano.sh/rack"
ZONE = "topology.kubernetes.io/zone"


def confs() -> dict[str, SchedulerConf]:
    return {
        "hypernodes": conf_from_text(TOPOLOGY_CONF, source="test"),
        "choose-domains": conf_from_text(TOPOLOGY_CONF + "      solver.chooseDomains: true\n", source="test"),
    }


def topo_job(c: ClusterBuilder, name: str, *, replicas: int, min_available: int, tier: int, cpu: str) -> None:
    spec: dict[str, Any] = {"minMember": min_available, "queue": "default",
                            "networkTopology": {"mode": "hard", "highestTierAllowed": tier}}
    c.sim.add_podgroup({"metadata": {"name": name, "namespace": "default"}, "spec": spec,
                        "status": {"phase": "Inqueue"}})
    for i in range(replicas):
        c.sim.add_pod(pod_object(f"{name}-{i}", group=name, cpu=cpu, memory="1Gi"))


def busy(c: ClusterBuilder, name: str, node: str, cpu: str) -> None:
    pod = pod_object(name, cpu=cpu, memory="1Gi")
    pod["spec"]["nodeName"] = node
    pod["status"]["phase"] = "Running"
    c.sim.add_pod(pod)


def layout_cluster(layout: list[list[list[str]]], cpu: str, *, labels: bool) -> ClusterBuilder:
    """Spines of racks of nodes: HyperNodes (rack tier 1, spine tier 2), or with `labels` node labels only
    (rack and zone: volcano-py's label tiers, rack = tier 2, zone = tier 3)."""
    c = cluster()
    for s, spine in enumerate(layout):
        for r, rack in enumerate(spine):
            for node in rack:
                c.node(node, cpu=cpu, memory="64Gi",
                       labels={RACK: f"s{s}r{r}", ZONE: f"s{s}"} if labels else None)
            if not labels:
                c.hypernode(f"s{s}r{r}", 1, rack)
        if not labels:
            c.hypernode(f"s{s}", 2, [f"s{s}r{r}" for r in range(len(spine))], kind="HyperNode")
    return c


def topology_of(c: ClusterBuilder) -> Topology:
    names = sorted(c.sim.nodes)
    if c.sim.hypernodes:
        return from_hypernodes(names, list(c.sim.hypernodes.values()))
    return from_domains(names, NodeDomains([c.sim.nodes[n].labels for n in names]))


def held_nodes(c: ClusterBuilder, job: str) -> list[str]:
    return [p.manifest["spec"]["nodeName"] for p in c.sim.pods_of(job)
            if p.manifest["spec"].get("nodeName") and p.manifest["status"]["phase"] in ("Pending", "Running")]


def spanned(topo: Topology, nodes: list[str], tier: int) -> int:
    index = {n: i for i, n in enumerate(topo.node_names)}
    return len({int(topo.domain[tier, index[n]]) for n in nodes})


# ---- the cases ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["hypernodes", "choose-domains"])
def test_extras_of_a_ready_job_never_go_to_another_rack(name: str) -> None:
    """rack0 holds the two pods of the minimum and no more; rack1 has room for one more pod. The extras, placed
    once the job is ready, would go to rack1 pod by pod; inside the job's rack there is no room, so they wait."""
    c = layout_cluster([[["a1"], ["b1"]]], "4", labels=False)
    busy(c, "busy-b1", "b1", "1")  # rack1 3 cpu free: the minimum (4 cpu) fits only in rack0
    topo_job(c, "job", replicas=4, min_available=2, tier=1, cpu="2")
    for _ in range(2):
        c.cycle(confs()[name])
        assert sorted(c.sim.bound("job").values()) == ["a1", "a1"]


@pytest.mark.parametrize("name", ["hypernodes", "choose-domains"])
def test_extras_wait_for_room_inside_the_rack_not_outside_it(name: str) -> None:
    """Room is freed in the other rack a cycle later: the ready job's extras still do not go there; once room is
    freed inside its own rack they go there."""
    c = layout_cluster([[["a1", "a2"], ["b1"]]], "4", labels=False)
    busy(c, "busy-a2", "a2", "4")
    busy(c, "busy-b1", "b1", "4")
    topo_job(c, "job", replicas=4, min_available=2, tier=1, cpu="2")
    c.cycle(confs()[name])
    assert sorted(c.sim.bound("job").values()) == ["a1", "a1"]
    c.sim.delete_pod("default/busy-b1")
    c.cycle(confs()[name])
    assert sorted(c.sim.bound("job").values()) == ["a1", "a1"]
    c.sim.delete_pod("default/busy-a2")
    c.cycle(confs()[name])
    assert sorted(c.sim.bound("job").values()) == ["a1", "a1", "a2", "a2"]


@pytest.mark.parametrize("name", ["hypernodes", "choose-domains"])
def test_a_replacement_for_a_killed_pod_of_a_ready_job_stays_in_its_rack(name: str) -> None:
    """All four pods run in rack0 (minAvailable 2: the job stays ready when one dies); the replacement fits only
    in rack1, so it waits."""
    c = layout_cluster([[["a1", "a2"], ["b1"]]], "4", labels=False)
    topo_job(c, "job", replicas=4, min_available=2, tier=1, cpu="2")
    c.cycle(confs()[name])
    assert sorted(c.sim.bound("job").values()) == ["a1", "a1", "a2", "a2"]
    victim = next(p.task.name for p in c.sim.pods_of("job") if p.manifest["spec"]["nodeName"] == "a2")
    c.sim.delete_pod(f"default/{victim}")
    busy(c, "filler", "a2", "2")  # the dead pod's room is taken by someone else
    c.sim.add_pod(pod_object("job-4", group="job", cpu="2", memory="1Gi"))
    c.cycle(confs()[name])
    assert "job-4" not in c.sim.bound("job")
    c.sim.delete_pod("default/filler")
    c.cycle(confs()[name])
    assert c.sim.bound("job").get("job-4") == "a2"


def test_with_label_domains_the_extras_stay_in_the_rack_too() -> None:
    """Without HyperNodes (volcano-py's label tiers: rack = tier 2), the same rule."""
    c = layout_cluster([[["a1"], ["b1"]]], "4", labels=True)
    busy(c, "busy-b1", "b1", "1")
    topo_job(c, "job", replicas=4, min_available=2, tier=2, cpu="2")
    for _ in range(2):
        c.cycle(confs()["hypernodes"])
        assert sorted(c.sim.bound("job").values()) == ["a1", "a1"]


# ---- the property: no placer ever puts a hard-topology job's pods outside its search root --------------------

def random_workload(seed: int, labels: bool) -> tuple[ClusterBuilder, dict[str, int]]:
    rng = random.Random(seed)
    layout = [[[f"s{s}r{r}n{n}" for n in range(rng.randint(1, 3))] for r in range(rng.randint(1, 3))]
              for s in range(rng.randint(1, 2))]
    c = layout_cluster(layout, str(rng.choice([4, 8])), labels=labels)
    for node in sorted(c.sim.nodes):
        if rng.random() < 0.5:
            busy(c, f"busy-{node}", node, str(rng.randint(1, 3)))
    tiers: dict[str, int] = {}
    for j in range(rng.randint(0, 2)):  # jobs with sub-groups (one per partition), placed by the sub-group placer
        tier = rng.choice([1, 2])
        tiers[f"part{j}"] = tier + 1 if labels else tier
        partitions = rng.randint(1, 4)
        partitioned_job(c, f"part{j}", partitions=partitions, size=rng.randint(1, 3),
                        min_partitions=rng.randint(1, partitions), cpu=str(rng.randint(1, 2)),
                        topology=rng.choice([None, {"mode": "soft"}, {"mode": "hard", "highestTierAllowed": 1}]),
                        job_topology={"mode": "hard", "highestTierAllowed": tiers[f"part{j}"]})
    for j in range(rng.randint(1, 3)):
        replicas = rng.randint(2, 6)
        tier = rng.choice([1, 1, 2])
        tiers[f"job{j}"] = tier + 1 if labels else tier  # label tiers: rack 2, zone 3
        topo_job(c, f"job{j}", replicas=replicas, min_available=rng.randint(1, replicas), tier=tiers[f"job{j}"],
                 cpu=str(rng.randint(1, 3)))
    return c, tiers


def churn(c: ClusterBuilder, rng: random.Random, cycle: int) -> None:
    """Busy pods end (room freed anywhere); running job pods die and come back pending (their job controller)."""
    for key in sorted(c.sim.pods):
        pod = c.sim.pods[key]
        name = pod.task.name
        if name.startswith("busy-") and rng.random() < 0.3:
            c.sim.delete_pod(key)
        elif name.startswith(("job", "part")) and pod.manifest["spec"].get("nodeName") and rng.random() < 0.25:
            metadata = pod.manifest["metadata"]
            c.sim.delete_pod(key)
            again = pod_object(f"{name}-r{cycle}", cpu=pod.manifest["spec"]["containers"][0]["resources"]
                               ["requests"]["cpu"], memory="1Gi")
            again["metadata"]["annotations"] = dict(metadata["annotations"])
            again["metadata"]["labels"] = dict(metadata["labels"])  # its partition, as the controller makes it
            c.sim.add_pod(again)


def check(c: ClusterBuilder, tiers: Mapping[str, int], where: str) -> None:
    topo = topology_of(c)
    for job, tier in tiers.items():
        nodes = held_nodes(c, job)
        assert spanned(topo, nodes, tier) <= 1, (where, job, tier, sorted(nodes))


@pytest.mark.parametrize("seed", range(30))
@pytest.mark.parametrize("mode", ["hypernodes", "choose-domains", "labels"])
def test_no_placer_puts_a_hard_topology_job_outside_its_search_root(seed: int, mode: str) -> None:
    c, tiers = random_workload(seed, labels=mode == "labels")
    conf = confs()["choose-domains" if mode == "choose-domains" else "hypernodes"]
    rng = random.Random(seed * 7919)
    for cycle in range(4):
        c.cycle(conf)
        check(c, tiers, f"{mode} seed {seed} cycle {cycle}")
        churn(c, rng, cycle)


def test_a_reservation_on_released_room_is_made_only_inside_the_search_root() -> None:
    """domain_reserve pipelines a hard gang into the gang-eviction domains; for a job that holds nodes only those
    inside its search root count: the widest listed domain around its pods and the domains inside it."""
    spine = Domain("s0", 2, frozenset({"a1", "a2", "b1"}))
    other = Domain("s1", 2, frozenset({"c1"}))
    rack_a, rack_b = Domain("s0r0", 1, frozenset({"a1", "a2"})), Domain("s0r1", 1, frozenset({"b1"}))
    job = JobInfo("default/j", "j", "default", "default")
    assert in_search_root(job, [other, spine, rack_a, rack_b]) == [other, spine, rack_a, rack_b]  # holds none
    job.add_task(TaskInfo("default/j-0", "j-0", "default", "default/j", Resource.of(1000),
                          status=TaskStatus.RUNNING, node_name="a1"))
    assert in_search_root(job, [other, spine, rack_a, rack_b]) == [spine, rack_a, rack_b]  # tier 2
    assert in_search_root(job, [rack_a, rack_b]) == [rack_a]  # tier 1
    assert in_search_root(job, [other]) == []


def test_a_job_without_a_topology_costs_the_gang_placer_no_topology() -> None:
    """PLACE_GANG is asked for every job that is not ready: one without a `networkTopology` is sent pod by pod
    without the plugin building the session's topology or reading the job's pods (the search-root check is for
    hard-topology jobs only)."""
    c = cluster()
    for rack in range(2):
        for i in range(2):
            c.node(f"n{rack}{i}", cpu="4", memory="8Gi", labels={RACK: f"r{rack}", ZONE: "z"})
    c.job("plain", replicas=1, min_available=1, cpu="1")
    ssn = Session(c.sim.snapshot(), conf_from_text(TOPOLOGY_CONF, source="test"), PLUGINS)
    (plugin,) = [p for _, p in ssn.plugins if isinstance(p, NetworkTopologyAwarePlugin)]
    (job,) = ssn.jobs.values()
    answer = ssn.tiers.run(P.PLACE_GANG, job, list(job.tasks.values()))
    assert answer.status.abstained
    assert plugin._topology is None


def test_a_partly_placed_job_is_never_reserved_on_room_released_outside_its_rack() -> None:
    """Label tiers (no HyperNode, so network-topology-aware's eviction domains are every rack): a hard rack job
    holds one pod on a1; room is being released for one more pod on a1 and for both on b1. Inside its search root
    (a1's rack) the job cannot be pipelined, so no reservation is kept and it waits with its rack's shortfall;
    a reservation in b1's rack would have left it pipelined outside its search root (`in_search_root`)."""
    c = layout_cluster([[["a1"], ["b1"]]], "4", labels=True)
    topo_job(c, "job", replicas=3, min_available=3, tier=2, cpu="2")
    held = c.sim.pods["default/job-0"].manifest
    held["spec"]["nodeName"], held["status"]["phase"] = "a1", "Running"
    busy(c, "going-a1", "a1", "2")
    busy(c, "going-b1", "b1", "4")
    for name in ("going-a1", "going-b1"):
        c.sim.pods[f"default/{name}"].manifest["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    result = c.cycle(confs()["hypernodes"])
    (status,) = [s for s in result.podgroups if s.job == "default/job"]
    assert status.decision is not None
    limits = [r for r in status.decision.reasons if isinstance(r, TopologyLimit)]
    assert [(r.tier, r.best_domain) for r in limits] == [(2, "zone:s0/rack:s0r0")]
    assert c.sim.bound("job") == {"job-0": "a1"}
