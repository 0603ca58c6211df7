"""Chaos suite (issue 11): faults injected into a real control plane while volcano-py schedules.

Every test here is marked ``e2e`` and ``chaos``. `make chaos` runs them (`pytest -m chaos tests/chaos`);
`make e2e` (`pytest -m e2e tests/e2e`) does not collect this directory, and `make unit` deselects ``e2e``.

The suite starts its own control plane (it kills etcd and kube-apiserver, which would break a shared one).
Repetitions: VOLCANO_CHAOS_ROUNDS (default 3, as in CI; 10 locally), VOLCANO_CHAOS_SEED (default 11).
"""

from __future__ import annotations

import contextlib
import uuid
from pathlib import Path

import pytest
from kubernetes.client.exceptions import ApiException

HERE = Path(__file__).resolve().parent



def pytest_configure(config):
    config.addinivalue_line("markers", "chaos: fault injection against a real control plane (make chaos)")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.e2e)
            item.add_marker(pytest.mark.chaos)


@pytest.fixture(scope="module")
def proxied(control_plane, tmp_path_factory):
    """The fault proxy (fault_proxy.py) in front of the apiserver, and a kubeconfig pointing to it."""
    from fault_proxy import proxy_for

    proxy, kubeconfig = proxy_for(control_plane, tmp_path_factory.mktemp("fault-proxy"))
    try:
        yield proxy, kubeconfig
    finally:
        proxy.__exit__()


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
        with contextlib.suppress(ApiException):  # already gone
            core_v1.delete_namespace(name)
