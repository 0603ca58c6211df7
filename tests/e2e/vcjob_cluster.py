"""A small cluster for one e2e test of Volcano Jobs: its own nodes, Queues and PriorityClasses, with
`volcano-py scheduler` (a conf given as text) and `volcano-py controllers` running as processes."""

from __future__ import annotations

import json
import uuid

import pytest
from controlplane import GPU_RESOURCE, create_gpu_node, delete_node_and_pods, node_is_ready, wait_for
from kubernetes import client
from processes import Process

from scheduler.api.timestamps import parse_time
from scheduler.cache.events import COMPONENT

BATCH, SCHED = "batch.volcano.sh", "scheduling.volcano.sh"
TIMEOUT = 90  # generous for a loaded 2-core machine; every wait returns as soon as its condition holds
NODE_SET = "volcano-py.test/node-set"
CONF = """actions: "enqueue, allocate, preempt, reclaim, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
"""


# ---------------------------------------------------------------------------------------------- fixtures


@pytest.fixture
def vcjob_cluster(request, control_plane, core_v1, custom, namespace, tmp_path):
    """Nodes of this test, its Queues and PriorityClasses, and the scheduler and controllers as processes;
    all gone afterwards. The scheduler's conf is CONF, or the text a test gives it: a `scheduler_conf(text)`
    marker, or an `indirect` parametrize."""
    tag = uuid.uuid4().hex[:6]
    made = {"nodes": [], "queues": [], "classes": []}
    conf = tmp_path / "volcano-scheduler.conf"
    marker = request.node.get_closest_marker("scheduler_conf")
    conf.write_text(marker.args[0] if marker else getattr(request, "param", CONF))
    scheduler = Process(control_plane, tmp_path, "scheduler", "scheduler", "--scheduler-conf", str(conf),
                        "--schedule-period", "200ms", "--log-level", "debug")
    controllers = Process(control_plane, tmp_path, "controllers", "controllers", "--no-leader-elect")

    class Cluster:
        def nodes(self, count: int, gpus: int) -> list[str]:
            names = [f"pr-{tag}-{len(made['nodes']) + i}" for i in range(count)]
            for name in names:
                create_gpu_node(core_v1, name, gpus=gpus, cpu="16", labels={NODE_SET: tag})
                made["nodes"].append(name)
            for name in names:
                wait_for(lambda n=name: node_is_ready(core_v1, n), TIMEOUT, what=f"node {name} Ready")
            return names

        def queue(self, base: str, weight: int = 1, annotations: dict[str, str] | None = None) -> str:
            name = f"{base}-{tag}"
            custom.create_cluster_custom_object(SCHED, "v1beta1", "queues", {
                "apiVersion": f"{SCHED}/v1beta1", "kind": "Queue",
                "metadata": {"name": name, "annotations": annotations or {}},
                "spec": {"weight": weight, "reclaimable": True}})
            made["queues"].append(name)
            wait_for(lambda: queue_state(custom, name) == "Open", TIMEOUT, what=f"queue {name} Open")
            return name

        def priority_class(self, base: str, value: int) -> str:
            name = f"{base}-{tag}"
            client.SchedulingV1Api(core_v1.api_client).create_priority_class(
                {"metadata": {"name": name}, "value": value})
            made["classes"].append(name)
            return name

        @property
        def tag(self) -> str:
            return tag

        def scheduler_log(self) -> str:
            return scheduler.log()

        def job(self, name: str, queue: str, tasks: list[dict], min_available: int, **spec) -> None:
            for t in tasks:
                t["template"]["spec"]["nodeSelector"] = {NODE_SET: tag}
            custom.create_namespaced_custom_object(BATCH, "v1alpha1", namespace, "jobs", {
                "apiVersion": f"{BATCH}/v1alpha1", "kind": "Job", "metadata": {"name": name},
                "spec": {"schedulerName": "volcano-py", "queue": queue, "minAvailable": min_available,
                         "tasks": tasks, **spec}})

    try:
        yield Cluster()
    finally:
        for proc in (controllers, scheduler):
            code = proc.stop()
            if code:
                print(proc.log()[-3000:])
        core_v1.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
        for name in made["queues"]:
            custom.delete_cluster_custom_object(SCHED, "v1beta1", "queues", name)
        for name in made["classes"]:
            client.SchedulingV1Api(core_v1.api_client).delete_priority_class(name)
        for name in made["nodes"]:
            delete_node_and_pods(core_v1, name)


# ---------------------------------------------------------------------------------------------- helpers


def task(name: str, replicas: int, *, min_available: int | None = None, annotations: dict | None = None,
         labels: dict | None = None) -> dict:
    container = {"name": "main", "image": "busybox", "resources": {
        "requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {GPU_RESOURCE: "1"}}}
    spec = {"name": name, "replicas": replicas, "template": {
        "metadata": {"annotations": annotations or {}, "labels": labels or {}},
        "spec": {"terminationGracePeriodSeconds": 0, "containers": [container]}}}
    if min_available is not None:
        spec["minAvailable"] = min_available
    return spec


def queue_state(custom, name: str) -> str | None:
    return (custom.get_cluster_custom_object(SCHED, "v1beta1", "queues", name).get("status") or {}).get("state")


def pods_of(core_v1, namespace: str, job: str) -> list[dict]:
    raw = json.loads(core_v1.list_namespaced_pod(
        namespace, label_selector=f"volcano.sh/job-name={job}", _preload_content=False).data)["items"]
    return [p for p in raw if not p["metadata"].get("deletionTimestamp")]


def running(core_v1, namespace: str, job: str) -> dict[str, str]:
    """uid -> node of the job's Running pods."""
    return {p["metadata"]["uid"]: p["spec"]["nodeName"] for p in pods_of(core_v1, namespace, job)
            if p["status"].get("phase") == "Running" and p["spec"].get("nodeName")}


def wait_running(core_v1, namespace: str, job: str, count: int) -> dict[str, str]:
    return wait_for(lambda: (r := running(core_v1, namespace, job)) and len(r) == count and r, TIMEOUT,
                    interval=0.2, what=f"{count} pods of {job} Running")


def job_status(custom, namespace: str, name: str) -> dict:
    return custom.get_namespaced_custom_object(BATCH, "v1alpha1", namespace, "jobs", name).get("status") or {}


def scheduler_events(core_v1, namespace: str, reason: str, kind: str = "Pod") -> list[dict]:
    """The events of `reason` the scheduler reported on objects of `kind` in the namespace."""
    raw = json.loads(core_v1.list_namespaced_event(namespace, _preload_content=False).data)["items"]
    return [e for e in raw if e.get("reason") == reason and e["involvedObject"].get("kind") == kind
            and (e.get("source") or {}).get("component") == COMPONENT]


def evicted_uids(core_v1, namespace: str) -> set[str]:
    return {e["involvedObject"].get("uid", "") for e in scheduler_events(core_v1, namespace, "Evict")}


def podgroup_of(custom, namespace: str, job: str) -> dict | None:
    """The PodGroup the Job controller made for `job` (owned by it), once it exists."""
    items = custom.list_namespaced_custom_object(SCHED, "v1beta1", namespace, "podgroups")["items"]
    return next((pg for pg in items if any(o.get("name") == job for o in pg["metadata"].get("ownerReferences") or ())),
                None)


def pg_phase(pg: dict | None) -> str:
    return ((pg or {}).get("status") or {}).get("phase") or "Pending"


def started_at(pods: list[dict]) -> float:
    """A job's start, as minruntime and victimcost read it: its first pod's PodScheduled=True time."""
    times = [parse_time(c.get("lastTransitionTime")) for p in pods for c in p["status"].get("conditions") or ()
             if c.get("type") == "PodScheduled" and c.get("status") == "True"]
    assert times, "bound pods carry a PodScheduled condition"
    return min(times)


def others_in_cluster(core_v1, custom, namespace: str, gpus: int) -> list[str]:
    """What would share cluster-wide admission room with a test of this namespace: GPUs beyond the test's own
    `gpus`, other namespaces' live pods for volcano-py, other namespaces' admitted (Inqueue) PodGroups."""
    nodes = json.loads(core_v1.list_node(_preload_content=False).data)["items"]
    total = sum(int((n["status"].get("allocatable") or {}).get(GPU_RESOURCE, "0")) for n in nodes)
    pods = json.loads(core_v1.list_pod_for_all_namespaces(_preload_content=False).data)["items"]
    groups = custom.list_cluster_custom_object(SCHED, "v1beta1", "podgroups")["items"]
    return ([f"{total} GPUs"] if total != gpus else []) + [
        f"pod {p['metadata']['namespace']}/{p['metadata']['name']}" for p in pods
        if p["metadata"]["namespace"] != namespace and p["spec"].get("schedulerName") == "volcano-py"
        and p["status"].get("phase") not in ("Succeeded", "Failed")] + [
        f"podgroup {g['metadata']['namespace']}/{g['metadata']['name']}" for g in groups
        if g["metadata"]["namespace"] != namespace and pg_phase(g) == "Inqueue"]
