"""The cluster-builder DSL tests and examples use, on the simulator's in-memory cluster.

    c = cluster().node("n1", gpu=8).queue("q1", weight=2).job("j1", queue="q1", min_available=4, replicas=4, gpu=1)
    results = c.cycle()            # one scheduling cycle on the built cluster
    assert len(c.sim.bound("j1")) == 4
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scheduler.api.snapshot import CycleResult
from scheduler.cycle import builtin_default_conf, run_cycle
from scheduler.framework.conf import SchedulerConf
from scheduler.sim.cluster import InMemoryCluster

Obj = dict[str, Any]


def node_object(
    name: str,
    *,
    cpu: str | int = "64",
    memory: str = "512Gi",
    gpu: int | str = 0,
    pods: int = 110,
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, str]] = (),
    unschedulable: bool = False,
    ready: bool = True,
    extra: Mapping[str, Any] | None = None,
) -> Obj:
    allocatable: dict[str, Any] = {"cpu": str(cpu), "memory": memory, "pods": str(pods)}
    if gpu:
        allocatable["nvidia.com/gpu"] = str(gpu)
    allocatable.update(extra or {})
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": {"taints": [dict(t) for t in taints], "unschedulable": unschedulable},
        "status": {
            "allocatable": allocatable,
            "capacity": allocatable,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def pod_object(
    name: str,
    *,
    namespace: str = "default",
    group: str | None = None,
    role: str = "",
    gpu: int | str = 0,
    cpu: str | None = "1",
    memory: str | None = "1Gi",
    limits_only: bool = False,
    priority_class: str | None = None,
    node_selector: Mapping[str, str] | None = None,
    tolerations: Sequence[Mapping[str, str]] = (),
    affinity: Mapping[str, Any] | None = None,
    scheduler_name: str = "volcano-py",
) -> Obj:
    quantities: dict[str, Any] = {}
    if cpu:
        quantities["cpu"] = cpu
    if memory:
        quantities["memory"] = memory
    if gpu:
        quantities["nvidia.com/gpu"] = str(gpu)
    resources = {"limits": quantities} if limits_only else {"requests": quantities}
    annotations: dict[str, str] = {}
    labels: dict[str, str] = {}
    if group:
        annotations["scheduling.k8s.io/group-name"] = group
    if role:
        annotations["volcano.sh/task-spec"] = role
        labels["volcano.sh/task-spec"] = role
    spec: dict[str, Any] = {
        "schedulerName": scheduler_name,
        "containers": [{"name": "main", "image": "busybox", "resources": resources if quantities else {}}],
    }
    if priority_class:
        spec["priorityClassName"] = priority_class
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if tolerations:
        spec["tolerations"] = [dict(t) for t in tolerations]
    if affinity:
        spec["affinity"] = dict(affinity)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations, "labels": labels},
        "spec": spec,
        "status": {"phase": "Pending"},
    }


class ClusterBuilder:
    def __init__(self) -> None:
        self.sim = InMemoryCluster()
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
        state: str = "Open",
    ) -> ClusterBuilder:
        spec: dict[str, Any] = {"weight": weight}
        if capability:
            spec["capability"] = dict(capability)
        if guarantee:
            spec["guarantee"] = {"resource": dict(guarantee)}
        self.sim.add_queue({"metadata": {"name": name}, "spec": spec, "status": {"state": state}})
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
        result = run_cycle(self.sim.snapshot(), conf or builtin_default_conf())
        self.sim.apply(result)
        if start:
            self.sim.start_bound_pods()
        self.sim.now += 1.0
        return result

    def cycles(self, n: int, conf: SchedulerConf | None = None) -> list[CycleResult]:
        return [self.cycle(conf) for _ in range(n)]


def cluster() -> ClusterBuilder:
    return ClusterBuilder()
