"""Fixtures of the day-two command tests: a stand-in apiserver the commands talk to, and the CLI run in-process."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from stub_apiserver import Stub, StubKube

from scheduler.cli import main
from scheduler.cli.ctl import connect


@dataclass(frozen=True)
class Run:
    code: int
    out: str
    err: str


@pytest.fixture
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """vcctl prints local times and dates; the tests pin the zone to UTC."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.fixture
def vcctl(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], utc: None
) -> Callable[..., tuple[Run, Stub]]:
    """Run `volcano-py ARGS` against a Stub holding `objects`; what it printed and the stub (its requests)."""

    def run(*args: str, objects: list[dict[str, Any]] = ()) -> tuple[Run, Stub]:  # type: ignore[assignment]
        stub = Stub(list(objects))
        monkeypatch.setenv("KUBECONFIG", "/nonexistent/kubeconfig")  # the default namespace is `default`
        monkeypatch.setattr(connect, "kube", lambda _args: StubKube(stub))
        capsys.readouterr()
        try:
            code = main(list(args))
        except SystemExit as exc:  # argparse's own exit, on a bad flag: the process's status
            code = int(exc.code or 0)
        captured = capsys.readouterr()
        return Run(code, captured.out, captured.err), stub

    return run
