"""The first cycle on a partial view (scheduler/cache/first_view.py) is safe on any partial view: seeded random
clusters, a random subset of nodes listed whole, the restricted cycle run on it, and its binds checked against the
full view (never on an unlisted node, never past a node's free room, a queue's capability, or a gang's
all-or-nothing), plus the lemma its deserved-share safety rests on (a smaller cluster never deserves a queue
more), and the candidate choice."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from scheduler.api.job import TaskInfo
from scheduler.api.phases import TaskStatus
from scheduler.api.resources import Resource
from scheduler.api.shard import ShardView
from scheduler.api.snapshot import ClusterSnapshot
from scheduler.cache.first_view import Skip, blocker, first_view_conf, merge, pick_candidates
from scheduler.cycle import builtin_default_conf, conf_from_text, run_cycle
from scheduler.plugins.shares import QueueDemand, deserved_shares
from scheduler.sim.objects import node_object, pod_object
from scheduler.testing import cluster

GPU = "nvidia.com/gpu"
CAPACITY_CONF = """
actions: "enqueue, allocate, backfill, reclaim"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: capacity
  - name: nodeorder
"""


def random_cluster(seed: int):  # type: ignore[no-untyped-def]
    """Nodes with other schedulers' pods and our running jobs on them, queues (some capped), pending gangs."""
    rng = random.Random(seed)
    c = cluster()
    nodes = [f"n{i:02d}" for i in range(rng.randint(3, 16))]
    free = {}
    for name in nodes:
        gpus = rng.choice((4, 8))
        c.node(name, gpu=gpus, cpu="32")
        free[name] = gpus
    queues = ["default"]
    for q in range(rng.randint(0, 2)):
        cap = {GPU: str(rng.randint(1, 12))} if rng.random() < 0.6 else None
        c.queue(f"q{q}", weight=rng.randint(1, 4), capability=cap)
        queues.append(f"q{q}")
    for i in range(rng.randint(0, 2 * len(nodes))):  # other schedulers' pods, bound
        node = rng.choice(nodes)
        gpus = rng.randint(0, free[node])
        free[node] -= gpus
        pod = pod_object(f"other-{i}", gpu=gpus, cpu="1", scheduler_name="default-scheduler")
        pod["spec"]["nodeName"], pod["status"] = node, {"phase": "Running"}
        c.sim.add_pod(pod)
    for j in range(rng.randint(0, 4)):  # our running jobs (their queue's capability may be exceeded already)
        queue, replicas = rng.choice(queues), rng.randint(1, 3)
        c.sim.add_podgroup({"metadata": {"name": f"run{j}", "namespace": "default"},
                            "spec": {"minMember": replicas, "queue": queue}, "status": {"phase": "Running"}})
        for r in range(replicas):
            node = max(nodes, key=lambda n: (free[n], rng.random()))
            if free[node] < 1:
                break
            free[node] -= 1
            pod = pod_object(f"run{j}-{r}", group=f"run{j}", gpu=1, cpu="1")
            pod["spec"]["nodeName"], pod["status"] = node, {"phase": "Running"}
            c.sim.add_pod(pod)
    for j in range(rng.randint(1, 5)):  # pending gangs
        replicas = rng.randint(1, 8)
        c.job(f"pend{j}", queue=rng.choice(queues), replicas=replicas,
              min_available=rng.randint(1, replicas), gpu=rng.choice((1, 1, 2)), cpu="1")
    return c, nodes, rng


def partial(snapshot: ClusterSnapshot, listed: set[str]) -> ClusterSnapshot:
    """What the first view builds: every pod of ours (jobs as in the full view), only the listed nodes."""
    return replace(snapshot, nodes={n: info for n, info in snapshot.nodes.items() if n in listed})


def occupied(tasks: list[TaskInfo]) -> Resource:
    held = (TaskStatus.BOUND, TaskStatus.RUNNING, TaskStatus.BINDING, TaskStatus.ALLOCATED)
    return Resource.total(t.resreq for t in tasks if t.status in held)


@pytest.mark.parametrize("conf_name", ["default", "capacity"])
@pytest.mark.parametrize("seed", range(60))
def test_the_first_view_never_binds_beyond_what_the_full_view_allows(seed: int, conf_name: str) -> None:
    c, nodes, rng = random_cluster(seed * 7 + (conf_name == "capacity"))
    conf = builtin_default_conf() if conf_name == "default" else conf_from_text(CAPACITY_CONF)
    restricted = first_view_conf(conf)
    assert not isinstance(restricted, Skip)
    assert restricted.actions == ("enqueue", "allocate", "backfill")  # reclaim dropped: it evicts
    listed = set(rng.sample(nodes, rng.randint(1, len(nodes))))  # any subset: safety may not rest on the choice
    result = run_cycle(partial(c.sim.snapshot(), listed), restricted)
    full = c.sim.snapshot()
    assert not result.evictions
    placed: dict[str, Resource] = {}
    by_queue: dict[str, Resource] = {}
    for gang in result.binds:
        job = full.jobs[gang.job]
        already = sum(1 for t in job.tasks.values() if t.node_name)
        assert already + len(gang.binds) >= job.min_available, f"{gang.job}: a partial gang"
        for key, node in gang.binds:
            assert node in listed, f"{key} bound to {node}, whose pods the view had not listed"
            request = job.tasks[key].resreq
            placed[node] = placed.get(node, Resource()) + request
            by_queue[job.queue] = by_queue.get(job.queue, Resource()) + request
    for node, request in placed.items():
        assert request <= full.nodes[node].idle, f"{node} over-committed: {request} on {full.nodes[node].idle}"
    for name, request in by_queue.items():
        queue = full.queues[name]
        if queue.capability is None or not queue.capability.get(GPU):
            continue
        before = occupied([t for j in full.jobs.values() if j.queue == name for t in j.tasks.values()])
        assert before.get(GPU) + request.get(GPU) <= max(queue.capability.get(GPU), before.get(GPU)), name


def test_the_seeded_clusters_bind_on_a_partial_view() -> None:
    """The property above is not vacuous: most seeds bind something on their partial view."""
    binding = 0
    for seed in range(60):
        c, nodes, rng = random_cluster(seed * 7)
        listed = set(rng.sample(nodes, rng.randint(1, len(nodes))))
        restricted = first_view_conf(builtin_default_conf())
        assert not isinstance(restricted, Skip)
        binding += bool(run_cycle(partial(c.sim.snapshot(), listed), restricted).binds)
    assert binding >= 30


@pytest.mark.parametrize("seed", range(300))
def test_a_smaller_cluster_never_deserves_a_queue_more(seed: int) -> None:
    """Proportion's water-filling is monotone in the cluster's total: what keeps a queue within its deserved
    share on a partial view (fewer nodes) keeps it there on the full one."""
    rng = random.Random(seed)
    names = ("cpu", "memory", GPU)
    queues = []
    for i in range(rng.randint(1, 5)):
        request = Resource.of(rng.randint(0, 64_000), rng.randint(0, 2**36), 0, {GPU: 1000 * rng.randint(0, 32)})
        limit = {n: rng.randint(0, 40_000) for n in names if rng.random() < 0.3}
        guarantee = Resource.of(0, 0, 0, {GPU: 1000 * rng.randint(0, 2)}) if rng.random() < 0.3 else Resource()
        queues.append(QueueDemand(f"q{i}", rng.randint(1, 5), request, guarantee, limit))
    big = Resource.of(rng.randint(1, 128_000), rng.randint(1, 2**37), 0, {GPU: 1000 * rng.randint(1, 64)})
    small = Resource.of(rng.randint(0, big.cpu), rng.randint(0, big.memory), 0,
                        {GPU: 1000 * rng.randint(0, big.get(GPU) // 1000)})
    on_big, on_small = deserved_shares(big, queues), deserved_shares(small, queues)
    for q in queues:
        assert on_small[q.name] <= on_big[q.name], (q, on_small[q.name], on_big[q.name])


def _task(key: str, *, node: str = "", gpu: int = 1, status: TaskStatus = TaskStatus.PENDING) -> TaskInfo:
    return TaskInfo(key, key.split("/")[1], "default", "default/j", Resource.of(1000, 0, 0, {GPU: gpu * 1000}),
                    status=status, node_name=node)


def test_candidates_hold_the_pending_pods_twice_over_with_our_busiest_nodes_last() -> None:
    c = cluster()
    for i in range(6):
        c.node(f"n{i}", gpu=8)
    c.node("cordoned", gpu=8, unschedulable=True)
    c.node("tainted", gpu=8, taints=[{"key": "dedicated", "value": "x", "effect": "NoSchedule"}])
    nodes = list(c.sim.snapshot().nodes.values())
    ours = [_task("default/r0", node="n0", status=TaskStatus.RUNNING),
            _task("default/r1", node="n0", status=TaskStatus.RUNNING), _task("default/r2", node="n1",
                                                                              status=TaskStatus.RUNNING)]
    pending = [_task(f"default/p{i}") for i in range(8)]  # 8 GPUs: 16 wanted
    picked = pick_candidates(nodes, ours, pending, least=1)
    assert picked == ["n2", "n3"]  # none of ours on them, 16 GPUs; the cordoned and the tainted never
    assert pick_candidates(nodes, ours, pending, least=5) == ["n2", "n3", "n4", "n5", "n1"]
    assert pick_candidates(nodes, ours, pending, least=1, most=1) == ["n2"]
    assert "n0" in pick_candidates(nodes, ours, [_task(f"default/q{i}") for i in range(40)], least=1)


def test_candidates_keep_to_the_nodeshard_as_the_session_will() -> None:
    c = cluster()
    for i in range(6):
        c.node(f"n{i}", gpu=8)
    nodes = list(c.sim.snapshot().nodes.values())
    pending = [_task(f"default/p{i}") for i in range(8)]  # 8 GPUs: 16 wanted, two nodes
    shard = frozenset({"n3", "n5"})
    hard, soft = ShardView("hard", "volcano-py", shard), ShardView("soft", "volcano-py", shard)
    assert pick_candidates(nodes, [], pending, least=1, shard=hard) == ["n3", "n5"]
    assert pick_candidates(nodes, [], pending, least=3, shard=hard) == ["n3", "n5"]  # never a node outside
    assert pick_candidates(nodes, [], pending, least=3, shard=soft) == ["n3", "n5", "n0"]  # the shard's first
    assert pick_candidates(nodes, [], pending, least=1, shard=ShardView("hard", "volcano-py", frozenset())) == []


def test_candidates_follow_the_pending_pods_node_selector() -> None:
    c = cluster()
    c.sim.add_node(node_object("cpu0", gpu=0, labels={"pool": "cpu"}))
    c.sim.add_node(node_object("gpu0", gpu=8, labels={"pool": "gpu"}))
    nodes = list(c.sim.snapshot().nodes.values())
    c.job("j", replicas=1, gpu=1, node_selector={"pool": "gpu"})
    pending = [t for j in c.sim.snapshot().jobs.values() for t in j.tasks.values()]
    assert pick_candidates(nodes, [], pending) == ["gpu0"]


def test_a_pending_pod_with_inter_pod_terms_keeps_the_full_view() -> None:
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "kubernetes.io/hostname"}]}}
    c = cluster().node("n0", gpu=8).job("j", replicas=2, gpu=1, affinity=anti)
    pending = [t for j in c.sim.snapshot().jobs.values() for t in j.tasks.values()]
    skip = blocker(pending)
    assert isinstance(skip, Skip) and "inter-pod" in skip.why
    assert blocker([_task("default/plain")]) is None


def test_a_conf_with_consolidate_or_without_allocate_keeps_the_full_view() -> None:
    conf = builtin_default_conf()
    assert isinstance(first_view_conf(replace(conf, actions=("enqueue", "allocate", "consolidate"))), Skip)
    assert isinstance(first_view_conf(replace(conf, actions=("enqueue", "backfill"))), Skip)
    kept = first_view_conf(replace(conf, actions=("enqueue", "allocate", "preempt", "reclaim", "backfill")))
    assert not isinstance(kept, Skip) and kept.actions == ("enqueue", "allocate", "backfill")


def test_of_two_copies_of_a_pod_the_later_resource_version_wins() -> None:
    old = {"metadata": {"namespace": "a", "name": "p", "resourceVersion": "5"}, "spec": {}}
    new = {"metadata": {"namespace": "a", "name": "p", "resourceVersion": "9"}, "spec": {"nodeName": "n"}}
    assert merge([new], [old])["a/p"] is new
    assert merge([old], [new])["a/p"] is new


def test_candidates_follow_required_node_affinity_and_one_check_serves_a_gang() -> None:
    c = cluster()
    c.sim.add_node(node_object("cpu0", gpu=0, labels={"pool": "cpu"}))
    c.sim.add_node(node_object("gpu0", gpu=8, labels={"pool": "gpu"}))
    nodes = list(c.sim.snapshot().nodes.values())
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["gpu"]}]}]}}}
    c.job("j", replicas=4, gpu=1, affinity=affinity)
    pending = [t for j in c.sim.snapshot().jobs.values() for t in j.tasks.values()]
    assert len({id(t.constraints) for t in pending}) == 1  # the gang's pods share one Constraints
    assert pick_candidates(nodes, [], pending) == ["gpu0"]
