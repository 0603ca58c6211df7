"""Layer `sim`: the CronJob and JobFlow controllers of the simulated cluster (issue 19).

They run the same pure decisions the real controllers carry out (`scheduler.jobs.cron.decide` and `admit`,
`scheduler.jobs.flow.plan`), on the simulated clock, against the Jobs of the replay as those controllers would
read them from the apiserver: name, owner, creation time and phase. So a CronJob's `concurrencyPolicy` sees
whether its last Job really still runs (it may have waited for room), `Replace` deletes the running Job, and a
JobFlow creates a Job once every Job it depends on has Completed, never before.

Each controller's `step(now, runs)` returns the Jobs to create now (as work items arriving now) and the keys of
the runs to delete; `wake(runs, now)` says when the clock must stop for it next: now when one of its Jobs
changed since its last step, else its next start (None: nothing is due).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from scheduler.api.timestamps import rfc3339
from scheduler.jobs import cron, flow
from scheduler.sim.items import Controlled, WorkItem
from scheduler.sim.workload import Workload

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)  # the simulated clock's 0, as in workload_kinds
DELETED = "Deleted"  # the phase the replay gives a run a controller deleted while it was not finished


class RunView(Protocol):
    """What a controller reads of one run of the replay (`replay.JobRun`)."""

    item: WorkItem
    key: str
    phase: str
    ended: float | None


def at(seconds: float) -> datetime:
    return EPOCH + timedelta(seconds=seconds)


def seconds(t: datetime) -> float:
    return (t - EPOCH).total_seconds()


def job_object(run: RunView) -> dict[str, Any]:
    """The Job as its controller reads it: the replay's phase as `status.state.phase`, its arrival as its
    creation and, once it ended, its end as the last transition."""
    meta = run.item.manifest["metadata"]
    state: dict[str, Any] = {"phase": run.phase}
    if run.ended is not None:
        state["lastTransitionTime"] = rfc3339(at(run.ended).timestamp())
    return {
        "apiVersion": run.item.manifest.get("apiVersion"),
        "kind": "Job",
        "metadata": {**meta, "uid": uid_of("Job", run.key),
                     "creationTimestamp": rfc3339(at(run.item.arrival).timestamp())},
        "status": {"state": state},
    }


def created(item: Controlled) -> dict[str, Any]:
    """The object as the apiserver keeps it once created at its arrival: a uid and a creation time."""
    manifest = copy.deepcopy(item.manifest)
    meta = manifest["metadata"]
    meta["uid"] = uid_of(item.kind, f"{meta['namespace']}/{meta['name']}")
    meta["creationTimestamp"] = rfc3339(at(item.arrival).timestamp())
    return manifest


def uid_of(kind: str, key: str) -> str:
    return f"sim-{kind.lower()}-{key.replace('/', '-')}"


class _Watching:
    """What a controller saw of its Jobs at its last step: a Job whose phase changed since wakes it (as a
    change of its Jobs wakes the real controller through its informer)."""

    jobs: set[str]
    seen: dict[str, str]

    def _seen(self, runs: Mapping[str, RunView]) -> list[dict[str, Any]]:
        self.seen = {k: runs[k].phase for k in self.jobs}
        return [job_object(runs[k]) for k in sorted(self.jobs) if runs[k].phase != DELETED]

    def changed(self, runs: Mapping[str, RunView]) -> bool:
        return any(runs[k].phase != self.seen.get(k) for k in self.jobs)


@dataclass(slots=True)
class CronController(_Watching):
    """One CronJob: creates a Job per start in [arrival, until) that its concurrency policy lets start."""

    cronjob: dict[str, Any]
    arrival: float
    until: float
    duration: float
    jobs: set[str] = field(default_factory=set)  # keys of the runs it made and has not deleted
    seen: dict[str, str] = field(default_factory=dict)
    look_again: float | None = None

    @classmethod
    def of(cls, item: Controlled) -> CronController:
        manifest = created(item)
        return cls(manifest, item.arrival, item.until, item.duration, look_again=item.arrival)

    def step(self, now: float, runs: Mapping[str, RunView]) -> tuple[list[WorkItem], list[str]]:
        if now < self.arrival:
            return [], []
        if now >= self.until:  # `until`: from then on the CronJob is suspended; its Jobs run on
            self.cronjob["spec"] = {**self.cronjob["spec"], "suspend": True}
        mine = self._seen(runs)
        decision = cron.decide(self.cronjob, mine, at(now), UTC)
        doomed: list[str] = []
        for deletion in decision.deletions:
            key = f"{self.cronjob['metadata']['namespace']}/{deletion.name}"
            self.jobs.discard(key)
            doomed.append(key)
        status, created = decision.status, []
        if decision.create is not None and decision.scheduled is not None:
            job = decision.create  # without a uid: the replay names a Job's PodGroup after the Job alone
            key = f"{job['metadata']['namespace']}/{job['metadata']['name']}"
            read_back = {**job, "metadata": {**job["metadata"], "uid": uid_of("Job", key)}}
            status, _ = cron.admit(status, self.cronjob, read_back, decision.scheduled, True)
            created.append(WorkItem(job, now, self.duration))
            self.jobs.add(key)
        self.cronjob["status"] = cron.written(status)
        wake = seconds(decision.look_again) if decision.look_again is not None else None
        self.look_again = wake if wake is not None and wake < self.until else None
        return created, doomed

    def wake(self, runs: Mapping[str, RunView], now: float) -> float | None:
        return now if self.changed(runs) else self.look_again

    def horizon(self) -> float:
        return self.until


@dataclass(slots=True)
class FlowController(_Watching):
    """One JobFlow: creates each entry's Job from its JobTemplate once its targets' Jobs have Completed."""

    jobflow: dict[str, Any]
    arrival: float
    templates: dict[str, dict[str, Any]]
    durations: dict[str, float]
    jobs: set[str] = field(default_factory=set)
    seen: dict[str, str] = field(default_factory=dict)
    started: bool = False

    @classmethod
    def of(cls, item: Controlled, templates: Mapping[str, Controlled]) -> FlowController:
        manifest = created(item)
        names = flow.template_names(manifest)
        return cls(manifest, item.arrival, {n: templates[n].manifest for n in names},
                   {n: templates[n].duration for n in names})

    def step(self, now: float, runs: Mapping[str, RunView]) -> tuple[list[WorkItem], list[str]]:
        if now < self.arrival:
            return [], []
        self.started = True
        mine = self._seen(runs)
        plan = flow.plan(self.jobflow, dict(self.templates), mine, at(now).timestamp())
        namespace = self.jobflow["metadata"]["namespace"]
        doomed = [f"{namespace}/{j['metadata']['name']}" for j in plan.delete]
        self.jobs.difference_update(doomed)
        created = []
        for job in plan.create:
            template = job["metadata"]["annotations"][flow.CREATED_BY_JOB_TEMPLATE].split(".", 1)[1]
            created.append(WorkItem(job, now, self.durations[template]))
            self.jobs.add(f"{namespace}/{job['metadata']['name']}")
        if plan.status is not None:
            self.jobflow["status"] = plan.status
        return created, doomed

    def wake(self, runs: Mapping[str, RunView], now: float) -> float | None:
        if not self.started:
            return self.arrival
        return now if self.changed(runs) else None  # once started, only its Jobs' changes move it

    def horizon(self) -> float:
        return self.arrival

    @property
    def phase(self) -> str:
        return flow.flow_phase(self.jobflow)


Controller = CronController | FlowController


def controllers_of(workload: Workload) -> list[Controller]:
    templates = {(c.manifest["metadata"]["namespace"], c.name): c for c in workload.controlled
                 if c.kind == "JobTemplate"}
    out: list[Controller] = []
    for item in workload.controlled:
        if item.kind == "CronJob":
            out.append(CronController.of(item))
        elif item.kind == "JobFlow":
            namespace = item.manifest["metadata"]["namespace"]
            out.append(FlowController.of(item, {name: t for (ns, name), t in templates.items() if ns == namespace}))
    return out
