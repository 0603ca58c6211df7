"""Layer `controllers`: the Volcano CronJob controller (`batch.volcano.sh/v1alpha1` CronJob).

A sync reads the CronJob and its namespace's Jobs fresh from the apiserver, asks `scheduler.jobs.cron.decide`
what to do, and carries it out: the deletions (history limits, `Replace`), the Job for the due start, the status,
the events. It ends by setting the CronJob's next look in a heap of due times (`DueTimes`), which one thread
serves; events of the CronJob and of the Jobs it owns sync it sooner. Syncs of one CronJob never overlap: a sync
asked for while one runs makes that one run again when it ends.

It acts on CronJobs whose Job template is for one of our schedulers (the Job controller's `claims` rule), so a
Volcano controller-manager beside it keeps the others. An invalid schedule or time zone is one Warning event
naming the field, told once; nothing is retried until the CronJob changes. An API error is retried with a
growing delay (Volcano's workqueue rate limiter does that), never by a crash.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, tzinfo
from typing import Any
from zoneinfo import ZoneInfo

from scheduler.api.objects import MutableObj
from scheduler.api.timestamps import rfc3339
from scheduler.cache.kube import KubeError
from scheduler.controllers.client import Api
from scheduler.controllers.due import DueTimes
from scheduler.jobs import cron, keys
from scheduler.jobs.cron import CronDecision
from scheduler.jobs.cron_events import CronEvent, Reason
from scheduler.jobs.cron_schedule import ScheduleError

log = logging.getLogger("volcano_py.controllers.cronjob")

CRONJOB_API_VERSION = keys.JOB_API_VERSION
RETRY_FIRST, RETRY_MAX = 1.0, 300.0  # seconds: an API error's first retry, doubling up to this


def local_zone() -> tzinfo:
    """The controller's own zone, which a CronJob without `timeZone` runs in (Go's time.Local): $TZ, else
    /etc/localtime, else UTC."""
    name = os.environ.get("TZ", "").lstrip(":")
    try:
        if name:
            return ZoneInfo(name)
        with open("/etc/localtime", "rb") as zone_file:
            return ZoneInfo.from_file(zone_file, key="localtime")
    except (KeyError, ValueError, OSError):
        return UTC


class CronJobController:
    def __init__(
        self,
        api: Api,
        claims: Callable[[Mapping[str, Any]], bool],
        *,
        clock: Callable[[], float] = time.time,
        zone: tzinfo | None = None,
    ):
        """`claims(job)`: whether a Job is ours (the Job controller's rule), asked of the CronJob's template."""
        self.api = api
        self.claims_job = claims
        self.clock = clock
        self.zone = zone if zone is not None else local_zone()
        self.timers = DueTimes(clock, self._due)
        self._guard = threading.Lock()
        self._running: set[str] = set()
        self._again: set[str] = set()
        self._seen: dict[str, tuple[str, Any, Any]] = {}  # key -> (uid, generation, (schedule, timeZone))
        self._written: dict[str, Any] = {}  # key -> the status last written
        self._told: dict[str, set[tuple[str, str]]] = {}  # key -> the events of its last sync
        self._failures: dict[str, int] = {}  # key -> API errors in a row
        self._job_phases: dict[str, str] = {}  # job uid -> the phase last seen

    def claims(self, cronjob: Mapping[str, Any]) -> bool:
        template = ((cronjob.get("spec") or {}).get("jobTemplate") or {}).get("spec") or {}
        return self.claims_job({"spec": template})

    def start(self) -> None:
        self.timers.start()

    def stop(self) -> None:
        self.timers.stop()

    # ---- events ------------------------------------------------------------------------------------------------
    def on_cronjob(self, kind: str | None, cronjob: MutableObj) -> None:
        meta = cronjob.get("metadata") or {}
        namespace, name = str(meta.get("namespace")), str(meta.get("name"))
        key = f"{namespace}/{name}"
        if kind == "DELETED" or not self.claims(cronjob):
            self._forget(key)
            return
        spec = cronjob.get("spec") or {}
        seen = (str(meta.get("uid")), meta.get("generation"), (spec.get("schedule"), spec.get("timeZone")))
        with self._guard:
            before = self._seen.get(key)
            self._seen[key] = seen
            ours = self._written.get(key)
        if before == seen and cron.written(cronjob.get("status") or {}) == ours:
            return  # our own status write coming back
        if before is not None and before[0] == seen[0] and before[2] != seen[2] and self._defer(key, cronjob):
            return
        self.sync(namespace, name)

    def on_job(self, kind: str | None, job: MutableObj) -> None:
        """A Job's phase matters to its CronJob when it finishes, and its deletion (history, Replace, a user)."""
        owner = cron.cronjob_owner(job)
        if owner is None:
            return
        meta = job.get("metadata") or {}
        uid, phase = str(meta.get("uid")), cron.job_phase(job)
        with self._guard:
            before = self._job_phases.pop(uid, None) if kind == "DELETED" else self._job_phases.get(uid)
            if kind != "DELETED":
                self._job_phases[uid] = phase
        if kind != "DELETED" and (before == phase or (before is None and not cron.finished(job))):
            return
        self.sync(str(meta.get("namespace")), owner)

    def _defer(self, key: str, cronjob: MutableObj) -> bool:
        """A new schedule or zone is first acted on at its next start, not at once (updateCronJob): a start the
        new schedule had 'missed' is not run. False if the schedule cannot be read (the sync reports it)."""
        try:
            schedule = cron.schedule_of(cronjob, self.zone)
        except ScheduleError:
            return False
        now = datetime.fromtimestamp(self.clock(), UTC)
        status = cronjob.get("status") or {}
        look = cron.next_look(cronjob, status, schedule, now)
        if look is None:
            return False
        self.timers.at(key, look.timestamp())
        return True

    def _forget(self, key: str) -> None:
        self.timers.forget(key)
        with self._guard:
            self._seen.pop(key, None)
            self._written.pop(key, None)
            self._told.pop(key, None)
            self._failures.pop(key, None)

    def _due(self, key: str) -> None:
        namespace, _, name = key.partition("/")
        self.sync(namespace, name)

    # ---- sync --------------------------------------------------------------------------------------------------
    def sync(self, namespace: str, name: str) -> CronDecision | None:
        """Sync the CronJob; None if it is gone or not ours, or if a sync of it was running (that one repeats)."""
        key = f"{namespace}/{name}"
        with self._guard:
            if key in self._running:
                self._again.add(key)
                return None
            self._running.add(key)
        try:
            while True:
                decision = self._sync_safely(namespace, name)
                with self._guard:
                    if key not in self._again:
                        return decision
                    self._again.discard(key)
        finally:
            with self._guard:
                self._running.discard(key)
                self._again.discard(key)

    def _sync_safely(self, namespace: str, name: str) -> CronDecision | None:
        key = f"{namespace}/{name}"
        try:
            decision = self._sync(namespace, name)
        except Exception as exc:  # I/O (or a bug): retried later, never a crash loop
            failures = self._failures.get(key, 0) + 1
            self._failures[key] = failures
            delay = min(RETRY_MAX, RETRY_FIRST * 2 ** (failures - 1))
            if isinstance(exc, (KubeError, OSError)):
                log.warning("cronjob %s: %s; retrying in %.0f s", key, exc, delay)
            else:
                log.exception("cronjob %s: sync failed; retrying in %.0f s", key, delay)
            self.timers.at(key, self.clock() + delay)
            return None
        self._failures.pop(key, None)
        return decision

    def _sync(self, namespace: str, name: str) -> CronDecision | None:
        key = f"{namespace}/{name}"
        cronjob = self.api.cronjob(namespace, name)
        if cronjob is None or (cronjob.get("metadata") or {}).get("deletionTimestamp") or not self.claims(cronjob):
            self._forget(key)
            return None
        cronjob = {**cronjob, "apiVersion": CRONJOB_API_VERSION, "kind": cron.CRONJOB_KIND}
        decision = cron.decide(cronjob, self.api.jobs(namespace), datetime.fromtimestamp(self.clock(), UTC), self.zone)
        events = list(decision.events)
        for deletion in decision.deletions:
            events.append(self._delete(namespace, deletion))
        status = decision.status
        if decision.create is not None and decision.scheduled is not None:
            status, told = self._create(cronjob, status, decision.create, decision.scheduled)
            events += [told] if told is not None else []
        self._write_status(cronjob, status)
        self._tell(key, cronjob, events)
        if decision.look_again is None:
            self.timers.forget(key)
        else:
            self.timers.at(key, decision.look_again.timestamp())
        return decision

    def _delete(self, namespace: str, deletion: cron.Deletion) -> CronEvent:
        try:
            self.api.delete_job(namespace, deletion.name, deletion.uid)  # False: gone already, as good as deleted
        except KubeError as exc:
            if deletion.why is cron.DeleteWhy.REPLACED:
                raise  # the active Job must go before its replacement is made: retry the whole sync
            return CronEvent(Reason.FAILED_DELETE, job=deletion.name, detail=f"HTTP {exc.status}")
        log.info("cronjob job %s/%s deleted (%s)", namespace, deletion.name, deletion.why)
        return CronEvent(Reason.SUCCESSFUL_DELETE, job=deletion.name, detail=str(deletion.why))

    def _create(
        self, cronjob: MutableObj, status: dict[str, Any], job: dict[str, Any], scheduled: datetime
    ) -> tuple[dict[str, Any], CronEvent | None]:
        made = self.api.create(job)
        if made is not None:
            log.info(
                "cronjob %s/%s: created job %s for %s",
                cronjob["metadata"]["namespace"],
                cronjob["metadata"]["name"],
                job["metadata"]["name"],
                cron.timestamp(scheduled),
            )
            return cron.admit(status, cronjob, made, scheduled, created=True)
        # There already (a restart, or the status write of the create before failed), or the namespace is going.
        existing = self.api.job(str(job["metadata"]["namespace"]), str(job["metadata"]["name"]))
        return cron.admit(status, cronjob, existing, scheduled, created=False)

    def _write_status(self, cronjob: MutableObj, status: dict[str, Any]) -> None:
        meta = cronjob["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        wanted = cron.written(status)
        if wanted == cron.written(cronjob.get("status") or {}):
            with self._guard:
                self._written[key] = wanted
            return
        stored = self.api.replace_cronjob_status(str(meta["namespace"]), str(meta["name"]), wanted)
        with self._guard:
            self._written[key] = cron.written(stored.get("status") or {})

    def _tell(self, key: str, cronjob: MutableObj, events: list[CronEvent]) -> None:
        """Each event once while it holds: one told by the previous sync is not told again."""
        said = {(str(e.reason), e.message()) for e in events}
        with self._guard:
            before = self._told.get(key, set())
            self._told[key] = said
        now = rfc3339(self.clock())
        for event in events:
            if (str(event.reason), event.message()) in before:
                continue
            before = before | {(str(event.reason), event.message())}
            if event.type == "Warning":
                log.warning("cronjob %s: %s: %s", key, event.reason, event.message())
            self.api.event(cronjob, event.type, str(event.reason), event.message(), now)
