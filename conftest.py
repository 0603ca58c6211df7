"""Fixtures every test directory may use: the real control plane and its clients (tests/e2e/cluster_fixtures.py).

Registered once here, at the root, rather than imported into each directory's conftest; the module is found
through the dev path the Makefile's venv step writes (.venv's volcano_py_dev.pth). The fixtures start nothing
until a test asks for one.
"""

pytest_plugins = ["cluster_fixtures"]
