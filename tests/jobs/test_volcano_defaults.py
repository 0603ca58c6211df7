"""Volcano's mutating-webhook defaults for a Job (pkg/webhooks/admission/jobs/mutate/mutate_job.go), applied by
the CRD's `default:` where a schema can say it and by `normalize_job` otherwise (issue 16; docs/volcano-defaults.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from fake_api import FakeApi

from scheduler.controllers.job import JobController
from scheduler.jobs import normalize_job, podgroup_for

REPO = Path(__file__).resolve().parents[2]


def task(name: str = "w", replicas: int | None = 2, **extra: Any) -> dict[str, Any]:
    t: dict[str, Any] = {"template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}, **extra}
    if name:
        t["name"] = name
    if replicas is not None:
        t["replicas"] = replicas
    return t


def job(tasks: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "j", "namespace": "ns", "uid": "u"}, "spec": {"tasks": tasks, **spec}}


@dataclass(frozen=True)
class Case:
    name: str
    job: dict[str, Any]
    path: tuple[Any, ...]
    expected: Any


CASES = [
    Case("an empty queue is the default queue", job([task()], queue=""), ("spec", "queue"), "default"),
    Case("an empty schedulerName is ours", job([task()], schedulerName=""), ("spec", "schedulerName"), "volcano-py"),
    Case("maxRetry 0 is unset: 3", job([task()], maxRetry=0), ("spec", "maxRetry"), 3),
    Case("a task's maxRetry 0 is unset: 3", job([task(maxRetry=0)]), ("spec", "tasks", 0, "maxRetry"), 3),
    Case("a task's maxRetry is kept", job([task(maxRetry=5)]), ("spec", "tasks", 0, "maxRetry"), 5),
    Case("an unnamed task is default<index>", job([task("a"), task("")]), ("spec", "tasks", 1, "name"), "default1"),
    Case("a task's minAvailable is its replicas", job([task(replicas=3)]), ("spec", "tasks", 0, "minAvailable"), 3),
    Case("a task's minAvailable 0 is kept (only unset is defaulted)", job([task(replicas=3, minAvailable=0)]),
         ("spec", "tasks", 0, "minAvailable"), 0),
    Case("a partitioned task's minAvailable is minPartitions x partitionSize",
         job([task(replicas=8, partitionPolicy={"totalPartitions": 4, "partitionSize": 2, "minPartitions": 3})]),
         ("spec", "tasks", 0, "minAvailable"), 6),
    Case("a partitioned task with minPartitions 0 falls back to replicas",
         job([task(replicas=8, partitionPolicy={"totalPartitions": 4, "partitionSize": 2, "minPartitions": 0})]),
         ("spec", "tasks", 0, "minAvailable"), 8),
    Case("the job's minAvailable is the sum of the task minimums",
         job([task("a", 4, minAvailable=1), task("b", 3)]), ("spec", "minAvailable"), 4),
    Case("the job's minAvailable 0 is unset", job([task("a", 2)], minAvailable=0), ("spec", "minAvailable"), 2),
    Case("hostNetwork pods resolve cluster names", job([task(template={"spec": {"hostNetwork": True}})]),
         ("spec", "tasks", 0, "template", "spec", "dnsPolicy"), "ClusterFirstWithHostNet"),
    Case("pytorch brings svc", job([task()], plugins={"pytorch": ["--port=23456"]}), ("spec", "plugins"),
         {"pytorch": ["--port=23456"], "svc": []}),
    Case("tensorflow brings svc", job([task()], plugins={"tensorflow": []}), ("spec", "plugins"),
         {"tensorflow": [], "svc": []}),
    Case("ray brings svc", job([task()], plugins={"ray": []}), ("spec", "plugins"), {"ray": [], "svc": []}),
    Case("mpi brings svc and ssh", job([task()], plugins={"mpi": []}), ("spec", "plugins"),
         {"mpi": [], "svc": [], "ssh": []}),
    Case("a user's svc flags are kept", job([task()], plugins={"mpi": [], "svc": ["--publish-not-ready-addresses"]}),
         ("spec", "plugins", "svc"), ["--publish-not-ready-addresses"]),
    Case("env alone brings nothing", job([task()], plugins={"env": []}), ("spec", "plugins"), {"env": []}),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_normalize_applies_volcanos_webhook_default(case: Case) -> None:
    out: Any = normalize_job(case.job)
    for key in case.path:
        out = out[key]
    assert out == case.expected


def test_every_task_has_a_min_task_member() -> None:
    """With task minAvailable defaulted, the PodGroup's minTaskMember names every task, as Volcano's does."""
    pg = podgroup_for(job([task("a", 2), task("b", 3, minAvailable=1)], minAvailable=2))
    assert pg["spec"]["minTaskMember"] == {"a": 2, "b": 1} and pg["spec"]["minMember"] == 2


def test_a_claimed_job_without_scheduler_gets_the_controllers_first_name() -> None:
    api = FakeApi()
    unnamed = job([task("w", 1)])
    api.put("Job", unnamed)
    api.put("PodGroup", {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                         "metadata": {"name": "j-u", "namespace": "ns", "ownerReferences": [{"uid": "u"}]},
                         "spec": {"minMember": 1}, "status": {"phase": "Inqueue"}})
    ctl = JobController(api, ("volcano", "volcano-py"), claim_unnamed=True, clock=lambda: 0.0)  # type: ignore[arg-type]
    ctl.reconcile("ns", "j")
    assert [p["spec"]["schedulerName"] for p in api.of_kind("Pod").values()] == ["volcano"]


@pytest.mark.parametrize(("names", "claimed"), [
    (("volcano",), True),  # the drop-in: Volcano's webhook would have named it `volcano`
    (("volcano-py",), False),  # beside Volcano, an unnamed Job is Volcano's to take
])
def test_a_job_without_scheduler_is_claimed_by_the_volcano_drop_in_only(names: tuple[str, ...], claimed: bool) -> None:
    ctl = JobController(FakeApi(), names, clock=lambda: 0.0)  # type: ignore[arg-type]
    assert ctl.claims(job([task("w", 1)])) is claimed


def _crd_spec(path: str) -> dict[str, Any]:
    crd = yaml.safe_load((REPO / "crds" / path).read_text())
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]  # type: ignore[no-any-return]


CRD_DEFAULTS = [
    (("queue",), "default"),
    (("maxRetry",), 3),
    (("tasks", "items", "maxRetry"), 3),
    (("networkTopology", "mode"), "hard"),
    (("tasks", "items", "partitionPolicy", "minPartitions"), 0),
    (("tasks", "items", "partitionPolicy", "networkTopology", "mode"), "hard"),
]


@pytest.mark.parametrize("path, value", CRD_DEFAULTS, ids=[".".join(p) for p, _ in CRD_DEFAULTS])
def test_the_job_crd_carries_the_schema_expressible_defaults(path: tuple[str, ...], value: Any) -> None:
    node: Any = _crd_spec("batch.volcano.sh_jobs.yaml")
    for depth, key in enumerate(path):
        node = node[key]
        if depth < len(path) - 1 and "properties" in node:
            node = node["properties"]
    assert node["default"] == value
