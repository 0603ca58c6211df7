"""The apiserver's bind fence (manifests/07-bind-fence.yaml, issue 22): a Binding that names a Lease and a sender
the Lease does not hold is refused; the holder's is accepted; a Binding without the annotations (kube-scheduler,
volcano-py without leader election) is not looked at. The annotations land on the pod."""

from __future__ import annotations

import uuid

import pytest
from controlplane import REPO_ROOT, create_gpu_node, delete_node_and_pods, node_is_ready, wait_for
from kubernetes import client

from scheduler.cache.kube import Kube, KubeError
from scheduler.cache.leader import BOUND_BY_ANNOTATION, LEASE_ANNOTATION

LEASE_NS = "volcano-py-system"


@pytest.fixture
def fenced(control_plane, core_v1, namespace):
    """The policy applied, a Lease held by `holder`, a node; the Lease and node deleted afterwards."""
    control_plane.kubectl("apply", "-f", str(REPO_ROOT / "manifests" / "07-bind-fence.yaml"))
    tag = uuid.uuid4().hex[:6]
    lease, node = f"fence-{tag}", f"fence-{tag}"
    coordination = client.CoordinationV1Api(core_v1.api_client)
    try:
        core_v1.create_namespace({"metadata": {"name": LEASE_NS}})
    except client.ApiException as exc:
        assert exc.status == 409, exc
    coordination.create_namespaced_lease(LEASE_NS, {"metadata": {"name": lease},
                                                    "spec": {"holderIdentity": "holder", "leaseDurationSeconds": 60}})
    create_gpu_node(core_v1, node)
    wait_for(lambda: node_is_ready(core_v1, node), 60, what=f"node {node} Ready")
    yield f"{LEASE_NS}/{lease}", node
    coordination.delete_namespaced_lease(lease, LEASE_NS)
    delete_node_and_pods(core_v1, node)


def bind(kube: Kube, namespace: str, pod: str, node: str, annotations: dict[str, str]) -> int:
    body = {"apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": pod, "namespace": namespace, "annotations": annotations},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
    try:
        kube.request("POST", f"/api/v1/namespaces/{namespace}/pods/{pod}/binding", body=body)
    except KubeError as exc:
        return exc.status
    return 201


def test_only_the_lease_holders_binds_get_through(api_client, core_v1, namespace, fenced):
    lease, node = fenced
    for name in ("stale", "holders", "plain"):
        core_v1.create_namespaced_pod(namespace, {"metadata": {"name": name}, "spec": {
            "schedulerName": "nobody", "containers": [{"name": "main", "image": "busybox"}]}})
    kube = Kube(api_client)

    def binds(pod: str, by: str | None) -> int:
        annotations = {LEASE_ANNOTATION: lease, BOUND_BY_ANNOTATION: by} if by else {}
        return bind(kube, namespace, pod, node, annotations)

    # The policy takes effect once the apiserver has loaded it: until then the stale bind would go through.
    # Ask with a pod of its own until the answer is a refusal, then check the three kinds of bind.
    probe = 0

    def refused() -> bool:
        nonlocal probe
        probe += 1
        name = f"probe-{probe}"
        core_v1.create_namespaced_pod(namespace, {"metadata": {"name": name}, "spec": {
            "schedulerName": "nobody", "containers": [{"name": "main", "image": "busybox"}]}})
        return binds(name, "a-former-leader") == 403

    wait_for(refused, 60, interval=0.5, what="the bind fence in force")
    assert binds("stale", "a-former-leader") == 403
    assert binds("holders", "holder") == 201
    assert binds("plain", None) == 201
    pods = {p.metadata.name: p for p in core_v1.list_namespaced_pod(namespace).items}
    assert (pods["stale"].spec.node_name, pods["holders"].spec.node_name, pods["plain"].spec.node_name) == (
        None, node, node)
    assert pods["holders"].metadata.annotations[BOUND_BY_ANNOTATION] == "holder"
