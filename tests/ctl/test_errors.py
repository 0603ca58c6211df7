"""Day-two commands fail in one line, without a traceback, when there is no cluster to talk to (issue 21).

The traceback is there for whoever asks with --debug."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from scheduler.cli import main
from scheduler.ctl.commands import NoCluster


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _kubeconfig(tmp_path: Path, server: str) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(f"""apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "{server}"}}}}]
users: [{{name: u, user: {{token: t}}}}]
contexts: [{{name: x, context: {{cluster: c, user: u}}}}]
current-context: x
""")
    return str(path)


@pytest.mark.parametrize("command", [["queue", "list"], ["job", "list"], ["explain", "some-job"]])
def test_no_kubeconfig_and_no_pod_is_one_line(command: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert main(command) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("volcano-py: error: no cluster to talk to")


def test_an_apiserver_that_refuses_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kubeconfig = _kubeconfig(tmp_path, f"https://127.0.0.1:{_closed_port()}")
    assert main(["queue", "list", "--kubeconfig", kubeconfig, "--request-timeout", "2"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("volcano-py: error: cannot reach the apiserver")


def test_debug_shows_the_error_itself(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(NoCluster):
        main(["queue", "list", "--debug"])
