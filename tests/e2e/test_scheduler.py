"""The scheduler on a real cluster (issue 4): gangs bind whole, or not at all and say why.

The scheduler runs in-process (a background thread) against the session's kube-apiserver. Each test has its
own namespace and its own nodes, and its pods select those nodes, so tests never compete for capacity.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest
from controlplane import GPU_RESOURCE, assert_no_overcommit, wait_for
from inprocess import running_scheduler

from scheduler.api.decision import REASONS_ANNOTATION, read_published
from scheduler.api.reasons import ResourceShortfall

TIMEOUT = 60  # generous for a 2-core machine; every wait returns as soon as its condition holds
NODE_SET = "volcano-py.test/node-set"
GROUP = "scheduling.volcano.sh"


@pytest.fixture
def scheduler(control_plane):
    with running_scheduler(control_plane) as running:
        yield running



def podgroup(name: str, min_member: int) -> dict:
    return {
        "apiVersion": f"{GROUP}/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"minMember": min_member, "queue": "default"},
    }


def gang_pod(name: str, group: str, tag: str, *, cpu: str = "100m", gpus: int = 0) -> dict:
    resources: dict = {"requests": {"cpu": cpu, "memory": "64Mi"}}
    if gpus:
        resources["limits"] = {GPU_RESOURCE: str(gpus)}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": {"scheduling.k8s.io/group-name": group}},
        "spec": {
            "schedulerName": "volcano-py",
            "nodeSelector": {NODE_SET: tag},
            "containers": [{"name": "main", "image": "busybox", "resources": resources}],
        },
    }


def bound_pods(core_v1, namespace: str) -> dict[str, str]:
    pods = json.loads(core_v1.list_namespaced_pod(namespace, _preload_content=False).data)["items"]
    return {p["metadata"]["name"]: p["spec"]["nodeName"] for p in pods if p["spec"].get("nodeName")}


def pg_status(custom, namespace: str, name: str) -> dict:
    return (
        custom.get_namespaced_custom_object(GROUP, "v1beta1", namespace, "podgroups", name).get("status")
        or {}
    )


def unschedulable(custom, namespace: str, name: str) -> dict | None:
    for c in pg_status(custom, namespace, name).get("conditions") or ():
        if c.get("type") == "Unschedulable" and c.get("status") == "True":
            return c
    return None


def event_reasons(core_v1, namespace: str) -> set[tuple[str, str]]:
    return {(e.involved_object.kind, e.reason) for e in core_v1.list_namespaced_event(namespace).items}


def test_two_pod_gang_binds_in_one_cycle(scheduler, core_v1, custom, namespace, node_set):
    """Seed 004's master + worker as a PodGroup of minMember 2: both pods bind, in the same cycle."""
    node = node_set(gpus=0)
    custom.create_namespaced_custom_object(
        GROUP, "v1beta1", namespace, "podgroups", podgroup("ai-gang-job", 2)
    )
    for role in ("master", "worker"):
        core_v1.create_namespaced_pod(
            namespace, gang_pod(f"ai-gang-job-{role}-0", "ai-gang-job", node_set.tag)
        )

    bound = wait_for(
        lambda: len(bound_pods(core_v1, namespace)) == 2 and bound_pods(core_v1, namespace),
        TIMEOUT,
        what="both pods of the gang bound",
    )
    assert set(bound.values()) == {node}
    keys = {f"{namespace}/{name}" for name in bound}
    assert len(scheduler.bind_cycles(keys)) == 1, "the gang was bound across several cycles"
    wait_for(
        lambda: pg_status(custom, namespace, "ai-gang-job").get("phase") == "Running",
        TIMEOUT,
        what="PodGroup Running",
    )
    wait_for(
        lambda: ("Pod", "Scheduled") in event_reasons(core_v1, namespace), TIMEOUT, what="Scheduled events"
    )
    assert_no_overcommit(core_v1)


def test_gang_larger_than_free_gpus_waits_then_binds(scheduler, core_v1, custom, namespace, node_set):
    """8 one-GPU pods with minMember 8 on a 5-GPU node bind none and say why; an 8-GPU node: all 8 bind."""
    node_set(gpus=5)
    custom.create_namespaced_custom_object(GROUP, "v1beta1", namespace, "podgroups", podgroup("train", 8))
    for i in range(8):
        core_v1.create_namespaced_pod(namespace, gang_pod(f"train-worker-{i}", "train", node_set.tag, gpus=1))

    # While the pods are still being created the gang is short of tasks (NotEnoughTasks); then of GPUs.
    def short_of_gpus():
        c = unschedulable(custom, namespace, "train")
        return c if c and GPU_RESOURCE in c.get("message", "") else None

    condition = wait_for(
        short_of_gpus, TIMEOUT, what="PodGroup Unschedulable condition naming the GPU shortfall"
    )
    assert GPU_RESOURCE in condition["message"], condition
    assert "short" in condition["message"], condition
    assert condition.get("lastTransitionTime"), condition

    # The same decision as data, on the object's metadata (what `volcano-py explain` reads): 8 GPUs needed, 5 free.
    def published_shortfall():
        meta = custom.get_namespaced_custom_object(GROUP, "v1beta1", namespace, "podgroups", "train")["metadata"]
        text = (meta.get("annotations") or {}).get(REASONS_ANNOTATION)
        found = [r for r in read_published(text).reasons if isinstance(r, ResourceShortfall)] if text else []
        return found and found[0]

    shortfall = wait_for(published_shortfall, TIMEOUT, what="the PodGroup's reasons annotation")
    assert (shortfall.resource, shortfall.needed, shortfall.free) == (GPU_RESOURCE, 8_000, 5_000), shortfall
    wait_for(
        lambda: (
            {("PodGroup", "Unschedulable"), ("Pod", "FailedScheduling")} <= event_reasons(core_v1, namespace)
        ),
        TIMEOUT,
        what="Unschedulable and FailedScheduling events",
    )
    assert bound_pods(core_v1, namespace) == {}, "part of the gang was bound"

    node_set(gpus=8)
    bound = wait_for(
        lambda: len(bound_pods(core_v1, namespace)) == 8 and bound_pods(core_v1, namespace),
        TIMEOUT,
        what="all 8 pods bound",
    )
    assert len(bound) == 8
    keys = {f"{namespace}/{name}" for name in bound}
    assert len(scheduler.bind_cycles(keys)) == 1, "the gang was bound across several cycles"
    wait_for(
        lambda: unschedulable(custom, namespace, "train") is None,
        TIMEOUT,
        what="Unschedulable condition cleared",
    )
    assert_no_overcommit(core_v1)


def test_cli_scheduler_binds_a_lone_pod_and_stops_on_sigterm(
    control_plane, core_v1, namespace, node_set, tmp_path
):
    """`volcano-py scheduler` as a process: a pod without a PodGroup is a gang of one; SIGTERM exits 0."""
    node = node_set(gpus=1)
    conf = tmp_path / "volcano-scheduler.conf"
    conf.write_text(
        'actions: "enqueue, allocate, backfill"\ntiers:\n- plugins:\n  - name: priority\n  - name: gang\n'
        "- plugins:\n  - name: predicates\n  - name: proportion\n  - name: binpack\n"
    )
    cmd = [
        sys.executable,
        "-m",
        "scheduler.cli",
        "scheduler",
        "--kubeconfig",
        str(control_plane.kubeconfig),
        "--scheduler-conf",
        str(conf),
        "--schedule-period",
        "200ms",
        "--log-level",
        "debug",
    ]
    log_path = tmp_path / "scheduler.log"
    with open(log_path, "wb") as log_file:
        proc = subprocess.Popen(cmd, stdout=log_file, stderr=subprocess.STDOUT)
        try:
            pod = gang_pod("lone", "", node_set.tag, gpus=1)
            del pod["metadata"]["annotations"]
            core_v1.create_namespaced_pod(namespace, pod)
            bound = wait_for(lambda: bound_pods(core_v1, namespace), TIMEOUT, what="the lone pod bound")
            assert bound == {"lone": node}
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(TIMEOUT) == 0, log_path.read_text()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert "scheduler stopped" in log_path.read_text()
    assert_no_overcommit(core_v1)


def test_pods_asking_for_one_host_port_never_share_a_node(scheduler, core_v1, custom, namespace, node_set):
    """Issue 19: three pods of a gang (minMember 2) that each ask for host port 9090, on two nodes: two bind,
    one per node, and the third stays pending (kube-scheduler's NodePorts rule, which Volcano's predicates run)."""
    nodes = {node_set(gpus=0), node_set(gpus=0)}
    custom.create_namespaced_custom_object(GROUP, "v1beta1", namespace, "podgroups", podgroup("ports", 2))
    for i in range(3):
        pod = gang_pod(f"ports-{i}", "ports", node_set.tag)
        pod["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 9090, "protocol": "TCP"}]
        core_v1.create_namespaced_pod(namespace, pod)
    bound = wait_for(lambda: (b := bound_pods(core_v1, namespace)) and len(b) >= 2 and b, TIMEOUT,
                     what="two of the pods bound")
    assert len(bound) == 2 and set(bound.values()) == nodes
    seen = len(scheduler.results)
    wait_for(lambda: len(scheduler.results) >= seen + 3, TIMEOUT, what="three more cycles")
    pods = core_v1.list_namespaced_pod(namespace).items
    assert sorted(p.metadata.name for p in pods if not p.spec.node_name) == sorted({f"ports-{i}" for i in range(3)}
                                                                                  - set(bound))
