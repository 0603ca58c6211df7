"""The vectorised scorers the session calls agree with the per-node definitions, and GPUs pack by default."""

from __future__ import annotations

import random

import numpy as np
import pytest

from scheduler.cycle import builtin_default_conf
from scheduler.framework.fit import FeasibilityCache
from scheduler.framework.memo import CycleMemo
from scheduler.framework.session import Session
from scheduler.plugins.binpack import BinpackPlugin
from scheduler.plugins.nodeorder import NodeOrderPlugin
from scheduler.plugins.registry import PLUGINS
from scheduler.testing import cluster

PROBES = {  # the probe task's requests: kube-scheduler's scores treat each of these differently
    "gpu, cpu and memory": {"gpu": 1, "cpu": "2", "memory": "8Gi"},
    "no gpu": {"cpu": "2", "memory": "8Gi"},
    "no memory (counted at 200 MiB)": {"gpu": 1, "cpu": "2"},
    "best effort (balanced scores 0)": {"cpu": None},
}


def random_cluster(seed: int, probe: str = "gpu, cpu and memory") -> Session:
    rng = random.Random(seed)
    c = cluster()
    for i in range(30):
        taints = [{"key": "soft", "effect": "PreferNoSchedule"}] if rng.random() < 0.3 else []
        c.node(f"n{i:02d}", gpu=8, cpu=str(rng.choice([32, 64])), memory=rng.choice(["256Gi", "512Gi"]),
               taints=taints, labels={"zone": rng.choice("ab")})
    for j in range(20):
        memory = {} if rng.random() < 0.3 else {"memory": f"{rng.randint(1, 64)}Gi"}  # some count at the default
        c.job(f"r{j}", replicas=1, gpu=rng.randint(1, 4), cpu=str(rng.randint(1, 8)), **memory)
    c.cycle()
    affinity = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 5, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}}]}}
    c.job("probe", replicas=1, affinity=affinity, **PROBES[probe])
    return Session(c.sim.snapshot(), builtin_default_conf(), PLUGINS)


@pytest.mark.parametrize("probe", PROBES)
@pytest.mark.parametrize("seed", range(5))
def test_batch_scores_equal_per_node_scores(seed: int, probe: str) -> None:
    ssn = random_cluster(seed, probe)
    task = next(iter(ssn.jobs["default/probe"].tasks.values()))
    indices = np.arange(len(ssn.node_list))
    for plugin in (p for _, p in ssn.plugins if isinstance(p, (BinpackPlugin, NodeOrderPlugin))):
        batch = plugin.batch_node_order(task, ssn.arrays, indices)
        single = [plugin.batch_node_order_one(task, node) for node in ssn.node_list]
        assert np.allclose(batch, single), plugin.name


def test_with_the_default_conf_one_gpu_jobs_fill_a_used_node_before_an_empty_one() -> None:
    c = cluster().node("a-used", gpu=8).node("b-empty", gpu=8).job("seed", replicas=1, gpu=4)
    c.cycle()
    assert c.sim.bound("seed") == {"seed-0": "a-used"}
    for i in range(4):
        c.job(f"small{i}", replicas=1, gpu=1)
    c.cycle()
    assert {n for i in range(4) for n in c.sim.bound(f"small{i}").values()} == {"a-used"}
    c.job("gang", replicas=8, gpu=1)
    c.cycle()
    assert set(c.sim.bound("gang").values()) == {"b-empty"}


@pytest.mark.parametrize("seed", range(3))
def test_registered_scorers_give_the_same_score_for_one_node_in_both_forms(seed: int) -> None:
    from scheduler.framework import points as P

    ssn = random_cluster(seed)
    task = next(iter(ssn.jobs["default/probe"].tasks.values()))
    scorers = ssn.tiers.functions(P.BATCH_NODE_ORDER)
    assert scorers and all(isinstance(fn, P.BatchScorer) for fn in scorers)
    for fn in scorers:
        for i, node in enumerate(ssn.node_list):
            assert fn.one(task, node) == pytest.approx(float(fn(task, ssn.arrays, np.array([i]))[0]))


def test_one_node_rescoring_places_every_task_where_the_batch_path_does(monkeypatch: pytest.MonkeyPatch) -> None:
    def placements(scalar: bool) -> dict[str, str]:
        if not scalar:
            monkeypatch.setattr(FeasibilityCache, "_scalar_scorers", lambda self: None)
        rng = random.Random(3)
        c = cluster()
        for i in range(24):
            c.node(f"n{i:02d}", gpu=8, cpu=str(rng.choice([32, 64])), memory=rng.choice(["256Gi", "512Gi"]))
        for j in range(12):
            c.job(f"g{j}", replicas=rng.randint(1, 12), gpu=rng.choice([1, 2]), cpu=str(rng.randint(1, 6)))
        c.cycle()
        monkeypatch.undo()
        return {pod: node for j in range(12) for pod, node in c.sim.bound(f"g{j}").items()}

    scalar, batch = placements(True), placements(False)
    assert len(scalar) > 60
    assert scalar == batch


def test_with_the_default_conf_the_one_node_rescoring_takes_the_scalar_path() -> None:
    ssn = random_cluster(0)
    assert ssn.fit._scalars is not None and len(ssn.fit._scalars) == 2  # nodeorder's and binpack's scalar forms


@pytest.mark.parametrize("seed", range(5))
def test_static_scores_kept_from_cycle_to_cycle_equal_those_made_afresh(seed: int) -> None:
    """nodeorder's taint and preferred-affinity scores, kept in the memo while the nodes' statics hold, equal a
    session's own; once a node's taints change they are made again (and still equal)."""
    rng = random.Random(seed)
    c = cluster()
    for i in range(30):
        taints = [{"key": "soft", "effect": "PreferNoSchedule"}] if rng.random() < 0.3 else []
        c.node(f"n{i:02d}", gpu=8, taints=taints, labels={"zone": rng.choice("ab")})
    affinity = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 5, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}}]}}
    c.job("probe", replicas=1, gpu=1, affinity=affinity)
    memo = CycleMemo()

    def scores(memo: CycleMemo | None) -> np.ndarray:
        ssn = Session(c.sim.snapshot(), builtin_default_conf(), PLUGINS, memo=memo)
        plugin = next(p for _, p in ssn.plugins if isinstance(p, NodeOrderPlugin))
        task = next(iter(ssn.jobs["default/probe"].tasks.values()))
        return plugin._static_scores(task)

    first = scores(memo)
    again = scores(memo)
    assert again is first  # kept, not made again
    assert again.tolist() == scores(None).tolist()
    flip = "n00" if not c.sim.nodes["n00"].taints else "n01"
    c.node(flip, gpu=8, taints=[] if c.sim.nodes[flip].taints else [{"key": "soft", "effect": "PreferNoSchedule"}],
           labels=dict(c.sim.nodes[flip].labels))
    after = scores(memo)
    assert after is not first and after.tolist() == scores(None).tolist() != first.tolist()
