"""e2e fixtures: one real control plane (etcd + kube-apiserver + kube-controller-manager + kwok) per session.

Every test collected under tests/e2e is marked ``e2e``. Binaries come from .bin/ (``make cluster-bins``);
without them the tests are skipped with a reason, unless VOLCANO_PY_E2E_REQUIRE=1 (then they error).
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest
from controlplane import BINARIES, ControlPlane

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items):
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def control_plane():
    cp = ControlPlane()
    missing = [b for b in BINARIES if not os.access(cp.bin_dir / b, os.X_OK)]
    if missing:
        cp.stop()
        msg = f"control-plane binaries missing in {cp.bin_dir}: {missing}; run `make cluster-bins`"
        if os.environ.get("VOLCANO_PY_E2E_REQUIRE") == "1":
            pytest.fail(msg)
        pytest.skip(msg)
    cp.start()
    try:
        yield cp
    finally:
        cp.stop()


@pytest.fixture(scope="session")
def kubeconfig(control_plane) -> Path:
    """Path of an admin (system:masters) kubeconfig."""
    return control_plane.kubeconfig


@pytest.fixture(scope="session")
def api_client(control_plane):
    """kubernetes.client.ApiClient authenticated as admin."""
    api = control_plane.api_client()
    yield api
    api.close()


@pytest.fixture(scope="session")
def core_v1(api_client):
    from kubernetes import client

    return client.CoreV1Api(api_client)


@pytest.fixture(scope="session")
def custom(api_client):
    """CustomObjectsApi for the Volcano CRDs (Jobs, PodGroups, Queues, Commands, HyperNodes)."""
    from kubernetes import client

    return client.CustomObjectsApi(api_client)


@pytest.fixture
def namespace(core_v1, request):
    """A fresh namespace per test, deleted afterwards (the namespace controller empties it)."""
    # <= 27 chars, so kubeconfig_for_service_account(namespace, <14-char name>) fits in a certificate.
    base = "".join(c if c.isalnum() else "-" for c in request.node.name.lower().removeprefix("test_"))
    base = base[:20].strip("-")
    name = f"{base}-{uuid.uuid4().hex[:6]}"
    core_v1.create_namespace({"metadata": {"name": name, "labels": {"volcano-py.test/e2e": "true"}}})
    yield name
    core_v1.delete_namespace(name)
