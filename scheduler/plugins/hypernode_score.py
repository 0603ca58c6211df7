"""Layer `plugins`: which HyperNode a job with a network topology goes to, as Volcano chooses it.

`network-topology-aware` (plugins/topology.py) asks this module, for a job with a `networkTopology` in a cluster
with HyperNodes, for the HyperNodes to try, in the order Volcano's allocate would keep the first that holds the
job (pkg/scheduler/actions/allocate/allocate.go allocateForJob; plugins/network-topology-aware/
network_topology_aware.go hyperNodeGradientFn, HyperNodeOrderFn):

1. **Tiers.** `mode: hard` allows tiers up to `highestTierAllowed`, or the tier whose HyperNodes carry
   `spec.tierName: highestTierName` (framework/session.go translateHighestTierNameToAllowed; a name no HyperNode
   carries leaves the job without a tier limit, as in Volcano). `mode: soft` allows every tier and, at the top,
   the whole cluster (session.go convertSoftToHardTopology).
2. **Gradients.** From the search root (the whole cluster, or for a job that already holds a HyperNode the
   highest ancestor of it within the allowed tiers: getSearchRoot), every HyperNode of an allowed tier, lower
   tiers first. A job that holds none yet only tries a HyperNode whose idle, or idle plus releasing, covers its
   `minResources` (isEligibleHyperNode).
3. **Score.** Inside a tier, the HyperNode with the highest hypernode-level binpack score wins among those that
   hold the job: over the resources with a weight (`hypernode.binpack.cpu`, `.memory`, and those listed in
   `.resources` with `.resources.<name>`), the weighted mean of (used + the requests of all the job's tasks) /
   allocatable summed over the HyperNode's nodes, 0 when any of them would be overused
   (getSubJobHyperNodeBinPackingScore); times 100 and `weight`. So a domain whose nodes already hold work wins.
   Equal scores, where Volcano walks a Go map: more of the job's tasks already on the HyperNode's nodes first
   (Volcano's tie-break among HyperNodes, scoreWithTaskNum), then by name.
4. **The job's HyperNode** (`JobInfo.AllocatedHyperNode`, kept in the PodGroup annotation
   `volcano.sh/job-allocated-hypernode`): read from the annotation when a session opens (Volcano keeps it in its
   cache between sessions; volcano-py's cache is the API, so a restart or a new leader reads what the last one
   wrote); dropped when that HyperNode is gone or the job holds no node (no task Allocated, Binding, Bound or
   Running: session.go removeInvalidAllocatedHyperNode); when absent for a job that holds nodes, the lowest-tier
   HyperNode holding all its placed tasks (recoverAllocatedHyperNode). After a placement in HyperNode H is
   committed it becomes the lowest common ancestor of itself and H (recorder.go UpdateDecisionToJob). The
   annotation is written whenever it differs from that value, and removed when the value is empty.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from scheduler.api.fields import ALLOCATED_HYPERNODE
from scheduler.api.job import JobInfo, TaskInfo
from scheduler.api.node import NodeInfo
from scheduler.api.phases import TaskStatus
from scheduler.api.resources import CPU, MEMORY, ZERO, Resource
from scheduler.framework.conf_args import ArgReader
from scheduler.framework.plugin import SessionAPI
from scheduler.plugins.shares import without_pods
from scheduler.solver.topology import _member_matches as member_matches, tier_names

log = logging.getLogger("volcano_py.scheduler")
WEIGHT = "weight"
BINPACK_CPU = "hypernode.binpack.cpu"
BINPACK_MEMORY = "hypernode.binpack.memory"
BINPACK_RESOURCES = "hypernode.binpack.resources"
CLUSTER = "<cluster>"  # Volcano's ClusterTopHyperNode: every node, one tier above the highest HyperNode
MAX_NODE_SCORE = 100.0
# A task in one of these holds its node for the allocated-HyperNode rule (Volcano's api.AllocatedStatus).
HOLDING = frozenset({TaskStatus.ALLOCATED, TaskStatus.BINDING, TaskStatus.BOUND, TaskStatus.RUNNING})
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class BinpackWeights:
    """network-topology-aware's hypernode-level binpack weights (Volcano's priorityWeight)."""

    weight: int = 1
    resources: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({CPU: 1, MEMORY: 1}))


def _non_negative(reader: ArgReader, key: str) -> int:
    """A weight; a negative one is taken as 1, as Volcano's getPriorityWeight does."""
    value = reader.integer(key, 1)
    if value < 0:
        reader.warn(key, f"weight {value} is negative; using 1, as Volcano does")
        return 1
    return value


def parse_weights(reader: ArgReader) -> BinpackWeights:
    resources = {CPU: _non_negative(reader, BINPACK_CPU), MEMORY: _non_negative(reader, BINPACK_MEMORY)}
    listed = reader.raw(BINPACK_RESOURCES)
    if listed is not None and not isinstance(listed, str):
        raise reader.fail(BINPACK_RESOURCES, "a comma-separated list of resource names")
    for name in (listed or "").split(","):
        if name.strip():
            resources[name.strip()] = _non_negative(reader, f"{BINPACK_RESOURCES}.{name.strip()}")
    return BinpackWeights(_non_negative(reader, WEIGHT), MappingProxyType(resources))


def binpack_score(weights: BinpackWeights, request: Resource, allocatable: Resource, used: Resource) -> float:
    """Volcano's getSubJobHyperNodeBinPackingScore scaled as scaleFinalScore: 0..100 x `weight`."""
    total, total_weight = 0.0, 0
    for name, weight in weights.resources.items():
        wanted = request.get(name)
        if wanted <= 0:
            continue  # a resource no task of the job asks for is not counted
        room, taken = allocatable.get(name), used.get(name)
        if taken + wanted > room:
            return 0.0  # overused
        total += weight * (taken + wanted) / room
        total_weight += weight
    return MAX_NODE_SCORE * weights.weight * total / total_weight if total_weight > 0 else 0.0


@dataclass(slots=True)
class HyperNodeTree:
    """The HyperNodes as Volcano's session holds them: tier, parent, children and real nodes (positions in the
    session's node list) of each, with the `CLUSTER` root above the top ones."""

    tier: dict[str, int]
    parent: dict[str, str]
    children: dict[str, list[str]]
    nodes: dict[str, frozenset[int]]
    tier_names: dict[str, int]

    @staticmethod
    def build(node_names: Sequence[str], hypernodes: Iterable[Mapping[str, Any]]) -> HyperNodeTree:
        specs = {str((h.get("metadata") or {}).get("name", "")): (h.get("spec") or {}) for h in hypernodes}
        tier = {name: int(spec.get("tier", 1)) for name, spec in specs.items()}
        parent: dict[str, str] = {}
        direct: dict[str, set[int]] = {name: set() for name in specs}
        for name, spec in specs.items():
            for member in spec.get("members") or ():
                if member.get("type", "Node") == "HyperNode":
                    for child in specs:
                        if child != name and member_matches(member, child) and tier[child] < tier[name]:
                            parent.setdefault(child, name)
                else:
                    direct[name].update(i for i, n in enumerate(node_names) if member_matches(member, n))
        tier[CLUSTER] = max(tier.values(), default=0) + 1
        for name in specs:
            parent.setdefault(name, CLUSTER)
        children: dict[str, list[str]] = {name: [] for name in tier}
        for child, up in sorted(parent.items()):
            children[up].append(child)
        nodes: dict[str, frozenset[int]] = {CLUSTER: frozenset(range(len(node_names)))}

        def real(name: str, seen: frozenset[str]) -> frozenset[int]:
            if name not in nodes:
                below = [real(c, seen | {name}) for c in children[name] if c not in seen]
                nodes[name] = frozenset(direct[name]).union(*below)
            return nodes[name]

        for name in specs:
            real(name, frozenset())
        return HyperNodeTree(tier, parent, children, nodes, tier_names(hypernodes))

    @staticmethod
    def cached(node_names: list[str], hypernodes: Sequence[Mapping[str, Any]]) -> HyperNodeTree:
        return _tree(node_names, hypernodes)

    @property
    def top(self) -> int:
        return self.tier[CLUSTER]

    def ancestors(self, name: str) -> list[str]:
        """`name` and the HyperNodes above it, nearest first (Volcano's GetAncestors)."""
        out = [name]
        while out[-1] in self.parent and self.parent[out[-1]] not in out:
            out.append(self.parent[out[-1]])
        return out

    def lca(self, a: str, b: str) -> str:
        """Volcano's GetLCAHyperNode: the other when one is empty, "" when they share no ancestor."""
        if not a or not b:
            return a or b
        above = set(self.ancestors(a))
        return next((h for h in self.ancestors(b) if h in above), "")

    def lowest_holding(self, positions: Iterable[int]) -> str:
        """The lowest-tier HyperNode (by name among equals) whose nodes include all `positions` ("" if none)."""
        wanted = frozenset(positions)
        holding = [h for h, nodes in self.nodes.items() if h != CLUSTER and wanted <= nodes]
        return min(holding, key=lambda h: (self.tier[h], h)) if wanted and holding else ""


def highest_tier(tree: HyperNodeTree, spec: Mapping[str, Any]) -> int | None:
    """The highest tier the job may span (the cluster's for soft mode), or None for no HyperNode limit at all: a
    hard spec with neither `highestTierAllowed` nor a `highestTierName` some HyperNode carries, which Volcano's
    allocate takes down the pod-by-pod path (job_info.go IsHardTopologyMode)."""
    if str(spec.get("mode", "hard")).lower() == "soft":
        return tree.top
    allowed = spec.get("highestTierAllowed")
    if allowed is not None:
        return int(allowed)
    name = spec.get("highestTierName")
    return tree.tier_names.get(str(name)) if name else None


def allocated_hypernode(tree: HyperNodeTree, job: JobInfo, position: Mapping[str, int]) -> str:
    """The job's HyperNode when the session opens (rule 4 of the module's docstring)."""
    held = [t for t in job.tasks.values() if t.status in HOLDING]
    current = str(job.extra.get("allocatedHyperNode") or "")
    if current and (current not in tree.tier or current == CLUSTER or not held):
        current = ""
    if current or not held:
        return current
    return tree.lowest_holding(position[t.node_name] for t in held if t.node_name in position)


def _sum(nodes: Sequence[NodeInfo], positions: Iterable[int], what: str) -> Resource:
    if what == "idle":
        return Resource.total(nodes[i].idle for i in positions)
    if what == "future":
        return Resource.total(nodes[i].future_idle() for i in positions)
    if what == "used":  # Volcano's resource cache adds every allocate and pipeline event
        return Resource.total(nodes[i].used + nodes[i].pipelined for i in positions)
    return Resource.total(nodes[i].allocatable for i in positions)


def _search_root(tree: HyperNodeTree, highest: int, allocated: str) -> str | None:
    """Volcano's getSearchRoot from the whole cluster: the highest ancestor of `allocated` within `highest`."""
    if not allocated:
        return CLUSTER
    root = None
    for name in tree.ancestors(allocated):
        if tree.tier[name] > highest:
            break
        root = name
    return root


def gradients(tree: HyperNodeTree, nodes: Sequence[NodeInfo], highest: int, allocated: str,
              min_resources: Resource | None) -> list[list[str]]:
    """The HyperNodes to try, per tier, lower tiers first (Volcano's hyperNodeGradientFn, PurposeAllocate); each
    tier's by name (the score orders them later). Empty when the job's HyperNode is above its highest tier."""
    root = _search_root(tree, highest, allocated)
    if root is None:
        return []
    need = without_pods(min_resources or ZERO)
    by_tier: dict[int, list[str]] = {}
    queue, seen = deque([root]), {root}
    while queue:
        name = queue.popleft()
        if tree.tier[name] <= highest and (allocated or _room_for(need, nodes, tree.nodes[name])):
            by_tier.setdefault(tree.tier[name], []).append(name)
        for child in tree.children.get(name, ()):
            if child not in seen:
                seen.add(child)
                queue.append(child)
    return [sorted(by_tier[t]) for t in sorted(by_tier)]


def _room_for(need: Resource, nodes: Sequence[NodeInfo], positions: frozenset[int]) -> bool:
    return need <= _sum(nodes, positions, "idle") or need <= _sum(nodes, positions, "future")


def job_request(job: JobInfo) -> Resource:
    """What the score adds to a HyperNode's use: the requests of all the job's tasks (Volcano: subJob.Tasks)."""
    return Resource.total(t.resreq for t in job.tasks.values())


def ranked(tree: HyperNodeTree, weights: BinpackWeights, job: JobInfo, nodes: Sequence[NodeInfo],
           position: Mapping[str, int], names: Sequence[str]) -> list[tuple[str, float]]:
    """`names` best first, with their scores: binpack score, then more of the job's tasks on it, then name."""
    request = job_request(job)
    placed = [position[t.node_name] for t in job.tasks.values() if t.node_name in position]
    scored = []
    for name in names:
        inside = tree.nodes[name]
        score = binpack_score(weights, request, _sum(nodes, inside, "allocatable"), _sum(nodes, inside, "used"))
        scored.append((-score, -sum(1 for p in placed if p in inside), name))
    scored.sort()
    return [(name, -score) for score, _, name in scored]


def choose(tree: HyperNodeTree, weights: BinpackWeights, job: JobInfo, nodes: Sequence[NodeInfo],
           position: Mapping[str, int], tiers: Sequence[Sequence[str]],
           attempt: Callable[[str], T | None]) -> tuple[str, T] | None:
    """The first HyperNode, gradient by gradient and best score first, where `attempt` places the job."""
    for names in tiers:
        for name, _score in ranked(tree, weights, job, nodes, position, names):
            placed = attempt(name)
            if placed is not None:
                return name, placed
    return None


def sub_group_scores(weights: BinpackWeights, tasks: Sequence[TaskInfo], nodes: Sequence[NodeInfo],
                     position: Mapping[str, int], candidates: Mapping[str, npt.NDArray[np.int64]],
                     ) -> dict[str, float]:
    """Volcano's HyperNodeOrderFn for a sub-job (network_topology_aware.go): each candidate's `binpack_score` of
    the requests of all the sub-group's tasks over its nodes; where several share the highest score, each of those
    gains the share of the sub-group's tasks already on its nodes (scoreWithTaskNum), scaled as the score."""
    request = Resource.total(t.resreq for t in tasks)
    scores: dict[str, float] = {}
    for name, positions in candidates.items():
        inside = positions.tolist()
        scores[name] = binpack_score(weights, request, _sum(nodes, inside, "allocatable"), _sum(nodes, inside, "used"))
    top = max(scores.values(), default=0.0)
    tied = [name for name, score in scores.items() if score == top]
    if len(tied) > 1 and tasks:
        placed = [position[t.node_name] for t in tasks if t.status is not TaskStatus.PENDING
                  and t.node_name in position]
        for name in tied:
            members = set(candidates[name].tolist())
            share = sum(1 for p in placed if p in members) / len(tasks)
            scores[name] += MAX_NODE_SCORE * weights.weight * share
    return scores


@dataclass(slots=True)
class HyperNodeChoice:
    """One session's view for network-topology-aware: the tree, each topology job's tier limit and HyperNode at
    open, and the HyperNode each placement chose (written back at close)."""

    tree: HyperNodeTree
    weights: BinpackWeights
    nodes: list[NodeInfo]
    position: dict[str, int]
    limits: dict[str, int | None] = field(default_factory=dict)  # job uid -> highest tier (None: no limit)
    allocated: dict[str, str] = field(default_factory=dict)  # job uid -> its HyperNode when the session opened
    chosen: dict[str, str] = field(default_factory=dict)  # job uid -> the HyperNode its placement chose
    _masks: dict[str, npt.NDArray[np.bool_]] = field(default_factory=dict)

    @staticmethod
    def open(ssn: SessionAPI, hypernodes: Sequence[Mapping[str, Any]], weights: BinpackWeights,
             ) -> HyperNodeChoice | None:
        found = ssn.hypernodes or hypernodes
        jobs = [job for job in ssn.jobs.values() if job.extra.get("networkTopology")]
        if not found or not jobs:
            return None  # label domains (volcano-py's own topology, placed by CP-SAT's objective), or no such job
        nodes = ssn.node_list
        choice = HyperNodeChoice(_tree([n.name for n in nodes], found), weights, nodes,
                                 {n.name: i for i, n in enumerate(nodes)})
        for job in jobs:
            spec = job.extra["networkTopology"]
            if spec:
                with ssn.guard(job):
                    choice.limits[job.key] = highest_tier(choice.tree, spec)
                    choice.allocated[job.key] = allocated_hypernode(choice.tree, job, choice.position)
        return choice

    def takes(self, job: JobInfo) -> bool:
        return self.limits.get(job.key) is not None

    def highest(self, job: JobInfo) -> int:
        return self.limits.get(job.key) or 1

    @staticmethod
    def hard(job: JobInfo) -> bool:
        return str((job.extra.get("networkTopology") or {}).get("mode", "hard")).lower() != "soft"

    def mask(self, name: str) -> npt.NDArray[np.bool_]:
        """The HyperNode's nodes as a mask over the session's node list."""
        if name not in self._masks:
            mask = np.zeros(len(self.nodes), dtype=bool)
            mask[list(self.tree.nodes[name])] = True
            self._masks[name] = mask
        return self._masks[name]

    def current(self, job: JobInfo) -> str:
        """The job's HyperNode now: the one it had when the session opened, widened to hold the pods placed since
        (Volcano's allocate sets JobInfo.AllocatedHyperNode after each commit, recorder.go UpdateDecisionToJob, so
        the job's next turn in the same session searches from it)."""
        held = [self.position[t.node_name] for t in job.tasks.values()
                if t.status in HOLDING and t.node_name in self.position]
        return self.tree.lca(self.allocated.get(job.key, ""), self.tree.lowest_holding(held))

    def choose(self, job: JobInfo, highest: int, attempt: Callable[[str], T | None]) -> tuple[str, T] | None:
        tiers = gradients(self.tree, self.nodes, highest, self.current(job), job.min_resources)
        return choose(self.tree, self.weights, job, self.nodes, self.position, tiers, attempt)

    def close(self, ssn: SessionAPI) -> None:
        """Write each topology job's HyperNode where the PodGroup's annotation differs (rule 4)."""
        for uid, value in self.allocated.items():
            job = ssn.jobs.get(uid)
            if job is None:
                continue
            chosen = self.chosen.get(uid)
            if chosen and ssn.got_binds(uid):
                value = self.tree.lca(value, chosen)
            current = (job.extra.get("annotations") or {}).get(ALLOCATED_HYPERNODE)
            if (value or None) != current:
                ssn.annotate_podgroup(job, {ALLOCATED_HYPERNODE: value or None})


_warned: set[tuple[str, str]] = set()
_trees: dict[tuple[tuple[str, ...], tuple[tuple[str, str], ...]], HyperNodeTree] = {}


def _tree(node_names: list[str], hypernodes: Sequence[Mapping[str, Any]]) -> HyperNodeTree:
    """The tree, built again only when the nodes or a HyperNode changed (matching members against every node is
    the costly part); the last few kept."""
    key = (tuple(node_names), tuple((str((h.get("metadata") or {}).get("name", "")),
                                     str((h.get("metadata") or {}).get("resourceVersion") or repr(h.get("spec"))))
                                    for h in hypernodes))
    tree = _trees.get(key)
    if tree is None:
        if len(_trees) >= 4:
            _trees.clear()
        tree = _trees[key] = HyperNodeTree.build(node_names, hypernodes)
    return tree


def warn_unknown_tier(job: JobInfo, name: str) -> None:
    """One log line per job and name (a bounded memory: cleared past 10,000 entries)."""
    if (job.key, name) in _warned:
        return
    if len(_warned) >= 10_000:
        _warned.clear()
    _warned.add((job.key, name))
    log.warning("job %s: networkTopology.highestTierName %r is no HyperNode's spec.tierName; placed without a "
                "tier limit, as Volcano does", job.key, name)


# ---- pods of jobs without a network topology (batchNodeOrderFnForNormalPods) ----------------------------

NORMAL_POD_ENABLE = "hypernode.binpack.normal-pod.enable"
NORMAL_POD_FADING = "hypernode.binpack.normal-pod.fading"


@dataclass(frozen=True, slots=True)
class NormalPods:
    """Whether pods of jobs without a network topology are scored by the HyperNodes around a node, and how fast a
    tier's say fades with its height (tier t weighs fading^(t-1); 0: tier 1 alone)."""

    enable: bool = True
    fading: float = 0.8


def parse_normal_pods(reader: ArgReader) -> NormalPods:
    fading = reader.number(NORMAL_POD_FADING, 0.8)
    if not fading >= 0:  # a negative (or NaN) fading: Volcano's default
        reader.warn(NORMAL_POD_FADING, f"{fading} is negative; using 0.8, as Volcano does")
        fading = 0.8
    return NormalPods(reader.boolean(NORMAL_POD_ENABLE, True), fading)


@dataclass(slots=True)
class NodeLevel:
    """The node score of a pod of a job without a network topology (network_topology_aware.go
    batchNodeOrderFnForNormalPods): over every tier from the lowest HyperNode tier up to the whole cluster's, the
    pod's binpack score on the node's HyperNode of that tier (0 if the pod would overuse it; 1 where the node has
    none at that tier), weighted fading^(tier-1), their weighted mean x 100 x `weight`. A node under fuller
    HyperNodes scores higher, so such pods fill the domains already in use and leave whole ones free."""

    weights: BinpackWeights
    fading: float
    owners: list[npt.NDArray[np.int64]]  # per tier from the lowest: each node's HyperNode there (-1: none)

    @staticmethod
    def build(tree: HyperNodeTree, count: int, weights: BinpackWeights, fading: float) -> NodeLevel:
        tiers = range(min(tree.tier.values()), tree.top + 1)
        owners = []
        for tier in tiers:
            owner = np.full(count, -1, dtype=np.int64)
            names = sorted(h for h, t in tree.tier.items() if t == tier)
            for index in range(len(names) - 1, -1, -1):  # a node under two: the first by name (Volcano: map order)
                owner[list(tree.nodes[names[index]])] = index
            owners.append(owner)
        return NodeLevel(weights, fading, owners)

    def scores(self, request: Resource, allocatable: Callable[[str], npt.NDArray[np.int64] | None],
               idle: Callable[[str], npt.NDArray[np.int64] | None], indices: npt.NDArray[np.int64],
               ) -> npt.NDArray[np.float64]:
        terms = [(name, request.get(name), w) for name, w in self.weights.resources.items() if request.get(name) > 0]
        total = np.zeros(indices.size)
        weight_sum = 0.0
        for height, owner in enumerate(self.owners):
            tier_weight = self.fading ** height  # tier - 1
            weight_sum += tier_weight
            count = int(owner.max()) + 1
            per_hypernode = self._hypernode_scores(terms, owner, count, allocatable, idle)
            mine = owner[indices]
            total += tier_weight * np.where(mine >= 0, per_hypernode[np.maximum(mine, 0)], 1.0)
        return np.asarray(MAX_NODE_SCORE * self.weights.weight * total / weight_sum, dtype=np.float64)

    @staticmethod
    def _hypernode_scores(terms: list[tuple[str, int, int]], owner: npt.NDArray[np.int64], count: int,
                          allocatable: Callable[[str], npt.NDArray[np.int64] | None],
                          idle: Callable[[str], npt.NDArray[np.int64] | None]) -> npt.NDArray[np.float64]:
        """Volcano's getPodHyperNodeBinPackingScore for each HyperNode of one tier."""
        inside = owner >= 0
        score, weight_sum = np.zeros(max(count, 1)), 0
        overused = np.zeros(max(count, 1), dtype=bool)
        for name, wanted, weight in terms:
            room_row, idle_row = allocatable(name), idle(name)
            if room_row is None or idle_row is None:
                overused[:] = True  # no node has it: every HyperNode would be overused
                continue
            room = np.bincount(owner[inside], weights=room_row[inside].astype(np.float64), minlength=count)
            taken = room - np.bincount(owner[inside], weights=idle_row[inside].astype(np.float64), minlength=count)
            after = taken + wanted
            overused |= after > room
            score += weight * after / np.where(room > 0, room, 1.0)
            weight_sum += weight
        if weight_sum <= 0:
            return np.zeros(max(count, 1))
        return np.where(overused, 0.0, score / weight_sum)
