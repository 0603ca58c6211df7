"""Layer `framework`: node resources as arrays, so "which nodes hold this request" is one numpy expression.

The session keeps one column per node (in `node_list` order) and one row per resource dimension, and updates
a node's column whenever a Statement places or removes a task there. Predicates that depend only on a task's
constraints are cached per constraint set as index arrays; resource fit is then a vectorised comparison over
those indices instead of a Python call per node.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from scheduler.api.node import NodeInfo
from scheduler.api.resources import CPU, MEMORY, PODS, Resource
from scheduler.framework.carry import moved

IntArray = npt.NDArray[np.int64]


class NodeArrays:
    def __init__(self, nodes: Sequence[NodeInfo]) -> None:
        names = [CPU, MEMORY, PODS]
        seen = set(names)
        for node in nodes:
            for name, _ in node.allocatable.scalars:
                if name not in seen:
                    seen.add(name)
                    names.append(name)
        self.dims = tuple(names)
        self.row = {name: i for i, name in enumerate(self.dims)}
        self.position = {node.name: i for i, node in enumerate(nodes)}
        self.idle: IntArray = np.zeros((len(self.dims), len(nodes)), dtype=np.int64)
        # Bumped whenever a node's idle changes, so cached per-node results know which entries went stale.
        self.version: IntArray = np.zeros(len(nodes), dtype=np.int64)
        self.changes: list[int] = []  # positions of nodes whose idle changed, in order: caches catch up from it
        self.allocatable: IntArray = np.zeros_like(self.idle)
        # Per node, how many of its tasks request no cpu (row 0) and no memory (row 1): scores count them at
        # kube-scheduler's default request.
        self.unrequested: IntArray = np.zeros((2, len(nodes)), dtype=np.int64)
        if nodes:  # filled as whole rows (one array each), the same values as `vector` column by column
            self.idle[:] = self._rows([node.idle for node in nodes])
            self.allocatable[:] = self._rows([node.allocatable for node in nodes])
            self.unrequested[:] = [[n.no_cpu_request for n in nodes], [n.no_memory_request for n in nodes]]

    @classmethod
    def carried(cls, nodes: Sequence[NodeInfo], store: dict[Any, Any]) -> NodeArrays:
        """`NodeArrays(nodes)`, the columns of the nodes the last session opened with too (the very NodeInfos,
        untouched since: their resources are the same) taken from its arrays as they were at open, kept in
        `store` (`carry.py`); the others' made again. Made afresh when the nodes are not the same names in the
        same order, or a node changed the extended resources it has (the rows would differ)."""
        last = store.get("last")
        arrays = cls._from_last(nodes, last) if last is not None else None
        if arrays is None:
            arrays = cls(nodes)
        store["last"] = (list(nodes), arrays.dims, arrays.row, arrays.position, arrays.idle.copy(),
                         arrays.allocatable.copy(), arrays.unrequested.copy())
        return arrays

    @classmethod
    def _from_last(cls, nodes: Sequence[NodeInfo], last: tuple[Any, ...]) -> NodeArrays | None:
        old_nodes, dims, row, position, idle, allocatable, unrequested = last
        if len(old_nodes) != len(nodes):
            return None
        changed = moved(old_nodes, nodes)
        assert changed is not None  # (the same length)
        touched = [i for i, node in enumerate(nodes) if node.touched]  # (none at a session's open, as a rule: the
        if touched:  # snapshot makes a node a session touched again)
            changed = sorted(set(changed).union(touched))
        for i in changed:
            old, node = old_nodes[i], nodes[i]
            if old.name != node.name or [n for n, _ in old.allocatable.scalars] != [
                    n for n, _ in node.allocatable.scalars]:
                return None
        arrays = cls.__new__(cls)
        arrays.dims, arrays.row, arrays.position = dims, row, position
        arrays.idle, arrays.allocatable, arrays.unrequested = idle.copy(), allocatable.copy(), unrequested.copy()
        arrays.version = np.zeros(len(nodes), dtype=np.int64)
        arrays.changes = []
        if changed:
            some = [nodes[i] for i in changed]
            arrays.idle[:, changed] = arrays._rows([node.idle for node in some])
            arrays.allocatable[:, changed] = arrays._rows([node.allocatable for node in some])
            arrays.unrequested[:, changed] = [[n.no_cpu_request for n in some], [n.no_memory_request for n in some]]
        return arrays

    def _rows(self, resources: Sequence[Resource]) -> IntArray:
        rows = [[r.cpu for r in resources], [r.memory for r in resources], [r.pods for r in resources]]
        rows.extend([0] * len(resources) for _ in self.dims[3:])
        row = self.row
        for i, resource in enumerate(resources):
            for name, value in resource.scalars:
                at = row.get(name)  # (a dimension no node has, e.g. held by another scheduler's pod: left out)
                if at is not None:
                    rows[at][i] = value
        return np.array(rows, dtype=np.int64).reshape(len(self.dims), len(resources))

    def vector(self, resource: Resource, *, strict: bool = True) -> IntArray:
        """The resource as a column; with strict, None-like failure for a dimension no node has."""
        out = np.zeros(len(self.dims), dtype=np.int64)
        out[0], out[1], out[2] = resource.cpu, resource.memory, resource.pods
        for name, value in resource.scalars:
            row = self.row.get(name)
            if row is None:
                if strict and value > 0:
                    raise KeyError(name)
                continue
            out[row] = value
        return out

    def resource(self, vector: IntArray) -> Resource:
        """The inverse of `vector`."""
        scalars = {name: int(vector[i]) for i, name in enumerate(self.dims[3:], start=3) if vector[i]}
        return Resource.of(int(vector[0]), int(vector[1]), int(vector[2]), scalars)

    def free_on(self, positions: IntArray) -> Resource:
        """Idle resources summed over the nodes at `positions` (over-committed nodes count as zero)."""
        return self.resource(self.idle[:, positions].clip(min=0).sum(axis=1))

    def update(self, node: NodeInfo) -> None:
        i = self.position.get(node.name)
        if i is not None:
            self.idle[:, i] = self.vector(node.idle, strict=False)
            self.unrequested[:, i] = node.no_cpu_request, node.no_memory_request
            self.version[i] += 1
            self.changes.append(i)

    def fitting(self, request: Resource, candidates: IntArray) -> IntArray:
        """The candidate node indices whose idle resources hold `request`."""
        mask = self.fit_mask(request, candidates)
        return candidates if mask is None else candidates[mask]

    def fit_mask(self, request: Resource, candidates: IntArray) -> npt.NDArray[np.bool_] | None:
        """Per candidate, whether its idle resources hold `request` (None: all of them do)."""
        if candidates.size == 0:
            return None
        try:
            need = self.vector(request)
        except KeyError:
            return np.zeros(candidates.size, dtype=bool)
        everyone = candidates.size == self.idle.shape[1]  # no predicate excluded a node: skip the gather
        mask = None
        for dim in np.flatnonzero(need):
            row = self.idle[dim] if everyone else self.idle[dim, candidates]
            fits = row >= need[dim]
            mask = fits if mask is None else mask & fits
        return mask
