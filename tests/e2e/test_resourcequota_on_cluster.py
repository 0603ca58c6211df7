"""resourcequota on a real cluster: kube-controller-manager writes a ResourceQuota's status, the scheduler's cache
watches it, and under a conf that lists `resourcequota` a PodGroup whose minResources pass its namespace's
`hard - used` stays Pending with the reason, one within the quota runs, and another namespace is unaffected
(Volcano's pkg/scheduler/plugins/resourcequota/resourcequota.go)."""

from __future__ import annotations

import uuid

import pytest
from controlplane import wait_for
from inprocess import running_scheduler
from test_scheduler import GROUP, TIMEOUT, bound_pods, gang_pod, pg_status, unschedulable

from scheduler.api.decision import REASONS_ANNOTATION, read_published
from scheduler.api.reasons import ResourceQuotaExceeded

CONF = """actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: proportion
  - name: resourcequota
"""
G = 10**9  # the reasons' quota amounts are nano-units


def podgroup(name: str, cpu: str) -> dict:
    """A PodGroup whose minResources carry the quota names Volcano's job controller writes (`cpu` and
    `requests.cpu`, `pods` and `count/pods`)."""
    return {"apiVersion": f"{GROUP}/v1beta1", "kind": "PodGroup", "metadata": {"name": name},
            "spec": {"minMember": 1, "queue": "default",
                     "minResources": {"cpu": cpu, "requests.cpu": cpu, "pods": "1", "count/pods": "1"}}}


@pytest.fixture
def scheduler(control_plane, tmp_path):
    with running_scheduler(control_plane, conf=CONF, conf_dir=tmp_path) as running:
        yield running


@pytest.fixture
def other_namespace(core_v1):
    name = f"rq-other-{uuid.uuid4().hex[:6]}"
    core_v1.create_namespace({"metadata": {"name": name, "labels": {"volcano-py.test/e2e": "true"}}})
    yield name
    core_v1.delete_namespace(name)


def published(custom, namespace: str, name: str):
    obj = custom.get_namespaced_custom_object(GROUP, "v1beta1", namespace, "podgroups", name)
    text = (obj["metadata"].get("annotations") or {}).get(REASONS_ANNOTATION)
    return read_published(text) if text else None


def test_a_podgroup_over_its_namespace_quota_waits_one_within_runs_another_namespace_is_unaffected(
        scheduler, core_v1, custom, namespace, other_namespace, node_set):
    node_set(gpus=0)
    tag = node_set.tag
    core_v1.create_namespaced_resource_quota(namespace, {
        "metadata": {"name": "compute"}, "spec": {"hard": {"requests.cpu": "1", "count/pods": "10"}}})

    def quota_seen() -> bool:  # the quota controller wrote its status and the scheduler's watch has it
        obj = scheduler.cache.stores.resource_quotas.objects.get(f"{namespace}/compute")
        return bool(obj and (obj.get("status") or {}).get("hard"))

    wait_for(quota_seen, TIMEOUT, what="the scheduler's cache holds the quota with its status")
    for ns, name, cpu in ((namespace, "over", "2"), (namespace, "within", "500m"), (other_namespace, "other", "2")):
        custom.create_namespaced_custom_object(GROUP, "v1beta1", ns, "podgroups", podgroup(name, cpu))
    core_v1.create_namespaced_pod(namespace, gang_pod("within-0", "within", tag, cpu="500m"))
    core_v1.create_namespaced_pod(other_namespace, gang_pod("other-0", "other", tag, cpu="2"))

    held = wait_for(lambda: unschedulable(custom, namespace, "over"), TIMEOUT, what="the over-quota PodGroup held")
    assert held["reason"] == "NotEnqueued"
    assert held["message"].startswith(f"resource quota insufficient: ResourceQuota {namespace}/compute requests.cpu "
                                      "hard 1: ")
    decision = published(custom, namespace, "over")
    assert decision is not None and decision.plugin == "resourcequota"
    (reason,) = decision.reasons
    assert isinstance(reason, ResourceQuotaExceeded)
    assert (reason.namespace, reason.quota, reason.resource, reason.hard, reason.requested) == (
        namespace, "compute", "requests.cpu", G, 2 * G)

    wait_for(lambda: "within-0" in bound_pods(core_v1, namespace), TIMEOUT, what="the PodGroup within quota runs")
    wait_for(lambda: "other-0" in bound_pods(core_v1, other_namespace), TIMEOUT,
             what="the other namespace's PodGroup (2 cpu, no quota there) runs")
    assert pg_status(custom, namespace, "over").get("phase") == "Pending"  # still held, cycles later
    events = core_v1.list_namespaced_event(namespace).items
    assert any(e.involved_object.kind == "PodGroup" and e.involved_object.name == "over" and e.reason == "Unschedulable"
               and e.message.startswith("resource quota insufficient") for e in events)
