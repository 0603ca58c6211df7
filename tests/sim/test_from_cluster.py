"""`simulate --from-cluster`: a kubectl dump (nodes, pods, Volcano Jobs, PodGroups, Queues) replayed.

The dump below has the shapes `kubectl get nodes,pods,vcjob,podgroups,queues,priorityclasses -A -o json` prints:
a finished Volcano Job (its pods' start and end give the duration), a Deployment's PodGroup (three pods of ours,
minMember 2), a pending Volcano Job that never started, another scheduler's pod bound to a node, and a kind the
replay does not read.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scheduler.cli import main
from scheduler.cycle import builtin_default_conf
from scheduler.sim.from_cluster import DEFAULT_DURATION, load_cluster_dump
from scheduler.sim.replay import replay
from scheduler.sim.workload import InputError

T0 = "2026-11-30T10:00:00Z"


def node(name: str, cpu: str = "8") -> dict:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}, "managedFields": [{}]},
            "spec": {}, "status": {"capacity": {"cpu": cpu, "memory": "32Gi", "pods": "110"},
                                   "allocatable": {"cpu": cpu, "memory": "32Gi", "pods": "110"}}}


def container(cpu: str) -> dict:
    return {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}


def pod(name: str, *, created: str = T0, scheduler: str = "volcano", job: str | None = None,
        group: str | None = None, node_name: str | None = None, phase: str = "Pending",
        started: str | None = None, finished: str | None = None, cpu: str = "1") -> dict:
    meta: dict = {"name": name, "namespace": "team", "creationTimestamp": created, "labels": {"app": name},
                  "annotations": {}}
    if job:
        meta["labels"]["volcano.sh/job-name"] = job
    if group:
        meta["annotations"]["scheduling.k8s.io/group-name"] = group
    status: dict = {"phase": phase}
    if started:
        status["startTime"] = started
    if finished:
        status["containerStatuses"] = [{"name": "main", "state": {"terminated": {"finishedAt": finished}}}]
    spec: dict = {"schedulerName": scheduler, "containers": [container(cpu)]}
    if node_name:
        spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def vcjob(name: str, created: str, replicas: int, phase: str) -> dict:
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": name, "namespace": "team", "creationTimestamp": created, "uid": f"u-{name}"},
            "spec": {"schedulerName": "volcano", "queue": "research", "minAvailable": replicas,
                     "tasks": [{"name": "w", "replicas": replicas, "template": {"spec": {"containers": [
                         container("2")]}}}]},
            "status": {"state": {"phase": phase, "lastTransitionTime": created}}}


@pytest.fixture
def dump(tmp_path: Path) -> Path:
    items = [
        node("n1"), node("n2"),
        {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "research"},
         "spec": {"weight": 2}, "status": {"state": "Open"}},
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 1000},
        vcjob("train", T0, 2, "Completed"),
        pod("train-w-0", job="train", node_name="n1", phase="Succeeded", started="2026-11-30T10:01:00Z",
            finished="2026-11-30T10:31:00Z"),
        pod("train-w-1", job="train", node_name="n2", phase="Succeeded", started="2026-11-30T10:01:00Z",
            finished="2026-11-30T10:21:00Z"),
        vcjob("later", "2026-11-30T11:00:00Z", 1, "Pending"),
        {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
         "metadata": {"name": "web", "namespace": "team", "creationTimestamp": "2026-11-30T10:10:00Z"},
         "spec": {"minMember": 2, "queue": "research"}},
        *[pod(f"web-{i}", group="web", created="2026-11-30T10:10:00Z", node_name="n2", phase="Running",
              started="2026-11-30T10:10:30Z") for i in range(3)],
        pod("dns", scheduler="default-scheduler", node_name="n1", phase="Running", started=T0, cpu="500m"),
        pod("ignored", scheduler="default-scheduler"),  # pending under another scheduler: not ours to place
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc", "namespace": "team"}},
    ]
    path = tmp_path / "dump.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    return path


def test_the_dump_becomes_the_cluster_and_the_jobs_it_was_given(dump: Path) -> None:
    cluster, workload, taken = load_cluster_dump(dump)
    assert [n["metadata"]["name"] for n in cluster.nodes] == ["n1", "n2"]
    assert cluster.priority_classes == {"high": 1000}
    assert [q["metadata"]["name"] for q in workload.queues] == ["research"]
    items = {(i.manifest["metadata"]["namespace"], i.name): i for i in workload.items}
    assert set(items) == {("team", "train"), ("team", "later"), ("team", "web"), ("team", "pinned-dns")}
    train, later, web, dns = (items["team", n] for n in ("train", "later", "web", "pinned-dns"))
    assert (train.arrival, train.duration) == (0.0, 30 * 60.0)  # first start 10:01 to last end 10:31
    assert (later.arrival, later.duration) == (3600.0, DEFAULT_DURATION)  # never started: the dump cannot say
    assert web.arrival == 600.0 and web.manifest["spec"]["minAvailable"] == 2
    assert [t["replicas"] for t in web.manifest["spec"]["tasks"]] == [1, 1, 1]
    assert "nodeName" not in web.manifest["spec"]["tasks"][0]["template"]["spec"]  # the replay places it
    assert dns.arrival == 0.0
    assert dns.manifest["spec"]["tasks"][0]["template"]["spec"]["nodeSelector"] == {"kubernetes.io/hostname": "n1"}
    assert taken == 3600.0  # the latest time the dump mentions: the pending Job's creation
    assert workload.warnings == (f"{dump}: Service: not replayed (1 in the dump)",)


def test_the_replay_runs_every_job_the_dump_gave(dump: Path) -> None:
    cluster, workload, _ = load_cluster_dump(dump)
    result = replay(cluster, workload, builtin_default_conf())
    started = {run.key: run.started is not None for run in result.runs}
    assert started == {"team/train": True, "team/later": True, "team/web": True, "team/pinned-dns": True}


def test_simulate_from_cluster_exits_0_and_a_dump_without_nodes_is_one_line(dump: Path, tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--from-cluster", str(dump), "--json"]) == 0
    totals = json.loads(capsys.readouterr().out)
    assert len(next(iter(totals.values()))["jobs"]) == 4
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"kind": "List", "items": []}))
    with pytest.raises(InputError) as err:
        load_cluster_dump(empty)
    assert err.value.where == "" and err.value.source == str(empty)
    assert main(["simulate", "--from-cluster", str(empty)]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_an_object_the_replay_cannot_read_is_left_out_with_its_reason(tmp_path: Path) -> None:
    """A cluster holds what its controllers wrote: a Job the replay cannot read (here minAvailable above its
    replicas) is one warning naming it; the rest of the dump replays."""
    bad = vcjob("broken", T0, 1, "Pending")
    bad["spec"]["minAvailable"] = 5
    volumes = vcjob("claims", T0, 1, "Pending")  # as the controller leaves it: generated name beside the claim
    volumes["spec"]["volumes"] = [{"mountPath": "/data", "volumeClaimName": "claims-pvc-x",
                                   "volumeClaim": {"accessModes": ["ReadWriteOnce"]}}]
    path = tmp_path / "dump.json"
    path.write_text(json.dumps({"kind": "List", "items": [node("n1"), vcjob("fine", T0, 1, "Pending"), bad, volumes]}))
    _, workload, _ = load_cluster_dump(path)
    assert sorted(i.name for i in workload.items) == ["claims", "fine"]
    (warning,) = workload.warnings
    assert warning.startswith(f"{path}: Job team/broken: not replayed: ")
