"""Volumes on a real cluster: PersistentVolumes, PersistentVolumeClaims and StorageClasses on the test control
plane, whose kube-controller-manager runs the PV binder (controlplane.KCM_CONTROLLERS).

- A Job's `volumeClaim` becomes a claim the Job owns, its pods mount it and run; with a WaitForFirstConsumer class
  and a static volume on one node, the scheduler puts the pods there and binds the volume (its claimRef), which
  the PV binder completes.
- A gang whose volume is in one zone binds only to that zone's nodes.
- A WaitForFirstConsumer claim is bound (a static volume's claimRef, or a provisioned one's selected-node) for a
  gang only once the whole gang is committed: a gang that cannot fit whole leaves the claim and the volumes as
  they were, cycle after cycle; once it fits, the claim follows its pods' node.
"""

from __future__ import annotations

import uuid

import pytest
from controlplane import ZONE_LABEL, create_gpu_node, delete_node_and_pods, node_is_ready, wait_for
from inprocess import running_controllers, running_scheduler
from kubernetes import client

TIMEOUT = 60
NODE_SET = "volcano-py.test/node-set"
BATCH, GROUP = "batch.volcano.sh", "scheduling.volcano.sh"
SELECTED_NODE = "volume.kubernetes.io/selected-node"
NO_PROVISIONER = "kubernetes.io/no-provisioner"


# ---- fixtures ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def scheduler(control_plane):
    with running_scheduler(control_plane, name="volcano-py-scheduler-volumes") as running:
        yield running


@pytest.fixture(scope="module")
def controllers(control_plane, custom, scheduler, tmp_path_factory):
    with running_controllers(
        control_plane,
        custom,
        tmp_path_factory.mktemp("controllers"),
        "--leader-elect-lease-name",
        "volcano-py-controllers-volumes",
    ) as ctl:
        yield ctl


@pytest.fixture
def tag() -> str:
    return uuid.uuid4().hex[:8]


@pytest.fixture
def nodes(core_v1, tag):
    """make(name, cpu=..., zone=...): a node of this test (label NODE_SET=tag), deleted afterwards."""
    created: list[str] = []

    def make(suffix: str, cpu: str = "4", zone: str = "zone-a") -> str:
        name = f"vol-{tag}-{suffix}"
        create_gpu_node(core_v1, name, gpus=0, cpu=cpu, zone=zone, labels={NODE_SET: tag})
        created.append(name)
        wait_for(lambda: node_is_ready(core_v1, name), TIMEOUT, what=f"node {name} Ready")
        return name

    yield make
    for name in created:
        delete_node_and_pods(core_v1, name)


@pytest.fixture
def storage(api_client, core_v1, tag):
    """Cluster-scoped StorageClasses and PersistentVolumes of this test, deleted afterwards."""
    storage_v1 = client.StorageV1Api(api_client)
    classes: list[str] = []
    volumes: list[str] = []

    class Storage:
        @staticmethod
        def storage_class(name: str, mode: str = "WaitForFirstConsumer", provisioner: str = NO_PROVISIONER) -> str:
            full = f"{name}-{tag}"
            storage_v1.create_storage_class(
                {
                    "apiVersion": "storage.k8s.io/v1",
                    "kind": "StorageClass",
                    "metadata": {"name": full},
                    "provisioner": provisioner,
                    "volumeBindingMode": mode,
                }
            )
            classes.append(full)
            return full

        @staticmethod
        def volume(
            name: str,
            storage_class: str,
            *,
            node: str | None = None,
            zone: str | None = None,
            modes: tuple[str, ...] = ("ReadWriteOnce",),
            size: str = "1Gi",
        ) -> str:
            full = f"{name}-{tag}"
            spec: dict = {
                "storageClassName": storage_class,
                "capacity": {"storage": size},
                "accessModes": list(modes),
                "hostPath": {"path": f"/tmp/{full}"},
                "persistentVolumeReclaimPolicy": "Retain",
            }
            labels = {}
            if node:
                spec["nodeAffinity"] = {
                    "required": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}
                                ]
                            }
                        ]
                    }
                }
            if zone:
                labels[ZONE_LABEL] = zone
                spec["nodeAffinity"] = {
                    "required": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": ZONE_LABEL, "operator": "In", "values": [zone]}]}
                        ]
                    }
                }
            core_v1.create_persistent_volume(
                {
                    "apiVersion": "v1",
                    "kind": "PersistentVolume",
                    "metadata": {"name": full, "labels": labels},
                    "spec": spec,
                }
            )
            volumes.append(full)
            return full

    yield Storage
    for name in volumes:
        core_v1.delete_persistent_volume(name)
    for name in classes:
        storage_v1.delete_storage_class(name)


# ---- helpers ----------------------------------------------------------------------------------------------


def claim(core_v1, namespace: str, name: str, storage_class: str, modes: tuple[str, ...] = ("ReadWriteOnce",)) -> None:
    core_v1.create_namespaced_persistent_volume_claim(
        namespace,
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": name},
            "spec": {
                "storageClassName": storage_class,
                "accessModes": list(modes),
                "resources": {"requests": {"storage": "1Gi"}},
            },
        },
    )


def read_claim(core_v1, namespace: str, name: str) -> dict:
    pvc = core_v1.read_namespaced_persistent_volume_claim(name, namespace)
    return client.ApiClient().sanitize_for_serialization(pvc)


def read_volume(core_v1, name: str) -> dict:
    return client.ApiClient().sanitize_for_serialization(core_v1.read_persistent_volume(name))


def gang(custom, core_v1, namespace: str, name: str, size: int, tag: str, claim_name: str, cpu: str) -> None:
    """A PodGroup of `size` and its pods, all mounting `claim_name`, kept to this test's nodes."""
    custom.create_namespaced_custom_object(
        GROUP,
        "v1beta1",
        namespace,
        "podgroups",
        {
            "apiVersion": f"{GROUP}/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": name},
            "spec": {"minMember": size, "queue": "default"},
        },
    )
    for i in range(size):
        core_v1.create_namespaced_pod(
            namespace,
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"{name}-{i}", "annotations": {"scheduling.k8s.io/group-name": name}},
                "spec": {
                    "schedulerName": "volcano-py",
                    "nodeSelector": {NODE_SET: tag},
                    "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim_name}}],
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox",
                            "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                            "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}},
                        }
                    ],
                },
            },
        )


def bound(core_v1, namespace: str) -> dict[str, str]:
    return {p.metadata.name: p.spec.node_name for p in core_v1.list_namespaced_pod(namespace).items if p.spec.node_name}


def unschedulable(custom, namespace: str, name: str) -> bool:
    pg = custom.get_namespaced_custom_object(GROUP, "v1beta1", namespace, "podgroups", name)
    return any(
        c.get("type") == "Unschedulable" and c.get("status") == "True"
        for c in (pg.get("status") or {}).get("conditions") or ()
    )


def cycles_pass(scheduler, count: int) -> None:
    """Wait until the scheduler has run `count` more cycles (its own progress, not a sleep)."""
    seen = len(scheduler.results)
    wait_for(lambda: len(scheduler.results) >= seen + count, TIMEOUT, what=f"{count} more scheduling cycles")


def volume_binds_of(scheduler, claim_key: str) -> list:
    return [v for r in scheduler.results for g in r.binds for v in g.volumes if v.claim == claim_key]


# ---- a Job's volumeClaim ----------------------------------------------------------------------------------


def test_a_job_with_a_volume_claim_gets_its_claim_and_runs_where_the_volume_is(
    controllers, scheduler, custom, core_v1, namespace, nodes, storage, tag
):
    nodes("a")
    target = nodes("b")
    local = storage.storage_class("local")
    pv = storage.volume("pv", local, node=target)
    container = {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}
    custom.create_namespaced_custom_object(
        BATCH,
        "v1alpha1",
        namespace,
        "jobs",
        {
            "apiVersion": f"{BATCH}/v1alpha1",
            "kind": "Job",
            "metadata": {"name": "train"},
            "spec": {
                "schedulerName": "volcano-py",
                "minAvailable": 2,
                "volumes": [
                    {
                        "mountPath": "/data",
                        "volumeClaim": {
                            "storageClassName": local,
                            "accessModes": ["ReadWriteOnce"],
                            "resources": {"requests": {"storage": "1Gi"}},
                        },
                    }
                ],
                "tasks": [
                    {
                        "name": "w",
                        "replicas": 2,
                        "template": {"spec": {"nodeSelector": {NODE_SET: tag}, "containers": [container]}},
                    }
                ],
            },
        },
    )

    def claim_name() -> str | None:
        job = custom.get_namespaced_custom_object(BATCH, "v1alpha1", namespace, "jobs", "train")
        return (job["spec"]["volumes"][0]).get("volumeClaimName")

    name = wait_for(claim_name, TIMEOUT, what="the generated claim name in the Job's spec")
    assert name.startswith("train-pvc-") and len(name) == len("train-pvc-") + 12
    job = custom.get_namespaced_custom_object(BATCH, "v1alpha1", namespace, "jobs", "train")
    pvc = read_claim(core_v1, namespace, name)
    assert [(r["kind"], r["name"], r["uid"], r.get("controller")) for r in pvc["metadata"]["ownerReferences"]] == [
        ("Job", "train", job["metadata"]["uid"], True)
    ]
    wait_for(lambda: len(bound(core_v1, namespace)) == 2, TIMEOUT, what="the job's two pods bound")
    assert set(bound(core_v1, namespace).values()) == {target}  # where the only free volume is
    for pod in core_v1.list_namespaced_pod(namespace).items:
        assert [v.persistent_volume_claim.claim_name for v in pod.spec.volumes if v.persistent_volume_claim] == [name]
    wait_for(
        lambda: read_claim(core_v1, namespace, name)["status"].get("phase") == "Bound",
        TIMEOUT,
        what="the PV binder completing the scheduler's binding",
    )
    assert read_claim(core_v1, namespace, name)["spec"]["volumeName"] == pv
    wait_for(
        lambda: (
            (custom.get_namespaced_custom_object(BATCH, "v1alpha1", namespace, "jobs", "train").get("status") or {})
            .get("state", {})
            .get("phase")
            == "Running"
        ),
        TIMEOUT,
        what="the job Running",
    )
    status = custom.get_namespaced_custom_object(BATCH, "v1alpha1", namespace, "jobs", "train")["status"]
    assert status["controlledResources"][f"volume-pvc-{name}"] == name


# ---- a bound claim's zone ---------------------------------------------------------------------------------


def test_a_gang_whose_volume_is_in_one_zone_binds_only_there(
    scheduler, custom, core_v1, namespace, nodes, storage, tag
):
    for suffix in ("a0", "a1"):
        nodes(suffix, zone="zone-a")
    in_b = {nodes(suffix, zone="zone-b") for suffix in ("b0", "b1")}
    immediate = storage.storage_class("immediate", mode="Immediate")
    storage.volume("pv", immediate, zone="zone-b", modes=("ReadWriteMany",))
    claim(core_v1, namespace, "data", immediate, modes=("ReadWriteMany",))
    wait_for(
        lambda: read_claim(core_v1, namespace, "data")["status"].get("phase") == "Bound",
        TIMEOUT,
        what="the PV binder binding the Immediate claim",
    )
    gang(custom, core_v1, namespace, "zoned", 4, tag, "data", cpu="3")  # one pod per node's 4 cpu
    wait_for(lambda: unschedulable(custom, namespace, "zoned"), TIMEOUT, what="the 4-pod gang refused")
    assert bound(core_v1, namespace) == {}  # zone b has two nodes, the gang needs four
    custom.delete_namespaced_custom_object(GROUP, "v1beta1", namespace, "podgroups", "zoned")
    gang(custom, core_v1, namespace, "fits", 2, tag, "data", cpu="3")
    wait_for(
        lambda: len([p for p in bound(core_v1, namespace) if p.startswith("fits-")]) == 2,
        TIMEOUT,
        what="the 2-pod gang bound",
    )
    assert {n for p, n in bound(core_v1, namespace).items() if p.startswith("fits-")} == in_b


# ---- WaitForFirstConsumer: bound once the gang commits, never before ---------------------------------------


def test_a_static_wait_for_first_consumer_volume_is_bound_only_for_a_committed_gang(
    scheduler, custom, core_v1, namespace, nodes, storage, tag
):
    small = nodes("small", cpu="1")
    local = storage.storage_class("local")
    on_small = storage.volume("small", local, node=small)
    claim(core_v1, namespace, "data", local)
    gang(custom, core_v1, namespace, "pair", 2, tag, "data", cpu="600m")  # 1.2 cpu where the claim's volume is
    wait_for(lambda: unschedulable(custom, namespace, "pair"), TIMEOUT, what="the gang refused")
    cycles_pass(scheduler, 3)
    assert bound(core_v1, namespace) == {}
    assert not (read_volume(core_v1, on_small)["spec"].get("claimRef"))
    assert read_claim(core_v1, namespace, "data")["status"].get("phase") == "Pending"
    assert volume_binds_of(scheduler, f"{namespace}/data") == []

    big = nodes("big", cpu="4")
    on_big = storage.volume("big", local, node=big)
    wait_for(lambda: len(bound(core_v1, namespace)) == 2, TIMEOUT, what="the gang bound where a volume fits it")
    assert set(bound(core_v1, namespace).values()) == {big}
    assert [v.volume for v in volume_binds_of(scheduler, f"{namespace}/data")] == [on_big]
    wait_for(
        lambda: read_claim(core_v1, namespace, "data")["spec"].get("volumeName") == on_big,
        TIMEOUT,
        what="the PV binder completing the binding",
    )
    assert not read_volume(core_v1, on_small)["spec"].get("claimRef")


def test_a_claim_to_provision_gets_its_pods_node_only_once_the_gang_commits(
    scheduler, custom, core_v1, namespace, nodes, storage, tag
):
    for suffix in ("a", "b"):
        nodes(suffix, cpu="1")
    provisioned = storage.storage_class("csi", provisioner="csi.example.com")
    claim(core_v1, namespace, "scratch", provisioned)
    gang(custom, core_v1, namespace, "pair", 2, tag, "scratch", cpu="600m")  # one node for both: no node has 1.2
    wait_for(lambda: unschedulable(custom, namespace, "pair"), TIMEOUT, what="the gang refused")
    cycles_pass(scheduler, 3)
    assert bound(core_v1, namespace) == {}
    assert SELECTED_NODE not in (read_claim(core_v1, namespace, "scratch")["metadata"].get("annotations") or {})

    big = nodes("big", cpu="4")
    wait_for(lambda: len(bound(core_v1, namespace)) == 2, TIMEOUT, what="the gang bound on the node that holds it")
    assert set(bound(core_v1, namespace).values()) == {big}
    annotations = read_claim(core_v1, namespace, "scratch")["metadata"].get("annotations") or {}
    assert annotations.get(SELECTED_NODE) == big
    (bind,) = volume_binds_of(scheduler, f"{namespace}/scratch")
    assert (bind.node, bind.volume) == (big, "")
