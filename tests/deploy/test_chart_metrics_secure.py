"""`metrics.secure` (issue 31): the chart passes `--metrics-secure`, probes over HTTPS on the renamed port,
grants the TokenReview and SubjectAccessReview rights only then, and its monitors scrape with https and the token
of a ServiceAccount that may get /metrics. Off (the default), none of it is rendered."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helm_chart import CHART, SYSTEM_NS, render, run_helm, values_file

from scheduler.flags import parse_controllers, parse_scheduler

SECURE = {"metrics": {"secure": True, "serviceMonitor": {"enabled": True}, "podMonitor": {"enabled": True}}}
PARSE = {"volcano-py-scheduler": parse_scheduler, "volcano-py-controllers": parse_controllers}


def container(objs: dict[Any, dict[str, Any]], name: str) -> dict[str, Any]:
    return objs[("Deployment", SYSTEM_NS, name)]["spec"]["template"]["spec"]["containers"][0]


def review_rules(objs: dict[Any, dict[str, Any]]) -> list[tuple[str, str]]:
    return [(group, resource) for (kind, _, _), o in objs.items() if kind == "ClusterRole"
            for rule in o.get("rules", []) for group in rule.get("apiGroups", []) for resource in rule["resources"]
            if resource in ("tokenreviews", "subjectaccessreviews")]


def test_off_by_default_nothing_of_it_is_rendered(tmp_path: Path) -> None:
    objs = render(tmp_path, {"metrics": {"serviceMonitor": {"enabled": True}, "podMonitor": {"enabled": True}}})
    assert review_rules(objs) == []
    assert not [k for k in objs if k[2].startswith("volcano-py-metrics")]
    for name in PARSE:
        c = container(objs, name)
        assert not [a for a in c["args"] if a.startswith("--metrics-")]
        assert "scheme" not in c["livenessProbe"]["httpGet"]
        assert [p["name"] for p in c["ports"]] == ["http-metrics"]


def test_secure_components_serve_tls_and_probe_over_https(tmp_path: Path) -> None:
    objs = render(tmp_path, SECURE)
    for name, parse in PARSE.items():
        c = container(objs, name)
        opts = parse(c["args"][1:])  # the CLI takes them, and they go together
        assert opts.metrics_secure and opts.metrics_tls_problem() is None
        assert [secure for _, secure in opts.serving] == [True]
        assert [p["name"] for p in c["ports"]] == ["https-metrics"]
        for probe in ("livenessProbe", "readinessProbe"):
            assert c[probe]["httpGet"]["scheme"] == "HTTPS"
            assert c[probe]["httpGet"]["port"] == "https-metrics"


def test_only_secure_grants_the_review_rights_to_both_components(tmp_path: Path) -> None:
    objs = render(tmp_path, SECURE)
    role = objs[("ClusterRole", "", "volcano-py-metrics-auth")]
    assert role["rules"] == [
        {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
        {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]}]
    assert sorted(review_rules(objs)) == [("authentication.k8s.io", "tokenreviews"),
                                          ("authorization.k8s.io", "subjectaccessreviews")]
    binding = objs[("ClusterRoleBinding", "", "volcano-py-metrics-auth")]
    assert binding["roleRef"]["name"] == "volcano-py-metrics-auth"
    assert {(s["namespace"], s["name"]) for s in binding["subjects"]} == {
        (SYSTEM_NS, "volcano-py-scheduler"), (SYSTEM_NS, "volcano-py-controllers")}


def test_the_monitors_scrape_https_with_a_token_that_may_get_metrics(tmp_path: Path) -> None:
    objs = render(tmp_path, SECURE)
    service = objs[("Service", SYSTEM_NS, "volcano-py-scheduler-metrics")]
    (endpoint,) = objs[("ServiceMonitor", SYSTEM_NS, "volcano-py-scheduler")]["spec"]["endpoints"]
    (pod_endpoint,) = objs[("PodMonitor", SYSTEM_NS, "volcano-py-controllers")]["spec"]["podMetricsEndpoints"]
    assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}
    assert pod_endpoint["port"] in {p["name"] for p in container(objs, "volcano-py-controllers")["ports"]}
    for e in (endpoint, pod_endpoint):
        assert e["scheme"] == "https"
        assert e["tlsConfig"] == {"insecureSkipVerify": True}  # self-signed: no tlsSecret
        assert e["authorization"]["type"] == "Bearer"
        secret = objs[("Secret", SYSTEM_NS, e["authorization"]["credentials"]["name"])]
        assert secret["type"] == "kubernetes.io/service-account-token"
        assert e["authorization"]["credentials"]["key"] == "token"
        account = secret["metadata"]["annotations"]["kubernetes.io/service-account.name"]
        assert ("ServiceAccount", SYSTEM_NS, account) in objs
    # that ServiceAccount is bound to a role that may get /metrics, and to nothing else
    bindings = [o for (kind, _, _), o in objs.items() if kind in ("ClusterRoleBinding", "RoleBinding")
                and any(s["name"] == account for s in o["subjects"])]
    assert len(bindings) == 1
    role = objs[("ClusterRole", "", bindings[0]["roleRef"]["name"])]
    assert role["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]


def test_a_tls_secret_is_mounted_served_and_verified(tmp_path: Path) -> None:
    objs = render(tmp_path, {"metrics": {**SECURE["metrics"], "tlsSecret": "metrics-tls"}})
    for name, parse in PARSE.items():
        c = container(objs, name)
        opts = parse(c["args"][1:])
        (mount,) = [m for m in c["volumeMounts"] if m["name"] == "metrics-tls"]
        assert opts.metrics_cert_file == f"{mount['mountPath']}/tls.crt"
        assert opts.metrics_key_file == f"{mount['mountPath']}/tls.key"
        volumes = objs[("Deployment", SYSTEM_NS, name)]["spec"]["template"]["spec"]["volumes"]
        assert {"name": "metrics-tls", "secret": {"secretName": "metrics-tls"}} in volumes
    (endpoint,) = objs[("ServiceMonitor", SYSTEM_NS, "volcano-py-scheduler")]["spec"]["endpoints"]
    assert endpoint["tlsConfig"] == {"ca": {"secret": {"name": "metrics-tls", "key": "ca.crt"}},
                                     "serverName": f"volcano-py-scheduler-metrics.{SYSTEM_NS}.svc"}


@pytest.mark.parametrize("monitor", ["serviceMonitor", "podMonitor"])
def test_a_secure_monitor_outside_the_release_namespace_is_refused_naming_why(monitor: str, tmp_path: Path) -> None:
    values = {"metrics": {"secure": True, monitor: {"enabled": True, "namespace": "monitoring"}}}
    r = run_helm("template", "volcano-py", str(CHART),
                 "-n", SYSTEM_NS, *values_file(tmp_path, values), check=False)
    assert r.returncode != 0
    assert f"metrics.{monitor}.namespace must be the release's" in r.stderr
