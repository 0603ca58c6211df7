"""The CRDs on a real apiserver: Volcano's objects are accepted and keep unknown fields; what Volcano's admission
webhook rejects, the CEL rules and schema reject, with a message that names the field (issue 5)."""

from __future__ import annotations

import copy
import uuid

import pytest
from kubernetes import client

BATCH, SCHED = "batch.volcano.sh", "scheduling.volcano.sh"


def container() -> dict:
    return {"name": "main", "image": "busybox"}


def valid_job() -> dict:
    return {
        "apiVersion": f"{BATCH}/v1alpha1", "kind": "Job", "metadata": {"name": "j"},
        "spec": {
            "minAvailable": 3,
            "schedulerName": "volcano-py",
            "policies": [{"event": "PodEvicted", "action": "RestartJob"}],
            "plugins": {"env": [], "svc": ["--publish-not-ready-addresses=false"]},
            "volumes": [{"mountPath": "/data", "volumeClaimName": "data"}],
            "tasks": [
                {"name": "master", "replicas": 1, "template": {"spec": {"containers": [container()]}}},
                {"name": "worker", "replicas": 2, "minAvailable": 2,
                 "policies": [{"exitCode": 3, "action": "RestartTask"}],
                 "template": {"spec": {"containers": [container()]}}},
            ],
        },
    }


def valid_queue() -> dict:
    return {"apiVersion": f"{SCHED}/v1beta1", "kind": "Queue", "metadata": {"name": "q"},
            "spec": {"weight": 2, "capability": {"cpu": 100, "memory": "200Gi", "nvidia.com/gpu": 16},
                     "guarantee": {"resource": {"cpu": "10"}}}}


def edit(base, change):
    obj = copy.deepcopy(base)
    change(obj["spec"])
    return obj


def _set(path: str, value):
    def change(spec):
        *parents, last = path.split(".")
        target = spec
        for p in parents:
            target = target[int(p)] if p.isdigit() else target[p]
        if isinstance(target, list):
            target[int(last)] = value
        else:
            target[last] = value
    return change


def _del(path: str):
    def change(spec):
        *parents, last = path.split(".")
        target = spec
        for p in parents:
            target = target[int(p)] if p.isdigit() else target[p]
        del target[int(last) if last.isdigit() else last]
    return change


# (case, kind, object, text the rejection must contain: the field path)
INVALID = [
    ("task minAvailable above its replicas", "Job", edit(valid_job(), _set("tasks.1.minAvailable", 3)),
     "spec.tasks[1].minAvailable"),
    ("job minAvailable above the total replicas", "Job", edit(valid_job(), _set("minAvailable", 4)),
     "spec.minAvailable"),
    ("duplicate task names", "Job", edit(valid_job(), _set("tasks.1.name", "master")), "spec.tasks"),
    ("task name not a DNS-1123 label", "Job", edit(valid_job(), _set("tasks.0.name", "Master_0")),
     "spec.tasks[0].name"),
    ("task name longer than 63", "Job", edit(valid_job(), _set("tasks.0.name", "m" * 64)), "spec.tasks[0].name"),
    ("policy with event and exitCode", "Job",
     edit(valid_job(), _set("policies", [{"event": "PodFailed", "exitCode": 2, "action": "AbortJob"}])),
     "spec.policies[0]"),
    ("policy with neither event nor exitCode", "Job",
     edit(valid_job(), _set("policies", [{"action": "AbortJob"}])), "spec.policies[0]"),
    ("task policy with events and exitCode", "Job",
     edit(valid_job(), _set("tasks.1.policies", [{"events": ["PodFailed"], "exitCode": 2, "action": "AbortJob"}])),
     "spec.tasks[1].policies[0]"),
    ("unknown policy event", "Job",
     edit(valid_job(), _set("policies", [{"event": "PodExploded", "action": "AbortJob"}])),
     "spec.policies[0].event"),
    ("unknown policy action", "Job",
     edit(valid_job(), _set("policies", [{"event": "PodFailed", "action": "Reboot"}])), "spec.policies[0].action"),
    ("exitCode 0", "Job", edit(valid_job(), _set("policies", [{"exitCode": 0, "action": "AbortJob"}])),
     "spec.policies[0].exitCode"),
    ("negative replicas", "Job", edit(valid_job(), _set("tasks.0.replicas", -1)), "spec.tasks[0].replicas"),
    ("negative maxRetry", "Job", edit(valid_job(), _set("maxRetry", -1)), "spec.maxRetry"),
    ("no tasks", "Job", edit(valid_job(), _set("tasks", [])), "spec.tasks"),
    ("task without containers", "Job", edit(valid_job(), _set("tasks.0.template.spec.containers", [])),
     "spec.tasks[0].template.spec.containers"),
    ("unknown job plugin", "Job", edit(valid_job(), _set("plugins.horovod", [])), "spec.plugins"),
    ("volume with claim and claim name", "Job",
     edit(valid_job(), _set("volumes.0.volumeClaim", {"accessModes": ["ReadWriteOnce"]})), "spec.volumes[0]"),
    ("minSuccess above the total replicas", "Job", edit(valid_job(), _set("minSuccess", 5)), "spec.minSuccess"),
    ("bad policy timeout", "Job",
     edit(valid_job(), _set("policies", [{"event": "PodFailed", "action": "AbortJob", "timeout": "soon"}])),
     "spec.policies[0].timeout"),
    ("queue weight 0", "Queue", edit(valid_queue(), _set("weight", 0)), "spec.weight"),
    ("queue weight above 65535", "Queue", edit(valid_queue(), _set("weight", 65536)), "spec.weight"),
    ("queue guarantee above capability", "Queue", edit(valid_queue(), _set("guarantee.resource.cpu", "101")),
     "spec.guarantee.resource"),
    ("queue capability not a quantity", "Queue", edit(valid_queue(), _set("capability.memory", "lots")),
     "spec.capability[memory]"),
    ("queue deserved above capability", "Queue", edit(valid_queue(), _set("deserved", {"nvidia.com/gpu": 17})),
     "spec.deserved"),
]


def create(custom, namespace: str, kind: str, obj: dict) -> dict:
    obj = copy.deepcopy(obj)
    if kind == "Job":
        return custom.create_namespaced_custom_object(BATCH, "v1alpha1", namespace, "jobs", obj)
    obj["metadata"]["name"] = f"q-{uuid.uuid4().hex[:8]}"
    created = custom.create_cluster_custom_object(SCHED, "v1beta1", "queues", obj)
    custom.delete_cluster_custom_object(SCHED, "v1beta1", "queues", obj["metadata"]["name"])
    return created


@pytest.mark.parametrize("case, kind, obj, field", INVALID, ids=[c[0] for c in INVALID])
def test_invalid_objects_are_rejected_naming_the_field(custom, namespace, case, kind, obj, field):
    with pytest.raises(client.ApiException) as info:
        create(custom, namespace, kind, obj)
    assert info.value.status == 422, info.value.body
    assert field in info.value.body, info.value.body


def test_valid_objects_are_accepted_with_defaults_and_unknown_fields_kept(custom, namespace):
    job = valid_job()
    del job["spec"]["minAvailable"]
    job["spec"]["tasks"][0]["template"]["spec"]["someFutureField"] = {"x": 1}
    job["spec"]["networkTopology"] = {"mode": "hard", "highestTierAllowed": 2}
    job["spec"]["someVolcanoOnlyField"] = "kept"
    created = create(custom, namespace, "Job", job)
    spec = created["spec"]
    assert spec["queue"] == "default" and spec["maxRetry"] == 3
    assert "minAvailable" not in spec, "computed defaults stay out of the user's spec"
    assert spec["tasks"][0]["template"]["spec"]["someFutureField"] == {"x": 1}
    assert spec["someVolcanoOnlyField"] == "kept" and spec["networkTopology"]["mode"] == "hard"
    queue = valid_queue()
    del queue["spec"]["weight"]
    assert create(custom, namespace, "Queue", queue)["spec"]["weight"] == 1


def test_hypernode_and_command_crds_accept_volcano_objects(custom, namespace):
    name = f"rack-{uuid.uuid4().hex[:6]}"
    hn = {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": name},
          "spec": {"tier": 1, "members": [{"type": "Node", "selector": {"exactMatch": {"name": "node-0"}}},
                                          {"type": "Node", "selector": {"regexMatch": {"pattern": "^gpu-"}}}]}}
    custom.create_cluster_custom_object("topology.volcano.sh", "v1alpha1", "hypernodes", hn)
    custom.delete_cluster_custom_object("topology.volcano.sh", "v1alpha1", "hypernodes", name)
    bad = copy.deepcopy(hn)
    bad["spec"]["members"][0]["selector"]["regexMatch"] = {"pattern": "x"}
    with pytest.raises(client.ApiException) as info:
        custom.create_cluster_custom_object("topology.volcano.sh", "v1alpha1", "hypernodes", bad)
    assert "spec.members[0].selector" in info.value.body
    cmd = {"apiVersion": "bus.volcano.sh/v1alpha1", "kind": "Command", "metadata": {"name": "suspend"},
           "action": "AbortJob", "target": {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "j"}}
    created = custom.create_namespaced_custom_object("bus.volcano.sh", "v1alpha1", namespace, "commands", cmd)
    assert created["action"] == "AbortJob"
