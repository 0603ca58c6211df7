"""network-topology-aware's HyperNode scores count pipelined tasks as used: Volcano's plugin keeps each
HyperNode's use in a cache its event handler updates on every allocate and every pipeline (the Statement's
Pipeline fires AllocateFunc; plugins/network-topology-aware/network_topology_aware.go, framework/statement.go)."""

from __future__ import annotations

import numpy as np

from scheduler.api.job import JobInfo, TaskInfo
from scheduler.api.node import NodeInfo
from scheduler.api.phases import TaskStatus
from scheduler.api.resources import Resource
from scheduler.plugins import hypernode_score as hn

GI = 1 << 30


def rack(name: str, node: str) -> dict[str, object]:
    return {"metadata": {"name": name},
            "spec": {"tier": 1, "members": [{"type": "Node", "selector": {"exactMatch": {"name": node}}}]}}


def setting() -> tuple[list[NodeInfo], JobInfo]:
    """Two racks of one 8-cpu node; a 4-cpu task of another job is pipelined onto b (waiting for room there)."""
    nodes = [NodeInfo("a", Resource.of(8000, 8 * GI)), NodeInfo("b", Resource.of(8000, 8 * GI))]
    nodes[1].add_task(TaskInfo("default/w", "w", "default", "default/other", Resource.of(4000, GI),
                                status=TaskStatus.PIPELINED, node_name="b"))
    job = JobInfo("default/j", "j", "default", "default")
    job.add_task(TaskInfo("default/j-0", "j-0", "default", "default/j", Resource.of(1000, GI)))
    return nodes, job


def test_the_job_level_score_counts_a_pipelined_task_as_used() -> None:
    nodes, job = setting()
    tree = hn.HyperNodeTree.build(["a", "b"], [rack("rack-a", "a"), rack("rack-b", "b")])
    order = hn.ranked(tree, hn.BinpackWeights(), job, nodes, {"a": 0, "b": 1}, ["rack-a", "rack-b"])
    assert [name for name, _ in order] == ["rack-b", "rack-a"]  # (4+1)/8 cpu against (0+1)/8
    assert order[0][1] > order[1][1]


def test_the_sub_group_score_counts_a_pipelined_task_as_used() -> None:
    nodes, job = setting()
    scores = hn.sub_group_scores(hn.BinpackWeights(), list(job.tasks.values()), nodes, {"a": 0, "b": 1},
                               {"rack-a": np.array([0]), "rack-b": np.array([1])})
    assert scores["rack-b"] > scores["rack-a"] > 0
