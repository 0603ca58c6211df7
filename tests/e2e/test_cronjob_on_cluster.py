"""Volcano's CronJob on a real cluster: Volcano's own example applies (schedulerName aside) and makes Jobs that
the scheduler runs, and its `concurrencyPolicy: Forbid` never has two Jobs active.

The controllers run in-process (`operator.run` on a thread, without a Lease) with the CronJob controller on a
clock the test moves, so a `*/5` schedule is tested without waiting five minutes: the test sets the clock just
past a start and wakes the controller's due-time thread. Everything else is real: the apiserver, the Job
controller and the scheduler (in-process, as in test_controllers), kwok running the pods.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import pytest
import yaml
from controlplane import REPO_ROOT, wait_for
from inprocess import kwok_nodes, queue_status, running_scheduler
from kubernetes import client
from test_controllers import BATCH, TIMEOUT, finish, pods, wait_phase

from scheduler.cache.kube import Kube
from scheduler.controllers.client import Api
from scheduler.controllers.operator import Controllers, build, run

EXAMPLE = "volcano-cronjob-example"


def volcano_snapshot() -> Path:
    """$VOLCANO_SRC, else ../shared beside the checkout, else /work/shared (as tests/test_volcano_metrics.py)."""
    if os.environ.get("VOLCANO_SRC"):
        return Path(os.environ["VOLCANO_SRC"])
    beside = REPO_ROOT.parent / "shared" / "peers" / "volcano"
    return beside if beside.exists() else Path("/work/shared/peers/volcano")


@dataclass
class MovableClock:
    now: float = field(default_factory=time.time)

    def __call__(self) -> float:
        return self.now


@dataclass
class InProcess:
    controllers: Controllers
    clock: MovableClock

    def move_to(self, t: datetime) -> None:
        """The CronJob controller's clock jumps to `t` (never back) and its due-time thread looks at once."""
        self.clock.now = max(self.clock.now, t.timestamp())
        self.controllers.cronjobs.timers.wake()


# ---------------------------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def scheduler(control_plane):
    with running_scheduler(control_plane) as running:
        yield running


@pytest.fixture(scope="module")
def node(control_plane, core_v1):
    with kwok_nodes(core_v1, [f"cron-{uuid.uuid4().hex[:6]}"], gpus=0, cpu="16") as (name,):
        yield name


@pytest.fixture(scope="module")
def controllers(control_plane, custom, scheduler, node):
    """The controllers in-process, the CronJob controller on a clock the test moves. They must stop cleanly."""
    api_client = control_plane.api_client()
    clock = MovableClock()
    built = build(Api(Kube(api_client)), ["volcano-py"], claim_unnamed=False, clock=clock)
    stop, exit_code = threading.Event(), []
    thread = threading.Thread(
        target=lambda: exit_code.append(
            run(
                api_client,
                scheduler_names=["volcano-py"],
                claim_unnamed=False,
                lease=None,
                identity="e2e-cronjob",
                stop=stop,
                controllers=built,
            )
        ),
        name="controllers",
        daemon=True,
    )
    thread.start()
    try:
        wait_for(
            lambda: queue_status(custom, "default").get("state") == "Open",
            TIMEOUT,
            what="controllers up (default queue Open)",
        )
        yield InProcess(built, clock)
    finally:
        stop.set()
        thread.join(TIMEOUT)
        api_client.close()
    assert not thread.is_alive() and exit_code == [0], exit_code


# ---------------------------------------------------------------------------------------------- helpers


def cronjob(custom, namespace: str, name: str) -> dict:
    return custom.get_namespaced_custom_object(BATCH, "v1alpha1", namespace, "cronjobs", name)


def volcano_jobs(custom, namespace: str) -> dict[str, dict]:
    items = custom.list_namespaced_custom_object(BATCH, "v1alpha1", namespace, "jobs")["items"]
    return {j["metadata"]["name"]: j for j in items}


def phase_of(job: dict) -> str:
    return ((job.get("status") or {}).get("state") or {}).get("phase") or ""


def event_reasons(core_v1, namespace: str, name: str) -> list[str]:
    events = core_v1.list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}").items
    return [e.reason for e in events]


def job_for_start(name: str, start: datetime) -> str:
    return f"{name}-{int(start.timestamp()) // 60}"


def next_start(after: datetime, minutes: int) -> datetime:
    """The first multiple of `minutes` past the hour strictly after `after` (a `*/minutes * * * *` start)."""
    t = after.replace(second=0, microsecond=0) + timedelta(minutes=1)
    while t.minute % minutes:
        t += timedelta(minutes=1)
    return t


class NeverTwoActive:
    """Every look at the namespace asserts Forbid's promise: at most one unfinished Job, at most one active."""

    def __init__(self, custom, namespace: str, name: str) -> None:
        self.custom, self.namespace, self.name = custom, namespace, name
        self.looks = 0

    def jobs(self) -> dict[str, dict]:
        found = volcano_jobs(self.custom, self.namespace)
        unfinished = sorted(n for n, j in found.items() if phase_of(j) not in ("Completed", "Failed", "Terminated"))
        active = (cronjob(self.custom, self.namespace, self.name).get("status") or {}).get("active") or []
        assert len(unfinished) <= 1 and len(active) <= 1, (unfinished, active)
        self.looks += 1
        return found


# ---------------------------------------------------------------------------------------------- tests


def test_volcanos_example_runs_its_jobs_and_forbid_never_runs_two(
    control_plane, controllers, custom, core_v1, namespace, tmp_path
):
    example = yaml.safe_load((volcano_snapshot() / "example" / "cronjob" / "cronjob.yaml").read_text())
    example["spec"]["jobTemplate"]["spec"]["schedulerName"] = "volcano-py"  # the one change
    path = tmp_path / "cronjob.yaml"
    path.write_text(yaml.safe_dump(example))
    control_plane.kubectl("apply", "-n", namespace, "-f", str(path))
    created = datetime.fromisoformat(
        cronjob(custom, namespace, EXAMPLE)["metadata"]["creationTimestamp"].replace("Z", "+00:00")
    )
    watch = NeverTwoActive(custom, namespace, EXAMPLE)

    # 1. Its first start (*/5) makes a Job, which the scheduler runs; not before.
    first = next_start(created, 5)
    timers = controllers.controllers.cronjobs.timers
    wait_for(
        lambda: abs((timers.when(f"{namespace}/{EXAMPLE}") or 0) - (first.timestamp() + 0.1)) < 1e-3,
        TIMEOUT,
        what="the controller to look again at the first start",
    )
    assert volcano_jobs(custom, namespace) == {}
    controllers.move_to(first + timedelta(seconds=1))
    first_job = job_for_start(EXAMPLE, first)
    wait_for(lambda: first_job in watch.jobs(), TIMEOUT, what=f"job {first_job}")
    wait_phase(custom, namespace, first_job, "Running", running=1)
    made = volcano_jobs(custom, namespace)[first_job]
    assert made["metadata"]["ownerReferences"][0]["kind"] == "CronJob"
    assert made["metadata"]["ownerReferences"][0]["uid"] == cronjob(custom, namespace, EXAMPLE)["metadata"]["uid"]
    assert made["metadata"]["annotations"]["volcano.sh/cronjob-scheduled-timestamp"] == first.strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )
    status = cronjob(custom, namespace, EXAMPLE)["status"]
    assert [r["name"] for r in status["active"]] == [first_job]
    assert status["lastScheduleTime"] == first.strftime("%Y-%m-%dT%H:%M:%SZ")

    # 2. The next start comes while that Job runs: Forbid skips it, and says so.
    second = first + timedelta(minutes=5)
    controllers.move_to(second + timedelta(seconds=1))
    wait_for(
        lambda: "ForbidConcurrent" in event_reasons(core_v1, namespace, EXAMPLE),
        TIMEOUT,
        what="the ForbidConcurrent event",
    )
    assert sorted(watch.jobs()) == [first_job]

    # 3. The running Job finishes within startingDeadlineSeconds (60) of the skipped start: that start runs now.
    for pod in pods(core_v1, namespace, first_job):
        finish(core_v1, namespace, pod["metadata"]["name"], "Succeeded")
    wait_phase(custom, namespace, first_job, "Completed")
    second_job = job_for_start(EXAMPLE, second)
    wait_for(lambda: second_job in watch.jobs(), TIMEOUT, what=f"job {second_job}")
    wait_phase(custom, namespace, second_job, "Running", running=1)
    status = cronjob(custom, namespace, EXAMPLE)["status"]
    assert [r["name"] for r in status["active"]] == [second_job]
    assert status.get("lastSuccessfulTime")
    assert sorted(watch.jobs()) == sorted([first_job, second_job]) and watch.looks > 0


def test_an_unknown_time_zone_is_one_warning_and_no_job(controllers, custom, core_v1, namespace):
    manifest = {
        "apiVersion": f"{BATCH}/v1alpha1",
        "kind": "CronJob",
        "metadata": {"name": "bad-zone"},
        "spec": {
            "schedule": "*/1 * * * *",
            "timeZone": "Mars/Olympus",
            "jobTemplate": {
                "spec": {
                    "schedulerName": "volcano-py",
                    "minAvailable": 1,
                    "tasks": [
                        {
                            "name": "t",
                            "replicas": 1,
                            "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}},
                        }
                    ],
                }
            },
        },
    }
    custom.create_namespaced_custom_object(BATCH, "v1alpha1", namespace, "cronjobs", manifest)
    wait_for(
        lambda: "InvalidTimeZone" in event_reasons(core_v1, namespace, "bad-zone"),
        TIMEOUT,
        what="the InvalidTimeZone event",
    )
    assert event_reasons(core_v1, namespace, "bad-zone").count("InvalidTimeZone") == 1
    assert volcano_jobs(custom, namespace) == {}
    assert controllers.controllers.cronjobs.timers.when(f"{namespace}/bad-zone") is None  # nothing retries it
    try:
        custom.delete_namespaced_custom_object(BATCH, "v1alpha1", namespace, "cronjobs", "bad-zone")
    except client.ApiException as exc:  # the namespace may already be going
        if exc.status != 404:
            raise
