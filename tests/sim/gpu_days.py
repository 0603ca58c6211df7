"""Simulated days of GPU gangs in queues of equal weight, for the starvation-guard tests
(test_starvation_guard_stall.py, test_no_idle_stall_property.py)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from scheduler.framework.conf import SchedulerConf
from scheduler.sim.replay import Replay, replay
from scheduler.sim.workload import load_cluster, load_workload

NODE_GPUS = 8
# The built-in default's tiers without `overcommit`: its cluster-wide enqueue gate would keep a gang larger than
# the cluster x 1.2 Pending, and these days are about gangs their queue admitted and proportion then holds to a share.
NO_OVERCOMMIT = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
"""


def gpu_job(name: str, queue: str, arrival: int, duration: int, pods: int, gpus: int) -> dict[str, Any]:
    """A Volcano Job of `pods` pods of `gpus` GPUs each, all of them its minimum."""
    return {
        "arrival": arrival, "duration": duration, "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
        "metadata": {"name": name},
        "spec": {"minAvailable": pods, "schedulerName": "volcano-py", "queue": queue, "tasks": [{
            "replicas": pods, "name": "worker", "template": {"spec": {"containers": [{
                "name": "w", "image": "x", "resources": {"limits": {"nvidia.com/gpu": gpus}}}]}}}]}}


def gpu_cluster(nodes: int, queues: Sequence[str]) -> dict[str, Any]:
    """`nodes` nodes of NODE_GPUS GPUs, and the queues, each of weight 1."""
    return {"nodes": [{"name": f"gpu-{i}", "cpu": 64, "memory": "512Gi", "gpu": NODE_GPUS} for i in range(nodes)],
            "queues": [{"name": q, "weight": 1} for q in queues]}


def replay_day(tmp_path: Path, cluster: dict[str, Any], jobs: list[dict[str, Any]], conf: SchedulerConf, *,
               horizon: float, period: float = 1.0) -> Replay:
    """The day replayed from the cluster and workload files, as `volcano-py simulate` reads them."""
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cluster))
    (tmp_path / "w.yaml").write_text(yaml.safe_dump({"jobs": jobs}))
    return replay(load_cluster(tmp_path / "c.yaml"), load_workload(tmp_path / "w.yaml"), conf, period=period,
                  horizon=horizon)
