"""Day-two commands fail in one line, without a traceback, when there is no cluster to talk to (issue 21).

The traceback is there for whoever asks with --debug."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from scheduler.cli import main, parser
from scheduler.cli.ctl import connect
from scheduler.cli.ctl.commands import NoClusterError


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


@pytest.mark.parametrize(
    "command",
    [
        ["queue", "list"],
        ["job", "list"],
        ["explain", "some-job"],
        ["job", "run", "-N", "x"],
        ["job", "view", "-N", "x"],
        ["queue", "create", "-n", "q"],
        ["queue", "operate", "-n", "q", "-a", "close"],
        ["pod", "list"],
        ["jobflow", "list"],
        ["jobtemplate", "get", "-N", "t"],
    ],
    ids=" ".join,
)
def test_no_kubeconfig_and_no_pod_is_one_line(
    command: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert main(command) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("volcano-py: error: no cluster to talk to")


@pytest.mark.parametrize(
    "command", [["queue", "list"], ["job", "run", "-N", "x"], ["pod", "list", "-j", "x"]], ids=" ".join
)
def test_an_apiserver_that_refuses_is_one_line(
    command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = _kubeconfig(tmp_path, f"https://127.0.0.1:{_closed_port()}")
    assert main([*command, "--kubeconfig", kubeconfig, "--request-timeout", "2"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("volcano-py: error: cannot reach the apiserver")


def test_debug_shows_the_error_itself(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(NoClusterError):
        main(["queue", "list", "--debug"])


@pytest.mark.parametrize("with_kubeconfig", [False, True], ids=["no kubeconfig", "over a kubeconfig's server"])
def test_master_is_the_server_talked_to(with_kubeconfig: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`-s/--master`, as vcctl's BuildConfig takes it: alone, or overriding the kubeconfig's server."""
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    flags = ["--kubeconfig", _kubeconfig(tmp_path, "https://10.0.0.9:6443")] if with_kubeconfig else []
    args = parser().parse_args(["job", "list", "-s", "http://127.0.0.1:8080/", *flags])
    assert connect.kube(args).api.configuration.host == "http://127.0.0.1:8080"
