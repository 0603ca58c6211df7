"""The Grafana dashboard ships in the chart as a ConfigMap for Grafana's dashboard sidecar (as Volcano's chart ships
its dashboards as ConfigMaps): off by default, on with grafana.dashboard.enabled, labelled with what the sidecar
selects, holding exactly manifests/grafana-dashboard.json (the file to import without a sidecar).

helm is `make helm-bin`'s; without it these tests fail, never skip.
"""

from __future__ import annotations

import json
from pathlib import Path

from helm_chart import MANIFESTS, SYSTEM_NS, of_kind, render

NAME = "volcano-py-grafana-dashboard"


def test_off_by_default(tmp_path: Path) -> None:
    assert NAME not in of_kind(render(tmp_path), "ConfigMap")


def test_on_it_holds_the_dashboard_labelled_for_the_sidecar(tmp_path: Path) -> None:
    cm = of_kind(render(tmp_path, {"grafana": {"dashboard": {"enabled": True}}}), "ConfigMap")[NAME]
    assert cm["metadata"]["namespace"] == SYSTEM_NS
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"  # the Grafana chart's sidecar default
    (key,) = cm["data"]
    assert key.endswith(".json")
    assert json.loads(cm["data"][key]) == json.loads((MANIFESTS / "grafana-dashboard.json").read_text())


def test_labels_annotations_and_namespace_are_the_values(tmp_path: Path) -> None:
    """Helm merges a map value into the default: a sidecar selecting another label drops the default with null."""
    values = {"grafana": {"dashboard": {"enabled": True, "namespace": "monitoring",
                                        "labels": {"dashboards": "volcano", "grafana_dashboard": None},
                                        "annotations": {"grafana_folder": "Batch"}}}}
    cm = of_kind(render(tmp_path, values), "ConfigMap")[NAME]
    assert (cm["metadata"]["namespace"], cm["metadata"]["labels"], cm["metadata"]["annotations"]) == (
        "monitoring", {"app.kubernetes.io/part-of": "volcano-py", "dashboards": "volcano"},
        {"grafana_folder": "Batch"})


def test_the_dashboard_has_a_controllers_row() -> None:
    board = json.loads((MANIFESTS / "grafana-dashboard.json").read_text())
    rows = [p["title"] for p in board["panels"] if p["type"] == "row"]
    assert "Controllers" in rows
