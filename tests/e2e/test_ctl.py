"""Day-two commands on a real cluster (issue 12): `volcano-py explain`, `job` and `queue`.

The scheduler runs in-process with a conf that enables `network-topology-aware`; the controllers run as a
process; the CLI runs as a user runs it, with a kubeconfig, and the tests assert on what it prints.

Cluster of this module: four 4-GPU nodes labelled with a tag of their own (the pods select it, so nodes of other
modules never count), two per rack. A filler job holds 2 GPUs on one node of each rack, so each rack has 6 free.
"""

from __future__ import annotations

import subprocess
import sys
import uuid

import pytest
from controlplane import REPO_ROOT, create_gpu_node, delete_node_and_pods, node_is_ready, wait_for
from inprocess import queue_status, running_controllers, running_scheduler
from test_controllers import (
    BATCH,
    BUS,
    SCHED,
    TIMEOUT,
    create_job,
    job_manifest,
    job_podgroup_name,
    pods,
    task as cpu_task,
    wait_phase,
)

GPU = "nvidia.com/gpu"
TAG = f"ctl-{uuid.uuid4().hex[:6]}"
CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
  - name: network-topology-aware
    arguments:
      solver.everyGang: true
"""


@pytest.fixture(scope="module")
def nodes(control_plane, core_v1):
    names = [f"{TAG}-{i}" for i in range(4)]
    for i, name in enumerate(names):
        create_gpu_node(core_v1, name, gpus=4, cpu="32", rack=f"{TAG}-rack-{'ab'[i // 2]}", labels={"ctl-e2e": TAG})
    for name in names:
        wait_for(lambda n=name: node_is_ready(core_v1, n), TIMEOUT, what=f"node {name} Ready")
    yield names
    for name in names:
        delete_node_and_pods(core_v1, name)


@pytest.fixture(scope="module")
def scheduler(control_plane, nodes, tmp_path_factory):
    with running_scheduler(control_plane, conf=CONF, conf_dir=tmp_path_factory.mktemp("conf"),
                           name="volcano-py-scheduler-ctl") as running:
        yield running.loop


@pytest.fixture(scope="module")
def controllers(control_plane, custom, scheduler, tmp_path_factory):
    with running_controllers(control_plane, custom, tmp_path_factory.mktemp("controllers"),
                             "--leader-elect-lease-name", "volcano-py-controllers-ctl") as ctl:
        yield ctl


def cli(control_plane, *args: str, check: bool = True) -> str:
    proc = subprocess.run([sys.executable, "-m", "scheduler.cli", *args, "--kubeconfig",
                           str(control_plane.kubeconfig)], capture_output=True, text=True, cwd=REPO_ROOT,
                          timeout=TIMEOUT)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc.stdout + proc.stderr


def explained(control_plane, namespace: str, name: str, gate: str) -> str:
    """The explain output once it names `gate` (the scheduler writes conditions a cycle or two later)."""
    return wait_for(lambda: (out := cli(control_plane, "explain", name, "-n", namespace)) and f"gate:    {gate}:"
                    in out and out, TIMEOUT, interval=0.5, what=f"explain {name} names gate {gate}")


def gpu_task(name: str, replicas: int, gpus: int, **node_selector: str) -> dict:
    t = cpu_task(name, replicas)
    spec = t["template"]["spec"]
    spec["containers"][0]["resources"] = {"limits": {GPU: str(gpus)}, "requests": {"cpu": "100m"}}
    spec["nodeSelector"] = {"ctl-e2e": TAG, **node_selector}
    return t


# ---------------------------------------------------------------------------------------------- explain


def test_explain_names_the_gate_and_the_numbers_of_four_held_jobs(control_plane, controllers, custom, core_v1,
                                                                  namespace, queues, nodes):
    capped = queues("capped", capability={GPU: "6"})
    closed = queues("closed", state="Closed")
    gangs, topo = queues("gangs"), queues("topo")
    # 2 GPUs held on one node of each rack: racks have 6 free each, the module's nodes 12.
    create_job(custom, namespace, job_manifest("filler", [
        gpu_task("a", 1, 2, **{"kubernetes.io/hostname": nodes[0]}),
        gpu_task("b", 1, 2, **{"kubernetes.io/hostname": nodes[2]})], queue=capped))
    wait_phase(custom, namespace, "filler", "Running", running=2)

    create_job(custom, namespace, job_manifest("held-closed", [gpu_task("worker", 1, 1)], queue=closed))
    create_job(custom, namespace, job_manifest("over-cap", [gpu_task("worker", 2, 4)], queue=capped))
    create_job(custom, namespace, job_manifest("gang-short", [gpu_task("worker", 4, 4)], queue=gangs))
    # A bare PodGroup in hard topology mode, inside one rack (tier 2): 8 GPUs, and no rack has more than 6 free.
    custom.create_namespaced_custom_object(SCHED, "v1beta1", namespace, "podgroups", {
        "apiVersion": f"{SCHED}/v1beta1", "kind": "PodGroup", "metadata": {"name": "one-rack"},
        "spec": {"minMember": 4, "queue": topo, "networkTopology": {"mode": "hard", "highestTierAllowed": 2}}})
    for i in range(4):
        core_v1.create_namespaced_pod(namespace, {
            "metadata": {"name": f"one-rack-{i}", "annotations": {"scheduling.k8s.io/group-name": "one-rack"}},
            "spec": {"schedulerName": "volcano-py", "nodeSelector": {"ctl-e2e": TAG}, "containers": [{
                "name": "main", "image": "busybox", "resources": {"limits": {GPU: "2"}}}]}})

    out = explained(control_plane, namespace, "held-closed", "queue closed")
    assert f"queue {closed} is Closed: it admits no new jobs" in out, out
    assert f"unblock: open queue {closed} (volcano-py queue open {closed})" in out, out
    assert pods(core_v1, namespace, "held-closed") == []

    out = explained(control_plane, namespace, "over-cap", "queue capability")
    assert f"queue {capped} capability: 12 nvidia.com/gpu would exceed 6 (short 6)" in out, out
    for line in ("queue capability nvidia.com/gpu  6", "allocated                        4",
                 "requested                        8", f"queue {capped} GPUs", "allocated 4", "capability 6"):
        assert line in out, out
    assert f"raise queue {capped} capability nvidia.com/gpu to at least 12" in out, out
    assert "or lower the job's request: it asks for 8 and the queue may hold 6" in out, out

    out = explained(control_plane, namespace, "gang-short", "gang shortfall")
    assert "4 more tasks need 16, 12 free on the 4 nodes they may use, short 4" in out, out
    assert "unblock: free 4 more nvidia.com/gpu on nodes the gang may use" in out, out
    assert "or lower minAvailable (now 4)" in out, out
    assert f"#1 of 1 waiting in queue {gangs}" in out, out

    out = explained(control_plane, namespace, "one-rack", "network topology")
    assert out.startswith(f"podgroup {namespace}/one-rack: Inqueue in queue {topo}"), out
    assert "no rack can hold the gang: it needs 8 nvidia.com/gpu, the best rack has 6 free" in out, out
    assert "unblock: free 2 more nvidia.com/gpu inside one rack" in out, out
    assert "highestTierAllowed > 2" in out, out
    # A pod of the gang leads to the same answer.
    assert "network topology" in cli(control_plane, "explain", "one-rack-0", "-n", namespace)


# ---------------------------------------------------------------------------------------------- job, queue


def test_job_suspend_and_resume_create_commands_the_controllers_run(control_plane, controllers, custom, core_v1,
                                                                    namespace):
    create_job(custom, namespace, job_manifest("pausable", [cpu_task("worker", 2)]))
    wait_phase(custom, namespace, "pausable", "Running", running=2)
    table = cli(control_plane, "job", "list", "-n", namespace)  # Name Creation Phase JobType Replicas Min ...
    row = table.splitlines()[1].split()
    assert (row[0], row[2], row[3], row[4], row[5]) == ("pausable", "Running", "Batch", "2", "2"), table

    out = cli(control_plane, "job", "suspend", "pausable", "-n", namespace)
    assert "AbortJob" in out, out
    commands = custom.list_namespaced_custom_object(BUS, "v1alpha1", namespace, "commands")["items"]
    if commands:  # the controllers may have run and deleted it already
        cmd = commands[0]
        assert cmd["target"]["kind"] == "Job" and cmd["target"]["name"] == "pausable", cmd
        assert cmd["metadata"]["ownerReferences"][0]["controller"] is True, cmd
        assert cmd["metadata"]["name"].startswith("pausable-abortjob-"), cmd
    wait_phase(custom, namespace, "pausable", "Aborted")
    wait_for(lambda: not pods(core_v1, namespace, "pausable"), TIMEOUT, what="the pods deleted")
    assert "volcano-py job resume pausable" in cli(control_plane, "explain", "pausable", "-n", namespace)

    cli(control_plane, "job", "resume", "pausable", "-n", namespace)
    wait_phase(custom, namespace, "pausable", "Running", running=2)
    assert '"name": "pausable"' in cli(control_plane, "job", "list", "-n", namespace, "-o", "json")

    cli(control_plane, "job", "delete", "pausable", "-n", namespace)
    wait_for(lambda: not custom.list_namespaced_custom_object(BATCH, "v1alpha1", namespace, "jobs")["items"],
             TIMEOUT, what="the job deleted")


def test_queue_close_holds_new_jobs_and_open_lets_them_run(control_plane, controllers, custom, core_v1, namespace,
                                                           queues):
    q = queues("ops", capability={GPU: "8"}, deserved={GPU: "4"})
    wait_for(lambda: queue_status(custom, q).get("state") == "Open", TIMEOUT, what="queue Open")
    cli(control_plane, "queue", "close", q)
    wait_for(lambda: queue_status(custom, q).get("state") == "Closed", TIMEOUT, what="queue Closed")
    create_job(custom, namespace, job_manifest("late", [cpu_task("worker", 2)], queue=q))
    out = explained(control_plane, namespace, "late", "queue closed")
    assert pods(core_v1, namespace, "late") == []

    row = cli(control_plane, "queue", "get", q, "-o", "wide").splitlines()[1].split()
    assert row[:3] == [q, "Closed", "-"] and row[7:10] == ["0", "4", "8"], row
    cli(control_plane, "queue", "open", q)
    wait_phase(custom, namespace, "late", "Running", running=2)
    listing = cli(control_plane, "queue", "list", "-o", "wide")
    assert "GPU-ALLOCATED" in listing.splitlines()[0] and q in listing, listing
    assert "kind: Queue" in cli(control_plane, "queue", "get", q, "-o", "yaml")
    assert out


# ---------------------------------------------------------------------------------------------- elastic jobs


def test_an_elastic_job_scales_up_and_down_and_keeps_running(control_plane, controllers, custom, core_v1,
                                                              namespace):
    create_job(custom, namespace, job_manifest("elastic", [cpu_task("worker", 2)], plugins={"svc": []}))
    wait_phase(custom, namespace, "elastic", "Running", running=2)

    def hosts() -> list[str]:
        data = core_v1.read_namespaced_config_map("elastic-svc", namespace).data or {}
        return data.get("worker.host", "").split("\n")

    def podgroup_min() -> int:
        name = job_podgroup_name(custom, namespace, "elastic")
        pg = custom.get_namespaced_custom_object(SCHED, "v1beta1", namespace, "podgroups", name)
        return int(pg["spec"]["minMember"])

    assert hosts() == ["elastic-worker-0.elastic", "elastic-worker-1.elastic"]
    for replicas in (4, 1):
        control_plane.kubectl("patch", "vcjob", "elastic", "-n", namespace, "--type=json", "-p",
                              f'[{{"op": "replace", "path": "/spec/tasks/0/replicas", "value": {replicas}}}]')
        wait_phase(custom, namespace, "elastic", "Running", running=replicas, minAvailable=replicas)
        wait_for(lambda r=replicas: len([p for p in pods(core_v1, namespace, "elastic")
                                         if not p["metadata"].get("deletionTimestamp")]) == r,
                 TIMEOUT, what=f"{replicas} pods")
        wait_for(lambda r=replicas: hosts() == [f"elastic-worker-{i}.elastic" for i in range(r)], TIMEOUT,
                 what=f"the hosts ConfigMap lists {replicas} workers")
        assert podgroup_min() == replicas
    seen = [c.get("status") for c in (custom.get_namespaced_custom_object(
        BATCH, "v1alpha1", namespace, "jobs", "elastic").get("status") or {}).get("conditions") or []]
    assert seen == ["Pending", "Running"], f"the job left Running while scaling: {seen}"


def test_an_mpi_job_gets_mpi_host_a_hostfile_and_ssh_keys(controllers, custom, core_v1, namespace):
    create_job(custom, namespace, job_manifest("lm", [cpu_task("master", 1), cpu_task("worker", 2)],
                                               plugins={"mpi": ["--slots=2"]}))
    wait_phase(custom, namespace, "lm", "Running", running=3)
    master = next(p for p in pods(core_v1, namespace, "lm") if p["metadata"]["name"] == "lm-master-0")
    env = {e["name"]: e.get("value") for e in master["spec"]["containers"][0]["env"]}
    assert env["MPI_HOST"] == "lm-worker-0.lm,lm-worker-1.lm"
    data = core_v1.read_namespaced_config_map("lm-svc", namespace).data
    assert data["hostfile"] == "lm-worker-0.lm slots=2\nlm-worker-1.lm slots=2\n"
    assert "authorized_keys" in core_v1.read_namespaced_secret("lm-ssh", namespace).data
