"""The session's node arrays, filled as whole rows, hold for every node what `NodeArrays.vector` makes of its idle
and allocatable (a resource no node offers, held by a pod, is left out as `vector` leaves it out)."""

from __future__ import annotations

import random

from scheduler.api.node import NodeInfo
from scheduler.api.resources import Resource
from scheduler.framework.arrays import NodeArrays


def test_rows_hold_each_nodes_vectors() -> None:
    rng = random.Random(1)
    nodes = []
    for i in range(200):
        quantities = {"cpu": str(rng.randint(1, 64)), "memory": f"{rng.randint(1, 512)}Gi"}
        if rng.random() < 0.5:
            quantities["nvidia.com/gpu"] = str(rng.randint(0, 8))
        if rng.random() < 0.2:
            quantities["example.com/fpga"] = str(rng.randint(1, 2))
        node = NodeInfo(f"n{i}", Resource.from_quantities(quantities))
        node.idle = node.allocatable - Resource.from_quantities({"cpu": "1", "other.io/none-offers-it": "1"})
        node.no_cpu_request, node.no_memory_request = rng.randint(0, 3), rng.randint(0, 3)
        nodes.append(node)
    arrays = NodeArrays(nodes)
    assert set(arrays.dims) == {"cpu", "memory", "pods", "nvidia.com/gpu", "example.com/fpga"}
    for i, node in enumerate(nodes):
        assert arrays.idle[:, i].tolist() == arrays.vector(node.idle, strict=False).tolist()
        assert arrays.allocatable[:, i].tolist() == arrays.vector(node.allocatable, strict=False).tolist()
        assert arrays.unrequested[:, i].tolist() == [node.no_cpu_request, node.no_memory_request]
    assert NodeArrays([]).idle.shape == (3, 0)
