"""A workload the apiserver or kubectl would refuse stops the simulator before it runs, naming the fields
(issue 21: `replicas: "two"` was a traceback; `2.5`, `minAvailable: "2"` and `minAvailabel` ran silently)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.sim.workload import InputError, load_workload

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
    (("spec", "minAvailabel"), 2, "spec.minAvailabel"),
    (("spec", "tasks", 0, "replica"), 2, "spec.tasks[0].replica"),
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
