"""The simulator: replay semantics, the per-pod baseline, and the demo's claim."""

from __future__ import annotations

from pathlib import Path

from scheduler.cycle import builtin_default_conf
from scheduler.sim.naive import per_pod_cycle
from scheduler.sim.replay import build_cluster, replay
from scheduler.sim.report import render, totals
from scheduler.sim.workload import load_cluster, load_workload

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "sim"


def test_the_demo_runs_both_gangs_one_after_the_other_with_no_partial_gang() -> None:
    spec = load_cluster(EXAMPLES / "gpu-cluster.yaml")
    workload = load_workload(EXAMPLES / "two-gangs.yaml")
    outcome = replay(spec, workload, builtin_default_conf())
    t = totals(outcome)
    assert t.finished == t.jobs == 3
    assert t.partial_gang_cycles == 0
    a, b = (next(r for r in outcome.runs if r.item.name == n) for n in ("llama-a", "llama-b"))
    assert a.started is not None and b.started is not None
    assert b.started >= a.started + a.item.duration  # 12 GPUs: one 8-GPU gang at a time


def test_the_per_pod_baseline_deadlocks_the_same_workload() -> None:
    spec = load_cluster(EXAMPLES / "gpu-cluster.yaml")
    workload = load_workload(EXAMPLES / "two-gangs.yaml")
    outcome = replay(spec, workload, scheduler=per_pod_cycle)
    t = totals(outcome)
    assert t.stalled and t.finished == 0
    assert t.partial_gang_cycles > 0
    assert t.gpu_held > 0.9 and t.gpu_utilisation == 0.0


def test_the_clock_jumps_over_idle_time() -> None:
    spec = load_cluster(EXAMPLES / "gpu-cluster.yaml")
    workload = load_workload(EXAMPLES / "two-gangs.yaml")
    outcome = replay(spec, workload, builtin_default_conf())
    assert outcome.end >= 1200 and outcome.cycles < 100


def test_the_report_names_every_job_and_the_totals() -> None:
    spec = load_cluster(EXAMPLES / "gpu-cluster.yaml")
    workload = load_workload(EXAMPLES / "two-gangs.yaml")
    text = render(replay(spec, workload, builtin_default_conf()), "volcano-py")
    for needle in ("llama-a", "llama-b", "notebook", "GPUs doing work", "wait mean / p95", "partly bound gang  0"):
        assert needle in text


def test_the_teams_example_shows_what_capacity_changes_over_proportion() -> None:
    """examples/sim/teams-*: by weight (proportion) product gets half the cluster back and its third gang waits
    for the first two; by declared deserved shares (capacity) it gets its 24 GPUs back at once."""
    from scheduler.cycle import load_conf

    spec = load_cluster(EXAMPLES / "teams-cluster.yaml")
    workload = load_workload(EXAMPLES / "teams-workload.yaml")
    waits = {}
    for name in ("proportion", "capacity"):
        outcome = replay(spec, workload, load_conf(str(EXAMPLES / f"{name}.conf")))
        assert totals(outcome).finished == 4 and totals(outcome).partial_gang_cycles == 0
        waits[name] = {r.item.name: r.started - r.item.arrival for r in outcome.runs if r.started is not None}
    assert sorted(waits["proportion"][f"train-{i}"] for i in (1, 2, 3))[-1] >= 1800  # one gang waits its turn
    assert max(waits["capacity"][f"train-{i}"] for i in (1, 2, 3)) < 60


def _write(tmp_path: Path, name: str, doc: object) -> Path:
    import yaml

    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc))
    return path


def test_a_volcano_example_shaped_job_starts_and_running_for_ever_is_not_stalled(tmp_path: Path) -> None:
    """Volcano's examples select `kubernetes.io/os: linux` and request ephemeral-storage, which every kubelet
    reports: simulated nodes carry both. A job with no duration runs for ever, which is not a stall."""
    cluster = _write(tmp_path, "cluster.yaml", {"nodes": [{"name": "n", "count": 1, "cpu": 8, "memory": "32Gi"}]})
    container = {"name": "c", "image": "nginx",
                 "resources": {"requests": {"cpu": "100m", "ephemeral-storage": "1Gi"}}}
    job = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "nginx"},
           "spec": {"minAvailable": 2, "schedulerName": "volcano", "tasks": [{
               "name": "web", "replicas": 2,
               "template": {"spec": {"nodeSelector": {"kubernetes.io/os": "linux"}, "containers": [container]}}}]}}
    workload = _write(tmp_path, "workload.yaml", {"jobs": [job]})
    outcome = replay(load_cluster(cluster), load_workload(workload), builtin_default_conf(), horizon=30)
    assert [r.started is not None for r in outcome.runs] == [True]
    assert not outcome.stalled


def test_a_cluster_file_may_hold_hypernodes_and_the_snapshot_carries_them(tmp_path: Path) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(
        "nodes: [{name: gpu, count: 2, gpu: 8}]\n"
        "hyperNodes:\n"
        "- metadata: {name: rack-1}\n"
        "  spec: {tier: 1, members: [{type: Node, selector: {regexMatch: {pattern: '^gpu-'}}}]}\n"
    )
    spec = load_cluster(path)
    cluster = build_cluster(spec, load_workload(EXAMPLES / "two-gangs.yaml"))
    assert [h["metadata"]["name"] for h in cluster.snapshot().hypernodes] == ["rack-1"]
