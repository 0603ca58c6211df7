"""Volcano's own example Jobs run on volcano-py on a real control plane (issue 16: every example Volcano runs).

Each example file of the Volcano snapshot (`example/`, the same list tools/volcano_examples.py replays on the
simulator; CONFORMANCE.md has that table) is applied as a user applies it: the Queues in its directory, then
its Jobs, unchanged but for the namespace (each test has its own). The scheduler runs in-process as
`volcano`, the name the examples use, with Volcano's CI conf; the controllers run as a process. The cluster is
the simulator's: 4 kwok nodes of 64 cpu, 256Gi and 8 GPUs. A Job passes when it reaches phase Running (its
minAvailable pods are Running, as kwok runs every bound pod). Files that are not runnable examples (Volcano's
deliberately invalid Jobs, Argo Workflows) are not collected; the JobFlow and CronJob examples, whose Jobs their
controllers make, run in their own modules (test_jobflow_on_cluster.py, test_cronjob_on_cluster.py).
"""

from __future__ import annotations

import copy
import uuid
from pathlib import Path

import pytest
import yaml
from controlplane import wait_for
from inprocess import kwok_nodes, running_controllers, running_scheduler
from kubernetes import client
from volcano_examples import CI_CONF, example_files

from scheduler.testing import volcano_snapshot

BATCH, SCHED = "batch.volcano.sh", "scheduling.volcano.sh"
TIMEOUT = 90


VOLCANO = volcano_snapshot()


def runnable(path: Path) -> bool:
    if "invalid_jobs" in path.parts:
        return False
    kinds = {d.get("kind") for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)}
    return not kinds & {"Workflow", "WorkflowTemplate", "JobFlow", "JobTemplate", "CronJob"}


EXAMPLES = [p for p in example_files(VOLCANO) if runnable(p)] if (VOLCANO / "example").is_dir() else []


@pytest.fixture(scope="module")
def example_nodes(control_plane, core_v1):
    tag = uuid.uuid4().hex[:6]
    # Ephemeral storage, as kind's nodes have.
    with kwok_nodes(core_v1, [f"ex-{tag}-{i}" for i in range(4)], gpus=8, cpu="64", memory="256Gi",
                    ephemeral_storage="200Gi") as names:
        yield names


@pytest.fixture(scope="module")
def volcano_components(control_plane, custom, example_nodes, tmp_path_factory):
    conf = (VOLCANO / CI_CONF).read_text()
    with (
        running_scheduler(control_plane, conf=conf, conf_dir=tmp_path_factory.mktemp("conf"),
                          name="volcano-py-as-volcano", scheduler_names=("volcano",)) as scheduler,
        running_controllers(control_plane, custom, tmp_path_factory.mktemp("controllers"),
                            "--scheduler-name", "volcano",
                            "--leader-elect-lease-name", "volcano-py-controllers-examples"),
    ):
        yield scheduler


def documents(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]


def job_phase(custom, namespace: str, name: str) -> str:
    job = custom.get_namespaced_custom_object(BATCH, "v1alpha1", namespace, "jobs", name)
    return str(((job.get("status") or {}).get("state") or {}).get("phase", ""))


def test_the_snapshot_has_examples():
    """Without the snapshot the examples below would not be collected: that is a failure, not a skip."""
    assert len(EXAMPLES) >= 15, f"expected Volcano's example Jobs under {VOLCANO / 'example'}"


@pytest.mark.parametrize("path", EXAMPLES, ids=[str(p.relative_to(VOLCANO / "example")) for p in EXAMPLES])
def test_the_example_runs(path, volcano_components, custom, core_v1, namespace):
    beside = [d for q in sorted(path.parent.glob("*.yaml")) if q != path for d in documents(q)]
    queues = [d for d in beside if d.get("kind") == "Queue"]
    created_queues = []
    scheduling = client.SchedulingV1Api(core_v1.api_client)
    for priority_class in (d for d in beside if d.get("kind") == "PriorityClass"):
        # The examples' scheduling.k8s.io/v1beta1 is gone since Kubernetes 1.22: applied as a user would now.
        priority_class = {**priority_class, "apiVersion": "scheduling.k8s.io/v1"}
        try:
            scheduling.create_priority_class(priority_class)
        except client.ApiException as exc:
            if exc.status != 409:
                raise
    try:
        for queue in queues:
            try:
                custom.create_cluster_custom_object(SCHED, "v1beta1", "queues", queue)
                created_queues.append(queue["metadata"]["name"])
            except client.ApiException as exc:
                if exc.status != 409:  # a queue another example's test made is the same queue
                    raise
        jobs = [d for d in documents(path) if d.get("kind") == "Job" and str(d.get("apiVersion", "")).startswith(BATCH)]
        assert jobs, f"{path} holds no Volcano Job"
        for job in jobs:
            job = copy.deepcopy(job)
            job["metadata"]["namespace"] = namespace
            custom.create_namespaced_custom_object(BATCH, "v1alpha1", namespace, "jobs", job)
        for job in jobs:
            name = job["metadata"]["name"]
            wait_for(lambda name=name: job_phase(custom, namespace, name) == "Running", TIMEOUT,
                     what=f"Job {name} of {path.name} Running")
    finally:
        for job in custom.list_namespaced_custom_object(BATCH, "v1alpha1", namespace, "jobs")["items"]:
            custom.delete_namespaced_custom_object(BATCH, "v1alpha1", namespace, "jobs", job["metadata"]["name"])
        for name in reversed(created_queues):
            _delete_queue_when_empty(custom, name)


def _delete_queue_when_empty(custom, name: str) -> None:
    """Queues are cluster-wide: a test removes what it made once its Jobs' PodGroups are gone."""
    def gone() -> bool:
        try:
            custom.delete_cluster_custom_object(SCHED, "v1beta1", "queues", name)
        except client.ApiException as exc:
            return exc.status == 404
        return False

    wait_for(gone, TIMEOUT, what=f"queue {name} deleted")


def test_a_dump_of_the_cluster_replays_on_the_simulator(control_plane, volcano_components, custom, namespace,
                                                        tmp_path):
    """`simulate --from-cluster` on what kubectl prints for this cluster (issue 21): Volcano's example Job,
    once Running here, is in the dump with its queue and nodes, and starts in the replay with the same conf."""
    job = copy.deepcopy(documents(VOLCANO / "example" / "job.yaml")[0])
    job["metadata"]["namespace"] = namespace
    custom.create_namespaced_custom_object(BATCH, "v1alpha1", namespace, "jobs", job)
    name = job["metadata"]["name"]
    wait_for(lambda: job_phase(custom, namespace, name) == "Running", TIMEOUT, what=f"Job {name} Running")
    dump = control_plane.kubectl("get", "nodes,pods,vcjob,podgroups,queues,priorityclasses", "-A", "-o", "json")
    path = tmp_path / "dump.json"
    path.write_text(dump.stdout)
    from scheduler.cycle import conf_from_text
    from scheduler.sim.from_cluster import load_cluster_dump
    from scheduler.sim.replay import replay

    cluster, workload, _ = load_cluster_dump(path)
    ours = [i for i in workload.items if i.manifest["metadata"].get("namespace") == namespace]
    assert [i.name for i in ours] == [name]
    result = replay(cluster, workload, conf_from_text((VOLCANO / CI_CONF).read_text()))
    started = {run.key: run.started is not None for run in result.runs}
    assert started[f"{namespace}/{name}"] is True
