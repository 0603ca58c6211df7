"""Volcano's Helm chart, rendered now, still passes the args tests/cli/data/volcano-chart-args.yaml holds.

Marked e2e: it needs the Volcano snapshot (../shared/peers/volcano) and the helm binary (`make helm-bin`), which a
unit run may not have. Without them it fails and says which is missing; it never skips.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT.parent / "shared" / "peers" / "volcano" / "installer" / "helm" / "chart" / "volcano"
HELM = ROOT / ".bin" / "helm"
RENDERS: list[dict[str, Any]] = yaml.safe_load((Path(__file__).parent / "data" / "volcano-chart-args.yaml")
                                               .read_text())["renders"]


def container_args(sets: list[str]) -> dict[str, list[str]]:
    assert CHART.is_dir(), f"Volcano's chart is not at {CHART} (the Volcano snapshot is missing)"
    assert HELM.exists(), f"no helm at {HELM}: run `make helm-bin`"
    command = [str(HELM), "template", "vc", str(CHART), "--namespace", "volcano-system"]
    for value in sets:
        command += ["--set", value]
    rendered = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    return {doc["metadata"]["name"]: doc["spec"]["template"]["spec"]["containers"][0]["args"]
            for doc in yaml.safe_load_all(rendered)
            if doc and doc.get("kind") == "Deployment"
            and doc["metadata"]["name"] in ("vc-scheduler", "vc-controllers", "vc-admission")}


@pytest.mark.e2e
@pytest.mark.parametrize("render", RENDERS, ids=lambda r: r["name"])
def test_the_committed_args_are_the_charts(render: dict[str, Any]) -> None:
    args = container_args(render["set"])
    assert (args["vc-scheduler"], args["vc-controllers"], args["vc-admission"]) == (
        render["scheduler"], render["controllers"], render["admission"])
