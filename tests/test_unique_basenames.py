"""pytest imports test modules by basename (the suites have no packages): two test files of one name in
different folders stop the whole collection of one run ("import file mismatch"). Every test file name is unique."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def test_every_test_module_has_its_own_basename() -> None:
    seen: dict[str, list[str]] = defaultdict(list)
    for path in TESTS.rglob("*.py"):
        if path.name.startswith("test_") or path.name == "conftest.py":
            seen[path.name].append(str(path.relative_to(TESTS)))
    clashes = {name: paths for name, paths in seen.items() if len(paths) > 1 and name != "conftest.py"}
    assert clashes == {}
