"""Layer `plugins`: `binpack` — score nodes so tasks fill partly used nodes before empty ones.

For every resource the task requests that has a weight, a node scores
`(used + request) / allocatable x weight` (0 if the node lacks the resource or the request would overflow it);
the weighted mean is mapped to 0..100 and multiplied by `binpack.weight`, as in Volcano (MaxNodeScore 100).

Arguments (Volcano's): `binpack.weight` (1; 0 turns the scorer off), `binpack.cpu` (1), `binpack.memory` (1),
`binpack.resources` (a comma list of extended resources) with `binpack.resources.<name>` weights (1 each).
A negative `binpack.weight` is taken as it is, with a conf warning; a negative resource weight is taken as 1,
as in Volcano.

Unlike Volcano, `nvidia.com/gpu` is packed by default with weight 1, listed or not: stranded GPUs are the
main cost of fragmentation in a GPU cluster. `binpack.resources.nvidia.com/gpu: 0` turns that off.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np

from scheduler.api.job import TaskInfo
from scheduler.api.node import NodeInfo
from scheduler.api.resources import CPU, GPU, MEMORY, PODS
from scheduler.framework.arrays import IntArray, NodeArrays
from scheduler.framework.conf_args import ArgReader
from scheduler.framework.plugin import Plugin, SessionAPI

MAX_NODE_SCORE = 100
FEW = 8
Num = float | np.ndarray  # one node's numbers, or arrays over many nodes
WEIGHT = "binpack.weight"
RESOURCES = "binpack.resources"


@dataclass(frozen=True, slots=True)
class BinpackArgs:
    weight: int = 1
    resource_weights: Mapping[str, int] = field(
        default_factory=lambda: MappingProxyType({CPU: 1, MEMORY: 1, GPU: 1}))


def _resource_weight(reader: ArgReader, key: str) -> int:
    """Per resource weight; a negative weight falls back to 1, as in Volcano."""
    value = reader.integer(key, 1)
    if value >= 0:
        return value
    reader.warn(key, f"weight {value} is negative; using 1, as Volcano does")
    return 1


class BinpackPlugin(Plugin[BinpackArgs]):
    name = "binpack"

    @classmethod
    def parse_args(cls, reader: ArgReader) -> BinpackArgs:
        weight = reader.weight(WEIGHT, 1)
        weights = {
            CPU: _resource_weight(reader, "binpack.cpu"),
            MEMORY: _resource_weight(reader, "binpack.memory"),
            GPU: _resource_weight(reader, f"{RESOURCES}.{GPU}"),
        }
        for name in reader.string(RESOURCES, "").split(","):
            name = name.strip()
            if name and name not in (CPU, MEMORY):
                weights[name] = _resource_weight(reader, f"{RESOURCES}.{name}")
        return BinpackArgs(weight, MappingProxyType(weights))

    def on_session_open(self, ssn: SessionAPI) -> None:
        self.ssn = ssn
        self.weight = self.args.weight
        self.resource_weights = self.args.resource_weights

    def inactive_points(self) -> frozenset[str]:
        return frozenset() if self.weight != 0 else frozenset({"batch_node_order"})

    def _terms(self, task: TaskInfo) -> tuple[list[tuple[str, int, int]], int]:
        """(resource, request, weight) for each requested resource with a non-zero weight, and the sum of the
        weights of every requested resource binpack weighs (the score's denominator)."""
        terms, weight_sum = [], 0
        for name, request in task.resreq.items():
            weight = self.resource_weights.get(name)
            if not request or name == PODS or weight is None:
                continue
            weight_sum += weight
            if weight:
                terms.append((name, request, weight))
        return terms, weight_sum

    def batch_node_order_one(self, task: TaskInfo, node: NodeInfo) -> float:
        """The score for one node, in plain Python (the session rescoring the node a task just went to)."""
        terms, weight_sum = self._terms(task)
        total: Num = 0.0
        for name, request, weight in terms:
            total += share(request, weight, node.allocatable.get(name), node.used.get(name))
        return float(self._scaled(total, weight_sum))

    def batch_node_order(self, task: TaskInfo, arrays: NodeArrays, indices: IntArray) -> np.ndarray:
        """`batch_node_order_one` for every candidate at once, by the same formula (the form the session calls on
        the hot path)."""
        if indices.size <= FEW:  # numpy's per-call cost beats its speed below a handful of nodes
            return np.array([self.batch_node_order_one(task, self.ssn.node_list[i]) for i in indices])
        terms, weight_sum = self._terms(task)
        total = np.zeros(indices.size)
        for name, request, weight in terms:
            row = arrays.row.get(name)
            if row is not None:
                capacity = arrays.allocatable[row, indices]
                total = total + share(request, weight, capacity, capacity - arrays.idle[row, indices])
        return np.asarray(self._scaled(total, weight_sum))

    def batch_node_order_static(self, task: TaskInfo, node: NodeInfo) -> int:
        """The score reads the node's allocatable and used alone (`points.BatchScorer.static`)."""
        return 0

    def _scaled(self, total: Num, weight_sum: int) -> Num:
        mean = total / weight_sum if weight_sum else total
        return mean * (MAX_NODE_SCORE * self.weight)


def share(request: int, weight: int, capacity: Num, used: Num) -> Num:
    """One resource's part of the score, for one node (ints) or many (arrays): (used + request) / capacity x
    weight where the request fits the node, else 0. Operators only, so both forms are this one formula."""
    after = used + request
    fits = (capacity > 0) & (after <= capacity)
    return fits * (after * weight / (capacity + (capacity <= 0)))
