"""A workload whose Jobs have `spec.volumes` replays: the simulator does not model volumes
(docs/simulator.md), so a claim, named or to be created, neither crashes the replay nor keeps a job from running."""

from __future__ import annotations

from pathlib import Path

from scheduler.cycle import builtin_default_conf
from scheduler.sim.replay import replay
from scheduler.sim.report import totals
from scheduler.sim.workload import load_cluster, load_workload

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "sim"

WORKLOAD = """
jobs:
- arrival: 0
  duration: 60
  apiVersion: batch.volcano.sh/v1alpha1
  kind: Job
  metadata: {name: with-volumes}
  spec:
    minAvailable: 2
    schedulerName: volcano-py
    volumes:
    - mountPath: /data
      volumeClaimName: shared-data
    - mountPath: /scratch
      volumeClaim:
        accessModes: [ReadWriteOnce]
        storageClassName: local
        resources: {requests: {storage: 1Gi}}
    tasks:
    - replicas: 2
      name: worker
      template:
        spec:
          containers:
          - name: worker
            image: training:latest
            resources: {limits: {nvidia.com/gpu: 1}}
"""


def test_a_workload_with_volume_claims_replays_and_its_job_runs(tmp_path: Path) -> None:
    path = tmp_path / "workload.yaml"
    path.write_text(WORKLOAD)
    outcome = replay(load_cluster(EXAMPLES / "gpu-cluster.yaml"), load_workload(path), builtin_default_conf())
    assert totals(outcome).finished == 1
    (run,) = outcome.runs
    assert run.started is not None
