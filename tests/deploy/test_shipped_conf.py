"""The confs volcano-py runs when the user gives none are Volcano's: the chart's and the manifests' ConfigMap hold
Volcano's Helm chart conf (installer/helm/chart/volcano/config/volcano-scheduler.conf) line for line, and the
built-in default (no --scheduler-conf) has its actions and tiers of plugins, `overcommit` first in tier 2, which is
also Volcano's own built-in `DefaultSchedulerConf` (pkg/scheduler/util.go) plus the chart's `binpack`."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from scheduler.cycle import builtin_default_conf
from scheduler.testing import volcano_snapshot

ROOT = Path(__file__).resolve().parents[2]
VOLCANO = volcano_snapshot()
HELM_CONF = VOLCANO / "installer" / "helm" / "chart" / "volcano" / "config" / "volcano-scheduler.conf"
GO_DEFAULT = VOLCANO / "pkg" / "scheduler" / "util.go"


def _volcano(path: Path) -> str:
    assert path.exists(), f"{path} is missing: these tests need the Volcano snapshot at {VOLCANO}"
    return path.read_text()


def _names(conf: dict[str, Any]) -> list[list[str]]:
    return [[plugin["name"] for plugin in tier["plugins"]] for tier in conf["tiers"]]


def _actions(conf: dict[str, Any]) -> list[str]:
    return [name.strip() for name in conf["actions"].split(",")]


def _shipped() -> dict[str, str]:
    manifest = yaml.safe_load((ROOT / "manifests" / "03-scheduler-configmap.yaml").read_text())
    values = yaml.safe_load((ROOT / "charts" / "volcano-py" / "values.yaml").read_text())
    return {"manifests": manifest["data"]["volcano-scheduler.conf"], "chart": values["scheduler"]["conf"]}


def test_the_chart_and_the_manifests_ship_volcanos_helm_conf() -> None:
    helm = yaml.safe_load(_volcano(HELM_CONF))
    assert _names(helm)[1][0] == "overcommit"  # what this test is about
    for where, text in _shipped().items():
        assert yaml.safe_load(text) == helm, where


def test_the_builtin_default_has_volcanos_actions_and_tiers() -> None:
    helm = yaml.safe_load(_volcano(HELM_CONF))
    found = re.search(r"var DefaultSchedulerConf = `(.*?)`", _volcano(GO_DEFAULT), re.DOTALL)
    assert found is not None, f"no DefaultSchedulerConf in {GO_DEFAULT}"
    go = yaml.safe_load(found.group(1))
    conf = builtin_default_conf()
    tiers = [[option.name for option in tier.plugins] for tier in conf.tiers]

    assert list(conf.actions) == _actions(helm) == _actions(go)
    assert tiers == _names(helm)
    assert [[name for name in tier if name != "binpack"] for tier in tiers] == _names(go)
    assert tiers[1][0] == "overcommit"
