"""`volcano-py version`, where vcctl has `vcctl version`: one line, status 0, no cluster needed."""

from __future__ import annotations

from typing import Any


def test_version_is_one_line_and_asks_no_apiserver(vcctl: Any) -> None:
    run, stub = vcctl("version")
    (line,) = run.out.splitlines()
    assert run.code == 0 and line.split()[0] == "volcano-py" and stub.requests == []
