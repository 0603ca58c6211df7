"""Whose family a name says it is: a `volcano_` family is one Volcano's own source declares (its scheduler's or its
controllers'), every family volcano-py adds is `volcano_py_`, and the five families that were once named
`volcano_...` are still exported under the old name for one release, marked deprecated in their HELP line, with
the same samples as the new name. The chart's alerts and dashboard use the new names only.

The scrapes are tests/test_volcano_metrics.py's: a few in-memory cycles that bind GPU gangs and preempt, and one
call of each controller metric; Volcano's families are read from the snapshot's Go source there.
"""

from __future__ import annotations

import re
from pathlib import Path

from prometheus_client import CollectorRegistry
from test_alerts import alert_rules, dashboard_exprs, grafana_to_promql, selected_metrics
from test_volcano_metrics import (
    controller_scrape,
    parse_exposition,
    scrape,
    volcano_controller_families,
    volcano_families,
)

from scheduler.metrics import DEPRECATED_NAMES, ControllerMetrics, SchedulerMetrics

SUFFIXES = ("_bucket", "_count", "_sum", "_total")


def helps(text: str) -> dict[str, str]:
    return {m[1]: m[2] for m in re.finditer(r"^# HELP (\w+) (.*)$", text, flags=re.MULTILINE)}


def volcanos() -> set[str]:
    return set(volcano_families()) | set(volcano_controller_families())


def is_volcanos(family: str) -> bool:
    """client_golang's counter `x_total` is prometheus_client's family `x` on the TYPE line, or the other way."""
    names = volcanos()
    return family in names or f"{family}_total" in names or family.removesuffix("_total") in names


def exported_families() -> dict[str, str]:
    """Every family of both scrapes, with its HELP text; prometheus_client's `x_created` gauge (the creation time
    of counter or histogram `x`, which the 0.0.4 text format writes as a family of its own) counts as `x`'s."""
    found = helps(scrape()) | helps(controller_scrape())
    def created_of(name: str) -> bool:
        base = name.removesuffix("_created")
        return name.endswith("_created") and (base in found or f"{base}_total" in found)

    return {name: text for name, text in found.items() if not created_of(name)}


def test_every_volcano_family_is_volcanos_and_every_other_is_volcano_py() -> None:
    families = exported_families()
    assert len(families) >= 50, sorted(families)
    misnamed = sorted(name for name in families if name.startswith("volcano_") and not name.startswith(
        "volcano_py_") and not is_volcanos(name) and name not in DEPRECATED_NAMES)
    assert misnamed == [], f"volcano_ families Volcano's source does not declare: {misnamed}"
    foreign = sorted(name for name in families if not name.startswith("volcano_"))
    assert foreign == [], f"families under no volcano_ prefix: {foreign}"


def test_the_deprecated_names_are_the_old_names_of_volcano_pys_own_families() -> None:
    assert len(DEPRECATED_NAMES) == 5
    for old, new in DEPRECATED_NAMES.items():
        assert not is_volcanos(old), f"{old} is Volcano's: it keeps its name"
        assert new == "volcano_py_" + old.removeprefix("volcano_"), (old, new)


def test_every_deprecated_name_is_exported_with_the_new_names_samples_and_says_so() -> None:
    text = scrape()
    families, help_lines = parse_exposition(text), helps(text)
    for old, new in DEPRECATED_NAMES.items():
        assert new in families and old in families, f"{old} or {new} is not exported"
        assert families[old].type == families[new].type
        renamed = [(name.replace(new, old, 1), labels, value) for name, labels, value in families[new].samples]
        assert families[new].samples, f"{new}: no series in the scrape (the scenario must exercise it)"
        assert families[old].samples == renamed, f"{old} differs from {new}"
        assert help_lines[old].startswith(f"Deprecated: renamed {new};"), help_lines[old]
        assert not help_lines[new].startswith("Deprecated"), help_lines[new]


def test_a_value_written_after_a_scrape_shows_under_both_names() -> None:
    registry = CollectorRegistry()
    m = SchedulerMetrics(registry)
    m.oldest_pending.labels("q").set(42.0)
    assert registry.get_sample_value("volcano_queue_oldest_pending_podgroup_seconds", {"queue_name": "q"}) == 42.0
    m.oldest_pending.labels("q").set(7.0)
    assert [registry.get_sample_value(n, {"queue_name": "q"}) for n in (
        "volcano_py_queue_oldest_pending_podgroup_seconds", "volcano_queue_oldest_pending_podgroup_seconds")] == [7, 7]


def test_no_family_is_declared_twice_across_the_scheduler_and_the_controllers() -> None:
    scheduler = set(SchedulerMetrics(CollectorRegistry()).declared)
    controllers = set(ControllerMetrics(CollectorRegistry()).declared)
    assert scheduler & controllers == set()


def bare(name: str) -> str:
    for suffix in SUFFIXES:
        if name.endswith(suffix) and name.removesuffix(suffix) in DEPRECATED_NAMES:
            return name.removesuffix(suffix)
    return name


def test_the_alerts_and_the_dashboard_use_no_deprecated_name() -> None:
    used = {bare(n) for rule in alert_rules() for n in selected_metrics(rule["expr"])}
    used |= {bare(n) for expr in dashboard_exprs() for n in selected_metrics(grafana_to_promql(expr))}
    assert used & DEPRECATED_NAMES.keys() == set()
    assert {"volcano_py_queue_oldest_pending_podgroup_seconds", "volcano_py_queue_allocated_gpu"} <= used


def test_docs_metrics_lists_every_renamed_family() -> None:
    text = (Path(__file__).resolve().parents[1] / "docs" / "metrics.md").read_text()
    rows = set(re.findall(r"^\| `(volcano_\w+)` \| `(volcano_py_\w+)` \|$", text, flags=re.MULTILINE))
    assert rows == set(DEPRECATED_NAMES.items())
