"""A Job sync that fails on an API error runs again with backoff, as Volcano's Job controller requeues it
(pkg/controllers/job/job_controller.go, processNextReq: AddRateLimited): kopf only logs a watch handler's error,
so without the retry a Job whose pod creates failed would wait for an event that never comes."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest
from fake_api import FakeApi

from scheduler.controllers.job import JobController
from scheduler.controllers.timers import RETRY_MOST, AlreadySaidError, Retries


class ManualTimers:
    """Timers the test fires by hand: (key, purpose) -> (delay, action), the earlier one kept as `Timers` does."""

    def __init__(self) -> None:
        self.armed: dict[tuple[str, str], tuple[float, Callable[[], None]]] = {}

    def arm(self, key: str, purpose: str, delay: float, action: Callable[[], None]) -> None:
        self.armed.setdefault((key, purpose), (delay, action))

    def cancel(self, key: str) -> None:
        for k in [k for k in self.armed if k[0] == key]:
            del self.armed[k]

    def fire(self, key: str, purpose: str) -> float:
        delay, action = self.armed.pop((key, purpose))
        action()
        return delay


def job(replicas: int) -> dict[str, Any]:
    container = {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": "train", "namespace": "ns", "uid": "u1"},
            "spec": {"schedulerName": "volcano-py", "queue": "default", "minAvailable": replicas,
                     "tasks": [{"name": "w", "replicas": replicas, "template": {"spec": {"containers": [container]}}}]}}


def controller(api: FakeApi) -> tuple[JobController, ManualTimers]:
    ctl = JobController(api, clock=lambda: 1_800_000_000.0)  # type: ignore[arg-type]
    timers = ManualTimers()
    ctl.timers = timers  # type: ignore[assignment]
    ctl.retries = Retries(timers)  # type: ignore[arg-type]
    return ctl, timers


def admitted(api: FakeApi, ctl: JobController, replicas: int) -> None:
    """The Job's PodGroup made and moved to Inqueue (as the scheduler's enqueue does), so pods may be created."""
    api.put("Job", job(replicas))
    ctl.reconcile("ns", "train")
    (pg,) = api.of_kind("PodGroup").values()
    pg["status"] = {"phase": "Inqueue"}


def test_pod_creates_that_fail_are_made_by_the_retry_and_no_pod_twice() -> None:
    api = FakeApi()
    ctl, timers = controller(api)
    admitted(api, ctl, 4)
    api.failures[("create", "Pod")] = 2
    assert ctl.reconcile("ns", "train") is None  # failed: no decision carried out in full
    assert len(api.of_kind("Pod")) < 4 and ctl.retries.failures("ns/train") == 1
    assert timers.fire("ns/train", "retry") == 0.5
    assert sorted(api.of_kind("Pod")) == [f"train-w-{i}" for i in range(4)]
    creates = [w for w in api.writes if w[:2] == ("create", "Pod")]
    assert len(creates) == 4, creates  # each pod created once
    assert ctl.retries.failures("ns/train") == 0 and ("ns/train", "retry") not in timers.armed


def failing_status_writes(times: int) -> tuple[FakeApi, JobController, ManualTimers]:
    """A one-pod Job synced once while its status writes fail `times` times in a row."""
    api = FakeApi()
    ctl, timers = controller(api)
    api.put("Job", job(1))
    api.failures[("patch", "JobStatus")] = times
    ctl.reconcile("ns", "train")
    return api, ctl, timers


def test_a_status_write_that_keeps_failing_is_retried_with_doubling_backoff_up_to_the_cap() -> None:
    api, ctl, timers = failing_status_writes(9)
    delays = [timers.fire("ns/train", "retry") for _ in range(9)]
    assert delays == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, RETRY_MOST, RETRY_MOST, RETRY_MOST]
    assert api.objects[("Job", "ns", "train")]["status"]["state"]["phase"] == "Pending"  # the 10th write landed
    assert ("ns/train", "retry") not in timers.armed and ctl.retries.failures("ns/train") == 0


def test_a_deleted_job_has_nothing_left_to_retry() -> None:
    api, ctl, timers = failing_status_writes(1)
    assert ("ns/train", "retry") in timers.armed
    ctl.on_job("DELETED", api.objects[("Job", "ns", "train")])
    assert timers.armed == {} and ctl.retries.failures("ns/train") == 0


def test_a_sync_that_fails_on_a_bug_is_one_line_without_debug_and_a_traceback_with_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Issue 31: no traceback reaches a user who did not ask for it; with debug logging it does."""
    from scheduler.controllers.timers import log_failure

    logger = logging.getLogger("volcano_py.test.sync")
    try:
        int("x" * 10_000)  # an object the controller cannot read, say: a long message, cut short
    except ValueError as exc:
        failure = exc
    logger.setLevel(logging.INFO)
    with caplog.at_level(logging.INFO, logger=logger.name):
        log_failure(logger, "sync of job ns/j failed", failure, 0.5)
    (record,) = caplog.records
    assert record.exc_info is None and "ValueError" in record.getMessage() and len(record.getMessage()) < 500
    caplog.clear()
    logger.setLevel(logging.DEBUG)
    with caplog.at_level(logging.DEBUG, logger=logger.name):
        log_failure(logger, "sync of job ns/j failed", failure, 0.5)
    (record,) = caplog.records
    assert record.exc_info is not None and record.exc_info[1] is failure


def test_a_failure_already_said_on_the_job_retries_at_debug_only(caplog: pytest.LogCaptureFixture) -> None:
    """A refused pod create is said on the Job once (a FailedCreate condition and event, and one line): its
    retries do not say it again at warning level (make fuzz-api: 7 lines for one Job in 20 cycles)."""
    from scheduler.cache.kube import KubeError
    from scheduler.controllers.timers import log_failure

    logger = logging.getLogger("volcano_py.test.noted")
    logger.setLevel(logging.DEBUG)
    refused = KubeError(422, "POST", "/api/v1/namespaces/ns/pods", b'{"message": "must be an integer"}')
    with caplog.at_level(logging.DEBUG, logger=logger.name):
        log_failure(logger, "sync of job ns/j failed", AlreadySaidError(str(refused)), 0.5)
        log_failure(logger, "sync of job ns/j failed", KubeError(500, "POST", "/x", b""), 0.5)
    assert [r.levelno for r in caplog.records] == [logging.DEBUG, logging.WARNING]
