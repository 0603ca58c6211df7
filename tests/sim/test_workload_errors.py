"""A workload the apiserver would refuse stops the simulator before it runs, naming the fields; a field the CRD
does not name is a warning naming it, and the run goes on (issue 21: `replicas: "two"` was a traceback; `2.5`,
`minAvailable: "2"` and `minAvailabel` ran silently). Queues are checked against their CRD too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.sim.workload import InputError, load_cluster, load_workload

JOB: dict[str, Any] = {
    "arrival": 0, "duration": 60,
    "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "train"},
    "spec": {"minAvailable": 2, "tasks": [{"name": "w", "replicas": 2, "template": {"spec": {
        "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]}}}]},
}


def _write(tmp_path: Path, job: dict[str, Any]) -> Path:
    path = tmp_path / "workload.yaml"
    path.write_text(yaml.safe_dump({"jobs": [job]}))
    return path


def _with(path: tuple[str | int, ...], value: object) -> dict[str, Any]:
    job: dict[str, Any] = yaml.safe_load(yaml.safe_dump(JOB))
    node: Any = job
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return job


@pytest.mark.parametrize(("path", "value", "field"), [
    (("spec", "tasks", 0, "replicas"), "two", "spec.tasks[0].replicas"),
    (("spec", "tasks", 0, "replicas"), 2.5, "spec.tasks[0].replicas"),
    (("spec", "minAvailable"), "2", "spec.minAvailable"),
    (("spec", "maxRetry"), -1, "spec.maxRetry"),
])
def test_a_field_the_crd_refuses_is_named(tmp_path: Path, path: tuple[str | int, ...], value: object,
                                          field: str) -> None:
    with pytest.raises(InputError) as caught:
        load_workload(_write(tmp_path, _with(path, value)))
    assert caught.value.fields == (field,)
    assert caught.value.where == "jobs[0] (train)"


def test_a_valid_job_and_volcanos_own_fields_load(tmp_path: Path) -> None:
    job = _with(("spec", "tasks", 0, "dependsOn"), {"name": ["other"]})
    job["spec"]["tasks"].append({"name": "other", "replicas": 1, "template": JOB["spec"]["tasks"][0]["template"]})
    job["spec"].update({"minAvailable": 1, "queue": "default", "networkTopology": {"mode": "soft"},
                        "policies": [{"event": "PodEvicted", "action": "RestartJob"}]})
    (item,) = load_workload(_write(tmp_path, job)).items
    assert item.manifest["metadata"]["name"] == "train"


@pytest.mark.parametrize(("path", "field"), [
    (("spec", "minAvailabel"), "spec.minAvailabel"),
    (("spec", "tasks", 0, "replica"), "spec.tasks[0].replica"),
])
def test_an_unknown_field_is_a_warning_naming_it_and_the_job_loads(tmp_path: Path, path: tuple[str | int, ...],
                                                                   field: str) -> None:
    source = _write(tmp_path, _with(path, 2))
    workload = load_workload(source)
    assert [item.name for item in workload.items] == ["train"]
    assert workload.warnings == (f"{source}: jobs[0] (train): {field}: unknown field (ignored)",)


QUEUE = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "team"},
         "spec": {"weight": 1}}


@pytest.mark.parametrize(("spec", "field"), [
    ({"weight": "heavy"}, "spec.weight"),
    ({"weight": 1, "reclaimable": "yes"}, "spec.reclaimable"),
    ({"weight": 1, "capability": {"cpu": [1]}}, "spec.capability.cpu"),
])
def test_a_queue_the_crd_refuses_is_named(tmp_path: Path, spec: dict[str, Any], field: str) -> None:
    path = tmp_path / "workload.yaml"
    path.write_text(yaml.safe_dump({"jobs": [{**QUEUE, "spec": spec}]}))
    with pytest.raises(InputError) as caught:
        load_workload(path)
    assert caught.value.fields == (field,) and caught.value.where == "jobs[0] (team)"


def test_a_queue_with_an_unknown_field_is_warned_about_in_either_form(tmp_path: Path) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump({"nodes": [{"name": "n"}], "queues": [
        {"name": "short", "wieght": 2},
        {**QUEUE, "spec": {"weight": 1, "capabilty": {"cpu": 4}}},
    ]}))
    spec = load_cluster(path)
    assert [q["metadata"]["name"] for q in spec.queues] == ["short", "team"]
    assert spec.warnings == (f"{path}: queues[0] (short): wieght: unknown field (ignored)",
                             f"{path}: queues[1] (team): spec.capabilty: unknown field (ignored)")


def test_a_short_form_queue_names_the_key_the_user_wrote(tmp_path: Path) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump({"nodes": [{"name": "n"}], "queues": [{"name": "short", "weight": 2.5}]}))
    with pytest.raises(InputError) as caught:
        load_cluster(path)
    assert caught.value.fields == ("spec.weight",)
    assert str(caught.value) == f"{path}: queues[0] (short): weight: 2.5 is not of type 'integer'"
