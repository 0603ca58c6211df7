"""A session that carries per-job work over from the last one (`framework/carry.py`) decides exactly what a session
that carries nothing decides on the same cluster: over random deltas and real cycles (the incremental snapshot's
`World`), each warm cycle (incremental snapshot, the memo kept from cycle to cycle) is compared with a cold one
(a snapshot built afresh, with a memo of its own that has seen the same cycles: a cold snapshot has no lineage,
so nothing is carried): binds, evictions,
PodGroup statuses, queue statuses, events, annotations, all of it. The warm cycle's result is then applied.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings, strategies as st
from snapshot_values import first_difference, result_value
from test_incremental_snapshot import World, cold, sim_rules

from scheduler.actions import ACTIONS
from scheduler.api.phases import TaskStatus
from scheduler.api.resources import Resource
from scheduler.api.snapshot import CycleResult
from scheduler.cycle import builtin_default_conf, run_cycle
from scheduler.framework.arrays import NodeArrays
from scheduler.framework.conf import SchedulerConf
from scheduler.framework.memo import CycleMemo
from scheduler.framework.results import ResultsCollector
from scheduler.framework.session import Session
from scheduler.plugins.gang import GangPlugin
from scheduler.plugins.overcommit import OvercommitPlugin
from scheduler.plugins.registry import PLUGINS
from scheduler.plugins.shares import without_pods
from scheduler.sim.cluster import InMemoryCluster
from scheduler.testing import conf_from_tiers

CONFS = {
    "default": builtin_default_conf(),
    "capacity, reclaim, preempt": conf_from_tiers(
        ("priority", "gang", "conformance"), ("drf", "predicates", "capacity", "nodeorder", "binpack"),
        actions="enqueue, allocate, preempt, reclaim, backfill"),
    "no gang, no drf": conf_from_tiers(("priority", "conformance"), ("predicates", "proportion", "nodeorder")),
}


def warm_and_cold(world: World, memo: CycleMemo, cold_memo: CycleMemo,
                  conf: SchedulerConf) -> tuple[CycleResult, CycleResult, bool]:
    """(warm result, cold result, whether the warm session followed the last one)."""
    sim = world.sim
    cold_result = run_cycle(cold(sim), conf, memo=cold_memo)
    assert cold_memo.carry.token is None
    snapshot = sim.snapshot()
    for job in snapshot.jobs.values():  # a job's allocated() kept from its last build is its tasks' sum
        kept, job.held = job.held, None
        assert kept is None or kept == job.allocated(), job.key
    lineage = snapshot.lineage
    followed = lineage is not None and lineage.since is not None and memo.carry.token is lineage.since
    warm_result = run_cycle(snapshot, conf, memo=memo)
    return warm_result, cold_result, followed


def run_world(seed: int, conf: SchedulerConf | None, steps: int = 30) -> int:
    """Random deltas with a cycle after each; returns how many warm sessions followed the last one. `conf` None:
    each cycle's conf drawn from CONFS (a plugin that leaves the conf and comes back)."""
    world = World(random.Random(seed))
    sim = world.sim
    sim.changes.start(sim_rules(sim))
    memo, cold_memo = CycleMemo(), CycleMemo()
    confs = sorted(CONFS)
    first = run_cycle(sim.snapshot(), conf or CONFS["default"], memo=memo)
    assert result_value(first) == result_value(run_cycle(cold(sim), conf or CONFS["default"], memo=cold_memo))
    followed = 0
    ops: list[str] = []
    for _ in range(steps):
        ops.append(world.step())
        chosen = conf or CONFS[world.rng.choice(confs)]
        warm, cold_result, follows = warm_and_cold(world, memo, cold_memo, chosen)
        followed += follows
        a, b = result_value(warm), result_value(cold_result)
        assert a == b, (ops, first_difference(a, b))
        sim.apply(warm)
        if world.rng.random() < 0.7:
            sim.start_bound_pods()
    return followed


@pytest.mark.parametrize("conf", sorted(CONFS))
@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_a_warm_session_decides_what_a_cold_one_decides_after_every_delta(conf: str, seed: int) -> None:
    followed = run_world(seed, CONFS[conf])
    assert followed >= 1  # the warm sessions did carry work over (a build afresh or a delta-less one does not)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_a_plugin_that_leaves_the_conf_and_comes_back_decides_as_a_cold_one(seed: int) -> None:
    assert run_world(seed, None) >= 1


def test_most_warm_sessions_follow_the_last_one() -> None:
    assert run_world(7, CONFS["default"], steps=40) >= 20


def cycle(sim: InMemoryCluster, conf: SchedulerConf, memo: CycleMemo, cold_memo: CycleMemo) -> CycleResult:
    """A warm cycle, checked against a cold one, its result applied."""
    cold_result = run_cycle(cold(sim), conf, memo=cold_memo)
    result = run_cycle(sim.snapshot(), conf, memo=memo)
    assert result_value(result) == result_value(cold_result)
    sim.apply(result)
    return result


def settled(seed: int, size: int) -> tuple[InMemoryCluster, CycleMemo, CycleMemo, str]:
    """`size` nodes and gangs, settled by three checked cycles (binds applied, pods started), with the memos of the
    warm and the cold cycles, and the key of a gang whose every pod runs and is needed (minAvailable > 1)."""
    world = World(random.Random(seed))
    sim = world.sim
    for _ in range(size):
        world.add_node()
        world.add_gang()
    sim.changes.start(sim_rules(sim))
    memo, cold_memo = CycleMemo(), CycleMemo()
    for _ in range(3):
        cycle(sim, CONFS["default"], memo, cold_memo)
        sim.start_bound_pods()
    broken = next(job.key for job in cold(sim).jobs.values()
                  if job.min_available > 1 and job.count(TaskStatus.RUNNING) == len(job.tasks) == job.min_available)
    return sim, memo, cold_memo, broken


def test_a_warm_session_redoes_only_the_jobs_that_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    """After a cycle in which nothing changed but one pod, the PodGroup status and the gang's close are worked
    out for that pod's job, the jobs the session changed and those with a task to place, not for every job; a gang
    that lost a member in an earlier cycle gets its Unschedulable condition again without it being worked out."""
    sim, memo, cold_memo, broken = settled(3, 30)
    conf = CONFS["default"]
    running = sorted(key for key, pod in sim.pods.items() if pod.manifest["status"].get("phase") == "Running")
    sim.delete_pod(next(key for key in running if sim.pods[key].task.job == broken))  # below its minimum now
    cycle(sim, conf, memo, cold_memo)  # it changed: worked out; its PodGroup gets its Unschedulable condition
    cycle(sim, conf, memo, cold_memo)  # its PodGroup changed (the status written): worked out, kept
    cycle(sim, conf, memo, cold_memo)  # as read, as at the last close: given again
    statuses: list[str] = []
    closes: list[str] = []
    status_of, close_job = ResultsCollector._podgroup_status, GangPlugin._close_job
    monkeypatch.setattr(ResultsCollector, "_podgroup_status",
                        lambda self, job, binding=0, base=None: statuses.append(job.key)
                        or status_of(self, job, binding, base))
    monkeypatch.setattr(GangPlugin, "_close_job",
                        lambda self, ssn, job: closes.append(job.key) or close_job(self, ssn, job))
    sim.delete_pod(next(key for key in running if sim.pods[key].task.job != broken))
    cold_result = run_cycle(cold(sim), conf, memo=cold_memo)
    snapshot = sim.snapshot()
    assert snapshot.lineage is not None and snapshot.lineage.since is memo.carry.token
    changed = set(snapshot.lineage.jobs)
    statuses.clear()
    closes.clear()
    result = run_cycle(snapshot, conf, memo=memo)
    touched = {key for key, job in snapshot.jobs.items() if job.touched}
    placeable = {key for key, job in snapshot.jobs.items() if job.has_placeable()}
    assert result_value(result) == result_value(cold_result)
    assert len(snapshot.jobs) >= 30 and broken not in changed | touched | placeable
    conditions = sim.podgroups[broken].manifest["status"].get("conditions", [])
    assert [c["type"] for c in conditions if c["status"] == "True"] == ["Unschedulable"]
    assert broken not in closes and broken in memo.carry.stores["gang"]["acts"]  # given again, not worked out
    assert set(closes) <= changed | touched | placeable
    conditions = changed | touched | placeable | {broken}  # (the status of a job given a condition is made)
    assert set(statuses) <= conditions | {s.job for s in result.podgroups}
    assert len(statuses) < len(snapshot.jobs) // 2 and len(closes) < len(snapshot.jobs) // 2


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_node_arrays_carried_from_the_last_session_equal_arrays_made_afresh(seed: int) -> None:
    world = World(random.Random(seed))
    sim = world.sim
    sim.changes.start(sim_rules(sim))
    store: dict[object, object] = {}
    reused = 0
    for _ in range(25):
        world.step()
        snapshot = sim.snapshot()
        nodes = sorted(snapshot.nodes.values(), key=lambda n: n.name)
        reused += store.get("last") is not None and NodeArrays._from_last(nodes, store["last"]) is not None
        carried, fresh = NodeArrays.carried(nodes, store), NodeArrays(nodes)
        assert (carried.dims, carried.row, carried.position) == (fresh.dims, fresh.row, fresh.position)
        for name in ("idle", "allocatable", "unrequested", "version"):
            assert (getattr(carried, name) == getattr(fresh, name)).all(), name
        sim.apply(run_cycle(snapshot, CONFS["default"]))  # the session changes some of the nodes it was handed
        if world.rng.random() < 0.7:
            sim.start_bound_pods()
    assert reused


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_the_nodes_used_sum_carried_from_the_last_session_equals_a_sum_over_every_node(seed: int) -> None:
    """`SessionAPI.used_total` (overcommit's admission room) corrects the last session's sum by the nodes whose
    `used` changed: over random deltas and real cycles it equals the sum over every node, and it did correct (not
    sum afresh) in some sessions."""
    world = World(random.Random(seed))
    sim = world.sim
    sim.changes.start(sim_rules(sim))
    memo = CycleMemo()
    corrected = 0
    for _ in range(25):
        world.step()
        last = list(memo.carry.stores.get("used", {}).get("useds") or ())
        ssn = Session(sim.snapshot(), CONFS["default"], PLUGINS, memo=memo)
        nodes = ssn.node_list
        overcommit = next(plugin for _, plugin in ssn.plugins if isinstance(plugin, OvercommitPlugin))
        assert overcommit.used == without_pods(Resource.total(node.used for node in nodes))
        corrected += (ssn.changes.since is not None and len(last) == len(nodes)
                      and any(old is not node.used for old, node in zip(last, nodes, strict=True)))
        for action in CONFS["default"].actions:
            ACTIONS[action]().execute(ssn)
        sim.apply(ssn.close())
        if world.rng.random() < 0.7:
            sim.start_bound_pods()
    assert corrected


def test_a_gang_given_its_condition_again_is_written_while_its_writes_are_lost(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A gang that lost pods for good is given its Unschedulable condition again each cycle without being looked at
    (the gang plugin's kept act, `carry_conditions`). When its PodGroup as read is not what the cycles compute and
    their writes are lost (the PodGroup does not change, so the job stays as read), each warm cycle still works
    its status out with that condition and writes it, as a cold one does."""
    sim, memo, cold_memo, broken = settled(5, 20)
    conf = CONFS["default"]
    running = [key for key, pod in sim.pods.items() if pod.task.job == broken
               and pod.manifest["status"].get("phase") == "Running"]
    sim.delete_pod(running[0])
    for _ in range(4):  # told Unschedulable, written; read back; then given it again without a look
        cycle(sim, conf, memo, cold_memo)
    assert broken in memo.carry.stores["gang"]["acts"]
    assert sim.podgroups[broken].manifest["status"]["phase"] == "Unknown"
    sim.podgroups[broken].manifest["status"]["phase"] = "Running"  # someone else's write
    sim.changes.changed_podgroup(broken)
    closes: list[str] = []
    close_job = GangPlugin._close_job
    monkeypatch.setattr(GangPlugin, "_close_job",
                        lambda self, ssn, job: closes.append(job.key) or close_job(self, ssn, job))
    for turn in range(3):  # changed (worked out, its act kept: `JobChanges.clean`), then twice as read (given it
        # again without a look)
        cold_result = run_cycle(cold(sim), conf, memo=cold_memo)
        closes.clear()
        result = run_cycle(sim.snapshot(), conf, memo=memo)
        assert (broken in closes) == (turn == 0)
        assert result_value(result) == result_value(cold_result)
        assert [s.phase.value for s in result.podgroups if s.job == broken] == ["Unknown"]
        result.podgroups = [s for s in result.podgroups if s.job != broken]  # the write is lost
        sim.apply(result)
