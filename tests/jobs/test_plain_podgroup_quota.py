"""A plain pods' PodGroup (Deployment, StatefulSet, batch Job, bare pod) carries the ResourceQuota usage names
Volcano's pg controller writes into minResources (pkg/controllers/podgroup/pg_controller_handler.go
buildPodGroupFromPod -> pkg/controllers/util/util.go CalTaskRequests), so the resourcequota plugin's enqueue gate,
which compares names exactly, holds it to a quota on `count/pods`, `pods` or `requests.cpu`."""

from __future__ import annotations

import random
from typing import Any

import pytest

from scheduler.controllers.podgroup import plain_podgroup
from scheduler.testing import cluster, conf_from_tiers


def deployment_pod(min_member: int, cpu: int, memory_mi: int) -> dict[str, Any]:
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d9", "uid": "rs-uid", "controller": True}
    return {"metadata": {"name": "web-5d9-x", "namespace": "ml", "uid": "pod-uid", "ownerReferences": [owner],
                         "annotations": {"scheduling.volcano.sh/group-min-member": str(min_member)}},
            "spec": {"schedulerName": "volcano-py", "containers": [
                {"name": "c", "resources": {"requests": {"cpu": str(cpu), "memory": f"{memory_mi}Mi"},
                                            "limits": {"cpu": str(2 * cpu)}}}]}}


def phase_with_quota(min_resources: dict[str, str], hard: dict[str, str]) -> str:
    c = cluster().node("n1", cpu="256", memory="1Ti", pods=500)
    c.sim.add_resource_quota({"apiVersion": "v1", "kind": "ResourceQuota",
                              "metadata": {"name": "q", "namespace": "ml"}, "spec": {"hard": hard},
                              "status": {"hard": hard, "used": dict.fromkeys(hard, "0")}})
    c.job("web", namespace="ml", replicas=1, cpu="1", min_resources=min_resources)
    c.cycle(conf_from_tiers(("priority", "gang"), ("resourcequota",), actions="enqueue"))
    return str(c.sim.podgroup("ml/web")["status"]["phase"])


def test_the_minresources_names_are_volcanos_quota_usage() -> None:
    spec = plain_podgroup(deployment_pod(3, 2, 100))["spec"]
    assert spec["minResources"] == {"count/pods": "3", "pods": "3", "cpu": "6", "requests.cpu": "6",
                                    "memory": "300Mi", "requests.memory": "300Mi", "limits.cpu": "12"}


def test_min_member_zero_writes_no_minresources() -> None:
    assert "minResources" not in plain_podgroup(deployment_pod(0, 1, 1))["spec"]


@pytest.mark.parametrize("seed", range(12))
def test_a_plain_pods_podgroup_is_held_by_each_quota_name_volcano_counts(seed: int) -> None:
    rng = random.Random(seed)
    members, cpu, memory_mi = rng.randint(1, 5), rng.randint(1, 3), rng.choice((64, 128))
    name = rng.choice(("count/pods", "pods", "requests.cpu", "requests.memory", "limits.cpu"))
    per_pod = {"count/pods": 1, "pods": 1, "requests.cpu": cpu, "requests.memory": memory_mi,
               "limits.cpu": 2 * cpu}[name]
    hard_units = rng.randint(1, 5 * per_pod)
    hard = {name: f"{hard_units}Mi" if name == "requests.memory" else str(hard_units)}
    min_resources = plain_podgroup(deployment_pod(members, cpu, memory_mi))["spec"]["minResources"]
    fits = members * per_pod <= hard_units
    assert phase_with_quota(min_resources, hard) == ("Inqueue" if fits else "Pending")
