"""RELIABILITY.md's issue-31 tables name real tests that `make test` runs (issue 31, "Done when").

Every backticked `path::name` in the two tables ("Hostile inputs tried", "Fault classes injected") must be a test
that the part of `make test` that covers its file collects: `pytest -m "not e2e"` (the unit run) for most files,
`pytest -m e2e tests/e2e` for tests/e2e, `pytest -m chaos tests/chaos` for tests/chaos. Collection runs pytest
itself (`--collect-only`), so a test that a marker or a skip at import deselects fails here.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TABLES = ("### Hostile inputs tried", "### Fault classes injected")
TEST_ID = re.compile(r"`(tests/[\w/]+\.py)::(\w+)`")


def table_rows(text: str, heading: str) -> list[str]:
    """The rows of the first table under `heading`, header and rule left out."""
    start = text.index(heading)
    rows = []
    for line in text[start:].splitlines()[1:]:
        if line.startswith("|"):
            rows.append(line)
        elif rows:
            break
    return rows[2:]


def named_tests() -> dict[str, list[tuple[str, str]]]:
    text = (ROOT / "RELIABILITY.md").read_text()
    found: dict[str, list[tuple[str, str]]] = {}
    for heading in TABLES:
        rows = table_rows(text, heading)
        assert rows, f"no table under {heading!r}"
        found[heading] = []
        for row in rows:
            ids = TEST_ID.findall(row.rsplit("|", 2)[-2])  # the Test column, the last
            assert ids, f"a row under {heading!r} names no test: {row[:120]}"
            found[heading].extend(ids)
    return found


def selection(path: str) -> list[str]:
    if path.startswith("tests/e2e/"):
        return ["-m", "e2e"]
    if path.startswith("tests/chaos/"):
        return ["-m", "chaos"]
    if path.startswith("tests/fuzz_api/"):
        return ["-m", "fuzz_api"]
    return ["-m", "not e2e"]


def test_every_test_the_tables_name_exists_and_make_test_collects_it() -> None:
    by_run: dict[tuple[str, ...], set[str]] = defaultdict(set)
    wanted: list[tuple[str, str]] = []
    for ids in named_tests().values():
        for path, name in ids:
            assert (ROOT / path).is_file(), f"{path} does not exist"
            assert re.search(rf"^def {name}\(", (ROOT / path).read_text(), re.M), f"{path} has no test {name}"
            by_run[tuple(selection(path))].add(path)
            wanted.append((path, name))
    collected: set[str] = set()
    for marks, paths in by_run.items():
        run = subprocess.run(
            [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *marks, *sorted(paths)],
            cwd=ROOT, capture_output=True, text=True, timeout=600,
        )
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        collected |= {line.split("[", 1)[0] for line in run.stdout.splitlines() if "::" in line}
    missing = [f"{path}::{name}" for path, name in wanted if f"{path}::{name}" not in collected]
    assert not missing, f"named in RELIABILITY.md but not collected by make test: {missing}"


def test_the_tables_parse() -> None:
    """The parser itself: both tables are found and each has rows (a renamed heading would empty them)."""
    found = named_tests()
    assert set(found) == set(TABLES) and all(found.values())
