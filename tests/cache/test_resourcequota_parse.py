"""ResourceQuotas and the quota view of a PodGroup's minResources, parsed once at the cache's edge with bounds: a
quantity that does not parse gives a typed reason and one log line, and everything else goes on."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest

from scheduler.api.convert import job_from_podgroup
from scheduler.api.fields import BadValueError, FieldInvalid
from scheduler.api.quota import ResourceQuotaInfo, show_quota, to_nano
from scheduler.cache.parse import ParseCache

G = 10**9


def quota(name: str, hard: Any, used: Any = None, namespace: str = "ml") -> dict[str, Any]:
    status: dict[str, Any] = {"hard": hard}
    if used is not None:
        status["used"] = used
    return {"metadata": {"name": name, "namespace": namespace, "resourceVersion": "1"}, "spec": {"hard": hard},
            "status": status}


def test_a_quota_whose_hard_does_not_parse_is_left_out_with_a_reason_logged_once(
        caplog: pytest.LogCaptureFixture) -> None:
    cache = ParseCache(frozenset({"volcano-py"}), threading.Lock(), lambda *_: None)
    objects = [quota("bad", {"requests.cpu": "four"}), quota("good", {"requests.cpu": "4"}, {"requests.cpu": "1"})]
    with caplog.at_level(logging.WARNING, logger="volcano_py"):
        first = cache.resource_quotas(objects)
        again = cache.resource_quotas(objects)  # the next cycle: the same problem is not logged again
    expected = (ResourceQuotaInfo("ml", "good", {"requests.cpu": 4 * G}, {"requests.cpu": G}),)
    assert first == again == expected
    (reason,) = cache.problems[("ResourceQuota", "ml/bad")]
    assert isinstance(reason, FieldInvalid) and (reason.object_kind, reason.path) == ("ResourceQuota", "status.hard")
    assert reason.fallback == ""  # left out: it limits nothing (the apiserver still enforces it on pods)
    assert "'four' is not a Kubernetes quantity" in reason.problem
    lines = [r for r in caplog.records if "ml/bad" in r.getMessage()]
    assert len(lines) == 1 and "skipping ResourceQuota ml/bad" in lines[0].getMessage()


@pytest.mark.parametrize("status", [{"hard": {"cpu": "1"}, "used": {"cpu": -1}}, {"hard": ["cpu"]},
                                    {"hard": {"cpu": "1e999"}}, {"hard": {"cpu": float("nan")}},
                                    {"hard": {"": "1"}}, {"hard": {f"r{i}": "1" for i in range(300)}}, "x"],
                         ids=["negative used", "a list", "too large", "NaN", "an empty name", "300 names",
                              "no object"])
def test_hostile_quota_status_is_refused_not_raised(status: Any) -> None:
    cache = ParseCache(frozenset({"volcano-py"}), threading.Lock(), lambda *_: None)
    bad = {"metadata": {"name": "bad", "namespace": "ml"}, "status": status}
    assert cache.resource_quotas([bad]) == ()
    assert cache.problems[("ResourceQuota", "ml/bad")]


def test_a_quota_the_controller_has_not_written_yet_limits_nothing() -> None:
    cache = ParseCache(frozenset({"volcano-py"}), threading.Lock(), lambda *_: None)
    fresh = {"metadata": {"name": "new", "namespace": "ml"}, "spec": {"hard": {"cpu": "1"}}}
    assert cache.resource_quotas([fresh]) == (ResourceQuotaInfo("ml", "new", {}, {}),)


def podgroup(min_resources: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "train", "namespace": "ml", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"minMember": 1, "queue": "default", "minResources": min_resources}}


def test_minresources_are_kept_by_exact_name_for_quotas_and_by_resource_for_nodes() -> None:
    job = job_from_podgroup(podgroup({"cpu": "2", "requests.cpu": "2", "limits.memory": "1Gi", "count/pods": "2"}))
    assert dict(job.quota_request or {}) == {"cpu": 2 * G, "requests.cpu": 2 * G, "limits.memory": 2**30 * G,
                                             "count/pods": 2 * G}
    assert job.min_resources is not None and job.min_resources.cpu == 2000


def test_a_quota_key_of_minresources_that_does_not_parse_leaves_the_job_unchecked_with_a_reason() -> None:
    sink: list[FieldInvalid] = []
    job = job_from_podgroup(podgroup({"cpu": "2", "requests.cpu": "lots"}), sink=sink)
    assert job.quota_request is None and job.min_resources is not None  # still scheduled, not held to quotas
    (reason,) = sink
    assert reason.path == "spec.minResources.*"
    assert reason.fallback == "not checked against the namespace's ResourceQuotas"


@pytest.mark.parametrize(("text", "nano"), [("1n", 1), ("1u", 1000), ("500m", 500_000_000), ("2", 2 * G),
                                             ("1Ki", 1024 * G), ("1.5Gi", 3 * 2**29 * G), ("1e3", 1000 * G),
                                             (3, 3 * G), ("9223372036854775807", (2**63 - 1) * G)])
def test_quota_amounts_are_exact(text: Any, nano: int) -> None:
    assert to_nano(text, "cpu") == nano


@pytest.mark.parametrize("text", ["-1", "1e999", str(2**63), "", "١", True, None, [1]])
def test_quota_amounts_out_of_bounds_are_refused(text: Any) -> None:
    with pytest.raises(BadValueError):
        to_nano(text, "cpu")


def test_amounts_are_shown_as_kubernetes_quantities() -> None:
    assert [show_quota("requests.memory", 16 * 2**40 * G), show_quota("requests.cpu", 1500 * 10**6),
            show_quota("count/pods", 3 * G), show_quota("cpu", 7)] == ["16Ti", "1500m", "3", "7n"]
