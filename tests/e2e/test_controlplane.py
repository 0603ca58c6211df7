"""Acceptance tests of the e2e control plane itself (issue 3): binding, kwok stages, GC, RBAC, over-commit."""

from __future__ import annotations

import uuid

import pytest
from controlplane import (
    COMPLETE_ANNOTATION,
    EXIT_CODE_ANNOTATION,
    GPU_RESOURCE,
    RACK_LABEL,
    ZONE_LABEL,
    assert_no_overcommit,
    bind_pod,
    create_gpu_node,
    delete_node_and_pods,
    node_is_ready,
    wait_for,
)
from kubernetes import client
from kubernetes.client.rest import ApiException

TIMEOUT = 60  # generous deadline for a 2-core machine; every wait returns as soon as the condition holds


@pytest.fixture
def gpu_node(core_v1):
    name = f"gpu-{uuid.uuid4().hex[:8]}"
    create_gpu_node(core_v1, name, zone="zone-test", rack="rack-test")
    wait_for(lambda: node_is_ready(core_v1, name), TIMEOUT, what=f"node {name} Ready (kwok)")
    yield name
    delete_node_and_pods(core_v1, name)


def make_pod(name, gpus=1, cpu="1", annotations=None, owner=None):
    meta = {"name": name, "annotations": annotations or {}}
    if owner is not None:
        meta["ownerReferences"] = [owner]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {
            "schedulerName": "default-scheduler",
            "containers": [
                {
                    "name": "main",
                    "image": "registry.invalid/train:latest",
                    "resources": {
                        "requests": {"cpu": cpu, "memory": "1Gi"},
                        "limits": {GPU_RESOURCE: str(gpus), "memory": "1Gi"},
                    },
                }
            ],
        },
    }


def phase(core_v1, ns, name):
    return core_v1.read_namespaced_pod(name, ns).status.phase


def gone(core_v1, ns, name) -> bool:
    try:
        core_v1.read_namespaced_pod(name, ns)
    except ApiException as e:
        if e.status == 404:
            return True
        raise
    return False


def test_node_is_ready_labelled_and_untainted(core_v1, gpu_node):
    node = core_v1.read_node(gpu_node)
    assert node.status.allocatable[GPU_RESOURCE] == "8"
    assert node.status.allocatable["cpu"] == "64"
    assert node.metadata.labels[ZONE_LABEL] == "zone-test"
    assert node.metadata.labels[RACK_LABEL] == "rack-test"
    # TaintNodesByCondition adds node.kubernetes.io/not-ready at creation; the node-lifecycle controller
    # (kube-controller-manager) removes it once kwok reports Ready.
    wait_for(
        lambda: (
            not any(
                t.key == "node.kubernetes.io/not-ready"
                for t in (core_v1.read_node(gpu_node).spec.taints or [])
            )
        ),
        TIMEOUT,
        what="not-ready taint removed",
    )


def test_unscheduled_pod_bound_via_binding_becomes_running(core_v1, namespace, gpu_node):
    core_v1.create_namespaced_pod(namespace, make_pod("p0"))
    pod = core_v1.read_namespaced_pod("p0", namespace)
    assert pod.spec.node_name is None and pod.status.phase == "Pending"  # no scheduler runs here

    bind_pod(core_v1, namespace, "p0", gpu_node)

    wait_for(lambda: phase(core_v1, namespace, "p0") == "Running", TIMEOUT, what="pod Running (kwok)")
    pod = core_v1.read_namespaced_pod("p0", namespace)
    assert pod.spec.node_name == gpu_node
    assert pod.status.container_statuses[0].state.running is not None
    assert pod.status.pod_ip


def test_deleting_owner_garbage_collects_pods(core_v1, namespace, gpu_node):
    cm = core_v1.create_namespaced_config_map(namespace, {"metadata": {"name": "owner"}})
    owner = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": cm.metadata.uid}
    for i in range(2):
        core_v1.create_namespaced_pod(namespace, make_pod(f"owned-{i}", owner=owner))
    bind_pod(core_v1, namespace, "owned-0", gpu_node)  # one bound (kwok deletes it), one never scheduled
    wait_for(lambda: phase(core_v1, namespace, "owned-0") == "Running", TIMEOUT, what="owned-0 Running")

    core_v1.delete_namespaced_config_map("owner", namespace)

    for i in range(2):
        wait_for(
            lambda i=i: gone(core_v1, namespace, f"owned-{i}"), TIMEOUT, what=f"owned-{i} garbage-collected"
        )


@pytest.mark.parametrize("final_phase,code", [("Failed", 3), ("Succeeded", 0)])
def test_pod_completes_with_requested_phase_and_exit_code(core_v1, namespace, gpu_node, final_phase, code):
    ann = {COMPLETE_ANNOTATION: final_phase, EXIT_CODE_ANNOTATION: str(code)}
    core_v1.create_namespaced_pod(namespace, make_pod("job-0", annotations=ann))
    bind_pod(core_v1, namespace, "job-0", gpu_node)

    wait_for(lambda: phase(core_v1, namespace, "job-0") == final_phase, TIMEOUT, what=f"pod {final_phase}")
    term = core_v1.read_namespaced_pod("job-0", namespace).status.container_statuses[0].state.terminated
    assert term is not None and term.exit_code == code


def test_running_pod_completes_when_annotated_later(core_v1, namespace, gpu_node):
    core_v1.create_namespaced_pod(namespace, make_pod("late"))
    bind_pod(core_v1, namespace, "late", gpu_node)
    wait_for(lambda: phase(core_v1, namespace, "late") == "Running", TIMEOUT, what="pod Running")
    core_v1.patch_namespaced_pod(
        "late",
        namespace,
        {"metadata": {"annotations": {COMPLETE_ANNOTATION: "Failed", EXIT_CODE_ANNOTATION: "137"}}},
    )
    wait_for(lambda: phase(core_v1, namespace, "late") == "Failed", TIMEOUT, what="pod Failed")
    term = core_v1.read_namespaced_pod("late", namespace).status.container_statuses[0].state.terminated
    assert term.exit_code == 137


def test_overcommit_check_catches_overcommitted_node(core_v1, namespace, gpu_node):
    for i in range(2):  # 2 x 6 GPUs on an 8-GPU node: the API server and kwok accept it, a scheduler must not
        core_v1.create_namespaced_pod(namespace, make_pod(f"big-{i}", gpus=6))
    bind_pod(core_v1, namespace, "big-0", gpu_node)
    assert_no_overcommit(core_v1)  # 6 of 8: fine

    bind_pod(core_v1, namespace, "big-1", gpu_node)
    with pytest.raises(
        AssertionError, match=rf"node {gpu_node}: {GPU_RESOURCE} requested 12 > allocatable 8"
    ):
        assert_no_overcommit(core_v1)

    # Finished pods release their resources.
    core_v1.patch_namespaced_pod(
        "big-1", namespace, {"metadata": {"annotations": {COMPLETE_ANNOTATION: "Succeeded"}}}
    )
    wait_for(lambda: phase(core_v1, namespace, "big-1") == "Succeeded", TIMEOUT, what="big-1 Succeeded")
    assert_no_overcommit(core_v1)


def test_restricted_service_account_identity_is_subject_to_rbac(control_plane, core_v1, namespace):
    sa_api = control_plane.api_client(control_plane.kubeconfig_for_service_account(namespace, "volcano-py"))
    sa_core = client.CoreV1Api(sa_api)
    with pytest.raises(ApiException) as e:
        sa_core.list_namespaced_pod(namespace)
    assert e.value.status == 403

    rbac = client.RbacAuthorizationV1Api(core_v1.api_client)
    rbac.create_namespaced_role(
        namespace,
        {
            "metadata": {"name": "pod-reader"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}],
        },
    )
    rbac.create_namespaced_role_binding(
        namespace,
        {
            "metadata": {"name": "pod-reader"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "volcano-py", "namespace": namespace}],
        },
    )

    def can_list():  # the RBAC authorizer works from an informer cache: the binding shows up shortly after
        try:
            return sa_core.list_namespaced_pod(namespace).items == []
        except ApiException as e:
            if e.status == 403:
                return False
            raise

    wait_for(can_list, TIMEOUT, what="RoleBinding effective")
    with pytest.raises(ApiException) as e:
        sa_core.create_namespaced_pod(namespace, make_pod("nope"))
    assert e.value.status == 403
    sa_api.close()
