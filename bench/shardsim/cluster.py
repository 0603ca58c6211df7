"""A cluster for `make bench-shards`, loaded straight into the simulated apiserver's store: nodes (some with GPUs),
running pods on them (another scheduler's, as a busy cluster has), and pending gangs of 1-64 pods, each with its
PodGroup, split between N replicas by schedulerName; the nodes split between them by NodeShards (Volcano's
sharding contract: each replica is `--scheduler-name shard-i --scheduler-sharding-mode hard
--scheduler-sharding-name shard-i`). With `Shape.active`, the cluster of volcano-py's own N active replicas
(`--active-shards N`, docs/scale-out.md "N active replicas"): every pending pod names `schedulerName: volcano-py`,
each gang belongs to the shard its PodGroup's name hashes to (the scheduler's own `route`), and the NodeShards
`volcano-py-shard-i` hold the same blocks of nodes (as the holder of shard 0 would keep them: each block's GPUs
within one node of the others). And the checks at the end, counted from the store: over-committed nodes, pods
bound twice, partial gangs."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import orjson

from scheduler.api.active_shards import route
from shardsim.store import Store

GPU = "nvidia.com/gpu"
NS = "bench"
GROUP = "scheduling.k8s.io/group-name"
PG_GV = "scheduling.volcano.sh/v1beta1"
LEASE_NS = "volcano-py-system"  # the scheduler's default --leader-elect-namespace: the Leases live there
ACTIVE_SCHEDULER = "volcano-py"  # the scheduler's default --scheduler-name, every active replica's


@dataclass(frozen=True)
class Shape:
    nodes: int
    running: int  # running pods, spread evenly over the nodes
    pending: int  # pending pods, in gangs of 1..max_gang
    replicas: int
    gpu_every: int = 4  # every 4th node has 8 GPUs
    max_gang: int = 64
    seed: int = 1
    active: bool = False  # volcano-py's --active-shards `replicas` rather than Volcano's contract
    # Queues `q0`, `q1`, ... of these weights, each pending gang drawn into one with odds in proportion to its weight
    # (so with more pending than the cluster holds, every queue asks for more than its share; issue 40's queue row:
    # each queue's allocation with N shards against one replica); empty: every gang in `default`
    queues: tuple[int, ...] = ()


def shard_name(i: int, active: bool = False) -> str:
    """The NodeShard of shard i: Volcano's contract names it as its replica's scheduler (`shard-i`); with
    --active-shards the scheduler names it `<scheduler-name>-shard-<i>` (scheduler/api/active_shards.py)."""
    return f"{ACTIVE_SCHEDULER}-shard-{i}" if active else f"shard-{i}"


def gang_shard(name: str, shards: int) -> int:
    """The shard an active replica routes the gang's PodGroup to: the scheduler's own hash of namespace/name."""
    return route(f"{NS}/{name}", shards) if shards > 1 else 0


def node_doc(i: int, gpu: bool) -> dict[str, Any]:
    name = f"n{i}"
    res = {"cpu": "64", "memory": "256Gi", "pods": "110", **({GPU: "8"} if gpu else {})}
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name,
                                                  **({"gpu": "true"} if gpu else {})}},
            "spec": {}, "status": {"capacity": res, "allocatable": dict(res),
                                   "conditions": [{"type": "Ready", "status": "True"}]}}


def pod_doc(name: str, scheduler: str, requests: dict[str, str], *, node: str = "", group: str = "") -> dict[str, Any]:
    resources: dict[str, Any] = {"requests": dict(requests)}
    if GPU in requests:
        resources["limits"] = {GPU: requests[GPU]}
    spec: dict[str, Any] = {"schedulerName": scheduler, "containers": [
        {"name": "main", "image": "registry.invalid/train:latest", "resources": resources}]}
    meta: dict[str, Any] = {"name": name, "labels": {"app": "bench"}}
    if group:
        meta["annotations"] = {GROUP: group}
    status: dict[str, Any] = {"phase": "Pending"}
    if node:
        spec["nodeName"] = node
        status = {"phase": "Running", "conditions": [{"type": "PodScheduled", "status": "True"}]}
    return {"metadata": meta, "spec": spec, "status": status}


def load(store: Store, shape: Shape, *, gangs_later: bool = False) -> tuple[dict[str, Any], list[Gang]]:
    """Fill the store; what was made, and the pending gangs (already created, or with `gangs_later` for
    `create_gangs` to create once the replicas are running: their pods then arrive through the watches)."""
    rnd = random.Random(shape.seed)
    store.loading = True
    try:
        made, plan = _load(store, shape, rnd)
        if not gangs_later:
            create_gangs(store, plan)
    finally:
        store.loading = False
    return made, plan


@dataclass(frozen=True)
class Gang:
    name: str
    size: int
    gpu: bool
    scheduler: str
    shard: int = 0
    queue: str = "default"


def base_objects(store: Store, weights: tuple[int, ...] = ()) -> None:
    """What every generated cluster starts with: the bench and lease namespaces, the root and default Queues (and
    `q<i>` of each of `weights`)."""
    k = store.kind
    store.create(k("v1", "namespaces"), "", {"metadata": {"name": NS}})
    store.create(k("v1", "namespaces"), "", {"metadata": {"name": LEASE_NS}})
    for name, weight in [("root", 1), ("default", 1), *((f"q{i}", w) for i, w in enumerate(weights))]:
        store.create(k(PG_GV, "queues"), "", {"metadata": {"name": name},
                                             "spec": {"weight": weight, "reclaimable": True},
                                             "status": {"state": "Open"}})


def _load(store: Store, shape: Shape, rnd: random.Random) -> tuple[dict[str, Any], list[Gang]]:
    k = store.kind
    base_objects(store, shape.queues)
    nodes = k("v1", "nodes")
    gpu_nodes = []
    for i in range(shape.nodes):
        gpu = shape.gpu_every > 0 and i % shape.gpu_every == 0
        store.create(nodes, "", node_doc(i, gpu))
        if gpu:
            gpu_nodes.append(i)
    shards = k("shard.volcano.sh/v1alpha1", "nodeshards")
    # Shard r holds a block of nodes, so each holds its part of the GPU nodes (every R-th node would give the GPU
    # nodes, every 4th, all to the even shards).
    bounds = [r * shape.nodes // shape.replicas for r in range(shape.replicas + 1)]
    for r in range(shape.replicas):
        store.create(shards, "", {"metadata": {"name": shard_name(r, shape.active)},
                                  "spec": {"nodesDesired": [f"n{i}" for i in range(bounds[r], bounds[r + 1])]}})
    shard_gpus = [8 * sum(1 for i in gpu_nodes if bounds[r] <= i < bounds[r + 1]) for r in range(shape.replicas)]
    pods = k("v1", "pods")
    for j in range(shape.running):  # 2 CPUs and 8 GiB each, round-robin over the nodes
        store.create(pods, NS, pod_doc(f"run-{j}", "default-scheduler", {"cpu": "2", "memory": "8Gi"},
                                       node=f"n{j % shape.nodes}"))
    plan: list[Gang] = []
    made = 0
    gpu_used = [0] * shape.replicas  # GPU gangs take at most half a shard's GPUs: every gang fits
    while made < shape.pending:
        size = min(shape.pending - made, rnd.randint(1, shape.max_gang))
        name = f"g{len(plan)}"
        r = gang_shard(name, shape.replicas) if shape.active else len(plan) % shape.replicas
        gpu = gpu_used[r] + size <= shard_gpus[r] // 2 and rnd.random() < 0.3
        gpu_used[r] += size if gpu else 0
        queue = f"q{rnd.choices(range(len(shape.queues)), weights=shape.queues)[0]}" if shape.queues else "default"
        plan.append(Gang(name, size, gpu, ACTIVE_SCHEDULER if shape.active else shard_name(r), r, queue))
        made += size
    return {"nodes": shape.nodes, "gpu_nodes": len(gpu_nodes), "running": shape.running, "pending": made,
            "gangs": len(plan), "gpu_pods": sum(gpu_used), "replicas": shape.replicas,
            "pending_by_shard": [sum(g.size for g in plan if g.shard == r) for r in range(shape.replicas)]}, plan


def create_gangs(store: Store, plan: list[Gang]) -> int:
    """Each gang's PodGroup, then its pods; the number of pods made."""
    groups, pods = store.kind(PG_GV, "podgroups"), store.kind("v1", "pods")
    made = 0
    for gang in plan:
        requests = {"cpu": "1", "memory": "4Gi", **({GPU: "1"} if gang.gpu else {})}
        store.create(groups, NS, {"metadata": {"name": gang.name}, "spec": {"minMember": gang.size,
                                                                            "queue": gang.queue}})
        for m in range(gang.size):
            store.create(pods, NS, pod_doc(f"{gang.name}-{m}", gang.scheduler, requests, group=gang.name))
        made += gang.size
    return made


def shards_view(store: Store, plan: list[Gang], lease_namespace: str) -> dict[str, Any]:
    """What the harness watches of N active replicas, read from the store (no request charged): each Lease's
    holder in the lease namespace, each NodeShard's desired and in-use node counts, and per shard the pending
    pods of its gangs not bound yet."""
    leases = {}
    for key, e in store.kind("coordination.k8s.io/v1", "leases").objects.items():
        namespace, _, name = key.partition("/")
        if namespace == lease_namespace:
            leases[name] = (orjson.loads(e.data).get("spec") or {}).get("holderIdentity") or ""
    shards = {}
    for name, e in store.kind("shard.volcano.sh/v1alpha1", "nodeshards").objects.items():
        doc = orjson.loads(e.data)
        shards[name] = {"desired": len((doc.get("spec") or {}).get("nodesDesired") or ()),
                        "in_use": len((doc.get("status") or {}).get("nodesInUse") or ())}
    pods = store.kind("v1", "pods").objects
    unbound: dict[int, int] = {}
    for gang in plan:
        for m in range(gang.size):
            e = pods.get(f"{NS}/{gang.name}-{m}")
            if e is not None and not e.fields.get("spec.nodeName"):
                unbound[gang.shard] = unbound.get(gang.shard, 0) + 1
    return {"leases": leases, "nodeshards": shards, "unbound_by_shard": {str(k): v for k, v in sorted(unbound.items())}}


_SUFFIX = {"m": 0.001, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "Ki": 1024.0, "Mi": 1024.0**2, "Gi": 1024.0**3,
           "Ti": 1024.0**4}


def quantity(text: Any) -> float:
    """A Kubernetes quantity as a number (the forms the generator writes, and plain numbers)."""
    s = str(text)
    for suffix in ("Ki", "Mi", "Gi", "Ti", "m", "k", "M", "G", "T"):
        if s.endswith(suffix):
            return float(s[: -len(suffix)]) * _SUFFIX[suffix]
    return float(s)


def check(store: Store) -> dict[str, Any]:
    """Over-committed nodes (requests of the pods bound there above allocatable, for cpu, memory, GPUs and the pod
    count), pods bound more than once (accepted bindings per pod), partial gangs (a PodGroup with some but fewer
    than minMember pods bound), and what was bound."""
    alloc: dict[str, dict[str, float]] = {}
    for name, e in store.kind("v1", "nodes").objects.items():
        doc = orjson.loads(e.data)
        alloc[name] = {r: quantity(v) for r, v in (doc.get("status") or {}).get("allocatable", {}).items()}
    used: dict[str, dict[str, float]] = {n: {} for n in alloc}
    bound_in: dict[str, int] = {}
    bound_cpu: dict[str, float] = {}
    bound_pending = pending = 0
    for e in store.kind("v1", "pods").objects.values():
        doc = orjson.loads(e.data)
        spec, meta = doc.get("spec") or {}, doc.get("metadata") or {}
        node = spec.get("nodeName")
        group = (meta.get("annotations") or {}).get(GROUP)
        if group:
            pending += 1
        if not node:
            continue
        if group:
            bound_pending += 1
            bound_in[f"{meta.get('namespace')}/{group}"] = bound_in.get(f"{meta.get('namespace')}/{group}", 0) + 1
        u = used.setdefault(node, {})
        u["pods"] = u.get("pods", 0) + 1
        for c in spec.get("containers") or ():
            for r, v in ((c.get("resources") or {}).get("requests") or {}).items():
                u[r] = u.get(r, 0) + quantity(v)
                if group and r == "cpu":
                    key = f"{meta.get('namespace')}/{group}"
                    bound_cpu[key] = bound_cpu.get(key, 0.0) + quantity(v)
    over = sorted(n for n, u in used.items() if any(v > alloc.get(n, {}).get(r, 0) + 1e-9 for r, v in u.items()))
    partial, not_running = [], []
    by_queue: dict[str, float] = {}  # CPUs of the bound gang pods, per their PodGroup's queue
    for key, e in store.kind(PG_GV, "podgroups").objects.items():
        doc = orjson.loads(e.data)
        queue = str((doc.get("spec") or {}).get("queue") or "default")
        by_queue[queue] = by_queue.get(queue, 0.0) + bound_cpu.get(key, 0.0)
        minimum = int((doc.get("spec") or {}).get("minMember") or 1)
        if 0 < bound_in.get(key, 0) < minimum:
            partial.append(key)
        elif bound_in.get(key, 0) >= minimum and (doc.get("status") or {}).get("phase") != "Running":
            not_running.append(key)  # information: what the PodGroup says of a gang whose pods are all bound
    twice = sorted(k for k, n in store.binds.items() if n > 1)
    return {"over_committed_nodes": len(over), "over_committed_examples": over[:5], "pods_bound_twice": len(twice),
            "partial_gangs": len(partial), "partial_examples": sorted(partial)[:5],
            "bound_gangs_not_running": len(not_running), "not_running_examples": sorted(not_running)[:5],
            "gang_pods": pending, "gang_pods_bound": bound_pending,
            "gangs_bound": sum(1 for n in bound_in.values() if n > 0),
            "bound_cpu_by_queue": {q: round(v, 3) for q, v in sorted(by_queue.items())}}
