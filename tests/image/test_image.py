"""The built image as the cluster runs it: `podman run` of $VOLCANO_PY_IMAGE as the scheduler and as the controllers,
with the Deployments' args, as their ServiceAccounts, non-root, with a read-only root and no capabilities, on the
host network against the test control plane; a Volcano Job's pods are bound and Running (kwok runs them), and
SIGTERM stops both with status 0. The image holds exactly the locked dependencies.

The podman flags this machine needs (runc, the rlimits) come from `tools/image.sh run-flags`, which says why.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tomllib
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from controlplane import GPU_RESOURCE, REPO_ROOT, create_gpu_node, free_port, node_is_ready, wait_for
from kubernetes import client
from packaging.utils import canonicalize_name
from test_manifests import MANIFESTS, SYSTEM_NS, deployment_args, find, http_get, sample

BATCH, SCHED = "batch.volcano.sh", "scheduling.volcano.sh"
TIMEOUT = 90
UID = 65532  # the Dockerfile's USER, the manifests' runAsNonRoot user
KUBECONFIG = "/etc/volcano-py-kube/kubeconfig"
CONF = "/etc/volcano-py/volcano-scheduler.conf"  # where the Deployment mounts the ConfigMap
NODE_SET = "volcano-py.test/node-set"
# What the Deployments need that the apiserver can hold without a kubelet (no Deployments: they would stay
# Pending, nothing runs their pods here; no monitors: no Prometheus Operator CRDs).
APPLIED = ("00-namespace.yaml", "01-rbac-scheduler.yaml", "02-rbac-controllers.yaml", "03-scheduler-configmap.yaml",
           "06-default-queue.yaml")


def podman(*args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)} failed ({r.returncode}): {r.stderr.strip()}")
    return r


@pytest.fixture(scope="session")
def image() -> str:
    name = os.environ.get("VOLCANO_PY_IMAGE")
    if not name:
        pytest.fail("VOLCANO_PY_IMAGE is not set: `make image-test` builds the image and sets it")
    if not shutil.which("podman"):
        pytest.fail("podman is missing: `make image-tools` installs it")
    if podman("image", "exists", name, check=False).returncode != 0:
        pytest.fail(f"no image {name} in podman's storage: `make image-test` builds it")
    return name


@pytest.fixture(scope="session")
def run_flags() -> list[str]:
    out = subprocess.run([str(REPO_ROOT / "tools" / "image.sh"), "run-flags"], capture_output=True, text=True,
                         check=True).stdout
    return out.split()


@dataclass
class Container:
    name: str
    log_path: Path

    def pid(self) -> int:
        return int(podman("inspect", "--format", "{{.State.Pid}}", self.name).stdout)

    def logs(self) -> str:
        r = podman("logs", self.name, check=False)
        return r.stdout + r.stderr

    def stop(self) -> int:
        """SIGTERM (podman stop), as the kubelet stops a pod; the exit status."""
        podman("stop", "--time", str(TIMEOUT), self.name, timeout=TIMEOUT + 30)
        self.log_path.write_text(self.logs())
        return int(podman("inspect", "--format", "{{.State.ExitCode}}", self.name).stdout)


@contextmanager
def running(image: str, run_flags: list[str], role: str, args: list[str], mounts: dict[Path, str],
            log_dir: Path) -> Iterator[Container]:
    """`podman run` with the Deployment's securityContext: the image's user, read-only root (podman puts a tmpfs on
    /tmp, as the Deployment's emptyDir), all capabilities dropped, no privilege escalation."""
    name = f"volcano-py-image-test-{role}-{uuid.uuid4().hex[:6]}"
    volumes = [f"--volume={src}:{dst}:ro" for src, dst in mounts.items()]
    podman("run", "--detach", f"--name={name}", "--network=host", "--read-only", "--cap-drop=all",
           "--security-opt=no-new-privileges", *run_flags, *volumes, image, *args)
    box = Container(name, log_dir / f"{role}.log")
    try:
        yield box
    finally:
        if not box.log_path.exists():
            box.log_path.write_text(box.logs())
        podman("rm", "--force", "--time=5", name, check=False)


def readable_by_the_image(src: Path, dst: Path) -> Path:
    """A copy only the image's user can read, as a Secret mounted with defaultMode 0400 and fsGroup."""
    shutil.copy(src, dst)
    os.chown(dst, UID, UID)
    dst.chmod(0o400)
    return dst


def process_uid(pid: int) -> int:
    uid_line = next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("Uid:"))
    return int(uid_line.split()[1])  # real uid; effective, saved and filesystem follow


# ---- the image itself ---------------------------------------------------------------------------------------
def test_the_image_runs_volcano_py_as_uid_65532(image):
    config = json.loads(podman("image", "inspect", image).stdout)[0]["Config"]
    assert config["User"] == f"{UID}:{UID}"
    assert config["Entrypoint"] == ["volcano-py"]
    assert "8080/tcp" in config["ExposedPorts"]


def locked_pins() -> dict[str, str]:
    """requirements.lock's `name==version` lines (tests/deploy/test_image_lock.py checks the rest of it)."""
    text = (REPO_ROOT / "requirements.lock").read_text()
    return {canonicalize_name(n): v for n, v in re.findall(r"^([A-Za-z0-9._-]+)==(\S+)", text, flags=re.M)}


def test_the_image_holds_exactly_the_locked_dependencies(image, run_flags):
    listing = podman("run", "--rm", "--read-only", *run_flags, "--entrypoint=python3", image, "-c",
                     "import importlib.metadata as m, json; "
                     "print(json.dumps({d.metadata['Name']: d.version for d in m.distributions()}))").stdout
    installed = {canonicalize_name(k): v for k, v in json.loads(listing).items()}
    version = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert installed.pop("volcano-py") == version
    for seeded_by_venv in ("pip", "setuptools"):
        installed.pop(seeded_by_venv, None)
    assert installed == locked_pins()


def test_the_configmaps_conf_loads_in_the_image_without_warnings(image, run_flags, tmp_path):
    conf = tmp_path / "volcano-scheduler.conf"
    conf.write_text(find("ConfigMap", "volcano-py-scheduler-configmap")["data"]["volcano-scheduler.conf"])
    conf.chmod(0o444)
    r = podman("run", "--rm", "--read-only", "--cap-drop=all", *run_flags, f"--volume={conf}:{CONF}:ro", image,
               "conf", "check", CONF, check=False)
    assert r.returncode == 0 and "warnings: none" in r.stdout, r.stdout + r.stderr


# ---- the scheduler and the controllers on the control plane -------------------------------------------------
@pytest.fixture(scope="module")
def installed(control_plane):
    control_plane.kubectl("apply", *[x for f in APPLIED for x in ("-f", str(MANIFESTS / f))])


@pytest.fixture
def gpu_node(core_v1):
    tag = uuid.uuid4().hex[:8]
    name = f"image-{tag}"
    create_gpu_node(core_v1, name, gpus=8, labels={NODE_SET: tag})
    wait_for(lambda: node_is_ready(core_v1, name), TIMEOUT, what=f"node {name} Ready")
    yield name, tag
    core_v1.delete_node(name)


@pytest.fixture
def gpu_queue(custom):
    name = f"image-{uuid.uuid4().hex[:6]}"
    custom.create_cluster_custom_object(SCHED, "v1beta1", "queues", {
        "apiVersion": f"{SCHED}/v1beta1", "kind": "Queue", "metadata": {"name": name}, "spec": {"weight": 1}})
    yield name
    custom.delete_cluster_custom_object(SCHED, "v1beta1", "queues", name)


def volcano_job(name: str, queue: str, tag: str, replicas: int, gpus: int) -> dict:
    container = {"name": "main", "image": "busybox", "resources": {
        "requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {GPU_RESOURCE: str(gpus)}}}
    return {
        "apiVersion": f"{BATCH}/v1alpha1", "kind": "Job", "metadata": {"name": name},
        "spec": {"schedulerName": "volcano-py", "queue": queue, "minAvailable": replicas, "tasks": [{
            "name": "worker", "replicas": replicas,
            "template": {"spec": {"nodeSelector": {NODE_SET: tag}, "containers": [container]}}}]},
    }


def job_status(custom, namespace: str, name: str) -> dict:
    return custom.get_namespaced_custom_object(BATCH, "v1alpha1", namespace, "jobs", name).get("status") or {}


def job_pods(core_v1, namespace: str, name: str) -> list[dict]:
    resp = core_v1.list_namespaced_pod(namespace, label_selector=f"volcano.sh/job-name={name}", _preload_content=False)
    return json.loads(resp.data)["items"]


def podgroup_phase(custom, namespace: str, name: str) -> str | None:
    group = custom.get_namespaced_custom_object(SCHED, "v1beta1", namespace, "podgroups", name)
    return (group.get("status") or {}).get("phase")


def lease_holder(api_client, name: str) -> str | None:
    try:
        return client.CoordinationV1Api(api_client).read_namespaced_lease(name, SYSTEM_NS).spec.holder_identity
    except client.ApiException:
        return None


def test_the_image_as_scheduler_and_controllers_runs_a_volcano_job(
    image, run_flags, installed, control_plane, api_client, core_v1, custom, namespace, gpu_node, gpu_queue, tmp_path
):
    node, tag = gpu_node
    conf = tmp_path / "volcano-scheduler.conf"
    conf.write_text(find("ConfigMap", "volcano-py-scheduler-configmap")["data"]["volcano-scheduler.conf"])
    conf.chmod(0o444)
    kube = {role: readable_by_the_image(control_plane.kubeconfig_for_service_account(SYSTEM_NS, f"volcano-py-{role}"),
                                        tmp_path / f"{role}.kubeconfig") for role in ("scheduler", "controllers")}
    ports = {role: free_port() for role in kube}
    args = {role: [*deployment_args(f"volcano-py-{role}", listen_address=f"127.0.0.1:{ports[role]}"),
                   f"--kubeconfig={KUBECONFIG}"] for role in kube}
    assert args["scheduler"][0] == "scheduler" and f"--scheduler-conf={CONF}" in args["scheduler"]
    with (running(image, run_flags, "scheduler", args["scheduler"], {kube["scheduler"]: KUBECONFIG, conf: CONF},
                  tmp_path) as scheduler,
          running(image, run_flags, "controllers", args["controllers"], {kube["controllers"]: KUBECONFIG},
                  tmp_path) as controllers):
        base = {role: f"http://127.0.0.1:{port}" for role, port in ports.items()}
        wait_for(lambda: http_get(f"{base['scheduler']}/readyz")[0] == 200, TIMEOUT,
                 what=f"the scheduler's /readyz (caches synced); its log:\n{scheduler.logs()[-2000:]}")
        wait_for(lambda: http_get(f"{base['controllers']}/healthz")[0] == 200, TIMEOUT,
                 what=f"the controllers' /healthz; their log:\n{controllers.logs()[-2000:]}")
        assert {role: process_uid(box.pid()) for role, box in (("scheduler", scheduler),
                                                               ("controllers", controllers))} == {
            "scheduler": UID, "controllers": UID}
        for role in kube:  # the Deployments' --leader-elect, each identity its $(POD_NAME)
            wait_for(lambda r=role: lease_holder(api_client, f"volcano-py-{r}") == f"e2e-volcano-py-{r}", TIMEOUT,
                     what=f"the {role} to hold its Lease")

        custom.create_namespaced_custom_object(BATCH, "v1alpha1", namespace, "jobs",
                                               volcano_job("train", gpu_queue, tag, replicas=2, gpus=2))
        state = wait_for(lambda: (s := job_status(custom, namespace, "train")).get("running") == 2 and s, TIMEOUT,
                         what="the Job's 2 pods Running")
        assert state["state"]["phase"] == "Running"
        pods = {p["metadata"]["name"]: (p["spec"].get("nodeName"), p["status"]["phase"])
                for p in job_pods(core_v1, namespace, "train")}
        assert pods == {"train-worker-0": (node, "Running"), "train-worker-1": (node, "Running")}
        group = job_pods(core_v1, namespace, "train")[0]["metadata"]["annotations"]["scheduling.k8s.io/group-name"]
        wait_for(lambda: podgroup_phase(custom, namespace, group) == "Running", TIMEOUT,
                 what=f"PodGroup {group} Running (the scheduler writes it once the pods run)")
        text = wait_for(lambda: (r := http_get(f"{base['scheduler']}/metrics"))[0] == 200
                        and sample(r[1], "volcano_queue_allocated_gpu", queue_name=gpu_queue) == 4 and r[1],
                        TIMEOUT, what="/metrics to count the queue's 4 GPUs")
        assert (sample(text, "volcano_schedule_attempts_total", result="scheduled") or 0) >= 1

        exits = {"scheduler": scheduler.stop(), "controllers": controllers.stop()}
    assert exits == {"scheduler": 0, "controllers": 0}, {b.name: b.log_path.read_text()[-3000:]
                                                         for b in (scheduler, controllers)}
    for box in (scheduler, controllers):
        log_text = box.log_path.read_text()
        # An API refusal is logged as "<METHOD> <path>: 403 <message>" (KubeError).
        assert ": 403 " not in log_text and "forbidden" not in log_text.lower(), log_text[-3000:]
        assert "Traceback" not in log_text, log_text[-3000:]
