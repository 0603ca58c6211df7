"""PodGroups for plain pods: one per controlling workload (or bare pod), named as Volcano names them."""

from __future__ import annotations

from typing import Any

from scheduler.api.convert import plain_group_of, wants_gang
from scheduler.controllers.podgroup import needs_podgroup, plain_podgroup

NAMES = frozenset({"volcano-py"})


def pod(annotations: dict[str, str] | None = None, owner: dict[str, Any] | None = None,
        scheduler: str = "volcano-py") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "web-abc", "namespace": "ml", "uid": "pod-uid", "annotations": annotations or {}}
    if owner:
        meta["ownerReferences"] = [owner]
    return {"metadata": meta, "spec": {"schedulerName": scheduler, "containers": [
        {"name": "c", "resources": {"requests": {"cpu": "500m"}, "limits": {"nvidia.com/gpu": "1"}}}]}}


RS = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d9", "uid": "rs-uid", "controller": True}


def test_a_replicaset_pod_gets_the_replicasets_podgroup_with_its_annotations() -> None:
    p = pod({"scheduling.volcano.sh/group-min-member": "4", "scheduling.volcano.sh/queue-name": "team-a"}, RS)
    pg = plain_podgroup(p)
    assert pg["metadata"]["name"] == "podgroup-rs-uid"
    assert pg["metadata"]["ownerReferences"][0]["uid"] == "rs-uid"
    assert pg["spec"]["minMember"] == 4 and pg["spec"]["queue"] == "team-a"
    # ResourceQuota usage names for 4 pods (Volcano's CalTaskRequests over k8s's PodUsageFunc): the pod count
    # twice, cpu bare and as requests.cpu, the GPU (its request defaulted from the limit) as requests.<name>
    # and, trimmed by Volcano, bare; an extended resource has no limits.* name.
    assert pg["spec"]["minResources"] == {"count/pods": "4", "pods": "4", "cpu": "2", "requests.cpu": "2",
                                          "nvidia.com/gpu": "4", "requests.nvidia.com/gpu": "4"}
    assert plain_group_of(p) == "ml/podgroup-rs-uid"
    assert wants_gang(p)


def test_workload_annotations_apply_when_the_pod_has_none() -> None:
    pg = plain_podgroup(pod(owner=RS), {"scheduling.volcano.sh/group-min-member": "3"})
    assert pg["spec"]["minMember"] == 3 and pg["spec"]["queue"] == "default"


def test_a_bare_pod_is_its_own_group_of_one_owned_by_the_pod() -> None:
    p = pod()
    pg = plain_podgroup(p)
    assert pg["metadata"]["name"] == "podgroup-pod-uid"
    assert pg["metadata"]["ownerReferences"][0]["kind"] == "Pod"
    assert pg["spec"]["minMember"] == 1
    assert not wants_gang(p)


def test_which_pods_get_one() -> None:
    assert needs_podgroup(pod(), NAMES)
    assert not needs_podgroup(pod(scheduler="default-scheduler"), NAMES)
    assert not needs_podgroup(pod({"scheduling.k8s.io/group-name": "g"}), NAMES)
    assert plain_group_of(pod({"scheduling.k8s.io/group-name": "g"})) is None
    volcano_job = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "j", "uid": "u",
                   "controller": True}
    assert not needs_podgroup(pod(owner=volcano_job), NAMES)
