"""`make conformance`: run Volcano's own e2e suites against Volcano and against volcano-py, on the same control plane.

For each side and suite, a fresh control plane (tests/e2e/controlplane.py) is started as a real cluster has it:
kube-controller-manager with its default controllers, a kube-scheduler for ``default-scheduler`` pods, and kwok
playing the kubelets of the nodes Volcano's kind cluster has (hack/e2e-kind-config.yaml: one tainted control-plane
node and four workers). What `helm install` of Volcano's chart would create besides its pods (ConfigMaps, webhook
configurations, admission policies) is rendered from the chart in the snapshot and applied; the components run on
loopback instead of in pods:

* ``volcano``: vc-scheduler (Volcano's CI conf), vc-controller-manager and vc-webhook-manager, whose webhooks the
  apiserver calls at ``https://127.0.0.1:<port>/<path>`` with a CA bundle from the harness CA.
* ``volcano-py``: ``volcano-py webhook`` behind the same webhook configurations of the chart (it serves every path
  they name: /jobs/validate checks what a schema cannot, the other paths answer allowed), then ``volcano-py
  scheduler`` and ``volcano-py controllers`` as scheduler name ``volcano``, with the same conf, against our CRDs.

The kubelet's ConfigMap volume is emulated: the scheduler ConfigMap the suites edit
(volcano-system/integration-scheduler-configmap) is mirrored into the file the scheduler reads.

Then the compiled suite binary runs with a JSON and a JUnit report, KUBECONFIG, VC_BIN (vcctl) and a timeout.
Results land in ``<cache>/volcano-py/conformance/<side>/<suite>/`` (summary.json, report.json, junit.xml,
suite.log, logs/ of every component); ``tools/conformance/report.py`` turns them into CONFORMANCE.md.

    python tools/conformance/harness.py --side volcano --suite schedulingbase [--focus REGEX] [--timeout 3600]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import fcntl
import json
import logging
import os
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import urllib3
import yaml
from controlplane import ControlPlane, ControlPlaneError, _http_ok, _Proc, free_port, wait_for
from kubernetes.client.exceptions import ApiException
from kwok_stages import CONFORMANCE_KWOK_STAGES

REPO = Path(__file__).resolve().parents[2]



SIDES = ("volcano", "volcano-py")
SUITES = ("schedulingbase", "jobp", "jobseq", "schedulingaction", "vcctl")
# hack/run-e2e-kind.sh skips the k8s e2e framework's own specs that these two suites pull in by importing it.
SUITE_SKIP = {"schedulingbase": r"\[sig-.*\]", "schedulingaction": r"\[sig-.*\]"}

RELEASE, VOLCANO_NS = "integration", "volcano-system"  # hack/run-e2e-kind.sh: CLUSTER_NAME, NAMESPACE
SCHEDULER_CONFIGMAP = f"{RELEASE}-scheduler-configmap"
CI_CONF_KEY = "volcano-scheduler-ci.conf"
# The admission webhooks hack/run-e2e-kind.sh enables (helm-install-volcano, `enabled_admissions`).
ENABLED_ADMISSIONS = (
    "/pods/mutate,/queues/mutate,/podgroups/mutate,/jobs/mutate,/jobs/validate,/jobflows/validate,"
    "/pods/validate,/queues/validate,/podgroups/validate,/hypernodes/validate,/cronjobs/validate"
)
# Objects of the chart that become processes here (or are pointless without pods) are not applied.
NOT_APPLIED = {"Deployment", "DaemonSet", "StatefulSet", "Job", "Pod", "Service"}

# Kind's nodes (hack/e2e-kind-config.yaml), sized as the brief of issue 16 has the CI runner's workers.
NODE_CPU, NODE_MEMORY, NODE_PODS = "4", "16Gi", "110"
WORKERS = tuple(f"{RELEASE}-worker{i if i > 1 else ''}" for i in range(1, 5))
CONTROL_PLANE_NODE = f"{RELEASE}-control-plane"

CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "volcano-py"
RESULTS = Path(os.environ.get("VOLCANO_PY_CONFORMANCE_RESULTS") or CACHE / "conformance")


# Tracebacks of a failure the run survives, on stderr beside the log lines (logging's last-resort handler).
logger = logging.getLogger("volcano_py.tools")


def log(msg: str) -> None:
    print(f"[conformance {dt.datetime.now():%H:%M:%S}] {msg}", file=sys.stderr, flush=True)


# ---- Volcano's build ---------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class VolcanoBuild:
    dir: Path

    @classmethod
    def locate(cls) -> VolcanoBuild:
        script = REPO / "tools/conformance/build-volcano.sh"
        out = subprocess.run([str(script), "--print-dir"], capture_output=True, text=True, check=True)
        return cls(Path(out.stdout.strip()))

    @property
    def src(self) -> Path:
        return self.dir / "src"

    @property
    def chart(self) -> Path:
        return self.src / "installer/helm/chart/volcano"

    @property
    def key(self) -> str:
        return self.dir.name

    def bin(self, name: str) -> str:
        p = self.dir / "bin" / name
        if not os.access(p, os.X_OK):
            raise ControlPlaneError(f"{p} missing: run tools/conformance/build-volcano.sh")
        return str(p)

    def suite(self, name: str) -> str:
        p = self.dir / "e2e" / f"{name}.test"
        if not os.access(p, os.X_OK):
            raise ControlPlaneError(f"{p} missing: run SUITES={name} tools/conformance/build-volcano.sh")
        return str(p)


# ---- the cluster as Volcano's CI has it ------------------------------------------------------------------------
def kind_node(name: str, control_plane: bool) -> dict:
    """A Node as kind registers it (labels of a kind v1.36 node), managed by kwok."""
    labels = {
        "beta.kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
    }
    taints = []
    if control_plane:
        labels["node-role.kubernetes.io/control-plane"] = ""
        labels["node.kubernetes.io/exclude-from-external-load-balancers"] = ""
        taints.append({"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"})
    resources = {"cpu": NODE_CPU, "memory": NODE_MEMORY, "pods": NODE_PODS, "ephemeral-storage": "100Gi"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels, "annotations": {"kwok.x-k8s.io/node": "fake"}},
        "spec": {"taints": taints},
        "status": {"capacity": resources, "allocatable": dict(resources)},
    }


def create_kind_nodes(core) -> None:
    core.create_node(kind_node(CONTROL_PLANE_NODE, control_plane=True))
    for w in WORKERS:
        core.create_node(kind_node(w, control_plane=False))

    def workers_schedulable() -> bool:
        # Ready, and the node-lifecycle controller has lifted the not-ready taint the apiserver added at creation:
        # e2eutil.ClusterSize counts only untainted nodes.
        nodes = {n.metadata.name: n for n in core.list_node().items}
        return all(
            any(c.type == "Ready" and c.status == "True" for c in (nodes[w].status.conditions or []))
            and not nodes[w].spec.taints
            for w in WORKERS
        )

    wait_for(workers_schedulable, timeout=120, interval=0.5, what="kind worker nodes Ready and untainted")


def kind_storage_class() -> dict:
    """kind's default StorageClass (local-path). No provisioner runs here: PVCs of this class stay Pending."""
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {
            "name": "standard",
            "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
        },
        "provisioner": "rancher.io/local-path",
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "WaitForFirstConsumer",
    }


# ---- the chart, rendered -------------------------------------------------------------------------------------
def render_chart(build: VolcanoBuild, helm: str, work: Path, *, admission: bool) -> list[dict]:
    """`helm template` of Volcano's chart with the values hack/run-e2e-kind.sh installs it with."""
    values = {
        "basic": {"scheduler_config_file": f"config/{CI_CONF_KEY}", "image_pull_policy": "IfNotPresent"},
        "custom": {
            "scheduler_log_level": 5,
            "admission_enable": admission,
            "enabled_admissions": ENABLED_ADMISSIONS,
            "default_ns": {"node-role.kubernetes.io/control-plane": ""},
        },
    }
    vfile = work / "chart-values.yaml"
    vfile.write_text(yaml.safe_dump(values))
    out = subprocess.run(
        [helm, "template", RELEASE, str(build.chart), "--namespace", VOLCANO_NS, "--values", str(vfile)],
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        raise ControlPlaneError(f"helm template failed:\n{out.stderr}")
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def webhooks_on_loopback(doc: dict, port: int, ca_bundle: str) -> dict:
    """A webhook configuration of the chart, pointed at the webhook manager on 127.0.0.1 instead of its Service."""
    for hook in doc.get("webhooks") or []:
        svc = hook["clientConfig"].pop("service")
        hook["clientConfig"]["url"] = f"https://127.0.0.1:{port}{svc.get('path', '/')}"
        hook["clientConfig"]["caBundle"] = ca_bundle
    return doc


def apply_docs(cp: ControlPlane, docs: list[dict], work: Path, name: str) -> None:
    if not docs:
        return
    f = work / f"{name}.yaml"
    f.write_text(yaml.safe_dump_all(docs))
    cp.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(f))


class ConfigMapVolume(threading.Thread):
    """What the kubelet does for a ConfigMap volume: keep ``dir/<key>`` equal to the ConfigMap's data, so edits the
    suites make to the scheduler ConfigMap reach the scheduler's --scheduler-conf file (written by rename, as the
    kubelet swaps its ..data link, so a watcher sees a complete file)."""

    def __init__(self, api, namespace: str, name: str, directory: Path):
        super().__init__(daemon=True, name=f"configmap-volume-{name}")
        self.api, self.namespace, self.name, self.dir = api, namespace, name, directory
        self.stopped = threading.Event()
        self.updates = 0

    def write(self, data: dict[str, str]) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        for key, value in data.items():
            target = self.dir / key
            if target.exists() and target.read_text() == value:
                continue
            tmp = self.dir / f".{key}.tmp"
            tmp.write_text(value)
            tmp.replace(target)
            self.updates += 1
            log(f"configmap {self.namespace}/{self.name}: wrote {target}")

    def run(self) -> None:
        from kubernetes import client, watch

        core = client.CoreV1Api(self.api)
        while not self.stopped.is_set():
            try:
                w = watch.Watch()
                for ev in w.stream(
                    core.list_namespaced_config_map,
                    self.namespace,
                    field_selector=f"metadata.name={self.name}",
                    timeout_seconds=30,
                ):
                    if self.stopped.is_set():
                        w.stop()
                        break
                    if ev["type"] in ("ADDED", "MODIFIED"):
                        self.write(ev["object"].data or {})
            except (ApiException, urllib3.exceptions.HTTPError, OSError, ValueError) as exc:  # the apiserver going
                # away at the end of a run, a watch expiring
                if not self.stopped.is_set():
                    log(f"configmap volume watch restarts after: {exc}")
                    self.stopped.wait(1.0)


# ---- the two sides -----------------------------------------------------------------------------------------------
@dataclass
class Side:
    name: str
    procs: dict[str, _Proc] = field(default_factory=dict)

    def check_alive(self) -> list[str]:
        return [f"{n} exited with {p.popen.returncode}" for n, p in self.procs.items() if not p.alive()]

    def stop(self) -> None:
        for p in reversed(list(self.procs.values())):
            p.stop()


def wait_healthy(cp: ControlPlane, side: Side, what: str, url: str, ctx=None) -> None:
    def ok() -> bool:
        dead = side.check_alive()
        if dead:
            raise ControlPlaneError(f"{'; '.join(dead)} while waiting for {what}")
        return _http_ok(url, ctx)

    wait_for(ok, timeout=120, interval=0.25, what=f"{what} healthy ({url})")


WEBHOOK_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")


def start_volcano(cp: ControlPlane, build: VolcanoBuild, docs: list[dict], work: Path, conf_dir: Path) -> Side:
    side = Side("volcano")
    webhook_port = free_port()
    crt, key = cp.serving_ca.issue("volcano-admission", "127.0.0.1", sans=("IP:127.0.0.1", "DNS:localhost"),
                                   client=False)
    ca_bundle = _b64_file(cp.serving_ca.crt)
    hooks = [webhooks_on_loopback(d, webhook_port, ca_bundle) for d in docs if d["kind"] in WEBHOOK_KINDS]
    apply_docs(cp, [d for d in docs if d["kind"] not in NOT_APPLIED and d["kind"] not in WEBHOOK_KINDS], work,
               "chart")
    admission_conf = _configmap(docs, f"{RELEASE}-admission-configmap").get("data") or {}
    (work / "admission").mkdir(exist_ok=True)
    for k, v in admission_conf.items():
        (work / "admission" / k).write_text(v)
    kc = str(cp.kubeconfig)
    env = dict(os.environ, KUBE_POD_NAMESPACE=VOLCANO_NS, HELM_RELEASE_NAME=RELEASE)

    # The webhook manager serves first: a webhook configuration pointing at nobody would reject (failurePolicy
    # Fail) the pods and jobs the others create. It only fills caBundle into configurations that exist, so
    # they are applied first, and it waits for them.
    apply_docs(cp, hooks, work, "webhooks")
    hz = free_port()
    side.procs["vc-webhook-manager"] = _Proc(
        "vc-webhook-manager",
        [
            build.bin("vc-webhook-manager"),
            f"--kubeconfig={kc}",
            f"--enabled-admission={ENABLED_ADMISSIONS}",
            f"--tls-cert-file={crt}",
            f"--tls-private-key-file={key}",
            f"--ca-cert-file={cp.serving_ca.crt}",
            f"--admission-conf={work / 'admission' / 'volcano-admission.conf'}",
            f"--webhook-namespace={VOLCANO_NS}",
            f"--webhook-service-name={RELEASE}-admission-service",
            "--enable-healthz=true",
            f"--healthz-address=127.0.0.1:{hz}",
            "--listen-address=127.0.0.1",
            f"--port={webhook_port}",
            "--logtostderr",
            "-v=4",
        ],
        cp.logs / "vc-webhook-manager.log",
        env=env,
    )
    wait_healthy(cp, side, "vc-webhook-manager", f"https://127.0.0.1:{hz}/healthz", cp._insecure_ctx())
    wait_for(lambda: _http_ok_any(f"https://127.0.0.1:{webhook_port}/", cp._insecure_ctx()), timeout=120,
             interval=0.25, what="vc-webhook-manager serving its webhooks")

    hz, metrics = free_port(), free_port()
    side.procs["vc-controller-manager"] = _Proc(
        "vc-controller-manager",
        [
            build.bin("vc-controller-manager"),
            f"--kubeconfig={kc}",
            "--enable-healthz=true",
            f"--healthz-address=127.0.0.1:{hz}",
            "--enable-metrics=true",
            f"--listen-address=127.0.0.1:{metrics}",
            "--leader-elect=false",
            "--kube-api-qps=50",
            "--kube-api-burst=100",
            "--logtostderr",
            "-v=4",
        ],
        cp.logs / "vc-controller-manager.log",
        env=env,
    )
    wait_healthy(cp, side, "vc-controller-manager", f"http://127.0.0.1:{hz}/healthz")

    hz, metrics = free_port(), free_port()
    side.procs["vc-scheduler"] = _Proc(
        "vc-scheduler",
        [
            build.bin("vc-scheduler"),
            f"--kubeconfig={kc}",
            f"--scheduler-conf={conf_dir / CI_CONF_KEY}",
            "--enable-healthz=true",
            f"--healthz-address=127.0.0.1:{hz}",
            "--enable-metrics=true",
            f"--listen-address=127.0.0.1:{metrics}",
            "--leader-elect=false",
            "--logtostderr",
            "-v=5",
        ],
        cp.logs / "vc-scheduler.log",
        env=env,
    )
    wait_healthy(cp, side, "vc-scheduler", f"http://127.0.0.1:{hz}/healthz")
    return side


VOLCANO_PY_LOG_LEVEL = os.environ.get("VOLCANO_PY_LOG_LEVEL", "info")  # debug: every decision, for a focused rerun


def start_volcano_py(cp: ControlPlane, work: Path, conf_dir: Path, docs: list[dict] | None = None) -> Side:
    """volcano-py's webhook (when `docs` holds the chart's webhook configurations: Volcano's own, pointed at
    `volcano-py webhook`, which serves every path they name), controllers and scheduler."""
    side = Side("volcano-py")
    exe = shutil.which("volcano-py", path=str(REPO / ".venv" / "bin")) or "volcano-py"
    kc = str(cp.kubeconfig)
    hooks = [d for d in docs or [] if d["kind"] in WEBHOOK_KINDS]
    if hooks:
        webhook_port, hz = free_port(), free_port()
        crt, key = cp.serving_ca.issue("volcano-py-admission", "127.0.0.1", sans=("IP:127.0.0.1", "DNS:localhost"),
                                       client=False)
        side.procs["volcano-py-webhook"] = _Proc(
            "volcano-py-webhook",
            [exe, "webhook", f"--kubeconfig={kc}", f"--enabled-admission={ENABLED_ADMISSIONS}",
             "--scheduler-name=volcano",
             f"--tls-cert-file={crt}", f"--tls-private-key-file={key}", "--listen-address=127.0.0.1",
             f"--port={webhook_port}", "--enable-healthz", f"--healthz-address=127.0.0.1:{hz}"],
            cp.logs / "volcano-py-webhook.log",
        )
        wait_healthy(cp, side, "volcano-py webhook", f"http://127.0.0.1:{hz}/healthz")
        ca_bundle = _b64_file(cp.serving_ca.crt)
        apply_docs(cp, [webhooks_on_loopback(d, webhook_port, ca_bundle) for d in hooks], work, "webhooks")
    port = free_port()
    side.procs["volcano-py-controllers"] = _Proc(
        "volcano-py-controllers",
        [exe, "controllers", f"--kubeconfig={kc}", "--scheduler-name=volcano", "--no-leader-elect",
         f"--listen-address=127.0.0.1:{port}", f"--log-level={VOLCANO_PY_LOG_LEVEL}"],
        cp.logs / "volcano-py-controllers.log",
    )
    wait_healthy(cp, side, "volcano-py controllers", f"http://127.0.0.1:{port}/healthz")
    port = free_port()
    side.procs["volcano-py-scheduler"] = _Proc(
        "volcano-py-scheduler",
        [exe, "scheduler", f"--kubeconfig={kc}", "--scheduler-name=volcano",
         f"--scheduler-conf={conf_dir / CI_CONF_KEY}", f"--listen-address=127.0.0.1:{port}",
         f"--log-level={VOLCANO_PY_LOG_LEVEL}"],
        cp.logs / "volcano-py-scheduler.log",
    )
    wait_healthy(cp, side, "volcano-py scheduler", f"http://127.0.0.1:{port}/healthz")
    return side


def _b64_file(p: Path) -> str:
    import base64

    return base64.b64encode(p.read_bytes()).decode()


def _configmap(docs: list[dict], name: str) -> dict:
    for d in docs:
        if d["kind"] == "ConfigMap" and d["metadata"]["name"] == name:
            return d
    raise ControlPlaneError(f"the chart renders no ConfigMap {name}")


def _http_ok_any(url: str, ctx) -> bool:
    """The server answers TLS (any HTTP status): the webhook server has no handler at /."""
    import ssl
    import urllib.error
    import urllib.request

    try:
        urllib.request.urlopen(url, context=ctx, timeout=2)
        return True
    except urllib.error.HTTPError:
        return True
    except (urllib.error.URLError, OSError, ValueError, ssl.SSLError):
        return False


# ---- one suite -------------------------------------------------------------------------------------------------
@dataclass
class SpecResult:
    name: str
    state: str  # passed | failed | skipped | pending | panicked | interrupted | aborted | timedout
    seconds: float
    failure: str = ""  # first line of the failure message
    location: str = ""  # file:line of the failure


@dataclass
class SuiteResult:
    side: str
    suite: str
    started: str
    seconds: float
    exit_code: int | None
    snapshot_key: str
    command: str
    specs: list[SpecResult] = field(default_factory=list)  # the specs that ran (passed or not)
    skipped: int = 0  # skipped or pending: focus, skip, the k8s framework's own specs
    focus: str = ""
    error: str = ""  # the harness or the suite could not run at all

    @property
    def ran(self) -> list[SpecResult]:
        return [s for s in self.specs if s.state not in ("skipped", "pending")]

    @property
    def passed(self) -> int:
        return sum(s.state == "passed" for s in self.specs)


def _summary_line(message: str, limit: int = 300) -> str:
    """The first lines of a failure message that say something ("Unexpected error:" alone does not), as one."""
    lines = [ln.strip() for ln in message.strip().splitlines() if ln.strip()]
    text = " ".join(lines[:3]) if lines and lines[0].endswith(":") else (lines[0] if lines else "")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def parse_ginkgo_json(path: Path) -> list[SpecResult]:
    """Ginkgo v2's JSON report: a list of suite reports, each with SpecReports (It nodes and suite-level nodes)."""
    specs: list[SpecResult] = []
    for suite in json.loads(path.read_text()):
        for r in suite.get("SpecReports") or []:
            if r.get("LeafNodeType") != "It" and r.get("State") == "passed":
                continue  # BeforeSuite/AfterSuite and friends only matter when they fail
            texts = [t for t in (r.get("ContainerHierarchyTexts") or []) if t]
            name = " ".join([*texts, r.get("LeafNodeText") or r.get("LeafNodeType", "")]).strip()
            fail = r.get("Failure") or {}
            msg = _summary_line(fail.get("Message") or "")
            node = fail.get("FailureNodeType") or ""
            if msg and node and node != "It":
                msg = f"in [{node}]: {msg}"
            loc = fail.get("Location") or {}
            specs.append(
                SpecResult(
                    name=name,
                    state=r.get("State", "unknown"),
                    seconds=round((r.get("RunTime") or 0) / 1e9, 1),
                    failure=msg,
                    location=f"{Path(loc.get('FileName', '')).name}:{loc.get('LineNumber', '')}" if loc else "",
                )
            )
    return specs


def run_suite(side_name: str, suite: str, build: VolcanoBuild, helm: str, focus: str | None,
              timeout: float) -> SuiteResult:
    # A focused run is a check, not the suite's result: it goes beside the full run's, never over it.
    out = RESULTS / side_name / (f"{suite}-focus-{dt.datetime.now(dt.UTC):%m%d-%H%M%S}" if focus else suite)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    started = dt.datetime.now(dt.UTC)
    t0 = time.monotonic()
    argv = [
        build.suite(suite),
        f"--ginkgo.json-report={out / 'report.json'}",
        f"--ginkgo.junit-report={out / 'junit.xml'}",
        f"--ginkgo.timeout={int(timeout)}s",
        "--ginkgo.v",
        "--ginkgo.no-color",
        "--ginkgo.show-node-events",
    ]
    if suite in SUITE_SKIP:
        argv.append(f"--ginkgo.skip={SUITE_SKIP[suite]}")
    if focus:
        argv.append(f"--ginkgo.focus={focus}")
    result = SuiteResult(side_name, suite, started.isoformat(timespec="seconds"), 0.0, None, build.key,
                         " ".join(argv[1:]).replace(str(out) + "/", ""), focus=focus or "")
    crds = build.chart / "crd" / "bases" if side_name == "volcano" else REPO / "crds"
    cp = ControlPlane(kcm_controllers=("*",), kube_scheduler=True, kwok_stages=CONFORMANCE_KWOK_STAGES,
                      crds_dir=crds, keep_dir=True, log=log)
    side: Side | None = None
    volume: ConfigMapVolume | None = None
    try:
        cp.start()
        log(f"{side_name}/{suite}: control plane up at {cp.server} ({cp.dir})")
        from kubernetes import client

        api = cp.api_client()
        core = client.CoreV1Api(api)
        create_kind_nodes(core)
        client.StorageV1Api(api).create_storage_class(kind_storage_class())
        core.create_namespace({"metadata": {"name": VOLCANO_NS}})
        conf_dir = cp.dir / "volcano.scheduler"
        work = cp.dir / "conformance"
        work.mkdir()
        # The scheduler ConfigMap exactly as the chart renders it (with the CI conf), on both sides.
        docs = render_chart(build, helm, work, admission=True)  # both sides serve the chart's webhooks
        apply_docs(cp, [_configmap(docs, SCHEDULER_CONFIGMAP)], work, "scheduler-configmap")
        volume = ConfigMapVolume(api, VOLCANO_NS, SCHEDULER_CONFIGMAP, conf_dir)
        volume.write(_configmap(docs, SCHEDULER_CONFIGMAP)["data"])
        volume.start()
        side = (start_volcano(cp, build, docs, work, conf_dir) if side_name == "volcano"
                else start_volcano_py(cp, work, conf_dir, docs))
        log(f"{side_name}/{suite}: {', '.join(side.procs)} up; running {Path(argv[0]).name}")
        env = dict(
            os.environ,
            KUBECONFIG=str(cp.kubeconfig),
            VC_BIN=str(build.dir / "bin"),
            ARTIFACTS_PATH=str(out / "artifacts"),
        )
        with open(out / "suite.log", "wb") as suite_log:
            try:
                proc = subprocess.run(argv, cwd=build.src / "test" / "e2e" / suite, env=env, stdout=suite_log,
                                      stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, timeout=timeout + 300)
                result.exit_code = proc.returncode
            except subprocess.TimeoutExpired:
                result.error = f"suite binary killed after {timeout + 300:.0f}s (ginkgo's own timeout did not fire)"
        dead = side.check_alive()
        if dead:
            result.error = (result.error + "; " if result.error else "") + "; ".join(dead)
    except Exception as exc:  # recorded with the suite; the next suite runs
        result.error = f"{type(exc).__name__}: {exc}"
        logger.warning("%s/%s: harness error", side_name, suite, exc_info=True)
    finally:
        if volume:
            volume.stopped.set()
        if side:
            side.stop()
        cp.stop()
        if (cp.dir / "logs").is_dir():
            shutil.copytree(cp.dir / "logs", out / "logs", dirs_exist_ok=True)
        shutil.rmtree(cp.dir, ignore_errors=True)
    if (out / "report.json").exists():
        specs = parse_ginkgo_json(out / "report.json")
        result.specs = [s for s in specs if s.state not in ("skipped", "pending")]
        result.skipped = len(specs) - len(result.specs)
    elif not result.error:
        result.error = f"no report.json (exit {result.exit_code}); see suite.log"
    result.seconds = round(time.monotonic() - t0, 1)
    (out / "summary.json").write_text(json.dumps(asdict(result), indent=1))
    ran = result.ran
    log(f"{side_name}/{suite}: {result.passed}/{len(ran)} passed in {result.seconds:.0f}s"
        + (f" ({result.error})" if result.error else ""))
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--side", action="append", choices=SIDES, help="repeatable (default: both)")
    p.add_argument("--suite", action="append", choices=SUITES, help="repeatable (default: all)")
    p.add_argument("--focus", default=None, help="ginkgo --focus regex")
    p.add_argument("--timeout", type=float, default=3600.0, help="per-suite timeout in seconds (default 3600)")
    p.add_argument("--helm", default=str(REPO / ".bin" / "helm"))
    p.add_argument("--lock", default=os.environ.get("HEAVY_LOCK", "/tmp/volcano-py-heavy.lock"),
                   help="file lock held while a control plane runs (one suite at a time); '' for none")
    args = p.parse_args(argv)
    build = VolcanoBuild.locate()
    failed_to_run = 0
    for suite in args.suite or SUITES:  # suite by suite, so a partial run compares both sides of what it ran
        for side in args.side or SIDES:
            with heavy_lock(args.lock):
                r = run_suite(side, suite, build, args.helm, args.focus, args.timeout)
            failed_to_run += bool(r.error and not r.specs)
    return 1 if failed_to_run else 0


@contextlib.contextmanager
def heavy_lock(path: str):
    """The machine-wide lock of heavy work (builds, control planes), the one `flock <path>` takes."""
    if not path:
        yield
        return
    with open(path, "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"waiting for {path} (another build or control plane holds it)")
            fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


if __name__ == "__main__":
    sys.exit(main())
