"""The simulator gives up a partly bound gang as the production scheduler does (adapter/partial.py, issue 17).

A gang of 3 holds two nodes with two pods (one owned by a controller, one not); its third pod fits nowhere. Past
the timeout, the scheduler's loop evicts the owned pod (its controller recreates it) and marks the PodGroup
`Unknown`, saying why the other pod was kept. The simulator, on its own clock, must decide exactly the same.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from snapshot_values import result_value

from scheduler.adapter.partial import REASON, PartialGangPolicy
from scheduler.api.phases import PodGroupPhase
from scheduler.api.snapshot import CycleResult
from scheduler.api.timestamps import rfc3339
from scheduler.cache.cluster_cache import ClusterCache
from scheduler.cache.runner import ConfWatcher, SchedulerLoop
from scheduler.cycle import builtin_default_conf, run_cycle
from scheduler.sim.cluster import InMemoryCluster
from scheduler.sim.objects import node_object, pod_object
from scheduler.sim.replay import volcano_py

Obj = dict[str, Any]
BOUND = 1_700_000_000.0  # when the two pods were bound, and when the third was created
TIMEOUT = 60.0
CONF = builtin_default_conf()


def objects() -> dict[str, list[Obj]]:
    nodes = [node_object(f"n{i}", cpu="4", memory="16Gi") for i in (1, 2)]
    queue = {"metadata": {"name": "default"}, "spec": {"weight": 1}}
    pg = {"metadata": {"name": "g", "namespace": "ns"}, "spec": {"minMember": 3, "queue": "default"},
          "status": {"phase": "Running"}}
    pods = [pod_object(f"g-{i}", namespace="ns", group="g", cpu="3") for i in range(2)]
    pods.append(pod_object("g-2", namespace="ns", group="g", cpu="8"))  # fits on no node
    for pod, node in zip(pods, ("n1", "n2"), strict=False):
        pod["spec"]["nodeName"] = node
        pod["status"] = {"phase": "Running", "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": rfc3339(BOUND)}]}
    pods[0]["metadata"]["ownerReferences"] = [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                                               "name": "g", "uid": "uid-g", "controller": True}]
    out = {"Node": nodes, "Queue": [queue], "PodGroup": [pg], "Pod": pods}
    for items in out.values():
        for i, obj in enumerate(items):
            obj["metadata"]["resourceVersion"] = str(10 + i)
            obj["metadata"]["creationTimestamp"] = rfc3339(BOUND)
    return out


def production_cycle(now: float) -> CycleResult:
    cache = ClusterCache(None, {"volcano-py"}, "default", clock=lambda: now)
    stores = {"Node": cache.nodes, "Queue": cache.queues, "PodGroup": cache.podgroups, "Pod": cache.pods}
    for kind, items in objects().items():
        for obj in items:
            cache.watcher._on_event(stores[kind], "ADDED", copy.deepcopy(obj))
    loop = SchedulerLoop(cache, ConfWatcher(None), partial_gang_timeout=TIMEOUT)
    snapshot = cache.snapshot()
    result = run_cycle(snapshot, CONF)
    loop._give_up_partial_gangs(snapshot, result)  # what run_once does between the cycle and apply
    return result


def simulator(now: float) -> InMemoryCluster:
    sim = InMemoryCluster(now=BOUND)
    objs = objects()
    for node in objs["Node"]:
        sim.add_node(node)
    sim.add_queue(objs["Queue"][0])
    sim.add_podgroup(objs["PodGroup"][0])
    for pod in objs["Pod"]:
        sim.add_pod(pod)
    sim.now = now
    return sim


def simulator_cycle(sim: InMemoryCluster) -> CycleResult:
    return volcano_py(sim, CONF, PartialGangPolicy(TIMEOUT))(sim.snapshot())


@pytest.mark.parametrize("after", [TIMEOUT / 2, TIMEOUT * 2], ids=["before the timeout", "after the timeout"])
def test_the_simulator_decides_a_partial_gang_as_production_does(after: float) -> None:
    now = BOUND + after
    assert result_value(simulator_cycle(simulator(now))) == result_value(production_cycle(now))


def test_past_the_timeout_the_simulator_evicts_the_owned_pod_and_marks_the_gang_unknown() -> None:
    sim = simulator(BOUND + TIMEOUT * 2)
    result = simulator_cycle(sim)
    assert [e.task for e in result.evictions] == ["ns/g-0"]
    [status] = [s for s in result.podgroups if s.job == "ns/g"]
    assert status.phase is PodGroupPhase.UNKNOWN
    assert any(c.reason == REASON for c in status.conditions)
    sim.apply(result)
    assert "ns/g-0" not in sim.pods and "ns/g-1" in sim.pods
    assert sim.podgroup("ns/g")["status"]["phase"] == "Unknown"


def test_before_the_timeout_the_simulator_keeps_waiting() -> None:
    result = simulator_cycle(simulator(BOUND + TIMEOUT / 2))
    assert not result.evictions
    assert not any(c.reason == REASON for s in result.podgroups for c in s.conditions)
