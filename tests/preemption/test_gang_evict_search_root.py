"""gangpreempt and gangreclaim for a partly placed job with a hard network topology search only under its search
root: the highest ancestor, within the job's highestTierAllowed, of the HyperNode it already holds (Volcano's
getSearchRoot, plugins/network-topology-aware/network_topology_aware.go, reached from
actions/utils/util.go GetCandidateDomains). A victim outside that root frees nothing the job may use."""

from __future__ import annotations

import random
from typing import Any

import pytest
from test_gang_evict import gang_conf

from scheduler.sim.objects import pod_object
from scheduler.testing import ClusterBuilder, cluster

HARD_SPINE = {"mode": "hard", "highestTierAllowed": 2}


def spines(c: ClusterBuilder, racks: int = 4, nodes_per_rack: int = 1, gpu: int = 4) -> dict[str, str]:
    """Racks r0..r<racks-1> (tier 1) of `nodes_per_rack` nodes each, two racks per spine s0, s1, ... (tier 2);
    returns node -> spine."""
    spine_of: dict[str, str] = {}
    for r in range(racks):
        names = [f"r{r}n{i}" for i in range(nodes_per_rack)]
        for name in names:
            c.node(name, gpu=gpu, cpu="64", memory="256Gi")
            spine_of[name] = f"s{r // 2}"
        c.hypernode(f"r{r}", 1, names)
    for s in range((racks + 1) // 2):
        c.hypernode(f"s{s}", 2, [f"r{r}" for r in (2 * s, 2 * s + 1) if r < racks], kind="HyperNode")
    return spine_of


def pinned(c: ClusterBuilder, name: str, group: str, node: str, *, gpu: int, pc: str, queue: str = "default",
           running: bool = False) -> None:
    """A pod of `group` that can go only to `node` (or, with `running`, already runs there)."""
    if running:
        pod = pod_object(name, group=group, gpu=gpu, priority_class=pc)
        pod["spec"]["nodeName"] = node
        pod["status"]["phase"] = "Running"
    else:
        pod = pod_object(name, group=group, gpu=gpu, priority_class=pc, node_selector={"kubernetes.io/hostname": node})
    c.sim.add_pod(pod)


def podgroup(c: ClusterBuilder, name: str, minimum: int, pc: str, *, queue: str = "default",
             topology: dict[str, Any] | None = None) -> None:
    spec: dict[str, Any] = {"minMember": minimum, "priorityClassName": pc, "queue": queue}
    if topology is not None:
        spec["networkTopology"] = topology
    c.sim.add_podgroup({"metadata": {"name": name, "namespace": "default"}, "spec": spec,
                        "status": {"phase": "Running"}})


def partly_placed(victim_rack: int, *, queue: str = "default", victim_queue: str = "default") -> ClusterBuilder:
    """Four 4-GPU racks, r0 r1 under s0 and r2 r3 under s1. The job `high` (2 x 4 GPU, hard, spine at most)
    runs one pod on r0 (its HyperNode: r0, so its search root is s0); a low-priority gang fills rack
    `victim_rack` and peers of high's own priority fill the other racks."""
    c = cluster().priority_class("low", 10).priority_class("high", 1000)
    spines(c)
    for rack in range(1, 4):
        if rack != victim_rack:
            podgroup(c, f"peer{rack}", 1, "high", queue=queue)
            pinned(c, f"peer{rack}-0", f"peer{rack}", f"r{rack}n0", gpu=4, pc="high", queue=queue)
    podgroup(c, "low", 1, "low", queue=victim_queue)
    pinned(c, "low-0", "low", f"r{victim_rack}n0", gpu=4, pc="low", queue=victim_queue)
    c.cycle(gang_conf(topology=True))
    podgroup(c, "high", 2, "high", queue=queue, topology=HARD_SPINE)
    pinned(c, "high-0", "high", "r0n0", gpu=4, pc="high", queue=queue, running=True)
    c.sim.add_pod(pod_object("high-1", group="high", gpu=4, priority_class="high"))
    return c


def test_victims_outside_the_search_root_are_never_taken() -> None:
    """The only lower-priority pod is under s1; high holds r0, under s0: evicting it would split high across
    spines (Volcano's getSearchRoot confines the search to s0), so nothing is evicted and high waits."""
    c = partly_placed(victim_rack=2)
    conf = gang_conf(topology=True)
    for _ in range(3):
        c.cycle(conf)
    assert c.sim.evicted == []
    assert c.sim.bound("high") == {"high-0": "r0n0"}


def test_victims_inside_the_search_root_make_room() -> None:
    """The same, with the low-priority pod on r1 instead: it is under s0, so it goes and high's second pod
    takes its node."""
    c = partly_placed(victim_rack=1)
    conf = gang_conf(topology=True)
    for _ in range(3):
        c.cycle(conf)
    assert c.sim.evicted == ["default/low-0"]
    assert c.sim.bound("high") == {"high-0": "r0n0", "high-1": "r1n0"}


def test_gangreclaim_also_searches_only_under_the_search_root() -> None:
    """gangreclaim: high's queue q1 deserves every GPU, the victim's queue q2 none; the victim is under s1 while
    high holds r0 (under s0): nothing is reclaimed."""
    c = cluster().priority_class("low", 10).priority_class("high", 1000)
    c.queue("q1", deserved={"nvidia.com/gpu": "16", "cpu": "256", "memory": "1024Gi"})
    c.queue("q2", deserved={"cpu": "64", "memory": "256Gi"})
    spines(c)
    podgroup(c, "peer", 1, "high", queue="q1")
    pinned(c, "peer-0", "peer", "r1n0", gpu=4, pc="high")
    podgroup(c, "peer3", 1, "high", queue="q1")
    pinned(c, "peer3-0", "peer3", "r3n0", gpu=4, pc="high")
    podgroup(c, "other", 1, "high", queue="q2")
    pinned(c, "other-0", "other", "r2n0", gpu=4, pc="high")
    conf = gang_conf(topology=True)
    c.cycle(conf)
    podgroup(c, "high", 2, "low", queue="q1", topology=HARD_SPINE)
    pinned(c, "high-0", "high", "r0n0", gpu=4, pc="low", running=True)
    c.sim.add_pod(pod_object("high-1", group="high", gpu=4, priority_class="low"))
    for _ in range(3):
        c.cycle(conf)
    assert c.sim.evicted == []
    # the control: the same victim under s0 (the peer moved to s1) is reclaimed
    d = cluster().priority_class("low", 10).priority_class("high", 1000)
    d.queue("q1", deserved={"nvidia.com/gpu": "16", "cpu": "256", "memory": "1024Gi"})
    d.queue("q2", deserved={"cpu": "64", "memory": "256Gi"})
    spines(d)
    podgroup(d, "peer", 1, "high", queue="q1")
    pinned(d, "peer-0", "peer", "r2n0", gpu=4, pc="high")
    podgroup(d, "other", 1, "high", queue="q2")
    pinned(d, "other-0", "other", "r1n0", gpu=4, pc="high")
    d.cycle(conf)
    podgroup(d, "high", 2, "low", queue="q1", topology=HARD_SPINE)
    pinned(d, "high-0", "high", "r0n0", gpu=4, pc="low", running=True)
    d.sim.add_pod(pod_object("high-1", group="high", gpu=4, priority_class="low"))
    for _ in range(3):
        d.cycle(conf)
    assert d.sim.evicted == ["default/other-0"]
    assert d.sim.bound("high") == {"high-0": "r0n0", "high-1": "r1n0"}


def test_a_job_whose_hypernode_is_above_its_tier_gets_no_domain() -> None:
    """high (hard, rack at most) runs one pod on r0 and one on r2: its HyperNode is the cluster, above tier 1, so
    Volcano's getSearchRoot fails and gang eviction offers it no domain: nothing is evicted."""
    c = cluster().priority_class("low", 10).priority_class("high", 1000)
    spines(c, nodes_per_rack=2, gpu=2)
    podgroup(c, "low", 1, "low")
    for node in ("r0n1", "r2n1"):
        pinned(c, f"low-{node}", "low", node, gpu=2, pc="low")
    conf = gang_conf(topology=True)
    c.cycle(conf)
    podgroup(c, "high", 3, "high", topology={"mode": "hard", "highestTierAllowed": 1})
    pinned(c, "high-0", "high", "r0n0", gpu=2, pc="high", running=True)
    pinned(c, "high-1", "high", "r2n0", gpu=2, pc="high", running=True)
    c.sim.add_pod(pod_object("high-2", group="high", gpu=2, priority_class="high"))
    for _ in range(2):
        c.cycle(conf)
    assert c.sim.evicted == []


def random_cluster(seed: int) -> tuple[ClusterBuilder, dict[str, str], dict[str, int]]:
    """Racks of two 2-GPU nodes, two racks a spine; low-priority gangs fill part of it; then hard jobs of high
    priority, each with one pod already running on a random node and a few pending; returns node -> spine and
    each hard job's allowed tier."""
    rng = random.Random(seed)
    c = cluster().priority_class("low", 10).priority_class("high", 1000)
    spine_of = spines(c, racks=rng.choice([4, 6]), nodes_per_rack=2, gpu=2)
    nodes = sorted(spine_of)
    for i in range(rng.randint(2, 5)):
        size = rng.randint(1, 3)
        c.job(f"low{i}", replicas=size, min_available=rng.randint(1, size), gpu=rng.choice([1, 2]),
              priority_class="low")
    conf = gang_conf(topology=True)
    c.cycle(conf)
    tiers: dict[str, int] = {}
    for i in range(rng.randint(1, 3)):
        name, tier = f"hard{i}", rng.choice([1, 2])
        pending = rng.randint(1, 3)
        podgroup(c, name, 1 + pending, "high", topology={"mode": "hard", "highestTierAllowed": tier})
        pinned(c, f"{name}-0", name, rng.choice(nodes), gpu=1, pc="high", running=True)
        for j in range(pending):
            c.sim.add_pod(pod_object(f"{name}-{j + 1}", group=name, gpu=rng.choice([1, 2]), priority_class="high"))
        tiers[name] = tier
    return c, spine_of, tiers


def domain_of(node: str, spine_of: dict[str, str], tier: int) -> str:
    return spine_of[node] if tier == 2 else node[: node.index("n")]


@pytest.mark.parametrize("seed", range(1, 31))
def test_no_victim_outside_the_preemptors_search_root(seed: int) -> None:
    """Over seeded random workloads: every victim taken for a partly placed hard job is inside the domain (of its
    highest tier) that holds the job's running pod, and the job never ends up bound across two such domains."""
    c, spine_of, tiers = random_cluster(seed)
    conf = gang_conf(topology=True)
    for _ in range(4):
        where = {f"default/{p.manifest['metadata']['name']}": p.manifest["spec"].get("nodeName")
                 for job in [*tiers, *(f"low{i}" for i in range(6))] for p in c.sim.pods_of(job)}
        result = c.cycle(conf)
        for eviction in result.evictions:
            assert eviction.cause is not None
            by = eviction.cause.by.split("/", 1)[1]
            node = where[eviction.task]
            home = domain_of(c.sim.bound(by)[f"{by}-0"], spine_of, tiers[by])
            assert domain_of(node, spine_of, tiers[by]) == home, f"{eviction.task} on {node} taken for {by}"
        for job, tier in tiers.items():
            spanned = {domain_of(n, spine_of, tier) for n in c.sim.bound(job).values()}
            assert len(spanned) == 1, f"{job} spans {spanned}"


def test_the_random_workloads_do_evict() -> None:
    """The property above is asked of workloads where gang eviction happens."""
    evictions = 0
    for seed in range(1, 31):
        c, _, _ = random_cluster(seed)
        for _ in range(4):
            evictions += len(c.cycle(gang_conf(topology=True)).evictions)
    assert evictions >= 10, evictions
