"""e2e fixtures: one real control plane (etcd + kube-apiserver + kube-controller-manager + kwok) per session.

Every test collected under tests/e2e is marked ``e2e``. Binaries come from .bin/ (``make cluster-bins``);
without them the tests are skipped with a reason, unless VOLCANO_PY_E2E_REQUIRE=1 (then they error).
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from controlplane import create_gpu_node, delete_namespace, delete_node_and_pods, node_is_ready, wait_for
from test_scheduler import NODE_SET, TIMEOUT

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items):
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.e2e)


@pytest.fixture
def namespace(core_v1, request):
    """A fresh namespace per test, deleted afterwards (the namespace controller empties it)."""
    # <= 27 chars, so kubeconfig_for_service_account(namespace, <14-char name>) fits in a certificate.
    base = "".join(c if c.isalnum() else "-" for c in request.node.name.lower().removeprefix("test_"))
    base = base[:20].strip("-")
    name = f"{base}-{uuid.uuid4().hex[:6]}"
    core_v1.create_namespace({"metadata": {"name": name, "labels": {"volcano-py.test/e2e": "true"}}})
    yield name
    delete_namespace(core_v1, name)  # a fixture may have deleted it already (operators.gpu_nodes)


@pytest.fixture
def node_set(core_v1):
    """A label value unique to this test; make_node() creates nodes carrying it, deleted afterwards."""
    tag = uuid.uuid4().hex[:8]
    created: list[str] = []

    def make_node(gpus: int) -> str:
        name = f"sched-{tag}-{len(created)}"
        create_gpu_node(core_v1, name, gpus=gpus, labels={NODE_SET: tag})
        created.append(name)
        wait_for(lambda: node_is_ready(core_v1, name), TIMEOUT, what=f"node {name} Ready")
        return name

    make_node.tag = tag  # type: ignore[attr-defined]
    yield make_node
    for name in created:
        delete_node_and_pods(core_v1, name)


@pytest.fixture
def queues(custom):
    """Queues made by a test (`queues(prefix, **spec)`: a unique name from the prefix, weight 1 unless given),
    deleted afterwards."""
    made: list[str] = []

    def make(prefix: str, **spec) -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:4]}"
        custom.create_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", {
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": name},
            "spec": {"weight": 1, **spec}})
        made.append(name)
        return name

    yield make
    for name in made:
        custom.delete_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", name)
