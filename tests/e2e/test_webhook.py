"""`volcano-py webhook` behind a real apiserver: a ValidatingWebhookConfiguration (as Volcano's chart has for
/jobs/validate) sends Job creates and updates to it, and the apiserver refuses what it refuses, naming the field."""

from __future__ import annotations

import base64
import contextlib
import json
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from controlplane import REPO_ROOT, free_port, wait_for
from kubernetes import client

BATCH, SCHEDULING = "batch.volcano.sh", "scheduling.volcano.sh"
TIMEOUT = 60


def job_hook(kind: str, operations: list[str], port: int, ca_bundle: str, namespace: str, *,
             policy: str = "Fail", timeout: int = 10) -> dict:
    """A webhook entry sending this namespace's Volcano Jobs to the loopback webhook's /jobs/<kind>."""
    return {
        "name": f"{kind}job.volcano.sh",
        "clientConfig": {"url": f"https://127.0.0.1:{port}/jobs/{kind}", "caBundle": ca_bundle},
        "rules": [{"operations": operations, "apiGroups": [BATCH], "apiVersions": ["v1alpha1"],
                   "resources": ["jobs"]}],
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
        "failurePolicy": policy, "sideEffects": "None", "admissionReviewVersions": ["v1"], "timeoutSeconds": timeout,
    }


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return resp.status == 200
    except OSError:
        return False


@pytest.fixture
def webhook(control_plane, kubeconfig, api_client, namespace, tmp_path: Path) -> Iterator[None]:
    """The webhook process on loopback, and a configuration sending this test namespace's Jobs to it."""
    port, health = free_port(), free_port()
    log = tmp_path / "webhook.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "scheduler.cli", "webhook", "--kubeconfig", str(kubeconfig),
             f"--tls-cert-file={control_plane.serving_crt}", f"--tls-private-key-file={control_plane.serving_key}",
             "--listen-address=127.0.0.1", f"--port={port}", "--enable-healthz",
             f"--healthz-address=127.0.0.1:{health}", "--enabled-admission=/jobs/validate,/jobs/mutate",
             "--scheduler-name=volcano"],
            stdout=out, stderr=subprocess.STDOUT, cwd=REPO_ROOT)
    admission = client.AdmissionregistrationV1Api(api_client)
    name = f"volcano-py-job-{uuid.uuid4().hex[:6]}"
    ca_bundle = base64.b64encode(control_plane.serving_ca.crt.read_bytes()).decode()

    def hook(kind: str, operations: list[str]) -> dict:
        return job_hook(kind, operations, port, ca_bundle, namespace)

    try:
        wait_for(lambda: proc.poll() is None and _healthy(f"http://127.0.0.1:{health}/healthz"), TIMEOUT,
                 what="the webhook's /healthz")
        admission.create_mutating_webhook_configuration({"metadata": {"name": name},
                                                          "webhooks": [hook("mutate", ["CREATE"])]})
        admission.create_validating_webhook_configuration({"metadata": {"name": name},
                                                            "webhooks": [hook("validate", ["CREATE", "UPDATE"])]})
        yield
    finally:
        for delete in (admission.delete_validating_webhook_configuration,
                       admission.delete_mutating_webhook_configuration):
            with contextlib.suppress(client.ApiException):
                delete(name)
        proc.terminate()
        assert proc.wait(TIMEOUT) == 0, log.read_text(errors="replace")


def job(name: str, queue: str, replicas: int = 2) -> dict:
    return {"apiVersion": f"{BATCH}/v1alpha1", "kind": "Job", "metadata": {"name": name},
            "spec": {"schedulerName": "nobody", "queue": queue, "minAvailable": replicas,
                     "tasks": [{"name": "w", "replicas": replicas,
                                "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}}]}}


def refusal(call) -> tuple[int, str] | None:
    """(HTTP status, the field the webhook's message names) when the apiserver refuses `call`, else None."""
    try:
        call()
    except client.ApiException as exc:
        message = json.loads(exc.body)["message"]
        # The apiserver prefixes the webhook's message: `admission webhook "<name>" denied the request: <ours>`.
        ours = message.split("denied the request: ", 1)[1]
        return exc.status, ours.split(":", 1)[0]
    return None


def test_the_apiserver_refuses_jobs_the_webhook_refuses(webhook, custom, namespace) -> None:
    def create(name: str, queue: str) -> None:
        custom.create_namespaced_custom_object(BATCH, "v1alpha1", namespace, "jobs", job(name, queue))

    missing = f"missing-{uuid.uuid4().hex[:6]}"
    probes = iter(range(10_000))
    # The apiserver picks new webhook configurations up asynchronously: wait until it calls ours.
    wait_for(lambda: refusal(lambda: create(f"probe-{next(probes)}", missing)) is not None, TIMEOUT,
             what="the apiserver calling the webhook")
    assert refusal(lambda: create("to-missing", missing)) == (400, "spec.queue")

    closed, open_ = f"closed-{uuid.uuid4().hex[:6]}", f"open-{uuid.uuid4().hex[:6]}"
    for queue, state in ((closed, "Closed"), (open_, "Open")):
        custom.create_cluster_custom_object(SCHEDULING, "v1beta1", "queues", {
            "apiVersion": f"{SCHEDULING}/v1beta1", "kind": "Queue", "metadata": {"name": queue},
            "spec": {"weight": 1}})
        custom.patch_cluster_custom_object_status(SCHEDULING, "v1beta1", "queues", queue, {"status": {"state": state}})
    try:
        assert refusal(lambda: create("to-closed", closed)) == (400, "spec.queue")
        assert refusal(lambda: create("to-open", open_)) is None

        def patch(body: dict) -> None:
            custom.patch_namespaced_custom_object(BATCH, "v1alpha1", namespace, "jobs", "to-open", body)

        made = custom.get_namespaced_custom_object(BATCH, "v1alpha1", namespace, "jobs", "to-open")
        tasks = made["spec"]["tasks"]
        scaled = [dict(tasks[0], replicas=3)]
        assert refusal(lambda: patch({"spec": {"tasks": scaled, "minAvailable": 3}})) is None
        image = [dict(scaled[0], template={"spec": {"containers": [{"name": "c", "image": "alpine"}]}})]
        assert refusal(lambda: patch({"spec": {"tasks": image}})) == (400, "spec.tasks")
    finally:
        for queue in (closed, open_):
            custom.delete_cluster_custom_object(SCHEDULING, "v1beta1", "queues", queue)


def test_the_apiserver_writes_volcanos_job_defaults_from_the_webhook(webhook, custom, namespace) -> None:
    """Volcano's "Job mutate check" (test/e2e/jobp/admission.go): unnamed tasks become default0, default1; the
    Job gets the webhook's --scheduler-name and the default queue."""
    body = job("unnamed", "default", replicas=1)
    del body["spec"]["schedulerName"], body["spec"]["queue"], body["spec"]["minAvailable"]
    body["spec"]["tasks"].append(json.loads(json.dumps(body["spec"]["tasks"][0])))
    for task in body["spec"]["tasks"]:
        del task["name"]
    names = iter(range(10_000))

    def created_with_defaults() -> dict | None:
        made = custom.create_namespaced_custom_object(BATCH, "v1alpha1", namespace, "jobs",
                                                      dict(body, metadata={"name": f"unnamed-{next(names)}"}))
        return made if made["spec"].get("schedulerName") else None

    try:  # the validating hook wants the default queue to exist (a scheduler creates it; none may have run yet)
        custom.create_cluster_custom_object(SCHEDULING, "v1beta1", "queues", {
            "apiVersion": f"{SCHEDULING}/v1beta1", "kind": "Queue", "metadata": {"name": "default"},
            "spec": {"weight": 1}})
    except client.ApiException as exc:
        if exc.status != 409:
            raise
    made = wait_for(created_with_defaults, TIMEOUT, what="the apiserver calling the mutating webhook")
    spec = made["spec"]
    assert (spec["schedulerName"], spec["queue"], spec["minAvailable"]) == ("volcano", "default", 2)
    assert [(t["name"], t["minAvailable"]) for t in spec["tasks"]] == [("default0", 1), ("default1", 1)]
