"""Faults on the controllers' API calls, injected by the fault proxy (fault_proxy.py) between `volcano-py
controllers` and the apiserver (issue 22); the scheduler talks to the apiserver directly.

kopf only logs an error of a watch handler, it does not run the handler again, so before the controllers
retried a failed sync themselves (scheduler/controllers/timers.py) each of these faults left a Job, a PodGroup
or a Queue stale for good: nothing else changes while a Job's pods are not created. Volcano's controllers
requeue a failed request with backoff (pkg/controllers/job/job_controller.go, processNextReq). Each test asserts
that its fault fired (the proxy counts) and that the objects end right once the fault clears: every pod created
once, the Job Running, its status and its Queue's counts written.
"""

from __future__ import annotations

import uuid

import pytest
from chaos_helpers import GROUP, NODE_SET, TIMEOUT, Process, list_pods, make_nodes, start_scheduler
from controlplane import GPU_RESOURCE, wait_for
from fault_proxy import Respond, Rule

BATCH = "batch.volcano.sh"


@pytest.fixture(scope="module")
def components(control_plane, proxied, tmp_path_factory):
    """The scheduler (direct) and the controllers (through the proxy) for the module."""
    proxy, kubeconfig = proxied
    log_dir = tmp_path_factory.mktemp("controller-faults")
    scheduler = start_scheduler(control_plane, log_dir)
    controllers = Process(control_plane, log_dir, "controllers", "controllers", "--no-leader-elect",
                          kubeconfig=kubeconfig)
    try:
        yield proxy, controllers
    finally:
        proxy.clear()
        controllers.stop()
        scheduler.stop()


@pytest.fixture
def scene(components, control_plane, core_v1, custom, new_namespace):
    proxy, controllers = components
    proxy.clear()
    tag = uuid.uuid4().hex[:6]
    nodes = make_nodes(core_v1, tag, 1)
    try:
        yield proxy, controllers, new_namespace("ctl-faults"), tag
    finally:
        proxy.clear()
        for name in nodes:
            core_v1.delete_node(name)


def job_manifest(name: str, tag: str, replicas: int, queue: str = "default") -> dict:
    container = {"name": "main", "image": "busybox",
                 "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {GPU_RESOURCE: "1"}}}
    return {
        "apiVersion": f"{BATCH}/v1alpha1", "kind": "Job", "metadata": {"name": name},
        "spec": {
            "schedulerName": "volcano-py", "minAvailable": replicas, "queue": queue,
            "tasks": [{"name": "worker", "replicas": replicas, "template": {"spec": {
                "nodeSelector": {NODE_SET: tag}, "terminationGracePeriodSeconds": 0, "containers": [container]}}}],
        },
    }


def job_state(custom, namespace: str, name: str) -> dict:
    job = custom.get_namespaced_custom_object(BATCH, "v1alpha1", namespace, "jobs", name)
    return job.get("status") or {}


def running_pods(core_v1, namespace: str) -> list[str]:
    return sorted(p["metadata"]["name"] for p in list_pods(core_v1, namespace)
                  if p["spec"].get("nodeName") and p["status"].get("phase") == "Running")


def alive_without_traceback(controllers: Process) -> None:
    assert controllers.alive(), controllers.log()[-3000:]
    assert "Traceback (most recent call last)" not in controllers.log(), controllers.log()[-3000:]


def test_creates_answered_500_are_made_again_and_each_pod_is_created_once(scene, core_v1, custom):
    """The Job's PodGroup create fails twice and each of its 4 pod creates fails once: nothing else happens to
    the Job meanwhile, so only the controllers' own retry can make them."""
    proxy, controllers, ns, tag = scene
    pod_creates = rf"^/api/v1/namespaces/{ns}/pods$"
    pg_creates = rf"^/apis/{GROUP}/v1beta1/namespaces/{ns}/podgroups$"
    pg_rule = proxy.add(Rule("POST", pg_creates, Respond(500), times=2))
    pod_rule = proxy.add(Rule("POST", pod_creates, Respond(500), times=4))
    custom.create_namespaced_custom_object(BATCH, "v1alpha1", ns, "jobs", job_manifest("train", tag, 4))
    wait_for(lambda: running_pods(core_v1, ns) == [f"train-worker-{i}" for i in range(4)], TIMEOUT, interval=0.2,
             what="the job's 4 pods running")
    wait_for(lambda: (job_state(custom, ns, "train").get("state") or {}).get("phase") == "Running", TIMEOUT,
             what="the job Running")
    assert (pg_rule.fired, pod_rule.fired) == (2, 4)
    assert [s.status for s in proxy.requests("POST", pg_creates)] == [500, 500, 201]
    answered = [s.status for s in proxy.requests("POST", pod_creates)]
    assert answered.count(500) == 4 and answered.count(201) == 4, answered  # no pod created twice
    assert len(list_pods(core_v1, ns)) == 4
    alive_without_traceback(controllers)


def test_job_status_writes_that_fail_are_written_once_they_work(scene, core_v1, custom):
    proxy, controllers, ns, tag = scene
    rule = proxy.add(Rule("PATCH", rf"^/apis/{BATCH}/v1alpha1/namespaces/{ns}/jobs/[^/]+/status$", Respond(500)))
    custom.create_namespaced_custom_object(BATCH, "v1alpha1", ns, "jobs", job_manifest("train", tag, 2))
    wait_for(lambda: len(running_pods(core_v1, ns)) == 2, TIMEOUT, interval=0.2, what="the pods running")
    wait_for(lambda: rule.fired >= 3, TIMEOUT, what="three status writes refused")
    assert (job_state(custom, ns, "train").get("state") or {}).get("phase") != "Running"  # the fault held
    proxy.remove(rule)
    wait_for(lambda: (s := job_state(custom, ns, "train")).get("running") == 2
             and (s.get("state") or {}).get("phase") == "Running", TIMEOUT, interval=0.2,
             what="the job's status written once writes work: Running, 2 running")
    alive_without_traceback(controllers)


def test_queue_status_writes_that_fail_are_written_once_they_work(scene, core_v1, custom):
    """Every status write of the Queue fails while its Job's PodGroup goes Pending, Inqueue, Running: no PodGroup
    event comes after the fault clears, so the counts are right only if the failed write runs again."""
    proxy, controllers, ns, tag = scene
    queue = f"q-{tag}"
    custom.create_cluster_custom_object(GROUP, "v1beta1", "queues", {
        "apiVersion": f"{GROUP}/v1beta1", "kind": "Queue", "metadata": {"name": queue}, "spec": {"weight": 1}})
    try:
        wait_for(lambda: (custom.get_cluster_custom_object(GROUP, "v1beta1", "queues", queue).get("status") or {})
                 .get("state") == "Open", TIMEOUT, what="the queue Open")
        rule = proxy.add(Rule("PATCH", rf"^/apis/{GROUP}/v1beta1/queues/{queue}/status$", Respond(500)))
        custom.create_namespaced_custom_object(BATCH, "v1alpha1", ns, "jobs", job_manifest("train", tag, 2, queue))
        wait_for(lambda: len(running_pods(core_v1, ns)) == 2, TIMEOUT, interval=0.2, what="the pods running")

        def podgroup_running() -> bool:
            groups = custom.list_namespaced_custom_object(GROUP, "v1beta1", ns, "podgroups")["items"]
            return [(g.get("status") or {}).get("phase") for g in groups] == ["Running"]

        wait_for(podgroup_running, TIMEOUT, what="the PodGroup Running")
        wait_for(lambda: rule.fired >= 2, TIMEOUT, what="queue status writes refused")
        status = custom.get_cluster_custom_object(GROUP, "v1beta1", "queues", queue).get("status") or {}
        assert not status.get("running"), status  # the fault held
        proxy.remove(rule)
        wait_for(lambda: (custom.get_cluster_custom_object(GROUP, "v1beta1", "queues", queue).get("status") or {})
                 .get("running") == 1, TIMEOUT, interval=0.2, what="the queue counts 1 running PodGroup")
        alive_without_traceback(controllers)
    finally:
        for job in custom.list_namespaced_custom_object(BATCH, "v1alpha1", ns, "jobs")["items"]:
            custom.delete_namespaced_custom_object(BATCH, "v1alpha1", ns, "jobs", job["metadata"]["name"])
        wait_for(lambda: not list_pods(core_v1, ns), TIMEOUT, what="the job's pods gone")
        custom.delete_cluster_custom_object(GROUP, "v1beta1", "queues", queue)
