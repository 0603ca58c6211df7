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
import subprocess
import sys
import uuid

import pytest
from controlplane import wait_for
from inprocess import running_controllers, running_scheduler
from kubernetes import client
from operators import (
    GANG_CONF,
    KUBEFLOW,
    REPO_ROOT,
    TRAINING_OPERATOR,
    doc_manifest,
    gpu_nodes,
    install_crds,
    require_operator,
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
    require_operator(TRAINING_OPERATOR)
    # Before the controllers start: they watch PyTorchJobs only if the CRD is there when they do.
    return install_crds(api_client, TRAINING_OPERATOR, ("kubeflow.org_pytorchjobs.yaml",))


@pytest.fixture(scope="module")
def scheduler(control_plane, crds, tmp_path_factory):
    with running_scheduler(control_plane, conf=GANG_CONF, conf_dir=tmp_path_factory.mktemp("conf"),
                           name="volcano-py-scheduler-pytorchjob-gang") as running:
        yield running


@pytest.fixture(scope="module")
def controllers(control_plane, custom, crds, scheduler, tmp_path_factory):
    with running_controllers(control_plane, custom, tmp_path_factory.mktemp("controllers")) as running:
        wait_for(lambda: "PyTorchJobs watched" in running.text(), TIMEOUT, what="the controllers watch them")
        yield running


@pytest.fixture(scope="module")
def operator(control_plane, core_v1, controllers, tmp_path_factory):
    with running_training_operator(control_plane, core_v1, tmp_path_factory.mktemp("operator"),
                                   gang_scheduler=None) as running:
        yield running
        print(running.log()[-4000:])


@pytest.fixture
def nodes(core_v1):
    with gpu_nodes(core_v1, "ptg-e2e", TAG) as make:
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
    """Create a PyTorchJob; afterwards delete it and wait until its pods are gone, so that the next test's nodes
    (they share this module's node label) hold none of them."""
    made: list[tuple[str, str]] = []

    def make(namespace: str, job: dict) -> None:
        custom.create_namespaced_custom_object(KUBEFLOW, "v1", namespace, "pytorchjobs", job)
        made.append((namespace, job["metadata"]["name"]))

    yield make
    for namespace, name in made:
        custom.delete_namespaced_custom_object(KUBEFLOW, "v1", namespace, "pytorchjobs", name,
                                               body=client.V1DeleteOptions(propagation_policy="Foreground"))
    for namespace, name in made:
        wait_for(lambda ns=namespace, n=name: not job_pods(core_v1, ns, n), TIMEOUT, what=f"the pods of {name} gone")


def job_pods(core_v1, namespace: str, job: str) -> list:
    return core_v1.list_namespaced_pod(namespace, label_selector=f"training.kubeflow.org/job-name={job}").items


def explain(control_plane, namespace: str, name: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "scheduler.cli", "explain", name, "-n", namespace, "--kubeconfig",
                           str(control_plane.kubeconfig)], capture_output=True, text=True, cwd=REPO_ROOT,
                          timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def the_gang(custom, namespace: str, name: str) -> dict:
    pg = wait_for(lambda: podgroup(custom, namespace, f"pytorchjob-{name}"), TIMEOUT, what="the job's PodGroup")
    assert pg["metadata"]["ownerReferences"][0]["kind"] == "PyTorchJob", pg["metadata"]
    assert pg["metadata"]["labels"][OWNER_GANG] == "pytorchjob", pg["metadata"]
    return pg


def whole_gang(scheduler, custom, core_v1, namespace: str, name: str) -> list:
    """The master and both workers bound, in one scheduling cycle; the PodGroup Running."""
    bound = wait_for(lambda: (ps := job_pods(core_v1, namespace, name)) and len(ps) == 3
                     and all(p.spec.node_name for p in ps) and ps, TIMEOUT, what=f"{name}: 3 pods bound")
    assert sorted(p.metadata.labels["training.kubeflow.org/replica-type"] for p in bound) == [
        "master", "worker", "worker"]
    for p in bound:  # the operator without its integration: the pods name no PodGroup, they join by labels
        assert "scheduling.k8s.io/group-name" not in (p.metadata.annotations or {}), p.metadata.annotations
    keys = {f"{namespace}/{p.metadata.name}" for p in bound}
    assert len(scheduler.bind_cycles(keys)) == 1, "the gang was bound across several cycles"
    wait_for(lambda: ((podgroup(custom, namespace, f"pytorchjob-{name}") or {}).get("status") or {}).get("phase")
             == "Running", TIMEOUT, what=f"PodGroup pytorchjob-{name} Running")
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
    wait_for(lambda: len(job_pods(core_v1, namespace, "tight")) == 3, TIMEOUT, what="the 3 pods created")
    cycles = len(scheduler.results)
    wait_for(lambda: len(scheduler.results) >= cycles + 5, TIMEOUT, what="five more scheduling cycles")
    assert [p.metadata.name for p in job_pods(core_v1, namespace, "tight") if p.spec.node_name] == []
    out = explain(control_plane, namespace, "pytorchjob-tight")
    assert "gate:    gang fragmented: " in out, out

    nodes(1, gpus=2)  # now the third pod has a place: the gang is bound whole, at once
    whole_gang(scheduler, custom, core_v1, namespace, "tight")
