"""The `mpi` job plugin: MPI_HOST on the master, the ssh port everywhere, a hostfile, svc and ssh implied."""

from __future__ import annotations

from typing import Any

from scheduler.jobs import plugin_objects, pods_for


def mpi_job(args: list[str] | None = None, gpus: int = 0) -> dict[str, Any]:
    def task(name: str, replicas: int) -> dict[str, Any]:
        container: dict[str, Any] = {"name": "main", "image": "mpi"}
        if gpus and name != "master":
            container["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
        return {"name": name, "replicas": replicas, "template": {"spec": {"containers": [container]}}}

    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": "lm", "namespace": "hpc", "uid": "u1"},
            "spec": {"plugins": {"mpi": args or []}, "tasks": [task("master", 1), task("worker", 3)]}}


def keygen() -> tuple[str, str]:
    return "PRIVATE", "ssh-rsa PUBLIC"


def env(pod: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in pod["spec"]["containers"][0].get("env") or []}


def test_the_master_gets_the_workers_in_mpi_host_and_every_pod_opens_port_22() -> None:
    pods = {p["metadata"]["name"]: p for p in pods_for(mpi_job())}
    assert env(pods["lm-master-0"])["MPI_HOST"] == "lm-worker-0.lm,lm-worker-1.lm,lm-worker-2.lm"
    assert "MPI_HOST" not in env(pods["lm-worker-0"])
    for pod in pods.values():
        assert {"name": "mpijob-port", "containerPort": 22} in pod["spec"]["containers"][0]["ports"]
        mounts = {m["mountPath"] for m in pod["spec"]["containers"][0]["volumeMounts"]}
        assert {"/etc/volcano", "/root/.ssh"} <= mounts  # svc and ssh come with mpi


def test_the_hostfile_has_one_line_per_worker_with_its_gpus_as_slots() -> None:
    objects = {o["kind"]: o for o in plugin_objects(mpi_job(gpus=8), keygen)}
    assert objects["ConfigMap"]["data"]["hostfile"] == (
        "lm-worker-0.lm slots=8\nlm-worker-1.lm slots=8\nlm-worker-2.lm slots=8\n")
    assert "Secret" in objects and "Service" in objects


def test_roles_port_and_slots_are_arguments() -> None:
    job = mpi_job(["--master=master", "--worker=worker", "--port=2222", "--slots=4"])
    pods = {p["metadata"]["name"]: p for p in pods_for(job)}
    assert {"name": "mpijob-port", "containerPort": 2222} in pods["lm-worker-1"]["spec"]["containers"][0]["ports"]
    data = {o["kind"]: o for o in plugin_objects(job, keygen)}["ConfigMap"]["data"]
    assert data["hostfile"].splitlines()[0] == "lm-worker-0.lm slots=4"
