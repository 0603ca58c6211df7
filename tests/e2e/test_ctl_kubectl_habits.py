"""The day-two commands on a real apiserver (issue 38): the kubeconfig context's namespace as the default, `-l`,
`--watch`, `job run` saying that no scheduler claims its name, and a missing CRD said as such.

The CLI runs as a user runs it, in its own process with a kubeconfig."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest
import yaml
from controlplane import REPO_ROOT, wait_for
from kubernetes import client

BATCH = "batch.volcano.sh"
TIMEOUT = 60


def volcano_py(*args: str, kubeconfig: Path) -> tuple[int, str, str]:
    proc = subprocess.run([sys.executable, "-m", "scheduler.cli", *args, "--kubeconfig", str(kubeconfig)],
                          capture_output=True, text=True, cwd=REPO_ROOT, timeout=TIMEOUT,
                          env={"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin", "TZ": "UTC"})
    return proc.returncode, proc.stdout, proc.stderr


def vcjob(name: str, **labels: str) -> dict:
    return {"apiVersion": f"{BATCH}/v1alpha1", "kind": "Job", "metadata": {"name": name, "labels": labels},
            "spec": {"minAvailable": 1, "schedulerName": "nobody", "tasks": [{"name": "t", "replicas": 1, "template": {
                "spec": {"containers": [{"name": "c", "image": "busybox"}], "restartPolicy": "Never"}}}]}}


@pytest.fixture
def context_kubeconfig(control_plane, namespace, tmp_path) -> Path:
    """The admin kubeconfig with its current context's namespace set to the test's namespace."""
    doc = yaml.safe_load(Path(control_plane.kubeconfig).read_text())
    current = doc["current-context"]
    for entry in doc["contexts"]:
        if entry["name"] == current:
            entry["context"]["namespace"] = namespace
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_the_contexts_namespace_and_l_select_the_jobs(context_kubeconfig, custom, namespace):
    for name, app in (("web-1", "web"), ("db-1", "db")):
        custom.create_namespaced_custom_object(BATCH, "v1alpha1", namespace, "jobs", vcjob(name, app=app))
    code, out, err = volcano_py("job", "list", "-o", "name", kubeconfig=context_kubeconfig)
    assert code == 0, err
    assert sorted(out.splitlines()) == ["job.batch.volcano.sh/db-1", "job.batch.volcano.sh/web-1"]
    code, out, err = volcano_py("job", "list", "-l", "app=web", "-o", "jsonpath={.items[*].metadata.name}",
                                kubeconfig=context_kubeconfig)
    assert (code, out) == (0, "web-1"), err


def test_watch_prints_each_change_until_interrupted(context_kubeconfig, custom, namespace):
    proc = subprocess.Popen([sys.executable, "-m", "scheduler.cli", "job", "list", "--watch", "-o", "name",
                             "--kubeconfig", str(context_kubeconfig)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO_ROOT,
                            env={"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin"})
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True)
    reader.start()
    try:
        custom.create_namespaced_custom_object(BATCH, "v1alpha1", namespace, "jobs", vcjob("watched"))
        wait_for(lambda: "job.batch.volcano.sh/watched\n" in lines or proc.poll() is not None, timeout=TIMEOUT,
                 what="the ADDED line")
        assert proc.poll() is None, proc.stderr.read()
        custom.patch_namespaced_custom_object(BATCH, "v1alpha1", namespace, "jobs", "watched",
                                              {"metadata": {"labels": {"touched": "yes"}}})
        wait_for(lambda: lines.count("job.batch.volcano.sh/watched\n") >= 2, timeout=TIMEOUT,
                 what="the MODIFIED line")
        assert proc.poll() is None  # still watching
    finally:
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=TIMEOUT)
        reader.join(5)
    assert code == 130
    assert proc.stderr.read().strip() == "volcano-py: interrupted"


def test_job_run_says_no_scheduler_claims_its_name(control_plane, core_v1, namespace):
    code, out, err = volcano_py("job", "run", "-N", "first", "-n", namespace, kubeconfig=control_plane.kubeconfig)
    assert (code, out) == (0, "run job first successfully\n"), err
    (line,) = err.splitlines()
    assert line.startswith("warning: no scheduler in the cluster claims schedulerName 'volcano-py' (no volcano-py "
                           "or Volcano scheduler pod runs)")


def test_job_run_is_quiet_when_a_scheduler_pod_claims_its_name(control_plane, core_v1, namespace):
    name = f"volcano-py-scheduler-{uuid.uuid4().hex[:5]}"
    core_v1.create_namespaced_pod(namespace, {
        "metadata": {"name": name, "labels": {"app.kubernetes.io/name": "volcano-py-scheduler"}},
        "spec": {"nodeName": "no-such-node", "containers": [
            {"name": "scheduler", "image": "volcano-py", "args": ["scheduler", "--scheduler-name=team-sched"]}]}})
    core_v1.patch_namespaced_pod_status(name, namespace, {"status": {"phase": "Running"}})
    code, _, err = volcano_py("job", "run", "-N", "claimed", "-n", namespace, "-S", "team-sched",
                              kubeconfig=control_plane.kubeconfig)
    assert (code, err) == (0, "")
    code, _, err = volcano_py("job", "run", "-N", "unclaimed", "-n", namespace, kubeconfig=control_plane.kubeconfig)
    assert code == 0 and f"team-sched ({namespace}/{name})" in err


@pytest.fixture
def without_the_jobtemplate_crd(control_plane, api_client):
    """The jobtemplates CRD deleted for the test, installed again after it."""
    ext = client.ApiextensionsV1Api(api_client)
    crd = "jobtemplates.flow.volcano.sh"
    ext.delete_custom_resource_definition(crd)

    def gone() -> bool:
        try:
            ext.read_custom_resource_definition(crd)
        except client.ApiException as exc:
            return exc.status == 404
        return False

    wait_for(gone, timeout=TIMEOUT, what=f"{crd} deleted")
    try:
        yield crd
    finally:
        manifest = REPO_ROOT / "crds" / "flow.volcano.sh_jobtemplates.yaml"
        control_plane.kubectl("apply", "--server-side", "-f", str(manifest))

        def established() -> bool:
            conditions = ext.read_custom_resource_definition(crd).status.conditions or ()
            return any(c.type == "Established" and c.status == "True" for c in conditions)

        wait_for(established, timeout=TIMEOUT, what=f"{crd} established again")


def test_a_missing_crd_is_one_line_saying_how_to_install_it(control_plane, namespace, without_the_jobtemplate_crd):
    def listed() -> tuple[int, str, str] | None:
        result = volcano_py("jobtemplate", "list", "-n", namespace, kubeconfig=control_plane.kubeconfig)
        return result if "CRD" in result[2] else None  # the apiserver stops serving it shortly after the delete

    code, out, err = wait_for(listed, timeout=TIMEOUT, what="the list to find no CRD")
    (line,) = err.splitlines()
    assert code == 1 and out == ""
    assert line.startswith(f"volcano-py: error: the cluster has no {without_the_jobtemplate_crd} CRD")
    assert "kubectl apply --server-side -f crds/" in line


def test_a_missing_object_is_the_apiservers_sentence(control_plane, namespace):
    code, _, err = volcano_py("job", "view", "nope", "-n", namespace, kubeconfig=control_plane.kubeconfig)
    assert code == 1
    assert err.strip() == 'volcano-py: error: jobs.batch.volcano.sh "nope" not found'
