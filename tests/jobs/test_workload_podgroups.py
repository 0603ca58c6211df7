"""A plain pods' PodGroup follows its ReplicaSet or StatefulSet (issue 16), as Volcano's pg controller keeps it
(pkg/controllers/podgroup/pg_controller_handler.go): Volcano's e2e "PodGroup's Count change with Deployment's
Request change" rolls a Deployment to a new request and expects the old PodGroup gone and one left."""

from __future__ import annotations

from typing import Any

import pytest
from fake_api import FakeApi

from scheduler.controllers.podgroup import PodGroupController, plain_podgroup, podgroup_update

MIN = "scheduling.volcano.sh/group-min-member"


def workload(uid: str, replicas: int, cpu: str = "1", kind: str = "ReplicaSet",
             annotations: dict[str, str] | None = None, scheduler: str = "volcano-py",
             revision: str | None = None) -> dict[str, Any]:
    template = {"metadata": {"labels": {"app": "web"}},
                "spec": {"schedulerName": scheduler,
                         "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}}
    obj: dict[str, Any] = {"apiVersion": "apps/v1", "kind": kind,
                           "metadata": {"name": f"web-{uid}", "namespace": "ns", "uid": uid,
                                        "annotations": annotations or {}},
                           "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                                    "template": template}}
    if revision:
        obj["status"] = {"updateRevision": revision}
    return obj


def pods_of(api: FakeApi, owner: dict[str, Any], count: int, revision: str | None = None) -> None:
    meta = owner["metadata"]
    for i in range(count):
        labels = dict(owner["spec"]["template"]["metadata"]["labels"])
        if revision:
            labels["controller-revision-hash"] = revision
        api.put("Pod", {"metadata": {"name": f"{meta['name']}-{revision or ''}{i}", "namespace": "ns",
                                     "uid": f"{meta['uid']}-pod-{revision or ''}{i}", "labels": labels,
                                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": owner["kind"],
                                                          "name": meta["name"], "uid": meta["uid"],
                                                          "controller": True}]},
                        "spec": owner["spec"]["template"]["spec"]})


def start(*workloads: dict[str, Any]) -> tuple[PodGroupController, FakeApi]:
    api = FakeApi()
    for w in workloads:
        api.put(w["kind"], w)
    return PodGroupController(api), api  # type: ignore[arg-type]


def usage(pods: int, cpu: str) -> dict[str, str]:
    """The quota names Volcano's pg controller writes for `pods` pods requesting `cpu` cores in all (pod count
    and cpu, bare and as requests.*; util.go CalTaskRequests over k8s's PodUsageFunc)."""
    return {"count/pods": str(pods), "pods": str(pods), "cpu": cpu, "requests.cpu": cpu}


def specs(api: FakeApi) -> dict[str, dict[str, Any]]:
    return {name: pg["spec"] for name, pg in api.of_kind("PodGroup").items()}


def test_a_deployment_rollout_to_a_new_request_leaves_one_podgroup_the_new_replicasets() -> None:
    old = workload("rs1", 2, cpu="1", annotations={MIN: "2"})
    ctl, api = start(old)
    pods_of(api, old, 2)
    for pod in api.of_kind("Pod").values():
        ctl.on_pod("ADDED", pod)
    assert specs(api) == {"podgroup-rs1": {"minMember": 2, "queue": "default", "minResources": usage(2, "2")}}

    new = workload("rs2", 2, cpu="500m", annotations={MIN: "2"})
    api.put("ReplicaSet", new)
    pods_of(api, new, 2)
    ctl.on_workload("ADDED", new)
    old["spec"]["replicas"] = 0
    ctl.on_workload("MODIFIED", old)
    assert specs(api) == {"podgroup-rs2": {"minMember": 2, "queue": "default", "minResources": usage(2, "1")}}


def test_a_replicaset_annotation_change_updates_its_podgroup() -> None:
    rs = workload("rs1", 3, annotations={MIN: "2"})
    ctl, api = start(rs)
    pods_of(api, rs, 3)
    ctl.on_workload("ADDED", rs)
    assert specs(api)["podgroup-rs1"]["minMember"] == 2
    rs["metadata"]["annotations"][MIN] = "3"
    api.put("ReplicaSet", rs)
    ctl.on_workload("MODIFIED", rs)
    assert specs(api)["podgroup-rs1"] == {"minMember": 3, "queue": "default", "minResources": usage(3, "3")}


def test_an_unchanged_workload_writes_nothing() -> None:
    rs = workload("rs1", 2)
    ctl, api = start(rs)
    pods_of(api, rs, 2)
    ctl.on_workload("ADDED", rs)
    before = list(api.writes)
    ctl.on_workload("MODIFIED", rs)
    assert api.writes == before


def test_a_statefulset_template_change_updates_its_podgroup_in_place_from_the_update_revision() -> None:
    sts = workload("sts1", 2, cpu="1", kind="StatefulSet", revision="r1")
    ctl, api = start(sts)
    pods_of(api, sts, 2, revision="r1")
    ctl.on_workload("ADDED", sts)
    assert specs(api)["podgroup-sts1"]["minResources"] == usage(1, "1")
    rolled = workload("sts1", 2, cpu="2", kind="StatefulSet", revision="r2")
    pods_of(api, rolled, 1, revision="r2")  # the first pod of the new revision
    ctl.on_workload("MODIFIED", rolled, statefulset=True)
    assert specs(api)["podgroup-sts1"]["minResources"] == usage(1, "2")


def test_scaled_to_zero_and_back_the_podgroup_is_made_again() -> None:
    rs = workload("rs1", 1)
    ctl, api = start(rs)
    pods_of(api, rs, 1)
    pod = api.of_kind("Pod")["web-rs1-0"]
    ctl.on_pod("ADDED", pod)
    rs["spec"]["replicas"] = 0
    ctl.on_workload("MODIFIED", rs)
    assert specs(api) == {}
    ctl.on_pod("ADDED", pod)  # the new pod after scaling up again
    assert list(specs(api)) == ["podgroup-rs1"]


def test_another_schedulers_workload_is_left_alone() -> None:
    rs = workload("rs1", 0, scheduler="default-scheduler")
    ctl, api = start(rs)
    ctl.on_workload("MODIFIED", rs)
    rs["spec"]["replicas"] = 2
    pods_of(api, rs, 2)
    ctl.on_workload("MODIFIED", rs)
    assert api.writes == []


def test_a_conflicting_writer_is_read_again() -> None:
    rs = workload("rs1", 2, annotations={MIN: "1"})
    ctl, api = start(rs)
    pods_of(api, rs, 2)
    ctl.on_workload("ADDED", rs)
    rs["metadata"]["annotations"][MIN] = "2"
    api.put("ReplicaSet", rs)
    api.conflicts = 1
    ctl.on_workload("MODIFIED", rs)
    assert specs(api)["podgroup-rs1"]["minMember"] == 2


def test_the_update_keeps_spec_keys_volcano_py_does_not_manage() -> None:
    pod = {"metadata": {"name": "p", "namespace": "ns", "uid": "u"},
           "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}
    wanted = plain_podgroup(pod)
    current = {**wanted, "spec": {**wanted["spec"], "networkTopology": {"mode": "hard"}}}
    assert podgroup_update(current, wanted) is None
    current["spec"]["minMember"] = 5
    updated = podgroup_update(current, wanted)
    assert updated is not None and updated["spec"] == {**wanted["spec"], "networkTopology": {"mode": "hard"}}


def test_labels_and_annotations_volcano_copies_onto_the_podgroup() -> None:
    pod = {"metadata": {"name": "p", "namespace": "ns", "uid": "u",
                        "labels": {"volcano.sh/preemptable": "true", "app": "web"},
                        "annotations": {"volcano.sh/cooldown-time": "60s", "volcano.sh/jdb-min-available": "1",
                                        "volcano.sh/jdb-max-unavailable": "2", "other": "x"}},
           "spec": {"containers": []}}
    meta = plain_podgroup(pod, {"volcano.sh/revocable-zone": "*", "team": "a"})["metadata"]
    assert meta["labels"] == {"volcano.sh/preemptable": "true"}
    assert meta["annotations"] == {"volcano.sh/revocable-zone": "*", "volcano.sh/cooldown-time": "60s",
                                   "volcano.sh/jdb-min-available": "1"}


@pytest.mark.parametrize("value, expected", [
    ("0", 0), ("4", 4), ("-1", 1), ("many", 1), ("+3", 3), ("2147483647", 2**31 - 1), ("2147483648", 1),
    ("1_000", 1), ("\u0663", 1), (" 4", 1)],
    ids=["0 is kept", "a number", "a negative one is 1", "not a number is 1", "a sign as ParseInt takes it",
         "int32's largest, its minResources in one step", "past int32 is 1 (ParseInt bitSize 32)",
         "Go takes no underscores", "nor non-ASCII digits", "nor spaces"])
def test_group_min_member_is_read_as_volcano_reads_it(value: str, expected: int) -> None:
    pod = {"metadata": {"name": "p", "namespace": "ns", "uid": "u", "annotations": {MIN: value}},
           "spec": {"containers": []}}
    assert plain_podgroup(pod)["spec"]["minMember"] == expected
