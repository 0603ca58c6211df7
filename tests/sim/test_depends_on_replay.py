"""A Job with task launch order (dependsOn) runs end to end in the simulator: workers first, then the master."""

from __future__ import annotations

from pathlib import Path

import yaml

from scheduler.cycle import builtin_default_conf
from scheduler.sim.replay import replay
from scheduler.sim.report import totals
from scheduler.sim.workload import load_cluster, load_workload

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "sim"


def test_the_master_is_bound_after_its_workers_and_the_job_finishes(tmp_path: Path) -> None:
    def task(name: str, replicas: int, **extra: object) -> dict[str, object]:
        container = {"name": name, "image": "mpi", "resources": {"limits": {"nvidia.com/gpu": 1}}}
        return {"name": name, "replicas": replicas, "template": {"spec": {"containers": [container]}}, **extra}

    job = {
        "arrival": 0, "duration": 600, "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
        "metadata": {"name": "lm-mpi"},
        "spec": {"schedulerName": "volcano-py", "tasks": [
            task("mpimaster", 1, dependsOn={"name": ["mpiworker"]}),
            task("mpiworker", 4),
        ]},
    }
    path = tmp_path / "mpi.yaml"
    path.write_text(yaml.safe_dump({"jobs": [job]}))
    outcome = replay(load_cluster(EXAMPLES / "gpu-cluster.yaml"), load_workload(path), builtin_default_conf())
    assert totals(outcome).finished == 1
    binds = {r.task: r.time for r in outcome.cluster.bind_log}
    workers = [binds[f"default/lm-mpi-mpiworker-{i}"] for i in range(4)]
    assert binds["default/lm-mpi-mpimaster-0"] > max(workers)
