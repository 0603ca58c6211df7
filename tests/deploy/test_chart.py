"""The Helm chart as helm sees it: `helm lint` and `helm template` pass with the defaults, which render exactly
crds/ and manifests/; values.schema.json types every value of values.yaml and helm refuses a wrong one naming
it; the chart's README lists every value; the webhook's generated certificate is one its configuration trusts.

helm is the one `make helm-bin` builds (`make unit` depends on it); without it these tests fail, never skip.
"""

from __future__ import annotations

import base64
import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from helm_chart import CHART, SYSTEM_NS, crd_objects, manifest_objects, render, run_helm, values_file

from scheduler.flags import parse_webhook

# The values under which the chart renders manifests/: what `kubectl apply -f manifests/` installs.
MANIFEST_VALUES = {
    "createNamespace": True,
    "metrics": {"prometheusRule": {"enabled": True}, "serviceMonitor": {"enabled": True},
                "podMonitor": {"enabled": True}},
}
SCHEMA = json.loads((CHART / "values.schema.json").read_text())
VALUES = yaml.safe_load((CHART / "values.yaml").read_text())


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


# ---- values.schema.json --------------------------------------------------------------------------------------
def resolve(node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        node = SCHEMA["definitions"][node["$ref"].removeprefix("#/definitions/")]
    return node


def walk(value: Any, node: dict[str, Any], path: str) -> list[str]:
    """What the schema leaves undescribed at `path`: a value without a type, a key it does not declare, or
    (for the chart's own groups of values, which require all their keys) a declared key values.yaml lacks."""
    node = resolve(node)
    problems = [] if ("type" in node or "oneOf" in node) else [f"{path}: no type"]
    if isinstance(value, dict) and "properties" in node:
        declared = node["properties"]
        problems += [f"{path}.{key}: not in the schema" for key in value.keys() - declared.keys()]
        if node.get("required"):
            problems += [f"{path}.{key}: in the schema, not in values.yaml" for key in declared.keys() - value.keys()]
        for key in value.keys() & declared.keys():
            problems += walk(value[key], declared[key], f"{path}.{key}")
    return problems


def test_the_schema_is_draft_7_and_values_yaml_meets_it() -> None:
    jsonschema.Draft7Validator.check_schema(SCHEMA)
    jsonschema.Draft7Validator(SCHEMA).validate(VALUES)


def test_the_schema_types_every_value_and_declares_no_value_values_yaml_lacks() -> None:
    assert walk(VALUES, SCHEMA, "") == []


@dataclass(frozen=True, slots=True)
class Refused:
    name: str
    values: dict[str, Any]
    path: str  # the JSON pointer helm names


REFUSED = [
    Refused("a replica count given as a word", {"scheduler": {"replicas": "two"}}, "/scheduler/replicas"),
    Refused("a negative replica count", {"controllers": {"replicas": -1}}, "/controllers/replicas"),
    Refused("a failure policy the apiserver does not know", {"webhook": {"failurePolicy": "Sometimes"}},
            "/webhook/failurePolicy"),
    Refused("an anti-affinity preset that is not soft, hard or none", {"controllers": {"podAntiAffinity": "spread"}},
            "/controllers/podAntiAffinity"),
    Refused("a pull policy Kubernetes does not know", {"image": {"pullPolicy": "Sometimes"}}, "/image/pullPolicy"),
    Refused("a schedule period that is not a Go duration", {"scheduler": {"schedulePeriod": "soon"}},
            "/scheduler/schedulePeriod"),
    Refused("a scrape interval given as a bare number", {"metrics": {"serviceMonitor": {"interval": 30}}},
            "/metrics/serviceMonitor/interval"),
    Refused("a pull secret given as a bare name", {"imagePullSecrets": ["regcred"]}, "/imagePullSecrets/0"),
    Refused("a misspelt value", {"scheduler": {"replica": 3}}, "/scheduler"),
    Refused("a PodDisruptionBudget of a fraction", {"scheduler": {"podDisruptionBudget": {"maxUnavailable": 0.5}}},
            "/scheduler/podDisruptionBudget/maxUnavailable"),
    Refused("a toleration with an unknown effect", {"tolerations": [{"key": "k", "effect": "Sometimes"}]},
            "/tolerations/0/effect"),
]


def refused_paths(output: str) -> set[str]:
    """The JSON pointers of helm's schema errors: lines `- at '/scheduler/replicas': got string, want integer`."""
    return set(re.findall(r"^\s*- at '([^']*)'", output, flags=re.MULTILINE))


@pytest.mark.parametrize("case", REFUSED, ids=lambda c: c.name)
def test_helm_refuses_a_wrong_value_naming_its_field(case: Refused, tmp_path: Path) -> None:
    r = run_helm("template", "volcano-py", str(CHART), *values_file(tmp_path, case.values), check=False)
    assert r.returncode != 0, r.stdout
    assert refused_paths(r.stderr) == {case.path}, r.stderr


def test_a_wrong_value_given_with_set_is_refused_too() -> None:
    r = run_helm("template", "volcano-py", str(CHART), "--set", "scheduler.replicas=two", check=False)
    assert (r.returncode != 0, refused_paths(r.stderr)) == (True, {"/scheduler/replicas"}), r.stderr


# ---- the chart's README ----------------------------------------------------------------------------------------
def documented(value: Any, node: dict[str, Any], path: str) -> set[str]:
    """The dotted names the README must have a row for: the chart's own groups of values (schema objects that
    require their keys) are descended into; anything else, a Kubernetes-shaped object such as resources or
    affinity included, is one value."""
    node = resolve(node)
    if isinstance(value, dict) and node.get("required"):
        return {name for key in value for name in documented(value[key], node["properties"][key], f"{path}.{key}")}
    return {path}


def test_the_charts_readme_lists_every_value() -> None:
    rows = re.findall(r"^\| `([^`]+)` \|", (CHART / "README.md").read_text(), flags=re.MULTILINE)
    names = {name for key in VALUES for name in documented(VALUES[key], SCHEMA["properties"][key], key)}
    assert (sorted(names - set(rows)), sorted(set(rows) - names)) == ([], [])


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
    assert (opts.ignored, opts.port) == ((), 8443)  # the paths it answers: test_chart_webhook_routes.py
    rules = objs[("ClusterRole", "volcano-py-webhook")]["rules"]
    assert rules == [{"apiGroups": ["scheduling.volcano.sh"], "resources": ["queues"], "verbs": ["get", "list"]},
                     {"apiGroups": [""], "resources": ["pods"], "verbs": ["create"]}]  # the templates' dry runs
