"""`bench_shards.py --openb VARIANT`: the Alibaba openb GPU trace as the simulated apiserver's cluster, for the
scale-out row "openb at 130% load, N shards: GPUs allocated >= 99% of one replica's result in the same run".

The cluster is the trace's GPU node list (`openb_node_list_gpu_node.csv`: cpu, memory, GPUs, the GPU model as the
label NVIDIA's feature discovery sets); the pending pods are drawn from the variant's pod list as the packing
benchmark draws them (bench/bench_packing.py `sampled`: seeded, with replacement, until the GPUs asked for reach
130% of the cluster's; Weng et al., ATC 2023, section 6), each a one-pod PodGroup (minMember 1) named
`o<i>`, all arriving together once the replicas are ready (the benchmark's arrival order is not a cycle's). A pod
sharing a GPU asks for its fraction in milli-units and a multi-GPU pod for whole GPUs, as `volcano-py simulate
--from-openb` writes them (scheduler/sim/openb.py); `gpu_spec` is a required node affinity on the model label.
No pods run at the start. The NodeShards hold blocks of nodes, as in the generated cluster (shardsim/cluster.py).

`gpus_allocated(store)`: the share of the cluster's GPUs that bound pods ask for, the figure compared.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import orjson

from shardsim.cluster import (
    ACTIVE_SCHEDULER,
    GPU,
    NS,
    PG_GV,
    Gang,
    base_objects,
    gang_shard,
    pod_doc,
    quantity,
    shard_name,
)
from shardsim.store import Store

TRACE_DIR = Path("/work/shared/traces/openb")
MODEL_LABEL = "nvidia.com/gpu.product"  # as scheduler/sim/openb.py labels the trace's nodes
LOAD = 1.3


def _nodes(path: Path) -> list[dict[str, Any]]:
    out = []
    with path.open() as f:
        for r in csv.DictReader(f):
            res = {"cpu": f"{int(r['cpu_milli'])}m", "memory": f"{int(r['memory_mib'])}Mi", "pods": "110",
                   **({GPU: str(int(r["gpu"]))} if int(r["gpu"]) else {})}
            out.append({"metadata": {"name": r["sn"], "labels": {"kubernetes.io/hostname": r["sn"],
                                                                 MODEL_LABEL: r["model"]}},
                        "spec": {}, "status": {"capacity": res, "allocatable": dict(res),
                                               "conditions": [{"type": "Ready", "status": "True"}]}})
    return out


def _pods(path: Path) -> list[tuple[dict[str, str], list[str]]]:
    """Each row's requests (cpu, memory and GPUs as the simulator writes them) and its accepted GPU models."""
    out = []
    with path.open() as f:
        for r in csv.DictReader(f):
            count, milli = int(r["num_gpu"]), int(r["gpu_milli"] or 0)
            requests = {"cpu": f"{int(r['cpu_milli'])}m", "memory": f"{int(r['memory_mib'])}Mi"}
            if count == 1 and 0 < milli < 1000:
                requests[GPU] = f"{milli}m"
            elif count:
                requests[GPU] = str(count)
            out.append((requests, [m for m in (r.get("gpu_spec") or "").split("|") if m]))
    return out


def drawn(pods: list[tuple[dict[str, str], list[str]]], seed: int, capacity_gpus: float,
          load: float = LOAD) -> list[tuple[dict[str, str], list[str]]]:
    """The packing benchmark's draw: rows with replacement from a seeded generator until the GPUs asked for reach
    `load` times the cluster's (bench/bench_packing.py `sampled`, the same numpy generator and rule)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    out: list[tuple[dict[str, str], list[str]]] = []
    asked = 0.0
    while asked < load * capacity_gpus:
        row = pods[int(rng.integers(len(pods)))]
        asked += quantity(row[0].get(GPU, "0"))
        out.append(row)
    return out


def load(store: Store, replicas: int, *, variant: str, seed: int, active: bool,
         trace_dir: Path = TRACE_DIR) -> tuple[dict[str, Any], list[Gang], list[dict[str, Any]]]:
    """Fill the store with the trace's nodes and the NodeShards; what was made, the plan of one-pod gangs (for the
    harness's shard view) and the pods to create on arrival (`create`)."""
    nodes = _nodes(trace_dir / "openb_node_list_gpu_node.csv")
    pods = _pods(trace_dir / f"openb_pod_list_{variant}.csv")
    gpus = sum(quantity(n["status"]["allocatable"].get(GPU, "0")) for n in nodes)
    rows = drawn(pods, seed, gpus)
    k = store.kind
    store.loading = True
    try:
        base_objects(store)
        for doc in nodes:
            store.create(k("v1", "nodes"), "", doc)
        bounds = [r * len(nodes) // replicas for r in range(replicas + 1)]
        for r in range(replicas):
            store.create(k("shard.volcano.sh/v1alpha1", "nodeshards"), "", {
                "metadata": {"name": shard_name(r, active)},
                "spec": {"nodesDesired": [n["metadata"]["name"] for n in nodes[bounds[r]:bounds[r + 1]]]}})
    finally:
        store.loading = False
    plan, docs = [], []
    for i, (requests, models) in enumerate(rows):
        name = f"o{i}"
        shard = gang_shard(name, replicas) if active else i % replicas
        scheduler = ACTIVE_SCHEDULER if active else shard_name(shard)
        plan.append(Gang(name, 1, GPU in requests, scheduler, shard))
        pod = pod_doc(f"{name}-0", scheduler, requests, group=name)
        if models:
            term = {"matchExpressions": [{"key": MODEL_LABEL, "operator": "In", "values": models}]}
            pod["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [term]}}}
        docs.append(pod)
    made = {"nodes": len(nodes), "gpu_nodes": sum(1 for n in nodes if GPU in n["status"]["allocatable"]),
            "gpus": gpus, "running": 0, "pending": len(rows), "gangs": len(rows),
            "gpu_pods": sum(1 for g in plan if g.gpu), "replicas": replicas, "openb": variant, "seed": seed,
            "gpus_asked": round(sum(quantity(r.get(GPU, "0")) for r, _ in rows), 3),
            "pending_by_shard": [sum(1 for g in plan if g.shard == r) for r in range(replicas)]}
    return made, plan, docs


def create(store: Store, docs: list[dict[str, Any]]) -> int:
    """Each pod's PodGroup (minMember 1), then the pod; the number of pods made."""
    groups, pods = store.kind(PG_GV, "podgroups"), store.kind("v1", "pods")
    for doc in docs:
        group = doc["metadata"]["annotations"]["scheduling.k8s.io/group-name"]
        store.create(groups, NS, {"metadata": {"name": group}, "spec": {"minMember": 1, "queue": "default"}})
        store.create(pods, NS, doc)
    return len(docs)


def gpus_allocated(store: Store) -> dict[str, float]:
    """The GPUs bound pods ask for, and that as a share of the cluster's GPUs."""
    total = sum(quantity((orjson.loads(e.data).get("status") or {}).get("allocatable", {}).get(GPU, "0"))
                for e in store.kind("v1", "nodes").objects.values())
    used = 0.0
    for e in store.kind("v1", "pods").objects.values():
        doc = orjson.loads(e.data)
        spec = doc.get("spec") or {}
        if spec.get("nodeName"):
            for c in spec.get("containers") or ():
                used += quantity(((c.get("resources") or {}).get("requests") or {}).get(GPU, "0"))
    return {"gpus": total, "allocated": round(used, 3), "share": round(used / total, 5) if total else 0.0}
