"""Layer `plugins`: `nodeorder` — kube-scheduler's node scores, weighted and summed, as Volcano's nodeorder.

Each score is 0..100 (MaxNodeScore) times its weight argument (Volcano's defaults in brackets):
- `leastrequested.weight` (1): the mean over cpu and memory of free-after-placing / allocatable, a task or pod
  that requests no cpu (memory) counted at 100m (200 MiB), as kube-scheduler counts it.
- `mostrequested.weight` (0): the mean over cpu and memory of requested-after-placing / allocatable, likewise.
- `balancedresource.weight` (1): kube-scheduler 1.36's BalancedAllocation as Volcano configures it (cpu, memory
  and nvidia.com/gpu): 50 + (50 + balance after placing - balance before) / 2, where balance is 100 x (1 - the
  standard deviation of the used/allocatable fractions); 0 for a task that requests none of them.
- `nodeaffinity.weight` (2): the sum of the weights of the task's preferred node-affinity terms the node
  matches (not normalised, as in Volcano).
- `tainttoleration.weight` (3): fewer PreferNoSchedule taints the task does not tolerate scores higher:
  100 - 100 x count / the largest count among the nodes the task's predicates allow (Volcano normalises over
  the nodes it scores; here over the predicate-feasible nodes, computed once per constraint set).
Inter-pod affinity, image locality and topology spread are not scored yet. A weight is an integer, 0 or more.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from scheduler.api.job import TaskInfo
from scheduler.api.node import NodeInfo
from scheduler.api.pod import Constraints, Taint
from scheduler.api.resources import CPU, GPU, MEMORY, Resource
from scheduler.framework.arrays import IntArray, NodeArrays
from scheduler.framework.conf_args import ArgReader
from scheduler.framework.plugin import Plugin, SessionAPI

MAX_NODE_SCORE = 100
FEW = 8
PREFER_NO_SCHEDULE = "PreferNoSchedule"
WEIGHT_DEFAULTS = {
    "leastrequested.weight": 1,
    "mostrequested.weight": 0,
    "balancedresource.weight": 1,
    "nodeaffinity.weight": 2,
    "tainttoleration.weight": 3,
}


# kube-scheduler counts a pod that requests no cpu or no memory at these requests when it scores
# (`schedutil.DefaultMilliCPURequest`, `DefaultMemoryRequest`; noderesources' `NonZeroRequested`).
DEFAULT_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024
# Volcano's nodeorder balances cpu, memory and nvidia.com/gpu (pkg/scheduler/plugins/nodeorder/nodeorder.go).
BALANCED = (CPU, MEMORY, GPU)


def _nonzero(request: Resource) -> tuple[int, int]:
    return request.cpu or DEFAULT_CPU_REQUEST, request.memory or DEFAULT_MEMORY_REQUEST


def _nonzero_used(node: NodeInfo) -> tuple[int, int]:
    return (node.used.cpu + node.no_cpu_request * DEFAULT_CPU_REQUEST,
            node.used.memory + node.no_memory_request * DEFAULT_MEMORY_REQUEST)


def _cpu_memory(request: Resource, node: NodeInfo) -> tuple[int, int, int, int]:
    """(cpu allocatable, cpu requested after placing, memory allocatable, memory requested after placing),
    requests counted as kube-scheduler's least- and most-allocated scores count them."""
    cpu, memory = _nonzero(request)
    used_cpu, used_memory = _nonzero_used(node)
    return node.allocatable.cpu, used_cpu + cpu, node.allocatable.memory, used_memory + memory


def _least(capacity: int, requested: int) -> int:
    return (capacity - requested) * MAX_NODE_SCORE // capacity if 0 < capacity >= requested else 0


def least_requested(request: Resource, node: NodeInfo) -> int:
    cpu, cpu_req, memory, memory_req = _cpu_memory(request, node)
    return (_least(cpu, cpu_req) + _least(memory, memory_req)) // 2


def most_requested(request: Resource, node: NodeInfo) -> int:
    cpu, cpu_req, memory, memory_req = _cpu_memory(request, node)
    scores = [min(req, cap) * MAX_NODE_SCORE // cap if cap > 0 else 0
              for cap, req in ((cpu, cpu_req), (memory, memory_req))]
    return sum(scores) // len(scores)


def _balance(fractions: list[float]) -> int:
    """100 x (1 - the standard deviation of the fractions), as kube-scheduler's `balancedResourceScore`."""
    if len(fractions) < 2:
        return MAX_NODE_SCORE
    mean = sum(fractions) / len(fractions)
    deviation = math.sqrt(sum((f - mean) ** 2 for f in fractions) / len(fractions))
    return int((1 - deviation) * MAX_NODE_SCORE)


def balanced_allocation(request: Resource, node: NodeInfo) -> int:
    """kube-scheduler 1.36's BalancedAllocation (`balancedResourceScorer`), which Volcano's nodeorder calls:
    the change in balance that placing the task makes, mapped to 50..100 (75 when it changes nothing). The
    fractions are of actual requests (no defaults) over cpu, memory and GPUs, GPUs only for a task that asks for
    them; a task that requests none of the three scores 0."""
    if not any(request.get(name) for name in BALANCED):
        return 0
    before, after = [], []
    for name in BALANCED:
        capacity = node.allocatable.get(name)
        if capacity <= 0 or (name == GPU and not request.get(name)):
            continue
        used = node.used.get(name)
        before.append(min(used / capacity, 1.0))
        after.append(min((used + request.get(name)) / capacity, 1.0))
    half = MAX_NODE_SCORE // 2
    return half + (half + _balance(after) - _balance(before)) // 2


def preferred_affinity(constraints: Constraints, node: NodeInfo) -> int:
    return sum(weight for weight, term in constraints.preferred if term.matches(node.labels, node.name))


def intolerable_preferences(constraints: Constraints, taints: tuple[Taint, ...]) -> int:
    tolerations = [t for t in constraints.tolerations if t.effect in ("", PREFER_NO_SCHEDULE)]
    return sum(
        1
        for taint in taints
        if taint.effect == PREFER_NO_SCHEDULE and not any(t.tolerates(taint) for t in tolerations)
    )


def _balances(fractions: np.ndarray) -> np.ndarray:
    """`_balance` per column; NaN marks a resource the node lacks."""
    valid = ~np.isnan(fractions)
    count = valid.sum(axis=0)
    mean = np.nansum(fractions, axis=0) / np.maximum(count, 1)
    deviation = np.sqrt(np.nansum((fractions - mean) ** 2, axis=0) / np.maximum(count, 1))
    return np.where(count < 2, MAX_NODE_SCORE, ((1 - deviation) * MAX_NODE_SCORE).astype(np.int64))


@dataclass(frozen=True, slots=True)
class NodeOrderArgs:
    least: int = WEIGHT_DEFAULTS["leastrequested.weight"]
    most: int = WEIGHT_DEFAULTS["mostrequested.weight"]
    balanced: int = WEIGHT_DEFAULTS["balancedresource.weight"]
    affinity: int = WEIGHT_DEFAULTS["nodeaffinity.weight"]
    taint: int = WEIGHT_DEFAULTS["tainttoleration.weight"]


class NodeOrderPlugin(Plugin[NodeOrderArgs]):
    name = "nodeorder"

    @classmethod
    def parse_args(cls, reader: ArgReader) -> NodeOrderArgs:
        weights = {key: reader.weight(key, default) for key, default in WEIGHT_DEFAULTS.items()}
        return NodeOrderArgs(
            least=weights["leastrequested.weight"],
            most=weights["mostrequested.weight"],
            balanced=weights["balancedresource.weight"],
            affinity=weights["nodeaffinity.weight"],
            taint=weights["tainttoleration.weight"],
        )

    def on_session_open(self, ssn: SessionAPI) -> None:
        self.ssn = ssn
        args = self.args
        self.least, self.most, self.balanced = args.least, args.most, args.balanced
        self.affinity, self.taint = args.affinity, args.taint
        # per constraint set, fixed while the nodes' statics and the conf are (the dynamic predicates aside, which
        # `_taint_toleration`'s feasible nodes depend on): kept from cycle to cycle (`kept_for_nodes`), at 5,000
        # nodes ~5 ms a warm cycle (bench/bench_cycle.py --warm)
        kept = ssn.kept_for_nodes(f"{self.name}:{self.affinity}:{self.taint}")
        self._most_intolerable: dict[Constraints, int] = kept.setdefault("worst", {})
        self._static: dict[Constraints, np.ndarray] = kept.setdefault("static", {})
        self._most_intolerable_now: dict[Constraints, int] = {}  # (those of constraints with dynamic terms)
        self._static_now: dict[Constraints, np.ndarray] = {}

    def inactive_points(self) -> frozenset[str]:
        weighed = any((self.least, self.most, self.balanced, self.affinity, self.taint))
        return frozenset() if weighed else frozenset({"batch_node_order"})

    def batch_node_order_one(self, task: TaskInfo, node: NodeInfo) -> float:
        request = task.resreq
        total = 0
        if self.least:
            total += self.least * least_requested(request, node)
        if self.most:
            total += self.most * most_requested(request, node)
        if self.balanced:
            total += self.balanced * balanced_allocation(request, node)
        if self.affinity and task.constraints.preferred:
            total += self.affinity * preferred_affinity(task.constraints, node)
        if self.taint:
            total += self.taint * self._taint_toleration(task, node)
        return float(total)

    def batch_node_order_static(self, task: TaskInfo, node: NodeInfo) -> float:
        """What `score` adds besides its resource terms (preferred affinity, PreferNoSchedule taints): fixed for
        the session per constraint set and node, so `score` depends on the node only through its accounting and
        this (`points.BatchScorer.static`)."""
        if (self.affinity and task.constraints.preferred) or self.taint:
            return float(self._static_scores(task)[self.ssn.arrays.position[node.name]])
        return 0.0

    def _taint_toleration(self, task: TaskInfo, node: NodeInfo) -> int:
        known = self._most_intolerable_now if task.constraints.dynamic else self._most_intolerable
        worst = known.get(task.constraints)
        if worst is None:
            worst = max(
                (intolerable_preferences(task.constraints, n.taints) for n in self.ssn.feasible_nodes(task)),
                default=0,
            )
            known[task.constraints] = worst
        if worst == 0:
            return MAX_NODE_SCORE
        count = intolerable_preferences(task.constraints, node.taints)
        return MAX_NODE_SCORE - count * MAX_NODE_SCORE // worst

    # ---- the vectorised form the session calls on the hot path ----------------------------------------
    def batch_node_order(self, task: TaskInfo, arrays: NodeArrays, indices: IntArray) -> np.ndarray:
        if indices.size <= FEW:  # numpy's per-call cost beats its speed below a handful of nodes
            return np.array([self.batch_node_order_one(task, self.ssn.node_list[i]) for i in indices], dtype=float)
        request = task.resreq
        total = np.zeros(indices.size)
        if self.least or self.most:
            least = np.zeros(indices.size, dtype=np.int64)
            most = np.zeros(indices.size, dtype=np.int64)
            for k, (name, need) in enumerate(zip((CPU, MEMORY), _nonzero(request), strict=True)):
                row = arrays.row[name]
                capacity = arrays.allocatable[row, indices]
                default = DEFAULT_CPU_REQUEST if k == 0 else DEFAULT_MEMORY_REQUEST
                requested = (capacity - arrays.idle[row, indices] + arrays.unrequested[k, indices] * default
                             + need)
                safe = np.maximum(capacity, 1)
                least += np.where((capacity > 0) & (capacity >= requested),
                                  (capacity - requested) * MAX_NODE_SCORE // safe, 0)
                most += np.where(capacity > 0, np.minimum(requested, capacity) * MAX_NODE_SCORE // safe, 0)
            total += self.least * (least // 2) + self.most * (most // 2)
        if self.balanced:
            total += self.balanced * self._balanced_scores(request, arrays, indices)
        if (self.affinity and task.constraints.preferred) or self.taint:
            total += self._static_scores(task)[indices]
        return total

    @staticmethod
    def _balanced_scores(request: Resource, arrays: NodeArrays, indices: IntArray) -> np.ndarray:
        """`balanced_allocation` over many nodes at once."""
        if not any(request.get(name) for name in BALANCED):
            return np.zeros(indices.size)
        before, after = [], []
        for name in BALANCED:
            row = arrays.row.get(name)
            if row is None or (name == GPU and not request.get(name)):
                continue
            capacity = arrays.allocatable[row, indices]
            used = capacity - arrays.idle[row, indices]
            safe = np.maximum(capacity, 1)
            before.append(np.where(capacity > 0, np.minimum(used / safe, 1.0), np.nan))
            after.append(np.where(capacity > 0, np.minimum((used + request.get(name)) / safe, 1.0), np.nan))
        half = MAX_NODE_SCORE // 2
        scores: np.ndarray = half + (half + _balances(np.vstack(after)) - _balances(np.vstack(before))) // 2
        return scores

    def _static_scores(self, task: TaskInfo) -> np.ndarray:
        """Preferred affinity and PreferNoSchedule scores depend only on the constraints: once per cycle."""
        known = self._static_now if task.constraints.dynamic else self._static
        cached = known.get(task.constraints)
        if cached is None:
            nodes = self.ssn.node_list
            cached = np.zeros(len(nodes))
            for i, node in enumerate(nodes):
                if self.affinity and task.constraints.preferred:
                    cached[i] += self.affinity * preferred_affinity(task.constraints, node)
                if self.taint:
                    cached[i] += self.taint * self._taint_toleration(task, node)
            known[task.constraints] = cached
        return cached
