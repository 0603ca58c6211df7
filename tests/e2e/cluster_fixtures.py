"""The session fixtures tests/e2e and tests/chaos share: each suite's conftest imports them, so each gets its own
control plane (the chaos suite kills etcd and the apiserver) from the same code."""

from __future__ import annotations

from pathlib import Path

import pytest
from controlplane import started_control_plane


@pytest.fixture(scope="session")
def control_plane():
    with started_control_plane() as cp:
        yield cp


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
