"""The CRDs on a real apiserver: Volcano's objects are accepted and keep unknown fields; what Volcano's admission
webhook rejects, the CEL rules and schema reject, with a message that names the field (issue 5)."""

from __future__ import annotations

import copy
import json
import uuid

import pytest
from controlplane import wait_for
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
    ("volume with neither claim nor claim name", "Job",  # both is the webhook's to refuse, at creation only
     edit(valid_job(), _set("volumes.0", {"mountPath": "/data"})), "spec.volumes[0]"),
    ("minSuccess above the total replicas", "Job", edit(valid_job(), _set("minSuccess", 5)), "spec.minSuccess"),
    ("bad policy timeout", "Job",
     edit(valid_job(), _set("policies", [{"event": "PodFailed", "action": "AbortJob", "timeout": "soon"}])),
     "spec.policies[0].timeout"),
    # Pod counts past Kubernetes' Indexed Job parallelism limit (issue 31; Volcano has no bound)
    ("task replicas 2147483647", "Job", edit(valid_job(), _set("tasks.1.replicas", 2147483647)),
     "spec.tasks[1].replicas"),
    ("more than 100000 pods in all", "Job",
     edit(valid_job(), lambda s: [t.update(replicas=60_000) for t in s["tasks"]]),
     "spec.tasks: Invalid value: the total replicas of its tasks must be"),
    ("job minAvailable above 100000", "Job", edit(valid_job(), _set("minAvailable", 100_001)),
     "spec.minAvailable"),
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


def test_a_job_of_exactly_100000_pods_is_accepted(custom, namespace):
    """The bound is inclusive: 1 + 99999 replicas pass the CRD (no controller claims scheduler `nobody`)."""
    job = edit(valid_job(), _set("tasks.1.replicas", 99_999))
    job["spec"]["schedulerName"] = "nobody"
    assert create(custom, namespace, "Job", job)["spec"]["tasks"][1]["replicas"] == 99_999


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


# ---- issue 16: PodGroup schema and subresource as Volcano's; the kinds Volcano's components watch -----------
def podgroup_manifest(name: str, min_member: int) -> dict:
    return {"apiVersion": f"{SCHED}/v1beta1", "kind": "PodGroup", "metadata": {"name": name},
            "spec": {"minMember": min_member, "queue": "default"}}


def test_podgroup_min_member_below_zero_is_rejected_as_volcanos_schema_does(custom, namespace):
    with pytest.raises(client.ApiException) as info:
        custom.create_namespaced_custom_object(SCHED, "v1beta1", namespace, "podgroups", podgroup_manifest("neg", -1))
    assert info.value.status == 422
    causes = json.loads(info.value.body)["details"]["causes"]
    assert [c["field"] for c in causes] == ["spec.minMember"], causes
    made = custom.create_namespaced_custom_object(SCHED, "v1beta1", namespace, "podgroups", podgroup_manifest("z", 0))
    assert made["spec"]["minMember"] == 0


# Kinds vc-scheduler's cache and vc-controller-manager's controllers list and watch (pkg/scheduler/cache/cache.go,
# pkg/controllers/*): without their CRDs those informers never sync.
VOLCANO_WATCHED = ["numatopologies.nodeinfo.volcano.sh", "nodeshards.shard.volcano.sh", "cronjobs.batch.volcano.sh",
                   "colocationconfigurations.config.volcano.sh", "jobflows.flow.volcano.sh",
                   "jobtemplates.flow.volcano.sh", "podgroups.scheduling.volcano.sh", "queues.scheduling.volcano.sh",
                   "jobs.batch.volcano.sh", "commands.bus.volcano.sh", "hypernodes.topology.volcano.sh"]


@pytest.mark.parametrize("crd", VOLCANO_WATCHED)
def test_every_kind_volcanos_components_watch_is_installed(api_client, crd):
    found = client.ApiextensionsV1Api(api_client).read_custom_resource_definition(crd)
    assert {c.type: c.status for c in found.status.conditions}.get("Established") == "True"


def test_a_volcano_numatopology_is_accepted(custom):
    name = f"node-{uuid.uuid4().hex[:6]}"
    numa = {"apiVersion": "nodeinfo.volcano.sh/v1alpha1", "kind": "Numatopology", "metadata": {"name": name},
            "spec": {"policies": {"CPUManagerPolicy": "static", "TopologyManagerPolicy": "single-numa-node"},
                     "numares": {"cpu": {"allocatable": "0-3", "capacity": 4}},
                     "cpuDetail": {"0": {"core": 0, "numa": 0, "socket": 0}}}}
    made = custom.create_cluster_custom_object("nodeinfo.volcano.sh", "v1alpha1", "numatopologies", numa)
    assert made["spec"]["numares"]["cpu"]["capacity"] == 4
    custom.delete_cluster_custom_object("nodeinfo.volcano.sh", "v1alpha1", "numatopologies", name)


@pytest.fixture
def podgroup_crd_with_status(api_client, custom, namespace):
    """Switch the PodGroup CRD to the variant with a status subresource (ours before issue 16) for one test."""
    ext = client.ApiextensionsV1Api(api_client)
    name = "podgroups.scheduling.volcano.sh"
    probe = "status-probe"
    custom.create_namespaced_custom_object(SCHED, "v1beta1", namespace, "podgroups", podgroup_manifest(probe, 1))

    def serves_status() -> bool:
        try:
            custom.get_namespaced_custom_object_status(SCHED, "v1beta1", namespace, "podgroups", probe)
            return True
        except client.ApiException as exc:
            if exc.status == 404:
                return False
            raise

    def switch(subresources: dict) -> None:
        ext.patch_custom_resource_definition(
            name, [{"op": "replace", "path": "/spec/versions/0/subresources", "value": subresources}])
        wait_for(lambda: serves_status() == bool(subresources), 30, what=f"PodGroup subresources {subresources}")

    def use_status_subresource() -> None:
        switch({"status": {}})

    yield use_status_subresource
    switch({})


def test_the_scheduler_writes_podgroup_status_on_either_crd(control_plane, custom, namespace,
                                                            podgroup_crd_with_status):
    from scheduler.api.phases import PodGroupPhase
    from scheduler.api.snapshot import PodGroupStatus
    from scheduler.cache.cluster_cache import ClusterCache

    api = control_plane.api_client()
    cache = ClusterCache(api, {"volcano-py"}, "default")
    try:
        def write_and_read(name: str, phase: PodGroupPhase, running: int) -> dict:
            pg = custom.get_namespaced_custom_object(SCHED, "v1beta1", namespace, "podgroups", name)
            cache.podgroups.objects[f"{namespace}/{name}"] = pg
            status = PodGroupStatus(f"{namespace}/{name}", phase, (), running, 0, 0)
            cache.status_writer._write_podgroup(status, 1_000_000.0)
            return custom.get_namespaced_custom_object(SCHED, "v1beta1", namespace, "podgroups", name)["status"]

        custom.create_namespaced_custom_object(SCHED, "v1beta1", namespace, "podgroups", podgroup_manifest("pg", 2))
        # As installed (Volcano's shape: no status subresource): written through the object.
        status = write_and_read("pg", PodGroupPhase.INQUEUE, 0)
        assert (status["phase"], status["running"]) == ("Inqueue", 0)
        # The other variant, switched under a running scheduler: written through /status.
        podgroup_crd_with_status()
        status = write_and_read("pg", PodGroupPhase.RUNNING, 2)
        assert (status["phase"], status["running"]) == ("Running", 2)
    finally:
        cache.stop()
        api.close()
