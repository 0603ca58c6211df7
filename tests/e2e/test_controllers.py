"""The Job, Queue and Command controllers on a real cluster (issue 5), with the scheduler running.

`volcano-py controllers` runs as a process (as a user runs it); the scheduler runs in-process so the test can
see which cycle bound which pod. kwok moves bound pods to Running and finishes a pod when it is annotated
(`controlplane.COMPLETE_ANNOTATION`), so a test can make a pod Succeed or Fail with an exit code.
"""

from __future__ import annotations

import json
import signal
import time
import uuid
from datetime import datetime

import pytest
import yaml
from controlplane import (
    COMPLETE_ANNOTATION,
    EXIT_CODE_ANNOTATION,
    REPO_ROOT,
    create_gpu_node,
    delete_node_and_pods,
    node_is_ready,
    wait_for,
)
from inprocess import queue_status, running_controllers, running_scheduler, start_controllers, stop_controllers
from kubernetes import client

TIMEOUT = 60
BATCH, SCHED, BUS = "batch.volcano.sh", "scheduling.volcano.sh", "bus.volcano.sh"
SEEDS = REPO_ROOT / "examples" / "seeds"


# ---------------------------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def scheduler(control_plane):
    with running_scheduler(control_plane) as running:
        yield running


@pytest.fixture(scope="module")
def gpu_nodes(control_plane, core_v1):
    """Two 16-GPU nodes for the whole module, deleted afterwards."""
    tag = uuid.uuid4().hex[:6]
    names = [f"ctl-{tag}-{i}" for i in range(2)]
    for name in names:
        create_gpu_node(core_v1, name, gpus=16, cpu="64")
    for name in names:
        wait_for(lambda n=name: node_is_ready(core_v1, n), TIMEOUT, what=f"node {name} Ready")
    yield names
    for name in names:
        delete_node_and_pods(core_v1, name)


@pytest.fixture(scope="module")
def controllers(control_plane, custom, scheduler, gpu_nodes, tmp_path_factory):
    with running_controllers(control_plane, custom, tmp_path_factory.mktemp("controllers"), "--claim-unnamed",
                             "--leader-elect-lease-name", "volcano-py-controllers-e2e") as ctl:
        yield ctl


# ---------------------------------------------------------------------------------------------- helpers


def job_manifest(name: str, tasks: list[dict], **spec) -> dict:
    return {"apiVersion": f"{BATCH}/v1alpha1", "kind": "Job", "metadata": {"name": name},
            "spec": {"schedulerName": "volcano-py", "tasks": tasks, **spec}}


def task(name: str, replicas: int, **extra) -> dict:
    container = {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}
    return {"name": name, "replicas": replicas, "template": {"spec": {"containers": [container]}}, **extra}


def create_job(custom, namespace: str, manifest: dict) -> dict:
    return custom.create_namespaced_custom_object(BATCH, "v1alpha1", namespace, "jobs", manifest)


def job(custom, namespace: str, name: str) -> dict | None:
    try:
        return custom.get_namespaced_custom_object(BATCH, "v1alpha1", namespace, "jobs", name)
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def status(custom, namespace: str, name: str) -> dict:
    return (job(custom, namespace, name) or {}).get("status") or {}


def phase(custom, namespace: str, name: str) -> str | None:
    return (status(custom, namespace, name).get("state") or {}).get("phase")


def phases_seen(custom, namespace: str, name: str) -> list[str]:
    return [c.get("status") for c in status(custom, namespace, name).get("conditions") or []]


def wait_phase(custom, namespace: str, name: str, wanted: str, **fields) -> dict:
    def reached():
        s = status(custom, namespace, name)
        ok = (s.get("state") or {}).get("phase") == wanted and all(s.get(k) == v for k, v in fields.items())
        return s if ok else None

    return wait_for(reached, TIMEOUT, what=f"job {name} {wanted} {fields or ''}")


def pods(core_v1, namespace: str, job_name: str) -> list[dict]:
    resp = core_v1.list_namespaced_pod(namespace, label_selector=f"volcano.sh/job-name={job_name}",
                                       _preload_content=False)
    return json.loads(resp.data)["items"]


def running_pods(core_v1, namespace: str, job_name: str, version: int | None = None) -> list[dict]:
    return [p for p in pods(core_v1, namespace, job_name)
            if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
            and (version is None or p["metadata"]["annotations"].get("volcano.sh/job-version") == str(version))]


def wait_running_pods(core_v1, namespace: str, job_name: str, count: int, version: int | None = None) -> list[dict]:
    return wait_for(lambda: (found := running_pods(core_v1, namespace, job_name, version)) and len(found) == count
                    and found, TIMEOUT, what=f"{count} running pods of {job_name} (version {version})")


def finish(core_v1, namespace: str, pod: str, result: str, exit_code: int | None = None) -> None:
    annotations = {COMPLETE_ANNOTATION: result}
    if exit_code is not None:
        annotations[EXIT_CODE_ANNOTATION] = str(exit_code)
    core_v1.patch_namespaced_pod(pod, namespace, {"metadata": {"annotations": annotations}})


def podgroup(custom, namespace: str, name: str) -> dict | None:
    try:
        return custom.get_namespaced_custom_object(SCHED, "v1beta1", namespace, "podgroups", name)
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def job_podgroup_name(custom, namespace: str, job: str) -> str:
    """`<job>-<job uid>`: the name Volcano's job controller gives a Job's PodGroup (issue 16)."""
    uid = custom.get_namespaced_custom_object(BATCH, "v1alpha1", namespace, "jobs", job)["metadata"]["uid"]
    return f"{job}-{uid}"


def job_podgroup(custom, namespace: str, job: str) -> dict | None:
    """The Job's PodGroup; None if the Job or its PodGroup does not exist."""
    try:
        name = job_podgroup_name(custom, namespace, job)
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return podgroup(custom, namespace, name)


def unschedulable(custom, namespace: str, name: str) -> dict | None:
    """The Unschedulable condition of the PodGroup `name`, or of the Job `name`'s PodGroup."""
    pg = podgroup(custom, namespace, name) or job_podgroup(custom, namespace, name) or {}
    for c in (pg.get("status") or {}).get("conditions") or ():
        if c.get("type") == "Unschedulable" and c.get("status") == "True":
            return c
    return None


def command(custom, namespace: str, action: str, kind: str, target: str) -> str:
    name = f"{target}-{action.lower()}-{uuid.uuid4().hex[:4]}"
    custom.create_namespaced_custom_object(BUS, "v1alpha1", namespace, "commands", {
        "apiVersion": f"{BUS}/v1alpha1", "kind": "Command", "metadata": {"name": name},
        "action": action, "target": {"apiVersion": "v1", "kind": kind, "name": target}})
    return name


def command_gone(custom, namespace: str, name: str) -> bool:
    try:
        custom.get_namespaced_custom_object(BUS, "v1alpha1", namespace, "commands", name)
        return False
    except client.ApiException as exc:
        return exc.status == 404


def env_of(pod: dict) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in pod["spec"]["containers"][0].get("env") or []}


# ---------------------------------------------------------------------------------------------- seeds


def test_seed_jobs_run_as_whole_gangs(control_plane, controllers, scheduler, custom, core_v1, namespace):
    """The seed articles' Jobs and Queues apply unchanged; each job runs with all its pods bound in one cycle."""
    files = [SEEDS / "seed-003-jobs.yaml", SEEDS / "seed-004-job.yaml"]
    docs = [d for f in files for d in yaml.safe_load_all(f.read_text()) if d]
    jobs = {d["metadata"]["name"]: sum(t["replicas"] for t in d["spec"]["tasks"]) for d in docs if d["kind"] == "Job"}
    queues = [d["metadata"]["name"] for d in docs if d["kind"] == "Queue"]
    try:
        for f in files:
            control_plane.kubectl("apply", "-n", namespace, "-f", str(f))
        for name, replicas in jobs.items():
            wait_phase(custom, namespace, name, "Running", running=replicas, minAvailable=replicas)
        for name, replicas in jobs.items():
            bound = {f"{namespace}/{p['metadata']['name']}" for p in pods(core_v1, namespace, name)}
            assert len(bound) == replicas
            assert len(scheduler.bind_cycles(bound)) == 1, f"job {name} was bound across several cycles"

        out = control_plane.kubectl("get", "vcjob,pg", "-n", namespace).stdout
        assert "STATUS" in out and "MINAVAILABLE" in out and "RUNNINGS" in out and "MINMEMBER" in out, out
        rows = {line.split()[0]: line.split() for line in out.splitlines() if "/" in line}
        assert rows["job.batch.volcano.sh/pytorch-job"][1:4] == ["Running", "8", "8"], out
        assert rows["job.batch.volcano.sh/ai-gang-job"][1:4] == ["Running", "2", "2"], out
        pg = job_podgroup_name(custom, namespace, "pytorch-job")
        assert rows[f"podgroup.scheduling.volcano.sh/{pg}"][1:4] == ["Running", "8", "8"], out
        out = control_plane.kubectl("get", "queue", "default", "team-a").stdout
        header = out.splitlines()[0].split()
        assert header == ["NAME", "STATE", "INQUEUE", "PENDING", "RUNNING", "UNKNOWN"], out
        wait_for(lambda: queue_status(custom, "default").get("running", 0) >= len(jobs), TIMEOUT,
                 what="the default queue counts the running PodGroups")
        team_a = control_plane.kubectl("get", "queue", "team-a", "--no-headers").stdout.split()
        assert team_a[1:] == ["Open", "0", "0", "0", "0"], team_a

        # kopf leaves nothing behind on user objects.
        for p in [p for name in jobs for p in pods(core_v1, namespace, name)]:
            assert not p["metadata"].get("finalizers"), p["metadata"]
            assert not [k for k in p["metadata"].get("annotations", {}) if "kopf" in k], p["metadata"]
        for name in jobs:
            meta = job(custom, namespace, name)["metadata"]
            assert not meta.get("finalizers") and not [k for k in meta.get("annotations", {}) if "kopf" in k]
    finally:
        for q in queues:
            custom.delete_cluster_custom_object(SCHED, "v1beta1", "queues", q)


def test_pytorch_seed_gets_a_rendezvous_under_its_headless_service(control_plane, controllers, custom, core_v1,
                                                                    namespace):
    docs = [d for d in yaml.safe_load_all((SEEDS / "seed-003-jobs.yaml").read_text())
            if d and d["metadata"]["name"] == "pytorch-distributed"]
    create_job(custom, namespace, docs[0])
    wait_phase(custom, namespace, "pytorch-distributed", "Running", running=4)
    found = pods(core_v1, namespace, "pytorch-distributed")
    envs = {p["metadata"]["name"]: env_of(p) for p in found}
    master = f"pytorch-distributed-worker-0.pytorch-distributed.{namespace}.svc"
    assert {e["MASTER_ADDR"] for e in envs.values()} == {master}
    assert sorted(int(e["RANK"]) for e in envs.values()) == [0, 1, 2, 3]
    assert {e["WORLD_SIZE"] for e in envs.values()} == {"4"}
    rank0 = next(p for p in found if env_of(p)["RANK"] == "0")
    assert (rank0["spec"]["hostname"], rank0["spec"]["subdomain"]) == ("pytorch-distributed-worker-0",
                                                                        "pytorch-distributed")
    service = core_v1.read_namespaced_service("pytorch-distributed", namespace)
    assert service.spec.cluster_ip == "None"

    def slice_targets():
        resp = client.DiscoveryV1Api(core_v1.api_client).list_namespaced_endpoint_slice(
            namespace, label_selector="kubernetes.io/service-name=pytorch-distributed")
        return {ep.target_ref.name for s in resp.items for ep in (s.endpoints or []) if ep.target_ref}

    targets = wait_for(lambda: (t := slice_targets()) and len(t) == 4 and t, TIMEOUT,
                       what="the EndpointSlice lists the four pods")
    assert targets == {p["metadata"]["name"] for p in found}


# ---------------------------------------------------------------------------------------------- lifecycle


def test_pod_failed_restarts_the_job(controllers, custom, core_v1, namespace):
    create_job(custom, namespace, job_manifest("restart", [task("worker", 2)],
                                               policies=[{"event": "PodFailed", "action": "RestartJob"}]))
    wait_phase(custom, namespace, "restart", "Running", running=2)
    first = wait_running_pods(core_v1, namespace, "restart", 2, version=0)
    finish(core_v1, namespace, first[0]["metadata"]["name"], "Failed", exit_code=3)
    wait_phase(custom, namespace, "restart", "Running", retryCount=1, version=1, running=2)
    wait_running_pods(core_v1, namespace, "restart", 2, version=1)
    seen = phases_seen(custom, namespace, "restart")
    assert seen == ["Pending", "Running", "Restarting", "Pending", "Running"], seen


def test_pod_evicted_terminates_the_job(controllers, custom, core_v1, namespace):
    create_job(custom, namespace, job_manifest("evict", [task("worker", 3)],
                                               policies=[{"event": "PodEvicted", "action": "TerminateJob"}]))
    wait_phase(custom, namespace, "evict", "Running", running=3)
    core_v1.delete_namespaced_pod("evict-worker-1", namespace)
    wait_phase(custom, namespace, "evict", "Terminated")
    wait_for(lambda: not [p for p in pods(core_v1, namespace, "evict") if p["status"]["phase"] == "Running"],
             TIMEOUT, what="no running pods left")
    assert "Terminating" in phases_seen(custom, namespace, "evict")


def test_task_completed_completes_the_job_and_deletes_the_other_task(controllers, custom, core_v1, namespace):
    tasks = [task("master", 1, policies=[{"event": "TaskCompleted", "action": "CompleteJob"}]), task("worker", 2)]
    create_job(custom, namespace, job_manifest("done", tasks))
    wait_phase(custom, namespace, "done", "Running", running=3)
    finish(core_v1, namespace, "done-master-0", "Succeeded")
    wait_phase(custom, namespace, "done", "Completed")
    left = wait_for(lambda: (p := pods(core_v1, namespace, "done")) and len(p) == 1 and p, TIMEOUT,
                    what="the worker pods deleted")
    assert left[0]["metadata"]["name"] == "done-master-0" and left[0]["status"]["phase"] == "Succeeded"


def test_depends_on_creates_the_master_only_once_its_workers_run(controllers, custom, core_v1, namespace):
    tasks = [task("mpimaster", 1, dependsOn={"name": ["mpiworker"]}), task("mpiworker", 3)]
    create_job(custom, namespace, job_manifest("ordered", tasks))
    workers = wait_running_pods(core_v1, namespace, "ordered", 3)
    assert {p["metadata"]["name"] for p in workers} == {f"ordered-mpiworker-{i}" for i in range(3)}
    wait_phase(custom, namespace, "ordered", "Running", running=4)
    master = next(p for p in pods(core_v1, namespace, "ordered") if p["metadata"]["name"] == "ordered-mpimaster-0")
    def second(stamp: str) -> datetime:  # creationTimestamp has whole seconds; kwok's startTime may not
        return datetime.fromisoformat(stamp).replace(microsecond=0)

    created = second(master["metadata"]["creationTimestamp"])
    assert all(created >= second(w["status"]["startTime"]) for w in workers), "master created before a worker ran"
    pg = job_podgroup(custom, namespace, "ordered")
    assert pg["spec"]["minMember"] == 3 and pg["spec"]["minTaskMember"] == {"mpiworker": 3}
    told = core_v1.list_namespaced_event(namespace, field_selector="involvedObject.name=ordered,reason=TaskWaiting")
    assert any(e.message.startswith("task mpimaster waits for mpiworker") for e in told.items), told.items


def test_max_retry_two_ends_failed(controllers, custom, core_v1, namespace):
    create_job(custom, namespace, job_manifest("flaky", [task("worker", 2)], maxRetry=2,
                                               policies=[{"event": "PodFailed", "action": "RestartJob"}]))
    for version in (0, 1):
        running = wait_running_pods(core_v1, namespace, "flaky", 2, version=version)
        finish(core_v1, namespace, running[0]["metadata"]["name"], "Failed", exit_code=1)
        if version == 0:
            wait_phase(custom, namespace, "flaky", "Running", retryCount=1, version=1)
    final = wait_phase(custom, namespace, "flaky", "Failed", retryCount=2)
    assert final["state"]["phase"] == "Failed"


def test_min_success_completes_after_two_pods_succeed(controllers, custom, core_v1, namespace):
    create_job(custom, namespace, job_manifest("enough", [task("worker", 4)], minSuccess=2))
    running = wait_running_pods(core_v1, namespace, "enough", 4)
    finish(core_v1, namespace, running[0]["metadata"]["name"], "Succeeded")
    wait_for(lambda: status(custom, namespace, "enough").get("succeeded") == 1, TIMEOUT, what="one pod succeeded")
    assert phase(custom, namespace, "enough") == "Running"
    finish(core_v1, namespace, running[1]["metadata"]["name"], "Succeeded")
    wait_phase(custom, namespace, "enough", "Completed")
    wait_for(lambda: not running_pods(core_v1, namespace, "enough"), TIMEOUT, what="the other pods deleted")


# ---------------------------------------------------------------------------------------------- PodGroup name


def test_a_jobs_podgroup_is_named_job_dash_uid_and_its_pods_name_it(controllers, custom, core_v1, namespace):
    """Volcano's job controller names the PodGroup `<job>-<job uid>` and its e2e suites look it up so (issue 16)."""
    create_job(custom, namespace, job_manifest("named", [task("worker", 2)]))
    wait_phase(custom, namespace, "named", "Running", running=2)
    name = job_podgroup_name(custom, namespace, "named")
    pg = podgroup(custom, namespace, name)
    assert pg is not None and pg["spec"]["minMember"] == 2 and pg["spec"]["minTaskMember"] == {"worker": 2}
    assert podgroup(custom, namespace, "named") is None
    assert {p["metadata"]["annotations"]["scheduling.k8s.io/group-name"]
            for p in pods(core_v1, namespace, "named")} == {name}


def test_a_legacy_podgroup_named_after_the_job_keeps_serving_it(controllers, custom, core_v1, namespace):
    """A PodGroup an older controller named `<job>` is still the job's (Volcano's getPodGroupByJob fallback):
    no second PodGroup is made and the pods join the legacy one."""
    # Made for another scheduler first, so our controllers leave it alone until the legacy PodGroup exists.
    made = create_job(custom, namespace, job_manifest("legacy", [task("worker", 1)], schedulerName="volcano"))
    owner = {"apiVersion": f"{BATCH}/v1alpha1", "kind": "Job", "name": "legacy", "uid": made["metadata"]["uid"],
             "controller": True, "blockOwnerDeletion": True}
    custom.create_namespaced_custom_object(SCHED, "v1beta1", namespace, "podgroups", {
        "apiVersion": f"{SCHED}/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "legacy", "ownerReferences": [owner]},
        "spec": {"minMember": 1, "queue": "default"}})
    custom.patch_namespaced_custom_object(BATCH, "v1alpha1", namespace, "jobs", "legacy",
                                          {"spec": {"schedulerName": "volcano-py"}})
    wait_phase(custom, namespace, "legacy", "Running", running=1)
    assert {p["metadata"]["annotations"]["scheduling.k8s.io/group-name"]
            for p in pods(core_v1, namespace, "legacy")} == {"legacy"}
    assert job_podgroup(custom, namespace, "legacy") is None


# ---------------------------------------------------------------------------------------------- gating


def test_no_pods_while_the_podgroup_is_pending(controllers, custom, core_v1, namespace):
    big = task("worker", 4)
    big["template"]["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "64"}}
    create_job(custom, namespace, job_manifest("huge", [big]))
    wait_for(lambda: unschedulable(custom, namespace, "huge"), TIMEOUT, what="the PodGroup held Pending")
    assert (job_podgroup(custom, namespace, "huge")["status"].get("phase") or "Pending") == "Pending"
    assert pods(core_v1, namespace, "huge") == []
    assert phase(custom, namespace, "huge") == "Pending"
    assert status(custom, namespace, "huge")["minAvailable"] == 4


def test_closed_queue_creates_no_pods_until_opened(controllers, custom, core_v1, namespace):
    queue = f"q-{uuid.uuid4().hex[:6]}"
    custom.create_cluster_custom_object(SCHED, "v1beta1", "queues", {
        "apiVersion": f"{SCHED}/v1beta1", "kind": "Queue", "metadata": {"name": queue}, "spec": {"weight": 1}})
    try:
        wait_for(lambda: queue_status(custom, queue).get("state") == "Open", TIMEOUT, what="queue Open")
        closing = command(custom, namespace, "CloseQueue", "Queue", queue)
        wait_for(lambda: queue_status(custom, queue).get("state") == "Closed", TIMEOUT, what="queue Closed")
        wait_for(lambda: command_gone(custom, namespace, closing), TIMEOUT, what="the Command deleted")
        create_job(custom, namespace, job_manifest("held", [task("worker", 2)], queue=queue))
        wait_for(lambda: unschedulable(custom, namespace, "held"), TIMEOUT, what="the PodGroup held")
        assert pods(core_v1, namespace, "held") == []
        wait_for(lambda: queue_status(custom, queue).get("pending") == 1, TIMEOUT, what="queue counts 1 pending")

        command(custom, namespace, "OpenQueue", "Queue", queue)
        wait_phase(custom, namespace, "held", "Running", running=2)
        wait_for(lambda: queue_status(custom, queue).get("running") == 1, TIMEOUT, what="queue counts 1 running")
    finally:
        custom.delete_cluster_custom_object(SCHED, "v1beta1", "queues", queue)


def test_abort_and_resume_commands(controllers, custom, core_v1, namespace):
    create_job(custom, namespace, job_manifest("pausable", [task("worker", 2)]))
    wait_phase(custom, namespace, "pausable", "Running", running=2)
    abort = command(custom, namespace, "AbortJob", "Job", "pausable")
    wait_phase(custom, namespace, "pausable", "Aborted")
    wait_for(lambda: command_gone(custom, namespace, abort), TIMEOUT, what="the AbortJob Command deleted")
    wait_for(lambda: not pods(core_v1, namespace, "pausable"), TIMEOUT, what="the pods deleted")
    command(custom, namespace, "ResumeJob", "Job", "pausable")
    wait_phase(custom, namespace, "pausable", "Running", running=2)


def test_jobs_of_another_scheduler_are_left_alone(controllers, custom, core_v1, namespace):
    create_job(custom, namespace, job_manifest("volcanos", [task("worker", 1)], schedulerName="volcano"))
    create_job(custom, namespace, job_manifest("ours", [task("worker", 1)]))
    wait_phase(custom, namespace, "ours", "Running", running=1)
    assert podgroup(custom, namespace, "volcanos") is None
    assert job_podgroup(custom, namespace, "volcanos") is None
    assert status(custom, namespace, "volcanos") == {}
    assert pods(core_v1, namespace, "volcanos") == []


def test_ttl_after_finished_deletes_the_job(controllers, custom, core_v1, namespace):
    # A TTL long enough to see Completed first: with 1 s the job was sometimes gone before the poll saw it.
    create_job(custom, namespace, job_manifest("brief", [task("worker", 1)], ttlSecondsAfterFinished=8))
    running = wait_running_pods(core_v1, namespace, "brief", 1)
    finish(core_v1, namespace, running[0]["metadata"]["name"], "Succeeded")
    wait_phase(custom, namespace, "brief", "Completed")
    wait_for(lambda: job(custom, namespace, "brief") is None, TIMEOUT, what="the finished job deleted after its TTL")


def test_a_standby_replica_takes_over_only_when_the_leader_leaves(control_plane, custom, tmp_path):
    """Two controller processes on one Lease: one acts, the other waits; SIGTERM hands the Lease over."""
    lease = ["--leader-elect-lease-name", f"ha-{uuid.uuid4().hex[:6]}"]
    first = start_controllers(control_plane, tmp_path / "first.log", *lease, "--leader-elect-identity", "first")
    second = None
    try:
        wait_for(lambda: "controllers for" in first.text(), TIMEOUT, what="the first replica leads")
        second = start_controllers(control_plane, tmp_path / "second.log", *lease, "--leader-elect-identity",
                                   "second")
        wait_for(lambda: "waiting to acquire" in second.text(), TIMEOUT, what="the second replica waits")
        assert "controllers for" not in second.text()
        assert stop_controllers(first) == 0, first.text()
        wait_for(lambda: "controllers for" in second.text(), TIMEOUT, what="the second replica takes over")
    finally:
        stop_controllers(first)
        if second is not None:
            stop_controllers(second)


def test_sigterm_stops_the_running_controllers_at_once(control_plane, tmp_path):
    """kopf's own SIGTERM handler left its wait on our stop flag running and gave it 5 s at every stop (a rolling
    update, a Lease handed over); once kopf is ready the signal sets that flag, and the controllers stop at once."""
    ctl = start_controllers(control_plane, tmp_path / "stop.log", "--no-leader-elect", "--log-level", "debug")
    try:
        wait_for(lambda: "controllers ready: SIGTERM" in ctl.text(), TIMEOUT, what="the controllers ready")
        # and running: kopf has found the resources and watches them (a stop during its first discovery leaves
        # its retrying requests to the same 5 s, a kopf matter of the first second only)
        wait_for(lambda: "Starting the watch-stream for jobs.v1alpha1.batch.volcano.sh" in ctl.text(), TIMEOUT,
                 what="the controllers watching Jobs")
        signalled = time.monotonic()
        ctl.proc.send_signal(signal.SIGTERM)
        assert ctl.proc.wait(TIMEOUT) == 0, ctl.text()
        took = time.monotonic() - signalled
    finally:
        stop_controllers(ctl)
    text = ctl.text()
    assert "Stop-flag is set" in text and "Signal SIGTERM is received" not in text, text[-3000:]
    assert "Hung tasks are stopped" not in text, text[-3000:]  # nothing left for kopf to wait 5 s on
    assert took < 3.0, f"stopped {took:.1f}s after SIGTERM"
