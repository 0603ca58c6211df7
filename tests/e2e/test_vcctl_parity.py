"""vcctl's commands under `volcano-py`, on a real cluster (issue: vcctl parity): `job run` creates a Job the
scheduler runs and `job list|view`, `pod list` show it; `queue create|operate|get|list|delete` round-trip and
the queue counts its PodGroups; `jobflow|jobtemplate create|get|list|describe|delete` round-trip.

The CLI runs as a user runs it, with vcctl's flags and a kubeconfig; the tests read its tables back into cells
(vcctl pads every cell to its column, so a column starts where its header starts). The scheduler runs
in-process, the controllers as a process; two 8-cpu nodes of this module's own.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from controlplane import REPO_ROOT, wait_for
from inprocess import kwok_nodes, queue_status, running_controllers, running_scheduler
from kubernetes import client
from test_controllers import BATCH, SCHED, TIMEOUT, pods, wait_phase

FLOW = "flow.volcano.sh"
TAG = f"vcctl-{uuid.uuid4().hex[:6]}"
SMALL = ["-R", "cpu=100m,memory=64Mi", "-L", "cpu=100m,memory=64Mi"]


@pytest.fixture(scope="module")
def nodes(control_plane, core_v1):
    with kwok_nodes(core_v1, [f"{TAG}-{i}" for i in range(2)], gpus=0, cpu="8", memory="32Gi") as names:
        yield names


@pytest.fixture(scope="module")
def scheduler(control_plane, nodes):
    with running_scheduler(control_plane, name="volcano-py-scheduler-vcctl") as running:
        yield running


@pytest.fixture(scope="module")
def controllers(control_plane, custom, scheduler, tmp_path_factory):
    with running_controllers(
        control_plane,
        custom,
        tmp_path_factory.mktemp("controllers"),
        "--leader-elect-lease-name",
        "volcano-py-controllers-vcctl",
    ) as ctl:
        yield ctl


@pytest.fixture
def queue_name(custom):
    """A queue name for the test; the queue is deleted afterwards if the test left it."""
    name = f"{TAG}-q-{uuid.uuid4().hex[:4]}"
    yield name
    try:
        custom.delete_cluster_custom_object(SCHED, "v1beta1", "queues", name)
    except client.ApiException as exc:
        if exc.status != 404:
            raise


def vcctl(control_plane, *args: str, cwd: Path = REPO_ROOT) -> tuple[int, str, str]:
    proc = subprocess.run(
        [sys.executable, "-m", "scheduler.cli", *args, "--kubeconfig", str(control_plane.kubeconfig)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=TIMEOUT,
        env={"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin", "TZ": "UTC"},
    )
    return proc.returncode, proc.stdout, proc.stderr


def ok(control_plane, *args: str, cwd: Path = REPO_ROOT) -> str:
    code, out, err = vcctl(control_plane, *args, cwd=cwd)
    assert code == 0, err
    return out


def cells(table: str) -> list[dict[str, str]]:
    lines = table.splitlines()
    header = lines[0]
    starts = [i for i, c in enumerate(header) if c != " " and (i == 0 or header[i - 1] == " ")]
    ends = [*starts[1:], None]
    names = [header[a:b].strip() for a, b in zip(starts, ends, strict=True)]
    return [{n: line[a:b].strip() for n, a, b in zip(names, starts, ends, strict=True)} for line in lines[1:]]


def row(table: str, name: str) -> dict[str, str]:
    return next(r for r in cells(table) if r["Name"] == name)


# ---------------------------------------------------------------------------------------------- job, pod


def test_job_run_creates_a_job_the_scheduler_runs_and_list_view_pod_list_show_it(
    control_plane, controllers, core_v1, custom, namespace
):
    out = ok(
        control_plane,
        "job",
        "run",
        "-N",
        "hello",
        "-n",
        namespace,
        "-r",
        "2",
        "-m",
        "2",
        "-i",
        "busybox",
        "-S",
        "volcano-py",
        *SMALL,
    )
    assert out == "run job hello successfully\n"
    made = custom.get_namespaced_custom_object(BATCH, "v1alpha1", namespace, "jobs", "hello")
    (task,) = made["spec"]["tasks"]
    assert (made["spec"]["minAvailable"], task["replicas"], made["spec"]["schedulerName"]) == (2, 2, "volcano-py")
    assert task["template"]["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "100m", "memory": "64Mi"}
    wait_phase(custom, namespace, "hello", "Running", running=2)

    listed = row(ok(control_plane, "job", "list", "-n", namespace), "hello")
    assert (listed["Phase"], listed["JobType"], listed["Replicas"], listed["Min"], listed["Running"]) == (
        "Running",
        "Batch",
        "2",
        "2",
        "2",
    )
    assert (
        row(ok(control_plane, "job", "list", "--all-namespaces", "--selector", "hell"), "hello")["Namespace"]
        == namespace
    )

    shown: dict[str, str] = {}  # job view's `Label:<tab>value` lines, the first of each label
    for line in ok(control_plane, "job", "view", "-N", "hello", "-n", namespace).splitlines():
        if "\t" in line:
            label, value = line.split("\t", 1)
            shown.setdefault(label.strip().rstrip(":").strip(), value)
    assert (shown["Name"], shown["Namespace"], shown["Scheduler Name"], shown["Min Available"], shown["Phase"]) == (
        "hello",
        namespace,
        "volcano-py",
        "2",
        "Running",
    )

    listed_pods = cells(ok(control_plane, "pod", "list", "-n", namespace, "-j", "hello"))
    expected = sorted(p["metadata"]["name"] for p in pods(core_v1, namespace, "hello"))
    assert [r["Name"] for r in listed_pods] == expected and len(expected) == 2
    assert {r["Status"] for r in listed_pods} == {"Running"}
    assert [r["Name"] for r in cells(ok(control_plane, "pod", "list", "-n", namespace))] == expected


def test_job_suspend_resume_and_delete_with_vcctls_flags(control_plane, controllers, core_v1, custom, namespace):
    ok(control_plane, "job", "run", "--name", "pause", "--namespace", namespace, "-S", "volcano-py", *SMALL)
    wait_phase(custom, namespace, "pause", "Running", running=1)
    assert ok(control_plane, "job", "suspend", "-N", "pause", "-n", namespace) == ""  # vcctl prints nothing
    wait_phase(custom, namespace, "pause", "Aborted")
    wait_for(lambda: not pods(core_v1, namespace, "pause"), TIMEOUT, what="the pods deleted")
    assert ok(control_plane, "job", "resume", "-N", "pause", "-n", namespace) == ""
    wait_phase(custom, namespace, "pause", "Running", running=1)
    assert ok(control_plane, "job", "delete", "-N", "pause", "-n", namespace) == "delete job pause successfully\n"
    wait_for(
        lambda: vcctl(control_plane, "job", "view", "-N", "pause", "-n", namespace)[0] == 1,
        TIMEOUT,
        what="the job gone",
    )
    assert len(vcctl(control_plane, "job", "view", "-N", "pause", "-n", namespace)[2].splitlines()) == 1


# ---------------------------------------------------------------------------------------------- queue


def test_queue_create_operate_get_list_and_delete_round_trip(
    control_plane, controllers, custom, namespace, queue_name, tmp_path
):
    q = queue_name
    assert ok(control_plane, "queue", "create", "-n", q, "-w", "3") == ""
    wait_for(lambda: queue_status(custom, q).get("state") == "Open", TIMEOUT, what="the queue Open")
    got = row(ok(control_plane, "queue", "get", "-n", q), q)
    assert (got["Weight"], got["State"], got["Running"]) == ("3", "Open", "0")

    assert ok(control_plane, "queue", "operate", "-n", q, "-a", "update", "-w", "5") == ""
    assert row(ok(control_plane, "queue", "get", "-n", q), q)["Weight"] == "5"

    ok(control_plane, "queue", "operate", "-n", q, "-a", "close")
    wait_for(lambda: queue_status(custom, q).get("state") == "Closed", TIMEOUT, what="the queue Closed")
    assert row(ok(control_plane, "queue", "list"), q)["State"] == "Closed"
    ok(control_plane, "queue", "operate", "-n", q, "-a", "open")
    wait_for(lambda: queue_status(custom, q).get("state") == "Open", TIMEOUT, what="the queue Open again")

    # a job in the queue: its PodGroup counts as Running in the queue's row, its pod lists under -q
    (tmp_path / "job.yaml").write_text(
        json.dumps(
            {
                "apiVersion": f"{BATCH}/v1alpha1",
                "kind": "Job",
                "metadata": {"name": "in-queue"},
                "spec": {
                    "schedulerName": "volcano-py",
                    "queue": q,
                    "minAvailable": 1,
                    "tasks": [
                        {
                            "name": "w",
                            "replicas": 1,
                            "template": {
                                "spec": {
                                    "containers": [
                                        {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "100m"}}}
                                    ]
                                }
                            },
                        }
                    ],
                },
            }
        )
    )  # JSON is YAML; vcctl wants the .yaml name
    ok(control_plane, "job", "run", "-f", str(tmp_path / "job.yaml"), "-n", namespace)
    wait_phase(custom, namespace, "in-queue", "Running", running=1)
    wait_for(
        lambda: row(ok(control_plane, "queue", "get", "-n", q), q)["Running"] == "1",
        TIMEOUT,
        what="the queue counts the job's PodGroup Running",
    )
    assert [r["Name"] for r in cells(ok(control_plane, "pod", "list", "-n", namespace, "-q", q))] == ["in-queue-w-0"]

    ok(control_plane, "job", "delete", "-N", "in-queue", "-n", namespace)
    assert ok(control_plane, "queue", "delete", "-n", q) == ""
    wait_for(lambda: vcctl(control_plane, "queue", "get", "-n", q)[0] == 1, TIMEOUT, what="the queue gone")


def test_queue_commands_refuse_bad_input_in_one_line(control_plane, queue_name):
    for args in (
        ["queue", "operate", "-n", queue_name, "-a", "update"],
        ["queue", "operate", "-n", queue_name],
        ["queue", "get"],
        ["job", "run"],
    ):
        code, out, err = vcctl(control_plane, *args)
        assert (code, out, len(err.splitlines())) == (2, "", 1), (args, err)
    code, _, err = vcctl(control_plane, "queue", "get", "-n", queue_name)  # not created: the apiserver's 404
    assert code == 1 and len(err.splitlines()) == 1


# ---------------------------------------------------------------------------------------------- jobflow, jobtemplate


def test_jobflow_and_jobtemplate_create_get_list_describe_and_delete(control_plane, custom, namespace, tmp_path):
    (tmp_path / "template.yaml").write_text(f"""apiVersion: {FLOW}/v1alpha1
kind: JobTemplate
metadata: {{name: step, namespace: {namespace}}}
spec:
  minAvailable: 1
  schedulerName: volcano-py
  tasks:
  - name: t
    replicas: 1
    template:
      spec:
        containers: [{{name: c, image: busybox}}]
""")
    (tmp_path / "flow.yaml").write_text(f"""apiVersion: {FLOW}/v1alpha1
kind: JobFlow
metadata: {{name: pipeline, namespace: {namespace}}}
spec:
  jobRetainPolicy: retain
  flows:
  - name: step
""")
    assert (
        ok(control_plane, "jobtemplate", "create", "-f", str(tmp_path / "template.yaml"))
        == f"Created JobTemplate: {namespace}/step\n"
    )
    assert (
        ok(control_plane, "jobflow", "create", "-f", str(tmp_path / "flow.yaml"))
        == f"Created JobFlow: {namespace}/pipeline\n"
    )
    assert custom.get_namespaced_custom_object(FLOW, "v1alpha1", namespace, "jobflows", "pipeline")["spec"][
        "flows"
    ] == [{"name": "step"}]

    assert cells(ok(control_plane, "jobtemplate", "list", "-n", namespace)) == [
        {"Name": "step", "Namespace": namespace}
    ]
    assert cells(ok(control_plane, "jobtemplate", "get", "-N", "step", "-n", namespace)) == [
        {"Name": "step", "Namespace": namespace}
    ]
    (flow_row,) = cells(ok(control_plane, "jobflow", "list", "-n", namespace))
    assert (flow_row["Name"], flow_row["Namespace"]) == ("pipeline", namespace)
    assert cells(ok(control_plane, "jobflow", "get", "-N", "pipeline", "-n", namespace))[0]["Name"] == "pipeline"

    described = json.loads(ok(control_plane, "jobflow", "describe", "-N", "pipeline", "-n", namespace, "-o", "json"))
    assert (described["kind"], described["spec"]["jobRetainPolicy"]) == ("JobFlow", "retain")
    assert "managedFields" not in described["metadata"]

    assert (
        ok(control_plane, "jobflow", "delete", "-N", "pipeline", "-n", namespace)
        == f"Deleted JobFlow: {namespace}/pipeline\n"
    )
    assert (
        ok(control_plane, "jobtemplate", "delete", "-N", "step", "-n", namespace)
        == f"Deleted JobTemplate: {namespace}/step\n"
    )
    assert ok(control_plane, "jobflow", "list", "-n", namespace) == "No resources found\n"
