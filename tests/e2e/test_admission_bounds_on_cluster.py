"""Issue 31's admission bounds on a real control plane: with `volcano-py webhook` on, an over-limit Job, a pod
template Kubernetes refuses (`nvidia.com/gpu: 0.5`) and deleting the `default` queue or a parent queue are refused,
each naming the field; with the webhook off, the controllers say FailedCreate on the Job (event and condition),
recreate `default` when it is deleted, and tell the Job of a deleted queue that its queue is gone."""

from __future__ import annotations

import base64
import contextlib
import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from controlplane import REPO_ROOT, free_port, wait_for
from inprocess import kwok_nodes, queue_status, running_controllers, running_scheduler
from kubernetes import client
from test_webhook import _healthy, job_hook

BATCH, SCHEDULING = "batch.volcano.sh", "scheduling.volcano.sh"
TIMEOUT = 60
MAX_PODS = 10  # the webhook's --max-pods-per-job here: below the CRD's 100000, so the webhook is what refuses


def vcjob(name: str, *replicas: int, queue: str = "default", gpu: str | None = None) -> dict:
    resources = {"limits": {"nvidia.com/gpu": gpu}, "requests": {"nvidia.com/gpu": gpu}} if gpu else {}
    return {"apiVersion": f"{BATCH}/v1alpha1", "kind": "Job", "metadata": {"name": name},
            "spec": {"schedulerName": "volcano-py", "queue": queue, "tasks": [
                {"name": f"t{i}", "replicas": n, "template": {"spec": {"containers": [
                    {"name": "c", "image": "busybox", "resources": resources}]}}}
                for i, n in enumerate(replicas)]}}


def create_queue(custom, name: str, **spec) -> None:
    try:
        custom.create_cluster_custom_object(SCHEDULING, "v1beta1", "queues", {
            "apiVersion": f"{SCHEDULING}/v1beta1", "kind": "Queue", "metadata": {"name": name},
            "spec": {"weight": 1, **spec}})
    except client.ApiException as exc:
        if exc.status != 409:
            raise


def delete_queue(custom, name: str) -> None:
    try:
        custom.delete_cluster_custom_object(SCHEDULING, "v1beta1", "queues", name)
    except client.ApiException as exc:
        if exc.status != 404:
            raise


def denial(call) -> tuple[int, str] | None:
    """(HTTP status, the webhook's own message) when the apiserver refuses `call` for it, else None."""
    try:
        call()
    except client.ApiException as exc:
        message = json.loads(exc.body)["message"]
        assert "denied the request: " in message, message  # refused by the webhook, not by the schema
        return exc.status, message.split("denied the request: ", 1)[1]
    return None


@pytest.fixture
def webhook(control_plane, kubeconfig, api_client, namespace, tmp_path: Path) -> Iterator[None]:
    """The webhook on loopback serving /jobs/validate (this namespace's Jobs) and /queues/validate (queue
    DELETEs, failurePolicy Ignore so no later test is held by a configuration the apiserver still caches)."""
    port, health = free_port(), free_port()
    log = tmp_path / "webhook.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "scheduler.cli", "webhook", "--kubeconfig", str(kubeconfig),
             f"--tls-cert-file={control_plane.serving_crt}", f"--tls-private-key-file={control_plane.serving_key}",
             "--listen-address=127.0.0.1", f"--port={port}", "--enable-healthz",
             f"--healthz-address=127.0.0.1:{health}", "--enabled-admission=/jobs/validate,/queues/validate",
             f"--max-pods-per-job={MAX_PODS}"],
            stdout=out, stderr=subprocess.STDOUT, cwd=REPO_ROOT)
    admission = client.AdmissionregistrationV1Api(api_client)
    name = f"volcano-py-bounds-{uuid.uuid4().hex[:6]}"
    ca_bundle = base64.b64encode(control_plane.serving_ca.crt.read_bytes()).decode()
    jobs = {**job_hook("validate", ["CREATE", "UPDATE"], port, ca_bundle, namespace),
            "name": "validatejob.volcano-py.io"}
    queues = {"name": "validatequeue.volcano-py.io",
              "clientConfig": {"url": f"https://127.0.0.1:{port}/queues/validate", "caBundle": ca_bundle},
              "rules": [{"operations": ["DELETE"], "apiGroups": [SCHEDULING], "apiVersions": ["v1beta1"],
                         "resources": ["queues"]}],
              "failurePolicy": "Ignore", "sideEffects": "None", "admissionReviewVersions": ["v1"],
              "timeoutSeconds": 10}
    try:
        wait_for(lambda: proc.poll() is None and _healthy(f"http://127.0.0.1:{health}/healthz"), TIMEOUT,
                 what="the webhook's /healthz")
        admission.create_validating_webhook_configuration({"metadata": {"name": name}, "webhooks": [jobs, queues]})
        yield
    finally:
        with contextlib.suppress(client.ApiException):
            admission.delete_validating_webhook_configuration(name)
        proc.terminate()
        assert proc.wait(TIMEOUT) == 0, log.read_text(errors="replace")
    assert "Traceback" not in log.read_text(errors="replace")


def test_the_webhook_refuses_over_limit_jobs_refused_templates_and_protected_queue_deletes(
        webhook, custom, core_v1, namespace) -> None:
    create_queue(custom, "default")  # the Jobs' queue must exist (no scheduler may have created it yet)

    def create(body: dict) -> None:
        custom.create_namespaced_custom_object(BATCH, "v1alpha1", namespace, "jobs", body)

    probes = iter(range(10_000))
    # The apiserver picks new webhook configurations up asynchronously: wait until it calls ours.
    wait_for(lambda: denial(lambda: create(vcjob(f"probe-{next(probes)}", 6, 6))) is not None, TIMEOUT,
             what="the apiserver calling the webhook")
    assert denial(lambda: create(vcjob("too-big", 6, 6))) == (
        400, f"spec.tasks: 12 pods in all (the sum of the replicas of its tasks) exceed the limit of {MAX_PODS} "
             "pods per Job")

    refused = denial(lambda: create(vcjob("half-gpu", 1, gpu="0.5")))
    assert refused is not None
    status, message = refused
    assert status == 400
    assert message.startswith("spec.tasks[0].template: task 't0': Kubernetes refuses its pods: ")
    # Kubernetes' own pod validation message, naming the container's field
    assert "spec.containers[0].resources.requests[nvidia.com/gpu]" in message and "must be an integer" in message

    assert denial(lambda: create(vcjob("fine", 2, gpu="1"))) is None
    assert core_v1.list_namespaced_pod(namespace).items == []  # the dry runs stored nothing

    # Queues: default and a parent are kept; a leaf, then the emptied parent, go. (The queue hook is in the same
    # configuration as the job hook the apiserver already calls: no probe, which could delete `default`.)
    assert denial(lambda: delete_queue(custom, "default")) == (400, "metadata.name: the 'default' queue cannot be "
                                                                    "deleted")
    tag = uuid.uuid4().hex[:6]
    parent, child = f"parent-{tag}", f"child-{tag}"
    create_queue(custom, parent)
    create_queue(custom, child, parent=parent)
    try:
        assert denial(lambda: delete_queue(custom, parent)) == (
            400, f"metadata.name: queue '{parent}' cannot be deleted because it has 1 child queues: {child}")
        assert denial(lambda: delete_queue(custom, child)) is None
        wait_for(lambda: denial(lambda: delete_queue(custom, parent)) is None, TIMEOUT,
                 what="the parent deletable once its child is gone")
    finally:
        for name in (child, parent):
            delete_queue(custom, name)


# ---- the webhook off: the controllers' fallback ------------------------------------------------------------------
@pytest.fixture(scope="module")
def scheduler(control_plane):
    with running_scheduler(control_plane) as running:
        yield running


@pytest.fixture(scope="module")
def gpu_nodes(core_v1):
    with kwok_nodes(core_v1, [f"bounds-{uuid.uuid4().hex[:6]}"], gpus=8, cpu="64") as names:
        yield names


@pytest.fixture(scope="module")
def controllers(control_plane, custom, scheduler, gpu_nodes, tmp_path_factory):
    with running_controllers(control_plane, custom, tmp_path_factory.mktemp("controllers"),
                             "--leader-elect-lease-name", "volcano-py-controllers-bounds") as ctl:
        yield ctl


def conditions(custom, namespace: str, name: str) -> list[dict]:
    job = custom.get_namespaced_custom_object(BATCH, "v1alpha1", namespace, "jobs", name)
    return list((job.get("status") or {}).get("conditions") or [])


def warnings(core_v1, namespace: str, name: str, reason: str) -> list:
    return core_v1.list_namespaced_event(
        namespace, field_selector=f"involvedObject.name={name},type=Warning,reason={reason}").items


def test_without_the_webhook_a_refused_pod_is_a_failed_create_event_and_condition(
        controllers, custom, core_v1, namespace) -> None:
    custom.create_namespaced_custom_object(BATCH, "v1alpha1", namespace, "jobs", vcjob("half-gpu", 2, gpu="0.5"))
    said = wait_for(lambda: [c for c in conditions(custom, namespace, "half-gpu") if c.get("reason") == "FailedCreate"],
                    TIMEOUT, what="a FailedCreate condition on the Job")
    assert len(said) == 1 and said[0]["status"] == "Pending"
    assert said[0]["message"].startswith("Error creating pods: pod half-gpu-t0-")
    assert "must be an integer" in said[0]["message"]
    (event,) = wait_for(lambda: warnings(core_v1, namespace, "half-gpu", "FailedCreate"), TIMEOUT,
                        what="a FailedCreate event")
    assert event.message == said[0]["message"]
    assert core_v1.list_namespaced_pod(namespace).items == []


def test_without_the_webhook_default_is_recreated_and_a_deleted_queue_is_said_on_its_job(
        controllers, custom, namespace) -> None:
    for _ in range(2):  # whenever it is deleted, not once per process (the scheduler creates it at start only)
        before = _uid(custom, "default")
        assert before is not None
        delete_queue(custom, "default")
        wait_for(lambda b=before: _uid(custom, "default") not in (None, b), TIMEOUT,
                 what="the default queue created again")
    wait_for(lambda: queue_status(custom, "default").get("state") == "Open", TIMEOUT, what="the new default Open")

    gone = f"gone-{uuid.uuid4().hex[:6]}"
    create_queue(custom, gone)
    delete_queue(custom, gone)
    wait_for(lambda: _uid(custom, gone) is None, TIMEOUT, what=f"queue {gone} deleted")
    custom.create_namespaced_custom_object(BATCH, "v1alpha1", namespace, "jobs", vcjob("orphan", 1, queue=gone))
    said = wait_for(lambda: [c for c in conditions(custom, namespace, "orphan") if c.get("reason") == "QueueNotFound"],
                    TIMEOUT, what="a QueueNotFound condition on the Job")
    assert said[0]["message"] == (f"queue '{gone}' does not exist: none of the job's pods are created until a "
                                  "queue of that name does")
    # and its PodGroup carries the scheduler's reason
    def podgroup_says() -> list[str]:
        groups = custom.list_namespaced_custom_object(SCHEDULING, "v1beta1", namespace, "podgroups")["items"]
        return [c.get("message", "") for g in groups for c in (g.get("status") or {}).get("conditions") or []
                if c.get("type") == "Unschedulable" and f"queue '{gone}' does not exist" in c.get("message", "")]

    wait_for(podgroup_says, TIMEOUT, what="the PodGroup's Unschedulable condition naming the missing queue")


def _uid(custom, name: str) -> str | None:
    try:
        return str(custom.get_cluster_custom_object(SCHEDULING, "v1beta1", "queues", name)["metadata"]["uid"])
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise
