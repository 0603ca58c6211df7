"""templates/NOTES.txt, as `helm install` prints it: the objects it lists as installed are exactly those of their
kinds the chart rendered with the same values, and its commands name the release's namespace, Deployments that
exist and the Leases the components' Roles let them hold."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from helm_chart import notes, of_kind, render

LISTED_KINDS = {"Deployment", "ValidatingWebhookConfiguration", "Queue", "PrometheusRule", "ServiceMonitor",
                "PodMonitor"}
ALL_ON = {"webhook": {"enabled": True}, "metrics": {"prometheusRule": {"enabled": True},
                                                    "serviceMonitor": {"enabled": True},
                                                    "podMonitor": {"enabled": True}}}
VALUES = {
    "defaults": {},
    "everything on": ALL_ON,
    "no default queue": {"defaultQueue": {"create": False}},
    "other names": ALL_ON | {"fullnameOverride": "batch"},
}


def listed(text: str) -> set[tuple[str, str]]:
    """(kind, name) of the first paragraph's items: `  - Deployment volcano-py-scheduler: ...`."""
    first = text.split("\n\n")[0]
    return {(m[1], m[2]) for m in re.finditer(r"^  - (\w+) ([a-z0-9.-]+):", first, flags=re.MULTILINE)}


def commands(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines() if line.startswith("  kubectl ")]


def lease_names(objs: dict[Any, dict[str, Any]]) -> set[str]:
    return {name for role in of_kind(objs, "Role").values() for rule in role["rules"]
            if "leases" in rule["resources"] for name in rule.get("resourceNames", [])}


@pytest.mark.parametrize("values", VALUES.values(), ids=VALUES.keys())
@pytest.mark.parametrize("namespace", ["volcano-py-system", "batch-system"])
def test_notes_list_what_was_rendered_and_commands_that_find_it(values: dict[str, Any], namespace: str,
                                                                 tmp_path: Path) -> None:
    objs = render(tmp_path, values, namespace=namespace)
    text = notes(tmp_path, values, namespace=namespace)
    assert listed(text) == {(kind, name) for kind, _, name in objs if kind in LISTED_KINDS}
    deployments = set(of_kind(objs, "Deployment"))
    for command in commands(text):
        if "-n" in command:
            assert command[command.index("-n") + 1] == namespace, command
        named = [arg.removeprefix("deploy/") for arg in command if arg.startswith("deploy/")]
        assert set(named) <= deployments, command
        if command[1:4] == ["-n", namespace, "wait"]:
            assert set(named) == deployments, command
        if "lease" in command:
            assert set(command[command.index("lease") + 1:]) == lease_names(objs), command
