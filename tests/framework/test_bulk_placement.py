"""Bulk placement (`scheduler/actions/bulk.py`) makes exactly the decisions of the per-task loop.

The property: on random clusters (nodes of several sizes, PreferNoSchedule and NoSchedule taints, zones; queues
with weights and capabilities, so a queue's share stops a gang part way; gangs of identical pods, elastic ones,
Volcano Jobs with several roles and task minimums, priorities, node selectors), several cycles with bulk runs
give the same CycleResult, cycle by cycle, as with the per-task loop alone: the binds in the same order, the same
PodGroup statuses and conditions, events and queue statuses. Then the fast path's own terms: it is taken for a
gang of identical pods, and not where a plugin does not give the forms it needs.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from scheduler.actions import ACTIONS, bulk as bulk_module
from scheduler.actions.allocate import Allocate
from scheduler.api.decision import SUCCESS, Status
from scheduler.api.job import TaskInfo
from scheduler.api.queue import QueueInfo
from scheduler.api.snapshot import CycleResult
from scheduler.cycle import builtin_default_conf, conf_from_text
from scheduler.framework.conf import DEFAULT_TIERS
from scheduler.framework.conf_args import NoArgs
from scheduler.framework.plugin import Plugin
from scheduler.jobs.expand import podgroup_for, pods_for
from scheduler.plugins.registry import PLUGIN_ARGS, PLUGINS
from scheduler.sim.objects import pod_object
from scheduler.testing import ClusterBuilder, cluster, conf_from_tiers

ROOT = Path(__file__).resolve().parents[2]
# As tests/fuzz: a fixed set of examples in `make test`, more with VOLCANO_FUZZ_EXAMPLES.
FUZZ = settings(
    max_examples=int(os.environ.get("VOLCANO_FUZZ_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=os.environ.get("VOLCANO_FUZZ_RANDOM") != "1",
)
PRIORITIES = {"low": 10, "high": 1000}
CONFS = {
    "default": builtin_default_conf(),
    "gang-only": conf_from_text((ROOT / "bench" / "gang-only.conf").read_text(), source="gang-only.conf"),
    "most-requested": conf_from_tiers(
        ("priority", "gang", "conformance"),
        ("drf", "predicates", "proportion",
         {"name": "nodeorder", "arguments": {"mostrequested.weight": 2, "leastrequested.weight": 0,
                                              "tainttoleration.weight": 5}},
         {"name": "binpack", "arguments": {"binpack.weight": 3, "binpack.cpu": 2}}),
    ),
    "evicting": conf_from_tiers(*DEFAULT_TIERS, actions="enqueue, allocate, preempt, reclaim, backfill"),
}


class PerTask(Allocate):
    """allocate with the bulk runs switched off: the reference."""

    def __init__(self) -> None:
        super().__init__(bulk=False)


node_specs = st.lists(
    st.fixed_dictionaries({
        "cpu": st.sampled_from([4, 8, 16]), "memory": st.sampled_from(["16Gi", "64Gi"]), "gpu": st.integers(0, 8),
        "pods": st.integers(3, 24), "zone": st.sampled_from(["a", "b"]),
        "taint": st.sampled_from([None, None, "PreferNoSchedule", "NoSchedule"]),
    }),
    min_size=1, max_size=10,
)
shapes = st.fixed_dictionaries({"cpu": st.sampled_from(["500m", "1", "2", "4"]),
                                "memory": st.sampled_from(["1Gi", "4Gi", "8Gi"]),
                                "gpu": st.sampled_from([0, 0, 1, 2])})


@st.composite
def gangs(draw: st.DrawFn, name: str, queues: list[str]) -> dict[str, Any]:
    replicas = draw(st.integers(1, 12))
    return {"name": name, "replicas": replicas, "min": draw(st.integers(1, replicas)), "shape": draw(shapes),
            "queue": draw(st.sampled_from(queues)), "priority": draw(st.sampled_from([None, "low", "high"])),
            "zone": draw(st.sampled_from([None, None, "a", "b"])), "tolerate": draw(st.booleans())}


@st.composite
def vcjobs(draw: st.DrawFn, name: str, queues: list[str]) -> dict[str, Any]:
    """A Volcano Job of two or three roles, some with a task minimum, expanded as Volcano's controller does."""
    roles = []
    for i in range(draw(st.integers(2, 3))):
        replicas = draw(st.integers(1, 6))
        shape = draw(shapes)
        requests = {"cpu": shape["cpu"], "memory": shape["memory"]}
        if shape["gpu"]:
            requests["nvidia.com/gpu"] = str(shape["gpu"])
        role: dict[str, Any] = {"name": f"r{i}", "replicas": replicas, "template": {"spec": {"containers": [
            {"name": "c", "image": "x", "resources": {"requests": requests}}]}}}
        if draw(st.booleans()):
            role["minAvailable"] = draw(st.integers(0, replicas))
        roles.append(role)
    total = sum(r["replicas"] for r in roles)
    spec = {"minAvailable": draw(st.integers(1, total)), "schedulerName": "volcano-py",
            "queue": draw(st.sampled_from(queues)), "tasks": roles}
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"}, "spec": spec}


@st.composite
def workloads(draw: st.DrawFn) -> dict[str, Any]:
    queues = [{"name": f"q{i}", "weight": draw(st.integers(1, 4)),
               "capability": draw(st.sampled_from([None, {"cpu": "6"}, {"cpu": "20", "nvidia.com/gpu": "6"}]))}
              for i in range(draw(st.integers(1, 3)))]
    names = [q["name"] for q in queues]
    return {
        "nodes": draw(node_specs), "queues": queues,
        "gangs": [draw(gangs(f"g{i}", names)) for i in range(draw(st.integers(1, 8)))],
        "vcjobs": [draw(vcjobs(f"v{i}", names)) for i in range(draw(st.integers(0, 2)))],
    }


def build(workload: dict[str, Any]) -> ClusterBuilder:
    c = cluster()
    for name, value in PRIORITIES.items():
        c.priority_class(name, value)
    for i, n in enumerate(workload["nodes"]):
        taints = [{"key": "dedicated", "value": "x", "effect": n["taint"]}] if n["taint"] else []
        c.node(f"n{i:02d}", cpu=str(n["cpu"]), memory=n["memory"], gpu=n["gpu"], pods=n["pods"],
               labels={"zone": n["zone"]}, taints=taints)
    for q in workload["queues"]:
        c.queue(q["name"], weight=q["weight"], capability=q["capability"])
    for g in workload["gangs"]:
        c.sim.add_podgroup({"metadata": {"name": g["name"], "namespace": "default"},
                            "spec": {"minMember": g["min"], "queue": g["queue"],
                                     **({"priorityClassName": g["priority"]} if g["priority"] else {})},
                            "status": {"phase": "Pending"}})
        tolerations = [{"key": "dedicated", "operator": "Exists"}] if g["tolerate"] else []
        for i in range(g["replicas"]):
            c.sim.add_pod(pod_object(f"{g['name']}-{i}", group=g["name"], cpu=g["shape"]["cpu"],
                                     memory=g["shape"]["memory"], gpu=g["shape"]["gpu"],
                                     priority_class=g["priority"], tolerations=tolerations,
                                     node_selector={"zone": g["zone"]} if g["zone"] else None))
    for job in workload["vcjobs"]:
        c.sim.add_podgroup(podgroup_for(job, PRIORITIES))
        for pod in pods_for(job):
            c.sim.add_pod(pod)
    return c


def decisions(result: CycleResult) -> tuple[Any, ...]:
    """Everything a cycle decided, in order, but its timings."""
    return (result.binds, result.evictions, result.events, result.podgroups, result.queues, result.counters,
            result.annotations)


def run(workload: dict[str, Any], conf_name: str, allocate: type[Allocate], monkeypatch: pytest.MonkeyPatch,
        cycles: int = 3) -> list[tuple[Any, ...]]:
    monkeypatch.setitem(ACTIONS, "allocate", allocate)
    c = build(workload)
    return [decisions(c.cycle(CONFS[conf_name])) for _ in range(cycles)]


@FUZZ
@given(workloads(), st.sampled_from(sorted(CONFS)))
def test_bulk_runs_decide_as_the_per_task_loop(workload: dict[str, Any], conf_name: str) -> None:
    with pytest.MonkeyPatch.context() as monkeypatch:
        reference = run(workload, conf_name, PerTask, monkeypatch)
        counts = _placed_in_runs(monkeypatch)
        bulk = run(workload, conf_name, Allocate, monkeypatch)
    # A cluster where no run was placed compares the per-task loop with itself: it proves nothing, so only the
    # clusters where the fast path placed something count as examples.
    assume(any(counts))
    assert bulk == reference


def _placed_in_runs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Record how many tasks each bulk run placed."""
    counts: list[int] = []
    original = bulk_module.BulkPlacer.place_run

    def counting(self: bulk_module.BulkPlacer, *args: Any) -> tuple[int, bool]:
        placed, ready = original(self, *args)
        counts.append(placed)
        return placed, ready

    monkeypatch.setattr(bulk_module.BulkPlacer, "place_run", counting)
    return counts


def test_a_gang_of_identical_pods_is_placed_in_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    counts = _placed_in_runs(monkeypatch)
    c = cluster().nodes("n", 4, cpu="8", memory="64Gi", gpu=8)
    c.job("gang", replicas=16, gpu=1, cpu="1", memory="4Gi")
    result = c.cycle()
    nodes = [node for b in result.binds for _, node in b.binds]
    # one bulk call placed the whole gang; binpack filled one node before the next, as pod by pod
    assert counts == [16]
    assert nodes == ["n0"] * 8 + ["n1"] * 8


def test_capacity_places_a_gang_in_runs_as_pod_by_pod(monkeypatch: pytest.MonkeyPatch) -> None:
    """capacity gives Allocatable's count and on_allocate_many: Volcano's gang-eviction conf (which uses it) places
    a gang's identical pods in runs, with the per-task loop's binds, and stops a run at the queue's capability."""
    conf = conf_from_tiers(("priority", "gang"), ("drf", "predicates", "capacity", "nodeorder", "binpack"))

    def gang(c: ClusterBuilder) -> ClusterBuilder:
        c.queue("capped", capability={"nvidia.com/gpu": "6"})
        c.job("gang", replicas=10, gpu=1, cpu="1", memory="4Gi", min_available=4, queue="capped")
        return c

    counts = _placed_in_runs(monkeypatch)
    bulk = gang(cluster().nodes("n", 2, cpu="8", memory="64Gi", gpu=8)).cycle(conf)
    assert counts and sum(counts) >= 4, counts  # placed in runs
    with pytest.MonkeyPatch.context() as inner:
        inner.setattr(bulk_module.BulkPlacer, "place_run", lambda *_args: (0, False))
        loop = gang(cluster().nodes("n", 2, cpu="8", memory="64Gi", gpu=8)).cycle(conf)
    bound = [(g.job, g.binds) for g in bulk.binds]
    assert bound == [(g.job, g.binds) for g in loop.binds]
    assert sum(len(b) for _, b in bound) == 6  # the queue's capability: 6 GPUs


def test_no_runs_where_a_plugin_lacks_the_forms(monkeypatch: pytest.MonkeyPatch) -> None:
    """A plugin that serves Allocatable without its count turns runs off: every task goes one by one, and the
    gang is still placed."""

    class Plain(Plugin[NoArgs]):
        name = "plain"

        def allocatable(self, queue: QueueInfo, task: TaskInfo) -> Status:
            return SUCCESS

    monkeypatch.setitem(PLUGINS, "plain", Plain)
    monkeypatch.setitem(PLUGIN_ARGS, "plain", Plain.parse_args)
    counts = _placed_in_runs(monkeypatch)
    conf = conf_from_tiers(("priority", "gang"), ("drf", "predicates", "plain", "nodeorder", "binpack"))
    c = cluster().nodes("n", 2, cpu="8", memory="64Gi", gpu=8)
    c.job("gang", replicas=10, gpu=1, cpu="1", memory="4Gi")
    result = c.cycle(conf)
    assert sum(len(b.binds) for b in result.binds) == 10
    assert counts == []
