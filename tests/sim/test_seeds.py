"""The seed articles' YAML loads into the simulator unchanged and behaves as the articles describe."""

from __future__ import annotations

from pathlib import Path

from scheduler.api.reasons import OvercommitLimit
from scheduler.api.resources import GPU
from scheduler.cycle import builtin_default_conf
from scheduler.sim.replay import replay
from scheduler.sim.workload import ClusterSpec, Workload, load_workload
from scheduler.testing import node_object

SEEDS = Path(__file__).resolve().parents[2] / "examples" / "seeds"


def gpu_cluster(*gpus: int) -> ClusterSpec:
    return ClusterSpec(tuple(node_object(f"n{i}", gpu=g) for i, g in enumerate(gpus)), (), {})


def only(workload: Workload, name: str) -> Workload:
    return Workload(tuple(i for i in workload.items if i.name == name), workload.queues)


def test_every_seed_file_loads() -> None:
    for path in sorted(SEEDS.glob("*.yaml")):
        assert load_workload(path).items, path


def test_seed_003_distributed_training_binds_nothing_on_3_free_gpus() -> None:
    workload = only(load_workload(SEEDS / "seed-003-jobs.yaml"), "distributed-training")
    outcome = replay(gpu_cluster(3), workload, builtin_default_conf(), horizon=120)
    assert outcome.cluster.bind_log == []
    assert outcome.cluster.used_gpus() == 0
    assert outcome.runs[0].started is None
    # Held at enqueue by overcommit, which opens tier 2 of the default conf as in Volcano: the cluster's 3 GPUs
    # x overcommit-factor 1.2 = 3.6 admit no job of 4 (0.4 short).
    limits = [r for r in outcome.cluster.reasons("distributed-training") if isinstance(r, OvercommitLimit)]
    assert [(r.resource, r.capacity, r.total, r.short) for r in limits] == [(GPU, 3_600, 4_000, 400)]


def test_seed_003_distributed_training_binds_all_4_at_once_on_4_gpus_and_they_show_as_used() -> None:
    workload = only(load_workload(SEEDS / "seed-003-jobs.yaml"), "distributed-training")
    outcome = replay(gpu_cluster(4), workload, builtin_default_conf(), horizon=30)
    times = {record.time for record in outcome.cluster.bind_log}
    assert len(outcome.cluster.bind_log) == 4 and len(times) == 1
    assert outcome.cluster.used_gpus() == 4000
    assert outcome.partial_cycles == 0


def test_seed_004_master_and_worker_start_together_with_pod_level_requests() -> None:
    workload = load_workload(SEEDS / "seed-004-job.yaml")
    tiny = ClusterSpec((node_object("small", cpu="150m"), node_object("other", cpu="150m")), (), {})
    outcome = replay(tiny, workload, builtin_default_conf(), horizon=30)
    assert len(outcome.cluster.bind_log) == 2
    assert len({record.time for record in outcome.cluster.bind_log}) == 1
    assert sorted(r.node for r in outcome.cluster.bind_log) == ["other", "small"]


def test_seed_003_full_file_runs_every_job_without_a_partial_gang() -> None:
    workload = load_workload(SEEDS / "seed-003-jobs.yaml")
    outcome = replay(gpu_cluster(8, 8), workload, builtin_default_conf())
    assert all(r.ended is not None for r in outcome.runs)
    assert outcome.partial_cycles == 0
    assert {q["metadata"]["name"] for q in workload.queues} == {"team-a", "high-priority", "low-priority"}


def test_seed_000_podgroup_of_64_gpus_waits_on_a_16_gpu_cluster() -> None:
    workload = load_workload(SEEDS / "seed-000-podgroup.yaml")
    outcome = replay(gpu_cluster(8, 8), workload, builtin_default_conf(), horizon=10)
    pg = outcome.cluster.podgroup("llm-training-group")
    assert pg["spec"]["minAvailable"] == 64
    assert outcome.cluster.bind_log == []
