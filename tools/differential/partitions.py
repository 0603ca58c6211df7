"""The differential's partitions family (issue 34): Volcano Jobs whose task has a ``partitionPolicy``, on nodes in
tier-1 HyperNodes (racks) under one tier-2 HyperNode (a spine), under Volcano's CI conf (which enables
network-topology-aware). Pure and deterministic from one integer seed, like workloads.py.

Each side's own job controller turns the partitionPolicy into the PodGroup's subGroupPolicy and the pods'
``volcano.sh/partition-id`` labels, and its scheduler places the partitions: in hard mode with a
``highestTierAllowed`` each partition inside one HyperNode of at most that tier, and each partition whole (a gang
of its own, ``minPartitions`` of them for the job). Compared: per job, the bound pods (the random family's
outcome); and, per side, whether every bound partition is whole and inside one domain of its tier
(``partition_violations``), which must be none on both sides.

How outcomes are kept independent of what Volcano leaves to chance (Go map order, UIDs, creation times):
every pod asks for the same unit (1 cpu, 1 GiB) and every node holds a whole number of units, so which node of a
rack a pod takes does not change what fits; all racks have the same number of nodes; the jobs have distinct
priorities, so job order never falls through to creation time or UID.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path

from .workloads import NAMESPACE, SCHEDULER_NAME, ZONE_LABEL, Gang, Requests, Task, Workload, _node, _pod_spec

HYPERNODE_API = ("topology.volcano.sh", "v1alpha1", "hypernodes")
PARTITION_ID = "volcano.sh/partition-id"
UNIT = Requests(1000, 1024, 0)
MAX_PODS = 24


@dataclass
class PartitionWorkload(Workload):
    hypernodes: list[dict] = field(default_factory=list)
    # job name -> (partition size, highest tier a partition may span or None, minPartitions)
    partitions: dict[str, tuple[int, int | None, int]] = field(default_factory=dict)


def _hypernode(name: str, tier: int, kind: str, members: list[str]) -> dict:
    return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": name},
            "spec": {"tier": tier, "members": [{"type": kind, "selector": {"exactMatch": {"name": m}}}
                                               for m in members]}}


def _topology(rng: random.Random) -> tuple[dict | None, int | None]:
    """A partition's networkTopology and the tier it binds (None: unconstrained)."""
    pick = rng.random()
    if pick < 0.5:
        return {"mode": "hard", "highestTierAllowed": 1}, 1
    if pick < 0.65:
        return {"mode": "hard", "highestTierAllowed": 2}, 2
    if pick < 0.8:
        return {"mode": "soft", "highestTierAllowed": 1}, None
    return None, None


def generate(seed: int) -> PartitionWorkload:
    rng = random.Random(seed)
    p = f"w{seed}"
    racks, per_rack, units = rng.randint(2, 4), rng.randint(1, 3), rng.choice([2, 4])
    nodes, hypernodes = [], []
    for r in range(racks):
        names = [f"{p}-r{r}n{n}" for n in range(per_rack)]
        # the runner lists the workload's nodes by the zone label (run.py Cluster.nodes)
        nodes += [_node(name, units, units * 2, 0, {ZONE_LABEL: "a"}, []) for name in names]
        hypernodes.append(_hypernode(f"{p}-rack{r}", 1, "Node", names))
    hypernodes.append(_hypernode(f"{p}-spine", 2, "HyperNode", [f"{p}-rack{r}" for r in range(racks)]))
    queue = f"{p}-q0"
    queues = [{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": queue},
               "spec": {"weight": 1, "reclaimable": True}}]
    n_jobs = rng.randint(1, 3)
    values = sorted(rng.sample([10, 100, 1000, 10000], n_jobs), reverse=True)
    pcs = [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": f"{p}-p{i}"},
            "value": v, "globalDefault": False} for i, v in enumerate(values)]
    gangs: list[Gang] = []
    partitions: dict[str, tuple[int, int | None, int]] = {}
    budget = MAX_PODS
    for j in range(n_jobs):
        size = rng.randint(1, min(4, units * per_rack))
        total = rng.randint(1, max(1, min(4, (budget - 1) // size)))
        if total * size > budget:
            break
        least = rng.randint(0, total)
        topology, tier = _topology(rng)
        master = 1 if rng.random() < 0.3 and budget - total * size >= 1 else 0
        gang = _job(f"{p}-j{j}", queue, pcs[j]["metadata"]["name"], size, total, least, topology, master)
        gangs.append(gang)
        partitions[gang.name] = (size, tier, least)
        budget -= gang.replicas
    return PartitionWorkload(seed, nodes, queues, pcs, gangs, hypernodes=hypernodes, partitions=partitions)


def _job(name: str, queue: str, pc: str, size: int, total: int, least: int, topology: dict | None,
         master: int) -> Gang:
    policy: dict = {"totalPartitions": total, "partitionSize": size, "minPartitions": least}
    if topology is not None:
        policy["networkTopology"] = dict(topology)
    template = {"metadata": {}, "spec": {**_pod_spec(UNIT, {}, [], pc), "restartPolicy": "Always"}}
    task_specs = [{"name": "stage", "replicas": total * size, "partitionPolicy": policy, "template": template}]
    tasks = [Task("stage", total * size, least * size if least else None, UNIT)]
    if master:
        task_specs.insert(0, {"name": "master", "replicas": 1, "template": template})
        tasks.insert(0, Task("master", 1, None, UNIT))
    # Volcano's mutating webhook: a partitioned task's minAvailable is minPartitions x partitionSize when
    # minPartitions > 0, else its replicas; the job's minAvailable the sum of the task minimums.
    effective = sum(t.replicas if t.min_available is None else t.min_available for t in tasks)
    manifest = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                "metadata": {"name": name, "namespace": NAMESPACE},
                "spec": {"schedulerName": SCHEDULER_NAME, "queue": queue, "priorityClassName": pc,
                         "tasks": task_specs}}
    notes = [f"partitions {total} x {size}, min {least}, topology {topology or '-'}"]
    return Gang("job", name, queue, 0, pc, effective, tasks, [manifest], notes)


# ---- the partition property, from a side's record -------------------------------------------------------------

def _domains(wl: PartitionWorkload) -> dict[int, dict[str, str]]:
    """Per tier, node -> the name of its domain (tier 1: its rack; tier 2: the spine)."""
    rack_of = {m["selector"]["exactMatch"]["name"]: h["metadata"]["name"]
               for h in wl.hypernodes if h["spec"]["tier"] == 1 for m in h["spec"]["members"]}
    return {1: rack_of, 2: dict.fromkeys(rack_of, "spine")}


def partition_violations(wl: PartitionWorkload, record: dict) -> list[str]:
    """The bound partitions that are not whole, or (hard mode) span more than one domain of their tier, and the
    jobs with bound pods but fewer whole partitions than minPartitions: [] when the rules hold."""
    domains = _domains(wl)
    where: dict[str, dict[int, list[str]]] = {}
    for name, node, phase in record["observed"]["pods"]:
        job, _, rest = name.rpartition("-stage-")
        if not node or phase in ("Succeeded", "Failed") or job not in wl.partitions or not rest.isdigit():
            continue
        size = wl.partitions[job][0]
        where.setdefault(job, {}).setdefault(int(rest) // size, []).append(node)
    out = []
    for job, parts in sorted(where.items()):
        size, tier, least = wl.partitions[job]
        for index, nodes in sorted(parts.items()):
            if len(nodes) != size:
                out.append(f"{job} partition {index}: {len(nodes)}/{size} pods bound")
            if tier is not None and len({domains[tier][n] for n in nodes}) > 1:
                out.append(f"{job} partition {index}: spans {sorted({domains[tier][n] for n in nodes})}")
        whole = sum(1 for nodes in parts.values() if len(nodes) == size)
        if whole < least:
            out.append(f"{job}: {whole} whole partitions bound, minPartitions {least}")
    return out


def build(run_dir: Path, seeds: list[int], command: str) -> str:
    """The family's report: the random family's per-job agreement, then the partition property per side."""
    from .report import load, summarize

    volcano, ours = load(run_dir, "volcano", seeds), load(run_dir, "volcano-py", seeds)
    t, diffs, missing, errors = summarize(volcano, ours, seeds)
    lines = [f"# Differential, partitions family: `{command}`", "",
             f"{len(seeds)} workloads (seeds {seeds[0]}..{seeds[-1]}); missing {missing or '-'}; errors "
             f"{errors or '-'}", "", "```", json.dumps(t, indent=1, sort_keys=True, default=str), "```", ""]
    for seed in seeds:
        wl = generate(seed)
        v = partition_violations(wl, volcano[seed]) if seed in volcano and "error" not in volcano[seed] else None
        o = partition_violations(wl, ours[seed]) if seed in ours and "error" not in ours[seed] else None
        seed_diffs = [d for d in diffs if d.seed == seed]
        if v or o or seed_diffs:
            lines.append(f"## seed {seed}")
            lines += [f"    {line}" for line in wl.describe()]
            lines += [f"- differs: {d}" for d in seed_diffs]
            lines += [f"- Volcano breaks: {x}" for x in v or []]
            lines += [f"- volcano-py breaks: {x}" for x in o or []]
            lines.append("")
    return "\n".join(lines) + "\n"
