"""`simulate --from-openb NODES.csv PODS.csv` replays one day of the Alibaba openb trace (issue 21): each pod a
one-pod Job that arrives when the trace created it and runs as long as it ran there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scheduler.cli import main
from scheduler.sim.openb import DAY, MODEL_LABEL, load_openb
from scheduler.sim.workload import InputError

NODES = """sn,cpu_milli,memory_mib,gpu,model
node-v100,64000,262144,8,V100M32
node-t4,32000,131072,2,T4
"""
HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time"
D1 = int(DAY)
PODS = "\n".join([
    HEADER,
    f"before,1000,1024,1,1000,,LS,Running,{D1 - 500},{D1 + 700},{D1 - 400}",  # running when day 1 starts
    f"shared,2000,2048,1,460,,LS,Running,{D1 + 100},{D1 + 400},{D1 + 100}",  # 0.46 of a GPU
    f"on-t4,1000,1024,2,1000,T4,BE,Running,{D1 + 200},{D1 + 800},{D1 + 250}",
    f"never,1000,1024,4,1000,,BE,Pending,{D1 + 300},{D1 + 900},",  # the trace never scheduled it
    f"gone,1000,1024,1,1000,,LS,Succeeded,10,{D1 - 1},20",  # deleted before day 1
    f"later,1000,1024,1,1000,,LS,Running,{2 * D1 + 5},{2 * D1 + 50},{2 * D1 + 5}",  # day 2
]) + "\n"


@pytest.fixture
def trace(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "nodes.csv").write_text(NODES)
    (tmp_path / "pods.csv").write_text(PODS)
    return tmp_path / "nodes.csv", tmp_path / "pods.csv"


def test_a_day_of_the_trace_is_its_live_pods_as_one_pod_jobs(trace: tuple[Path, Path]) -> None:
    window = load_openb(*trace, day=1)
    assert (window.start, window.horizon, window.alive_at_start) == (DAY, DAY, 1)
    items = {item.name: item for item in window.workload.items}
    assert {name: (i.arrival, i.duration) for name, i in items.items()} == {
        "before": (0.0, 700.0), "shared": (100.0, 300.0), "on-t4": (200.0, 550.0), "never": (300.0, 600.0)}
    limits = {name: i.manifest["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["resources"]["limits"]
              for name, i in items.items()}
    assert limits["shared"] == {"cpu": "2000m", "memory": "2048Mi", "nvidia.com/gpu": "460m"}
    assert limits["never"]["nvidia.com/gpu"] == "4"
    affinity = items["on-t4"].manifest["spec"]["tasks"][0]["template"]["spec"]["affinity"]
    term = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]
    assert term["matchExpressions"] == [{"key": MODEL_LABEL, "operator": "In", "values": ["T4"]}]
    assert {n["metadata"]["labels"][MODEL_LABEL] for n in window.cluster.nodes} == {"V100M32", "T4"}


def test_the_default_day_is_the_last_whole_one(trace: tuple[Path, Path]) -> None:
    assert load_openb(*trace).start == DAY  # the last creation is on day 2


def test_the_replay_places_the_pods_on_the_nodes_their_models_allow(trace: tuple[Path, Path],
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--from-openb", *map(str, trace), "--openb-day", "1", "--json"]) == 0
    (report,) = json.loads(capsys.readouterr().out).values()
    jobs = {job["name"]: job for job in report["jobs"]}
    assert all(job["started"] is not None for job in jobs.values())
    assert jobs["shared"]["ended"] == jobs["shared"]["started"] + 300
    assert report["makespan"] <= DAY + 1


def test_a_pod_list_without_times_cannot_be_replayed(tmp_path: Path, trace: tuple[Path, Path]) -> None:
    pods = tmp_path / "multigpu.csv"
    pods.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1000,1024,1,1000\n")
    with pytest.raises(InputError) as caught:
        load_openb(trace[0], pods)
    assert caught.value.where == "header"
