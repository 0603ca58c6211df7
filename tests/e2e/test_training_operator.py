"""Kubeflow's training-operator v1.8.1, the real one, with its Volcano gang integration against volcano-py
(issue 36): a PyTorchJob (a master and two workers) and an MPIJob (kubeflow.org/v1: a launcher and two workers)
each start as one gang, wait whole, keep to their queue and are whole again after a pod is deleted.

The operator is built by tools/build-operators.sh and started by tests/e2e/operators.py with
`--gang-scheduler-name=volcano`: it writes the job's PodGroup and creates the pods only once volcano-py has
moved that PodGroup to Inqueue. The job's templates name `schedulerName: volcano-py` (the operator keeps it), so
volcano-py runs under its own name. The manifests are docs/integrations.md's. kwok runs no containers: the tests
assert PodGroups and binds.

Each test also needs volcano-py's gang rule (plugins/gang.py): without it a fragmented cluster binds part of the
gang, and no PodGroup gets the gang's `Scheduled` condition.
"""

from __future__ import annotations

import copy
import uuid

import pytest
from controlplane import wait_for
from kubernetes import client
from operators import (
    KUBEFLOW,
    TRAINING_OPERATOR,
    bound_in_one_cycle,
    conditions,
    doc_manifest,
    explain,
    five_more_cycles,
    gang_scheduler,
    gpu_nodes,
    none_bound_for_five_cycles,
    operator_crds,
    phase,
    running_training_operator,
)
from test_controllers import SCHED, podgroup

TIMEOUT = 90
GPU = "nvidia.com/gpu"
TAG = f"op-{uuid.uuid4().hex[:6]}"
PYTORCH_ROLES = ("Master", "Worker")
MPI_ROLES = ("launcher", "worker", "worker")  # the pods' training.kubeflow.org/replica-type labels


@pytest.fixture(scope="module")
def scheduler(control_plane, tmp_path_factory):
    with gang_scheduler(control_plane, tmp_path_factory, "volcano-py-scheduler-operators") as running:
        yield running


@pytest.fixture(scope="module")
def operator(control_plane, api_client, core_v1, scheduler, tmp_path_factory):
    operator_crds(api_client, TRAINING_OPERATOR, ("kubeflow.org_pytorchjobs.yaml", "kubeflow.org_mpijobs.yaml"))
    with running_training_operator(control_plane, core_v1, tmp_path_factory.mktemp("operator"),
                                   schemes=("pytorchjob", "mpijob")) as running:
        yield running
        print(running.log()[-4000:])


@pytest.fixture
def nodes(core_v1, namespace):
    # ephemeral-storage as a kubelet reports it: MPIJob's launcher init container asks for some.
    with gpu_nodes(core_v1, "op-e2e", TAG, namespace, ephemeral_storage="100Gi") as make:
        yield make


def pytorchjob(name: str, *, gpus: int, queue: str = "default") -> dict:
    """docs/integrations.md's PyTorchJob, pinned to this module's nodes, with its name, queue and GPUs set."""
    job = copy.deepcopy(doc_manifest("pytorchjob"))
    job["metadata"]["name"] = name
    job["spec"]["runPolicy"]["schedulingPolicy"]["queue"] = queue
    for role in PYTORCH_ROLES:
        pod = job["spec"]["pytorchReplicaSpecs"][role]["template"]["spec"]
        assert pod["schedulerName"] == "volcano-py", "the documented manifest names volcano-py"
        pod["nodeSelector"] = {"op-e2e": TAG}
        pod["containers"][0]["resources"]["limits"][GPU] = str(gpus)
    return job


def mpijob(name: str, *, gpus: int, queue: str = "default") -> dict:
    """docs/integrations.md's MPIJob, pinned to this module's nodes, with its name, queue and workers' GPUs set."""
    job = copy.deepcopy(doc_manifest("mpijob"))
    job["metadata"]["name"] = name
    job["spec"]["runPolicy"]["schedulingPolicy"]["queue"] = queue
    for role in ("Launcher", "Worker"):
        pod = job["spec"]["mpiReplicaSpecs"][role]["template"]["spec"]
        assert pod["schedulerName"] == "volcano-py", "the documented manifest names volcano-py"
        pod["nodeSelector"] = {"op-e2e": TAG}
    job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["resources"]["limits"][GPU] = (
        str(gpus))
    return job


def create(custom, namespace: str, job: dict) -> None:
    plural = {"PyTorchJob": "pytorchjobs", "MPIJob": "mpijobs"}[job["kind"]]
    custom.create_namespaced_custom_object(KUBEFLOW, "v1", namespace, plural, job)


def job_pods(core_v1, namespace: str, job: str) -> list:
    return core_v1.list_namespaced_pod(namespace, label_selector=f"training.kubeflow.org/job-name={job}").items


def whole_gang(scheduler, custom, core_v1, namespace: str, job: str, roles=("master", "worker", "worker")) -> list:
    """All three pods bound, in one scheduling cycle; the PodGroup Running, with the gang's Scheduled condition."""
    bound = bound_in_one_cycle(scheduler, namespace, lambda: job_pods(core_v1, namespace, job), job)
    assert sorted(p.metadata.labels["training.kubeflow.org/replica-type"] for p in bound) == sorted(roles)
    for p in bound:
        assert p.spec.scheduler_name == "volcano-py", p.spec.scheduler_name
        assert p.metadata.annotations["scheduling.k8s.io/group-name"] == job, p.metadata.annotations
    wait_for(lambda: phase(custom, namespace, job) == "Running", TIMEOUT, what=f"PodGroup {job} Running")
    scheduled = wait_for(lambda: conditions(podgroup(custom, namespace, job)).get("Scheduled"), TIMEOUT,
                         what=f"PodGroup {job}: the gang's Scheduled condition")
    assert scheduled["status"] == "True", scheduled
    return bound


def test_pytorchjob_starts_as_one_gang_on_a_cluster_with_room(operator, scheduler, custom, core_v1, namespace,
                                                              nodes):
    nodes(3, gpus=2)
    create(custom, namespace, pytorchjob("room", gpus=2))
    pg = wait_for(lambda: podgroup(custom, namespace, "room"), TIMEOUT, what="the operator's PodGroup")
    assert pg["spec"]["minMember"] == 3 and pg["spec"]["queue"] == "default", pg["spec"]
    assert pg["spec"]["minResources"][GPU] == "6", pg["spec"]
    assert pg["metadata"]["ownerReferences"][0]["kind"] == "PyTorchJob", pg["metadata"]
    bound = whole_gang(scheduler, custom, core_v1, namespace, "room")
    assert len({p.spec.node_name for p in bound}) == 3, "each 2-GPU pod has a 2-GPU node of its own"


def test_pytorchjob_waits_whole_where_only_part_of_it_fits(operator, scheduler, control_plane, custom, core_v1,
                                                           namespace, nodes):
    # 6 GPUs in all, as the job asks, so the PodGroup is admitted (Inqueue) and the operator makes the pods;
    # but each 3-GPU node holds one 2-GPU pod: two of the three would fit, and none may be bound.
    nodes(2, gpus=3)
    create(custom, namespace, pytorchjob("tight", gpus=2))
    wait_for(lambda: len(job_pods(core_v1, namespace, "tight")) == 3, TIMEOUT,
             what="the operator created the 3 pods (PodGroup admitted)")
    unschedulable = wait_for(lambda: conditions(podgroup(custom, namespace, "tight")).get("Unschedulable"),
                             TIMEOUT, what="the gang reported Unschedulable")
    assert unschedulable["status"] == "True", unschedulable
    # Several more cycles see the same cluster: still none bound.
    none_bound_for_five_cycles(scheduler, lambda: job_pods(core_v1, namespace, "tight"))
    assert phase(custom, namespace, "tight") == "Inqueue"
    out = explain(control_plane, namespace, "tight")  # the PodGroup has the job's name
    assert "gate:    gang fragmented: " in out and "free in total, but split across nodes" in out, out

    nodes(1, gpus=2)  # now the third pod has a place: the gang is bound whole, at once
    whole_gang(scheduler, custom, core_v1, namespace, "tight")


def wholly_held_by_its_queue(scheduler, control_plane, custom, core_v1, namespace: str, job: dict, queue: str, *,
                             needs: int, holds: int, roles: tuple[str, ...]) -> None:
    """Create `job` in `queue`, whose capability holds `holds` of the `needs` GPUs the job asks: its PodGroup stays
    Pending, so the operator makes no pod at all, and `explain` names the queue; raising the capability to `needs`
    starts the whole gang at once."""
    name = job["metadata"]["name"]
    create(custom, namespace, job)
    pg = wait_for(lambda: podgroup(custom, namespace, name), TIMEOUT, what="the operator's PodGroup")
    assert pg["spec"]["queue"] == queue and pg["spec"]["minResources"][GPU] == str(needs), pg["spec"]
    five_more_cycles(scheduler, what="five scheduling cycles")
    assert phase(custom, namespace, name) in ("", "Pending")
    assert job_pods(core_v1, namespace, name) == []
    # `volcano-py explain` on the job's PodGroup (it has the job's name) names the queue as the gate.
    out = wait_for(lambda: (o := explain(control_plane, namespace, name)) and "gate:    queue capability:" in o
                   and o, TIMEOUT, interval=0.5, what="explain names the queue capability")
    assert f"queue {queue} capability: {needs} {GPU} would exceed {holds} (short {needs - holds})" in out, out

    custom.patch_cluster_custom_object(SCHED, "v1beta1", "queues", queue, {"spec": {"capability": {GPU: str(needs)}}})
    whole_gang(scheduler, custom, core_v1, namespace, name, roles=roles)


def whole_again_after_deleting(scheduler, custom, core_v1, namespace: str, job: str, victim: str,
                               roles: tuple[str, ...]) -> None:
    """Delete the pod `victim` of the running gang `job`: the operator makes it again (same name, new uid), and
    volcano-py binds the replacement; the other pods are never touched, and nothing else is bound."""
    first = {p.metadata.name: p for p in whole_gang(scheduler, custom, core_v1, namespace, job, roles=roles)}
    assert victim in first, sorted(first)
    core_v1.delete_namespaced_pod(victim, namespace, body=client.V1DeleteOptions(grace_period_seconds=0))

    def replaced_and_bound():
        pods = {p.metadata.name: p for p in job_pods(core_v1, namespace, job)}
        new = pods.get(victim)
        return (len(pods) == 3 and new is not None and new.metadata.uid != first[victim].metadata.uid
                and all(p.spec.node_name for p in pods.values()) and pods)

    pods = wait_for(replaced_and_bound, TIMEOUT, what=f"{victim} recreated by the operator and bound")
    # The others kept their uids and nodes: never unbound, never replaced, while the victim was away.
    assert {n: (p.metadata.uid, p.spec.node_name) for n, p in pods.items() if n != victim} == {
        n: (p.metadata.uid, p.spec.node_name) for n, p in first.items() if n != victim}, "only the victim was replaced"
    assert pods[victim].metadata.annotations["scheduling.k8s.io/group-name"] == job
    keys = {f"{namespace}/{p.metadata.name}" for p in pods.values()}
    assert len(scheduler.bind_cycles(keys)) == 2, "the gang's first bind, then the replacement's: nothing else"
    # One pod short of minMember the PodGroup left Running (Volcano's rule: allocated < minMember and not
    # Inqueue is Pending); with the replacement bound it is Running again, as the whole gang.
    wait_for(lambda: phase(custom, namespace, job) == "Running", TIMEOUT, what="PodGroup Running again")
    pg = podgroup(custom, namespace, job)
    assert pg["spec"]["minMember"] == 3 and conditions(pg)["Scheduled"]["status"] == "True", pg


def test_pytorchjob_keeps_to_its_queue(operator, scheduler, control_plane, custom, core_v1, namespace, nodes,
                                       queues):
    nodes(3, gpus=2)
    capped = queues("train", capability={GPU: "4"})  # the job asks for 3 x 2 GPUs
    wholly_held_by_its_queue(scheduler, control_plane, custom, core_v1, namespace,
                             pytorchjob("queued", gpus=2, queue=capped), capped, needs=6, holds=4,
                             roles=("master", "worker", "worker"))


def test_pytorchjob_is_whole_again_after_a_pod_is_deleted(operator, scheduler, custom, core_v1, namespace, nodes):
    nodes(3, gpus=2)
    create(custom, namespace, pytorchjob("regang", gpus=2))
    whole_again_after_deleting(scheduler, custom, core_v1, namespace, "regang", "regang-worker-1",
                               roles=("master", "worker", "worker"))


def test_mpijob_waits_whole_then_starts_as_one_gang(operator, scheduler, control_plane, custom, core_v1, namespace,
                                                    nodes):
    # Workers of 2 GPUs on a 3-GPU node and a 1-GPU node: 4 GPUs, as the workers ask, so the PodGroup is
    # admitted; the launcher (CPU only) and one worker would fit, the other worker not: none may be bound.
    nodes(1, gpus=3)
    nodes(1, gpus=1)
    create(custom, namespace, mpijob("pi", gpus=2))
    pg = wait_for(lambda: podgroup(custom, namespace, "pi"), TIMEOUT, what="the operator's PodGroup")
    assert pg["spec"]["minMember"] == 3 and pg["spec"]["minResources"][GPU] == "4", pg["spec"]
    wait_for(lambda: len(job_pods(core_v1, namespace, "pi")) == 3, TIMEOUT,
             what="the operator created the launcher and 2 workers (PodGroup admitted)")
    wait_for(lambda: conditions(podgroup(custom, namespace, "pi")).get("Unschedulable"), TIMEOUT,
             what="the gang reported Unschedulable")
    none_bound_for_five_cycles(scheduler, lambda: job_pods(core_v1, namespace, "pi"))
    out = explain(control_plane, namespace, "pi")
    assert "gate:    gang fragmented: " in out and "free in total, but split across nodes" in out, out

    nodes(1, gpus=2)
    whole_gang(scheduler, custom, core_v1, namespace, "pi", roles=MPI_ROLES)


def test_mpijob_keeps_to_its_queue(operator, scheduler, control_plane, custom, core_v1, namespace, nodes, queues):
    # Room on the cluster (3 x 2 GPUs for two 2-GPU workers and a CPU-only launcher); the queue is the only gate.
    nodes(3, gpus=2)
    capped = queues("mpi", capability={GPU: "2"})  # the workers ask for 2 x 2 GPUs
    wholly_held_by_its_queue(scheduler, control_plane, custom, core_v1, namespace,
                             mpijob("queued", gpus=2, queue=capped), capped, needs=4, holds=2, roles=MPI_ROLES)


# training-operator v1.8.1's MPIJob controller (pkg/controller.v1/mpi/mpijob_controller.go, ReconcilePods):
# getOrCreateWorker makes any missing `<job>-worker-<i>` again, and a missing `<job>-launcher` is made again
# unless the launcher had finished. Nothing else is restarted. It makes pods only while the PodGroup is out of
# Pending (common/job.go: DelayPodCreationDueToPodGroup): if volcano-py has already marked the gang, one pod
# short, Pending, the replacement waits for volcano-py to admit it again.
@pytest.mark.parametrize("victim", ["worker-1", "launcher"])
def test_mpijob_is_whole_again_after_a_pod_is_deleted(operator, scheduler, custom, core_v1, namespace, nodes,
                                                      victim):
    nodes(3, gpus=2)
    create(custom, namespace, mpijob("regang", gpus=2))
    whole_again_after_deleting(scheduler, custom, core_v1, namespace, "regang", f"regang-{victim}", roles=MPI_ROLES)
