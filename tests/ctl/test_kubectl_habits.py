"""kubectl's habits on the day-two commands (issue 38): `--context` and its namespace as the default, `-l`,
`-o name|json|yaml|jsonpath=...`; and `job run` naming volcano-py's scheduler and saying when none claims it.

The commands talk to the stand-in apiserver of stub_apiserver.py (its requests recorded), as the vcctl tests do;
the kubeconfig is a real file the command reads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

JOBS = "/apis/batch.volcano.sh/v1alpha1"


def job(name: str, namespace: str = "default", **labels: str) -> dict[str, Any]:
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": name, "namespace": namespace, "labels": labels, "uid": f"u-{name}",
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"minAvailable": 1, "tasks": [{"replicas": 1}]}}


def kubeconfig(tmp_path: Path) -> str:
    doc = {
        "apiVersion": "v1", "kind": "Config", "current-context": "mine",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "mine", "context": {"cluster": "c", "user": "u", "namespace": "team-a"}},
                     {"name": "other", "context": {"cluster": "c", "user": "u", "namespace": "team-b"}},
                     {"name": "bare", "context": {"cluster": "c", "user": "u"}}],
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def paths(stub: Any) -> list[str]:
    return [r["path"] for r in stub.requests]


OBJECTS = [job("a", "team-a", app="web"), job("b", "team-a", app="db"), job("c", "team-b", app="web")]


@pytest.mark.parametrize(("flags", "namespace"), [
    ((), "team-a"), (("--context", "other"), "team-b"), (("--context", "bare"), "default"),
    (("--context", "other", "-n", "ns"), "ns"),
], ids=["current context", "--context", "a context without a namespace", "-n wins"])
def test_the_contexts_namespace_is_the_default(vcctl: Any, tmp_path: Path, flags: tuple[str, ...],
                                               namespace: str) -> None:
    run, stub = vcctl("job", "list", "--kubeconfig", kubeconfig(tmp_path), *flags, objects=OBJECTS)
    assert run.code == 0, run.err
    assert paths(stub) == [f"{JOBS}/namespaces/{namespace}/jobs"]


def test_no_kubeconfig_means_the_default_namespace(vcctl: Any) -> None:
    _, stub = vcctl("job", "list", objects=OBJECTS)
    assert paths(stub) == [f"{JOBS}/namespaces/default/jobs"]


def test_the_context_flag_picks_the_kubeconfig_context(tmp_path: Path) -> None:
    from scheduler.cli import parser
    from scheduler.cli.ctl import connect

    path = Path(kubeconfig(tmp_path))
    doc = yaml.safe_load(path.read_text())
    doc["clusters"].append({"name": "far", "cluster": {"server": "https://10.9.9.9:6443"}})
    doc["contexts"][1]["context"]["cluster"] = "far"
    path.write_text(yaml.safe_dump(doc))
    args = parser().parse_args(["job", "list", "--kubeconfig", str(path), "--context", "other"])
    assert connect.kube(args).api.configuration.host == "https://10.9.9.9:6443"


@pytest.mark.parametrize("command", [("job", "list"), ("pod", "list", "-A"), ("queue", "list"),
                                     ("jobflow", "list")], ids=" ".join)
def test_l_selects_by_label_at_the_apiserver(vcctl: Any, command: tuple[str, ...]) -> None:
    _, stub = vcctl(*command, "-l", "app=web", objects=OBJECTS)
    queries = [r["query"].get("labelSelector", "") for r in stub.requests]
    assert any("app=web" in q for q in queries), queries


def test_l_lists_only_matching_jobs(vcctl: Any) -> None:
    run, _ = vcctl("job", "list", "-n", "team-a", "-l", "app=web", "-o", "name", objects=OBJECTS)
    assert run.out == "job.batch.volcano.sh/a\n"


def test_o_name(vcctl: Any) -> None:
    run, _ = vcctl("job", "list", "-A", "-o", "name", objects=OBJECTS)
    assert run.out.splitlines() == ["job.batch.volcano.sh/a", "job.batch.volcano.sh/b", "job.batch.volcano.sh/c"]
    queue = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "q1"}}
    run, _ = vcctl("queue", "get", "q1", "-o", "name", objects=[queue])
    assert run.out == "queue.scheduling.volcano.sh/q1\n"


@pytest.mark.parametrize(("template", "out"), [
    ("{.items[*].metadata.name}", "a b"),
    ('{range .items[*]}{.metadata.name}={.metadata.labels.app}{"\\n"}{end}', "a=web\nb=db\n"),
    ("{.items[0].metadata.labels['app']}", "web"),
    ("{.kind}", "List"),
])
def test_o_jsonpath_on_a_list(vcctl: Any, template: str, out: str) -> None:
    run, _ = vcctl("job", "list", "-n", "team-a", "-o", f"jsonpath={template}", objects=OBJECTS)
    assert run.code == 0, run.err
    assert run.out == out


def test_o_jsonpath_on_one_object(vcctl: Any) -> None:
    run, _ = vcctl("job", "view", "a", "-n", "team-a", "-o", "jsonpath={.spec.minAvailable}", objects=OBJECTS)
    assert run.out == "1"


def test_o_json_of_a_list_is_a_list(vcctl: Any) -> None:
    run, _ = vcctl("job", "list", "-n", "team-a", "-o", "json", objects=OBJECTS)
    assert [j["metadata"]["name"] for j in json.loads(run.out)] == ["a", "b"]


@pytest.mark.parametrize("output", ["xml", "jsonpath={.items[?(@.x)]}", "jsonpath={range .items[*]}"])
def test_a_bad_output_is_one_line_and_exit_2(vcctl: Any, output: str) -> None:
    run, stub = vcctl("job", "list", "-o", output, objects=OBJECTS)
    assert run.code == 2
    assert len(run.err.strip().splitlines()) == 1 and "-o/--output" in run.err
    assert stub.requests == []


# ---- job run and the scheduler that claims its name ---------------------------------------------------------

def scheduler_pod(name: str, labels: dict[str, str], args: list[str], phase: str = "Running") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "volcano-py-system", "labels": labels},
            "spec": {"containers": [{"name": "s", "args": args}]}, "status": {"phase": phase}}


OURS = {"app.kubernetes.io/name": "volcano-py-scheduler"}
VOLCANOS = {"app": "volcano-scheduler"}


def test_job_run_names_volcano_pys_scheduler_by_default(vcctl: Any) -> None:
    pod = scheduler_pod("s-1", OURS, ["scheduler", "--scheduler-conf=/c"])
    run, stub = vcctl("job", "run", "-N", "first", objects=[pod])
    (post,) = [r for r in stub.requests if r["method"] == "POST"]
    assert post["body"]["spec"]["schedulerName"] == "volcano-py"
    assert run.code == 0 and run.err == ""  # the chart's scheduler claims volcano-py: nothing to warn of


def test_job_run_says_when_no_scheduler_claims_its_name(vcctl: Any) -> None:
    pods = [scheduler_pod("s-1", OURS, ["scheduler", "--scheduler-name=volcano-py"]),
            scheduler_pod("vc-1", VOLCANOS, ["--scheduler-name", "volcano"], phase="Pending")]
    run, _ = vcctl("job", "run", "-N", "lost", "-S", "volcano", objects=pods)
    assert run.code == 0 and run.out == "run job lost successfully\n"
    (line,) = run.err.splitlines()
    assert line.startswith("warning: no scheduler in the cluster claims schedulerName 'volcano'")
    assert "volcano-py (volcano-py-system/s-1)" in line and "default/lost" in line


def test_job_run_with_no_scheduler_pod_at_all_says_so(vcctl: Any) -> None:
    run, _ = vcctl("job", "run", "-N", "x")
    (line,) = run.err.splitlines()
    assert "'volcano-py'" in line and "no volcano-py or Volcano scheduler pod runs" in line


def test_a_volcano_scheduler_claims_its_default_name(vcctl: Any) -> None:
    pod = scheduler_pod("vc-1", VOLCANOS, ["--logtostderr", "--scheduler-conf=/c"])
    run, _ = vcctl("job", "run", "-N", "x", "-S", "volcano", objects=[pod])
    assert run.err == ""


def test_scheduler_names_are_read_as_go_reads_flags() -> None:
    from scheduler.cli.ctl.schedulers import names_in_args

    assert names_in_args(["scheduler", "--scheduler-name=a", "-scheduler-name", "b"], "d") == ["a", "b"]
    assert names_in_args(["scheduler", "--scheduler-conf=x"], "d") == ["d"]
