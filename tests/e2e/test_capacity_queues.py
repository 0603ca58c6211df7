"""capacity with enableHierarchy on a real cluster: Queue objects with `parent`, `deserved` and `capability`
pass the CRD, reach the scheduler's cache, and a team's jobs are held to its org's capability."""

from __future__ import annotations

import pytest
from controlplane import wait_for
from inprocess import running_scheduler
from test_scheduler import GROUP, TIMEOUT, bound_pods, gang_pod, unschedulable

CONF = """actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: capacity
    enableHierarchy: true
"""


def queue(name: str, **spec: object) -> dict:
    return {"apiVersion": f"{GROUP}/v1beta1", "kind": "Queue", "metadata": {"name": name},
            "spec": {"weight": 1, **spec}}


def podgroup(name: str, queue_name: str, min_member: int) -> dict:
    return {"apiVersion": f"{GROUP}/v1beta1", "kind": "PodGroup", "metadata": {"name": name},
            "spec": {"minMember": min_member, "queue": queue_name}}


@pytest.fixture
def scheduler(control_plane, tmp_path):
    with running_scheduler(control_plane, conf=CONF, conf_dir=tmp_path) as running:
        yield running


def test_a_team_queue_is_held_to_its_org_capability(scheduler, core_v1, custom, namespace, node_set):
    for _ in range(2):
        node_set(gpus=2)
    tag = node_set.tag
    org, team = f"org-{tag}", f"team-{tag}"
    made = [queue(org, capability={"nvidia.com/gpu": 2}, deserved={"nvidia.com/gpu": 2}),
            queue(team, parent=org, deserved={"nvidia.com/gpu": 1})]
    for q in made:
        custom.create_cluster_custom_object(GROUP, "v1beta1", "queues", q)
    try:
        wait_for(lambda: {org, team} <= set(scheduler.cache.queues.objects), TIMEOUT, what="the cache sees the queues")
        custom.create_namespaced_custom_object(GROUP, "v1beta1", namespace, "podgroups", podgroup("train", team, 1))
        custom.create_namespaced_custom_object(GROUP, "v1beta1", namespace, "podgroups", podgroup("inner", org, 1))
        for i in range(4):
            core_v1.create_namespaced_pod(namespace, gang_pod(f"train-{i}", "train", tag, gpus=1))
        core_v1.create_namespaced_pod(namespace, gang_pod("inner-0", "inner", tag, gpus=1))
        wait_for(lambda: len([p for p in bound_pods(core_v1, namespace) if p.startswith("train-")]) == 2, TIMEOUT,
                 what="two of the team's pods bound (its org may hold 2 GPUs of the 4 free)")
        held = wait_for(lambda: unschedulable(custom, namespace, "inner"), TIMEOUT, what="the inner queue's job held")
        assert f"queue {org} has child queues ({team}): jobs go to leaf queues" in held["message"]
        assert len([p for p in bound_pods(core_v1, namespace) if p.startswith("train-")]) == 2
    finally:
        for q in reversed(made):
            custom.delete_cluster_custom_object(GROUP, "v1beta1", "queues", q["metadata"]["name"])
