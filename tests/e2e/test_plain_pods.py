"""PodGroups for plain pods on a real cluster (issue 12): a Deployment asking for a gang is bound all at once.

kube-controller-manager runs in the harness, so the Deployment makes a ReplicaSet and the ReplicaSet its pods.
The controllers make `podgroup-<ReplicaSet uid>` from the template's annotations; the scheduler (in-process,
recording its cycles) finds the pods' PodGroup by that name, so the pods are never rewritten.
"""

from __future__ import annotations

import uuid

import pytest
from controlplane import create_gpu_node, delete_node_and_pods, node_is_ready, wait_for
from inprocess import queue_status, running_controllers, running_scheduler
from kubernetes import client
from test_controllers import (
    SCHED,
    TIMEOUT,
    podgroup,
)

GPU = "nvidia.com/gpu"
TAG = f"plain-{uuid.uuid4().hex[:6]}"


@pytest.fixture(scope="module")
def scheduler(control_plane):
    with running_scheduler(control_plane, name="volcano-py-scheduler-plain") as running:
        yield running


@pytest.fixture(scope="module")
def controllers(control_plane, custom, scheduler, tmp_path_factory):
    with running_controllers(control_plane, custom, tmp_path_factory.mktemp("controllers"),
                             "--leader-elect-lease-name", "volcano-py-controllers-plain") as ctl:
        yield ctl


@pytest.fixture
def nodes(core_v1):
    made: list[str] = []

    def make(gpus: int) -> str:
        name = f"{TAG}-{len(made)}-{uuid.uuid4().hex[:4]}"
        create_gpu_node(core_v1, name, gpus=gpus, cpu="32", labels={"plain-e2e": TAG})
        wait_for(lambda: node_is_ready(core_v1, name), TIMEOUT, what=f"node {name} Ready")
        made.append(name)
        return name

    yield make
    for name in made:
        delete_node_and_pods(core_v1, name)


def pods_of(core_v1, namespace: str, app: str) -> list:
    return core_v1.list_namespaced_pod(namespace, label_selector=f"app={app}").items


def test_a_deployment_with_group_min_member_is_gang_scheduled(controllers, scheduler, custom, core_v1, namespace,
                                                               nodes):
    nodes(3)  # 3 GPUs: three of the four pods would fit, and none may be bound
    apps = client.AppsV1Api(core_v1.api_client)
    apps.create_namespaced_deployment(namespace, {
        "metadata": {"name": "web"},
        "spec": {"replicas": 4, "selector": {"matchLabels": {"app": "web"}}, "template": {
            "metadata": {"labels": {"app": "web"},
                         "annotations": {"scheduling.volcano.sh/group-min-member": "4"}},
            "spec": {"schedulerName": "volcano-py", "nodeSelector": {"plain-e2e": TAG}, "containers": [{
                "name": "main", "image": "busybox",
                "resources": {"limits": {GPU: "1"}, "requests": {"cpu": "100m"}}}]}}}})
    wait_for(lambda: len(pods_of(core_v1, namespace, "web")) == 4, TIMEOUT, what="the ReplicaSet made 4 pods")
    rs = apps.list_namespaced_replica_set(namespace, label_selector="app=web").items[0]
    name = f"podgroup-{rs.metadata.uid}"
    pg = wait_for(lambda: podgroup(custom, namespace, name), TIMEOUT, what=f"PodGroup {name}")
    assert pg["spec"]["minMember"] == 4 and pg["spec"]["queue"] == "default", pg
    assert pg["metadata"]["ownerReferences"][0]["uid"] == rs.metadata.uid
    wait_for(lambda: any(c.get("type") == "Unschedulable" for c in
                         ((podgroup(custom, namespace, name) or {}).get("status") or {}).get("conditions") or ()),
             TIMEOUT, what="the gang reported unschedulable")
    assert [p.spec.node_name for p in pods_of(core_v1, namespace, "web") if p.spec.node_name] == []
    why = next(c["message"] for c in podgroup(custom, namespace, name)["status"]["conditions"]
               if c["type"] == "Unschedulable")

    def says_why(pod) -> bool:  # what `kubectl describe pod` shows: the gang's reason, on each of its pods
        return any(c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable"
                   and c.message == why for c in pod.status.conditions or ())

    wait_for(lambda: all(says_why(p) for p in pods_of(core_v1, namespace, "web")), TIMEOUT,
             what="each pod of the waiting gang carries the PodGroup's reason")
    assert not any(a.startswith("scheduling.k8s.io") for p in pods_of(core_v1, namespace, "web")
                   for a in (p.metadata.annotations or {})), "pods are not rewritten"

    nodes(1)  # now all four fit: they are bound together
    bound = wait_for(lambda: (found := [p for p in pods_of(core_v1, namespace, "web") if p.spec.node_name])
                     and len(found) == 4 and found, TIMEOUT, what="4 pods bound")
    keys = {f"{namespace}/{p.metadata.name}" for p in bound}
    assert len(scheduler.bind_cycles(keys)) == 1, "the gang was bound across several cycles"
    wait_for(lambda: ((podgroup(custom, namespace, name) or {}).get("status") or {}).get("phase") == "Running",
             TIMEOUT, what="the PodGroup Running")


def test_a_bare_pod_gets_a_podgroup_of_one_in_its_queue(controllers, custom, core_v1, namespace, nodes):
    nodes(1)
    queue = f"plain-{uuid.uuid4().hex[:6]}"
    custom.create_cluster_custom_object(SCHED, "v1beta1", "queues", {
        "apiVersion": f"{SCHED}/v1beta1", "kind": "Queue", "metadata": {"name": queue}, "spec": {"weight": 1}})
    try:
        created = core_v1.create_namespaced_pod(namespace, {
            "metadata": {"name": "solo", "annotations": {"scheduling.volcano.sh/queue-name": queue}},
            "spec": {"schedulerName": "volcano-py", "nodeSelector": {"plain-e2e": TAG},
                     "containers": [{"name": "main", "image": "busybox"}]}})
        name = f"podgroup-{created.metadata.uid}"
        pg = wait_for(lambda: podgroup(custom, namespace, name), TIMEOUT, what=f"PodGroup {name}")
        assert pg["spec"]["minMember"] == 1 and pg["spec"]["queue"] == queue, pg
        wait_for(lambda: core_v1.read_namespaced_pod("solo", namespace).spec.node_name, TIMEOUT, what="bound")
        wait_for(lambda: queue_status(custom, queue).get("running") == 1, TIMEOUT, what="the queue counts it")
    finally:
        custom.delete_cluster_custom_object(SCHED, "v1beta1", "queues", queue)


def test_a_deployments_podgroup_follows_its_request_change(controllers, scheduler, custom, core_v1, namespace,
                                                           nodes):
    """Volcano's e2e "PodGroup's Count change with Deployment's Request change" (test/e2e/schedulingbase/
    job_scheduling.go): after a rollout to a new request the old ReplicaSet's PodGroup is gone and exactly one,
    the new ReplicaSet's, is left, with the new request in minResources."""
    nodes(1)
    apps = client.AppsV1Api(core_v1.api_client)

    def template(cpu: str) -> dict:
        return {"metadata": {"labels": {"app": "roll"}},
                "spec": {"schedulerName": "volcano-py", "nodeSelector": {"plain-e2e": TAG},
                         "containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}]}}

    apps.create_namespaced_deployment(namespace, {
        "metadata": {"name": "roll"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "roll"}}, "template": template("1")}})

    def podgroups() -> dict[str, dict]:
        items = custom.list_namespaced_custom_object(SCHED, "v1beta1", namespace, "podgroups")["items"]
        return {pg["metadata"]["name"]: pg for pg in items}

    def replicasets() -> list:
        return apps.list_namespaced_replica_set(namespace, label_selector="app=roll").items

    first = wait_for(lambda: (rs := replicasets()) and len(rs) == 1 and rs[0], TIMEOUT, what="the first ReplicaSet")
    old = f"podgroup-{first.metadata.uid}"
    wait_for(lambda: old in podgroups(), TIMEOUT, what=f"PodGroup {old}")
    assert list(podgroups()) == [old]
    # One pod's request, also under the ResourceQuota names Volcano's pg controller writes (CalTaskRequests).
    assert podgroups()[old]["spec"]["minResources"] == {"cpu": "1", "requests.cpu": "1", "count/pods": "1", "pods": "1"}

    apps.patch_namespaced_deployment("roll", namespace, {"spec": {"template": template("500m")}})
    second = wait_for(lambda: next((r for r in replicasets() if r.metadata.uid != first.metadata.uid), None),
                      TIMEOUT, what="the rollout's ReplicaSet")
    new = f"podgroup-{second.metadata.uid}"

    def rollout() -> dict:
        state = {r.metadata.uid: (r.spec.replicas, r.status.ready_replicas) for r in replicasets()}
        bound = [p.metadata.name for p in pods_of(core_v1, namespace, "roll")
                 if p.spec.node_name and p.metadata.owner_references[0].uid == second.metadata.uid]
        return {"replicasets": state, "new pods bound": bound, "podgroups": sorted(podgroups())}

    wait_for(lambda: len(rollout()["new pods bound"]) == 2, TIMEOUT, what="the new ReplicaSet's pods bound")
    wait_for(lambda: list(podgroups()) == [new], TIMEOUT, what=f"only PodGroup {new} left: {rollout()}")
    assert podgroups()[new]["spec"]["minResources"] == {"cpu": "500m", "requests.cpu": "500m", "count/pods": "1",
                                                        "pods": "1"}
    assert podgroups()[new]["spec"]["minMember"] == 1
