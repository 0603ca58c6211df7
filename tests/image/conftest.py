"""The image suite (`make image-test`): the built image runs as the scheduler and the controllers, in podman, against
the test control plane.

Every test of the container modules below is marked ``e2e`` and ``image``: `make unit` deselects ``e2e``, `make e2e`
collects only tests/e2e, and `make image-test` builds the image first and then runs `pytest -m image tests/image`. The
image is $VOLCANO_PY_IMAGE; without it, or without podman, the tests fail naming what is missing (they never skip).
The other modules here read the image's recipe, lock and Dockerfile without building anything: they are unit tests.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent



def pytest_configure(config):
    config.addinivalue_line("markers", "image: the container image against a real control plane (make image-test)")


CONTAINER_MODULES = {"test_image.py"}  # the modules that run the built image


def pytest_collection_modifyitems(config, items):
    for item in items:
        path = Path(str(item.fspath)).resolve()
        if path.parent == HERE and path.name in CONTAINER_MODULES:
            item.add_marker(pytest.mark.e2e)
            item.add_marker(pytest.mark.image)


@pytest.fixture
def namespace(core_v1, request):
    """A fresh namespace per test, deleted afterwards (the namespace controller empties it)."""
    base = "".join(c if c.isalnum() else "-" for c in request.node.name.lower().removeprefix("test_"))[:20].strip("-")
    name = f"{base}-{uuid.uuid4().hex[:6]}"
    core_v1.create_namespace({"metadata": {"name": name, "labels": {"volcano-py.test/e2e": "true"}}})
    yield name
    core_v1.delete_namespace(name)
