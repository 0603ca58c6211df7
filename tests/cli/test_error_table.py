"""What a user who types a wrong thing sees: one line naming what is wrong, exit 2 for their error and 1 for a
failure, 141 quietly when the reader of our output went away, 130 on Ctrl-C; never a traceback (issue 21).

Each case is the whole of stderr, exactly. `{d}` is the case's folder, `{ex}` examples/sim.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler import cli
from scheduler.cli import main
from scheduler.sim import replay as sim_replay

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "sim"
CLUSTER = "nodes:\n- {name: gpu, count: 2, gpu: 8}\n"
CONTAINER = {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": 1}}}


def job(**spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"minAvailable": 1, "tasks": [{"name": "w", "replicas": 1,
                                                            "template": {"spec": {"containers": [CONTAINER]}}}]}
    extra = {k: spec.pop(k) for k in ("arrival", "duration", "kind") if k in spec}
    task = spec.pop("task", {})
    body.update(spec)
    body["tasks"][0].update(task)
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "train"}, "spec": body,
            **extra}


def jobs(*items: dict[str, Any]) -> str:
    return yaml.safe_dump({"jobs": list(items)})


@dataclass(frozen=True, slots=True)
class Case:
    name: str
    argv: tuple[str, ...]
    status: int
    stderr: str  # the whole of it, exactly
    files: dict[str, str] = field(default_factory=dict)


SIM = ("simulate", "{d}/cluster.yaml", "{d}/workload.yaml")


def sim(name: str, status: int, stderr: str, *, cluster: str = CLUSTER, workload: str | None = None,
        extra: tuple[str, ...] = (), files: dict[str, str] | None = None) -> Case:
    return Case(name, (*SIM, *extra), status, stderr,
                {"cluster.yaml": cluster, "workload.yaml": workload or jobs(job()), **(files or {})})


CASES = [
    # ---- files -----------------------------------------------------------------------------------------------
    Case("a missing cluster file", ("simulate", "{d}/nope.yaml", "{ex}/two-gangs.yaml"), 2,
         "volcano-py: error: {d}/nope.yaml: cannot read the file (No such file or directory)"),
    Case("a missing workload file", ("simulate", "{ex}/gpu-cluster.yaml", "{d}/nope.yaml"), 2,
         "volcano-py: error: {d}/nope.yaml: cannot read the file (No such file or directory)"),
    sim("a cluster file that is not YAML", 2,
        "volcano-py: error: {d}/cluster.yaml: line 2: not valid YAML (found character '\\t' that cannot start any "
        "token)", cluster="nodes:\n\t- gpu\n"),
    sim("a workload file that is not YAML", 2,
        "volcano-py: error: {d}/workload.yaml: line 2: not valid YAML (expected the node content, but found "
        "'<stream end>')",
        workload="jobs: [\n"),
    sim("a cluster that is a list", 2,
        "volcano-py: error: {d}/cluster.yaml: expected a mapping with `nodes:`, got list", cluster="- gpu\n"),
    sim("a misspelt key in the cluster", 2,
        "volcano-py: error: {d}/cluster.yaml: node: unknown key (expected nodes, queues, priorityClasses, hyperNodes, "
        "podDisruptionBudgets, resourceSlices, deviceClasses, resourceClaims, resourceClaimTemplates)",
        cluster="node: []\n"),
    sim("a cluster without nodes", 2,
        "volcano-py: error: {d}/cluster.yaml: nodes: expected a non-empty list of nodes or node pools",
        cluster="nodes: []\n"),
    # ---- counts --------------------------------------------------------------------------------------------
    sim("a negative node count", 2, "volcano-py: error: {d}/cluster.yaml: nodes[0].count: expected a whole number >= "
        "1, got -1", cluster="nodes:\n- {name: gpu, count: -1}\n"),
    sim("a fractional node count", 2, "volcano-py: error: {d}/cluster.yaml: nodes[0].count: expected a whole number >= "
        "1, got 1.5", cluster="nodes:\n- {name: gpu, count: 1.5}\n"),
    sim("a GPU count in words", 2, "volcano-py: error: {d}/cluster.yaml: nodes[0]: allocatable.nvidia.com/gpu: "
        "'eight' is not a Kubernetes quantity (expected a number with an optional suffix: m, k, M, G, T, Ki, Mi, Gi, "
        "Ti, or an exponent like 1e3)", cluster="nodes:\n- {name: gpu, gpu: eight}\n"),
    sim("replicas in words", 2, "volcano-py: error: {d}/workload.yaml: jobs[0] (train): spec.tasks[0].replicas: 'two' "
        "is not of type 'integer'", workload=jobs(job(task={"replicas": "two"}))),
    sim("fractional replicas", 2, "volcano-py: error: {d}/workload.yaml: jobs[0] (train): spec.tasks[0].replicas: 2.5 "
        "is not of type 'integer'", workload=jobs(job(task={"replicas": 2.5}))),
    sim("negative replicas", 2, "volcano-py: error: {d}/workload.yaml: jobs[0] (train): spec.tasks[0].replicas: -1 is "
        "less than the minimum of 0", workload=jobs(job(task={"replicas": -1}))),
    sim("minAvailable as a string", 2, "volcano-py: error: {d}/workload.yaml: jobs[0] (train): spec.minAvailable: '2' "
        "is not of type 'integer'", workload=jobs(job(minAvailable="2"))),
    sim("a negative arrival", 2, "volcano-py: error: {d}/workload.yaml: jobs[0].arrival: expected a duration >= 0s "
        "(e.g. 90s, 1h30m, or a number of seconds), got -5", workload=jobs(job(arrival=-5))),
    sim("a duration in words", 2, "volcano-py: error: {d}/workload.yaml: jobs[0].duration: expected a duration >= "
        "0s (e.g. 90s, 1h30m, or a number of seconds), got 'long'", workload=jobs(job(duration="long"))),
    # ---- shapes ---------------------------------------------------------------------------------------------
    sim("a kind the simulator does not replay", 2, "volcano-py: error: {d}/workload.yaml: jobs[0].kind: expected Job, "
        "PodGroup, Queue, ResourceQuota, Deployment, StatefulSet, CronJob, JobFlow or JobTemplate, got 'DaemonSet'",
        workload=jobs(job(kind="DaemonSet"))),
    sim("a job without a name", 2, "volcano-py: error: {d}/workload.yaml: jobs[0].metadata.name: expected a name",
        workload=jobs({**job(), "metadata": {}})),
    sim("the same job twice", 2, "volcano-py: error: {d}/workload.yaml: Job default/train appears twice",
        workload=jobs(job(), job())),
    sim("jobs that are not a list", 2, "volcano-py: error: {d}/workload.yaml: jobs: expected a list of Volcano Jobs",
        workload="jobs: {train: 1}\n"),
    sim("a queue weight in words", 2, "volcano-py: error: {d}/cluster.yaml: queues[0] (team): weight: 'heavy' is not "
        "of type 'integer'", cluster=CLUSTER + "queues:\n- {name: team, weight: heavy}\n"),
    sim("a queue weight of 0", 2, "volcano-py: error: {d}/cluster.yaml: queues[0] (team): weight: 0 is less than the "
        "minimum of 1", cluster=CLUSTER + "queues:\n- {name: team, weight: 0}\n"),
    sim("a misspelt job field is a warning and the run goes on", 0, "warning: {d}/workload.yaml: jobs[0] (train): "
        "spec.minAvailabel: unknown field (ignored)", workload=jobs(job(minAvailabel=1))),
    # ---- confs and flags -------------------------------------------------------------------------------------
    sim("a conf that is not YAML", 2, "volcano-py: error: {d}/bad.conf: invalid YAML in the file at line 1: mapping "
        "values are not allowed here", extra=("--conf", "{d}/bad.conf"), files={"bad.conf": "actions: a: b: c\n"}),
    sim("a conf naming a plugin nobody has", 2, "volcano-py: error: {d}/bad.conf: tiers[0].plugins[0].name: unknown "
        "plugin 'gnag'; did you mean 'gang'?", extra=("--conf", "{d}/bad.conf"),
        files={"bad.conf": 'actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: gnag\n'}),
    Case("conf check of a conf that is not YAML", ("conf", "check", "{d}/bad.conf"), 2,
         "volcano-py: error: {d}/bad.conf: invalid YAML in the file at line 1: mapping values are not allowed here",
         {"bad.conf": "actions: a: b: c\n"}),
    sim("a negative period", 2, "volcano-py simulate: error: argument --period: expected a duration > 0s, got "
        "'-1' (see volcano-py simulate --help)", extra=("--period", "-1")),
    sim("a period in words", 2, "volcano-py simulate: error: argument --period: time: invalid duration "
        "'soon' (expected e.g. 30s, 1m30s or a number of seconds) (see volcano-py simulate --help)",
        extra=("--period", "soon")),
    sim("a report folder that is a file", 2, "volcano-py: error: --report {d}/cluster.yaml: cannot make the folder "
        "(File exists)", extra=("--report", "{d}/cluster.yaml")),
    Case("a trace and a cluster file at once", ("simulate", "{ex}/gpu-cluster.yaml", "--from-openb", "{d}/n.csv",
                                                  "{d}/p.csv"), 2,
         "volcano-py: error: simulate: --from-openb: replaces CLUSTER and WORKLOAD: give one or the other"),
    Case("a pod list without the trace's times", ("simulate", "--from-openb", "{d}/n.csv", "{d}/p.csv"), 2,
         "volcano-py: error: {d}/p.csv: header: missing columns creation_time, deletion_time (an openb pod list has "
         "name, cpu_milli, memory_mib, num_gpu, gpu_milli, creation_time, deletion_time, ...)",
         {"n.csv": "sn,cpu_milli,memory_mib,gpu,model\nn,1000,1024,1,T4\n",
          "p.csv": "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1000,1024,1,1000\n"}),
    sim("a trace's day without the trace", 2, "volcano-py: error: simulate: --openb-day: needs --from-openb "
        "NODES.csv PODS.csv", extra=("--openb-day", "3")),
    Case("no cluster and no trace", ("simulate",), 2,
         "volcano-py: error: simulate: expected CLUSTER and WORKLOAD files (or --from-openb NODES.csv PODS.csv, "
         "or --from-cluster FILE)"),
    Case("a command nobody has", ("simulat",), 2, "volcano-py: error: argument command: invalid choice: 'simulat' "
         "(choose from 'scheduler', 'controllers', 'webhook', 'simulate', 'conf', 'bench', 'explain', 'job', 'queue', "
         "'pod', 'jobflow', 'jobtemplate', 'version', 'completion') (see volcano-py --help)"),
]


def _fill(text: str, d: Path) -> str:
    return text.replace("{d}", str(d)).replace("{ex}", str(EXAMPLES))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_bad_input_is_one_line_and_its_exit_status(case: Case, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    for name, text in case.files.items():
        (tmp_path / name).write_text(text)
    try:
        status = main([_fill(a, tmp_path) for a in case.argv])
    except SystemExit as exc:  # argparse's errors exit from inside parse_args
        status = int(exc.code or 0)
    assert (status, capsys.readouterr().err) == (case.status, _fill(case.stderr, tmp_path) + "\n")


# ---- what is not a file's fault ------------------------------------------------------------------------------


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_no_kubeconfig_is_one_line_and_exit_1(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert main(["queue", "list"]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line == ("volcano-py: error: no cluster to talk to: no kubeconfig (--kubeconfig, $KUBECONFIG or "
                    "~/.kube/config) and not running in a pod")


@pytest.mark.parametrize("command", ["scheduler", "controllers"])
@pytest.mark.parametrize(("text", "detail"), [
    (None, "Invalid kube-config file. No configuration found."),
    ("clusters: [", "while parsing a flow node expected the node content, but found '<stream end>' in"),
])
def test_a_component_without_a_usable_kubeconfig_is_one_line_and_exit_1(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, text: str | None, detail: str) -> None:
    path = tmp_path / "kubeconfig"
    if text is not None:
        path.write_text(text)
    assert main([command, "--kubeconfig", str(path)]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"volcano-py {command}: error: cannot load the kubeconfig {path}: {detail}")


def test_an_unreachable_apiserver_is_one_line_and_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    port = _closed_port()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "x",
        "clusters": [{"name": "c", "cluster": {"server": f"https://127.0.0.1:{port}"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}]}))
    assert main(["job", "list", "--kubeconfig", str(kubeconfig), "--request-timeout", "2"]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (f"volcano-py: error: cannot reach the apiserver: 127.0.0.1:{port}: cannot connect: "
                    "[Errno 111] Connection refused")


def test_ctrl_c_is_one_line_and_exit_130(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def interrupted(*_: object, **__: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(sim_replay, "replay", interrupted)
    assert main(["simulate", str(EXAMPLES / "gpu-cluster.yaml"), str(EXAMPLES / "two-gangs.yaml")]) == 130
    assert capsys.readouterr().err == "volcano-py: interrupted\n"


def test_a_bug_is_one_line_and_exit_1_and_debug_shows_it(monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    def broken(*_: object, **__: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(sim_replay, "replay", broken)
    args = ["simulate", str(EXAMPLES / "gpu-cluster.yaml"), str(EXAMPLES / "two-gangs.yaml")]
    assert main(args) == 1
    assert capsys.readouterr().err == ("volcano-py: error: internal error: RuntimeError: boom (run again with --debug "
                                       "for the traceback, and please report it)\n")
    with pytest.raises(RuntimeError):
        main([*args, "--debug"])


def test_a_missing_matplotlib_names_the_extra_before_any_replay(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` raises ImportError
    replays: list[object] = []
    monkeypatch.setattr(sim_replay, "replay", lambda *a, **k: replays.append(a))
    args = ["simulate", str(EXAMPLES / "gpu-cluster.yaml"), str(EXAMPLES / "two-gangs.yaml"), "--report", str(tmp_path)]
    assert main(args) == 2 and replays == []
    assert capsys.readouterr().err == ("volcano-py: error: --report needs matplotlib, which is not installed: "
                                       "pip install 'volcano-py[report]'\n")


def test_a_closed_output_pipe_ends_quietly() -> None:
    """`volcano-py simulate ... | head -1`: the reader is gone before we write (its end is closed before we
    start), so the first write fails; the command ends with 141 and says nothing of it."""
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "scheduler.cli", "simulate", str(EXAMPLES / "gpu-cluster.yaml"),
             str(EXAMPLES / "two-gangs.yaml")], stdout=write, stderr=subprocess.PIPE, text=True, timeout=120,
            env={**os.environ, "PYTHONPATH": str(Path(cli.__file__).parents[2])})
    finally:
        os.close(write)
    # Nothing about the pipe: on a slow machine the only lines are the progress reporter's (cli/simulate.py's
    # first line comes 0.8 s after start, to stderr, before the result is written).
    assert done.returncode == 141
    assert [line for line in done.stderr.splitlines() if not line.startswith("simulate ")] == []
