"""Victim bundles (Volcano's pkg/scheduler/actions/utils/bundle.go): safe and whole, and their order."""

from __future__ import annotations

import math

from scheduler.actions.bundles import BundleKind, allowed_bundles, job_bundles, roi, sort_bundles
from scheduler.api.job import JobInfo, TaskInfo
from scheduler.api.phases import TaskStatus
from scheduler.api.resources import GPU, Resource


def job(name: str, running: int, min_available: int, gpu: int = 1, *, roles: dict[str, int] | None = None,
        role_of: list[str] | None = None) -> JobInfo:
    j = JobInfo(f"default/{name}", name, "default", "default", min_available, dict(roles or {}))
    for i in range(running):
        role = role_of[i] if role_of else ""
        j.add_task(TaskInfo(f"default/{name}-{i}", f"{name}-{i}", "default", j.key,
                            Resource.of(1000, 0, 0, {GPU: gpu * 1000}), role=role, status=TaskStatus.RUNNING))
    return j


def test_a_gang_loses_only_its_surplus_in_the_safe_bundle() -> None:
    j = job("elastic", 5, 2)
    safe, whole = job_bundles(j, list(j.tasks.values()))
    assert (safe.kind, len(safe.tasks)) == (BundleKind.SAFE, 3)
    assert (whole.kind, len(whole.tasks)) == (BundleKind.WHOLE, 2)


def test_a_rigid_gang_has_only_a_whole_bundle() -> None:
    j = job("rigid", 4, 4)
    (whole,) = job_bundles(j, list(j.tasks.values()))
    assert whole.kind == BundleKind.WHOLE and len(whole.tasks) == 4


def test_a_gang_already_below_its_minimum_is_one_safe_bundle() -> None:
    j = job("broken", 2, 4)
    (safe,) = job_bundles(j, list(j.tasks.values()))
    assert safe.kind == BundleKind.SAFE and len(safe.tasks) == 2


def test_a_role_at_its_minimum_stays_out_of_the_safe_bundle() -> None:
    j = job("train", 4, 3, roles={"ps": 1, "worker": 2}, role_of=["ps", "worker", "worker", "worker"])
    safe, whole = job_bundles(j, list(j.tasks.values()))
    assert [t.role for t in safe.tasks] == ["worker"]
    assert sorted(t.role for t in whole.tasks) == ["ps", "worker", "worker"]


def test_role_minimums_are_waived_where_min_available_is_below_their_sum() -> None:
    j = job("elastic", 4, 2, roles={"ps": 1, "worker": 3}, role_of=["ps", "worker", "worker", "worker"])
    safe, _ = job_bundles(j, list(j.tasks.values()))
    assert len(safe.tasks) == 2


def test_a_whole_bundle_survives_only_whole() -> None:
    j = job("rigid", 3, 3)
    bundles = job_bundles(j, list(j.tasks.values()))
    assert allowed_bundles(bundles, {"default/rigid-0", "default/rigid-1"}) == []
    assert len(allowed_bundles(bundles, {t for t in j.tasks})) == 1


def test_a_safe_bundle_is_worth_infinity_and_a_whole_one_what_it_frees_over_what_its_job_holds() -> None:
    need = Resource.of(0, 0, 0, {GPU: 2000})
    elastic = job("elastic", 4, 2)
    safe, whole = job_bundles(elastic, list(elastic.tasks.values()))
    assert roi(safe, need) == math.inf
    assert roi(whole, need) == 2 / 4  # frees 2 of the 2 needed (capped), the job holds 4


def test_whole_bundles_order_by_roi_after_the_victim_job_order() -> None:
    need = Resource.of(0, 0, 0, {GPU: 2000})
    small, big = job("small", 2, 2), job("big", 8, 8)
    bundles = job_bundles(small, list(small.tasks.values())) + job_bundles(big, list(big.tasks.values()))
    ordered = sort_bundles(bundles, need, lambda a, b: False)  # no victim-job preference: ROI decides
    assert [b.job.name for b in ordered] == ["small", "big"]  # 2/2 beats 2/8
    ordered = sort_bundles(bundles, need, lambda a, b: a.name == "big")  # the victim order comes first
    assert [b.job.name for b in ordered] == ["big", "small"]
