"""Deployments, StatefulSets and CronJobs in a simulator workload (issue 19), replayed as the Jobs they make."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.cycle import builtin_default_conf
from scheduler.sim.replay import replay
from scheduler.sim.workload import InputError, load_cluster, load_workload

CONTAINER = {"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}


def workload(tmp_path: Path, *items: dict[str, Any]) -> Path:
    path = tmp_path / "workload.yaml"
    path.write_text(yaml.safe_dump({"jobs": list(items)}))
    return path


def deployment(kind: str = "Deployment", replicas: int = 3, **annotations: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": kind, "arrival": 5, "duration": 100,
            "metadata": {"name": "web", "annotations": annotations},
            "spec": {"replicas": replicas,
                     "template": {"spec": {"schedulerName": "volcano", "containers": [CONTAINER]}}}}


def cronjob(schedule: str = "*/30 * * * *", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "CronJob", "metadata": {"name": "nightly"},
            "until": 7200, "duration": spec.pop("duration", 1000),
            "spec": {"schedule": schedule, **spec, "jobTemplate": {"spec": {
                "schedulerName": "volcano", "minAvailable": 1,
                "tasks": [{"name": "t", "replicas": 1, "template": {"spec": {"containers": [CONTAINER]}}}]}}}}


@pytest.mark.parametrize("kind", ["Deployment", "StatefulSet"])
def test_a_workloads_pods_are_one_gang_with_its_group_min_member_and_queue(tmp_path: Path, kind: str) -> None:
    path = workload(tmp_path, deployment(kind, **{"scheduling.volcano.sh/group-min-member": "2",
                                                  "scheduling.volcano.sh/queue-name": "web"}))
    (item,) = load_workload(path).items
    spec = item.manifest["spec"]
    assert (item.name, item.arrival, item.duration) == ("web", 5.0, 100.0)
    assert (spec["minAvailable"], spec["queue"], spec["tasks"][0]["replicas"]) == (2, "web", 3)


def test_a_template_for_another_scheduler_is_replayed_as_ours_and_said(tmp_path: Path) -> None:
    doc = deployment()
    del doc["spec"]["template"]["spec"]["schedulerName"]
    loaded = load_workload(workload(tmp_path, doc))
    assert loaded.items[0].manifest["spec"]["schedulerName"] == "volcano-py"
    assert [w.rsplit(": ", 2)[-2:] for w in loaded.warnings] == [["none", "replayed as volcano-py's"]]


def test_a_cronjob_makes_a_job_per_start_named_as_the_controller_names_them(tmp_path: Path) -> None:
    items = load_workload(workload(tmp_path, cronjob())).items
    # The simulated clock's 0 is 2026-01-01T00:00Z: 29,453,760 minutes after the Unix epoch.
    assert [(i.name, i.arrival) for i in items] == [
        ("nightly-29453760", 0.0), ("nightly-29453790", 1800.0), ("nightly-29453820", 3600.0),
        ("nightly-29453850", 5400.0)]


def test_forbid_skips_a_start_while_the_last_job_runs_and_suspend_starts_none(tmp_path: Path) -> None:
    forbid = load_workload(workload(tmp_path, cronjob(concurrencyPolicy="Forbid", duration=2000))).items
    assert [i.arrival for i in forbid] == [0.0, 3600.0]  # 1800 and 5400 fall inside a run of 2000 s
    assert load_workload(workload(tmp_path, cronjob(suspend=True))).items == ()


def test_a_bad_schedule_is_one_error_naming_the_field(tmp_path: Path) -> None:
    with pytest.raises(InputError) as err:
        load_workload(workload(tmp_path, cronjob("every day")))
    assert err.value.where == "jobs[0].spec.schedule"


def test_the_replay_runs_them_all(tmp_path: Path) -> None:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump({"nodes": [{"name": "n", "cpu": 8}]}))
    result = replay(load_cluster(cluster), load_workload(workload(tmp_path, deployment(), cronjob())),
                    builtin_default_conf())
    assert {run.key: run.phase for run in result.runs} == {
        "default/web": "Completed", **{f"default/nightly-{m}": "Completed"
                                       for m in (29453760, 29453790, 29453820, 29453850)}}
