"""The Queue `default` and an existing one: with defaultQueue.create the chart renders it only where the cluster
has none, or the one it has is this release's; elsewhere (Volcano's queue, another release's) it leaves it alone,
so installing over Volcano does not fail. `helm template` sees no cluster, so the decision itself, the named
template `volcano-py.rendersDefaultQueue`, is run by helm on the objects `lookup` would return."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helm_chart import SYSTEM_NS, of_kind, probe_chart, render

KEEP = "helm.sh/resource-policy"


def test_create_renders_the_queue_and_uninstall_keeps_it(tmp_path: Path) -> None:
    queues = of_kind(render(tmp_path), "Queue")
    assert list(queues) == ["default"]
    assert queues["default"]["metadata"]["annotations"] == {KEEP: "keep"}
    assert queues["default"]["spec"] == {"weight": 1, "reclaimable": True}


def test_create_false_leaves_the_queue_to_the_scheduler(tmp_path: Path) -> None:
    assert of_kind(render(tmp_path, {"defaultQueue": {"create": False}}), "Queue") == {}


def test_the_scheduler_may_create_the_queue_itself(tmp_path: Path) -> None:
    """With create: false the scheduler makes the queue (Volcano's scheduler does too): its ClusterRole allows it."""
    role = of_kind(render(tmp_path, {"defaultQueue": {"create": False}}), "ClusterRole")["volcano-py-scheduler"]
    assert any("scheduling.volcano.sh" in r["apiGroups"] and "queues" in r["resources"] and "create" in r["verbs"]
               for r in role["rules"])


def helm_owned(release: str, namespace: str) -> dict[str, Any]:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {
        "name": "default", "labels": {"app.kubernetes.io/managed-by": "Helm"},
        "annotations": {"meta.helm.sh/release-name": release, "meta.helm.sh/release-namespace": namespace}},
        "spec": {"weight": 1}}


@dataclass(frozen=True, slots=True)
class Existing:
    name: str
    existing: dict[str, Any]  # what `lookup` returns: {} when the Queue does not exist
    renders: bool


EXISTING = [
    Existing("no Queue default yet: the release creates it", {}, True),
    Existing("Volcano's Queue default (no Helm annotations) is left alone",
             {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
              "metadata": {"name": "default"}, "spec": {"weight": 1, "reclaimable": True}}, False),
    Existing("a Queue with annotations but not Helm's is left alone",
             {"kind": "Queue", "metadata": {"name": "default", "annotations": {"owner": "ops"}}}, False),
    Existing("this release's Queue default keeps rendering on upgrade", helm_owned("volcano-py", SYSTEM_NS), True),
    Existing("another release's Queue default is left alone", helm_owned("volcano", SYSTEM_NS), False),
    Existing("a release of the same name in another namespace is another release",
             helm_owned("volcano-py", "volcano-system"), False),
]


def decisions(tmp: Path, cases: list[Existing]) -> dict[str, bool]:
    """Each case's answer of the chart's own named template, rendered by helm (release volcano-py)."""
    lines = []
    for i, case in enumerate(cases):
        literal = json.dumps(json.dumps(case.existing))  # a Go string literal holding the JSON
        lines.append(f'  case-{i}: {{{{ include "volcano-py.rendersDefaultQueue" '
                     f'(dict "existing" ({literal} | fromJson) "release" .Release) | quote }}}}')
    probe = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: default-queue-decisions\ndata:\n" + "\n".join(lines)
    chart = probe_chart(tmp, {"zz-default-queue-probe.yaml": probe})
    data = of_kind(render(tmp, chart=chart), "ConfigMap")["default-queue-decisions"]["data"]
    return {case.name: data[f"case-{i}"] == "true" for i, case in enumerate(cases)}


def test_the_decision_on_each_queue_lookup_can_find(tmp_path: Path) -> None:
    assert decisions(tmp_path, EXISTING) == {case.name: case.renders for case in EXISTING}

