"""Layer `plugins`: `nodeorder` — kube-scheduler's node scores, weighted and summed, as Volcano's nodeorder.

Each score is 0..100 (MaxNodeScore) times its weight argument (Volcano's defaults in brackets):
- `leastrequested.weight` (1): the mean over cpu and memory of free-after-placing / allocatable.
- `mostrequested.weight` (0): the mean over cpu and memory of requested-after-placing / allocatable.
- `balancedresource.weight` (1): 100 x (1 - the standard deviation of the requested/allocatable fractions of
  cpu and memory), so a node whose resources fill evenly wins. GPUs are left out, as kube-scheduler's
  defaults do: balancing GPUs against cpu would spread 1-GPU pods over empty nodes and work against binpack,
  which packs GPUs by default.
- `nodeaffinity.weight` (2): the sum of the weights of the task's preferred node-affinity terms the node
  matches (not normalised, as in Volcano).
- `tainttoleration.weight` (3): fewer PreferNoSchedule taints the task does not tolerate scores higher:
  100 - 100 x count / the largest count among the nodes the task's predicates allow (Volcano normalises over
  the nodes it scores; here over the predicate-feasible nodes, computed once per constraint set).
Inter-pod affinity, image locality and topology spread are not scored yet.
"""

from __future__ import annotations

import math

import numpy as np

from scheduler.api.job import TaskInfo
from scheduler.api.node import NodeInfo
from scheduler.api.pod import Constraints, Taint
from scheduler.api.resources import CPU, MEMORY, Resource
from scheduler.framework import points as P
from scheduler.framework.arrays import IntArray, NodeArrays
from scheduler.framework.conf import arg_int
from scheduler.framework.plugin import Plugin
from scheduler.framework.session import Session

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


def _cpu_memory(request: Resource, node: NodeInfo) -> tuple[int, int, int, int]:
    """(cpu allocatable, cpu requested after placing, memory allocatable, memory requested after placing)."""
    allocatable, used = node.allocatable, node.used
    return allocatable.cpu, used.cpu + request.cpu, allocatable.memory, used.memory + request.memory


def _least(capacity: int, requested: int) -> int:
    return (capacity - requested) * MAX_NODE_SCORE // capacity if 0 < capacity >= requested else 0


def least_requested(request: Resource, node: NodeInfo) -> int:
    cpu, cpu_req, memory, memory_req = _cpu_memory(request, node)
    return (_least(cpu, cpu_req) + _least(memory, memory_req)) // 2


def most_requested(request: Resource, node: NodeInfo) -> int:
    scores = []
    for name in (CPU, MEMORY):
        capacity = node.allocatable.get(name)
        requested = min(node.used.get(name) + request.get(name), capacity)
        scores.append(requested * MAX_NODE_SCORE // capacity if capacity > 0 else 0)
    return sum(scores) // len(scores)


def balanced_allocation(request: Resource, node: NodeInfo) -> int:
    cpu, cpu_req, memory, memory_req = _cpu_memory(request, node)
    if cpu <= 0 or memory <= 0:
        return MAX_NODE_SCORE  # fewer than two resources to balance
    a, b = min(cpu_req / cpu, 1.0), min(memory_req / memory, 1.0)
    mean = (a + b) / 2
    deviation = math.sqrt(((a - mean) ** 2 + (b - mean) ** 2) / 2)
    return int((1 - deviation) * MAX_NODE_SCORE)


def preferred_affinity(constraints: Constraints, node: NodeInfo) -> int:
    return sum(weight for weight, term in constraints.preferred if term.matches(node.labels, node.name))


def intolerable_preferences(constraints: Constraints, taints: tuple[Taint, ...]) -> int:
    tolerations = [t for t in constraints.tolerations if t.effect in ("", PREFER_NO_SCHEDULE)]
    return sum(
        1
        for taint in taints
        if taint.effect == PREFER_NO_SCHEDULE and not any(t.tolerates(taint) for t in tolerations)
    )


class NodeOrderPlugin(Plugin):
    name = "nodeorder"

    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        weights = {key: arg_int(self.option, key, default) for key, default in WEIGHT_DEFAULTS.items()}
        self.least = weights["leastrequested.weight"]
        self.most = weights["mostrequested.weight"]
        self.balanced = weights["balancedresource.weight"]
        self.affinity = weights["nodeaffinity.weight"]
        self.taint = weights["tainttoleration.weight"]
        self._most_intolerable: dict[Constraints, int] = {}
        self._static: dict[Constraints, np.ndarray] = {}
        if any(weights.values()):
            ssn.register(P.BATCH_NODE_ORDER, P.BatchScorer(self.scores, self.score))

    def score(self, task: TaskInfo, node: NodeInfo) -> float:
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
            total += self.taint * self.taint_toleration(task, node)
        return float(total)

    def taint_toleration(self, task: TaskInfo, node: NodeInfo) -> int:
        worst = self._most_intolerable.get(task.constraints)
        if worst is None:
            worst = max(
                (intolerable_preferences(task.constraints, n.taints) for n in self.ssn.feasible_nodes(task)),
                default=0,
            )
            self._most_intolerable[task.constraints] = worst
        if worst == 0:
            return MAX_NODE_SCORE
        count = intolerable_preferences(task.constraints, node.taints)
        return MAX_NODE_SCORE - count * MAX_NODE_SCORE // worst

    # ---- the vectorised form the session calls on the hot path ----------------------------------------
    def scores(self, task: TaskInfo, arrays: NodeArrays, indices: IntArray) -> np.ndarray:
        if indices.size <= FEW:  # numpy's per-call cost beats its speed below a handful of nodes
            return np.array([self.score(task, self.ssn.node_list[i]) for i in indices], dtype=float)
        request = task.resreq
        total = np.zeros(indices.size)
        if self.least or self.most or self.balanced:
            fractions = []
            least = np.zeros(indices.size, dtype=np.int64)
            most = np.zeros(indices.size, dtype=np.int64)
            for name in (CPU, MEMORY):
                row = arrays.row[name]
                capacity = arrays.allocatable[row, indices]
                requested = capacity - arrays.idle[row, indices] + request.get(name)
                safe = np.maximum(capacity, 1)
                least += np.where((capacity > 0) & (capacity >= requested),
                                  (capacity - requested) * MAX_NODE_SCORE // safe, 0)
                most += np.where(capacity > 0, np.minimum(requested, capacity) * MAX_NODE_SCORE // safe, 0)
                fractions.append(np.where(capacity > 0, np.minimum(requested / safe, 1.0), np.nan))
            total += self.least * (least // 2) + self.most * (most // 2)
            if self.balanced:
                stacked = np.vstack(fractions)
                valid = ~np.isnan(stacked)
                count = valid.sum(axis=0)
                mean = np.nansum(stacked, axis=0) / np.maximum(count, 1)
                deviation = np.sqrt(np.nansum((stacked - mean) ** 2, axis=0) / np.maximum(count, 1))
                balanced = np.where(count < 2, MAX_NODE_SCORE, ((1 - deviation) * MAX_NODE_SCORE).astype(int))
                total += self.balanced * balanced
        if (self.affinity and task.constraints.preferred) or self.taint:
            total += self._static_scores(task)[indices]
        return total

    def _static_scores(self, task: TaskInfo) -> np.ndarray:
        """Preferred affinity and PreferNoSchedule scores depend only on the constraints: once per cycle."""
        cached = self._static.get(task.constraints)
        if cached is None:
            nodes = self.ssn.node_list
            cached = np.zeros(len(nodes))
            for i, node in enumerate(nodes):
                if self.affinity and task.constraints.preferred:
                    cached[i] += self.affinity * preferred_affinity(task.constraints, node)
                if self.taint:
                    cached[i] += self.taint * self.taint_toleration(task, node)
            self._static[task.constraints] = cached
        return cached
