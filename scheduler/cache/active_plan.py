"""Layer `cache`: with `--active-shards N`, the holder of shard 0 writes every shard's NodeShard `spec.nodesDesired`
from `api.active_shards.plan_nodes` (the role Volcano's sharding controller has for its NodeShards).

A node's topology domain: the HyperNode holding it at the planning tier (the highest tier with at least N
HyperNodes, so each shard gets whole ones; the lowest tier when no tier has that many), else the value of the
node's `--shard-topology-label` label, else none (the node alone). Its weight: its GPUs, or on a cluster without
GPUs its CPU millicores. The plan is worked out again only when a node's (name, domain, weight) changed or
`plan_period` has passed, and written only where it differs from the NodeShards: every shard's losses first
(round one), then the missing NodeShards created, then the gains (round two), so no node is ever in two shards'
`nodesDesired`, which the two-phase handoff needs (sharding_model.py `plan` does the same).

A gang larger than its shard (the least it needs at once, in the plan's weight, above what its shard's nodes in
the plan offer pods of its size) borrows whole domains from the other shards (`plan_nodes`' needs) for as long as
it lives: from the cycle it is first seen waiting until it is gone or all its pods have ended; the plan is then
written back. The holder of shard 0 weighs the gangs of the shards it holds; the other shards' holders weigh theirs
against the plan's weights it publishes (`offers_of`) and publish their needs (cache/active_summary.py).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Collection, Sequence
from typing import Any

from scheduler.api.active_shards import Need, NodeFacts, plan_nodes
from scheduler.api.job import JobInfo
from scheduler.api.phases import TaskStatus
from scheduler.api.resources import CPU, GPU
from scheduler.api.shard import NODE_SHARDS_PATH
from scheduler.api.snapshot import ClusterSnapshot
from scheduler.cache.kube import TRANSPORT_ERRORS, Kube, KubeError
from scheduler.cache.shards import put_nodes_desired
from scheduler.cache.store import Watched
from scheduler.plugins.hypernode_score import CLUSTER, HyperNodeTree

log = logging.getLogger("volcano_py.active")


def node_facts(snapshot: ClusterSnapshot, shards: int, label: str) -> tuple[NodeFacts, ...]:
    names = sorted(snapshot.nodes)
    domain: dict[str, str] = {}
    if snapshot.hypernodes:
        tree = HyperNodeTree.build(names, snapshot.hypernodes)
        tiers = sorted({t for h, t in tree.tier.items() if h != CLUSTER})
        counts = {t: sum(1 for h, ht in tree.tier.items() if ht == t and h != CLUSTER and tree.nodes.get(h))
                  for t in tiers}
        wide = [t for t in tiers if counts[t] >= shards]
        tier = max(wide) if wide else (tiers[0] if tiers else None)
        for hypernode in sorted(h for h, t in tree.tier.items() if t == tier and h != CLUSTER):
            for position in sorted(tree.nodes.get(hypernode, ())):
                domain.setdefault(names[position], f"hypernode/{hypernode}")
    gpus = any(node.allocatable.get(GPU) > 0 for node in snapshot.nodes.values())
    facts = []
    for name in names:
        node = snapshot.nodes[name]
        where = domain.get(name) or (f"label/{node.labels.get(label, '')}" if label and node.labels.get(label)
                                     else "")
        weight = node.allocatable.get(GPU) if gpus else node.allocatable.get(CPU)
        facts.append(NodeFacts(name, where, max(0, int(weight))))
    return tuple(facts)


ENDED = (TaskStatus.SUCCEEDED, TaskStatus.FAILED)


def weight_unit(snapshot: ClusterSnapshot) -> str:
    """What the plan weighs nodes (and gangs) by: GPUs, or CPU on a cluster without GPUs."""
    return GPU if any(node.allocatable.get(GPU) > 0 for node in snapshot.nodes.values()) else CPU


def gang_need(job: JobInfo, unit: str) -> Need:
    """The least a gang needs at once, in the plan's weight (its minResources', when set, or its minAvailable
    lightest live pods'), in pods of its lightest pod's weight above none."""
    live = sorted(int(t.resreq.get(unit)) for t in job.tasks.values() if t.status not in ENDED)
    least = sum(live[:max(0, job.min_available)])
    declared = int(job.min_resources.get(unit)) if job.min_resources is not None else 0
    return Need(max(least, declared), next((w for w in live if w > 0), 0))


class Loans:
    """The gangs larger than their shard's share, from the cycle one is first seen waiting until it is gone or
    has ended: (shard, what the gang needs) for `plan_nodes`, the longest waiting first."""

    def __init__(self) -> None:
        self.gangs: dict[str, tuple[int, Need]] = {}  # job key -> (its shard, its need)
        self.since: dict[str, float] = {}  # job key -> when it was first seen waiting (wall-clock seconds)
        # job key -> (the job as weighed, the unit, its weight): a snapshot hands unchanged jobs over as the same
        # objects, so a waiting job is weighed once per change, not every cycle (held here: `is` cannot be fooled)
        self._weighed: dict[str, tuple[JobInfo, str, Need]] = {}

    def needs(self, snapshot: ClusterSnapshot, shard_of: Callable[[str], int], offers: Callable[[int, Need], int],
              shards: int, unit: str, now: float = 0.0) -> None:
        """`offers(shard, need)`: what the shard's nodes in the plan without loans offer the need's pods; `now`:
        the wall clock, kept as a gang's `since` when it is first seen."""
        for key in [k for k in self.gangs if k not in snapshot.jobs or _ended(snapshot.jobs[k])]:
            del self.gangs[key]
            self.since.pop(key, None)
        weighed = self._weighed
        if len(weighed) > 2 * len(snapshot.jobs) + 64:
            self._weighed = weighed = {k: v for k, v in weighed.items() if k in snapshot.jobs}
        for key, job in snapshot.jobs.items():  # waiting gangs only: a cheap test for the rest
            if key in self.gangs or not job.by_status.get(TaskStatus.PENDING):
                continue
            known = weighed.get(key)
            if known is not None and known[0] is job and known[1] == unit:
                need = known[2]
            else:
                need = gang_need(job, unit)
                weighed[key] = (job, unit, need)
            shard = shard_of(key)
            if 0 <= shard < shards and need.weight > offers(shard, need):
                self.gangs[key] = (shard, need)
                self.since[key] = now

    def entries(self, shards: Collection[int] | None = None) -> list[tuple[float, str, Need]]:
        """(since, job, need) of the gangs of `shards` (every shard when None), the longest waiting first: what a
        shard's holder publishes (cache/active.py)."""
        return [(self.since.get(key, 0.0), key, need) for key, (shard, need) in self.gangs.items()
                if shards is None or shard in shards]


def offers_of(base: Sequence[tuple[tuple[int, int], ...]]) -> Callable[[int, Need], int]:
    """`Loans.needs`' `offers` from the plan's node weights per shard without loans (`PlanWriter.base`, or as the
    holder of shard 0 publishes it)."""
    cache: dict[tuple[int, Need], int] = {}

    def offer(shard: int, need: Need) -> int:
        key = (shard, need)
        offered = cache.get(key)
        if offered is None:
            if len(cache) > 4096:
                cache.clear()
            offered = cache[key] = sum(need.usable(w) * count for w, count in base[shard]) \
                if 0 <= shard < len(base) else 0
        return offered
    return offer


def _ended(job: JobInfo) -> bool:
    return job.count(*ENDED) == len(job.tasks)


class PlanWriter:
    def __init__(self, kube: Kube, watched: Watched, lock: threading.Lock, names: Sequence[str], label: str,
                 period: float, monotonic: Callable[[], float]) -> None:
        self.kube, self.watched, self.lock, self.names = kube, watched, lock, list(names)
        self.label, self.period, self.monotonic = label, period, monotonic
        self.wall: Callable[[], float] = time.time
        self._facts: tuple[NodeFacts, ...] | None = None
        self._at = 0.0
        self._seen: tuple[frozenset[str], tuple[int, ...], tuple[tuple[int, Need], ...]] | None = None
        self.writes = 0  # NodeShard writes accepted (tests, logs)
        self.loans = Loans()
        # each shard's node weights in the plan without loans, as (weight, nodes of it) (none planned yet: empty),
        # and what they offer: a shard of 12,500 nodes has a few distinct weights, and every waiting gang of its
        # own need asks what they offer (summed over every node, that was a tenth of a replica's cycle)
        self.base: list[tuple[tuple[int, int], ...]] = []
        self._offer = offers_of(self.base)  # made again with each new base
        # node -> its shard in the last plan written without loans (None: none yet, read from the NodeShards):
        # the next plan keeps nodes where they are, so a node added or gone moves few others
        self._placed: dict[str, int] | None = None

    def step(self, snapshot: ClusterSnapshot, shard_of: Callable[[str], int] | None = None,
             others: Sequence[tuple[float, int, Need]] = ()) -> None:
        """Between sessions, on the holder of shard 0, with the jobs of the shards it holds in `snapshot`,
        `shard_of` the shard of each (None: no loans), and `others` the loans other shards' holders published
        (since, shard, need). Never raises (the next step tries again)."""
        try:
            self._step(snapshot, shard_of, others)
        except TRANSPORT_ERRORS as exc:
            log.warning("active shards: cannot write the NodeShards' plan: %s", exc)
            self._facts = None  # look again next time
        except Exception:  # noqa: BLE001 - a fault in planning (a job read oddly) costs the plan, never the cycle
            log.exception("active shards: planning the NodeShards failed; the plan stays as it is")
            self._facts = None

    def _step(self, snapshot: ClusterSnapshot, shard_of: Callable[[str], int] | None,
              others: Sequence[tuple[float, int, Need]]) -> None:
        if not self.watched.synced.is_set():
            return
        now = self.monotonic()
        needs: list[tuple[int, Need]] = []
        if shard_of is not None and self.base:
            shards = len(self.base)
            self.loans.needs(snapshot, shard_of, self._offer, shards, weight_unit(snapshot), self.wall())
            own = [(self.loans.since.get(key, 0.0), shard, need) for key, (shard, need) in self.loans.gangs.items()]
            # the longest waiting first, each a need some plan can hold (what the whole cluster offers its pods)
            needs = [(shard, need) for _, shard, need in sorted([*own, *others], key=lambda entry: entry[0])
                     if 0 <= shard < shards and need.weight <= sum(self._offer(s, need) for s in range(shards))]
        # The facts (a HyperNode tree over every node) are worked out again only when the node names, the
        # HyperNode objects or the loans changed, or the period passed: not every cycle.
        seen = (frozenset(snapshot.nodes), tuple(id(h) for h in snapshot.hypernodes), tuple(needs))
        if self._facts is not None and seen == self._seen and now - self._at < self.period:
            return
        facts = node_facts(snapshot, len(self.names), self.label)
        changed_needs = self._seen is None or seen[2] != self._seen[2]
        self._seen = seen
        if facts == self._facts and not changed_needs:
            self._at = now
            return
        # Every NodeShard read afresh (one list: the scheduler may list them), not from the watch: losses are
        # written before gains only if the writer knows each shard's desired nodes as they are now (a watch a write
        # behind could let a gain land on a node another shard still desires).
        listed = self._list()
        stored = {name: listed.get(name) for name in self.names}
        current = {name: _desired(obj) for name, obj in stored.items() if obj is not None}
        if self._placed is None:  # the plan as the NodeShards hold it (a new holder of shard 0): kept where it may
            self._placed = {n: self.names.index(name) for name, nodes in current.items() for n in nodes}
        weight = {f.name: f.weight for f in facts}
        base = plan_nodes(facts, len(self.names), current=self._placed)
        self.base = [tuple(sorted(Counter(weight[n] for n in names).items())) for names in base]
        self._offer = offers_of(self.base)
        wanted = dict(zip(self.names, plan_nodes(facts, len(self.names), needs, current=self._placed), strict=True))
        if needs:
            log.info("active shards: lending nodes for gangs larger than their shard (shard: weight needed) %s",
                     ", ".join(f"{i}: {n.weight}" for i, n in needs))
        first = {n: [x for x in current[n] if x in set(wanted[n])] for n in current
                 if set(current[n]) - set(wanted[n])}
        for name, kept in first.items():
            stored[name] = self._update(stored[name], kept)
            if stored[name] is None:
                return  # changed meanwhile: the next step looks again
        for name in self.names:
            if name not in current:
                self._create(name, list(wanted[name]) if not _taken(wanted[name], current) else [])
        for name in current:
            gains = set(wanted[name]) - set(first.get(name, current[name]))
            if gains and self._update(stored[name], list(wanted[name])) is None:
                return
        self._facts, self._at = facts, now
        self._placed = {n: i for i, names in enumerate(base) for n in names}
        log.info("active shards: planned %d nodes in %d shards (%s)", len(facts), len(self.names),
                 ", ".join(str(len(wanted[n])) for n in self.names))

    def _list(self) -> dict[str, Any]:
        page = self.kube.request("GET", NODE_SHARDS_PATH)
        items = page.get("items") if isinstance(page, dict) else None
        return {str((obj.get("metadata") or {}).get("name")): obj for obj in items or () if isinstance(obj, dict)}

    def _update(self, shard: Any, desired: list[str]) -> Any:
        answer = put_nodes_desired(self.kube, shard, desired)
        if answer is None:  # changed or gone meanwhile: plan again
            self._facts = None
            return None
        self.writes += 1
        return answer

    def _create(self, name: str, desired: list[str]) -> None:
        body = {"apiVersion": "shard.volcano.sh/v1alpha1", "kind": "NodeShard", "metadata": {"name": name},
                "spec": {"nodesDesired": desired}}
        try:
            self.kube.request("POST", NODE_SHARDS_PATH, body=body)
            self.writes += 1
            log.info("active shards: created NodeShard %s with %d nodes", name, len(desired))
        except KubeError as exc:
            if exc.status != 409:
                raise
        self._facts = None  # the gains of a shard created empty come next step


def _taken(nodes: Sequence[str], current: dict[str, list[str]]) -> bool:
    """Some of these nodes are still desired by an existing shard (its losses not written yet)."""
    mine = set(nodes)
    return any(mine & set(other) for other in current.values())


def _desired(shard: Any) -> list[str]:
    spec = shard.get("spec") if isinstance(shard, dict) else None
    nodes = spec.get("nodesDesired") if isinstance(spec, dict) else None
    return [n for n in nodes if isinstance(n, str)] if isinstance(nodes, list) else []
