"""The simulator's replay builds each cycle's snapshot from the last one and what changed (`replay(...,
incremental=True)`, the default): every cycle's snapshot equals one built afresh from the cluster, and a whole
replay decides exactly what it decides with every snapshot built afresh.

Run on the examples of examples/sim (with the conf each is meant for: evictions, reclaim, DRA devices, the day of
jobs) and on seeded random workloads: Volcano Jobs of random sizes, priorities and queues arriving over an hour,
some with a PodEvicted policy, under a conf with preempt and reclaim and a restart delay, so pods are bound,
finish, are evicted, deleted gracefully and made again by their controller.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_incremental_snapshot import same

from scheduler.api.snapshot import ClusterSnapshot
from scheduler.cycle import load_conf_or_default
from scheduler.framework.conf import SchedulerConf
from scheduler.sim import replay as replay_module
from scheduler.sim.cluster import InMemoryCluster
from scheduler.sim.replay import Replay, replay
from scheduler.sim.workload import load_cluster, load_workload

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "sim"
# (cluster, workload, conf or None for the built-in default, horizon in seconds or None for the whole replay)
PAIRS = {
    "teams-proportion": ("teams-cluster.yaml", "teams-workload.yaml", "proportion.conf", None),
    "teams-capacity": ("teams-cluster.yaml", "teams-workload.yaml", "capacity.conf", None),
    "rigid-gangs-eviction": ("rigid-gangs-cluster.yaml", "rigid-gangs.yaml", "gang-eviction.conf", None),
    "dra": ("dra-cluster.yaml", "dra-workload.yaml", "dra.conf", None),
    "day-first-hours": ("day-cluster.yaml", "day-workload.yaml", None, 2 * 3600.0),
}
PREEMPTING = load_conf_or_default(str(EXAMPLES / "proportion.conf"))  # preempt and reclaim, shares by weight


def outcome(result: Replay) -> tuple[Any, ...]:
    """What a replay decided and what came of it, as plain values."""
    binds = [(r.time, r.job, r.task, r.node) for r in result.cluster.bind_log]
    runs = [(r.key, r.started, r.ended, r.interrupted, tuple(r.rewaits), tuple(r.lost)) for r in result.runs]
    return binds, runs


def checked_replay(monkeypatch: pytest.MonkeyPatch, *args: Any, **kwargs: Any) -> tuple[Replay, int]:
    """The replay, incremental, with every cycle's snapshot compared with one built afresh; the cycles checked."""
    made: list[InMemoryCluster] = []
    build = replay_module.build_cluster

    def keep(*a: Any, **k: Any) -> InMemoryCluster:
        made.append(build(*a, **k))
        return made[-1]

    checked = 0

    def compare(snapshot: ClusterSnapshot) -> None:
        nonlocal checked
        difference = same(snapshot, made[-1])
        assert difference == "", f"cycle {checked + 1} at {made[-1].now}: {difference}"
        checked += 1

    monkeypatch.setattr(replay_module, "build_cluster", keep)
    result = replay(*args, observe=compare, incremental=True, **kwargs)
    assert made[-1].changes.builder is not None  # the snapshots were incremental
    return result, checked


def _conf(name: str | None) -> SchedulerConf:
    return load_conf_or_default(str(EXAMPLES / name) if name else None)


@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_every_cycle_of_an_example_sees_what_a_cold_snapshot_shows(pair: str,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    cluster, workload, conf, horizon = PAIRS[pair]
    spec, work = load_cluster(EXAMPLES / cluster), load_workload(EXAMPLES / workload)
    result, checked = checked_replay(monkeypatch, spec, work, _conf(conf), period=10.0, horizon=horizon,
                                     restart_delay=20.0)
    assert checked == result.cycles > 0
    cold = replay(spec, work, _conf(conf), period=10.0, horizon=horizon, restart_delay=20.0, incremental=False)
    assert outcome(result) == outcome(cold)
    assert result.cluster.bind_log  # the example binds something: the comparison is not of two empty replays


def random_workload(rng: random.Random) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Two or three 8-GPU nodes, two or three queues, and 10-20 Volcano Jobs that each fit the cluster: low-priority
    ones first, high-priority ones later (so preempt and reclaim evict), some restarted whole when evicted, pods
    with grace periods longer than a cycle (a victim is seen releasing its node)."""
    nodes = rng.randint(2, 3)
    queues = [{"name": f"q{i}", "weight": rng.randint(1, 3)} for i in range(rng.randint(2, 3))]
    cluster = {"nodes": [{"name": "gpu", "count": nodes, "cpu": 64, "memory": "512Gi", "gpu": 8}],
               "queues": queues, "priorityClasses": {"low": 10, "high": 1000}}
    jobs = []
    count = rng.randint(10, 20)
    for i in range(count):
        replicas = rng.choice((1, 1, 2, 4, 8))
        gpus = rng.choice([g for g in (1, 2, 4) if g * replicas <= 8 * nodes])
        late = i >= count // 2
        spec: dict[str, Any] = {
            "schedulerName": "volcano-py", "queue": rng.choice(queues)["name"],
            "minAvailable": rng.randint(1, replicas), "priorityClassName": "high" if late else "low",
            "tasks": [{"name": "w", "replicas": replicas, "template": {"spec": {
                "terminationGracePeriodSeconds": rng.choice((0, 30, 90)), "containers": [{
                    "name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": gpus}}}]}}}],
        }
        if rng.random() < 0.3:
            spec["policies"] = [{"event": "PodEvicted", "action": "RestartJob"}]
        arrival = rng.randint(1800, 3600) if late else rng.randint(0, 600)
        jobs.append({"arrival": arrival, "duration": rng.randint(60, 2400),
                     "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": f"j{i}"},
                     "spec": spec})
    return cluster, jobs


def test_on_random_workloads_the_incremental_replay_decides_as_the_cold_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    evicted = 0
    for seed in range(5):
        cluster, jobs = random_workload(random.Random(seed))
        (tmp_path / "c.yaml").write_text(yaml.safe_dump(cluster))
        (tmp_path / "w.yaml").write_text(yaml.safe_dump({"jobs": jobs}))
        spec, work = load_cluster(tmp_path / "c.yaml"), load_workload(tmp_path / "w.yaml")
        result, checked = checked_replay(monkeypatch, spec, work, PREEMPTING, period=10.0, restart_delay=45.0)
        assert checked == result.cycles and result.cluster.bind_log, seed
        cold = replay(spec, work, PREEMPTING, period=10.0, restart_delay=45.0, incremental=False)
        assert outcome(result) == outcome(cold), seed
        evicted += sum(r.interrupted for r in result.runs)
    assert evicted  # gangs were broken by evictions and made again: those cycles were compared too
