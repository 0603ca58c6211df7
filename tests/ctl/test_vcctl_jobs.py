"""`volcano-py job run|list|view|suspend|resume|delete`, as `vcctl job ...`: the Job run creates, the Commands
suspend and resume create, the tables' cells (issue: vcctl parity)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from vctable import cells

BATCH = "batch.volcano.sh/v1alpha1"
JOBS_PATH = f"/apis/{BATCH}/namespaces/ml/jobs"


def job(name: str, namespace: str = "ml", **spec: Any) -> dict[str, Any]:
    status = spec.pop("status", {})
    labels = spec.pop("labels", None)
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-{name}",
        "creationTimestamp": "2026-03-04T05:06:07Z",
    }
    if labels:
        meta["labels"] = labels
    return {"apiVersion": BATCH, "kind": "Job", "metadata": meta, "spec": spec, "status": status}


def created(stub: Any) -> dict[str, Any]:
    (post,) = [r for r in stub.requests if r["method"] == "POST"]
    return dict(post["body"])


# ---- run ------------------------------------------------------------------------------------------------


def test_run_with_the_defaults_creates_vcctls_job_for_volcano_pys_scheduler(vcctl: Any) -> None:
    run, stub = vcctl("job", "run", "-N", "demo")
    assert run.code == 0 and run.out == "run job demo successfully\n"
    container = {
        "name": "demo",
        "image": "busybox",
        "imagePullPolicy": "IfNotPresent",
        "resources": {"limits": {"cpu": "1", "memory": "100Mi"}, "requests": {"cpu": "1", "memory": "100Mi"}},
    }
    assert created(stub) == {
        "apiVersion": BATCH,
        "kind": "Job",
        "metadata": {"name": "demo", "namespace": "default"},
        "spec": {
            "minAvailable": 1,
            "schedulerName": "volcano-py",  # vcctl's default is volcano, Volcano's scheduler (issue 38)
            "tasks": [
                {
                    "replicas": 1,
                    "template": {
                        "metadata": {"name": "demo", "labels": {"job.volcano.sh": "demo"}},
                        "spec": {"containers": [container], "restartPolicy": "Never"},
                    },
                }
            ],
        },
    }
    assert stub.requests[0]["path"] == "/apis/batch.volcano.sh/v1alpha1/namespaces/default/jobs"


def test_run_takes_vcctls_short_flags(vcctl: Any) -> None:
    _, stub = vcctl(
        "job",
        "run",
        "-N",
        "big",
        "-n",
        "ml",
        "-i",
        "nginx",
        "-m",
        "2",
        "-r",
        "4",
        "-R",
        "cpu=500m,nvidia.com/gpu=1",
        "-L",
        "memory=2048Mi",
        "-S",
        "volcano-py",
    )
    body = created(stub)
    task = body["spec"]["tasks"][0]
    container = task["template"]["spec"]["containers"][0]
    assert (body["spec"]["minAvailable"], task["replicas"], body["spec"]["schedulerName"]) == (2, 4, "volcano-py")
    assert container["image"] == "nginx"
    assert container["resources"] == {"requests": {"cpu": "500m", "nvidia.com/gpu": "1"}, "limits": {"memory": "2Gi"}}
    assert stub.requests[0]["path"] == JOBS_PATH


def test_run_from_a_file_sends_the_file_with_canonical_quantities(vcctl: Any, tmp_path: Path) -> None:
    path = tmp_path / "job.yml"
    path.write_text(
        "kind: Whatever\nmetadata: {name: from-file}\nspec:\n  queue: q\n  tasks:\n  - replicas: 1\n"
        "    template:\n      spec:\n        containers:\n        - name: c\n"
        "          resources: {requests: {cpu: 2000m, memory: 1.5Gi}}\n"
    )
    run, stub = vcctl("job", "run", "-f", str(path), "-n", "ml")
    body = created(stub)
    assert run.out == "run job from-file successfully\n"
    assert (body["kind"], body["spec"]["queue"]) == ("Job", "q")
    resources = body["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["resources"]
    assert resources == {"requests": {"cpu": "2", "memory": "1536Mi"}}


@pytest.mark.parametrize(
    "args",
    [
        ["job", "run"],
        ["job", "run", "-N", "x", "-R", "cpu"],
        ["job", "run", "-N", "x", "-L", "cpu=lots"],
        ["job", "run", "-f", "job.json"],
        ["job", "run", "-f", "missing.yaml"],
    ],
    ids=["no name", "a request without a value", "no quantity", "not a yaml file", "no such file"],
)
def test_bad_input_is_one_line_and_status_2_before_any_request(args: list[str], vcctl: Any) -> None:
    run, stub = vcctl(*args)
    assert run.code == 2 and len(run.err.splitlines()) == 1 and run.out == ""
    assert stub.requests == []


def test_a_name_already_taken_is_the_apiservers_line_and_status_1(vcctl: Any) -> None:
    run, _ = vcctl("job", "run", "-N", "train", "-n", "ml", objects=[job("train")])
    assert run.code == 1 and run.err.splitlines() == ['volcano-py: error: jobs "train" already exists']


# ---- list -----------------------------------------------------------------------------------------------

JOBS = [
    job(
        "train",
        queue="team-a",
        schedulerName="volcano",
        tasks=[{"replicas": 2}, {"replicas": 6}],
        labels={"volcano.sh/job-type": "Mpi"},
        status={"state": {"phase": "Running"}, "minAvailable": 8, "running": 7, "pending": 1, "retryCount": 2},
    ),
    job("eval", queue="team-b", schedulerName="volcano-py", tasks=[{"name": "no-replicas"}]),
    job("elsewhere", namespace="prod", queue="team-a", status={"state": {"phase": "Completed"}, "succeeded": 1}),
]


def test_list_prints_vcctls_columns_and_counts(vcctl: Any) -> None:
    run, _ = vcctl("job", "list", "-n", "ml", objects=JOBS)
    rows = cells(run.out)
    assert list(rows[0]) == [
        "Name",
        "Creation",
        "Phase",
        "JobType",
        "Replicas",
        "Min",
        "Pending",
        "Running",
        "Succeeded",
        "Failed",
        "Unknown",
        "RetryCount",
    ]
    by_name = {r["Name"]: r for r in rows}
    assert by_name["train"] == {
        "Name": "train",
        "Creation": "2026-03-04",
        "Phase": "Running",
        "JobType": "Mpi",
        "Replicas": "8",
        "Min": "8",
        "Pending": "1",
        "Running": "7",
        "Succeeded": "0",
        "Failed": "0",
        "Unknown": "0",
        "RetryCount": "2",
    }
    # a job the controllers have not seen yet: no phase, Batch, a task without replicas counts 0 (as in Go)
    assert (by_name["eval"]["Phase"], by_name["eval"]["JobType"], by_name["eval"]["Replicas"]) == ("", "Batch", "0")


def test_list_widths_are_vcctls(vcctl: Any) -> None:
    run, _ = vcctl("job", "list", "-n", "ml", objects=JOBS)
    header = run.out.splitlines()[0]
    starts = [header.index(h) for h in ("Creation", "Phase", "JobType", "Replicas", "Min", "Pending")]
    assert starts == [len("train") + 3, 23, 35, 47, 59, 65]  # Name: longest + 3, then 15, 12, 12, 12, 6


@pytest.mark.parametrize(
    ("flags", "names"),
    [
        (["--all-namespaces"], ["train", "eval", "elsewhere"]),
        (["-A", "-q", "team-a"], ["train", "elsewhere"]),
        (["-n", "ml", "-S", "volcano-py"], ["eval"]),
        (["--all-namespaces", "--selector", "el"], ["elsewhere"]),
    ],
    ids=["all namespaces", "one queue", "one scheduler", "a name containing el"],
)
def test_list_filters_as_vcctl(flags: list[str], names: list[str], vcctl: Any) -> None:
    run, _ = vcctl("job", "list", *flags, objects=JOBS)
    assert sorted(r["Name"] for r in cells(run.out)) == sorted(names)


def test_list_with_all_namespaces_has_a_namespace_column(vcctl: Any) -> None:
    run, _ = vcctl("job", "list", "--all-namespaces", objects=JOBS)
    assert {(r["Namespace"], r["Name"]) for r in cells(run.out)} == {
        ("ml", "train"),
        ("ml", "eval"),
        ("prod", "elsewhere"),
    }


def test_list_of_nothing_says_no_resources_found(vcctl: Any) -> None:
    run, _ = vcctl("job", "list", "-n", "empty", objects=JOBS)
    assert (run.code, run.out) == (0, "No resources found\n")


def test_list_wide_is_volcano_pys_older_table(vcctl: Any) -> None:
    run, _ = vcctl("job", "list", "-n", "ml", "-o", "wide", objects=JOBS)
    assert run.out.split("\n")[0].split() == [
        "NAME",
        "STATUS",
        "MINAVAILABLE",
        "REPLICAS",
        "PENDING",
        "RUNNING",
        "SUCCEEDED",
        "FAILED",
        "QUEUE",
        "AGE",
    ]


# ---- view -----------------------------------------------------------------------------------------------


def fields(text: str) -> dict[str, str]:
    """`Label:\\tvalue` lines of job view as {label: value} (the first of each label)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        if "\t" in line:
            label, value = line.split("\t", 1)
            out.setdefault(label.strip().rstrip(":").strip(), value)
    return out


def test_view_shows_the_job_its_counts_and_its_events(vcctl: Any) -> None:
    viewed = job(
        "train",
        minAvailable=2,
        schedulerName="volcano-py",
        tasks=[
            {
                "name": "worker",
                "replicas": 2,
                "template": {
                    "spec": {
                        "containers": [{"name": "main", "image": "busybox", "resources": {"limits": {"cpu": "1000m"}}}]
                    }
                },
            }
        ],
        status={"state": {"phase": "Running"}, "running": 2},
    )
    events = [
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": n, "namespace": "ml"},
            "type": "Normal",
            "reason": r,
            "count": 1,
            "source": {"component": "volcano-py-controllers"},
        }
        for n, r in (("train.1", "Created"), ("trainer.2", "NotThisJob"))
    ]
    run, _ = vcctl("job", "view", "-N", "train", "-n", "ml", objects=[viewed, *events])
    shown = fields(run.out)
    assert (shown["Name"], shown["Namespace"], shown["Min Available"], shown["Scheduler Name"]) == (
        "train",
        "ml",
        "2",
        "volcano-py",
    )
    assert (shown["Replicas"], shown["Image"], shown["Cpu"], shown["Phase"], shown["Running"]) == (
        "2",
        "busybox",
        "1",
        "Running",
        "2",
    )
    assert shown["Creation Timestamp"] == "2026-03-04 05:06:07 +0000 UTC"
    event_rows = [line.split("\t") for line in run.out.split("Events:\n")[1].splitlines()[2:]]
    assert [[c.strip() for c in row[:2]] for row in event_rows] == [["Normal", "Created"]]


def test_view_takes_the_name_positionally_too(vcctl: Any) -> None:
    run, _ = vcctl("job", "view", "train", "-n", "ml", objects=[job("train")])
    assert fields(run.out)["Name"] == "train" and fields(run.out)["Events"] == "<none>"


# ---- suspend, resume, delete -----------------------------------------------------------------------------


@pytest.mark.parametrize(("verb", "action"), [("suspend", "AbortJob"), ("resume", "ResumeJob")])
def test_suspend_and_resume_create_vcctls_command_and_print_nothing(verb: str, action: str, vcctl: Any) -> None:
    run, stub = vcctl("job", verb, "-N", "train", "-n", "ml", objects=[job("train")])
    ref = {
        "apiVersion": BATCH,
        "kind": "Job",
        "name": "train",
        "uid": "uid-train",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    assert created(stub) == {
        "apiVersion": "bus.volcano.sh/v1alpha1",
        "kind": "Command",
        "action": action,
        "target": ref,
        "metadata": {"generateName": f"train-{action.lower()}-", "namespace": "ml", "ownerReferences": [ref]},
    }
    assert run.code == 0 and run.out == ""


def test_delete_deletes_the_job_and_says_so_as_vcctl(vcctl: Any) -> None:
    run, stub = vcctl("job", "delete", "--name", "train", "--namespace", "ml", objects=[job("train")])
    assert run.out == "delete job train successfully\n"
    assert [(r["method"], r["path"]) for r in stub.writes()] == [("DELETE", f"{JOBS_PATH}/train")]


@pytest.mark.parametrize("verb", ["suspend", "resume", "delete", "view"])
def test_a_missing_job_is_the_apiservers_line_and_status_1(verb: str, vcctl: Any) -> None:
    run, stub = vcctl("job", verb, "-N", "nope", "-n", "ml", objects=[job("train")])
    assert run.code == 1 and run.err.splitlines() == ['volcano-py: error: jobs "nope" not found']
    assert [r for r in stub.writes() if r["method"] == "POST"] == []


@pytest.mark.parametrize("verb", ["suspend", "resume", "delete", "view"])
def test_no_name_is_a_usage_error(verb: str, vcctl: Any) -> None:
    run, stub = vcctl("job", verb, objects=[job("train")])
    assert run.code == 2 and len(run.err.splitlines()) == 1 and stub.requests == []


@pytest.mark.parametrize(
    ("flag", "namespaces"),
    [("--all-namespaces=true", {"ml", "prod"}), ("--all-namespaces=false", {"ml"}), ("-A", {"ml", "prod"})],
)
def test_all_namespaces_takes_a_go_bool_as_pflag_does(flag: str, namespaces: set[str], vcctl: Any) -> None:
    run, _ = vcctl("job", "list", "-n", "ml", flag, "-o", "json", objects=JOBS)
    assert {j["metadata"]["namespace"] for j in json.loads(run.out)} == namespaces
