"""The session fixtures tests/e2e and tests/chaos share: each suite's conftest imports them, so each gets its own
control plane (the chaos suite kills etcd and the apiserver) from the same code."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from controlplane import BINARIES, ControlPlane


@pytest.fixture(scope="session")
def control_plane():
    """A started control plane for the session. Without its binaries the tests are skipped with the reason, or
    fail when VOLCANO_PY_E2E_REQUIRE=1."""
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
