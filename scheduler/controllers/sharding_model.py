"""Layer `controllers`: which nodes each scheduler's NodeShard desires, worked out as Volcano's sharding controller
does, and the writes that carry it out. Pure: nodes and pods in, names and writes out.

- A node's CPU "utilization" is the sum of its pods' container CPU requests over its CPU capacity, at most 1
  (pods Succeeded or Failed, and mirror pods, left out): node_utilization.go calculateMetricsFromPodsAndNode.
- Per scheduler, in configuration order, over the nodes no earlier scheduler took: filter (every Filterer
  passes: allocation-rate keeps a rounded utilization within its range), score (the weighted sum; allocation-rate
  rises with utilization, warmup gives 1 to a labelled node; a stable sort, highest first), select (node-limit
  keeps the first maxNodes): sharding_manager.go runPipeline.
- Above 50 nodes the nodes go through in batches of 50 and each batch's selections are appended, so node-limit
  caps each batch, not the shard (calculateShardAssignmentsBatched; Volcano also sleeps 10 ms per batch, not
  here). Nodes are taken in name order (Volcano: in its informer's order).
- A NodeShard is created when missing, updated when its size changed or at least a tenth of its nodes did
  (assignmentNeedsUpdate), and the NodeShards of schedulers no longer configured are deleted.

Stricter than Volcano, so that no node is ever desired by two shards at once (the scheduler's two-phase handoff
relies on it, `api/shard.py`): a shard left as it is keeps its nodes out of the others' new lists, and the writes
come in two rounds, every shard's losses before any shard's gains.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scheduler.api.resources import QuantityError, to_units
from scheduler.controllers.sharding_conf import ALLOCATION_RATE, NODE_LIMIT, WARMUP, Policy, SchedulerShardConf

BATCH = 50


@dataclass(frozen=True, slots=True)
class NodeUse:
    name: str
    cpu_util: float  # -1: unknown (Volcano's allocation-rate filters such a node out)
    labels: Mapping[str, str] = field(default_factory=dict)


def _name(obj: Any) -> str:
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    name = meta.get("name") if isinstance(meta, Mapping) else None
    return name if isinstance(name, str) and 0 < len(name) <= 253 else ""


def node_uses(nodes: Iterable[Any], pods: Iterable[Any]) -> list[NodeUse]:
    """Each readable node with its CPU utilization from the pods bound to it, in name order."""
    requested: dict[str, int] = {}
    for pod in pods:
        if not isinstance(pod, Mapping):
            continue
        spec, status, meta = pod.get("spec"), pod.get("status"), pod.get("metadata")
        if not isinstance(spec, Mapping):
            continue
        node = spec.get("nodeName")
        if not isinstance(node, str) or not node:
            continue
        if isinstance(status, Mapping) and status.get("phase") in ("Succeeded", "Failed"):
            continue
        annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
        if isinstance(annotations, Mapping) and "kubernetes.io/config.mirror" in annotations:
            continue
        requested[node] = requested.get(node, 0) + _cpu_requests(spec)
    out = []
    for obj in nodes:
        name = _name(obj)
        if not name:
            continue
        status = obj.get("status")
        capacity = status.get("capacity") if isinstance(status, Mapping) else None
        try:
            cpu = to_units("cpu", capacity.get("cpu", 0)) if isinstance(capacity, Mapping) else 0
        except QuantityError:
            cpu = -1
        util = -1.0 if cpu < 0 else (min(1.0, requested.get(name, 0) / cpu) if cpu > 0 else 0.0)
        labels = (obj.get("metadata") or {}).get("labels")
        out.append(NodeUse(name, util, {str(k): str(v) for k, v in labels.items()} if isinstance(labels, Mapping)
                           else {}))
    out.sort(key=lambda n: n.name)
    return out


def _cpu_requests(spec: Mapping[str, Any]) -> int:
    total = 0
    containers = spec.get("containers")
    for container in containers if isinstance(containers, list) else ():
        resources = container.get("resources") if isinstance(container, Mapping) else None
        requests = resources.get("requests") if isinstance(resources, Mapping) else None
        if isinstance(requests, Mapping) and "cpu" in requests:
            try:
                total += to_units("cpu", requests["cpu"])
            except QuantityError:
                continue  # an unreadable request counts as none
    return total


def _passes(policy: Policy, node: NodeUse) -> bool:
    if policy.name != ALLOCATION_RATE:
        return True
    if node.cpu_util < 0:
        return False
    util = round(node.cpu_util * 100) / 100
    return policy.min_cpu <= util <= policy.max_cpu


def _score(policy: Policy, node: NodeUse) -> float:
    if policy.name == WARMUP:
        return 1.0 if node.labels.get(policy.label) == policy.value else 0.0
    if node.cpu_util < 0:
        return 0.0
    span = policy.max_cpu - policy.min_cpu
    if span == 0:
        return 1.0
    util = round(node.cpu_util * 100) / 100
    return min(1.0, max(0.0, (util - policy.min_cpu) / span))


def pipeline(conf: SchedulerShardConf, candidates: Sequence[NodeUse]) -> list[str]:
    """One scheduler's nodes among `candidates` (those no earlier scheduler took)."""
    kept = [n for n in candidates if all(_passes(p, n) for p in conf.policies)]
    scorers = [p for p in conf.policies if p.name in (ALLOCATION_RATE, WARMUP)]
    if len(kept) > 1 and scorers:
        scores = [sum(p.weight * _score(p, n) for p in scorers) for n in kept]
        order = sorted(range(len(kept)), key=lambda i: -scores[i])  # stable: ties keep their order
        kept = [kept[i] for i in order]
    for p in conf.policies:
        if p.name == NODE_LIMIT and p.max_nodes > 0:
            kept = kept[:p.max_nodes]
        if not kept:
            break
    return [n.name for n in kept]


def assign(schedulers: Sequence[SchedulerShardConf], nodes: Sequence[NodeUse],
           keep: Mapping[str, Iterable[str]] = {}) -> dict[str, list[str]]:
    """Each scheduler's desired nodes. `keep`: nodes that stay where they are (a shard not rewritten): no other
    scheduler is given them."""
    taken = {n for names in keep.values() for n in names}
    free = [n for n in nodes if n.name not in taken]
    out: dict[str, list[str]] = {s.name: [] for s in schedulers}
    batches = [free[i:i + BATCH] for i in range(0, len(free), BATCH)] if len(free) > BATCH else [free]
    for batch in batches:
        assigned: set[str] = set()
        for conf in schedulers:
            chosen = pipeline(conf, [n for n in batch if n.name not in assigned])
            assigned.update(chosen)
            out[conf.name].extend(chosen)
    return out


def needs_update(current: Sequence[str], wanted: Sequence[str]) -> bool:
    """sharding_controller.go assignmentNeedsUpdate: the size changed, or at least a tenth (at least one) of the
    wanted nodes are new."""
    if len(current) != len(wanted):
        return True
    have = set(current)
    return sum(1 for n in wanted if n not in have) >= max(1, len(wanted) // 10)


@dataclass(frozen=True, slots=True)
class ShardWrites:
    create: dict[str, list[str]]
    first: dict[str, list[str]]  # round one: each shard's losses (its old nodes that it keeps)
    second: dict[str, list[str]]  # round two: the new lists
    delete: tuple[str, ...]


def plan(schedulers: Sequence[SchedulerShardConf], nodes: Sequence[NodeUse],
         current: Mapping[str, Sequence[str]]) -> ShardWrites:
    """The writes for one sync. `current`: every NodeShard's spec.nodesDesired now."""
    wanted = assign(schedulers, nodes)
    configured = {s.name for s in schedulers}
    keep = {name: nodes_ for name, nodes_ in current.items()
            if name in configured and not needs_update(nodes_, wanted[name])}
    if keep:  # the shards left as they are keep their nodes; the rest is worked out again without them
        wanted = assign(schedulers, nodes, keep)
    create = {s.name: wanted[s.name] for s in schedulers if s.name not in current}
    first: dict[str, list[str]] = {}
    second: dict[str, list[str]] = {}
    for s in schedulers:
        old = current.get(s.name)
        if old is None or s.name in keep or not needs_update(old, wanted[s.name]):
            continue
        new = wanted[s.name]
        new_set = set(new)
        kept = [n for n in old if n in new_set]
        if len(kept) < len(old) and len(kept) < len(new):
            first[s.name] = kept
            second[s.name] = new
        elif len(kept) < len(old):
            first[s.name] = new
        else:
            second[s.name] = new
    delete = tuple(sorted(name for name in current if name not in configured))
    return ShardWrites(create, first, second, delete)
