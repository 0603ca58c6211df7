"""Volcano's queue admission by scheduling gates (feature gate SchedulingGatesQueueAdmission) on the real control
plane: `volcano-py webhook`'s /pods/mutate gives an opted-in pod the gate `scheduling.volcano.sh/queue-allocation-gate`
only with the feature gate on; the scheduler removes that gate (a PATCH the apiserver takes) once the pod's queue
has room, not while it is full, and not while another gate remains."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest
from controlplane import REPO_ROOT, free_port, wait_for
from inprocess import RunningScheduler, running_scheduler
from kubernetes import client
from test_scheduler import GROUP, TIMEOUT, bound_pods, gang_pod, unschedulable

GATE = "scheduling.volcano.sh/queue-allocation-gate"
OTHER = "example.com/other"
CONF = """actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: capacity
"""


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return resp.status == 200
    except OSError:
        return False


@contextmanager
def pod_webhook(control_plane, kubeconfig, api_client, namespace: str, log: Path, *, feature: bool) -> Iterator[None]:
    """`volcano-py webhook` serving /pods/mutate on loopback (with or without the feature gate), and a
    MutatingWebhookConfiguration sending this namespace's pod creates to it, as Volcano's chart has."""
    port, health = free_port(), free_port()
    gates = ["--feature-gates=SchedulingGatesQueueAdmission=true"] if feature else []
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "scheduler.cli", "webhook", "--kubeconfig", str(kubeconfig),
             f"--tls-cert-file={control_plane.serving_crt}", f"--tls-private-key-file={control_plane.serving_key}",
             "--listen-address=127.0.0.1", f"--port={port}", "--enable-healthz",
             f"--healthz-address=127.0.0.1:{health}", "--enabled-admission=/pods/mutate", *gates],
            stdout=out, stderr=subprocess.STDOUT, cwd=REPO_ROOT)
    admission = client.AdmissionregistrationV1Api(api_client)
    name = f"volcano-py-pods-{uuid.uuid4().hex[:6]}"
    ca_bundle = base64.b64encode(control_plane.serving_ca.crt.read_bytes()).decode()
    hook = {
        "name": "mutatepod.volcano.sh",
        "clientConfig": {"url": f"https://127.0.0.1:{port}/pods/mutate", "caBundle": ca_bundle},
        "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}],
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
        "failurePolicy": "Fail", "sideEffects": "None", "admissionReviewVersions": ["v1"], "timeoutSeconds": 10,
    }
    try:
        wait_for(lambda: proc.poll() is None and _healthy(f"http://127.0.0.1:{health}/healthz"), TIMEOUT,
                 what="the webhook's /healthz")
        admission.create_mutating_webhook_configuration({"metadata": {"name": name}, "webhooks": [hook]})
        yield
    finally:
        with suppress(client.ApiException):
            admission.delete_mutating_webhook_configuration(name)
        proc.terminate()
        assert proc.wait(TIMEOUT) == 0, log.read_text(errors="replace")


def opted_in(name: str, group: str, tag: str, *, cpu: str = "600m", gates: tuple[str, ...] = ()) -> dict:
    pod = gang_pod(name, group, tag, cpu=cpu)
    pod["metadata"]["annotations"][GATE] = "true"
    if gates:
        pod["spec"]["schedulingGates"] = [{"name": g} for g in gates]
    return pod


def gates_of(core_v1, namespace: str, name: str) -> list[str]:
    pod = json.loads(core_v1.read_namespaced_pod(name, namespace, _preload_content=False).data)
    return [g["name"] for g in pod["spec"].get("schedulingGates") or ()]


def podgroup(name: str, queue_name: str) -> dict:
    return {"apiVersion": f"{GROUP}/v1beta1", "kind": "PodGroup", "metadata": {"name": name},
            "spec": {"minMember": 1, "queue": queue_name}}


def queue(name: str, cpu: str) -> dict:
    return {"apiVersion": f"{GROUP}/v1beta1", "kind": "Queue", "metadata": {"name": name},
            "spec": {"weight": 1, "capability": {"cpu": cpu}, "deserved": {"cpu": cpu}}}


def cycles_after(scheduler: RunningScheduler, count: int) -> None:
    """Wait until `count` more cycles have ended."""
    start = len(scheduler.results)
    wait_for(lambda: len(scheduler.results) >= start + count, TIMEOUT, what=f"{count} more cycles")


@pytest.mark.parametrize("feature", [True, False], ids=["feature gate on", "feature gate off"])
def test_the_webhook_gates_an_opted_in_pod_only_with_the_feature_gate(
        control_plane, kubeconfig, api_client, core_v1, namespace, tmp_path, feature) -> None:
    with pod_webhook(control_plane, kubeconfig, api_client, namespace, tmp_path / "webhook.log", feature=feature):
        core_v1.create_namespaced_pod(namespace, opted_in("in", "g", "none", gates=(OTHER,)))
        plain = gang_pod("plain", "g", "none")
        core_v1.create_namespaced_pod(namespace, plain)
        assert gates_of(core_v1, namespace, "in") == ([OTHER, GATE] if feature else [OTHER])
        assert gates_of(core_v1, namespace, "plain") == []


@pytest.fixture
def capacity_queue(custom) -> Iterator[str]:
    """A capacity queue of 1 CPU, deleted afterwards."""
    name = f"gates-{uuid.uuid4().hex[:6]}"
    custom.create_cluster_custom_object(GROUP, "v1beta1", "queues", queue(name, "1"))
    try:
        yield name
    finally:
        custom.delete_cluster_custom_object(GROUP, "v1beta1", "queues", name)


@pytest.fixture
def scheduler(control_plane, tmp_path):
    with running_scheduler(control_plane, conf=CONF, conf_dir=tmp_path, queue_allocation_gate=True) as running:
        yield running


def test_the_gate_goes_once_the_queue_has_room_and_not_before(
        scheduler, core_v1, custom, namespace, node_set, capacity_queue) -> None:
    node_set(gpus=0)
    tag = node_set.tag
    wait_for(lambda: capacity_queue in scheduler.cache.queues.objects, TIMEOUT, what="the cache sees the queue")
    for name in ("busy", "gated"):
        custom.create_namespaced_custom_object(GROUP, "v1beta1", namespace, "podgroups", podgroup(name, capacity_queue))
    core_v1.create_namespaced_pod(namespace, gang_pod("busy-0", "busy", tag, cpu="600m"))
    wait_for(lambda: "busy-0" in bound_pods(core_v1, namespace), TIMEOUT, what="the busy pod bound")
    core_v1.create_namespaced_pod(namespace, opted_in("gated-0", "gated", tag, gates=(GATE,)))
    held = wait_for(lambda: unschedulable(custom, namespace, "gated"), TIMEOUT, what="the gated job held")
    assert capacity_queue in held["message"]
    cycles_after(scheduler, 5)
    assert gates_of(core_v1, namespace, "gated-0") == [GATE], "the gate went while the queue was full"
    core_v1.delete_namespaced_pod("busy-0", namespace, grace_period_seconds=0)
    wait_for(lambda: gates_of(core_v1, namespace, "gated-0") == [], TIMEOUT, what="the gate removed")
    wait_for(lambda: "gated-0" in bound_pods(core_v1, namespace), TIMEOUT, what="the ungated pod bound")


def test_the_gate_stays_while_another_gate_remains(
        scheduler, core_v1, custom, namespace, node_set, capacity_queue) -> None:
    node_set(gpus=0)
    tag = node_set.tag
    wait_for(lambda: capacity_queue in scheduler.cache.queues.objects, TIMEOUT, what="the cache sees the queue")
    custom.create_namespaced_custom_object(GROUP, "v1beta1", namespace, "podgroups", podgroup("two", capacity_queue))
    core_v1.create_namespaced_pod(namespace, opted_in("two-0", "two", tag, gates=(GATE, OTHER)))
    wait_for(lambda: unschedulable(custom, namespace, "two"), TIMEOUT, what="the gated job's condition")
    cycles_after(scheduler, 5)
    assert gates_of(core_v1, namespace, "two-0") == [GATE, OTHER]
    core_v1.patch_namespaced_pod("two-0", namespace, [{"op": "remove", "path": "/spec/schedulingGates/1"}])
    wait_for(lambda: gates_of(core_v1, namespace, "two-0") == [], TIMEOUT, what="the queue gate removed once alone")
    wait_for(lambda: "two-0" in bound_pods(core_v1, namespace), TIMEOUT, what="the pod bound")
