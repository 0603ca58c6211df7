"""Real training operators as local processes against the e2e control plane (issue 36).

The operators are built from their own Go modules at pinned versions by tools/build-operators.sh into a cache
outside the checkout (``~/.cache/volcano-py/operators/<name>-<version>/``: ``bin/<name>``, ``crds/*.yaml``).
Here they are started as processes with the harness's admin kubeconfig, their CRDs installed first, and
stopped (SIGTERM, then SIGKILL) when the block ends.

Kubeflow training-operator v1.8.1 (PyTorchJob, MPIJob kubeflow.org/v1):
- ``--gang-scheduler-name=volcano`` turns on its Volcano integration: for each job it writes a
  ``scheduling.volcano.sh/v1beta1`` PodGroup named after the job (minMember = all replicas unless
  ``runPolicy.schedulingPolicy.minAvailable``; queue from ``runPolicy.schedulingPolicy.queue``; minResources the
  sum of the replicas' requests) and creates the pods only once a scheduler has moved that PodGroup out of
  Pending (to Inqueue). Each pod carries ``scheduling.k8s.io/group-name: <job>`` and
  ``volcano.sh/task-spec: <replica type>``.
- It sets ``schedulerName: volcano`` only on templates that name none; a template that names another
  scheduler (ours: ``volcano-py``) is kept, with a Warning event ``SetPodTemplateSchedulerName``. So volcano-py
  does not need to run under the name ``volcano``.
- Webhooks: v1.8.1 has no flag to turn its validating webhook server off. It listens on the port we give it
  (``--webhook-server-port``), but nothing registers it with the apiserver (no
  ValidatingWebhookConfiguration), so the apiserver never calls it. Its certificate rotator still needs the
  Secret ``training-operator-webhook-cert`` in the operator's namespace (``MY_POD_NAMESPACE``) and waits for
  the certificate files in ``/tmp/k8s-webhook-server/serving-certs`` (a fixed path in the operator; in a pod a
  volume mounts them): this harness creates the empty Secret, waits for the operator to fill it, and writes
  the files itself, as the kubelet would.

JobSet v0.8.0, LeaderWorkerSet v0.6.1 and KubeRay ray-operator v1.4.0: see their sections below.
"""

from __future__ import annotations

import base64
import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml
from controlplane import create_gpu_node, delete_namespace, delete_node_and_pods, free_port, node_is_ready, wait_for
from inprocess import running_controllers, running_scheduler
from kubernetes import client
from test_controllers import podgroup

TIMEOUT = 120
WAIT = 90  # the operators' tests' waits on the cluster (TIMEOUT is for starting an operator)
REPO_ROOT = Path(__file__).resolve().parents[2]  # this checkout's (controlplane's may be another worktree's)
BUILD_SCRIPT = REPO_ROOT / "tools" / "build-operators.sh"
TRAINING_OPERATOR = "training-operator"
TRAINING_OPERATOR_NAMESPACE = "kubeflow"  # the operator's default (pkg/cert: defaultOperatorNamespace)
WEBHOOK_SECRET = "training-operator-webhook-cert"
CERT_DIR = Path("/tmp/k8s-webhook-server/serving-certs")  # fixed in training-operator's pkg/cert
KUBEFLOW = "kubeflow.org"
INTEGRATIONS_DOC = REPO_ROOT / "docs" / "integrations.md"
_MANIFEST = re.compile(r"^<!-- integrations-manifest: (?P<name>[a-z0-9-]+) -->[ \t]*\n(?:[ \t]*\n)*"
                       r"```yaml\n(?P<body>.*?)^```[ \t]*$", flags=re.MULTILINE | re.DOTALL)


def doc_manifest(name: str) -> dict:
    """The manifest docs/integrations.md shows under `<!-- integrations-manifest: NAME -->`, parsed: the tests
    apply it (changing only what pins it to their nodes, queue and size), so the page shows what works."""
    found = {m["name"]: m["body"] for m in _MANIFEST.finditer(INTEGRATIONS_DOC.read_text())}
    assert name in found, f"{INTEGRATIONS_DOC} has no manifest {name!r} (has {sorted(found)})"
    body = yaml.safe_load(found[name])
    assert isinstance(body, dict), f"manifest {name!r} is not one object"
    return body


class OperatorMissingError(RuntimeError):
    """The operator's binary is not in the cache: tools/build-operators.sh has not run."""


def operator_dir(name: str) -> Path:
    """The cache directory of the pinned version of `name` (the build script owns the pin and the layout)."""
    out = subprocess.run([str(BUILD_SCRIPT), "--print-dir", name], capture_output=True, text=True, check=True,
                         timeout=60)
    return Path(out.stdout.strip())


def operator_binary(name: str) -> Path:
    path = operator_dir(name) / "bin" / name
    if not os.access(path, os.X_OK):
        raise OperatorMissingError(f"{path} is missing: run `tools/build-operators.sh {name}`")
    return path


def require_operator(name: str) -> Path:
    """The operator's binary; without one, the test fails under VOLCANO_PY_E2E_REQUIRE=1 and is skipped else."""
    try:
        return operator_binary(name)
    except OperatorMissingError as exc:
        if os.environ.get("VOLCANO_PY_E2E_REQUIRE") == "1":
            pytest.fail(str(exc))
        pytest.skip(str(exc))


# Volcano's documented default tiers, written out so the gang plugin's part is plain to see: the scheduler conf of
# every module that runs an operator's jobs.
GANG_CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
"""


@contextmanager
def gpu_nodes(core_v1, label: str, tag: str, namespace: str | None = None,
              **node: str) -> Iterator[Callable[[int, int], list[str]]]:
    """`make(count, gpus)`: that many Ready nodes of `gpus` GPUs each, labelled `label=tag` (a module pins its
    pods to them); deleted when the block ends. `node`: more of create_gpu_node's arguments.

    `namespace`: the test's; it is deleted, and its pods gone, before the nodes are. A pod whose node is deleted
    under it stays bound to no node until kube-controller-manager's pod GC takes it, 40 s later, and until then
    it counts as its queue's, as in Volcano (its cache keeps a bound pod's node as a placeholder): the next
    test's gang waited behind the last one's for that long."""
    made: list[str] = []

    def make(count: int, gpus: int) -> list[str]:
        names = [f"{tag}-{len(made) + i}-{uuid.uuid4().hex[:4]}" for i in range(count)]
        for name in names:
            create_gpu_node(core_v1, name, gpus=gpus, labels={label: tag}, **node)
            made.append(name)
        for name in names:
            wait_for(lambda n=name: node_is_ready(core_v1, n), TIMEOUT, what=f"node {name} Ready")
        return names

    try:
        yield make
    finally:
        if namespace is not None:
            delete_namespace(core_v1, namespace)  # no pod can be made in it from now on
            core_v1.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
            wait_for(lambda: not core_v1.list_namespaced_pod(namespace).items, TIMEOUT,
                     what=f"the pods of namespace {namespace} gone before their nodes")
        for name in made:
            delete_node_and_pods(core_v1, name)


def install_crds(api_client, name: str, files: tuple[str, ...]) -> list[str]:
    """Create (or leave as they are) the operator's CRDs from its cache; wait until each is Established."""
    ext = client.ApiextensionsV1Api(api_client)
    crd_dir = operator_dir(name) / "crds"
    names = []
    for file in files:
        body = yaml.safe_load((crd_dir / file).read_text())
        names.append(body["metadata"]["name"])
        try:
            ext.create_custom_resource_definition(body)
        except client.ApiException as exc:
            if exc.status != 409:
                raise
    for crd in names:
        wait_for(lambda c=crd: _established(ext, c), TIMEOUT, what=f"CRD {crd} Established")
    return names


def _established(ext, name: str) -> bool:
    status = ext.read_custom_resource_definition(name).status
    return any(c.type == "Established" and c.status == "True" for c in (status.conditions or ()))


class OperatorProcess:
    def __init__(self, proc: subprocess.Popen, log: Path) -> None:
        self.proc, self.log_path = proc, log

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> int:
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)
        return int(self.proc.returncode)


def _ensure_namespace_and_secret(core_v1, namespace: str) -> None:
    for create in (
        lambda: core_v1.create_namespace({"metadata": {"name": namespace}}),
        lambda: core_v1.create_namespaced_secret(namespace, {"metadata": {"name": WEBHOOK_SECRET}}),
    ):
        try:
            create()
        except client.ApiException as exc:
            if exc.status != 409:
                raise


def _mount_certs(core_v1, namespace: str, operator: OperatorProcess) -> None:
    """What the kubelet does for the operator's pod: put the Secret's certificate and key into CERT_DIR."""

    def filled() -> dict | None:
        assert operator.alive(), f"training-operator exited:\n{operator.log()[-3000:]}"
        data = core_v1.read_namespaced_secret(WEBHOOK_SECRET, namespace).data or {}
        return data if "tls.crt" in data and "tls.key" in data else None

    data = wait_for(filled, TIMEOUT, interval=0.5, what="the operator filled its webhook Secret")
    CERT_DIR.mkdir(parents=True, exist_ok=True)
    for key in ("tls.crt", "tls.key", "ca.crt"):
        if key in data:
            (CERT_DIR / key).write_bytes(base64.b64decode(data[key]))


def _ready(url: str, operator: OperatorProcess) -> bool:
    assert operator.alive(), f"{operator.log_path.stem} exited:\n{operator.log()[-3000:]}"
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError):
        return False


@contextmanager
def running_training_operator(control_plane, core_v1, log_dir: Path, *, schemes: tuple[str, ...] = ("pytorchjob",),
                              gang_scheduler: str | None = "volcano") -> Iterator[OperatorProcess]:
    """training-operator v1.8.1 for the block, with its Volcano gang integration (`gang_scheduler`; None: without
    any, so it makes no PodGroup); ready once its readiness endpoint answers (certificates in place, webhook
    server up) and the controllers say they are set up."""
    binary = operator_binary(TRAINING_OPERATOR)
    _ensure_namespace_and_secret(core_v1, TRAINING_OPERATOR_NAMESPACE)
    probe = free_port()
    gang = [f"--gang-scheduler-name={gang_scheduler}"] if gang_scheduler else []
    args = [str(binary), *gang, "--metrics-bind-address=0",
            f"--health-probe-bind-address=127.0.0.1:{probe}", f"--webhook-server-port={free_port()}",
            "--zap-log-level=info", *(f"--enable-scheme={s}" for s in schemes)]
    env = {**os.environ, "KUBECONFIG": str(control_plane.kubeconfig),
           "MY_POD_NAMESPACE": TRAINING_OPERATOR_NAMESPACE}
    log = log_dir / "training-operator.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=log_dir)
    operator = OperatorProcess(proc, log)
    try:
        _mount_certs(core_v1, TRAINING_OPERATOR_NAMESPACE, operator)
        wait_for(lambda: _ready(f"http://127.0.0.1:{probe}/readyz", operator), TIMEOUT, interval=0.5,
                 what="training-operator ready")
        wait_for(lambda: operator.log().count("Starting workers") >= len(schemes), TIMEOUT, interval=0.2,
                 what="training-operator's controllers started")
        yield operator
    finally:
        operator.stop()


# ---- JobSet v0.8.0 --------------------------------------------------------------------------------------------
JOBSET = "jobset"
JOBSET_GROUP = "jobset.x-k8s.io"


def _self_signed(cert_dir: Path) -> None:
    """A serving certificate for 127.0.0.1 (controller-runtime's webhook server will not start without one; the
    apiserver never calls it: no webhook configuration names it)."""
    cert_dir.mkdir(parents=True, exist_ok=True)
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-keyout", str(cert_dir / "tls.key"), "-out", str(cert_dir / "tls.crt"),
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True, timeout=60)


@contextmanager
def running_jobset_operator(control_plane, log_dir: Path) -> Iterator[OperatorProcess]:
    """JobSet v0.8.0's controller for the block, from a configuration file: its internal certificate management
    off (it would write webhook configurations for a Service that is not there), its webhook server on
    127.0.0.1 with a self-signed certificate and never registered, so the apiserver does not call it. The
    JobSet webhook's defaults are therefore written out in the manifests (docs/integrations.md)."""
    binary = operator_binary(JOBSET)
    cert_dir = log_dir / "certs"
    _self_signed(cert_dir)
    probe = free_port()
    config = {"apiVersion": "config.jobset.x-k8s.io/v1alpha1", "kind": "Configuration",
              "internalCertManagement": {"enable": False},
              "webhook": {"port": free_port(), "host": "127.0.0.1", "certDir": str(cert_dir)},
              "metrics": {"bindAddress": "0"},
              "health": {"healthProbeBindAddress": f"127.0.0.1:{probe}"},
              "leaderElection": {"leaderElect": False}}
    config_file = log_dir / "jobset-config.yaml"
    config_file.write_text(yaml.safe_dump(config))
    env = {**os.environ, "KUBECONFIG": str(control_plane.kubeconfig)}
    log = log_dir / "jobset.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([str(binary), f"--config={config_file}", "--zap-log-level=info"], stdout=out,
                                stderr=subprocess.STDOUT, env=env, cwd=log_dir)
    operator = OperatorProcess(proc, log)
    try:
        wait_for(lambda: _ready(f"http://127.0.0.1:{probe}/readyz", operator), TIMEOUT, interval=0.5,
                 what="jobset ready")
        wait_for(lambda: any("Starting workers" in line and '"jobset"' in line
                             for line in operator.log().splitlines()), TIMEOUT, interval=0.2,
                 what="the JobSet controller started")
        yield operator
    finally:
        operator.stop()


# ---- LeaderWorkerSet v0.6.1 -----------------------------------------------------------------------------------
LWS = "lws"
LWS_GROUP = "leaderworkerset.x-k8s.io"
# LWS's mutating webhooks (its config/webhook manifests and patches): the LWS defaults, and the pod one that
# writes a pod's group index and worker index into its labels (LWS's controllers and volcano-py's owner gangs
# read them). Registered by `url:` on 127.0.0.1.
_LWS_WEBHOOKS = (
    ("mleaderworkerset.kb.io", "/mutate-leaderworkerset-x-k8s-io-v1-leaderworkerset",
     {"apiGroups": [LWS_GROUP], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
      "resources": ["leaderworkersets"]}, None),
    ("mpod.kb.io", "/mutate--v1-pod",
     {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["pods"]},
     {"matchExpressions": [{"key": "leaderworkerset.sigs.k8s.io/name", "operator": "Exists"}]}),
)


@contextmanager
def running_lws_operator(control_plane, api_client, log_dir: Path) -> Iterator[OperatorProcess]:
    """LeaderWorkerSet v0.6.1's controller for the block, from a configuration file (internal certificate
    management off), its webhook server on 127.0.0.1 with a self-signed certificate, and its two mutating
    webhooks registered by URL (the pod one is what gives each pod its group index)."""
    binary = operator_binary(LWS)
    cert_dir = log_dir / "certs"
    _self_signed(cert_dir)
    probe, port = free_port(), free_port()
    config = {"apiVersion": "config.lws.x-k8s.io/v1alpha1", "kind": "Configuration",
              "internalCertManagement": {"enable": False},
              "webhook": {"port": port, "host": "127.0.0.1", "certDir": str(cert_dir)},
              "metrics": {"bindAddress": "0"},
              "health": {"healthProbeBindAddress": f"127.0.0.1:{probe}"},
              "leaderElection": {"leaderElect": False}}
    config_file = log_dir / "lws-config.yaml"
    config_file.write_text(yaml.safe_dump(config))
    env = {**os.environ, "KUBECONFIG": str(control_plane.kubeconfig)}
    log = log_dir / "lws.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([str(binary), f"--config={config_file}", "--zap-log-level=info"], stdout=out,
                                stderr=subprocess.STDOUT, env=env, cwd=log_dir)
    operator = OperatorProcess(proc, log)
    admission = client.AdmissionregistrationV1Api(api_client)
    name = f"volcano-py-e2e-lws-{free_port()}"
    ca = base64.b64encode((cert_dir / "tls.crt").read_bytes()).decode()
    try:
        wait_for(lambda: _ready(f"http://127.0.0.1:{probe}/readyz", operator), TIMEOUT, interval=0.5,
                 what="lws ready")
        wait_for(lambda: operator.log().count("Starting workers") >= 2, TIMEOUT, interval=0.2,
                 what="the LeaderWorkerSet and pod controllers started")
        admission.create_mutating_webhook_configuration({
            "metadata": {"name": name},
            "webhooks": [{"name": hook, "admissionReviewVersions": ["v1"], "sideEffects": "None",
                          "failurePolicy": "Fail", "rules": [rule],
                          "clientConfig": {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca},
                          **({"objectSelector": selector} if selector else {})}
                         for hook, path, rule, selector in _LWS_WEBHOOKS]})
        # The apiserver calls a new webhook once its informer has it: wait until a dry-run pod reaches it.
        core_v1 = client.CoreV1Api(api_client)
        probe_pod = {"metadata": {"name": "lws-webhook-probe-0", "labels": {"leaderworkerset.sigs.k8s.io/name": "x"},
                                  "annotations": {"leaderworkerset.sigs.k8s.io/size": "1"}},
                     "spec": {"containers": [{"name": "c", "image": "x"}]}}
        def called() -> bool:  # the webhook answers (it refuses a pod no StatefulSet made: that is an answer)
            try:
                core_v1.create_namespaced_pod("default", probe_pod, dry_run="All")
            except client.ApiException as exc:
                return "mpod.kb.io" in str(exc.body)
            return False

        wait_for(called, TIMEOUT, interval=0.5, what="the apiserver calls the LWS pod webhook")
        yield operator
    finally:
        try:
            admission.delete_mutating_webhook_configuration(name)
        except client.ApiException as exc:
            if exc.status != 404:
                raise
        operator.stop()


# ---- KubeRay ray-operator v1.4.0 ------------------------------------------------------------------------------
KUBERAY = "kuberay"
RAY_GROUP = "ray.io"
# Every CRD its manager watches: controller-runtime will not start a controller whose kind the apiserver lacks.
KUBERAY_CRDS = ("ray.io_rayclusters.yaml", "ray.io_rayjobs.yaml", "ray.io_rayservices.yaml")


@contextmanager
def running_kuberay_operator(control_plane, log_dir: Path) -> Iterator[OperatorProcess]:
    """KubeRay's ray-operator v1.4.0 for the block, with its Volcano integration on (`--batch-scheduler=volcano`:
    one PodGroup `ray-<cluster>-pg` per RayCluster, every pod of it annotated with that group and given
    `schedulerName: volcano`). Its webhook server starts only with ENABLE_WEBHOOKS=true, which is not set here;
    no leader election; ready once its readiness endpoint answers and its three controllers (RayCluster,
    RayJob, RayService) have started their workers."""
    binary = operator_binary(KUBERAY)
    probe = free_port()
    args = [str(binary), "--batch-scheduler=volcano", "--metrics-addr=0",
            f"--health-probe-bind-address=127.0.0.1:{probe}", "--enable-leader-election=false",
            "--log-stdout-encoder=console"]
    env = {k: v for k, v in os.environ.items() if k != "ENABLE_WEBHOOKS"}
    env["KUBECONFIG"] = str(control_plane.kubeconfig)
    log = log_dir / "kuberay.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=log_dir)
    operator = OperatorProcess(proc, log)
    try:
        wait_for(lambda: _ready(f"http://127.0.0.1:{probe}/readyz", operator), TIMEOUT, interval=0.5,
                 what="kuberay ready")
        wait_for(lambda: operator.log().count("Starting workers") >= 3, TIMEOUT, interval=0.2,
                 what="KubeRay's RayCluster, RayJob and RayService controllers started")
        yield operator
    finally:
        operator.stop()


# ---- What the operators' tests share ---------------------------------------------------------------------------
def operator_crds(api_client, name: str, files: tuple[str, ...]) -> list[str]:
    """The operator's CRDs installed (require_operator first: without its build the test fails or skips)."""
    require_operator(name)
    return install_crds(api_client, name, files)


@contextmanager
def gang_scheduler(control_plane, tmp_path_factory, name: str, **kwargs: object) -> Iterator:
    """volcano-py's scheduler with GANG_CONF for a module (`kwargs`: more of running_scheduler's arguments)."""
    with running_scheduler(control_plane, conf=GANG_CONF, conf_dir=tmp_path_factory.mktemp("conf"), name=name,
                           **kwargs) as running:
        yield running


@contextmanager
def owner_gang_controllers(control_plane, custom, tmp_path_factory, watched: str) -> Iterator:
    """volcano-py's controllers for a module, once their log says `watched` (the default queue may be Open
    already, from another module's controllers: only this process's word says it watches the owner's kind)."""
    with running_controllers(control_plane, custom, tmp_path_factory.mktemp("controllers")) as running:
        wait_for(lambda: watched in running.text(), WAIT, what="the controllers watch them")
        yield running


@contextmanager
def deleting_after(custom, group: str, version: str, plural: str,
                   pods_of: Callable[[str, str], list]) -> Iterator[Callable[[str, dict], None]]:
    """`make(namespace, obj)` creates a custom object; when the block ends each is deleted (foreground) and the
    block waits until `pods_of(namespace, name)` is empty, so that the next test's queue and nodes (they share
    the module's node label) hold none of its pods."""
    made: list[tuple[str, str]] = []

    def make(namespace: str, obj: dict) -> None:
        custom.create_namespaced_custom_object(group, version, namespace, plural, obj)
        made.append((namespace, obj["metadata"]["name"]))

    yield make
    for namespace, name in made:
        custom.delete_namespaced_custom_object(group, version, namespace, plural, name,
                                               body=client.V1DeleteOptions(propagation_policy="Foreground"))
    for namespace, name in made:
        wait_for(lambda ns=namespace, n=name: not pods_of(ns, n), WAIT, what=f"the pods of {name} gone")


def explain(control_plane, namespace: str, name: str) -> str:
    """`volcano-py explain` on the PodGroup `name`: its output (the command must succeed)."""
    proc = subprocess.run([sys.executable, "-m", "scheduler.cli", "explain", name, "-n", namespace, "--kubeconfig",
                           str(control_plane.kubeconfig)], capture_output=True, text=True, cwd=REPO_ROOT,
                          timeout=WAIT)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def conditions(pg: dict | None) -> dict[str, dict]:
    return {c["type"]: c for c in (((pg or {}).get("status") or {}).get("conditions") or ())}


def phase(custom, namespace: str, name: str) -> str:
    """The PodGroup's phase ("" while it has none, or there is no such PodGroup)."""
    return ((podgroup(custom, namespace, name) or {}).get("status") or {}).get("phase", "")


def bound_in_one_cycle(scheduler, namespace: str, pods: Callable[[], list], what: str, *,
                       gang: str = "the gang") -> list:
    """Wait until `pods()` are 3, all bound; assert the scheduler bound them in one cycle. The pods."""
    bound = wait_for(lambda: (ps := pods()) and len(ps) == 3 and all(p.spec.node_name for p in ps) and ps, WAIT,
                     what=f"{what}: 3 pods bound")
    keys = {f"{namespace}/{p.metadata.name}" for p in bound}
    assert len(scheduler.bind_cycles(keys)) == 1, f"{gang} was bound across several cycles"
    return list(bound)


def none_bound_for_five_cycles(scheduler, pods: Callable[[], list], *, created: str = "the 3 pods created") -> None:
    """Wait until `pods()` are 3; five scheduling cycles later none of them is bound."""
    wait_for(lambda: len(pods()) == 3, WAIT, what=created)
    five_more_cycles(scheduler)
    assert [p.metadata.name for p in pods() if p.spec.node_name] == []


def five_more_cycles(scheduler, what: str = "five more scheduling cycles") -> None:
    cycles = len(scheduler.results)
    wait_for(lambda: len(scheduler.results) >= cycles + 5, WAIT, what=what)
