"""Volcano's CronJob: the pure decision (`scheduler.jobs.cron`) and the controller on the fake API, with a clock
the tests move (no waiting: the due-time heap is run by hand with `run_due`)."""

from __future__ import annotations

import copy
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import yaml
from fake_api import FakeApi

from scheduler.controllers.cronjob import CronJobController
from scheduler.controllers.due import DueTimes
from scheduler.controllers.job import JobController
from scheduler.jobs import cron
from scheduler.jobs.cron import DeleteWhy
from scheduler.jobs.cron_events import CronEvent, Reason
from scheduler.testing import volcano_snapshot

T0 = datetime(2025, 3, 11, 10, 0, tzinfo=UTC)  # the CronJobs' creation
NS = "ns"


def minute(m: int, second: float = 0.0) -> datetime:
    return T0 + timedelta(minutes=m, seconds=second)


def stamp(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def name_at(t: datetime, cronjob: str = "cj") -> str:
    return f"{cronjob}-{int(t.timestamp()) // 60}"


TEMPLATE = {
    "metadata": {"labels": {"team": "a"}, "annotations": {"note": "nightly"}},
    "spec": {
        "schedulerName": "volcano-py",
        "minAvailable": 1,
        "queue": "default",
        "tasks": [{"name": "t", "replicas": 1, "template": {"spec": {"containers": [{"name": "c"}]}}}],
    },
}


def cronjob(name: str = "cj", **spec: Any) -> dict[str, Any]:
    """A CronJob as the apiserver returns it: the CRD's defaults filled in."""
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "CronJob",
        "metadata": {
            "name": name,
            "namespace": NS,
            "uid": f"{name}-uid",
            "generation": 1,
            "creationTimestamp": stamp(T0),
        },
        "spec": {
            "schedule": "*/5 * * * *",
            "concurrencyPolicy": "Allow",
            "suspend": False,
            "successfulJobsHistoryLimit": 3,
            "failedJobsHistoryLimit": 1,
            "jobTemplate": copy.deepcopy(TEMPLATE),
            **spec,
        },
    }


@dataclass
class Clock:
    now: float = T0.timestamp()

    def __call__(self) -> float:
        return self.now


@dataclass
class World:
    """The controller on the fake API; `at(t)` moves the clock and runs what is due."""

    clock: Clock = field(default_factory=Clock)
    api: FakeApi = field(init=False)
    ctl: CronJobController = field(init=False)

    def __post_init__(self) -> None:
        self.api = FakeApi(clock=self.clock)
        self.ctl = self.controller()

    def controller(self) -> CronJobController:
        claims = JobController(self.api, ("volcano-py",)).claims  # type: ignore[arg-type]
        return CronJobController(self.api, claims, clock=self.clock, zone=UTC)  # type: ignore[arg-type]

    def add(self, obj: dict[str, Any]) -> None:
        stored = self.api.put("CronJob", obj)
        self.ctl.on_cronjob(None, copy.deepcopy(stored))

    def update(self, name: str = "cj", **spec: Any) -> None:
        stored = self.api.objects[("CronJob", NS, name)]
        stored["spec"].update(spec)
        stored["metadata"]["generation"] += 1
        self.ctl.on_cronjob("MODIFIED", copy.deepcopy(stored))

    def at(self, t: datetime) -> None:
        self.clock.now = t.timestamp()
        self.ctl.timers.run_due()

    def status(self, name: str = "cj") -> dict[str, Any]:
        return self.api.objects[("CronJob", NS, name)].get("status") or {}

    def jobs(self) -> list[str]:
        return sorted(self.api.of_kind("Job"))

    def unfinished(self) -> list[str]:
        return sorted(n for n, j in self.api.of_kind("Job").items() if not cron.finished(j))

    def finish(self, job: str, phase: str = "Completed") -> None:
        obj = self.api.objects[("Job", NS, job)]
        obj["status"] = {
            "state": {"phase": phase, "lastTransitionTime": stamp(datetime.fromtimestamp(self.clock.now, UTC))}
        }
        self.ctl.on_job("MODIFIED", copy.deepcopy(obj))

    def reasons(self) -> list[str]:
        return [e["reason"] for e in self.api.events]

    def next_look(self, name: str = "cj") -> datetime | None:
        when = self.ctl.timers.when(f"{NS}/{name}")
        return datetime.fromtimestamp(when, UTC) if when is not None else None


# ---- creating Jobs on time ----------------------------------------------------------------------------------
def test_a_cronjob_creates_its_job_at_the_scheduled_minute_and_not_before() -> None:
    w = World()
    w.at(minute(2))
    w.add(cronjob())
    assert w.jobs() == [] and w.next_look() == minute(5, 0.1)
    w.at(minute(5, -0.001))
    assert w.jobs() == []
    w.at(minute(5, 0.1))
    assert w.jobs() == [name_at(minute(5))]
    job = w.api.objects[("Job", NS, name_at(minute(5)))]
    assert job["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "CronJob",
            "name": "cj",
            "uid": "cj-uid",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert job["metadata"]["labels"] == {"team": "a"}
    assert job["metadata"]["annotations"] == {
        "note": "nightly",
        "volcano.sh/cronjob-scheduled-timestamp": "2025-03-11T10:05:00Z",
    }
    assert job["spec"] == TEMPLATE["spec"]
    assert w.status() == {
        "active": [
            {
                "apiVersion": "batch.volcano.sh/v1alpha1",
                "kind": "Job",
                "name": name_at(minute(5)),
                "namespace": NS,
                "uid": job["metadata"]["uid"],
                "resourceVersion": job["metadata"]["resourceVersion"],
            }
        ],
        "lastScheduleTime": stamp(minute(5)),
    }
    assert w.reasons() == [Reason.SUCCESSFUL_CREATE]
    assert w.next_look() == minute(10, 0.1)


def test_allow_runs_a_new_job_beside_the_active_one() -> None:
    w = World()
    w.add(cronjob())
    w.at(minute(5, 0.1))
    w.at(minute(10, 0.1))
    assert w.unfinished() == [name_at(minute(5)), name_at(minute(10))]
    assert [r["name"] for r in w.status()["active"]] == [name_at(minute(5)), name_at(minute(10))]


def test_forbid_skips_while_one_is_active_and_runs_the_missed_start_when_it_finishes() -> None:
    w = World()
    w.add(cronjob(concurrencyPolicy="Forbid"))
    w.at(minute(5, 0.1))
    w.at(minute(10, 0.1))
    assert w.jobs() == [name_at(minute(5))]
    assert w.reasons() == [Reason.SUCCESSFUL_CREATE, Reason.FORBID_CONCURRENT]
    assert w.next_look() == minute(15, 0.1)
    w.at(minute(11))
    w.finish(name_at(minute(5)))
    # The start of 10:10 was missed, not lost: with no startingDeadlineSeconds it runs now (as in Volcano).
    assert w.unfinished() == [name_at(minute(10))]
    assert w.status()["lastSuccessfulTime"] == stamp(minute(11))
    assert [r["name"] for r in w.status()["active"]] == [name_at(minute(10))]
    assert Reason.SAW_COMPLETED in w.reasons()


def test_forbid_with_a_deadline_drops_a_start_that_waited_too_long() -> None:
    w = World()
    w.add(cronjob(concurrencyPolicy="Forbid", startingDeadlineSeconds=30))
    w.at(minute(5, 0.1))
    w.at(minute(10, 0.1))
    w.at(minute(11))
    w.finish(name_at(minute(5)))
    assert w.unfinished() == [] and w.status().get("active") is None
    w.at(minute(15, 0.1))
    assert w.unfinished() == [name_at(minute(15))]


def test_replace_deletes_the_active_job_and_starts_the_new_one() -> None:
    w = World()
    w.add(cronjob(concurrencyPolicy="Replace"))
    w.at(minute(5, 0.1))
    w.at(minute(10, 0.1))
    assert w.jobs() == [name_at(minute(10))]
    assert ("delete", "Job", NS, name_at(minute(5))) in w.api.writes
    assert [r["name"] for r in w.status()["active"]] == [name_at(minute(10))]
    assert w.reasons() == [
        Reason.SUCCESSFUL_CREATE,
        Reason.REPLACE_CONCURRENT,
        Reason.SUCCESSFUL_DELETE,
        Reason.SUCCESSFUL_CREATE,
    ]


def test_suspend_stops_creation_and_resuming_runs_the_latest_missed_start() -> None:
    w = World()
    w.add(cronjob(suspend=True))
    w.at(minute(5, 0.1))
    assert w.jobs() == [] and w.next_look() is None
    w.at(minute(12))
    w.update(suspend=False)
    assert w.jobs() == [name_at(minute(10))]
    assert w.next_look() == minute(15, 0.1)


def test_starting_deadline_seconds_skips_a_start_too_late() -> None:
    late = World()
    late.at(minute(7))
    late.add(cronjob(startingDeadlineSeconds=60))  # the controller was away at 10:05
    assert late.jobs() == [] and late.next_look() == minute(10, 0.1)
    in_time = World()
    in_time.at(minute(7))
    in_time.add(cronjob(startingDeadlineSeconds=180))
    assert in_time.jobs() == [name_at(minute(5))]


def test_more_than_a_hundred_missed_starts_are_said_and_the_latest_runs() -> None:
    w = World()
    w.at(minute(600))  # ten hours of */5: 120 missed starts
    w.add(cronjob())
    assert w.jobs() == [name_at(minute(600))]
    assert w.reasons() == [Reason.TOO_MANY_MISSED, Reason.SUCCESSFUL_CREATE]


# ---- finished Jobs and the history limits --------------------------------------------------------------------
def test_history_limits_delete_the_oldest_finished_jobs() -> None:
    w = World()
    w.add(cronjob(successfulJobsHistoryLimit=2, failedJobsHistoryLimit=1))
    outcomes = ["Completed", "Failed", "Completed", "Failed", "Completed", "Terminated"]
    for i, phase in enumerate(outcomes, start=1):
        w.at(minute(5 * i, 0.1))
        w.at(minute(5 * i, 30))
        w.finish(name_at(minute(5 * i)), phase)
    # Completed at 15 and 25 kept, Failed at 20 kept; a Terminated Job counts in neither history (Volcano).
    assert w.jobs() == sorted(name_at(minute(m)) for m in (15, 20, 25, 30))
    deleted = [n for verb, kind, _, n in w.api.writes if (verb, kind) == ("delete", "Job")]
    assert deleted == [name_at(minute(10)), name_at(minute(5))]  # the second Failed, then the third Completed
    assert w.status()["lastSuccessfulTime"] == stamp(minute(25, 30))
    assert w.status().get("active") is None


def test_a_history_limit_of_zero_keeps_no_finished_job_and_no_start_is_repeated() -> None:
    w = World()
    w.add(cronjob(successfulJobsHistoryLimit=0))
    w.at(minute(5, 0.1))
    w.at(minute(6))
    w.finish(name_at(minute(5)))
    assert w.jobs() == []
    w.at(minute(7))
    w.ctl.sync(NS, "cj")
    assert w.jobs() == []  # the 10:05 start is the last one made: it is not made again


# ---- time zones ------------------------------------------------------------------------------------------------
def test_a_time_zone_shifts_the_schedule() -> None:
    utc, tokyo = World(), World()
    for world, spec in ((utc, {}), (tokyo, {"timeZone": "Asia/Tokyo"})):
        world.add(cronjob(schedule="0 9 * * *", **spec))
    assert utc.next_look() == datetime(2025, 3, 12, 9, 0, 0, 100000, tzinfo=UTC)
    assert tokyo.next_look() == datetime(2025, 3, 12, 0, 0, 0, 100000, tzinfo=UTC)  # 09:00 in Tokyo
    tokyo.at(datetime(2025, 3, 12, 0, 0, 1, tzinfo=UTC))
    job = tokyo.api.of_kind("Job")[name_at(datetime(2025, 3, 12, tzinfo=UTC))]
    assert job["metadata"]["annotations"]["volcano.sh/cronjob-scheduled-timestamp"] == "2025-03-12T09:00:00+09:00"


def test_a_tz_prefix_wins_over_the_time_zone_field_with_a_warning() -> None:
    w = World()
    w.add(cronjob(schedule="TZ=UTC 0 20 * * *", timeZone="Pacific/Honolulu"))
    assert w.next_look() == datetime(2025, 3, 11, 20, 0, 0, 100000, tzinfo=UTC)
    assert w.reasons() == [Reason.UNSUPPORTED_SCHEDULE]


# ---- bad input -------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Invalid:
    name: str
    spec: dict[str, Any]
    reason: Reason
    field: str


INVALID = [
    Invalid("a minute out of range", {"schedule": "61 * * * *"}, Reason.UNPARSEABLE_SCHEDULE, "spec.schedule"),
    Invalid("six fields", {"schedule": "0 0 * * * *"}, Reason.UNPARSEABLE_SCHEDULE, "spec.schedule"),
    Invalid("an unknown time zone", {"timeZone": "Mars/Olympus"}, Reason.INVALID_TIME_ZONE, "spec.timeZone"),
    Invalid(
        "an unknown time zone beside a TZ= prefix",
        {"schedule": "TZ=UTC * * * * *", "timeZone": "Nowhere"},
        Reason.INVALID_TIME_ZONE,
        "spec.timeZone",
    ),
]


@pytest.mark.parametrize("case", INVALID, ids=[c.name for c in INVALID])
def test_bad_input_is_one_warning_naming_the_field_and_nothing_retries(case: Invalid) -> None:
    decision = cron.decide(cronjob(**case.spec), [], minute(5, 1), UTC)
    told = [e for e in decision.events if e.reason == case.reason]
    assert [e.field for e in told] == [case.field] and decision.create is None and decision.look_again is None
    w = World()
    w.add(cronjob(**case.spec))
    w.at(minute(30))
    w.update(concurrencyPolicy="Forbid")  # another change: the same error is not told again
    warnings = [e for e in w.api.events if e["reason"] == case.reason]
    assert [(e["type"], e["message"]) for e in warnings] == [("Warning", told[0].message())]
    assert w.jobs() == [] and w.next_look() is None


def test_fixing_the_schedule_starts_the_cronjob() -> None:
    w = World()
    w.add(cronjob(schedule="every five minutes"))
    w.at(minute(12))
    w.update(schedule="*/5 * * * *")
    assert w.next_look() == minute(15, 0.1) and w.jobs() == []  # a new schedule starts at its next start
    w.at(minute(15, 0.1))
    assert w.jobs() == [name_at(minute(15))]


def test_a_schedule_change_is_first_acted_on_at_its_next_start() -> None:
    w = World()
    w.add(cronjob(schedule="0 * * * *"))
    w.at(minute(32))
    w.update(schedule="*/5 * * * *")  # 10:30 was a start of the new schedule: it is not run late
    assert w.jobs() == [] and w.next_look() == minute(35, 0.1)
    w.at(minute(35, 0.1))
    assert w.jobs() == [name_at(minute(35))]


# ---- restarts, races and API errors ------------------------------------------------------------------------------
def test_a_restarted_controller_does_not_create_a_second_job_for_the_same_start() -> None:
    w = World()
    w.api.failures[("patch", "CronJob")] = 1  # the Job is made, then the status write fails and the process dies
    w.add(cronjob(concurrencyPolicy="Forbid"))
    w.at(minute(5, 0.1))
    assert w.jobs() == [name_at(minute(5))] and w.status() == {}
    w.ctl = w.controller()  # a new process: nothing remembered
    w.at(minute(6))
    w.ctl.on_cronjob(None, copy.deepcopy(w.api.objects[("CronJob", NS, "cj")]))
    assert w.jobs() == [name_at(minute(5))]
    creates = [n for verb, kind, _, n in w.api.writes if (verb, kind) == ("create", "Job")]
    assert creates == [name_at(minute(5))]
    assert [r["name"] for r in w.status()["active"]] == [name_at(minute(5))]
    assert w.status()["lastScheduleTime"] == stamp(minute(5))


def test_an_api_error_is_retried_later_with_a_growing_delay() -> None:
    w = World()
    w.api.failures[("list", "Job")] = 2
    w.at(minute(5, 1))
    w.add(cronjob())
    assert w.next_look() == minute(5, 2)
    w.at(minute(5, 2))
    assert w.next_look() == minute(5, 4)
    w.at(minute(5, 4))
    assert w.jobs() == [name_at(minute(5))] and w.next_look() == minute(10, 0.1)


def test_a_job_of_the_starts_name_owned_by_someone_else_is_reported_and_left() -> None:
    w = World()
    w.api.put(
        "Job",
        {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {"name": name_at(minute(5)), "namespace": NS},
            "spec": {},
        },
    )
    w.add(cronjob())
    w.at(minute(5, 0.1))
    assert w.reasons() == [Reason.FOREIGN_JOB] and w.status() == {}
    assert w.api.objects[("Job", NS, name_at(minute(5)))]["spec"] == {}


def test_an_active_reference_to_a_job_that_is_gone_is_dropped() -> None:
    w = World()
    w.add(cronjob(concurrencyPolicy="Forbid"))
    w.at(minute(5, 0.1))
    gone = w.api.objects.pop(("Job", NS, name_at(minute(5))))
    w.ctl.on_job("DELETED", gone)
    assert w.status().get("active") is None and Reason.STALE_REFERENCE in w.reasons()
    w.at(minute(10, 0.1))
    assert w.jobs() == [name_at(minute(10))]


def test_a_cronjob_for_another_scheduler_is_left_alone() -> None:
    w = World()
    other = cronjob()
    other["spec"]["jobTemplate"]["spec"]["schedulerName"] = "volcano"
    w.add(other)
    w.at(minute(5, 0.1))
    assert w.jobs() == [] and w.next_look() is None and w.api.writes == []


def test_a_job_update_that_keeps_its_phase_does_not_sync() -> None:
    w = World()
    w.add(cronjob())
    w.at(minute(5, 0.1))
    job = w.api.objects[("Job", NS, name_at(minute(5)))]
    job["status"] = {"state": {"phase": "Running"}}
    w.ctl.on_job("MODIFIED", copy.deepcopy(job))
    w.api.failures[("get", "CronJob")] = 1  # a sync now would fail and arm a retry
    w.ctl.on_job("MODIFIED", copy.deepcopy(job))
    assert w.api.failures[("get", "CronJob")] == 1 and w.next_look() == minute(10, 0.1)


# ---- the pure decision ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Due:
    name: str
    now: datetime
    spec: dict[str, Any]
    scheduled: datetime | None
    look_again: datetime | None


DUE = [
    Due("before the first start nothing is due", minute(3), {}, None, minute(5, 0.1)),
    Due("at the first start it is due", minute(5), {}, minute(5), minute(10, 0.1)),
    Due("a missed start with no deadline is due late", minute(7), {}, minute(5), minute(10, 0.1)),
    Due(
        "a missed start within the deadline is due",
        minute(7),
        {"startingDeadlineSeconds": 180},
        minute(5),
        minute(10, 0.1),
    ),
    Due("a missed start past the deadline is not", minute(7), {"startingDeadlineSeconds": 60}, None, minute(10, 0.1)),
    Due("of many missed starts the latest is due", minute(600), {}, minute(600), minute(605, 0.1)),
    Due("@every counts from the creation", minute(89), {"schedule": "@every 30m"}, minute(60), minute(90, 0.1)),
    Due(
        "a TZ= prefix applies",
        minute(610),
        {"schedule": "TZ=UTC 0 20 * * *", "timeZone": "Pacific/Honolulu"},
        minute(600),
        datetime(2025, 3, 12, 20, 0, 0, 100000, tzinfo=UTC),
    ),
    Due("a suspended CronJob has nothing due", minute(5), {"suspend": True}, None, None),
]


@pytest.mark.parametrize("case", DUE, ids=[c.name for c in DUE])
def test_the_start_that_is_due(case: Due) -> None:
    decision = cron.decide(cronjob(**case.spec), [], case.now, UTC)
    assert (decision.scheduled, decision.look_again) == (case.scheduled, case.look_again)
    if case.scheduled is not None:
        assert decision.create is not None and decision.create["metadata"]["name"] == name_at(case.scheduled)


def test_replace_lists_every_active_job_to_delete() -> None:
    cj = cronjob(concurrencyPolicy="Replace")
    jobs = []
    for m in (5, 10):
        job = cron.job_for(cj, minute(m), UTC)
        job["metadata"]["uid"] = f"job-{m}"
        jobs.append(job)
    cj["status"] = {
        "active": [{"name": j["metadata"]["name"], "uid": j["metadata"]["uid"]} for j in jobs],
        "lastScheduleTime": stamp(minute(10)),
    }
    decision = cron.decide(cj, jobs, minute(15), UTC)
    assert [(d.name, d.uid, d.why) for d in decision.deletions] == [
        (name_at(minute(5)), "job-5", DeleteWhy.REPLACED),
        (name_at(minute(10)), "job-10", DeleteWhy.REPLACED),
    ]
    assert decision.status.get("active") == [] and decision.scheduled == minute(15)
    assert (
        CronEvent(Reason.REPLACE_CONCURRENT, detail=f"{name_at(minute(5))}, {name_at(minute(10))}") in decision.events
    )


def test_an_aborted_job_stays_active() -> None:
    cj = cronjob(concurrencyPolicy="Forbid")
    job = cron.job_for(cj, minute(5), UTC)
    job["metadata"]["uid"] = "job-5"
    job["status"] = {"state": {"phase": "Aborted"}}
    cj["status"] = {"active": [{"name": job["metadata"]["name"], "uid": "job-5"}], "lastScheduleTime": stamp(minute(5))}
    decision = cron.decide(cj, [job], minute(10), UTC)
    assert decision.create is None and [e.reason for e in decision.events] == [Reason.FORBID_CONCURRENT]


# ---- Volcano's example -----------------------------------------------------------------------------------------
def test_volcanos_example_makes_its_job_at_its_first_start() -> None:
    path = volcano_snapshot() / "example" / "cronjob" / "cronjob.yaml"
    assert path.exists(), f"{path} is missing: this test needs the Volcano snapshot"
    example = yaml.safe_load(path.read_text())
    example["spec"]["jobTemplate"]["spec"]["schedulerName"] = "volcano-py"
    example["metadata"].update(namespace=NS, uid="example-uid", creationTimestamp=stamp(minute(1)))
    decision = cron.decide(example, [], minute(5, 10), UTC)
    assert decision.create is not None
    assert decision.create["metadata"]["name"] == f"volcano-cronjob-example-{int(minute(5).timestamp()) // 60}"
    assert decision.create["spec"] == example["spec"]["jobTemplate"]["spec"]
    assert decision.look_again == minute(10, 0.1)


def test_the_cronjobs_own_status_write_coming_back_does_not_sync_it_again() -> None:
    w = World()
    w.add(cronjob())
    w.at(minute(5, 0.1))
    w.api.failures[("get", "CronJob")] = 1  # a sync now would fail and arm a retry
    w.ctl.on_cronjob("MODIFIED", copy.deepcopy(w.api.objects[("CronJob", NS, "cj")]))
    assert w.api.failures[("get", "CronJob")] == 1 and w.next_look() == minute(10, 0.1)


def test_the_due_thread_acts_when_the_clock_reaches_a_time() -> None:
    clock, done = Clock(), threading.Event()
    due = DueTimes(clock, lambda key: done.set()).start()
    try:
        due.at("ns/cj", clock.now + 60)
        clock.now += 60
        due.wake()
        assert done.wait(10) and due.when("ns/cj") is None
    finally:
        due.stop()
