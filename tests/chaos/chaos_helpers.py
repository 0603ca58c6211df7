"""Helpers of the chaos suite: the scheduler and controllers as processes, gangs of bare pods, invariants."""

from __future__ import annotations

import json
import os
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from controlplane import GPU_RESOURCE, create_gpu_node, node_is_ready, wait_for
from processes import Process

__all__ = ["Process"]  # the chaos tests import it from here

ROUNDS = int(os.environ.get("VOLCANO_CHAOS_ROUNDS", "3"))  # kill -9 rounds: 3 in CI, 10 locally
SEED = int(os.environ.get("VOLCANO_CHAOS_SEED", "11"))
TIMEOUT = 90  # every wait returns as soon as its condition holds; generous for a loaded 2-core machine
NODE_SET = "volcano-py.test/node-set"
GROUP = "scheduling.volcano.sh"
CONF = (
    'actions: "enqueue, allocate, backfill"\ntiers:\n- plugins:\n  - name: priority\n  - name: gang\n'
    "- plugins:\n  - name: predicates\n  - name: proportion\n  - name: binpack\n"
)


def start_scheduler(control_plane, log_dir: Path, *args: str, kubeconfig=None) -> Process:
    conf = log_dir / "volcano-scheduler.conf"
    conf.write_text(CONF)
    name = f"s-{uuid.uuid4().hex[:6]}"
    return Process(control_plane, log_dir, name, "scheduler", "--scheduler-conf", str(conf),
                   "--schedule-period", "200ms", "--log-level", "debug", "--leader-elect-identity", name, *args,
                   kubeconfig=kubeconfig)


def make_nodes(core_v1, tag: str, count: int, gpus: int = 8) -> list[str]:
    names = [f"chaos-{tag}-{i}" for i in range(count)]
    for name in names:
        create_gpu_node(core_v1, name, gpus=gpus, labels={NODE_SET: tag})
    for name in names:
        wait_for(lambda n=name: node_is_ready(core_v1, n), TIMEOUT, what=f"node {name} Ready")
    return names


def podgroup(name: str, min_member: int) -> dict:
    return {"apiVersion": f"{GROUP}/v1beta1", "kind": "PodGroup", "metadata": {"name": name},
            "spec": {"minMember": min_member, "queue": "default"}}


def gang_pod(name: str, group: str, tag: str, gpus: int = 1) -> dict:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "annotations": {"scheduling.k8s.io/group-name": group}},
        "spec": {
            "schedulerName": "volcano-py",
            "nodeSelector": {NODE_SET: tag},
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "main", "image": "busybox", "resources": {
                "requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {GPU_RESOURCE: str(gpus)}}}],
        },
    }


def retrying(call, what: str, timeout: float = TIMEOUT):
    """Call until it succeeds (the apiserver may be restarting); 409 AlreadyExists counts as done."""
    from kubernetes.client import ApiException

    deadline = time.monotonic() + timeout
    while True:
        try:
            return call()
        except ApiException as exc:
            if exc.status == 409:
                return None
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: {exc}") from exc
        except Exception as exc:  # connection refused while the apiserver restarts
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: {exc}") from exc
        time.sleep(0.2)  # retry interval of a client, not a synchronisation


def create_gangs(core_v1, custom, namespace: str, tag: str, gangs: dict[str, list[str]], gpus: int = 1) -> None:
    """PodGroups first, then their pods, 8 requests at a time; retried across an apiserver restart."""
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda g: retrying(lambda: custom.create_namespaced_custom_object(
            GROUP, "v1beta1", namespace, "podgroups", podgroup(g, len(gangs[g]))), f"create PodGroup {g}"), gangs))
        pods = [(g, p) for g, names in gangs.items() for p in names]
        list(pool.map(lambda gp: retrying(lambda: core_v1.create_namespaced_pod(
            namespace, gang_pod(gp[1], gp[0], tag, gpus)), f"create pod {gp[1]}"), pods))


def list_pods(core_v1, namespace: str) -> list[dict]:
    return json.loads(core_v1.list_namespaced_pod(namespace, _preload_content=False).data)["items"]


def bound_pods(core_v1, namespace: str) -> dict[str, str]:
    return {p["metadata"]["name"]: p["spec"]["nodeName"] for p in list_pods(core_v1, namespace)
            if p["spec"].get("nodeName")}


def gang_counts(bound: dict[str, str], gangs: dict[str, list[str]]) -> dict[str, int]:
    return {g: sum(n in bound for n in names) for g, names in gangs.items()}


def partly_bound(counts: dict[str, int], gangs: dict[str, list[str]]) -> list[str]:
    return [g for g, c in counts.items() if 0 < c < len(gangs[g])]


def scheduled_events_per_pod(core_v1, namespace: str) -> Counter:
    """(pod name, pod uid) -> number of `Scheduled` events: a pod bound twice would have two."""
    raw = json.loads(core_v1.list_namespaced_event(namespace, _preload_content=False).data)["items"]
    return Counter((e["involvedObject"]["name"], e["involvedObject"].get("uid", ""))
                   for e in raw if e.get("reason") == "Scheduled" and e["involvedObject"].get("kind") == "Pod")


def wait_no_pods_on(core_v1, nodes: list[str]) -> None:
    """Capacity of a previous round is free again: no pod bound to these nodes."""
    def free() -> bool:
        pods = json.loads(core_v1.list_pod_for_all_namespaces(_preload_content=False).data)["items"]
        return not [p for p in pods if p["spec"].get("nodeName") in nodes]

    wait_for(free, TIMEOUT, interval=0.2, what=f"nodes {nodes[0]}.. empty")


def kill_when_bound(control_plane, namespace: str, count: int, proc: Process) -> None:
    """SIGKILL `proc` the moment the `count`-th pod of the namespace is bound, read from a watch (a poll of the
    pod list is too slow: one cycle binds a hundred pods in a fraction of a second)."""
    from scheduler.cache.kube import Kube

    api = control_plane.api_client()
    kube = Kube(api)
    try:
        listed = kube.request("GET", f"/api/v1/namespaces/{namespace}/pods")
        bound = {p["metadata"]["name"] for p in listed["items"] if p["spec"].get("nodeName")}
        query = {"watch": "1", "resourceVersion": listed["metadata"]["resourceVersion"], "timeoutSeconds": TIMEOUT}
        if len(bound) < count:
            for event in kube.stream(f"/api/v1/namespaces/{namespace}/pods", query, read_timeout=TIMEOUT + 5):
                pod = event.get("object") or {}
                if (pod.get("spec") or {}).get("nodeName"):
                    bound.add(pod["metadata"]["name"])
                if len(bound) >= count or not proc.alive():
                    break
        proc.kill()
        assert len(bound) >= count, f"the watch ended with {len(bound)} pods bound, waiting for {count}"
    finally:
        kube.close_streams()
        api.close()
