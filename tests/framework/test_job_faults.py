"""One job's failure costs that job alone (issue 31, `scheduler/framework/faults.py`).

A test plugin, `poison`, serves one extension point (or hook) and raises for one job, the poisoned one, and is
neutral for every other. For each action and each point that action asks about a job, on seeded random
workloads: the poisoned job gets an `Error` Status naming the plugin, the action and the exception's type, and
no bind; every other job's binds, evictions and phase equal those of the same cycle on the same cluster without
the poisoned job (the plugin still there, raising for nobody). A queue-level point (QueueOrder, Overused)
poisons the job's queue, which holds it alone: the queue is left out with it.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from scheduler import cycle
from scheduler.api.decision import ABSTAIN, SUCCESS, Code, Status
from scheduler.api.job import JobInfo, TaskInfo
from scheduler.api.node import NodeInfo
from scheduler.api.queue import QueueInfo
from scheduler.api.reasons import PluginError
from scheduler.api.resources import Resource
from scheduler.api.snapshot import CycleResult
from scheduler.framework import points as P
from scheduler.framework.arrays import IntArray, NodeArrays
from scheduler.framework.conf import SchedulerConf
from scheduler.framework.conf_args import NoArgs
from scheduler.framework.faults import JOB_ERRORS
from scheduler.framework.memo import CycleMemo
from scheduler.framework.plugin import Plugin, SessionAPI
from scheduler.framework.results import SCHEDULER_ERROR
from scheduler.framework.runtime import KNOWN, LIFECYCLE
from scheduler.plugins.registry import PLUGIN_ARGS, PLUGINS
from scheduler.testing import ClusterBuilder, cluster, conf_from_tiers

POISON_GROUP = "poison"
POISON_QUEUE = "qp"  # holds the poisoned job alone, for the queue-level points


class PoisonedError(Exception):
    pass


class PoisonPlugin(Plugin[NoArgs]):
    """Serves `point` (class attribute, set per test); raises for the job with uid `target` (its tasks, its queue
    `target_queue` for the queue-level points) while the actions run, and is neutral otherwise."""

    name = "poison"
    point = ""
    target = ""
    target_queue = ""

    def on_session_open(self, ssn: SessionAPI) -> None:
        self.live = True

    def inactive_points(self) -> frozenset[str]:
        """Every point but the one under test (the keyed job order: the plain one with its key)."""
        serving = {"job_order_keyed": {"job_order", "job_order_key"}, "event_handler": {"on_allocate"},
                   "job_enqueued": {"on_job_enqueued"}}.get(self.point, {self.point})
        return frozenset(SERVED - serving)

    # one method per point (and hook), each neutral unless it meets the poisoned job, task or queue
    def job_order(self, a: JobInfo, b: JobInfo) -> int:
        return 0 if not (self._job_bad(a) or self._job_bad(b)) else 0

    def job_order_key(self, job: JobInfo) -> int:
        return 0 if not self._job_bad(job) else 0

    def queue_order(self, a: QueueInfo, b: QueueInfo) -> int:
        return 0 if not (self._queue_bad(a) or self._queue_bad(b)) else 0

    def task_order(self, a: TaskInfo, b: TaskInfo) -> int:
        return 0 if not (self._task_bad(a) or self._task_bad(b)) else 0

    def predicate(self, task: TaskInfo, nodes: Sequence[NodeInfo]) -> list[Status]:
        return [SUCCESS] * len(nodes) if not self._task_bad(task) else []

    def batch_node_order(self, task: TaskInfo, arrays: NodeArrays, indices: IntArray) -> P.FloatArray:
        return np.zeros(indices.size) if not self._task_bad(task) else np.zeros(0)

    def job_valid(self, job: JobInfo) -> Status:
        return SUCCESS if not self._job_bad(job) else SUCCESS

    def job_ready(self, job: JobInfo) -> bool:
        return not self._job_bad(job)

    def job_pipelined(self, job: JobInfo) -> Status:
        return ABSTAIN if not self._job_bad(job) else ABSTAIN

    def job_enqueueable(self, job: JobInfo) -> Status:
        return ABSTAIN if not self._job_bad(job) else ABSTAIN

    def allocatable(self, queue: QueueInfo, task: TaskInfo) -> Status:
        return SUCCESS if not self._task_bad(task) else SUCCESS

    def overused(self, queue: QueueInfo) -> bool:
        return self._queue_bad(queue)

    def preemptable(self, preemptor: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
        return list(candidates) if not self._task_bad(preemptor) else []

    def reclaimable(self, reclaimer: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
        return list(candidates) if not self._task_bad(reclaimer) else []

    def preempt_guard(self, candidates: Sequence[TaskInfo], preemptor: TaskInfo) -> list[TaskInfo]:
        return list(candidates) if not self._task_bad(preemptor) else []

    def reclaim_guard(self, candidates: Sequence[TaskInfo], reclaimer: TaskInfo) -> list[TaskInfo]:
        return list(candidates) if not self._task_bad(reclaimer) else []

    def job_starving(self, job: JobInfo) -> bool:
        return not self._job_bad(job)

    def place_gang(self, job: JobInfo, tasks: Sequence[TaskInfo]) -> P.GangAnswer:
        return P.PLACE_BY_POD if not self._job_bad(job) else P.PLACE_BY_POD

    def preemptive(self, queue: QueueInfo, request: Resource) -> bool:
        return not self._queue_bad(queue)

    def dynamic_predicate(self, task: TaskInfo, nodes: Sequence[NodeInfo]) -> list[Status]:
        return [SUCCESS] * len(nodes) if not self._task_bad(task) else []

    def dynamic_node_order(self, task: TaskInfo, nodes: Sequence[NodeInfo]) -> list[float]:
        return [0.0] * len(nodes) if not self._task_bad(task) else []

    def on_allocate(self, task: TaskInfo) -> None:
        self._task_bad(task)

    def on_job_enqueued(self, job: JobInfo) -> None:
        self._job_bad(job)

    def on_session_close(self, ssn: SessionAPI) -> None:
        self.live = False  # raise in the actions only, so each test knows which action met the fault

    def _job_bad(self, job: JobInfo) -> bool:
        if self.live and job.key == self.target:
            raise PoisonedError(f"job {job.key} poisoned")
        return False

    def _task_bad(self, task: TaskInfo) -> bool:
        if self.live and task.job == self.target:
            raise PoisonedError(f"task {task.name} poisoned")
        return False

    def _queue_bad(self, queue: QueueInfo) -> bool:
        if self.live and queue.name == self.target_queue:
            raise PoisonedError(f"queue {queue.name} poisoned")
        return False


SERVED = frozenset(name for name in dir(PoisonPlugin) if not name.startswith("_")) & KNOWN - LIFECYCLE

# Which points each action asks about a job (or its tasks, or its queue). A pair missing here is one the action
# never asks (backfill asks no queue; enqueue places nothing).
JOB_POINTS = ("job_order", "job_order_keyed", "job_valid", "job_ready", "job_pipelined", "job_starving",
              "place_gang")
TASK_POINTS = ("task_order", "predicate", "batch_node_order", "allocatable", "dynamic_predicate",
               "dynamic_node_order", "event_handler")
MATRIX: dict[str, tuple[str, ...]] = {
    "enqueue": ("job_order", "job_order_keyed", "queue_order", "job_enqueueable", "job_enqueued"),
    "allocate": ("job_order", "job_order_keyed", "queue_order", "overused", "job_valid", "job_ready",
                 "job_pipelined", "place_gang", *TASK_POINTS),
    "backfill": ("job_order", "task_order", "predicate", "job_ready", "event_handler"),
    "preempt": ("job_order", "queue_order", "job_valid", "job_starving", "task_order", "predicate",
                "preemptable", "preempt_guard", "job_pipelined", "event_handler"),
    "reclaim": ("job_order", "queue_order", "overused", "job_valid", "job_starving", "task_order", "predicate",
                "reclaimable", "reclaim_guard", "preemptive", "allocatable", "job_pipelined", "event_handler"),
}
QUEUE_POINTS = {"queue_order", "overused", "preemptive"}  # preemptive: (queue, a summed request)
SEEDS = (1, 2, 3)

ANTI_AFFINITY = {"podAntiAffinity": {
    "requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "nobody"}}, "topologyKey": "kubernetes.io/hostname"}],
    "preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 10, "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": "nobody"}},
                                           "topologyKey": "kubernetes.io/hostname"}}],
}}


def conf_for(action: str, point: str = "") -> SchedulerConf:
    """The default tiers with the poison plugin first, and the one action under test. For preempt, capacity
    (no limits declared) stands in for proportion: preempt asks the queue's Allocatable (Volcano's
    preemptorFitsOnNode), and proportion's deserved shares depend on every queue's requests, so the poisoned job
    would change its neighbours' answers (and a full queue's, its own) whether or not a plugin fails."""
    shares = "capacity" if action == "preempt" else "proportion"
    return conf_from_tiers(
        ["poison", "priority", "gang", "conformance"],
        ["drf", "predicates", shares, "nodeorder", "binpack"],
        actions=action,
    )


# The poisoned gang's pods tolerate a taint no node has: a constraint set of their own, so the predicates are
# asked about them and not answered from another job's (identical) constraints.
OWN_CONSTRAINTS = ({"key": "volcano-py.test/poison", "operator": "Exists", "effect": "NoSchedule"},)


def workload(seed: int, action: str, point: str, *, poisoned: bool = True) -> ClusterBuilder:
    """A random cluster for `action`: nodes of 8 GPUs, three queues, low-priority gangs already running (the
    victims of preempt and reclaim), newer gangs waiting, and (if `poisoned`) the poisoned gang. Every job is
    admitted (Inqueue) except for the enqueue action, so the one action under test is the first to see them."""
    rng = random.Random(seed)
    c = cluster().priority_class("low", 10).priority_class("high", 1000)
    c.nodes("n", rng.randint(3, 5), gpu=8, cpu="64", memory="256Gi")
    for q in ("q1", "q2", POISON_QUEUE):
        c.queue(q, weight=rng.randint(1, 3))
    if action in ("preempt", "reclaim"):  # fill the cluster with low-priority work first
        for i in range(rng.randint(3, 5)):
            queue = "q2" if action == "reclaim" else rng.choice(["q1", "q2"])
            n = rng.randint(2, 4)
            c.job(f"low{i}", queue=queue, replicas=n + 2, min_available=n, gpu=2, priority_class="low")
        c.cycle()
    phase = "Pending" if action == "enqueue" else "Inqueue"
    for i in range(rng.randint(2, 4)):
        n = rng.randint(1, 4)
        queue = "q1" if action == "reclaim" else rng.choice(["q1", "q2"])
        best_effort = action == "backfill" and rng.random() < 0.7
        kwargs: dict[str, Any] = {"cpu": None, "memory": None} if best_effort else {"gpu": rng.randint(1, 2)}
        c.job(f"w{i}", queue=queue, replicas=n, priority_class=rng.choice(["low", "high"]), phase=phase, **kwargs)
    if not poisoned:
        return c
    poison_queue = POISON_QUEUE if point in QUEUE_POINTS else ("q1" if action == "reclaim" else "q2")
    if action == "backfill":
        kwargs = {"cpu": None, "memory": None}
    elif action == "allocate" and point == "job_pipelined":  # asked of a gang that did not become ready
        kwargs = {"gpu": 8}
    else:
        kwargs = {"gpu": 1 + (action != "allocate")}
    replicas = 8 if kwargs.get("gpu") == 8 else 2
    c.job(POISON_GROUP, queue=poison_queue, replicas=replicas, priority_class="high", phase=phase,
          affinity=ANTI_AFFINITY if point.startswith("dynamic") else None, tolerations=OWN_CONSTRAINTS, **kwargs)
    return c


def run(c: ClusterBuilder, conf: SchedulerConf) -> CycleResult:
    return cycle.run_cycle(c.sim.snapshot(), conf, memo=CycleMemo())


def outcome(result: CycleResult, skip: str) -> tuple[object, ...]:
    binds = sorted((g.job, b) for g in result.binds for b in g.binds if g.job != skip)
    evictions = sorted(e.task for e in result.evictions)
    phases = sorted((s.job, s.phase.value) for s in result.podgroups if s.job != skip)
    return binds, evictions, phases


@pytest.fixture()
def poison(monkeypatch: pytest.MonkeyPatch) -> type[PoisonPlugin]:
    monkeypatch.setitem(PLUGINS, PoisonPlugin.name, PoisonPlugin)
    monkeypatch.setitem(PLUGIN_ARGS, PoisonPlugin.name, PoisonPlugin.parse_args)
    return PoisonPlugin


CASES = [(action, point, seed) for action, points in MATRIX.items() for point in points for seed in SEEDS]


@pytest.mark.parametrize(("action", "point", "seed"), CASES, ids=[f"{a}-{p}-{s}" for a, p, s in CASES])
def test_a_plugin_raising_for_one_job_costs_that_job_alone(
    poison: type[PoisonPlugin], monkeypatch: pytest.MonkeyPatch, action: str, point: str, seed: int
) -> None:
    c = workload(seed, action, point)
    conf = conf_for(action, point)
    target = next(job for job in c.sim.snapshot().jobs.values() if job.name == POISON_GROUP)
    monkeypatch.setattr(poison, "point", point)
    monkeypatch.setattr(poison, "target", "nobody")
    monkeypatch.setattr(poison, "target_queue", "nobody")
    expected = run(workload(seed, action, point, poisoned=False), conf)
    monkeypatch.setattr(poison, "target", target.key)
    monkeypatch.setattr(poison, "target_queue", target.queue if point in QUEUE_POINTS else "nobody")
    result = run(c, conf)

    status = next(s for s in result.podgroups if s.job == target.key)
    assert status.decision is not None, f"{point} was never asked about the poisoned job in {action}"
    assert status.decision.code is Code.ERROR
    (reason,) = status.decision.reasons
    assert isinstance(reason, PluginError)
    assert (reason.plugin, reason.action, reason.error) == ("poison", action, "PoisonedError")
    assert any(c.reason == SCHEDULER_ERROR and c.type == "Unschedulable" for c in status.conditions)
    assert not any(g.job == target.key for g in result.binds)
    assert result.counters.get(JOB_ERRORS + "poison", 0) >= 1
    assert outcome(result, target.key) == outcome(expected, target.key)


def test_the_cases_reach_preemption_and_reclaim() -> None:
    """The preempt and reclaim workloads do evict (without the poison): the matrix above tests those actions at
    work, not idle."""
    conf_less: dict[str, int] = {}
    for action in ("preempt", "reclaim"):
        evicted = 0
        for seed in SEEDS:
            c = workload(seed, action, "job_order", poisoned=False)
            evicted += len(run(c, conf_from_tiers(["priority", "gang", "conformance"],
                                                  ["drf", "predicates", "proportion", "nodeorder", "binpack"],
                                                  actions=action)).evictions)
        conf_less[action] = evicted
    assert all(conf_less.values()), conf_less


def test_a_fault_that_repeats_is_logged_once(poison: type[PoisonPlugin], monkeypatch: pytest.MonkeyPatch,
                                             caplog: pytest.LogCaptureFixture) -> None:
    c = workload(1, "allocate", "job_valid")
    target = next(job for job in c.sim.snapshot().jobs.values() if job.name == POISON_GROUP)
    monkeypatch.setattr(poison, "point", "job_valid")
    monkeypatch.setattr(poison, "target", target.key)
    memo = CycleMemo()
    conf = conf_for("allocate")
    with caplog.at_level("ERROR", logger="volcano_py.scheduler"):
        results = [cycle.run_cycle(c.sim.snapshot(), conf, memo=memo) for _ in range(5)]
    lines = [r for r in caplog.records if target.key in r.getMessage()]
    assert len(lines) == 1, [r.getMessage() for r in lines]
    assert "poison" in lines[0].getMessage() and "PoisonedError" in lines[0].getMessage()
    assert [r.counters.get(JOB_ERRORS + "poison") for r in results] == [1] * 5


def test_a_statement_is_undone_when_the_job_fails_mid_placement(
    poison: type[PoisonPlugin], monkeypatch: pytest.MonkeyPatch
) -> None:
    """JobReady raises after the poisoned gang's first task is placed: its placements are undone, so the node's
    GPUs are free for the gang after it (which needs all of them)."""
    c = cluster().node("n0", gpu=4)
    c.job(POISON_GROUP, replicas=2, gpu=2)
    c.sim.now += 5  # "after" is younger: the poisoned gang goes first
    c.job("after", replicas=2, gpu=2)
    target = next(job for job in c.sim.snapshot().jobs.values() if job.name == POISON_GROUP)
    monkeypatch.setattr(poison, "point", "job_ready")
    monkeypatch.setattr(poison, "target", target.key)
    result = run(c, conf_for("allocate"))
    bound = {g.job: len(g.binds) for g in result.binds}
    assert target.key not in bound
    assert list(bound.values()) == [2]
