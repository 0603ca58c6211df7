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


def replayed(tmp_path: Path, *items: dict[str, Any], cpu: int = 8) -> list[tuple[str, float, float | None, str]]:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump({"nodes": [{"name": "n", "cpu": cpu}]}))
    result = replay(load_cluster(cluster), load_workload(workload(tmp_path, *items)), builtin_default_conf())
    return [(run.key.split("/")[1], run.item.arrival, run.ended, run.phase) for run in result.runs]


def test_a_cronjob_makes_a_job_per_start_named_as_the_controller_names_them(tmp_path: Path) -> None:
    runs = replayed(tmp_path, cronjob())
    # The simulated clock's 0 is 2026-01-01T00:00Z: 29,453,760 minutes after the Unix epoch. The CronJob is
    # created at 0, and the first start is the first one after its creation (Volcano's mostRecentScheduleTime
    # starts from the schedule's next time after it); the controller looks again 100 ms after a start is due.
    assert [(name, arrival) for name, arrival, _, _ in runs] == [
        ("nightly-29453790", 1800.1), ("nightly-29453820", 3600.1), ("nightly-29453850", 5400.1)]
    assert {phase for *_, phase in runs} == {"Completed"}


def test_forbid_starts_a_missed_start_once_the_last_job_has_finished_never_beside_it(tmp_path: Path) -> None:
    runs = replayed(tmp_path, cronjob(concurrencyPolicy="Forbid", duration=2000))
    assert [name for name, *_ in runs] == ["nightly-29453790", "nightly-29453820", "nightly-29453850"]
    for (_, _, ended, _), (_, arrival, _, _) in zip(runs, runs[1:], strict=False):
        assert ended is not None and arrival > ended  # the 3600 and 5400 starts waited for the Job before them


def test_forbid_with_a_starting_deadline_drops_a_start_it_missed_by_more(tmp_path: Path) -> None:
    runs = replayed(tmp_path, cronjob(concurrencyPolicy="Forbid", duration=2000, startingDeadlineSeconds=60))
    # The 3600 start was forbidden while the first Job ran until 3803; 60 s later than 3600 it is dropped.
    assert [name for name, *_ in runs] == ["nightly-29453790", "nightly-29453850"]


def test_replace_deletes_the_running_job_when_the_next_start_is_due(tmp_path: Path) -> None:
    runs = replayed(tmp_path, cronjob(concurrencyPolicy="Replace", duration=2000))
    assert [(name, phase) for name, _, _, phase in runs] == [
        ("nightly-29453790", "Deleted"), ("nightly-29453820", "Deleted"), ("nightly-29453850", "Completed")]
    for (_, _, ended, _), (_, arrival, _, _) in zip(runs, runs[1:], strict=False):
        assert ended == arrival  # deleted by the start that replaced it


def test_suspend_starts_none(tmp_path: Path) -> None:
    assert replayed(tmp_path, cronjob(suspend=True)) == []


def test_a_bad_schedule_is_one_error_naming_the_field(tmp_path: Path) -> None:
    with pytest.raises(InputError) as err:
        load_workload(workload(tmp_path, cronjob("every day")))
    assert err.value.where == "jobs[0].spec.schedule"


def test_the_replay_runs_them_all(tmp_path: Path) -> None:
    runs = replayed(tmp_path, deployment(), cronjob())
    assert {name: phase for name, *_, phase in runs} == {
        "web": "Completed", **{f"nightly-{m}": "Completed" for m in (29453790, 29453820, 29453850)}}


def template(name: str, duration: float = 60) -> dict[str, Any]:
    return {"apiVersion": "flow.volcano.sh/v1alpha1", "kind": "JobTemplate", "metadata": {"name": name},
            "duration": duration,
            "spec": {"schedulerName": "volcano", "minAvailable": 1,
                     "tasks": [{"name": "t", "replicas": 1, "template": {"spec": {"containers": [CONTAINER]}}}]}}


def jobflow(*flows: dict[str, Any], arrival: float = 10) -> dict[str, Any]:
    return {"apiVersion": "flow.volcano.sh/v1alpha1", "kind": "JobFlow", "metadata": {"name": "pipe"},
            "arrival": arrival, "spec": {"flows": list(flows)}}


def test_a_jobflow_starts_each_job_once_its_targets_completed_never_before(tmp_path: Path) -> None:
    flow = jobflow({"name": "a"}, {"name": "b", "dependsOn": {"targets": ["a"]}},
                   {"name": "c", "dependsOn": {"targets": ["a"]}}, {"name": "d", "dependsOn": {"targets": ["b", "c"]}})
    runs = {name: (arrival, ended, phase) for name, arrival, ended, phase in
            replayed(tmp_path, template("a", 100), template("b", 50), template("c", 300), template("d"), flow)}
    assert set(runs) == {"pipe-a", "pipe-b", "pipe-c", "pipe-d"}
    assert {phase for _, _, phase in runs.values()} == {"Completed"}
    assert runs["pipe-a"][0] == 10.0  # created with the flow
    for job, targets in {"pipe-b": ["pipe-a"], "pipe-c": ["pipe-a"], "pipe-d": ["pipe-b", "pipe-c"]}.items():
        assert all(runs[job][0] > runs[t][1] for t in targets), (job, runs)
    assert runs["pipe-b"][0] == runs["pipe-c"][0]  # both wait for a alone


@pytest.mark.parametrize(("flows", "field"), [
    ([{"name": "a"}, {"name": "x", "dependsOn": {"targets": ["a"]}}], "spec.flows[1].name"),  # no template x
    ([{"name": "a", "dependsOn": {"targets": ["b"]}}, {"name": "b", "dependsOn": {"targets": ["a"]}}],
     "spec.flows"),  # a cycle
])
def test_a_jobflow_that_cannot_run_is_one_error_naming_the_field(tmp_path: Path, flows: list[dict[str, Any]],
                                                                field: str) -> None:
    with pytest.raises(InputError) as err:
        load_workload(workload(tmp_path, template("a"), template("b"), jobflow(*flows)))
    assert field in err.value.fields
