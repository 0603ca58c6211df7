"""The traps a newcomer met (issue 38), each ended in one line that says what to do: a kubeconfig that is not
YAML, an apiserver that accepts connections and never answers, and a 404 that means a CRD is missing."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from scheduler.cache.kube import KubeError
from scheduler.cli import main
from scheduler.cli.ctl import waiting
from scheduler.cli.ctl.client import missing_crd


def test_a_kubeconfig_that_is_not_yaml_is_one_line_naming_the_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "config"
    path.write_text('apiVersion: v1\nclusters:\n- name: c\n  cluster: {server: "https://x"\ncontexts: []\n')
    code = main(["job", "list", "--kubeconfig", str(path)])
    (line,) = capsys.readouterr().err.splitlines()
    assert code == 2
    assert line.startswith(f"volcano-py: error: kubeconfig {path} is not valid YAML: ")
    assert "line 5" in line and "internal error" not in line


def test_a_kubeconfig_from_the_environment_is_named_too(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "env-config"
    path.write_text("clusters: [\n")
    monkeypatch.setenv("KUBECONFIG", str(path))
    assert main(["queue", "list"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert str(path) in line and "not valid YAML" in line


@pytest.fixture
def hung_apiserver() -> Iterator[str]:
    """A server that accepts connections and never answers, as a hung apiserver does."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join()
    for conn in accepted:
        conn.close()
    server.close()


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


def test_a_hung_apiserver_ends_in_the_request_timeout_with_one_line(
        hung_apiserver: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    started = time.monotonic()
    code = main(["job", "list", "--kubeconfig", _kubeconfig(tmp_path, hung_apiserver), "--request-timeout", "1s"])
    elapsed = time.monotonic() - started
    (line,) = capsys.readouterr().err.splitlines()
    assert code == 1
    assert line.startswith("volcano-py: error: the apiserver did not answer within 1s (--request-timeout)")
    assert elapsed < 10


def test_a_slow_answer_is_said_while_waiting(hung_apiserver: str, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(waiting.WaitingKube, "note_after", 0.2)
    code = main(["queue", "list", "--kubeconfig", _kubeconfig(tmp_path, hung_apiserver), "--request-timeout", "2s"])
    lines = capsys.readouterr().err.splitlines()
    assert code == 1
    assert lines[0] == (f"volcano-py: waiting for the apiserver at {hung_apiserver} to answer (giving up after 2s, "
                        "--request-timeout)")
    assert len(lines) == 2 and "did not answer within 2s" in lines[1]


def test_master_stays_the_server_after_the_loader_refreshes_the_token(
        hung_apiserver: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`-s` over a kubeconfig's server: the kubeconfig loader's token hook set the kubeconfig's server again on
    the first request, which then failed as an internal error."""
    code = main(["job", "list", "--kubeconfig", _kubeconfig(tmp_path, "http://127.0.0.1:1"), "-s", hung_apiserver,
                 "--request-timeout", "1s"])
    (line,) = capsys.readouterr().err.splitlines()
    assert code == 1 and "did not answer within 1s" in line


# ---- a missing CRD ----------------------------------------------------------------------------------------

PATH = "/apis/batch.volcano.sh/v1alpha1/namespaces/default/jobs"


def test_a_404_of_an_unserved_group_is_a_missing_crd() -> None:
    crd = missing_crd(KubeError(404, "GET", PATH, b"404 page not found\n"))
    assert crd is not None
    assert str(crd).startswith("the cluster has no jobs.batch.volcano.sh CRD")
    assert "kubectl apply --server-side -f crds/" in str(crd) and "crds/batch.volcano.sh_jobs.yaml" in str(crd)


def test_a_404_of_an_unserved_resource_in_a_served_group_is_a_missing_crd() -> None:
    body = {"kind": "Status", "status": "Failure", "message": "the server could not find the requested resource",
            "reason": "NotFound", "details": {}, "code": 404}
    crd = missing_crd(KubeError(404, "GET", "/apis/flow.volcano.sh/v1alpha1/jobtemplates", json.dumps(body).encode()))
    assert crd is not None and "jobtemplates.flow.volcano.sh" in str(crd)


def test_a_404_of_a_missing_object_is_not_a_missing_crd() -> None:
    body = {"kind": "Status", "message": 'jobs.batch.volcano.sh "x" not found', "reason": "NotFound",
            "details": {"name": "x", "group": "batch.volcano.sh", "kind": "jobs"}, "code": 404}
    assert missing_crd(KubeError(404, "GET", f"{PATH}/x", json.dumps(body).encode())) is None
    assert missing_crd(KubeError(404, "GET", "/api/v1/namespaces/default/pods/x", b"404 page not found")) is None


def test_explain_on_a_cluster_without_the_crds_says_so() -> None:
    """explain reads objects one by one, each a 404 whether or not its CRD is there: when it finds nothing, it
    asks whether the lists are served before saying the name is unknown."""
    from scheduler.cli.ctl.client import Client, MissingCRDError

    class NoVolcano:
        def get_or_none(self, path: str) -> None:
            return None

        def request(self, method: str, path: str, **_: object) -> dict[str, object]:
            if "volcano.sh" in path:
                raise KubeError(404, method, path, b"404 page not found\n")
            return {"items": []}

    with pytest.raises(MissingCRDError, match="no jobs.batch.volcano.sh CRD"):
        Client(NoVolcano()).facts("default", "train")  # type: ignore[arg-type]
