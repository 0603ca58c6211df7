"""What the deploy tests share: the chart, the manifests, and the helm and promtool binaries the Makefile installs
(`make helm-bin`, `make promtool`; `make unit` depends on both). A missing binary fails the test that needs it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "volcano-py"
MANIFESTS = ROOT / "manifests"
CRDS = ROOT / "crds"
HELM = ROOT / ".bin" / "helm"
PROMTOOL = Path("/usr/bin/promtool")
SYSTEM_NS = "volcano-py-system"

Key = tuple[str, str, str]  # kind, namespace ("" for cluster-scoped), name


def run_helm(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    assert HELM.exists(), f"no helm at {HELM}: run `make helm-bin`"
    return subprocess.run([str(HELM), *args], capture_output=True, text=True, check=check)


def values_file(tmp: Path, values: dict[str, Any]) -> list[str]:
    """`-f FILE` arguments for values given as a structure (lists and maps stay typed, unlike --set)."""
    if not values:
        return []
    path = tmp / f"values-{len(list(tmp.glob('values-*.yaml')))}.yaml"
    path.write_text(yaml.safe_dump(values))
    return ["-f", str(path)]


def render(tmp: Path, values: dict[str, Any] | None = None, *extra: str, chart: Path = CHART,
           namespace: str = SYSTEM_NS) -> dict[Key, dict[str, Any]]:
    """`helm template` of the chart, as objects by (kind, namespace, name)."""
    out = run_helm("template", "volcano-py", str(chart), "-n", namespace, *values_file(tmp, values or {}), *extra)
    return objects(out.stdout)


def objects(text: str) -> dict[Key, dict[str, Any]]:
    found: dict[Key, dict[str, Any]] = {}
    for doc in yaml.safe_load_all(text):
        if doc:
            key = (doc["kind"], doc["metadata"].get("namespace", ""), doc["metadata"]["name"])
            assert key not in found, f"{key} rendered twice"
            found[key] = doc
    return found


def manifest_objects() -> dict[Key, dict[str, Any]]:
    found: dict[Key, dict[str, Any]] = {}
    for path in sorted(MANIFESTS.glob("*.yaml")):
        found.update(objects(path.read_text()))
    return found


def crd_objects() -> dict[Key, dict[str, Any]]:
    found: dict[Key, dict[str, Any]] = {}
    for path in sorted(CRDS.glob("*.yaml")):
        found.update(objects(path.read_text()))
    return found


def of_kind(objs: dict[Key, dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {name: o for (k, _, name), o in objs.items() if k == kind}


def probe_chart(tmp: Path, templates: dict[str, str], files: dict[str, str] | None = None) -> Path:
    """A copy of the chart (without its CRDs) with extra templates and plain files: a template that calls the
    chart's named templates or renders NOTES.txt through `tpl` shows with `helm template` what no manifest shows."""
    copy = tmp / "probe-chart"
    shutil.copytree(CHART, copy, ignore=shutil.ignore_patterns("crds"))
    for name, text in templates.items():
        (copy / "templates" / name).write_text(text)
    for name, text in (files or {}).items():
        (copy / name).write_text(text)
    return copy


NOTES_PROBE = """apiVersion: v1
kind: ConfigMap
metadata:
  name: rendered-notes
data:
  notes: {{ tpl (.Files.Get "NOTES.txt") . | toJson }}
"""


def notes(tmp: Path, values: dict[str, Any] | None = None, namespace: str = SYSTEM_NS) -> str:
    """templates/NOTES.txt as `helm install` prints it (with `lookup` seeing no cluster, as in `helm template`)."""
    chart = probe_chart(tmp, {"zz-notes-probe.yaml": NOTES_PROBE},
                        {"NOTES.txt": (CHART / "templates" / "NOTES.txt").read_text()})
    probe = render(tmp, values, chart=chart, namespace=namespace)[("ConfigMap", "", "rendered-notes")]
    return str(probe["data"]["notes"])
