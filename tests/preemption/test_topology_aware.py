"""Topology-aware preemption (Volcano's `enableTopologyAwarePreemption`, actions/preempt/preempt.go): a
high-priority task whose anti-affinity repels a lower-priority pod on every node evicts that pod where it has
to, and only the pods it needs (Volcano's e2e "should preempt low priority pod with anti-affinity constraint",
on 4 nodes of 4 cpus)."""

from __future__ import annotations

from typing import Any

from scheduler.cycle import conf_from_text
from scheduler.sim.objects import pod_object
from scheduler.testing import cluster

CONF = """
actions: "allocate, preempt, reclaim, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
configurations:
- name: preempt
  arguments:
    enableTopologyAwarePreemption: {aware}
"""


def _term(app: str) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": "kubernetes.io/hostname"}


def _job(c: Any, name: str, replicas: int, cpu: str, priority: str, app: str, affinity: dict[str, Any],
         minimum: int = 1) -> None:
    c.sim.add_podgroup({"metadata": {"name": name, "namespace": "default"},
                        "spec": {"minMember": minimum, "queue": "default", "priorityClassName": priority},
                        "status": {"phase": "Pending"}})
    for i in range(replicas):
        pod = pod_object(f"{name}-{i}", group=name, cpu=cpu, memory="1Gi", priority_class=priority,
                         affinity=affinity)
        pod["metadata"].setdefault("labels", {}).update({"app": app, "volcano.sh/preemptable": "true"})
        c.sim.add_pod(pod)


def _run(aware: bool) -> dict[str, int]:
    c = cluster().nodes("n", 4, cpu="4", memory="16Gi")
    for name, value in (("high", 1000), ("middle", 500), ("low", 10)):
        c.sim.add_priority_class(name, value)
    conf = conf_from_text(CONF.format(aware="true" if aware else "false"), source="test")
    _job(c, "blocker", 4, "1", "middle", "blocker", {"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [_term("blocker")]}})
    c.cycles(2, conf)
    _job(c, "bystander", 4, "1", "low", "bystander", {
        "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [_term("blocker")]},
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [_term("bystander")]}})
    c.cycles(2, conf)
    _job(c, "high", 3, "3", "high", "preemptor", {"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [_term("blocker")]}}, minimum=3)
    for _ in range(8):
        c.cycle(conf)
        for key in list(c.sim.evicted):  # the evicted pods' controller does not recreate them here
            c.sim.delete_pod(key)
        c.sim.evicted.clear()
    return {name: len(c.sim.bound(name)) for name in ("blocker", "bystander", "high")}


def test_the_preemptor_evicts_the_pods_its_anti_affinity_repels_and_no_more() -> None:
    assert _run(aware=True) == {"blocker": 1, "bystander": 4, "high": 3}


def test_without_the_switch_no_node_is_a_candidate() -> None:
    assert _run(aware=False) == {"blocker": 4, "bystander": 4, "high": 0}
