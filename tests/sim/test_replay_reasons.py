"""Every job that waited or never started says why, from the scheduler's typed reasons (issue 21: a 99-GPU pod
on a 16-GPU cluster read `Pending (never started)`, the same as a job in a queue that does not exist)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.api import reasons as R
from scheduler.api.decision import Code, Status
from scheduler.cli import main
from scheduler.cycle import builtin_default_conf
from scheduler.sim.replay import replay
from scheduler.sim.report import job_rows
from scheduler.sim.workload import load_cluster, load_workload

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "sim"


def _job(name: str, gpu: int, queue: str = "default") -> dict[str, Any]:
    container = {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": gpu}}}
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": name},
            "spec": {"minAvailable": 1, "queue": queue,
                     "tasks": [{"name": "w", "replicas": 1, "template": {"spec": {"containers": [container]}}}]}}


@pytest.fixture
def stuck(tmp_path: Path) -> tuple[Path, Path]:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump({"nodes": [{"name": "gpu", "count": 2, "gpu": 8}]}))
    workload = tmp_path / "workload.yaml"
    workload.write_text(yaml.safe_dump({"jobs": [_job("huge", 99), _job("lost", 1, queue="nope")]}))
    return cluster, workload


def test_a_pod_larger_than_the_cluster_and_a_missing_queue_give_different_reasons(stuck: tuple[Path, Path]) -> None:
    outcome = replay(load_cluster(stuck[0]), load_workload(stuck[1]), builtin_default_conf())
    rows = {row.name: row for row in job_rows(outcome)}
    assert all(row.never_started for row in rows.values())
    huge, lost = rows["huge"].decision, rows["lost"].decision
    assert huge is not None and lost is not None
    # The default conf is Volcano's: overcommit opens tier 2, so its gate holds the job before proportion's queue
    # check is asked: 99 GPUs requested against the cluster's 16 x overcommit-factor 1.2 = 19.2.
    (limit,) = huge.reasons
    assert isinstance(limit, R.OvercommitLimit)
    assert (limit.requested, limit.cluster, limit.capacity, limit.total) == (99_000, 16_000, 19_200, 99_000)
    assert lost.code is Code.UNRESOLVABLE and lost.reasons == (R.QueueMissing("nope"),)


def test_a_job_that_waited_keeps_the_reason_it_waited_for_after_it_started() -> None:
    outcome = replay(load_cluster(EXAMPLES / "gpu-cluster.yaml"), load_workload(EXAMPLES / "two-gangs.yaml"),
                     builtin_default_conf())
    rows = {row.name: row for row in job_rows(outcome)}
    assert rows["llama-a"].decision is None  # bound in its first cycles: nothing held it
    waited = rows["llama-b"].decision
    assert rows["llama-b"].ended is not None and waited is not None
    # 12 GPUs x overcommit-factor 1.2 = 14.4 hold llama-a's 8 but not llama-b's 8 more (16: 1.6 short).
    (limit,) = waited.reasons
    assert isinstance(limit, R.OvercommitLimit)
    assert (limit.capacity, limit.total, limit.short) == (14_400, 16_000, 1_600)


def test_the_json_carries_the_reasons_as_kind_and_fields(stuck: tuple[Path, Path],
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", str(stuck[0]), str(stuck[1]), "--json"]) == 0
    (report,) = json.loads(capsys.readouterr().out).values()
    jobs = {job["name"]: job for job in report["jobs"]}
    assert jobs["lost"]["never_started"] is True
    assert Status.from_json(jobs["lost"]["decision"]).reasons == (R.QueueMissing("nope"),)
    assert jobs["huge"]["decision"]["reasons"][0]["kind"] == "OvercommitLimit"
    assert jobs["huge"]["decision"]["reasons"][0]["requested"] == 99_000
