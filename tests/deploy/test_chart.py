"""The Helm chart as helm sees it: `helm lint` and `helm template` pass with the defaults, which render exactly
crds/ and manifests/; the webhook's generated certificate is one its configuration trusts.

helm is the one `make helm-bin` builds (`make unit` depends on it); without it these tests fail, never skip.
"""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path
from typing import Any

import pytest
from helm_chart import CHART, SYSTEM_NS, crd_objects, manifest_objects, render, run_helm, values_file

from scheduler.flags import parse_webhook

# The values under which the chart renders manifests/: what `kubectl apply -f manifests/` installs.
MANIFEST_VALUES = {
    "createNamespace": True,
    "metrics": {"prometheusRule": {"enabled": True}, "serviceMonitor": {"enabled": True},
                "podMonitor": {"enabled": True}},
}



EVERYTHING_ON = {"webhook": {"enabled": True}, "createNamespace": True, "metrics": {
    "prometheusRule": {"enabled": True}, "serviceMonitor": {"enabled": True}, "podMonitor": {"enabled": True}}}


@pytest.mark.parametrize("values", [{}, EVERYTHING_ON], ids=["defaults", "every optional part on"])
def test_helm_lint_passes(values: dict[str, Any], tmp_path: Path) -> None:
    r = run_helm("lint", "--strict", str(CHART), *values_file(tmp_path, values), check=False)
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_defaults_render_exactly_the_manifests_and_crds(tmp_path: Path) -> None:
    assert render(tmp_path, MANIFEST_VALUES, "--include-crds") == manifest_objects() | crd_objects()


def test_with_no_values_at_all_helm_template_renders_the_components(tmp_path: Path) -> None:
    kinds = {(kind, name) for kind, _, name in render(tmp_path)}
    assert {("Deployment", "volcano-py-scheduler"), ("Deployment", "volcano-py-controllers"),
            ("ConfigMap", "volcano-py-scheduler-configmap")} <= kinds


# ---- the webhook -----------------------------------------------------------------------------------------------
def test_the_charts_webhook_serves_a_certificate_its_configuration_trusts(tmp_path: Path) -> None:
    """webhook.enabled=true: the Secret's certificate is signed by the caBundle the apiserver is given and names
    the Service's DNS name; the Deployment's arguments are ones `volcano-py webhook` honours; RBAC reads queues."""
    objs = {(k[0], k[2]): o for k, o in render(tmp_path, {"webhook": {"enabled": True}}).items()}
    secret = objs[("Secret", "volcano-py-webhook-tls")]
    hook = objs[("ValidatingWebhookConfiguration", "volcano-py-validate-job")]["webhooks"][0]
    (tmp_path / "ca.crt").write_bytes(base64.b64decode(hook["clientConfig"]["caBundle"]))
    (tmp_path / "tls.crt").write_bytes(base64.b64decode(secret["data"]["tls.crt"]))
    service = f"volcano-py-webhook.{SYSTEM_NS}.svc"
    verify = subprocess.run(["openssl", "verify", "-CAfile", "ca.crt", "-verify_hostname", service, "tls.crt"],
                            cwd=tmp_path, capture_output=True, text=True)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert (hook["clientConfig"]["service"]["name"], hook["clientConfig"]["service"]["path"]) == (
        "volcano-py-webhook", "/jobs/validate")
    container = objs[("Deployment", "volcano-py-webhook")]["spec"]["template"]["spec"]["containers"][0]
    assert container["args"][0] == "webhook"
    opts = parse_webhook(container["args"][1:])
    assert (opts.ignored, opts.enabled_admission, opts.port) == ((), ("/jobs/validate",), 8443)
    rules = objs[("ClusterRole", "volcano-py-webhook")]["rules"]
    assert rules == [{"apiGroups": ["scheduling.volcano.sh"], "resources": ["queues"], "verbs": ["get", "list"]}]
