"""`volcano-py simulate` runs the resourcequota plugin: a workload lists ResourceQuotas beside its Volcano Jobs,
the simulator keeps their status as the quota controller would (hard from spec.hard, used from the namespace's
live pods), and a Job whose PodGroup's minResources would pass its namespace's quota waits at enqueue."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.api.reasons import ResourceQuotaExceeded
from scheduler.framework.conf import SchedulerConf
from scheduler.sim.errors import InputError
from scheduler.sim.replay import replay
from scheduler.sim.report import job_rows
from scheduler.sim.workload import load_cluster, load_workload
from scheduler.testing import conf_from_tiers

G = 10**9


def job(name: str, namespace: str, pods: int, arrival: float = 0.0) -> dict[str, Any]:
    container = {"name": "c", "image": "x", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": name, "namespace": namespace}, "arrival": arrival, "duration": 30,
            "spec": {"minAvailable": pods, "queue": "default", "schedulerName": "volcano-py",
                     "tasks": [{"name": "w", "replicas": pods, "template": {"spec": {"containers": [container]}}}]}}


QUOTA = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "compute", "namespace": "team-a"},
         "spec": {"hard": {"requests.cpu": "2", "count/pods": "10"}}}


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump({"nodes": [{"name": "n", "count": 2, "cpu": 16, "memory": "64Gi"}]}))
    workload = tmp_path / "workload.yaml"
    workload.write_text(yaml.safe_dump_all([QUOTA, job("first", "team-a", 1), job("second", "team-a", 2, 1.0),
                                            job("other", "team-b", 4, 1.0)]))
    return cluster, workload


def conf(with_quota: bool) -> SchedulerConf:
    return conf_from_tiers(("priority", "gang"), ("predicates", "proportion", *(("resourcequota",) * with_quota)))


def test_a_job_over_its_namespace_quota_waits_until_the_quota_has_room(files: tuple[Path, Path]) -> None:
    outcome = replay(load_cluster(files[0]), load_workload(files[1]), conf(True))
    rows = {row.name: row for row in job_rows(outcome)}
    first, second, other = rows["first"], rows["second"], rows["other"]
    assert first.started is not None and first.ended is not None and other.started is not None
    assert other.wait is not None and other.wait <= 5  # team-b has no quota: it starts within a few cycles
    # 1 of team-a's 2 cpus is used by `first` while it runs: `second` (2 cpus) starts once `first` has ended
    assert second.started is not None and second.started >= first.ended
    waited = [status for _, status in second.said if status.plugin == "resourcequota"]
    assert waited and waited[0].reasons == (
        ResourceQuotaExceeded("team-a", "compute", "requests.cpu", 2 * G, G, 0, 2 * G),)


def test_without_the_plugin_the_same_workload_ignores_the_quota(files: tuple[Path, Path]) -> None:
    outcome = replay(load_cluster(files[0]), load_workload(files[1]), conf(False))
    rows = {row.name: row for row in job_rows(outcome)}
    assert rows["second"].started is not None and rows["second"].wait is not None and rows["second"].wait <= 5


def test_a_quota_the_scheduler_could_not_read_is_an_input_error(tmp_path: Path) -> None:
    workload = tmp_path / "workload.yaml"
    bad = {**QUOTA, "spec": {"hard": {"requests.cpu": "two"}}}
    workload.write_text(yaml.safe_dump_all([bad, job("first", "team-a", 1)]))
    with pytest.raises(InputError, match="'two' is not a Kubernetes quantity"):
        load_workload(workload)
