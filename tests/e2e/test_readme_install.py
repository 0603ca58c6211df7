"""The README's install, as a newcomer runs it: the blocks marked `<!-- readme-install: NAME -->` run as written, in
bash with `set -euo pipefail`, one after the other, on a fresh control plane of the harness (kube-apiserver, etcd,
kube-controller-manager, kwok; no CRDs until the README installs them). Where a kubelet would start the chart's
pods, this test is the kubelet: it reads each Deployment as the apiserver holds it after `helm install` (or
`kubectl apply` and `kubectl set image`) and `podman run`s its image with the rendered args ($(VAR) expanded), env
(fieldRefs resolved), volumes (the ConfigMap's files, emptyDirs as tmpfs), securityContext, a ServiceAccount token
from the TokenRequest API with the in-cluster environment, and its own network namespace; it waits for the
readiness probe. The README's first gang must then be bound by that container (the bind's `bound-by` annotation
names the scheduler's pod), the too-big gang must wait with none of it bound, and `volcano-py explain` must say
that cpu is what it lacks.

What is not the reader's: the registry. `podman push` goes through a stand-in that checks the image is in podman's
storage under the pushed name and records it, because no registry runs here and the container runtime that plays
the kubelet reads that storage. The image is built once per session, by the README's block, on the base made from
Debian's packages (IMAGE_BASE=debian: no registry answers on this machine; docs/install.md), and podman's layer
cache keeps a rebuild to the layers that changed. `volcano-py` for `explain` is this checkout's CLI (the reader's
`pip install .`).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

import pytest
from controlplane import REPO_ROOT, ControlPlane, create_gpu_node, free_port, node_is_ready, wait_for
from kubernetes import client
from readme_blocks import install_blocks
from test_manifests import http_get

SYSTEM_NS = "volcano-py-system"
DEPLOYMENTS = ("volcano-py-scheduler", "volcano-py-controllers")
TIMEOUT = 120
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
APISERVER_NAME = "kubernetes.default.svc"  # in the apiserver certificate's names; the container resolves it to
HOST_LOOPBACK = "10.0.2.2"  # the host's 127.0.0.1, which slirp4netns lets a container reach with allow_host_loopback
BLOCKS = install_blocks()
SHELL_OWN = {"README_EXPORTS", "PWD", "OLDPWD", "SHLVL", "_"}  # bash's, not the blocks'


# ---- running the README's blocks ------------------------------------------------------------------------------
@dataclass
class Shell:
    """The reader's shell: the environment the blocks run in, and the variables earlier blocks exported."""

    env: dict[str, str]
    exported: dict[str, str]
    log_dir: Path

    def run(self, name: str, timeout: float = 300) -> str:
        body = BLOCKS[name]
        script = self.log_dir / f"readme-{name}.sh"
        exports = self.log_dir / f"readme-{name}.exports"
        script.write_text(f"set -euo pipefail\n{body}\nexport -p > \"$README_EXPORTS\"\n")
        env = {**self.env, **self.exported}
        r = subprocess.run(["bash", str(script)], cwd=REPO_ROOT, env={**env, "README_EXPORTS": str(exports)},
                           capture_output=True, text=True, timeout=timeout)
        declared = exports.read_text() if exports.exists() else ""
        (self.log_dir / f"readme-{name}.log").write_text(r.stdout + r.stderr)
        assert r.returncode == 0, f"README block {name!r} failed ({r.returncode}):\n{body}\n{r.stdout}\n{r.stderr}"
        for var, value in re.findall(r'^declare -x (\w+)="(.*)"$', declared, flags=re.M):
            if var not in SHELL_OWN and env.get(var) != value:
                self.exported[var] = value
        return r.stdout


def shims(folder: Path) -> Path:
    """`podman push` recorded (no registry here), every other podman call passed on; `volcano-py` from this checkout."""
    folder.mkdir(parents=True, exist_ok=True)
    pushed = folder / "pushed.txt"
    # The real podman is looked up when called: on a fresh machine the README's `make image` installs it.
    real = f'PATH="{os.environ.get("PATH", "/usr/bin:/bin")}"; command -v podman'
    (folder / "podman").write_text(
        "#!/bin/sh\n"
        f'podman=$({real}) || {{ echo "podman is missing: make image-tools installs it" >&2; exit 127; }}\n'
        'if [ "$1" = push ]; then "$podman" image exists "$2" || { echo "podman push: no image $2" >&2; exit 1; }\n'
        f'  echo "$2" >> {pushed}; exit 0; fi\n'
        'exec "$podman" "$@"\n')
    (folder / "volcano-py").write_text(
        f'#!/bin/sh\nPYTHONPATH={REPO_ROOT} exec {sys.executable} -m scheduler.cli "$@"\n')
    for name in ("podman", "volcano-py"):
        (folder / name).chmod(0o755)
    return folder


@pytest.fixture(scope="session")
def shim_dir(tmp_path_factory) -> Path:
    return shims(tmp_path_factory.mktemp("readme-shims"))


@pytest.fixture(scope="session")
def built(shim_dir, tmp_path_factory) -> dict[str, str]:
    """The README's image block, once: what it exported (REGISTRY) and the image it pushed."""
    helm = REPO_ROOT / ".bin" / "helm"
    assert helm.exists(), f"no helm at {helm}: `make helm-bin` links it"
    env = {**os.environ, "PATH": f"{shim_dir}:{REPO_ROOT / '.bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}",
           "IMAGE_BASE": "debian"}
    env.pop("KUBECONFIG", None)
    shell = Shell(env, {}, tmp_path_factory.mktemp("readme-image"))
    shell.run("image", timeout=1200)
    pushed = (shim_dir / "pushed.txt").read_text().split()
    assert len(pushed) == 1, pushed
    return {**shell.exported, "_pushed": pushed[0]}


# ---- the kubelet stand-in ------------------------------------------------------------------------------------
def expand(arg: str, env: dict[str, str]) -> str:
    """Kubernetes' $(VAR) expansion of a container's args: a defined variable is replaced, $$ escapes."""
    return re.sub(r"\$\$|\$\((\w+)\)", lambda m: "$" if m[0] == "$$" else env.get(m[1], m[0]), arg)


def raw(call, *args, **kwargs) -> dict:
    return json.loads(call(*args, **kwargs, _preload_content=False).data)


@dataclass
class Replica:
    pod_name: str
    container: str
    port: int

    def logs(self) -> str:
        r = subprocess.run(["podman", "logs", self.container], capture_output=True, text=True)
        return r.stdout + r.stderr

    def stop(self) -> int:
        subprocess.run(["podman", "stop", "--time", "60", self.container], capture_output=True, check=True, timeout=90)
        out = subprocess.run(["podman", "inspect", "--format", "{{.State.ExitCode}}", self.container],
                             capture_output=True, text=True, check=True).stdout
        return int(out)


def volume_flags(core, spec: dict, container: dict, ns: str, where: Path) -> list[str]:
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    flags = []
    for mount in container.get("volumeMounts", []):
        volume = volumes[mount["name"]]
        if "configMap" in volume:
            data = raw(core.read_namespaced_config_map, volume["configMap"]["name"], ns).get("data") or {}
            folder = where / mount["name"]
            folder.mkdir(mode=0o755)
            for key, text in data.items():
                (folder / key).write_text(text)
                (folder / key).chmod(0o644)
            flags.append(f"--volume={folder}:{mount['mountPath']}:ro")
        elif "emptyDir" in volume:
            flags.append(f"--tmpfs={mount['mountPath']}:rw,mode=1777")
        else:
            raise AssertionError(f"volume {volume} is of a kind this kubelet stand-in does not mount")
    return flags


def security_flags(spec: dict, container: dict) -> list[str]:
    pod, own = spec.get("securityContext") or {}, container.get("securityContext") or {}
    user, group = own.get("runAsUser", pod.get("runAsUser")), own.get("runAsGroup", pod.get("runAsGroup"))
    flags = [f"--user={user}:{group if group is not None else user}"] if user is not None else []
    if own.get("readOnlyRootFilesystem"):
        flags += ["--read-only", "--read-only-tmpfs=false"]
    if "ALL" in (own.get("capabilities") or {}).get("drop", []):
        flags.append("--cap-drop=all")
    if own.get("allowPrivilegeEscalation") is False:
        flags.append("--security-opt=no-new-privileges")
    return flags


@contextmanager
def kubelet(cp: ControlPlane, core, apps, deployment: str, run_flags: list[str], where: Path) -> Iterator[Replica]:
    """One replica of a Deployment, as the apiserver holds it, run by podman until the block ends."""
    dep = raw(apps.read_namespaced_deployment, deployment, SYSTEM_NS)
    spec = dep["spec"]["template"]["spec"]
    [container] = spec["containers"]
    pod_name = f"{deployment}-{uuid.uuid4().hex[:5]}"
    fields = {"metadata.name": pod_name, "metadata.namespace": SYSTEM_NS}
    env: dict[str, str] = {}
    for e in container.get("env", []):
        ref = (e.get("valueFrom") or {}).get("fieldRef")
        assert "value" in e or ref, f"env {e} is of a kind this kubelet stand-in does not resolve"
        env[e["name"]] = e["value"] if "value" in e else fields[ref["fieldPath"]]
    where.mkdir(parents=True)
    token = core.create_namespaced_service_account_token(
        spec["serviceAccountName"], SYSTEM_NS, {"spec": {"expirationSeconds": 3600}}).status.token
    sa = where / "serviceaccount"
    sa.mkdir(mode=0o755)
    for name, text in (("token", token), ("ca.crt", Path(cp.serving_ca.crt).read_text()), ("namespace", SYSTEM_NS)):
        (sa / name).write_text(text)
        (sa / name).chmod(0o644)
    api_port = str(urlparse(cp.server).port)
    env |= {"KUBERNETES_SERVICE_HOST": APISERVER_NAME, "KUBERNETES_SERVICE_PORT": api_port}
    probe = container.get("readinessProbe") or container["livenessProbe"]
    ports = {p.get("name"): p["containerPort"] for p in container.get("ports", [])}
    port = ports.get(probe["httpGet"]["port"], probe["httpGet"]["port"])
    host_port = free_port()
    name = f"readme-{pod_name}"
    argv = ["podman", "run", "--detach", f"--name={name}", *run_flags,
            "--network=slirp4netns:allow_host_loopback=true", f"--add-host={APISERVER_NAME}:{HOST_LOOPBACK}",
            f"--publish=127.0.0.1:{host_port}:{port}", *security_flags(spec, container),
            *volume_flags(core, spec, container, SYSTEM_NS, where), f"--volume={sa}:{SA_DIR}:ro",
            *[f"--env={k}={v}" for k, v in env.items()],
            *([f"--entrypoint={json.dumps(container['command'])}"] if container.get("command") else []),
            container["image"], *[expand(a, env) for a in container.get("args", [])]]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"podman run of {deployment}'s image failed: {r.stderr}\n{' '.join(argv)}"
    replica = Replica(pod_name, name, host_port)
    try:
        url = f"http://127.0.0.1:{host_port}{probe['httpGet']['path']}"
        wait_for(lambda: http_get(url)[0] == 200, TIMEOUT,
                 what=f"{deployment}'s readiness probe {probe['httpGet']['path']}; its log:\n{replica.logs()[-3000:]}")
        yield replica
    finally:
        (where / "container.log").write_text(replica.logs())
        subprocess.run(["podman", "rm", "--force", "--time=5", name], capture_output=True)


# ---- the test --------------------------------------------------------------------------------------------------
def job_podgroup(custom, job: str) -> dict:
    """The PodGroup the Job controls (named `<job>-<uid>`, as Volcano names it); {} while there is none."""
    groups = custom.list_namespaced_custom_object("scheduling.volcano.sh", "v1beta1", "default", "podgroups")["items"]
    owned = [g for g in groups if any(o.get("kind") == "Job" and o.get("name") == job and o.get("controller")
                                      for o in g["metadata"].get("ownerReferences") or [])]
    assert len(owned) <= 1, [g["metadata"]["name"] for g in owned]
    return owned[0] if owned else {}


def job_pods(core, job: str) -> list[dict]:
    return raw(core.list_namespaced_pod, "default", label_selector=f"volcano.sh/job-name={job}")["items"]


@pytest.mark.parametrize("route", ["helm", "kubectl"])
def test_the_readme_install_runs_as_written_and_binds_the_first_gang(route, built, shim_dir, tmp_path):
    run_flags = subprocess.run([str(REPO_ROOT / "tools" / "image.sh"), "run-flags"], capture_output=True, text=True,
                               check=True).stdout.split()
    empty = tmp_path / "no-crds"
    empty.mkdir()
    with ExitStack() as stack:
        cp = stack.enter_context(ControlPlane(crds_dir=empty))
        api = cp.api_client()
        stack.callback(api.close)
        core, apps, custom = client.CoreV1Api(api), client.AppsV1Api(api), client.CustomObjectsApi(api)
        for i in range(2):
            create_gpu_node(core, f"node-{i}", gpus=0, cpu="8", memory="32Gi")
        wait_for(lambda: all(node_is_ready(core, f"node-{i}") for i in range(2)), TIMEOUT, what="2 kwok nodes Ready")

        env = {**os.environ, "PATH": f"{shim_dir}:{cp.bin_dir}:{REPO_ROOT / '.bin'}:{os.environ.get('PATH', '')}",
               "KUBECONFIG": str(cp.kubeconfig), "HELM_CACHE_HOME": str(tmp_path / "helm-cache"),
               "HELM_CONFIG_HOME": str(tmp_path / "helm-config"), "HELM_DATA_HOME": str(tmp_path / "helm-data")}
        exported = {k: v for k, v in built.items() if not k.startswith("_")}
        shell = Shell(env, exported, tmp_path)
        shell.run(route)

        images = {d: raw(apps.read_namespaced_deployment, d, SYSTEM_NS)["spec"]["template"]["spec"]["containers"][0][
            "image"] for d in DEPLOYMENTS}
        assert images == {d: built["_pushed"] for d in DEPLOYMENTS}, "the Deployments run the image the README pushed"
        scheduler = stack.enter_context(kubelet(cp, core, apps, "volcano-py-scheduler", run_flags,
                                                tmp_path / "scheduler"))
        controllers = stack.enter_context(kubelet(cp, core, apps, "volcano-py-controllers", run_flags,
                                                  tmp_path / "controllers"))

        shell.run("first-gang")
        pods = wait_for(lambda: (p := job_pods(core, "first-gang")) and len(p) == 3
                        and all(x["spec"].get("nodeName") for x in p) and p, TIMEOUT,
                        what=f"the first gang's 3 pods bound; the scheduler's log:\n{scheduler.logs()[-3000:]}")
        bound_by = {p["metadata"]["name"]: p["metadata"].get("annotations", {}).get(
            "scheduling.volcano-py.io/bound-by") for p in pods}
        assert bound_by == {f"first-gang-worker-{i}": scheduler.pod_name for i in range(3)}
        wait_for(lambda: (job_podgroup(custom, "first-gang").get("status") or {}).get("phase") == "Running", TIMEOUT,
                 what="PodGroup first-gang Running")

        shell.run("waiting-gang")
        wait_for(lambda: any(c.get("type") == "Unschedulable" and c.get("status") == "True"
                             for c in (job_podgroup(custom, "too-big").get("status") or {}).get("conditions") or []),
                 TIMEOUT, what="PodGroup too-big's Unschedulable condition")
        assert [p["metadata"]["name"] for p in job_pods(core, "too-big") if p["spec"].get("nodeName")] == []
        out = shell.run("explain", timeout=60)
        gate = next((line for line in out.splitlines() if line.startswith("gate:")), "")
        assert "cpu" in gate, out

        exits = {"scheduler": scheduler.stop(), "controllers": controllers.stop()}
        logs = {"scheduler": scheduler.logs(), "controllers": controllers.logs()}
    assert exits == {"scheduler": 0, "controllers": 0}, {k: v[-3000:] for k, v in logs.items()}
    for role, text in logs.items():
        assert "Traceback" not in text and ": 403 " not in text, f"{role}:\n{text[-3000:]}"
