"""The chart's Prometheus Operator objects, off by default: the ServiceMonitor scrapes the scheduler through its
metrics Service and the PodMonitor the controllers' pods, each on the port the Deployments name, as the job that
the alert rules watch; namespace, labels and interval come from the values."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import promql_parser
import yaml
from helm_chart import MANIFESTS, SYSTEM_NS, of_kind, render

MONITORS_ON = {"metrics": {"serviceMonitor": {"enabled": True}, "podMonitor": {"enabled": True},
                           "prometheusRule": {"enabled": True}}}


def rule_job_regex(alert: str) -> str:
    """The job matcher of the `up` selector in an alert of manifests/alerts.yaml."""
    doc = yaml.safe_load((MANIFESTS / "alerts.yaml").read_text())
    (expr,) = [r["expr"] for g in doc["spec"]["groups"] for r in g["rules"] if r.get("alert") == alert]
    found: list[str] = []

    def visit(node: object) -> None:
        if isinstance(node, promql_parser.VectorSelector) and node.name == "up":
            found.extend(m.value for m in node.matchers.matchers if m.name == "job")

    promql_parser.walk(promql_parser.parse(expr), pre_visit=visit)
    (regex,) = found
    return regex


def container_ports(deployment: dict[str, Any]) -> set[str]:
    return {p["name"] for c in deployment["spec"]["template"]["spec"]["containers"] for p in c.get("ports", [])}


def test_nothing_of_the_operator_is_rendered_by_default(tmp_path: Path) -> None:
    kinds = {kind for kind, _, _ in render(tmp_path)}
    assert kinds & {"ServiceMonitor", "PodMonitor", "PrometheusRule"} == set()


def test_the_service_monitor_scrapes_the_schedulers_metrics_port_as_the_job_the_alerts_watch(tmp_path: Path) -> None:
    objs = render(tmp_path, MONITORS_ON)
    (monitor,) = of_kind(objs, "ServiceMonitor").values()
    spec = monitor["spec"]
    services = [s for s in of_kind(objs, "Service").values()
                if spec["selector"]["matchLabels"].items() <= s["metadata"]["labels"].items()
                and s["metadata"]["namespace"] in spec["namespaceSelector"]["matchNames"]]
    assert [s["metadata"]["name"] for s in services] == ["volcano-py-scheduler-metrics"]
    service = services[0]
    (endpoint,) = spec["endpoints"]
    (port,) = [p for p in service["spec"]["ports"] if p["name"] == endpoint["port"]]
    selected = [d for d in of_kind(objs, "Deployment").values()
                if service["spec"]["selector"].items() <= d["spec"]["template"]["metadata"]["labels"].items()]
    assert [d["metadata"]["name"] for d in selected] == ["volcano-py-scheduler"]
    assert port["targetPort"] in container_ports(selected[0])
    job = service["metadata"]["labels"][spec["jobLabel"]]
    assert re.fullmatch(rule_job_regex("VolcanoPySchedulerDown"), job), job
    assert (job, endpoint["path"], endpoint["interval"]) == ("volcano-py-scheduler", "/metrics", "30s")


def test_the_pod_monitor_scrapes_the_controllers_metrics_port(tmp_path: Path) -> None:
    objs = render(tmp_path, MONITORS_ON)
    (monitor,) = of_kind(objs, "PodMonitor").values()
    spec = monitor["spec"]
    selected = [d for d in of_kind(objs, "Deployment").values()
                if spec["selector"]["matchLabels"].items() <= d["spec"]["template"]["metadata"]["labels"].items()
                and d["metadata"]["namespace"] in spec["namespaceSelector"]["matchNames"]]
    assert [d["metadata"]["name"] for d in selected] == ["volcano-py-controllers"]
    (endpoint,) = spec["podMetricsEndpoints"]
    assert endpoint["port"] in container_ports(selected[0])
    job = selected[0]["spec"]["template"]["metadata"]["labels"][spec["jobLabel"]]
    assert job == "volcano-py-controllers"
    assert not re.fullmatch(rule_job_regex("VolcanoPySchedulerDown"), job)  # a controller is not a scheduler


def test_namespace_labels_interval_and_timeout_come_from_the_values(tmp_path: Path) -> None:
    extra = {"release": "kube-prometheus-stack"}
    settings = {"namespace": "monitoring", "labels": extra, "interval": "1m", "scrapeTimeout": "20s"}
    objs = render(tmp_path, {"metrics": {
        "serviceMonitor": {"enabled": True, **settings}, "podMonitor": {"enabled": True, **settings},
        "prometheusRule": {"enabled": True, "namespace": "monitoring", "labels": extra}}})
    for kind, endpoints in (("ServiceMonitor", "endpoints"), ("PodMonitor", "podMetricsEndpoints")):
        (monitor,) = of_kind(objs, kind).values()
        assert monitor["metadata"]["namespace"] == "monitoring"
        assert extra.items() <= monitor["metadata"]["labels"].items()
        assert monitor["spec"]["namespaceSelector"]["matchNames"] == [SYSTEM_NS]  # the targets stay where they are
        (endpoint,) = monitor["spec"][endpoints]
        assert (endpoint["interval"], endpoint["scrapeTimeout"]) == ("1m", "20s")
    (rule,) = of_kind(objs, "PrometheusRule").values()
    assert rule["metadata"]["namespace"] == "monitoring"
    assert rule["metadata"]["labels"] == {"app.kubernetes.io/part-of": "volcano-py", "role": "alert-rules", **extra}
