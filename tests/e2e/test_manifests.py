"""Deployable and observable (issue 8): crds/ and manifests/ apply on a real apiserver with RBAC on; the scheduler
and the controllers run as their ServiceAccounts and are refused what their roles do not grant; /metrics shows
a workload; the wheel the Dockerfile builds installs and runs.

That the Helm chart renders exactly these manifests, and the chart's values, schema, NOTES and alert rules, need
no apiserver: tests/deploy/ checks them with helm and promtool in the unit run.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from controlplane import (
    GPU_RESOURCE,
    REPO_ROOT,
    create_gpu_node,
    delete_node_and_pods,
    free_port,
    node_is_ready,
    wait_for,
)
from kubernetes import client

MANIFESTS = REPO_ROOT / "manifests"
CRDS = REPO_ROOT / "crds"
SYSTEM_NS = "volcano-py-system"
GROUP = "scheduling.volcano.sh"
TIMEOUT = 90
NODE_SET = "volcano-py.test/node-set"

# Only for the apply test: the Prometheus Operator is not installed here, so the CRDs of its kinds that manifests/
# holds (PrometheusRule in alerts.yaml, ServiceMonitor and PodMonitor in monitors.yaml) are stubbed.
OPERATOR_KINDS = {"PrometheusRule": "prometheusrules", "ServiceMonitor": "servicemonitors", "PodMonitor": "podmonitors"}


def operator_crd(kind: str, plural: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.monitoring.coreos.com"},
        "spec": {
            "group": "monitoring.coreos.com",
            "names": {"kind": kind, "listKind": f"{kind}List", "plural": plural, "singular": kind.lower()},
            "scope": "Namespaced",
            "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}],
        },
    }


def manifest_objects() -> list[dict[str, Any]]:
    objs = []
    for path in sorted(MANIFESTS.glob("*.yaml")):
        objs += [o for o in yaml.safe_load_all(path.read_text()) if o]
    return objs


def find(kind: str, name: str) -> dict[str, Any]:
    return next(o for o in manifest_objects() if o["kind"] == kind and o["metadata"]["name"] == name)


def deployment_args(name: str, **replace: str) -> list[str]:
    """The container args of a manifest Deployment, with `--flag=value` replaced for a run on this machine."""
    container = find("Deployment", name)["spec"]["template"]["spec"]["containers"][0]
    out = []
    for arg in container["args"]:
        flag = arg.split("=", 1)[0].removeprefix("--").replace("-", "_")
        out.append(f"{arg.split('=', 1)[0]}={replace[flag]}" if flag in replace else arg)
    return [a.replace("$(POD_NAME)", f"e2e-{name}") for a in out]


def known_flags(subcommand: str) -> set[str]:
    help_text = subprocess.run(
        [sys.executable, "-m", "scheduler.cli", subcommand, "--help"], capture_output=True, text=True, check=True
    ).stdout
    return set(re.findall(r"(--[a-z][a-z-]+)", help_text))


def http_get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError:
        return 0, ""


def sample(text: str, name: str, **labels: str) -> float | None:
    """The value of one sample in a Prometheus text exposition (labels must match exactly those given)."""
    for line in text.splitlines():
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$", line)
        if not m or m.group(1) != name:
            continue
        got = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
        if got == labels:
            return float(m.group(3))
    return None


# ---- apply -----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def installed(control_plane, tmp_path_factory):
    """crds/ and manifests/ applied for real (after a server-side dry run of the same files)."""
    stub = tmp_path_factory.mktemp("crd") / "monitoring-crds.yaml"
    stub.write_text(yaml.safe_dump_all([operator_crd(kind, plural) for kind, plural in OPERATOR_KINDS.items()]))
    control_plane.kubectl("apply", "-f", str(stub))
    control_plane.kubectl("wait", "--for=condition=Established",
                          *[f"crd/{plural}.monitoring.coreos.com" for plural in OPERATOR_KINDS.values()],
                          "--timeout=60s")
    files = [x for p in [CRDS, *sorted(MANIFESTS.glob("*.yaml"))] for x in ("-f", str(p))]
    # A server dry run of a namespaced object needs its namespace to exist: the Namespace goes first, for real.
    control_plane.kubectl("apply", "--dry-run=server", "-f", str(MANIFESTS / "00-namespace.yaml"))
    control_plane.kubectl("apply", "-f", str(MANIFESTS / "00-namespace.yaml"))
    dry = control_plane.kubectl("apply", "--dry-run=server", *files)
    applied = control_plane.kubectl("apply", *files)
    return dry.stdout, applied.stdout


def test_every_crd_and_manifest_is_accepted_by_the_apiserver(installed, control_plane):
    dry, applied = installed
    expected = len(manifest_objects()) + sum(
        1 for p in CRDS.glob("*.yaml") for o in yaml.safe_load_all(p.read_text()) if o
    )
    assert dry.count("(server dry run)") == expected, dry
    assert len([line for line in applied.splitlines() if line.strip()]) == expected, applied
    r = control_plane.kubectl("get", "deploy,sa,cm,svc,role,rolebinding,pdb,prometheusrule,servicemonitor,podmonitor",
                              "-n", SYSTEM_NS, "-o", "name")
    for name in ("deployment.apps/volcano-py-scheduler", "deployment.apps/volcano-py-controllers",
                 "serviceaccount/volcano-py-scheduler", "configmap/volcano-py-scheduler-configmap",
                 "service/volcano-py-scheduler-metrics", "prometheusrule.monitoring.coreos.com/volcano-py",
                 "poddisruptionbudget.policy/volcano-py-scheduler", "poddisruptionbudget.policy/volcano-py-controllers",
                 "servicemonitor.monitoring.coreos.com/volcano-py-scheduler",
                 "podmonitor.monitoring.coreos.com/volcano-py-controllers"):
        assert name in r.stdout


def test_scheduler_conf_in_the_configmap_loads_without_warnings(tmp_path):
    conf = tmp_path / "volcano-scheduler.conf"
    conf.write_text(find("ConfigMap", "volcano-py-scheduler-configmap")["data"]["volcano-scheduler.conf"])
    r = subprocess.run([sys.executable, "-m", "scheduler.cli", "conf", "check", str(conf)],
                       capture_output=True, text=True)
    assert r.returncode == 0 and "warnings: none" in r.stdout, r.stdout + r.stderr


def test_deployments_are_hardened_and_probe_the_metrics_port():
    for name in ("volcano-py-scheduler", "volcano-py-controllers"):
        pod = find("Deployment", name)["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        c = pod["containers"][0]
        assert c["securityContext"]["readOnlyRootFilesystem"] is True
        assert c["securityContext"]["capabilities"]["drop"] == ["ALL"]
        assert c["securityContext"]["allowPrivilegeEscalation"] is False
        assert c["resources"]["requests"]["cpu"] and c["resources"]["requests"]["memory"]
        assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
        assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
        assert "--leader-elect" in c["args"]
    assert find("Deployment", "volcano-py-scheduler")["spec"]["replicas"] == 2


def test_scheduler_manifest_flags_are_known_to_the_cli():
    args = deployment_args("volcano-py-scheduler")
    assert args[0] == "scheduler"
    assert {a.split("=", 1)[0] for a in args[1:]} <= known_flags("scheduler")


# ---- RBAC ------------------------------------------------------------------------------------------------
CAN_I = [
    # (service account, verb, resource, namespace or "", allowed)
    ("volcano-py-scheduler", "create", "pods/binding", "default", True),
    ("volcano-py-controllers", "get", "secrets", "default", False),  # the ssh plugin's Secret: create only
    ("volcano-py-controllers", "list", "secrets", "default", False),
    ("volcano-py-scheduler", "create", "podgroups.scheduling.volcano.sh", "default", False),
    ("volcano-py-scheduler", "delete", "pods", "default", True),
    ("volcano-py-scheduler", "patch", "pods", "default", True),
    ("volcano-py-scheduler", "patch", "pods/status", "default", True),
    ("volcano-py-scheduler", "patch", "podgroups.scheduling.volcano.sh/status", "default", True),
    ("volcano-py-scheduler", "patch", "podgroups.scheduling.volcano.sh", "default", True),  # no /status: Volcano's CRD
    ("volcano-py-scheduler", "patch", "queues.scheduling.volcano.sh/status", "", True),
    ("volcano-py-scheduler", "create", "queues.scheduling.volcano.sh", "", True),
    ("volcano-py-scheduler", "create", "events", "default", True),
    ("volcano-py-scheduler", "watch", "nodes", "", True),
    ("volcano-py-scheduler", "update", "leases.coordination.k8s.io/volcano-py-scheduler", SYSTEM_NS, True),
    ("volcano-py-scheduler", "get", "secrets", "default", False),
    ("volcano-py-scheduler", "list", "secrets", SYSTEM_NS, False),
    ("volcano-py-scheduler", "create", "pods", "default", False),
    ("volcano-py-scheduler", "update", "pods", "default", False),
    ("volcano-py-scheduler", "patch", "nodes", "", False),
    ("volcano-py-scheduler", "delete", "podgroups.scheduling.volcano.sh", "default", False),
    ("volcano-py-scheduler", "update", "queues.scheduling.volcano.sh", "", False),
    ("volcano-py-scheduler", "update", "leases.coordination.k8s.io/volcano-py-controllers", SYSTEM_NS, False),
    ("volcano-py-scheduler", "create", "deployments.apps", SYSTEM_NS, False),
    ("volcano-py-scheduler", "watch", "persistentvolumeclaims", "", True),  # volumes: read, and bound for a gang
    ("volcano-py-scheduler", "patch", "persistentvolumes", "", True),
    ("volcano-py-scheduler", "patch", "persistentvolumeclaims", "default", True),
    ("volcano-py-scheduler", "list", "storageclasses.storage.k8s.io", "", True),
    ("volcano-py-scheduler", "delete", "persistentvolumeclaims", "default", False),
    ("volcano-py-scheduler", "update", "persistentvolumes", "", False),
    ("volcano-py-scheduler", "patch", "storageclasses.storage.k8s.io", "", False),
    ("volcano-py-controllers", "create", "pods", "default", True),
    ("volcano-py-controllers", "create", "secrets", "default", True),
    ("volcano-py-controllers", "patch", "jobs.batch.volcano.sh/status", "default", True),
    ("volcano-py-controllers", "patch", "queues.scheduling.volcano.sh/status", "", True),
    ("volcano-py-controllers", "delete", "commands.bus.volcano.sh", "default", True),
    ("volcano-py-controllers", "watch", "jobflows.flow.volcano.sh", "default", True),
    ("volcano-py-controllers", "watch", "jobtemplates.flow.volcano.sh", "default", True),
    ("volcano-py-controllers", "patch", "jobflows.flow.volcano.sh/status", "default", True),
    ("volcano-py-controllers", "patch", "jobtemplates.flow.volcano.sh/status", "default", True),
    ("volcano-py-controllers", "create", "jobs.batch.volcano.sh", "default", True),  # a JobFlow's Jobs
    ("volcano-py-controllers", "delete", "jobs.batch.volcano.sh", "default", True),  # jobRetainPolicy: delete
    ("volcano-py-controllers", "update", "jobflows.flow.volcano.sh", "default", False),
    ("volcano-py-controllers", "get", "replicasets.apps", "default", True),
    ("volcano-py-controllers", "watch", "replicasets.apps", "default", True),  # a PodGroup follows its workload
    ("volcano-py-controllers", "list", "statefulsets.apps", "default", True),
    ("volcano-py-controllers", "get", "jobs.batch", "default", True),
    ("volcano-py-controllers", "create", "persistentvolumeclaims", "default", True),  # a Job's volumeClaim
    ("volcano-py-controllers", "delete", "persistentvolumeclaims", "default", False),  # the garbage collector does
    ("volcano-py-controllers", "create", "jobs.batch.volcano.sh", "default", True),  # a CronJob's Jobs
    ("volcano-py-controllers", "delete", "jobs.batch.volcano.sh", "default", True),
    ("volcano-py-controllers", "watch", "cronjobs.batch.volcano.sh", "default", True),
    ("volcano-py-controllers", "patch", "cronjobs.batch.volcano.sh/status", "default", True),
    ("volcano-py-controllers", "update", "cronjobs.batch.volcano.sh", "default", False),
    ("volcano-py-controllers", "delete", "cronjobs.batch.volcano.sh", "default", False),
    ("volcano-py-controllers", "update", "deployments.apps", "default", False),
    ("volcano-py-controllers", "create", "pods/binding", "default", False),
    ("volcano-py-controllers", "patch", "podgroups.scheduling.volcano.sh/status", "default", False),
    ("volcano-py-controllers", "delete", "nodes", "", False),
    ("volcano-py-controllers", "create", "clusterroles.rbac.authorization.k8s.io", "", False),
    ("volcano-py-controllers", "update", "leases.coordination.k8s.io/volcano-py-scheduler", SYSTEM_NS, False),
]


@pytest.mark.parametrize(
    "account, verb, resource, namespace, allowed", CAN_I,
    ids=[f"{a.removeprefix('volcano-py-')} {'may' if ok else 'may not'} {v} {r}" for a, v, r, _, ok in CAN_I],
)
def test_service_account_permissions(installed, control_plane, account, verb, resource, namespace, allowed):
    kubeconfig = control_plane.kubeconfig_for_service_account(SYSTEM_NS, account)
    resource, _, sub = resource.partition("/")
    if sub in ("binding", "status"):
        resource += f" --subresource={sub}"
    elif sub:
        resource += f"/{sub}"  # a resource name
    args = ["auth", "can-i", verb, *resource.split()] + (["-n", namespace] if namespace else [])
    r = control_plane.kubectl(*args, kubeconfig=kubeconfig, check=False)
    assert r.stdout.strip() == ("yes" if allowed else "no"), r.stdout + r.stderr


def test_scheduler_account_is_refused_reading_secrets_for_real(installed, control_plane):
    kubeconfig = control_plane.kubeconfig_for_service_account(SYSTEM_NS, "volcano-py-scheduler")
    r = control_plane.kubectl("get", "secrets", "-n", "default", kubeconfig=kubeconfig, check=False)
    assert r.returncode != 0 and "forbidden" in r.stderr.lower(), r.stderr


# ---- the scheduler as its ServiceAccount, with the manifest's args ----------------------------------------
def podgroup(name: str, min_member: int, queue: str) -> dict:
    return {"apiVersion": f"{GROUP}/v1beta1", "kind": "PodGroup", "metadata": {"name": name},
            "spec": {"minMember": min_member, "queue": queue}}


def gpu_pod(name: str, group: str, tag: str, gpus: int) -> dict:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "annotations": {"scheduling.k8s.io/group-name": group}},
        "spec": {
            "schedulerName": "volcano-py", "nodeSelector": {NODE_SET: tag},
            "containers": [{"name": "main", "image": "busybox", "resources": {
                "requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {GPU_RESOURCE: str(gpus)}}}],
        },
    }


@pytest.fixture
def gpu_node(core_v1):
    tag = uuid.uuid4().hex[:8]
    name = f"manifests-{tag}"
    create_gpu_node(core_v1, name, gpus=8, labels={NODE_SET: tag})
    wait_for(lambda: node_is_ready(core_v1, name), TIMEOUT, what=f"node {name} Ready")
    yield tag
    delete_node_and_pods(core_v1, name)


@pytest.fixture
def gpu_queue(api_client):
    custom = client.CustomObjectsApi(api_client)
    name = f"metrics-{uuid.uuid4().hex[:6]}"
    custom.create_cluster_custom_object(GROUP, "v1beta1", "queues", {
        "apiVersion": f"{GROUP}/v1beta1", "kind": "Queue", "metadata": {"name": name}, "spec": {"weight": 1}})
    yield name
    custom.delete_cluster_custom_object(GROUP, "v1beta1", "queues", name)


def test_scheduler_as_its_service_account_schedules_a_gang_and_reports_metrics(
    installed, control_plane, api_client, core_v1, namespace, gpu_node, gpu_queue, tmp_path
):
    custom = client.CustomObjectsApi(api_client)
    conf = tmp_path / "volcano-scheduler.conf"
    conf.write_text(find("ConfigMap", "volcano-py-scheduler-configmap")["data"]["volcano-scheduler.conf"])
    port = free_port()
    args = deployment_args("volcano-py-scheduler", scheduler_conf=str(conf), listen_address=f"127.0.0.1:{port}")
    kubeconfig = control_plane.kubeconfig_for_service_account(SYSTEM_NS, "volcano-py-scheduler")
    log_path = tmp_path / "scheduler.log"
    base = f"http://127.0.0.1:{port}"
    with open(log_path, "wb") as log_file:
        proc = subprocess.Popen([sys.executable, "-m", "scheduler.cli", *args, "--kubeconfig", str(kubeconfig)],
                                stdout=log_file, stderr=subprocess.STDOUT)
        try:
            wait_for(lambda: http_get(f"{base}/healthz")[0] == 200, TIMEOUT, what="/healthz")
            wait_for(lambda: http_get(f"{base}/readyz")[0] == 200, TIMEOUT, what="/readyz (caches synced)")
            # A 2 x 2-GPU gang fits the 8-GPU node; a 2 x 4-GPU gang then does not (4 are left).
            custom.create_namespaced_custom_object(GROUP, "v1beta1", namespace, "podgroups",
                                                   podgroup("fits", 2, gpu_queue))
            custom.create_namespaced_custom_object(GROUP, "v1beta1", namespace, "podgroups",
                                                   podgroup("waits", 2, gpu_queue))
            for i in range(2):
                core_v1.create_namespaced_pod(namespace, gpu_pod(f"fits-{i}", "fits", gpu_node, 2))
            wait_for(lambda: all(p.spec.node_name for p in core_v1.list_namespaced_pod(namespace).items),
                     TIMEOUT, what="the 2-pod gang bound (the leader holds the Lease)")
            for i in range(2):
                core_v1.create_namespaced_pod(namespace, gpu_pod(f"waits-{i}", "waits", gpu_node, 4))

            def metrics_show_the_workload() -> str | None:
                status, text = http_get(f"{base}/metrics")
                ok = (
                    status == 200
                    and sample(text, "volcano_py_queue_allocated_gpu", queue_name=gpu_queue) == 4
                    and sample(text, "volcano_py_queue_pending_gpu", queue_name=gpu_queue) == 8
                    and (sample(text, "volcano_schedule_attempts_total", result="unschedulable") or 0) >= 1
                )
                return text if ok else None

            text = wait_for(metrics_show_the_workload, TIMEOUT, interval=0.5, what="/metrics to show the workload")
            assert sample(text, "volcano_queue_allocated_scalar_resources", queue_name=gpu_queue,
                          resource=GPU_RESOURCE) == 4000
            assert (sample(text, "volcano_schedule_attempts_total", result="scheduled") or 0) >= 1
            assert (sample(text, "volcano_e2e_scheduling_latency_milliseconds_count") or 0) >= 1
            assert (sample(text, "volcano_action_scheduling_latency_milliseconds_count", action="allocate") or 0) >= 1
            assert (sample(text, "volcano_plugin_scheduling_latency_milliseconds_count", plugin="gang",
                               OnSession="OnSessionOpen") or 0) >= 1
            assert (sample(text, "volcano_unschedule_job_count") or 0) >= 1
            assert sample(text, "volcano_py_queue_oldest_pending_podgroup_seconds", queue_name=gpu_queue) is not None
            assert sample(text, "volcano_queue_share", queue_name=gpu_queue) is not None
            assert (sample(text, "volcano_py_podgroup_pending_duration_seconds_count") or 0) >= 1
            assert (sample(text, "volcano_py_job_status_count", status="Running") or 0) + (
                sample(text, "volcano_py_job_status_count", status="Inqueue") or 0) >= 1
            # The renamed families' deprecated names carry the same value, for one release (docs/metrics.md).
            assert sample(text, "volcano_queue_allocated_gpu", queue_name=gpu_queue) == 4
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(TIMEOUT) == 0, log_path.read_text()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    log_text = log_path.read_text()
    # An API refusal is logged as "<METHOD> <path>: 403 <message>" (KubeError); the bare digits can be a port.
    assert ": 403 " not in log_text and "forbidden" not in log_text.lower(), log_text[-3000:]


def test_controllers_run_as_their_service_account(installed, control_plane, tmp_path):
    """The controllers start with the manifest's args as their ServiceAccount, take their Lease and answer
    the probes on their listen address."""
    known = known_flags("controllers")
    port = free_port()
    args = deployment_args("volcano-py-controllers", listen_address=f"127.0.0.1:{port}")
    unknown = [a for a in args[1:] if a.split("=", 1)[0] not in known]
    assert unknown == [], f"manifests/05-controllers.yaml passes flags volcano-py controllers does not know: {unknown}"
    kubeconfig = control_plane.kubeconfig_for_service_account(SYSTEM_NS, "volcano-py-controllers")
    log_path = tmp_path / "controllers.log"
    coordination = client.CoordinationV1Api(control_plane.api_client())
    with open(log_path, "wb") as log_file:
        proc = subprocess.Popen([sys.executable, "-m", "scheduler.cli", *args, "--kubeconfig", str(kubeconfig)],
                                stdout=log_file, stderr=subprocess.STDOUT)
        try:
            def holder() -> str | None:
                try:
                    lease = coordination.read_namespaced_lease("volcano-py-controllers", SYSTEM_NS)
                except client.ApiException:
                    return None
                holder = lease.spec.holder_identity
                return holder if holder == "e2e-volcano-py-controllers" else None

            wait_for(holder, TIMEOUT, interval=0.5, what="the controllers to hold their Lease")
            assert proc.poll() is None, log_path.read_text()
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10) as response:
                assert response.status == 200
            proc.send_signal(signal.SIGTERM)
            proc.wait(TIMEOUT)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    text = log_path.read_text()
    assert "forbidden" not in text.lower(), text[-3000:]


# ---- the image's commands, without a container engine -----------------------------------------------------
def test_wheel_builds_and_installs_into_a_fresh_venv(tmp_path):
    """What the Dockerfile does: build the wheel from pyproject.toml, README.md and scheduler/ only (the
    .dockerignore), install it into a fresh environment, run the entry point. The dependencies come from the
    project venv through a .pth file rather than from the network."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO_ROOT / name, src / name)
    shutil.copytree(REPO_ROOT / "scheduler", src / "scheduler", ignore=shutil.ignore_patterns("__pycache__"))
    dist = tmp_path / "dist"
    # Build isolation, as `python -m build` in the Dockerfile: pip fetches the build backend pyproject.toml names.
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(src)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    wheels = list(dist.glob("volcano_py-*.whl"))
    assert len(wheels) == 1
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    site = next(venv.glob("lib/python3*/site-packages"))
    deps = [p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir()]
    (site / "project-deps.pth").write_text("\n".join(deps) + "\n")
    py = venv / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", str(wheels[0])], check=True)
    r = subprocess.run([str(venv / "bin" / "volcano-py"), "--help"], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0 and "scheduler" in r.stdout, r.stderr
    where = subprocess.run([str(py), "-c", "import scheduler.metrics, json; print(scheduler.metrics.__file__)"],
                           capture_output=True, text=True, cwd=tmp_path, check=True).stdout
    assert str(site) in where, where  # the installed wheel, not the checkout
    r = subprocess.run([str(venv / "bin" / "volcano-py"), "scheduler", "--help"], capture_output=True, text=True,
                       cwd=tmp_path)
    assert "--listen-address" in r.stdout
    json.dumps(r.returncode)
