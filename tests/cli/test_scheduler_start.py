"""`volcano-py scheduler` pauses the garbage collector while it starts (scheduler/cli/__init__.py): it is off when the
client is made and the framework imported, and a start that fails (here: an unreadable kubeconfig) gives it
back, so a caller in the same process is left as it was."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from scheduler import cli


def test_the_collector_is_off_while_starting_and_back_after_a_failed_start(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("clusters: [")
    real = cli._api_client
    seen: list[bool] = []

    def recording(opts: object) -> object:
        seen.append(gc.isenabled())
        return real(opts)  # type: ignore[arg-type]

    monkeypatch.setattr(cli, "_api_client", recording)
    assert gc.isenabled()
    assert cli.main(["scheduler", "--kubeconfig", str(kubeconfig)]) == 1
    assert (seen, gc.isenabled()) == ([False], True)
