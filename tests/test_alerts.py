"""The alert rules and the Grafana dashboard are valid PromQL over metrics the scheduler and the controllers export,
and the dashboard has a panel on every family of the controllers.

No Prometheus runs here, so each expression is parsed (promql-parser, a port of Prometheus's own grammar) and
every metric it selects must be a name in the exposition text of `SchedulerMetrics` and `ControllerMetrics`
(a family's name, with a
histogram's suffixes), or Prometheus's own `up`. A renamed metric or a typo in a rule fails here rather than as
an alert that never fires.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import promql_parser
import pytest
import yaml
from prometheus_client import CollectorRegistry

from scheduler.metrics import ControllerMetrics, SchedulerMetrics, exposition

ROOT = Path(__file__).resolve().parents[1]
PROMETHEUS_OWN = {"up"}
SUFFIXES = {"histogram": ("_bucket", "_count", "_sum"), "summary": ("_count", "_sum")}


def exported() -> set[str]:
    """What a scrape can hold: every TYPE line's name (a counter's is its full sample name, `_total` or not)
    with a histogram's suffixes, whether or not the family has series yet."""
    registry = CollectorRegistry()
    SchedulerMetrics(registry)
    ControllerMetrics(registry)
    names: set[str] = set()
    for line in exposition(registry).decode().splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            names |= {name + suffix for suffix in SUFFIXES.get(kind, ("",))}
    return names


def alert_rules() -> list[dict]:
    doc = yaml.safe_load((ROOT / "manifests" / "alerts.yaml").read_text())
    return [rule for group in doc["spec"]["groups"] for rule in group["rules"]]


def dashboard_exprs() -> list[str]:
    found: list[str] = []

    def visit(node: object) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("expr"), str):
                found.append(node["expr"])
            for value in node.values():
                visit(value)
        elif isinstance(node, list):
            for value in node:
                visit(value)

    visit(json.loads((ROOT / "manifests" / "grafana-dashboard.json").read_text()))
    return found


def grafana_to_promql(expr: str) -> str:
    """Grafana's variables, as Grafana substitutes them before the query reaches Prometheus."""
    expr = expr.replace("$__rate_interval", "5m").replace("$__interval", "1m").replace("$__range", "1h")
    return re.sub(r"\$\{?(\w+)(:\w+)?\}?", ".*", expr)


def selected_metrics(expr: str) -> set[str]:
    names: set[str] = set()

    def visit(node: object) -> None:
        if isinstance(node, promql_parser.VectorSelector) and node.name:
            names.add(node.name)

    promql_parser.walk(promql_parser.parse(expr), pre_visit=visit)
    return names


@pytest.mark.parametrize("rule", alert_rules(), ids=lambda r: r.get("alert") or r.get("record"))
def test_each_alert_parses_and_selects_only_exported_metrics(rule: dict) -> None:
    unknown = selected_metrics(rule["expr"]) - exported() - PROMETHEUS_OWN
    assert not unknown, f"{rule.get('alert')}: no such metric {sorted(unknown)}"
    assert rule.get("annotations", {}).get("summary"), "an alert says what is wrong"


def test_every_dashboard_panel_parses_and_selects_only_exported_metrics() -> None:
    exprs = dashboard_exprs()
    assert len(exprs) >= 10
    for expr in exprs:
        unknown = selected_metrics(grafana_to_promql(expr)) - exported() - PROMETHEUS_OWN
        assert not unknown, f"{expr}: no such metric {sorted(unknown)}"


def test_a_misspelt_metric_or_broken_expression_is_caught() -> None:
    typo = "volcano_schedule_atempts_total"
    assert selected_metrics(f"rate({typo}[5m])") - exported() == {typo}
    with pytest.raises(ValueError):
        promql_parser.parse("sum by (le (rate(x[5m]))")



def test_every_controllers_family_has_a_dashboard_panel() -> None:
    registry = CollectorRegistry()
    declared = ControllerMetrics(registry).declared
    used = {name for expr in dashboard_exprs() for name in selected_metrics(grafana_to_promql(expr))}
    missing = sorted(f for f, (kind, _) in declared.items()
                     if not ({f} | {f + s for s in SUFFIXES.get(kind, ())}) & used)
    assert missing == []
