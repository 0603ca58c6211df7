"""Layer `plugins`: `sla` — a job that has waited longer than its service level goes first and is let in.

Volcano's sla plugin. The waiting time comes from the job's `sla-waiting-time` annotation (copied onto its
PodGroup), else from the plugin argument `sla-waiting-time`; Go durations (`1h30m`, `90s`). A job with neither
has no SLA and this plugin has no opinion on it.

- JobOrder: a job with an SLA before one without; between two, the earlier deadline (creation + waiting time).
- JobEnqueueable and JobPipelined: once a job has waited its time, PERMIT: it is admitted, and a partial
  placement is kept as a reservation for it within the cycle, instead of being dropped. A vote in an earlier tier
  decides before later tiers are asked (as in Volcano), so put `sla` in a tier above `proportion` and `gang`
  for its PERMIT to count; a REJECT in the same tier still wins.
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.api.decision import ABSTAIN, SUCCESS, Status
from scheduler.api.job import JobInfo
from scheduler.durations import parse_seconds as parse_duration
from scheduler.framework.conf_args import ArgReader
from scheduler.framework.plugin import Plugin, SessionAPI

WAITING_TIME = "sla-waiting-time"


@dataclass(frozen=True, slots=True)
class SlaArgs:
    waiting_time: float | None = None  # seconds, for a job without its own annotation; None: no SLA


class SlaPlugin(Plugin[SlaArgs]):
    name = "sla"

    @classmethod
    def parse_args(cls, reader: ArgReader) -> SlaArgs:
        text = reader.string(WAITING_TIME, "")
        if not text:
            return SlaArgs()
        try:
            seconds = parse_duration(text)
        except ValueError:
            seconds = 0.0
        if seconds <= 0:
            raise reader.fail(WAITING_TIME, "a positive duration such as 1h or 90s")
        return SlaArgs(seconds)

    def on_session_open(self, ssn: SessionAPI) -> None:
        self.ssn = ssn
        self.default = self.args.waiting_time

    def _waiting_time(self, job: JobInfo) -> float | None:
        # The annotation was parsed (a positive, bounded Go duration) when the PodGroup was read; an unreadable
        # one was reported then, once, and reads as None: the plugin's own waiting time applies.
        own = job.sla_waiting
        return own if own is not None else self.default

    def job_order(self, a: JobInfo, b: JobInfo) -> int:
        wait_a, wait_b = self._waiting_time(a), self._waiting_time(b)
        if wait_a is None or wait_b is None:
            return 0 if wait_a is None and wait_b is None else (1 if wait_a is None else -1)
        due_a, due_b = a.creation + wait_a, b.creation + wait_b
        return (due_a > due_b) - (due_a < due_b)

    def job_enqueueable(self, job: JobInfo) -> Status:
        return self._permit_when_overdue(job)

    def job_pipelined(self, job: JobInfo) -> Status:
        return self._permit_when_overdue(job)

    def _permit_when_overdue(self, job: JobInfo) -> Status:
        waiting = self._waiting_time(job)
        if waiting is None or self.ssn.now - job.creation < waiting:
            return ABSTAIN
        return SUCCESS
