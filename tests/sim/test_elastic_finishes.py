"""An elastic Job (8 replicas, minAvailable 6) on 6 free GPUs starts with 6 and ends `duration` after: the pods
finishing at the end of its work are not a broken gang (the replay took them for one, restarted the work, and
the job never ended), and its 2 extras, bound once the 6 finished, finish at once."""

from __future__ import annotations

from pathlib import Path

import yaml

from scheduler.cycle import load_conf_or_default
from scheduler.sim.replay import replay
from scheduler.sim.workload import load_cluster, load_workload

DURATION = 100


def test_an_elastic_job_runs_with_its_minimum_and_ends_after_its_duration(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text(yaml.safe_dump({
        "nodes": [{"name": "gpu-a", "cpu": 32, "memory": "256Gi", "gpu": 6}],
        "queues": [{"name": "default", "weight": 1}]}))
    (tmp_path / "w.yaml").write_text(yaml.safe_dump({"jobs": [{
        "arrival": 0, "duration": DURATION, "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
        "metadata": {"name": "el"},
        "spec": {"minAvailable": 6, "schedulerName": "volcano-py", "queue": "default", "tasks": [{
            "replicas": 8, "name": "worker", "template": {"spec": {"containers": [{
                "name": "w", "image": "x", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}}]}}]}))
    outcome = replay(load_cluster(tmp_path / "c.yaml"), load_workload(tmp_path / "w.yaml"),
                     load_conf_or_default(None), horizon=1000)
    (run,) = outcome.runs
    assert run.started is not None and run.interrupted == 0
    assert run.phase == "Completed"
    assert run.ended is not None and run.started + DURATION <= run.ended <= run.started + DURATION + 5
