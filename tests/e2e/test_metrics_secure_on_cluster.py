"""`--metrics-secure` on a real apiserver (issue 31): the scheduler, run as its ServiceAccount with the RBAC the
chart renders with `metrics.secure=true` and the args of its Deployment, serves /metrics over HTTPS to a
service-account token whose user may `get /metrics` (200), refuses one whose user may not (403), a forged token
and no token (401), and keeps the probes open without a token. The apiserver makes each decision: a TokenReview
of the bearer token, then a SubjectAccessReview, both sent by the scheduler with the rights the chart grants it
(without them every answer would be a 500). The chart's own reader token, the one its monitors scrape with, reads
the metrics too (a token of its ServiceAccount: this control plane runs no token controller to fill in its
Secret)."""

from __future__ import annotations

import signal
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from controlplane import REPO_ROOT, free_port, wait_for
from kubernetes import client

SYSTEM_NS = "volcano-py-system"
TIMEOUT = 90
HELM = REPO_ROOT / ".bin" / "helm"
RBAC_KINDS = {"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Secret"}


def render_secure() -> list[dict[str, Any]]:
    assert HELM.exists(), f"no helm at {HELM}: run `make helm-bin`"
    out = subprocess.run([str(HELM), "template", "volcano-py", str(REPO_ROOT / "charts" / "volcano-py"), "-n",
                          SYSTEM_NS, "--set", "createNamespace=true", "--set", "metrics.secure=true"],
                         capture_output=True, text=True, check=True).stdout
    return [o for o in yaml.safe_load_all(out) if o]


def get(url: str, token: str | None = None) -> tuple[int, str]:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # the scheduler serves a self-signed certificate (no metrics.tlsSecret)
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), context=ctx, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError:
        return 0, ""


@pytest.fixture(scope="module")
def secure_rbac(control_plane, tmp_path_factory):
    """The chart's Namespace, ServiceAccounts, RBAC and reader token Secret with metrics.secure=true, applied."""
    objs = render_secure()
    path = tmp_path_factory.mktemp("secure") / "rbac.yaml"
    path.write_text(yaml.safe_dump_all([o for o in objs if o["kind"] in RBAC_KINDS]))
    control_plane.kubectl("apply", "-f", str(path))
    yield objs
    # What only metrics.secure adds goes again, so later tests see the default chart's rights.
    for o in objs:
        if o["metadata"]["name"].startswith("volcano-py-metrics"):
            kind, name = o["kind"].lower(), o["metadata"]["name"]
            ns = ["-n", SYSTEM_NS] if o["metadata"].get("namespace") else []
            control_plane.kubectl("delete", kind, name, *ns, "--ignore-not-found", check=False)


def token_for(core_v1, namespace: str, account: str) -> str:
    core_v1.create_namespaced_service_account(namespace, {"metadata": {"name": account}})
    answer = core_v1.create_namespaced_service_account_token(
        account, namespace, {"spec": {"audiences": [], "expirationSeconds": 600}})
    return str(answer.status.token)


@pytest.fixture
def reader_binding(api_client, namespace):
    """A ClusterRoleBinding of the chart's volcano-py-metrics-reader to ServiceAccount <namespace>/reader."""
    rbac = client.RbacAuthorizationV1Api(api_client)
    name = f"metrics-reader-{uuid.uuid4().hex[:6]}"
    rbac.create_cluster_role_binding({
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "volcano-py-metrics-reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": namespace}]})
    yield
    rbac.delete_cluster_role_binding(name)


def scheduler_args(objs: list[dict[str, Any]], conf: Path, port: int) -> list[str]:
    deployment = next(o for o in objs if o["kind"] == "Deployment" and o["metadata"]["name"] == "volcano-py-scheduler")
    args = []
    for arg in deployment["spec"]["template"]["spec"]["containers"][0]["args"]:
        flag = arg.split("=", 1)[0]
        if flag == "--listen-address":
            arg = f"--listen-address=127.0.0.1:{port}"
        elif flag == "--scheduler-conf":
            arg = f"--scheduler-conf={conf}"
        args.append(arg.replace("$(POD_NAME)", "e2e-metrics-secure"))
    assert "--metrics-secure" in args
    return args


def test_secure_metrics_answer_by_kubernetes_rbac(secure_rbac, control_plane, core_v1, namespace, reader_binding,
                                                 tmp_path):
    objs = secure_rbac
    conf = tmp_path / "volcano-scheduler.conf"
    configmap = next(o for o in objs if o["kind"] == "ConfigMap" and "volcano-scheduler.conf" in (o.get("data") or {}))
    conf.write_text(configmap["data"]["volcano-scheduler.conf"])
    reader = token_for(core_v1, namespace, "reader")
    stranger = token_for(core_v1, namespace, "stranger")
    port = free_port()
    base = f"https://127.0.0.1:{port}"
    kubeconfig = control_plane.kubeconfig_for_service_account(SYSTEM_NS, "volcano-py-scheduler")
    log_path = tmp_path / "scheduler.log"
    with open(log_path, "wb") as log_file:
        proc = subprocess.Popen([sys.executable, "-m", "scheduler.cli", *scheduler_args(objs, conf, port),
                                 "--kubeconfig", str(kubeconfig)], stdout=log_file, stderr=subprocess.STDOUT)
        try:
            wait_for(lambda: get(f"{base}/healthz")[0] == 200, TIMEOUT, what="/healthz over HTTPS, no token")
            assert get(f"{base}/metrics")[0] == 401
            assert get(f"{base}/metrics", "not-a-token")[0] == 401
            status, body = get(f"{base}/metrics", stranger)
            assert status == 403, body
            assert f"system:serviceaccount:{namespace}:stranger" in body
            status, body = get(f"{base}/metrics", reader)
            assert status == 200, body
            assert "# TYPE volcano_e2e_scheduling_latency_milliseconds histogram" in body

            # The chart's reader ServiceAccount, whose token Secret the monitors scrape with (the token controller,
            # not run by this control plane, fills that Secret in): a token of it reads the metrics.
            monitor_token = core_v1.create_namespaced_service_account_token(
                "volcano-py-metrics-reader", SYSTEM_NS, {"spec": {"audiences": [], "expirationSeconds": 600}})
            status, body = get(f"{base}/metrics", monitor_token.status.token)
            assert status == 200, body
            # The probes stay open; plain HTTP is not served on the metrics port.
            assert get(f"{base}/readyz")[0] in (200, 503)
            with pytest.raises(OSError):
                urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read()
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(TIMEOUT) == 0, log_path.read_text()[-3000:]
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    text = log_path.read_text()
    # Every review was made: a missing right would show as a 403 of the apiserver in the log ("... failed").
    assert "Authentication for" not in text and "Authorization for" not in text, text[-3000:]
    assert "forbidden" not in text.lower(), text[-3000:]
