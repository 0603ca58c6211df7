"""Volcano's sharding modes in a session: hard refuses nodes outside the NodeShard with Volcano's reason
(pkg/scheduler/util/predicate_helper.go), soft takes the best node inside the shard before any outside
(actions/allocate/allocate.go prioritizeNodes), none changes nothing."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from scheduler.api.decision import Status
from scheduler.api.job import TaskInfo
from scheduler.api.messages import render
from scheduler.api.node import NodeInfo
from scheduler.api.reasons import NODE_SHARD, NodeFilter, NodesUnavailable
from scheduler.api.shard import HARD, NONE, SOFT, ShardView
from scheduler.api.snapshot import CycleResult
from scheduler.cycle import builtin_default_conf, run_cycle
from scheduler.plugins.predicates import StaticFilter
from scheduler.testing import ClusterBuilder, cluster, pod_object


def cycle(c: ClusterBuilder, shard: ShardView | None) -> CycleResult:
    snapshot = c.sim.snapshot()
    snapshot.shard = shard
    result = run_cycle(snapshot, builtin_default_conf(), memo=c.memo)
    c.sim.apply(result)
    c.sim.start_bound_pods()
    c.sim.now += 1.0
    return result


def unavailable(c: ClusterBuilder, job: str) -> NodesUnavailable:
    found = [r for r in c.sim.reasons(job) if isinstance(r, NodesUnavailable)]
    assert found, c.sim.reasons(job)
    return found[0]


def test_hard_mode_binds_only_to_the_shards_nodes() -> None:
    c = cluster().nodes("n", 4, cpu="4").job("j", replicas=2, cpu="1")
    cycle(c, ShardView(HARD, "volcano", frozenset({"n2", "n3"})))
    assert set(c.sim.bound("j").values()) <= {"n2", "n3"} and len(c.sim.bound("j")) == 2


def test_hard_mode_says_volcanos_reason_for_each_node_outside() -> None:
    c = cluster().nodes("n", 4, cpu="4").job("big", replicas=3, cpu="4")  # one whole node per pod: 3 nodes needed
    cycle(c, ShardView(HARD, "volcano", frozenset({"n2", "n3"})))
    assert c.sim.bound("big") == {}
    counts = {fc.filter: fc.nodes for fc in unavailable(c, "big").counts}
    assert counts[NodeFilter(NODE_SHARD)] == 2
    assert "2 node isn't in scheduler node shard" in render(unavailable(c, "big"))


def test_hard_mode_follows_a_shard_that_grows_between_cycles() -> None:
    """The cycle memo keeps feasible nodes from cycle to cycle: a changed shard must not reuse them."""
    c = cluster().nodes("n", 3, cpu="4").job("big", replicas=2, cpu="4")
    cycle(c, ShardView(HARD, "volcano", frozenset({"n0"})))
    assert c.sim.bound("big") == {}
    cycle(c, ShardView(HARD, "volcano", frozenset({"n0", "n1"})))
    assert sorted(c.sim.bound("big").values()) == ["n0", "n1"]


def test_hard_mode_runs_no_predicate_on_a_node_outside(monkeypatch: pytest.MonkeyPatch) -> None:
    """Volcano checks the shard before the predicates (predicate_helper.go): a node outside costs no predicate."""
    asked: list[str] = []
    real = StaticFilter.__call__

    def spy(self: StaticFilter, task: TaskInfo, nodes: Sequence[NodeInfo]) -> list[Status]:
        asked.extend(n.name for n in nodes)
        return real(self, task, nodes)

    monkeypatch.setattr(StaticFilter, "__call__", spy)
    c = cluster().nodes("n", 4, cpu="4").job("j", replicas=2, cpu="1")
    cycle(c, ShardView(HARD, "volcano", frozenset({"n2", "n3"})))
    assert asked and set(asked) == {"n2", "n3"}
    assert set(c.sim.bound("j").values()) <= {"n2", "n3"} and len(c.sim.bound("j")) == 2


def test_hard_mode_with_no_shard_nodes_binds_nothing() -> None:
    c = cluster().nodes("n", 2, cpu="4").job("j", replicas=1, cpu="1")
    cycle(c, ShardView(HARD, "volcano", frozenset()))
    assert c.sim.bound("j") == {}
    assert {fc.filter: fc.nodes for fc in unavailable(c, "j").counts} == {NodeFilter(NODE_SHARD): 2}


def _half_used(c: ClusterBuilder) -> ClusterBuilder:
    """n0 empty, n1 half used: the default conf's scores (binpack) prefer n1."""
    other = pod_object("other", cpu="4", scheduler_name="default-scheduler")
    other["spec"]["nodeName"] = "n1"
    other["status"]["phase"] = "Running"
    c.node("n0", cpu="8").node("n1", cpu="8").sim.add_pod(other)
    return c


def test_soft_mode_takes_a_node_inside_the_shard_over_a_better_scored_one_outside() -> None:
    plain = _half_used(cluster()).job("j", replicas=1, cpu="1")
    cycle(plain, None)
    assert plain.sim.bound("j") == {"j-0": "n1"}  # the baseline: scores alone pick n1
    c = _half_used(cluster()).job("j", replicas=1, cpu="1")
    cycle(c, ShardView(SOFT, "volcano", frozenset({"n0"})))
    assert c.sim.bound("j") == {"j-0": "n0"}


def test_soft_mode_falls_back_to_nodes_outside_when_none_inside_fits() -> None:
    plain = _half_used(cluster()).node("n2", cpu="2").job("j", replicas=2, cpu="2")
    cycle(plain, None)
    assert sorted(plain.sim.bound("j").values()) == ["n1", "n1"]  # the baseline: scores alone pick n1 twice
    c = _half_used(cluster()).node("n2", cpu="2").job("j", replicas=2, cpu="2")
    cycle(c, ShardView(SOFT, "volcano", frozenset({"n2"})))  # n2 holds one of them, not both
    assert sorted(c.sim.bound("j").values()) == ["n1", "n2"]  # the other goes to the best node outside


def test_soft_mode_identical_pods_fill_the_shard_first() -> None:
    """A gang of identical pods (the bulk placer's case without sharding) keeps to the shard while it has room."""
    c = cluster().nodes("n", 4, cpu="4").job("j", replicas=6, cpu="1")
    cycle(c, ShardView(SOFT, "volcano", frozenset({"n3"})))
    placed = list(c.sim.bound("j").values())
    assert placed.count("n3") == 4 and len(placed) == 6


def test_mode_none_places_as_without_a_shard() -> None:
    plain = _half_used(cluster()).job("j", replicas=3, cpu="1")
    cycle(plain, None)
    c = _half_used(cluster()).job("j", replicas=3, cpu="1")
    cycle(c, ShardView(NONE, "volcano", frozenset({"n1"})))
    assert c.sim.bound("j") == plain.sim.bound("j")
