"""Layer `cache`: the first cycle after a start, on a partial view of the cluster (`--first-cycle-partial-view`).

After a restart most of the time to the first bind is the full pod list: the apiserver encoding every pod and
this process decoding them (docs/benchmarks-history.md, "Where a restart goes"). Volcano and kube-scheduler
wait for it. A first cycle can run before it, on a view that is partial but never wrong about what it uses:

1. every pod of our schedulers, by the `spec.schedulerName` field selector (a few of the cluster's pods): every
   job's state and every queue's usage are then exact;
2. the nodes, PodGroups, Queues, PriorityClasses, HyperNodes, storage, DRA and quota objects, as the watches
   list them (small lists);
3. the pods of a few *candidate* nodes, each by the `spec.nodeName` field selector (the apiserver's watch cache
   indexes it): only these nodes, whose every pod is known, are offered to the cycle;
4. one cycle of `enqueue`, `allocate` and `backfill` on that view. It is conservative: a smaller cluster gives
   every queue a smaller or equal deserved share and guarantee room, and a node it offers is accounted with all
   its pods, so it never over-commits a node and never lets a queue past its capability, guarantee or deserved
   share (tests/cache/test_first_view.py checks these on seeded random clusters against the full view);
5. only its binds (and their `Scheduled` events) are written: no condition, status or other event, whose view
   would be partial. The next cycle, on the full view, writes them.

It is skipped (the process waits for the full lists, as before) when there is nothing pending of ours, when a
pending pod of ours has inter-pod affinity, anti-affinity or spread constraints (they depend on pods this view
has not read), when the conf runs `consolidate` (its held room is honoured by the full cycle), and when this
replica is not the leader. One limit is documented rather than checked: an existing pod of another scheduler,
on a node this view has not listed, whose *required* anti-affinity reaches a candidate node through a zone-wide
topology key, is not seen by this one cycle.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from scheduler.api.convert import key_of
from scheduler.api.job import TaskInfo
from scheduler.api.node import NodeInfo
from scheduler.api.objects import MutableObj
from scheduler.api.phases import TaskStatus
from scheduler.api.pod import Constraints
from scheduler.api.resources import Resource
from scheduler.api.shard import ShardView
from scheduler.api.snapshot import ClusterSnapshot
from scheduler.cache.kube import TRANSPORT_ERRORS, Kube, loads
from scheduler.cache.pages import EarlyList
from scheduler.cache.store import Stores, resource_version, trim
from scheduler.framework.conf_values import SchedulerConf

if TYPE_CHECKING:
    from scheduler.cache.cluster_cache import ClusterCache

log = logging.getLogger("volcano_py.cache")

FIRST_VIEW_ACTIONS = ("enqueue", "allocate", "backfill")  # the actions that only place; in the conf's order
MIN_CANDIDATES = 16  # nodes offered at least (if the cluster has them)
MAX_CANDIDATES = 256  # and at most: one `spec.nodeName` list each
HEADROOM = 2  # candidates hold the pending pods' requests this many times over
PODS = "/api/v1/pods"


@dataclass(frozen=True, slots=True)
class Skip:
    """Why no first cycle runs on a partial view (the runner logs it in one line)."""

    why: str


def first_view_conf(conf: SchedulerConf) -> SchedulerConf | Skip:
    """The conf with only the placing actions, or why not (the held room of `consolidate` is the full cycle's)."""
    if "consolidate" in conf.actions:
        return Skip("the conf runs consolidate")
    actions = tuple(a for a in conf.actions if a in FIRST_VIEW_ACTIONS)
    if "allocate" not in actions:
        return Skip("the conf does not allocate")
    return replace(conf, actions=actions)


def blocker(pending: Iterable[TaskInfo]) -> Skip | None:
    """A pending pod whose placement depends on pods this view has not read."""
    for task in pending:
        c = task.constraints
        if c.pod_affinity or c.pod_anti_affinity or c.preferred_pod_affinity or c.preferred_pod_anti_affinity \
                or c.spread:
            return Skip(f"pod {task.key} has inter-pod affinity or spread constraints")
    return None


def _admits(c: Constraints, node: NodeInfo) -> bool:
    """The pod's node selector, required node affinity and tolerations admit the node (the static checks the
    predicates plugin makes; the cycle's predicates decide, this only sifts candidates)."""
    return (all(node.labels.get(k) == v for k, v in c.node_selector)
            and (not c.required_terms or any(t.matches(node.labels, node.name) for t in c.required_terms))
            and c.untolerated(node.taints) is None)


def pick_candidates(nodes: Sequence[NodeInfo], ours: Iterable[TaskInfo], pending: Sequence[TaskInfo], *,
                    headroom: int = HEADROOM, least: int = MIN_CANDIDATES, most: int = MAX_CANDIDATES,
                    shard: ShardView | None = None) -> list[str]:
    """Names of the nodes to list the pods of: open to some pending pod, those with the least of our schedulers'
    pods first (their other pods are not known yet), until they hold `headroom` times the pending requests in
    every resource asked for and number at least `least`, at most `most`. With a NodeShard (`shard`), as the
    session will use it: in hard mode the shard's nodes only, in soft mode the shard's nodes first."""
    if shard is not None and shard.hard:
        nodes = [n for n in nodes if n.name in shard.nodes]
    preferred = shard.nodes if shard is not None and shard.soft else None
    used: dict[str, Resource] = {}
    count: dict[str, int] = {}
    for task in ours:
        if task.node_name and task.status is not TaskStatus.PENDING:
            used[task.node_name] = used.get(task.node_name, Resource()) + task.resreq
            count[task.node_name] = count.get(task.node_name, 0) + 1
    wanted = Resource.total(t.resreq for t in pending).scale(headroom)
    asked = [name for name, amount in wanted.items() if amount > 0]
    kinds = {t.constraints for t in pending}  # a gang's pods share one Constraints: one check per kind and node
    open_nodes = [n for n in nodes if n.ready and not n.unschedulable and any(_admits(c, n) for c in kinds)]
    open_nodes.sort(key=lambda n: (preferred is not None and n.name not in preferred, count.get(n.name, 0), n.name))
    picked: list[str] = []
    room = Resource()
    for node in open_nodes:
        if len(picked) >= most:
            break
        if len(picked) >= least and all(room.get(r) >= wanted.get(r) for r in asked):
            break
        picked.append(node.name)
        room = room + (node.allocatable - used.get(node.name, Resource())).clamp_zero()
    return picked


def list_pods(kube: Kube, query: Mapping[str, str]) -> list[MutableObj]:
    """One field-selected pod list, unpaged (a node's pods, or one scheduler's)."""
    items = loads(kube.request_bytes("GET", PODS, query=query)).get("items") or []
    for obj in items:
        trim(obj)
    return list(items)


def node_pods(kube: Kube, pool: Executor, names: Sequence[str]) -> list[MutableObj]:
    """Every pod of each named node, listed concurrently."""
    futures = [pool.submit(list_pods, kube, {"fieldSelector": f"spec.nodeName={name}"}) for name in names]
    return [obj for future in futures for obj in future.result()]


def merge(*lists: Iterable[MutableObj]) -> dict[str, MutableObj]:
    """Pods by key; of two copies of one pod, the later resourceVersion."""
    out: dict[str, MutableObj] = {}
    for objects in lists:
        for obj in objects:
            key = key_of(obj)
            have = out.get(key)
            if have is None or resource_version(obj) >= resource_version(have):
                out[key] = obj
    return out


def others_synced(stores: Stores, deadline: float) -> bool:
    """Every watched kind but pods has been listed (or counts as absent), by `deadline` (monotonic)."""
    for w in stores.watched:
        if w is stores.pods:
            continue
        if not w.synced.wait(max(0.0, deadline - time.monotonic())):
            return False
    return True


def is_pending(obj: Any, task: TaskInfo | None) -> bool:
    meta = obj.get("metadata") or {}
    return task is not None and task.status is TaskStatus.PENDING and not task.node_name \
        and not meta.get("deletionTimestamp") and not task.gated


@dataclass(slots=True)
class FirstView:
    """What the first cycle on a partial view decides from: its snapshot, the conf it runs, the pods it may bind
    (by key: the binds name their UIDs), and how much of the cluster it saw."""

    snapshot: ClusterSnapshot
    conf: SchedulerConf
    pods: dict[str, MutableObj]
    nodes: int
    of_nodes: int


def prepare(cache: ClusterCache, conf: SchedulerConf, ours: Sequence[EarlyList], deadline: float) -> FirstView | Skip:
    """The partial view (steps 1-3 of the module's note), or why there is none by `deadline` (monotonic)."""
    restricted = first_view_conf(conf)
    if isinstance(restricted, Skip):
        return restricted
    if not ours:
        return Skip("our pods were not listed early")
    if not others_synced(cache.stores, deadline):
        return Skip("the small lists were not in by the deadline")
    listed: list[MutableObj] = []
    for early in ours:
        items = early.items(deadline - time.monotonic())
        if items is None:
            return Skip("the list of our pods failed or was late")
        listed.extend(items)
    for obj in listed:
        trim(obj)
    parser, stores = cache.parser, cache.stores
    pcs = parser.pcs
    tasks = [(obj, parser.task(obj, pcs)) for obj in listed]
    mine = [t for _, t in tasks if t is not None]
    pending = [t for obj, t in tasks if t is not None and is_pending(obj, t)]
    if not pending:
        return Skip("nothing of ours is pending")
    blocked = blocker(pending)
    if blocked is not None:
        return blocked
    with stores.lock:
        nodes = list(stores.nodes.objects.values())
    node_infos = cache.parser.nodes(nodes)
    # The NodeShard step, as a session's: the nodes the view's session may use (cache/shards.py)
    shard = cache.shards.between_sessions() if cache.shards is not None else None
    names = pick_candidates(node_infos, mine, pending, shard=shard)
    if not names:
        return Skip("no node is open to the pending pods")
    try:
        their_pods = node_pods(cache.kube, cache.pool, names)
    except TRANSPORT_ERRORS as exc:  # the full view decides, as before
        return Skip(f"listing the candidate nodes' pods failed: {exc}")
    by_key = merge(listed, their_pods)
    chosen = set(names)
    snapshot = cache.build(nodes=[n for n in node_infos if n.name in chosen], pods=by_key, assumed={})
    return FirstView(snapshot, restricted, by_key, len(chosen), len(node_infos))
