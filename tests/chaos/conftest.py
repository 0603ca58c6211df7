"""Chaos suite (issue 11): faults injected into a real control plane while volcano-py schedules.

Every test here is marked ``e2e`` and ``chaos``. `make chaos` runs them (`pytest -m chaos tests/chaos`);
`make e2e` (`pytest -m e2e tests/e2e`) does not collect this directory, and `make unit` deselects ``e2e``.

The suite starts its own control plane (it kills etcd and kube-apiserver, which would break a shared one).
Repetitions: VOLCANO_CHAOS_ROUNDS (default 3, as in CI; 10 locally), VOLCANO_CHAOS_SEED (default 11).
"""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "e2e"))  # the harness: controlplane.py and the e2e helpers

from controlplane import BINARIES, ControlPlane  # noqa: E402


def pytest_configure(config):
    config.addinivalue_line("markers", "chaos: fault injection against a real control plane (make chaos)")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.e2e)
            item.add_marker(pytest.mark.chaos)


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
def api_client(control_plane):
    api = control_plane.api_client()
    yield api
    api.close()


@pytest.fixture(scope="session")
def core_v1(api_client):
    from kubernetes import client

    return client.CoreV1Api(api_client)


@pytest.fixture(scope="session")
def custom(api_client):
    from kubernetes import client

    return client.CustomObjectsApi(api_client)


@pytest.fixture
def new_namespace(core_v1):
    """Makes fresh namespaces (deleted afterwards)."""
    made: list[str] = []

    def make(base: str) -> str:
        name = f"{base[:20]}-{uuid.uuid4().hex[:6]}"
        core_v1.create_namespace({"metadata": {"name": name}})
        made.append(name)
        return name

    yield make
    for name in made:
        try:
            core_v1.delete_namespace(name)
        except Exception:  # noqa: BLE001 - best effort cleanup
            pass
