"""The alert rules work in Prometheus: `promtool check rules` accepts them and `promtool test rules` runs every
alert on series that make it fire and on series that must not (tests/deploy/data/alert-rules-test.yaml), among
them a queue capped only on GPUs, whose cpu and memory capacity are exported as 0 (unlimited).

The rules are manifests/alerts.yaml's PrometheusRule; the chart renders the same rules. promtool is Debian's
(`make promtool`, which `make unit` depends on); without it these tests fail, they never skip.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml
from helm_chart import CHART, MANIFESTS, PROMTOOL, ROOT, SYSTEM_NS, of_kind, render

CASES = Path(__file__).parent / "data" / "alert-rules-test.yaml"


def prometheus_rule() -> dict[str, Any]:
    doc = yaml.safe_load((MANIFESTS / "alerts.yaml").read_text())
    assert doc["kind"] == "PrometheusRule"
    return doc


def alert_names() -> set[str]:
    return {rule["alert"] for group in prometheus_rule()["spec"]["groups"] for rule in group["rules"]}


def promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL.exists(), f"no promtool at {PROMTOOL}: run `make promtool` (Debian's prometheus package)"
    return subprocess.run([str(PROMTOOL), *args], cwd=cwd, capture_output=True, text=True)


def rule_file(tmp_path: Path) -> Path:
    """The PrometheusRule's spec is a plain Prometheus rule file: the one the cases name."""
    (rules,) = yaml.safe_load(CASES.read_text())["rule_files"]
    path = tmp_path / rules
    path.write_text(yaml.safe_dump({"groups": prometheus_rule()["spec"]["groups"]}, sort_keys=False))
    return path


def test_promtool_accepts_the_rules(tmp_path: Path) -> None:
    r = promtool("check", "rules", rule_file(tmp_path).name, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr


def test_every_alert_fires_and_stays_quiet_as_the_cases_expect(tmp_path: Path) -> None:
    rule_file(tmp_path)
    shutil.copy(CASES, tmp_path / CASES.name)
    r = promtool("test", "rules", CASES.name, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr


def test_every_alert_has_a_case_that_fires_and_one_that_does_not() -> None:
    fires: set[str] = set()
    quiet: set[str] = set()
    for case in yaml.safe_load(CASES.read_text())["tests"]:
        for check in case["alert_rule_test"]:
            (fires if check["exp_alerts"] else quiet).add(check["alertname"])
    assert (fires, quiet) == (alert_names(), alert_names())


def test_the_chart_renders_the_manifests_rules(tmp_path: Path) -> None:
    rules = of_kind(render(tmp_path, {"metrics": {"prometheusRule": {"enabled": True}}}), "PrometheusRule")
    assert rules["volcano-py"]["spec"] == prometheus_rule()["spec"]
    assert rules["volcano-py"]["metadata"]["namespace"] == SYSTEM_NS


# ---- runbooks ---------------------------------------------------------------------------------------------------
RUNBOOKS = ROOT / "docs" / "runbooks.md"
RUNBOOK_URL = yaml.safe_load((CHART / "values.yaml").read_text())["metrics"]["prometheusRule"]["runbookUrl"]


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def runbook_sections() -> dict[str, str]:
    """docs/runbooks.md's `## ` sections: anchor -> the section's text."""
    parts = re.split(r"^## (.+)$", RUNBOOKS.read_text(), flags=re.MULTILINE)
    return {github_anchor(title): body for title, body in zip(parts[1::2], parts[2::2], strict=True)}


def test_every_alert_links_its_own_section_of_the_runbooks() -> None:
    sections = runbook_sections()
    for group in prometheus_rule()["spec"]["groups"]:
        for rule in group["rules"]:
            url = rule["annotations"].get("runbook_url", "")
            page, _, anchor = url.partition("#")
            assert (page, anchor) == (RUNBOOK_URL, github_anchor(rule["alert"])), f"{rule['alert']}: {url!r}"
            assert anchor in sections, f"{rule['alert']}: docs/runbooks.md has no section #{anchor}"
            body = sections[anchor]
            assert all(f"**{part}.**" in body for part in ("What fired", "Impact", "Diagnose", "Fix")), anchor


def test_every_runbook_section_is_an_alerts() -> None:
    assert set(runbook_sections()) == {github_anchor(name) for name in alert_names()}


def test_the_runbook_url_value_moves_every_link(tmp_path: Path) -> None:
    wiki = "https://wiki.example.com/ops/volcano-py"
    rules = of_kind(render(tmp_path, {"metrics": {"prometheusRule": {"enabled": True, "runbookUrl": wiki}}}),
                    "PrometheusRule")["volcano-py"]["spec"]["groups"]
    urls = {r["alert"]: r["annotations"]["runbook_url"] for g in rules for r in g["rules"]}
    assert urls == {name: f"{wiki}#{github_anchor(name)}" for name in alert_names()}


def test_the_conf_and_controllers_alerts_are_there() -> None:
    """The two alerts added for the conf the scheduler refuses and for the controllers (their cases fire above)."""
    exprs = {r["alert"]: r["expr"] for g in prometheus_rule()["spec"]["groups"] for r in g["rules"]}
    assert "volcano_py_scheduler_conf_stale" in exprs["VolcanoPySchedulerConfRejected"]
    assert 'job=~".*volcano-py-controllers.*"' in exprs["VolcanoPyControllersDown"]


def test_docs_metrics_lists_every_alert_with_its_runbook_link() -> None:
    text = (ROOT / "docs" / "metrics.md").read_text()
    links = dict(re.findall(r"^\| \[(\w+)\]\(runbooks\.md#([\w-]+)\) \|", text, flags=re.MULTILINE))
    assert links == {name: github_anchor(name) for name in alert_names()}
