"""A real, local Kubernetes control plane for tests: etcd + kube-apiserver + kube-controller-manager + kwok.

No kubelet, no scheduler (unless ``kube_scheduler=True``): pods stay Pending until something binds them (the
project's scheduler, or a test through the ``pods/binding`` subresource). kwok plays the kubelet of fake nodes
with the stages in ``KWOK_STAGES`` below: nodes become Ready, bound pods become Running, pods annotated with
``volcano-py.test/complete`` finish with the chosen phase and exit code, pods with a deletionTimestamp are
deleted.

Binaries come from ``<repo>/.bin`` (``make cluster-bins``), or from ``$VOLCANO_PY_BIN_DIR``.

Usage::

    with ControlPlane() as cp:
        api = cp.api_client()                    # kubernetes.client.ApiClient, admin (system:masters)
        core = kubernetes.client.CoreV1Api(api)
        create_gpu_node(core, "gpu-0")
        restricted = cp.kubeconfig_for_service_account("ns", "volcano-py")   # RBAC-restricted identity

Importable without pytest (tools/dev_cluster.py and tools/bench_bind_ceiling.py use it).
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections import defaultdict
from pathlib import Path

import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_BIN_DIR = REPO_ROOT / ".bin"
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kubectl", "kwok")

# Node labels used by create_gpu_node() / make dev-cluster (documented in docs/control-plane.md).
ZONE_LABEL = "topology.kubernetes.io/zone"
RACK_LABEL = "volcano.sh/rack"
NVLINK_LABEL = "nvidia.com/gpu.clique"  # NVLink domain, as NVIDIA GPU feature discovery names it
GPU_RESOURCE = "nvidia.com/gpu"

# Test hooks understood by the kwok stages below.
# A node with this label keeps a NotReady condition a test patched (kwok's node-initialize leaves it alone), so
# kube-controller-manager's node lifecycle sees a node that went NotReady (`set_node_ready`).
FROZEN_LABEL = "volcano-py.test/frozen"
COMPLETE_ANNOTATION = "volcano-py.test/complete"  # "Succeeded" or "Failed"
EXIT_CODE_ANNOTATION = "volcano-py.test/exit-code"  # e.g. "3"; default 0 for Succeeded, 1 for Failed

KCM_CONTROLLERS = (
    "garbage-collector-controller",
    "endpointslice-controller",
    "namespace-controller",
    "node-lifecycle-controller",
    "taint-eviction-controller",
    "pod-garbage-collector-controller",
    "serviceaccount-controller",
    "clusterrole-aggregation-controller",
    # Deployments make ReplicaSets and ReplicaSets make pods (PodGroups for plain pods, test_plain_pods.py).
    "deployment-controller",
    "replicaset-controller",
    # batch Jobs make pods (a JobSet's child Jobs, test_jobset_gang.py); StatefulSets too (a LeaderWorkerSet's).
    "job-controller",
    "statefulset-controller",
    # The PV binder completes the bindings the scheduler starts and binds Immediate claims (test_volumes.py); the
    # protection controllers lift the finalizers the apiserver's StorageObjectInUseProtection admission puts on
    # PersistentVolumes and claims, so a test's namespace and volumes can go.
    "persistentvolume-binder-controller",
    "persistentvolume-protection-controller",
    "persistentvolumeclaim-protection-controller",
    # ResourceQuotas' status (hard, used), which the resourcequota plugin reads as Volcano's does
    # (test_resourcequota_on_cluster.py); the apiserver's quota admission refuses pods while it is unwritten.
    "resourcequota-controller",
    # DRA: makes each pod's ResourceClaim from its ResourceClaimTemplate and names it in the pod's
    # status.resourceClaimStatuses; deletes it once the pod is gone; drops reservations of pods that are gone
    # (test_dra_gangs_on_cluster.py).
    "resourceclaim-controller",
)

# ---------------------------------------------------------------------------------------------------------
# kwok stages (kwok has no built-in stages; these are written for this project, modelled on kwok's
# kustomize/stage/{node,pod}/fast). Deliberately NOT included: kwok's "pod-complete" stage, which finishes
# every pod owned by a kind "Job" immediately -- Volcano's batch.volcano.sh Job is also kind Job.
# ---------------------------------------------------------------------------------------------------------
_NODE_CONDITIONS_TEMPLATE = """
      {{ $now := Now }}
      {{ $lastTransitionTime := or .metadata.creationTimestamp $now }}
      conditions:
      {{ range NodeConditions }}
      - lastHeartbeatTime: {{ $now | Quote }}
        lastTransitionTime: {{ $lastTransitionTime | Quote }}
        message: {{ .message | Quote }}
        reason: {{ .reason | Quote }}
        status: {{ .status | Quote }}
        type: {{ .type | Quote }}
      {{ end }}
"""

KWOK_STAGES = f"""
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: node-initialize
spec:
  resourceRef:
    apiGroup: v1
    kind: Node
  selector:
    matchExpressions:
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: 'NotIn'
      values: ['True']
    - key: '.metadata.labels["{FROZEN_LABEL}"]'
      operator: 'DoesNotExist'
  next:
    statusTemplate: |
{_NODE_CONDITIONS_TEMPLATE}
      addresses:
      {{{{ with NodeIP }}}}
      - address: {{{{ . | Quote }}}}
        type: InternalIP
      {{{{ end }}}}
      {{{{ with NodeName }}}}
      - address: {{{{ . | Quote }}}}
        type: Hostname
      {{{{ end }}}}
      allocatable:
      {{{{ with .status.allocatable }}}}
      {{{{ YAML . 1 }}}}
      {{{{ else }}}}
        cpu: 1k
        memory: 1Ti
        pods: 1M
      {{{{ end }}}}
      capacity:
      {{{{ with .status.capacity }}}}
      {{{{ YAML . 1 }}}}
      {{{{ else }}}}
        cpu: 1k
        memory: 1Ti
        pods: 1M
      {{{{ end }}}}
      nodeInfo:
        architecture: amd64
        containerRuntimeVersion: kwok
        kernelVersion: kwok
        kubeProxyVersion: kwok
        kubeletVersion: kwok
        operatingSystem: linux
      phase: Running
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: node-heartbeat
spec:
  resourceRef:
    apiGroup: v1
    kind: Node
  selector:
    matchExpressions:
    - key: '.status.phase'
      operator: 'In'
      values: ['Running']
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: 'In'
      values: ['True']
  delay:
    durationMilliseconds: 20000
    jitterDurationMilliseconds: 25000
  next:
    statusTemplate: |
{_NODE_CONDITIONS_TEMPLATE}
  immediateNextStage: true
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-ready
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.phase'
      operator: 'In'
      values: ['Pending']
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: 'NotIn'
      values: ['True']
  next:
    statusTemplate: |
      {{{{ $now := Now }}}}
      conditions:
      - lastTransitionTime: {{{{ $now | Quote }}}}
        status: "True"
        type: Initialized
      - lastTransitionTime: {{{{ $now | Quote }}}}
        status: "True"
        type: Ready
      - lastTransitionTime: {{{{ $now | Quote }}}}
        status: "True"
        type: ContainersReady
      containerStatuses:
      {{{{ range .spec.containers }}}}
      - image: {{{{ .image | Quote }}}}
        name: {{{{ .name | Quote }}}}
        ready: true
        restartCount: 0
        started: true
        state:
          running:
            startedAt: {{{{ $now | Quote }}}}
      {{{{ end }}}}
      initContainerStatuses:
      {{{{ range .spec.initContainers }}}}
      - image: {{{{ .image | Quote }}}}
        name: {{{{ .name | Quote }}}}
        ready: true
        restartCount: 0
        state:
          terminated:
            exitCode: 0
            finishedAt: {{{{ $now | Quote }}}}
            reason: Completed
            startedAt: {{{{ $now | Quote }}}}
      {{{{ end }}}}
      {{{{ with NodeIPWith .spec.nodeName }}}}
      hostIP: {{{{ . | Quote }}}}
      hostIPs:
      - ip: {{{{ . | Quote }}}}
      {{{{ end }}}}
      {{{{ with PodIPWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" )
               ( or .metadata.name "" ) ( or .metadata.namespace "" ) }}}}
      podIP: {{{{ . | Quote }}}}
      podIPs:
      - ip: {{{{ . | Quote }}}}
      {{{{ end }}}}
      phase: Running
      startTime: {{{{ $now | Quote }}}}
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-complete-on-request
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.phase'
      operator: 'In'
      values: ['Running']
    - key: '.metadata.annotations["{COMPLETE_ANNOTATION}"]'
      operator: 'In'
      values: ['Succeeded', 'Failed']
  next:
    statusTemplate: |
      {{{{ $now := Now }}}}
      {{{{ $phase := index .metadata.annotations "{COMPLETE_ANNOTATION}" }}}}
      {{{{ $code := index .metadata.annotations "{EXIT_CODE_ANNOTATION}" }}}}
      {{{{ if not $code }}}}
      {{{{ if eq $phase "Succeeded" }}}}{{{{ $code = "0" }}}}{{{{ else }}}}{{{{ $code = "1" }}}}{{{{ end }}}}
      {{{{ end }}}}
      conditions:
      - lastTransitionTime: {{{{ $now | Quote }}}}
        status: "False"
        type: Ready
        reason: PodCompleted
      - lastTransitionTime: {{{{ $now | Quote }}}}
        status: "False"
        type: ContainersReady
        reason: PodCompleted
      containerStatuses:
      {{{{ range .spec.containers }}}}
      - image: {{{{ .image | Quote }}}}
        name: {{{{ .name | Quote }}}}
        ready: false
        restartCount: 0
        started: false
        state:
          terminated:
            exitCode: {{{{ $code }}}}
            finishedAt: {{{{ $now | Quote }}}}
            reason: {{{{ if eq $phase "Succeeded" }}}}Completed{{{{ else }}}}Error{{{{ end }}}}
            startedAt: {{{{ $now | Quote }}}}
      {{{{ end }}}}
      phase: {{{{ $phase }}}}
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-delete
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'Exists'
  next:
    delete: true
"""


class ControlPlaneError(RuntimeError):
    pass


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def _openssl(*args: str, cwd: Path) -> None:
    r = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True)
    if r.returncode != 0:
        raise ControlPlaneError(f"openssl {' '.join(args)} failed:\n{r.stderr}")


class _CA:
    """A tiny CA built with the openssl CLI (ECDSA P-256, valid 7 days)."""

    def __init__(self, d: Path, name: str):
        self.dir, self.name = d, name
        self.crt, self.key = d / f"{name}.crt", d / f"{name}.key"
        _openssl(
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            self.key.name,
            "-out",
            self.crt.name,
            "-days",
            "7",
            "-subj",
            f"/CN={name}",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign,digitalSignature",
            cwd=d,
        )

    def issue(self, stem: str, cn: str, orgs=(), sans=(), client=True) -> tuple[Path, Path]:
        key, csr, crt, ext = (self.dir / f"{stem}{s}" for s in (".key", ".csr", ".crt", ".ext"))
        too_long = [v for v in (cn, *orgs) if len(v) > 64]
        if too_long:  # X.509 (RFC 5280) and openssl limit CN and O to 64 characters
            raise ControlPlaneError(f"certificate subject fields longer than 64 characters: {too_long}")
        subj = "".join(f"/O={o}" for o in orgs) + f"/CN={cn}"
        _openssl(
            "req",
            "-new",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            key.name,
            "-out",
            csr.name,
            "-subj",
            subj,
            cwd=self.dir,
        )
        lines = [
            "basicConstraints=critical,CA:FALSE",
            "keyUsage=critical,digitalSignature,keyEncipherment",
            f"extendedKeyUsage={'clientAuth' if client else 'serverAuth'}",
        ]
        if sans:
            lines.append("subjectAltName=" + ",".join(sans))
        ext.write_text("\n".join(lines) + "\n")
        _openssl(
            "x509",
            "-req",
            "-in",
            csr.name,
            "-CA",
            self.crt.name,
            "-CAkey",
            self.key.name,
            "-CAcreateserial",
            "-out",
            crt.name,
            "-days",
            "7",
            "-extfile",
            ext.name,
            cwd=self.dir,
        )
        return crt, key


def _die_with_parent() -> None:
    """preexec_fn: SIGKILL the child when the Python process dies, even by SIGKILL (Linux prctl)."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):  # no such libc, or no prctl in it: not Linux
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class _Proc:
    def __init__(self, name: str, argv: list[str], log_path: Path, env=None):
        self.name, self.argv, self.log_path = name, argv, log_path
        with open(log_path, "wb") as log:  # the child keeps its own descriptor of the file
            self.popen = subprocess.Popen(
                argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env=env,
                preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
            )

    def alive(self) -> bool:
        return self.popen.poll() is None

    def tail(self, n: int = 40) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-n:])

    def stop(self, timeout: float = 10.0) -> None:
        if self.alive():
            try:
                self.popen.send_signal(signal.SIGTERM)
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(5)
            except ProcessLookupError:
                pass


def _http_ok(url: str, ctx: ssl.SSLContext | None = None, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(url, context=ctx, timeout=timeout) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _sweep_stale_dirs(parent: Path) -> None:
    """Remove work dirs of control planes whose Python process was killed (their children died with it)."""
    for d in parent.glob("volcano-py-cp-*"):
        try:
            pid = int((d / "owner.pid").read_text())
            os.kill(pid, 0)
        except ProcessLookupError:
            shutil.rmtree(d, ignore_errors=True)
        except (OSError, ValueError):
            pass  # no/invalid pid file yet, or not ours: leave it


class ControlPlane:
    """etcd + kube-apiserver (+ kube-controller-manager, + kwok) on free loopback ports.

    ``start()`` returns when every component answers its health endpoint; ``stop()`` (also called by the
    context manager and at interpreter exit) terminates all of them and removes the working directory
    unless ``keep_dir`` is set.
    """

    def __init__(
        self,
        bin_dir: str | os.PathLike | None = None,
        *,
        controller_manager: bool = True,
        kwok: bool = True,
        crds_dir: str | os.PathLike | None = None,
        workdir=None,
        keep_dir: bool = False,
        start_timeout: float = 90.0,
        fast: bool = False,
        log=print,
        apiserver_args: tuple[str, ...] = (),
        kcm_controllers: tuple[str, ...] | None = None,
        kube_scheduler: bool = False,
        kwok_stages: str | None = None,
    ):
        self.bin_dir = Path(bin_dir or os.environ.get("VOLCANO_PY_BIN_DIR") or DEFAULT_BIN_DIR)
        self.with_kcm, self.with_kwok = controller_manager, kwok
        self.crds_dir = Path(crds_dir) if crds_dir else (REPO_ROOT / "crds")
        self.start_timeout, self.keep_dir, self.fast, self.log = start_timeout, keep_dir, fast, log
        self.apiserver_args = tuple(apiserver_args)  # extra kube-apiserver flags, e.g. ("--watch-cache=false",)
        # None: the small set in KCM_CONTROLLERS. ("*",) runs kube-controller-manager as a real cluster does (its
        # default controllers, with the root CA and the service-account signing key they need).
        self.kcm_controllers = tuple(kcm_controllers) if kcm_controllers is not None else None
        self.with_kube_scheduler = kube_scheduler  # kube-scheduler for pods of schedulerName default-scheduler
        self.kwok_stages = kwok_stages if kwok_stages is not None else KWOK_STAGES
        shm = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
        if not workdir:
            _sweep_stale_dirs(Path(shm or tempfile.gettempdir()))
        self.dir = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="volcano-py-cp-", dir=shm))
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "owner.pid").write_text(str(os.getpid()))
        self.pki = self.dir / "pki"
        self.logs = self.dir / "logs"
        self.procs: dict[str, _Proc] = {}
        self.server: str | None = None
        self.kubeconfig: Path = self.dir / "admin.kubeconfig"
        self._stopped = False

    # ---- lifecycle ---------------------------------------------------------------------------------------
    def __enter__(self) -> ControlPlane:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def binary(self, name: str) -> str:
        p = self.bin_dir / name
        if not os.access(p, os.X_OK):
            raise ControlPlaneError(f"{p} missing: run `make cluster-bins` first")
        return str(p)

    def start(self) -> ControlPlane:
        for b in BINARIES:
            if b == "kwok" and not self.with_kwok or b == "kube-controller-manager" and not self.with_kcm:
                continue
            self.binary(b)
        if self.with_kube_scheduler:
            self.binary("kube-scheduler")
        atexit.register(self.stop)
        try:
            self._make_pki()
            self.logs.mkdir(exist_ok=True)
            self._start_etcd()
            self._start_apiserver()
            if self.with_kcm:
                self._start_kcm()
            if self.with_kwok:
                self._start_kwok()
            if self.with_kube_scheduler:
                self._start_kube_scheduler()
            if self.with_kcm:
                self._wait(
                    "kube-controller-manager",
                    lambda: _http_ok(f"https://127.0.0.1:{self.kcm_port}/healthz", self._insecure_ctx()),
                )
            if self.with_kwok:
                self._wait("kwok", lambda: _http_ok(f"http://127.0.0.1:{self.kwok_port}/healthz"))
            if self.with_kube_scheduler:
                self._wait(
                    "kube-scheduler",
                    lambda: _http_ok(f"https://127.0.0.1:{self.kube_scheduler_port}/healthz", self._insecure_ctx()),
                )
            self._install_crds()
        except BaseException:
            self._dump_logs()
            self.stop()
            raise
        return self

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        for name in ("kwok", "kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd"):
            p = self.procs.get(name)
            if p:
                p.stop()
        if not self.keep_dir:
            shutil.rmtree(self.dir, ignore_errors=True)
        atexit.unregister(self.stop)

    def restart(self, name: str, *, kill: bool = True, down_for: float = 0.0) -> float:
        """Stop one component (SIGKILL, or SIGTERM if not ``kill``) and start it again with the same command line:
        same ports, same data dir, so clients reconnect to the same URL. Returns once it is healthy again; the
        result is the seconds it was unreachable. ``down_for`` keeps it down that long first (a real outage).
        Call from the thread that started the control plane: children die with the thread that forked them
        (PR_SET_PDEATHSIG).
        """
        if name not in ("etcd", "kube-apiserver"):
            raise ValueError(f"restart supports etcd and kube-apiserver, not {name}")
        old = self.procs[name]
        started = time.monotonic()
        if kill and old.alive():
            old.popen.kill()
            old.popen.wait(10)
        old.stop()
        if down_for > 0:
            time.sleep(down_for)  # the outage itself, not a synchronisation
        self.restarts = getattr(self, "restarts", 0) + 1
        log = self.logs / f"{name}.{self.restarts}.log"
        self.procs[name] = _Proc(name, old.argv, log)
        if name == "etcd":
            self._wait("etcd /health", lambda: _http_ok(f"{self.etcd_url}/health"))
        else:
            self._wait(
                "kube-apiserver /readyz",
                lambda: _http_ok(
                    f"{self.server}/readyz", ssl.create_default_context(cafile=str(self.serving_ca.crt))
                ),
            )
        return time.monotonic() - started

    def _dump_logs(self, n: int = 40) -> None:
        for name, p in self.procs.items():
            self.log(
                f"----- {name} log ({p.log_path}, last {n} lines, exit={p.popen.poll()}) -----\n{p.tail(n)}"
            )

    def _wait(self, what: str, ok, timeout: float | None = None) -> None:
        deadline = time.monotonic() + (timeout or self.start_timeout)
        delay = 0.05
        while time.monotonic() < deadline:
            for name, p in self.procs.items():
                if not p.alive():
                    raise ControlPlaneError(
                        f"{name} exited with {p.popen.returncode} while waiting for {what}"
                    )
            if ok():
                return
            time.sleep(delay)  # polling interval of a readiness probe, not a synchronisation sleep
            delay = min(delay * 1.5, 0.5)
        raise ControlPlaneError(f"timed out after {timeout or self.start_timeout}s waiting for {what}")

    def _insecure_ctx(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        return ctx

    # ---- PKI / kubeconfigs -------------------------------------------------------------------------------
    def _make_pki(self) -> None:
        self.pki.mkdir(exist_ok=True)
        self.serving_ca = _CA(self.pki, "serving-ca")
        self.client_ca = _CA(self.pki, "client-ca")
        self.serving_crt, self.serving_key = self.serving_ca.issue(
            "apiserver",
            "localhost",
            sans=(
                "DNS:localhost",
                "DNS:kubernetes",
                "DNS:kubernetes.default",
                "DNS:kubernetes.default.svc",
                "IP:127.0.0.1",
                "IP:10.0.0.1",
            ),
            client=False,
        )
        self.sa_key = self.pki / "sa.key"
        _openssl(
            "genpkey",
            "-algorithm",
            "EC",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-out",
            "sa.key",
            cwd=self.pki,
        )
        self.sa_pub = self.pki / "sa.pub"
        _openssl("pkey", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=self.pki)

    def kubeconfig_for(self, user: str, groups=(), path: str | os.PathLike | None = None) -> Path:
        """Kubeconfig for an identity authenticated by a client certificate (CN=user, O=groups)."""
        stem = "user-" + "".join(c if c.isalnum() else "_" for c in user)
        crt, key = self.client_ca.issue(stem, user, orgs=groups)
        path = Path(path) if path else self.dir / f"{stem}.kubeconfig"
        cfg = {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "volcano-py",
            "clusters": [
                {
                    "name": "volcano-py",
                    "cluster": {
                        "server": self.server,
                        "certificate-authority-data": _b64(self.serving_ca.crt),
                    },
                }
            ],
            "users": [
                {"name": user, "user": {"client-certificate-data": _b64(crt), "client-key-data": _b64(key)}}
            ],
            "contexts": [{"name": "volcano-py", "context": {"cluster": "volcano-py", "user": user}}],
        }
        path.write_text(yaml.safe_dump(cfg))
        path.chmod(0o600)
        return path

    def kubeconfig_for_service_account(self, namespace: str, name: str) -> Path:
        """Kubeconfig that RBAC treats as ServiceAccount <namespace>/<name> (no token needed).

        The identity is a client certificate, CN=system:serviceaccount:<namespace>:<name>, so
        len(namespace) + len(name) must stay <= 41 (X.509 limits the CN to 64 characters).
        """
        return self.kubeconfig_for(
            f"system:serviceaccount:{namespace}:{name}",
            groups=("system:serviceaccounts", f"system:serviceaccounts:{namespace}"),
        )

    def api_client(self, kubeconfig: str | os.PathLike | None = None, **config_overrides):
        """A kubernetes.client.ApiClient (admin unless another kubeconfig is given)."""
        from kubernetes import client, config

        cfg = client.Configuration()
        config.load_kube_config(config_file=str(kubeconfig or self.kubeconfig), client_configuration=cfg)
        for k, v in config_overrides.items():
            setattr(cfg, k, v)
        return client.ApiClient(cfg)

    def kubectl(self, *args: str, check: bool = True, kubeconfig=None, timeout: float = 120):
        r = subprocess.run(
            [self.binary("kubectl"), "--kubeconfig", str(kubeconfig or self.kubeconfig), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and r.returncode != 0:
            raise ControlPlaneError(
                f"kubectl {' '.join(args)} failed ({r.returncode}):\n{r.stderr}{r.stdout}"
            )
        return r

    # ---- components --------------------------------------------------------------------------------------
    def _start_etcd(self) -> None:
        c, p = free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{c}"
        peer = f"http://127.0.0.1:{p}"
        self.procs["etcd"] = _Proc(
            "etcd",
            [
                self.binary("etcd"),
                "--name=volcano-py",
                f"--data-dir={self.dir / 'etcd'}",
                f"--listen-client-urls={self.etcd_url}",
                f"--advertise-client-urls={self.etcd_url}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=volcano-py={peer}",
                "--unsafe-no-fsync=true",
                "--log-level=warn",
                "--quota-backend-bytes=8589934592",
            ],
            self.logs / "etcd.log",
        )
        self._wait("etcd /health", lambda: _http_ok(f"{self.etcd_url}/health"))

    def _start_apiserver(self) -> None:
        port = free_port()
        self.server = f"https://127.0.0.1:{port}"
        argv = [
            self.binary("kube-apiserver"),
            f"--etcd-servers={self.etcd_url}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={port}",
            f"--cert-dir={self.pki}",
            f"--tls-cert-file={self.serving_crt}",
            f"--tls-private-key-file={self.serving_key}",
            f"--client-ca-file={self.client_ca.crt}",
            "--authorization-mode=RBAC",
            "--anonymous-auth=true",  # only /healthz, /readyz, /livez, /version are granted to anonymous
            "--service-cluster-ip-range=10.0.0.0/24",
            "--allow-privileged=true",
            # The default admission chain of a real cluster, minus ServiceAccount (no SA tokens here).
            "--disable-admission-plugins=ServiceAccount",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={self.sa_pub}",
            f"--service-account-signing-key-file={self.sa_key}",
            "--endpoint-reconciler-type=none",  # the loopback advertise address is not a valid Endpoints IP
            "--profiling=false",
            "--v=1",
        ]
        if not self.with_kcm:
            # Nobody would remove the node.kubernetes.io/not-ready taint this plugin adds at node creation.
            argv[argv.index("--disable-admission-plugins=ServiceAccount")] = (
                "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition"
            )
        if self.fast:
            argv += [
                "--max-requests-inflight=0",
                "--max-mutating-requests-inflight=0",
                "--enable-priority-and-fairness=false",
            ]
        argv += self.apiserver_args
        self.procs["kube-apiserver"] = _Proc("kube-apiserver", argv, self.logs / "kube-apiserver.log")
        # Write the admin kubeconfig while the apiserver starts (needs only the URL and the CAs).
        self.kubeconfig_for("volcano-py-admin", groups=("system:masters",), path=self.kubeconfig)
        self._wait(
            "kube-apiserver /readyz",
            lambda: _http_ok(
                f"{self.server}/readyz", ssl.create_default_context(cafile=str(self.serving_ca.crt))
            ),
        )

    def _start_kcm(self) -> None:
        self.kcm_port = free_port()
        kc = str(self.kubeconfig)
        self.procs["kube-controller-manager"] = _Proc(
            "kube-controller-manager",
            [
                self.binary("kube-controller-manager"),
                f"--kubeconfig={kc}",
                f"--authentication-kubeconfig={kc}",
                f"--authorization-kubeconfig={kc}",
                "--authentication-skip-lookup=true",  # no requestheader CA here: avoids log noise
                "--bind-address=127.0.0.1",
                f"--secure-port={self.kcm_port}",
                f"--cert-dir={self.dir / 'kcm-certs'}",
                "--controllers=" + ",".join(self.kcm_controllers or KCM_CONTROLLERS),
                "--leader-elect=false",
                "--use-service-account-credentials=false",
                "--kube-api-qps=200",
                "--kube-api-burst=400",
                "--concurrent-gc-syncs=20",
                "--v=1",
                *self._kcm_default_controller_args(),
            ],
            self.logs / "kube-controller-manager.log",
        )

    def _kcm_default_controller_args(self) -> list[str]:
        """What the default controllers need beyond the small set: root-ca-cert-publisher the CA it publishes
        (kube-root-ca.crt), the service-account token controller the key it signs with."""
        if self.kcm_controllers is None:
            return []
        return [f"--root-ca-file={self.serving_ca.crt}", f"--service-account-private-key-file={self.sa_key}"]

    def _start_kube_scheduler(self) -> None:
        self.kube_scheduler_port = free_port()
        kc = str(self.kubeconfig)
        self.procs["kube-scheduler"] = _Proc(
            "kube-scheduler",
            [
                self.binary("kube-scheduler"),
                f"--kubeconfig={kc}",
                f"--authentication-kubeconfig={kc}",
                f"--authorization-kubeconfig={kc}",
                "--authentication-skip-lookup=true",
                "--bind-address=127.0.0.1",
                f"--secure-port={self.kube_scheduler_port}",
                f"--cert-dir={self.dir / 'kube-scheduler-certs'}",
                "--leader-elect=false",
                "--kube-api-qps=200",
                "--kube-api-burst=400",
                "--v=1",
            ],
            self.logs / "kube-scheduler.log",
        )

    def _start_kwok(self) -> None:
        self.kwok_port = free_port()
        stages = self.dir / "kwok-stages.yaml"
        stages.write_text(self.kwok_stages)
        env = dict(os.environ, HOME=str(self.dir))  # do not pick up a user's ~/.kwok/kwok.yaml
        self.procs["kwok"] = _Proc(
            "kwok",
            [
                self.binary("kwok"),
                f"--kubeconfig={self.kubeconfig}",
                f"--config={stages}",
                "--manage-all-nodes=true",
                "--cidr=10.128.0.0/12",
                "--node-ip=10.0.0.1",
                "--node-lease-duration-seconds=40",
                f"--server-address=127.0.0.1:{self.kwok_port}",
            ],
            self.logs / "kwok.log",
            env=env,
        )

    def _install_crds(self) -> None:
        if not self.crds_dir.is_dir() or not any(self.crds_dir.rglob("*.y*ml")):
            return
        self.log(f"installing CRDs from {self.crds_dir}")
        self.kubectl("apply", "--server-side", "--force-conflicts", "-R", "-f", str(self.crds_dir))
        self.kubectl(
            "wait", "--for=condition=Established", "crd", "--all", f"--timeout={int(self.start_timeout)}s"
        )


# ---------------------------------------------------------------------------------------------------------
# Helpers for tests
# ---------------------------------------------------------------------------------------------------------
def _core(api):
    from kubernetes import client

    return client.CoreV1Api(api) if isinstance(api, client.ApiClient) else api


def delete_node_and_pods(api, name: str) -> None:
    """Delete the node, its pods first (grace 0, as kwok would end them). A pod whose node is deleted under it stays
    bound to no node until kube-controller-manager's pod GC takes it, 40 s later, and counts as its queue's until
    then (as in Volcano, whose cache keeps a placeholder node for it): the next test waited behind it."""
    from kubernetes import client

    core = _core(api)
    pods = core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={name}").items
    for pod in pods:
        try:
            core.delete_namespaced_pod(pod.metadata.name, pod.metadata.namespace, grace_period_seconds=0)
        except client.ApiException as exc:
            if exc.status != 404:
                raise
    core.delete_node(name)


def delete_namespace(api, name: str) -> None:
    """Delete the namespace; one being deleted already, or gone, is left as it is."""
    from kubernetes import client

    try:
        _core(api).delete_namespace(name)
    except client.ApiException as exc:
        if exc.status not in (404, 409):
            raise


def create_gpu_node(
    api,
    name: str,
    gpus: int = 8,
    cpu: str = "64",
    memory: str = "512Gi",
    pods: str = "110",
    labels: dict | None = None,
    zone: str = "zone-a",
    rack: str = "rack-0",
    nvlink_domain: str | None = None,
    taints: list | None = None,
    ephemeral_storage: str | None = None,
):
    """Create a fake (kwok-managed) node with GPUs; capacity == allocatable. Returns the created V1Node.

    ``api`` is a CoreV1Api or an ApiClient. Labels set by default: kubernetes.io/hostname, type=kwok,
    topology.kubernetes.io/zone, volcano.sh/rack and nvidia.com/gpu.clique (NVLink domain, default = rack);
    ``labels`` overrides/extends them.
    """
    resources = {"cpu": str(cpu), "memory": str(memory), "pods": str(pods)}
    if gpus:
        resources[GPU_RESOURCE] = str(gpus)
    if ephemeral_storage:
        resources["ephemeral-storage"] = ephemeral_storage
    all_labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "type": "kwok",
        ZONE_LABEL: zone,
        RACK_LABEL: rack,
        NVLINK_LABEL: nvlink_domain or rack,
    }
    all_labels.update(labels or {})
    body = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": all_labels, "annotations": {"kwok.x-k8s.io/node": "fake"}},
        "spec": {"taints": taints or []},
        "status": {"capacity": resources, "allocatable": dict(resources)},
    }
    return _core(api).create_node(body)


def wait_for(predicate, timeout: float = 30.0, interval: float = 0.1, what: str = "condition"):
    """Poll ``predicate`` until it returns a truthy value (returned); AssertionError at the deadline."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        last = predicate()
        if last:
            return last
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what} (last value: {last!r})")
        time.sleep(interval)


def node_is_ready(api, name: str) -> bool:
    node = _core(api).read_node(name)
    return any(c.type == "Ready" and c.status == "True" for c in (node.status.conditions or []))


def set_node_ready(api, name: str, ready: bool, reason: str = "KubeletNotReady") -> None:
    """Patch the node's Ready condition, as a kubelet reports it. Label the node ``FROZEN_LABEL`` first, or
    kwok sets it back to Ready at once."""
    from datetime import UTC, datetime

    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    condition = {
        "type": "Ready",
        "status": "True" if ready else "False",
        "reason": "KubeletReady" if ready else reason,
        "message": "set by a test",
        "lastHeartbeatTime": now,
        "lastTransitionTime": now,
    }
    _core(api).patch_node_status(name, {"status": {"conditions": [condition]}})


def bind_pod(api, namespace: str, pod: str, node: str) -> None:
    """Bind through the pods/binding subresource, as a scheduler does."""
    from kubernetes import client

    body = client.V1Binding(
        metadata=client.V1ObjectMeta(name=pod, namespace=namespace),
        target=client.V1ObjectReference(api_version="v1", kind="Node", name=node),
    )
    # _preload_content=False: the generated client cannot deserialize the Status object the server returns.
    _core(api).create_namespaced_pod_binding(pod, namespace, body, _preload_content=False)


def _parse_quantity(q) -> float:
    from kubernetes.utils.quantity import parse_quantity

    return float(parse_quantity(str(q)))


def pod_requests(pod) -> dict[str, float]:
    """Effective requests of a pod (V1Pod or dict): max(sum(containers), max(init containers)) + overhead."""
    if not isinstance(pod, dict):
        from kubernetes import client

        pod = client.ApiClient().sanitize_for_serialization(pod)
    spec = pod.get("spec", {})

    def reqs(c):
        res = c.get("resources") or {}
        return {**(res.get("limits") or {}), **(res.get("requests") or {})}  # requests default to limits

    total: dict[str, float] = defaultdict(float)
    for c in spec.get("containers") or []:
        for k, v in reqs(c).items():
            total[k] += _parse_quantity(v)
    for c in spec.get("initContainers") or []:
        for k, v in reqs(c).items():
            total[k] = max(total[k], _parse_quantity(v))
    for k, v in (spec.get("overhead") or {}).items():
        total[k] += _parse_quantity(v)
    total["pods"] = 1
    return dict(total)


def node_usage(api) -> dict[str, tuple[dict[str, float], dict[str, float]]]:
    """{node: (allocatable, summed requests of non-terminated pods bound to it)}."""
    core = _core(api)
    alloc = {
        n.metadata.name: {k: _parse_quantity(v) for k, v in (n.status.allocatable or {}).items()}
        for n in core.list_node().items
    }
    used: dict[str, dict[str, float]] = {n: defaultdict(float) for n in alloc}
    resp = core.list_pod_for_all_namespaces(_preload_content=False)
    for pod in json.loads(resp.data)["items"]:
        node = pod.get("spec", {}).get("nodeName")
        if not node or pod.get("status", {}).get("phase") in ("Succeeded", "Failed"):
            continue
        u = used.setdefault(node, defaultdict(float))
        for k, v in pod_requests(pod).items():
            u[k] += v
    return {n: (alloc.get(n, {}), dict(u)) for n, u in used.items()}


def assert_no_overcommit(api) -> dict:
    """Fail if the requests of pods bound to any node exceed its allocatable (kwok does not enforce it).

    Pods bound to a node that no longer exists are ignored: they are orphans the pod GC controller removes,
    typical when a test deleted its node while its namespace is still being emptied.
    Returns the usage of the existing nodes, as node_usage(api).
    """
    nodes = {n.metadata.name for n in _core(api).list_node().items}
    usage = {n: u for n, u in node_usage(api).items() if n in nodes}
    problems = []
    for node, (alloc, used) in sorted(usage.items()):
        for res, amount in sorted(used.items()):
            if amount <= 0:
                continue
            cap = alloc.get(res, 0.0)
            if amount > cap + 1e-9:
                problems.append(f"node {node}: {res} requested {amount:g} > allocatable {cap:g}")
    if problems:
        raise AssertionError("over-committed nodes:\n  " + "\n  ".join(problems))
    return usage
