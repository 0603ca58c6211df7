"""Volcano's HyperNode choice on the real control plane (plugins/hypernode_score.py, issue 34): a hard tier-1 job
goes to the HyperNode whose nodes already hold work, a networkTopology with both highestTierAllowed and
highestTierName is refused by the webhook, and a placed job's killed pod comes back inside its HyperNode (kept in
the PodGroup annotation volcano.sh/job-allocated-hypernode) across a scheduler restart."""

from __future__ import annotations

import base64
import contextlib
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from controlplane import REPO_ROOT, free_port, wait_for
from inprocess import running_scheduler
from kubernetes import client
from test_scheduler import GROUP, TIMEOUT, bound_pods, gang_pod
from test_webhook import _healthy, refusal

ALLOCATED = "volcano.sh/job-allocated-hypernode"
CONF = """actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: network-topology-aware
"""


def hypernode(name: str, members: list[str]) -> dict:
    return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": name},
            "spec": {"tier": 1, "tierName": "volcano-py.test/rack",
                     "members": [{"type": "Node", "selector": {"exactMatch": {"name": m}}} for m in members]}}


@pytest.fixture
def racks(control_plane, custom, node_set) -> Iterator[tuple[list[str], list[str], str, str]]:
    """Four 64-cpu nodes in two tier-1 HyperNodes: (rack-a's nodes, rack-b's nodes, rack-a, rack-b)."""
    nodes = [node_set(gpus=0) for _ in range(4)]
    names = (f"rack-a-{node_set.tag}", f"rack-b-{node_set.tag}")
    made = [hypernode(names[0], nodes[:2]), hypernode(names[1], nodes[2:])]
    for h in made:
        custom.create_cluster_custom_object("topology.volcano.sh", "v1alpha1", "hypernodes", h)
    try:
        yield nodes[:2], nodes[2:], *names
    finally:
        for h in made:
            custom.delete_cluster_custom_object("topology.volcano.sh", "v1alpha1", "hypernodes", h["metadata"]["name"])


def work(core_v1, namespace: str, name: str, node: str, tag: str, cpu: str) -> None:
    """A pod of another owner, bound to `node` already, holding `cpu`."""
    pod = gang_pod(name, "none", tag, cpu=cpu)
    del pod["metadata"]["annotations"]
    pod["spec"]["nodeName"] = node
    core_v1.create_namespaced_pod(namespace, pod)


def ring(custom, core_v1, namespace: str, tag: str, pods: int = 2) -> None:
    custom.create_namespaced_custom_object(GROUP, "v1beta1", namespace, "podgroups", {
        "apiVersion": f"{GROUP}/v1beta1", "kind": "PodGroup", "metadata": {"name": "ring"},
        "spec": {"minMember": pods, "queue": "default", "networkTopology": {"mode": "hard", "highestTierAllowed": 1}},
    })
    for i in range(pods):
        core_v1.create_namespaced_pod(namespace, gang_pod(f"ring-{i}", "ring", tag, cpu="8"))


def allocated(custom, namespace: str) -> str | None:
    pg = custom.get_namespaced_custom_object(GROUP, "v1beta1", namespace, "podgroups", "ring")
    return (pg["metadata"].get("annotations") or {}).get(ALLOCATED)


def ring_nodes(core_v1, namespace: str) -> set[str]:
    return {node for pod, node in bound_pods(core_v1, namespace).items() if pod.startswith("ring-")}


def test_a_hard_tier_one_job_goes_to_the_hypernode_whose_nodes_already_hold_work(
        control_plane, tmp_path, custom, core_v1, namespace, node_set, racks):
    """rack-b's nodes hold 40 cpu of work: its hypernode binpack score beats rack-a's, which comes first by name
    and by node order and holds the gang as well."""
    a_nodes, b_nodes, _, rack_b = racks
    with running_scheduler(control_plane, conf=CONF, conf_dir=tmp_path) as running:
        wait_for(lambda: len(running.cache.hypernodes.objects) >= 2, TIMEOUT, what="the cache sees the HyperNodes")
        work(core_v1, namespace, "work", b_nodes[1], node_set.tag, "40")
        ring(custom, core_v1, namespace, node_set.tag)
        wait_for(lambda: {"ring-0", "ring-1"} <= set(bound_pods(core_v1, namespace)), TIMEOUT, what="the gang binds")
        assert ring_nodes(core_v1, namespace) <= set(b_nodes)
        wait_for(lambda: allocated(custom, namespace) == rack_b, TIMEOUT, what="the PodGroup names its HyperNode")


def test_the_webhook_refuses_both_tier_fields_on_jobs_and_podgroups(
        control_plane, kubeconfig, api_client, custom, namespace, tmp_path: Path) -> None:
    """/jobs/validate and /podgroups/validate behind the apiserver: a networkTopology with both highestTierAllowed
    and highestTierName is refused, naming the field; one with the name alone is admitted."""
    port, health = free_port(), free_port()
    log = tmp_path / "webhook.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "scheduler.cli", "webhook", "--kubeconfig", str(kubeconfig),
             f"--tls-cert-file={control_plane.serving_crt}", f"--tls-private-key-file={control_plane.serving_key}",
             "--listen-address=127.0.0.1", f"--port={port}", "--enable-healthz",
             f"--healthz-address=127.0.0.1:{health}", "--enabled-admission=/jobs/validate,/podgroups/validate"],
            stdout=out, stderr=subprocess.STDOUT, cwd=REPO_ROOT)
    admission = client.AdmissionregistrationV1Api(api_client)
    name = f"volcano-py-tiers-{uuid.uuid4().hex[:6]}"
    ca_bundle = base64.b64encode(control_plane.serving_ca.crt.read_bytes()).decode()

    def hook(kind: str, group: str, version: str) -> dict:
        return {"name": f"validate{kind}.volcano-py.io",
                "clientConfig": {"url": f"https://127.0.0.1:{port}/{kind}/validate", "caBundle": ca_bundle},
                "rules": [{"operations": ["CREATE"], "apiGroups": [group], "apiVersions": [version],
                           "resources": [kind]}],
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                "failurePolicy": "Fail", "sideEffects": "None", "admissionReviewVersions": ["v1"],
                "timeoutSeconds": 10}

    queue = f"open-{uuid.uuid4().hex[:6]}"  # the queue checks pass: only the tier fields can refuse
    custom.create_cluster_custom_object(GROUP, "v1beta1", "queues", {
        "apiVersion": f"{GROUP}/v1beta1", "kind": "Queue", "metadata": {"name": queue}, "spec": {"weight": 1}})
    custom.patch_cluster_custom_object_status(GROUP, "v1beta1", "queues", queue, {"status": {"state": "Open"}})
    both = {"mode": "hard", "highestTierAllowed": 1, "highestTierName": "volcano-py.test/rack"}
    named = {"mode": "hard", "highestTierName": "volcano-py.test/rack"}
    probes = iter(range(10_000))

    def create_podgroup(pg_name: str, topology: dict) -> None:
        custom.create_namespaced_custom_object(GROUP, "v1beta1", namespace, "podgroups", {
            "apiVersion": f"{GROUP}/v1beta1", "kind": "PodGroup", "metadata": {"name": pg_name},
            "spec": {"minMember": 1, "queue": queue, "networkTopology": topology}})

    def create_job(job_name: str, topology: dict) -> None:
        custom.create_namespaced_custom_object("batch.volcano.sh", "v1alpha1", namespace, "jobs", {
            "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": job_name},
            "spec": {"schedulerName": "nobody", "queue": queue, "minAvailable": 1, "networkTopology": topology,
                     "tasks": [{"name": "w", "replicas": 1,
                                "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}}]}})

    try:
        wait_for(lambda: proc.poll() is None and _healthy(f"http://127.0.0.1:{health}/healthz"), TIMEOUT,
                 what="the webhook's /healthz")
        admission.create_validating_webhook_configuration({"metadata": {"name": name}, "webhooks": [
            hook("podgroups", GROUP, "v1beta1"), hook("jobs", "batch.volcano.sh", "v1alpha1")]})
        wait_for(lambda: refusal(lambda: create_podgroup(f"probe-{next(probes)}", both)) is not None, TIMEOUT,
                 what="the apiserver calling the webhook")
        wait_for(lambda: refusal(lambda: create_job(f"probe-{next(probes)}", both)) is not None, TIMEOUT,
                 what="the apiserver calling the webhook for Jobs")
        assert refusal(lambda: create_podgroup("both", both)) == (400, "spec.networkTopology")
        assert refusal(lambda: create_job("both", both)) == (400, "spec.networkTopology")
        assert refusal(lambda: create_podgroup("named", named)) is None
        assert refusal(lambda: create_job("named", named)) is None
    finally:
        for delete in (lambda: admission.delete_validating_webhook_configuration(name),
                       lambda: custom.delete_cluster_custom_object(GROUP, "v1beta1", "queues", queue)):
            with contextlib.suppress(client.ApiException):
                delete()
        proc.terminate()
        assert proc.wait(TIMEOUT) == 0, log.read_text(errors="replace")


def test_a_killed_pod_comes_back_in_the_jobs_hypernode_after_a_scheduler_restart(
        control_plane, tmp_path, custom, core_v1, namespace, node_set, racks):
    """The gang goes to rack-b (its work); the PodGroup is annotated rack-b. The scheduler stops, the work moves
    to rack-a (which now scores higher) and a gang pod is killed and made again. A new scheduler reads the
    annotation: the pod comes back in rack-b."""
    a_nodes, b_nodes, _, rack_b = racks
    for run in ("one", "two"):
        (tmp_path / run).mkdir()
    with running_scheduler(control_plane, conf=CONF, conf_dir=tmp_path / "one") as running:
        wait_for(lambda: len(running.cache.hypernodes.objects) >= 2, TIMEOUT, what="the cache sees the HyperNodes")
        work(core_v1, namespace, "work", b_nodes[1], node_set.tag, "40")
        ring(custom, core_v1, namespace, node_set.tag)
        wait_for(lambda: allocated(custom, namespace) == rack_b, TIMEOUT, what="the PodGroup names its HyperNode")
        assert ring_nodes(core_v1, namespace) <= set(b_nodes)
    victim = sorted(p for p in bound_pods(core_v1, namespace) if p.startswith("ring-"))[0]
    for pod in ("work", victim):
        core_v1.delete_namespaced_pod(pod, namespace, grace_period_seconds=0)
    wait_for(lambda: not {"work", victim} & set(p.metadata.name for p in core_v1.list_namespaced_pod(namespace).items),
             TIMEOUT, what="the killed pods gone")
    work(core_v1, namespace, "work-a", a_nodes[0], node_set.tag, "40")
    core_v1.create_namespaced_pod(namespace, gang_pod(victim, "ring", node_set.tag, cpu="8"))
    with running_scheduler(control_plane, conf=CONF, conf_dir=tmp_path / "two"):
        wait_for(lambda: victim in bound_pods(core_v1, namespace), TIMEOUT, what="the new pod binds")
        assert bound_pods(core_v1, namespace)[victim] in b_nodes
        assert allocated(custom, namespace) == rack_b
