"""The cluster-builder DSL tests and examples use, on the simulator's in-memory cluster.

    c = cluster().node("n1", gpu=8).queue("q1", weight=2).job("j1", queue="q1", min_available=4, replicas=4, gpu=1)
    results = c.cycle()            # one scheduling cycle on the built cluster
    assert len(c.sim.bound("j1")) == 4
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from scheduler.api.reasons import NodeFilter, NodesUnavailable, Reason
from scheduler.api.snapshot import ClusterSnapshot, CycleResult
from scheduler.cycle import builtin_default_conf, conf_from_text, run_cycle
from scheduler.framework.conf import SchedulerConf
from scheduler.framework.memo import CycleMemo
from scheduler.sim.cluster import InMemoryCluster
from scheduler.sim.objects import node_object, pod_object

__all__ = ["ClusterBuilder", "cluster", "node_object", "pod_object"]


class ClusterBuilder:
    def __init__(self) -> None:
        self.sim = InMemoryCluster()
        self.memo = CycleMemo()  # carried across cycles, as the scheduler's runner does
        self.sim.add_queue({"metadata": {"name": "default"}, "spec": {"weight": 1}})

    # -- cluster --------------------------------------------------------------------------------------
    def node(self, name: str, **kwargs: Any) -> ClusterBuilder:
        self.sim.add_node(node_object(name, **kwargs))
        return self

    def nodes(self, prefix: str, count: int, **kwargs: Any) -> ClusterBuilder:
        for i in range(count):
            self.node(f"{prefix}{i}", **kwargs)
        return self

    def queue(
        self,
        name: str,
        *,
        weight: int = 1,
        capability: Mapping[str, Any] | None = None,
        guarantee: Mapping[str, Any] | None = None,
        deserved: Mapping[str, Any] | None = None,
        state: str = "Open",
        reclaimable: bool = True,
        parent: str | None = None,
    ) -> ClusterBuilder:
        spec: dict[str, Any] = {"weight": weight, "reclaimable": reclaimable}
        if parent:
            spec["parent"] = parent
        if deserved:
            spec["deserved"] = dict(deserved)
        if capability:
            spec["capability"] = dict(capability)
        if guarantee:
            spec["guarantee"] = {"resource": dict(guarantee)}
        self.sim.add_queue({"metadata": {"name": name}, "spec": spec, "status": {"state": state}})
        return self

    def hypernode(self, name: str, tier: int, members: Sequence[str], *, kind: str = "Node",
                  tier_name: str = "") -> ClusterBuilder:
        """A HyperNode whose members (nodes, or HyperNodes with kind="HyperNode") are named exactly."""
        selected = [{"type": kind, "selector": {"exactMatch": {"name": m}}} for m in members]
        spec: dict[str, object] = {"tier": tier, "members": selected}
        if tier_name:
            spec["tierName"] = tier_name
        self.sim.add_hypernode({
            "apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": name},
            "spec": spec,
        })
        return self

    def priority_class(self, name: str, value: int) -> ClusterBuilder:
        self.sim.add_priority_class(name, value)
        return self

    # -- workload -------------------------------------------------------------------------------------
    def job(
        self,
        name: str,
        *,
        queue: str = "default",
        replicas: int = 1,
        min_available: int | None = None,
        namespace: str = "default",
        priority_class: str | None = None,
        min_resources: Mapping[str, Any] | None = None,
        phase: str = "Pending",
        **pod_kwargs: Any,
    ) -> ClusterBuilder:
        """A PodGroup with `replicas` identical pods `<name>-<i>` (the shape Kubeflow's operator creates)."""
        spec: dict[str, Any] = {"minMember": replicas if min_available is None else min_available, "queue": queue}
        if priority_class:
            spec["priorityClassName"] = priority_class
        if min_resources:
            spec["minResources"] = dict(min_resources)
        self.sim.add_podgroup(
            {"metadata": {"name": name, "namespace": namespace}, "spec": spec, "status": {"phase": phase}}
        )
        for i in range(replicas):
            self.sim.add_pod(
                pod_object(
                    f"{name}-{i}", namespace=namespace, group=name, priority_class=priority_class, **pod_kwargs
                )
            )
        return self

    def pod(self, name: str, **kwargs: Any) -> ClusterBuilder:
        self.sim.add_pod(pod_object(name, **kwargs))
        return self

    # -- running --------------------------------------------------------------------------------------
    def cycle(self, conf: SchedulerConf | None = None, *, start: bool = True) -> CycleResult:
        """One scheduling cycle; bound pods then start Running, as kubelets would make them."""
        result = run_cycle(self.sim.snapshot(), conf or builtin_default_conf(), memo=self.memo)
        self.sim.apply(result)
        if start:
            self.sim.start_bound_pods()
        self.sim.now += 1.0
        return result

    def cycles(self, n: int, conf: SchedulerConf | None = None) -> list[CycleResult]:
        return [self.cycle(conf) for _ in range(n)]


def conf_text_from_tiers(
    *tiers: Sequence[str | Mapping[str, Any]],
    actions: str = "enqueue, allocate, backfill",
    configurations: Mapping[str, Mapping[str, Any]] | None = None,
) -> str:
    """A volcano-scheduler.conf's text from tiers of plugin names (or full plugin entries with arguments): what an
    e2e test puts in the scheduler's ConfigMap, or a simulator test loads."""
    doc: dict[str, Any] = {
        "actions": actions,
        "tiers": [{"plugins": [p if isinstance(p, Mapping) else {"name": p} for p in tier]} for tier in tiers],
    }
    if configurations:
        doc["configurations"] = [{"name": k, "arguments": dict(v)} for k, v in configurations.items()]
    text: str = yaml.safe_dump(doc)
    return text


def conf_from_tiers(
    *tiers: Sequence[str | Mapping[str, Any]],
    actions: str = "enqueue, allocate, backfill",
    configurations: Mapping[str, Mapping[str, Any]] | None = None,
) -> SchedulerConf:
    """A conf from tiers of plugin names (or full plugin entries with arguments), as a test wants it."""
    return conf_from_text(conf_text_from_tiers(*tiers, actions=actions, configurations=configurations),
                          source="test.conf")


def node_filters(reasons: Iterable[Reason]) -> set[NodeFilter]:
    """The node filters a job's published `NodesUnavailable` names (what turned its pods' nodes away)."""
    return {count.filter for r in reasons if isinstance(r, NodesUnavailable) for count in r.counts}


def cluster() -> ClusterBuilder:
    return ClusterBuilder()


class LoopCache:
    """What the scheduler's loop (`cache/runner.py` SchedulerLoop) asks of its cache, on a small in-memory
    cluster (one 8-GPU node, a gang of two): for tests that run the real loop with only the cache stood in.
    Subclasses override what their test watches (`snapshot`, `apply`)."""

    def __init__(self) -> None:
        self._sim = cluster().node("n0", gpu=8).job("j", replicas=2, gpu=1).sim

    def snapshot(self) -> ClusterSnapshot:
        return self._sim.snapshot()

    def apply(self, result: CycleResult) -> None:
        pass

    def bound_at(self, key: str) -> float | None:  # the partial-gang policy's questions
        return None

    def controller_owned(self, job: str) -> bool:
        return False

    def has_podgroup(self, job: str) -> bool:
        return True


# ---- the Volcano snapshot the oracle tests read ---------------------------------------------------------------
VOLCANO_CI_CONF = "installer/helm/chart/volcano/config/volcano-scheduler-ci.conf"


def volcano_snapshot() -> Path:
    """Volcano's source snapshot: $VOLCANO_SRC, else ../shared/peers/volcano beside the checkout, else the
    machine's copy (/work/shared, as tools/conformance/build-volcano.sh defaults), so a clone anywhere finds it."""
    if os.environ.get("VOLCANO_SRC"):
        return Path(os.environ["VOLCANO_SRC"])
    beside = Path(__file__).resolve().parents[2] / "shared" / "peers" / "volcano"
    return beside if beside.exists() else Path("/work/shared/peers/volcano")
