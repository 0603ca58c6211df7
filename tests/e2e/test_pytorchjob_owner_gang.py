"""Kubeflow's training-operator v1.8.1, the real one, WITHOUT its Volcano gang integration (no
`--gang-scheduler-name`, so it writes no PodGroup and creates the pods at once), with volcano-py's automatic
gang: a PyTorchJob that opts in (`scheduling.volcano-py.io/owner-gang`) gets one PodGroup `pytorchjob-<name>`
from its spec (api/pytorch_gang.py, controllers/owner_gangs.py), and its master and workers start as one gang
on a cluster with room, and wait whole where only part of them fits.

The operator is built by tools/build-operators.sh and started by tests/e2e/operators.py. The manifest is
docs/integrations.md's PyTorchJob, with the opt-in annotation. kwok runs no containers: the tests assert
PodGroups and binds.

Without the automatic gang the pods, owned by the PyTorchJob, share the plain pods' PodGroup (minMember 1) and
bind piecemeal where only part fits: the test of the fragmented cluster fails so.
"""

from __future__ import annotations

import copy
import uuid

import pytest
from controlplane import wait_for
from operators import (
    KUBEFLOW,
    TRAINING_OPERATOR,
    bound_in_one_cycle,
    deleting_after,
    doc_manifest,
    explain,
    gang_scheduler,
    gpu_nodes,
    none_bound_for_five_cycles,
    operator_crds,
    owner_gang_controllers,
    phase,
    running_training_operator,
)
from test_controllers import SCHED, podgroup

TIMEOUT = 90
GPU = "nvidia.com/gpu"
TAG = f"ptg-{uuid.uuid4().hex[:6]}"
OWNER_GANG = "scheduling.volcano-py.io/owner-gang"
ROLES = ("Master", "Worker")


@pytest.fixture(scope="module")
def crds(api_client):
    # Before the controllers start: they watch PyTorchJobs only if the CRD is there when they do.
    return operator_crds(api_client, TRAINING_OPERATOR, ("kubeflow.org_pytorchjobs.yaml",))


@pytest.fixture(scope="module")
def scheduler(control_plane, crds, tmp_path_factory):
    with gang_scheduler(control_plane, tmp_path_factory, "volcano-py-scheduler-pytorchjob-gang") as running:
        yield running


@pytest.fixture(scope="module")
def controllers(control_plane, custom, crds, scheduler, tmp_path_factory):
    with owner_gang_controllers(control_plane, custom, tmp_path_factory, "PyTorchJobs watched") as running:
        yield running


@pytest.fixture(scope="module")
def operator(control_plane, core_v1, controllers, tmp_path_factory):
    with running_training_operator(control_plane, core_v1, tmp_path_factory.mktemp("operator"),
                                   gang_scheduler=None) as running:
        yield running
        print(running.log()[-4000:])


@pytest.fixture
def nodes(core_v1, namespace):
    with gpu_nodes(core_v1, "ptg-e2e", TAG, namespace) as make:
        yield make


def pytorchjob(name: str, *, gpus: int) -> dict:
    """docs/integrations.md's PyTorchJob, opted in, pinned to this module's nodes, with its name and GPUs set."""
    job = copy.deepcopy(doc_manifest("pytorchjob"))
    job["metadata"]["name"] = name
    job["metadata"]["annotations"] = {OWNER_GANG: "true"}
    for role in ROLES:
        pod = job["spec"]["pytorchReplicaSpecs"][role]["template"]["spec"]
        assert pod["schedulerName"] == "volcano-py", "the documented manifest names volcano-py"
        pod["nodeSelector"] = {"ptg-e2e": TAG}
        pod["containers"][0]["resources"]["limits"][GPU] = str(gpus)
    return job


@pytest.fixture
def create(custom, core_v1):
    """Create a PyTorchJob; afterwards delete it and wait until its pods are gone."""
    with deleting_after(custom, KUBEFLOW, "v1", "pytorchjobs", lambda ns, n: job_pods(core_v1, ns, n)) as make:
        yield make


def job_pods(core_v1, namespace: str, job: str) -> list:
    return core_v1.list_namespaced_pod(namespace, label_selector=f"training.kubeflow.org/job-name={job}").items


def the_gang(custom, namespace: str, name: str) -> dict:
    pg = wait_for(lambda: podgroup(custom, namespace, f"pytorchjob-{name}"), TIMEOUT, what="the job's PodGroup")
    assert pg["metadata"]["ownerReferences"][0]["kind"] == "PyTorchJob", pg["metadata"]
    assert pg["metadata"]["labels"][OWNER_GANG] == "pytorchjob", pg["metadata"]
    return pg


def whole_gang(scheduler, custom, core_v1, namespace: str, name: str) -> list:
    """The master and both workers bound, in one scheduling cycle; the PodGroup Running."""
    bound = bound_in_one_cycle(scheduler, namespace, lambda: job_pods(core_v1, namespace, name), name)
    assert sorted(p.metadata.labels["training.kubeflow.org/replica-type"] for p in bound) == [
        "master", "worker", "worker"]
    for p in bound:  # the operator without its integration: the pods name no PodGroup, they join by labels
        assert "scheduling.k8s.io/group-name" not in (p.metadata.annotations or {}), p.metadata.annotations
    wait_for(lambda: phase(custom, namespace, f"pytorchjob-{name}") == "Running", TIMEOUT,
             what=f"PodGroup pytorchjob-{name} Running")
    return bound


def test_pytorchjob_without_the_operators_integration_starts_as_one_gang(operator, scheduler, custom, core_v1,
                                                                          namespace, nodes, create):
    nodes(3, gpus=2)
    create(namespace, pytorchjob("room", gpus=2))
    pg = the_gang(custom, namespace, "room")
    assert pg["spec"]["minMember"] == 3 and pg["spec"]["queue"] == "default", pg["spec"]
    assert pg["spec"]["minTaskMember"] == {"master": 1, "worker": 2}, pg["spec"]
    assert pg["spec"]["minResources"][GPU] == "6", pg["spec"]
    bound = whole_gang(scheduler, custom, core_v1, namespace, "room")
    assert len({p.spec.node_name for p in bound}) == 3, "each 2-GPU pod has a 2-GPU node of its own"
    # Neither the operator nor the plain pods' controller made another PodGroup: the gang is the job's alone.
    names = [pg["metadata"]["name"] for pg in custom.list_namespaced_custom_object(
        SCHED, "v1beta1", namespace, "podgroups")["items"]]
    assert names == ["pytorchjob-room"], names


def test_pytorchjob_without_the_operators_integration_waits_whole_where_only_part_fits(
        operator, scheduler, control_plane, custom, core_v1, namespace, nodes, create):
    # 6 GPUs in all, as the job asks, but each 3-GPU node holds one 2-GPU pod: two of the three would fit. The
    # operator creates all three pods at once (it waits for no PodGroup): none may be bound.
    nodes(2, gpus=3)
    create(namespace, pytorchjob("tight", gpus=2))
    the_gang(custom, namespace, "tight")
    none_bound_for_five_cycles(scheduler, lambda: job_pods(core_v1, namespace, "tight"))
    out = explain(control_plane, namespace, "pytorchjob-tight")
    assert "gate:    gang fragmented: " in out, out

    nodes(1, gpus=2)  # now the third pod has a place: the gang is bound whole, at once
    whole_gang(scheduler, custom, core_v1, namespace, "tight")
