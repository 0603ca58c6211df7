"""Where the chart's pods run: nodeSelector, tolerations and affinity (chart-wide, or a component's own instead),
the anti-affinity preset that spreads each component's replicas over nodes, the PriorityClass, the pull secrets,
the resources, and a PodDisruptionBudget per component that runs more than one replica."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helm_chart import of_kind, render

COMPONENTS = ("scheduler", "controllers", "webhook")
WITH_WEBHOOK: dict[str, Any] = {"webhook": {"enabled": True}}
HOSTNAME = "kubernetes.io/hostname"


def merged(*layers: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for layer in layers:
        for key, value in layer.items():
            out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def pods(tmp: Path, values: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The pod template of each component's Deployment (the webhook's is enabled), by component."""
    deployments = of_kind(render(tmp, merged(WITH_WEBHOOK, values)), "Deployment")
    return {c: deployments[f"volcano-py-{c}"]["spec"]["template"] for c in COMPONENTS}


def spread_term(c: str) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {"app.kubernetes.io/name": f"volcano-py-{c}"}}, "topologyKey": HOSTNAME}


def soft_spread(c: str) -> dict[str, Any]:
    return {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "podAffinityTerm": spread_term(c)}]}


ZONE_NODES = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a"]}]}]}}}
OWN_SPREAD = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    {"labelSelector": {"matchLabels": {"team": "x"}}, "topologyKey": "topology.kubernetes.io/zone"}]}}
SYSTEM_TAINT = [{"key": "dedicated", "operator": "Equal", "value": "system", "effect": "NoSchedule"}]
GPU_TAINT = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


@dataclass(frozen=True, slots=True)
class Case:
    name: str
    values: dict[str, Any]
    # component -> the pod spec fields expected (a field absent from `fields` must be absent from the pod spec)
    expect: dict[str, dict[str, Any]]
    fields: tuple[str, ...] = ("nodeSelector", "tolerations", "affinity", "priorityClassName", "imagePullSecrets")


def each(fields: dict[str, Any] | None = None, **per: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Expected fields for every component: `fields` for all, then each component's own, with the default
    soft spread and PriorityClass unless a case says otherwise."""
    out = {}
    for c in COMPONENTS:
        base = {"affinity": {"podAntiAffinity": soft_spread(c)}, "priorityClassName": "system-cluster-critical"}
        out[c] = {**base, **(fields or {}), **per.get(c, {})}
    return out


CASES = [
    Case("by default each component spreads its replicas over nodes and is system-cluster-critical", {}, each()),
    Case("chart-wide nodeSelector and tolerations reach every component",
         {"nodeSelector": {"pool": "system"}, "tolerations": SYSTEM_TAINT},
         each({"nodeSelector": {"pool": "system"}, "tolerations": SYSTEM_TAINT})),
    Case("a component's own nodeSelector and tolerations replace the chart-wide ones for it alone",
         {"nodeSelector": {"pool": "system"}, "tolerations": SYSTEM_TAINT,
          "scheduler": {"nodeSelector": {"pool": "gpu-control"}, "tolerations": GPU_TAINT}},
         each({"nodeSelector": {"pool": "system"}, "tolerations": SYSTEM_TAINT},
              scheduler={"nodeSelector": {"pool": "gpu-control"}, "tolerations": GPU_TAINT})),
    Case("a hard preset requires one replica per node",
         {"controllers": {"podAntiAffinity": "hard"}},
         each(controllers={"affinity": {"podAntiAffinity": {
             "requiredDuringSchedulingIgnoredDuringExecution": [spread_term("controllers")]}}})),
    Case("preset none and no affinity leave the pods without affinity",
         {c: {"podAntiAffinity": "none"} for c in COMPONENTS},
         {c: {"priorityClassName": "system-cluster-critical"} for c in COMPONENTS}),
    Case("a node affinity keeps the spread the preset adds beside it",
         {"affinity": ZONE_NODES},
         each(**{c: {"affinity": {**ZONE_NODES, "podAntiAffinity": soft_spread(c)}} for c in COMPONENTS})),
    Case("an affinity that says its own podAntiAffinity is used as it is",
         {"webhook": {"affinity": OWN_SPREAD}},
         each(webhook={"affinity": OWN_SPREAD})),
    Case("pull secrets reach every component",
         {"imagePullSecrets": [{"name": "regcred"}]}, each({"imagePullSecrets": [{"name": "regcred"}]})),
    Case("an empty priorityClassName leaves the pods without one",
         {"scheduler": {"priorityClassName": ""}, "webhook": {"priorityClassName": "batch-control"}},
         {c: {k: v for k, v in fields.items() if not (c == "scheduler" and k == "priorityClassName")}
          for c, fields in each(webhook={"priorityClassName": "batch-control"}).items()}),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_placement(case: Case, tmp_path: Path) -> None:
    rendered = pods(tmp_path, case.values)
    got = {c: {k: v for k, v in pod["spec"].items() if k in case.fields} for c, pod in rendered.items()}
    assert got == case.expect


def test_the_spread_selects_the_components_own_pods(tmp_path: Path) -> None:
    for c, pod in pods(tmp_path, {}).items():
        (term,) = pod["spec"]["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
        selector = term["podAffinityTerm"]["labelSelector"]["matchLabels"]
        assert selector.items() <= pod["metadata"]["labels"].items(), c
        others = [p for other, p in pods(tmp_path, {}).items() if other != c]
        assert not any(selector.items() <= p["metadata"]["labels"].items() for p in others), c


def test_resources_are_the_components_own(tmp_path: Path) -> None:
    resources = {"requests": {"cpu": "2", "memory": "4Gi"}, "limits": {"memory": "8Gi"}}
    got = pods(tmp_path, {"scheduler": {"resources": resources}})
    assert got["scheduler"]["spec"]["containers"][0]["resources"] == resources
    assert got["controllers"]["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "200m", "memory": "256Mi"}


# ---- PodDisruptionBudgets --------------------------------------------------------------------------------------
def budgets(tmp: Path, values: dict[str, Any]) -> dict[str, Any]:
    """maxUnavailable of each rendered PodDisruptionBudget, by the component whose pods it selects (and checks
    that it selects exactly that Deployment's pods)."""
    objs = render(tmp, values)
    templates = {name: d["spec"]["template"]["metadata"]["labels"] for name, d in of_kind(objs, "Deployment").items()}
    out = {}
    for name, pdb in of_kind(objs, "PodDisruptionBudget").items():
        selector = pdb["spec"]["selector"]["matchLabels"]
        (selected,) = [d for d, labels in templates.items() if selector.items() <= labels.items()]
        assert selected == name
        out[name.removeprefix("volcano-py-")] = pdb["spec"]["maxUnavailable"]
    return out


@dataclass(frozen=True, slots=True)
class Budget:
    name: str
    values: dict[str, Any]
    expect: dict[str, Any]


BUDGETS = [
    Budget("by default the scheduler and the controllers, two replicas each, have one", {},
           {"scheduler": 1, "controllers": 1}),
    Budget("the webhook has one when it is on", WITH_WEBHOOK, {"scheduler": 1, "controllers": 1, "webhook": 1}),
    Budget("a component with one replica has none", {"scheduler": {"replicas": 1}}, {"controllers": 1}),
    Budget("a disabled budget is not rendered",
           {"controllers": {"podDisruptionBudget": {"enabled": False}}}, {"scheduler": 1}),
    Budget("maxUnavailable may be a percentage",
           {"scheduler": {"replicas": 4, "podDisruptionBudget": {"maxUnavailable": "50%"}}},
           {"scheduler": "50%", "controllers": 1}),
]


@pytest.mark.parametrize("case", BUDGETS, ids=lambda c: c.name)
def test_pod_disruption_budgets(case: Budget, tmp_path: Path) -> None:
    assert budgets(tmp_path, case.values) == case.expect

