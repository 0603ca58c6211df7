"""API-level fuzz (issue 31): hostile objects created on a real control plane while a normal gang is scheduled.

Every test here is marked ``e2e`` and ``fuzz_api``: `make unit` deselects them, `make fuzz-api` runs them
(VOLCANO_FUZZ_API_EXAMPLES examples), and `make test` runs them with the fixed seed and a few examples. The suite
starts its own control plane (one for the whole run; each example gets its own namespaces).
"""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def pytest_configure(config):
    config.addinivalue_line("markers", "fuzz_api: hostile objects on a real control plane (make fuzz-api)")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.e2e)
            item.add_marker(pytest.mark.fuzz_api)
