"""Layer `plugins`: `drf` — dominant resource fairness between jobs.

A job's dominant share is the largest fraction of the cluster (the allocatable of every node) it holds on any
one resource; JobOrder puts the job with the lower dominant share first, so a job holding little goes before
one holding much. Shares follow allocations made during the session. Like `proportion`, the `pods` count takes
no part. Preemptable: a task may be evicted for a preemptor whose job, holding the preemptor's request too,
would still have a lower dominant share than the victim's job keeps without the victim (Volcano's rule), so
evictions level shares and never reverse them. (Namespace and hierarchical fairness: not here.)
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from scheduler.api.job import JobInfo, TaskInfo
from scheduler.api.resources import Resource
from scheduler.framework import points as P
from scheduler.framework.conf_args import NoArgs
from scheduler.framework.plugin import Plugin, SessionAPI
from scheduler.plugins.shares import held_by, session_total, share_of, without_pods


class DrfPlugin(Plugin[NoArgs]):
    name = "drf"

    def on_session_open(self, ssn: SessionAPI) -> None:
        self.total = session_total(ssn)
        # What each job holds: kept from the last session for the jobs that did not change (`framework/carry.py`)
        changes = ssn.changes
        store = changes.store(self.name) if changes.keeps else {}
        held: dict[str, Resource] | None = store.get("held")
        if changes.since is None or held is None:
            held = {uid: without_pods(job.allocated()) for uid, job in ssn.jobs.items()}
        else:
            for uid in changes.since:
                job = ssn.jobs.get(uid)
                if job is None:
                    held.pop(uid, None)
                else:
                    held[uid] = without_pods(job.allocated())
        if changes.keeps:
            store["held"] = held
            held = dict(held)  # the session's own, which its placements change
        self.allocated: dict[str, Resource] = held
        # each job's dominant share, worked out when JobOrder first asks for it (a pure function of the two)
        self.shares: dict[str, Fraction] = {}

    def job_order(self, a: JobInfo, b: JobInfo) -> int:
        return P.compare(self._share(a.key), self._share(b.key))

    def job_order_key(self, job: JobInfo) -> Fraction:
        """JobOrder's key: the lower dominant share first."""
        return self._share(job.key)

    def _share(self, job: str) -> Fraction:
        share = self.shares.get(job)
        if share is None:
            share = self.shares[job] = share_of(self.allocated.get(job, Resource()), self.total)
        return share

    def preemptable(self, preemptor: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
        mine = self.allocated.get(preemptor.job, Resource()) + without_pods(preemptor.resreq)
        share = share_of(mine, self.total)
        left: dict[str, Resource] = {}
        victims = []
        for task in candidates:
            after = left.get(task.job, self.allocated.get(task.job, Resource())) - without_pods(task.resreq)
            if share < share_of(after, self.total):
                left[task.job] = after
                victims.append(task)
        return victims

    def on_allocate(self, task: TaskInfo) -> None:
        self._change(task.job, without_pods(task.resreq))

    def on_allocate_many(self, tasks: Sequence[TaskInfo]) -> None:
        """`on_allocate` for each of `tasks`, which are one job's with one request (`EventHandler.allocate_many`)."""
        self._change(tasks[0].job, held_by(tasks))

    def on_deallocate(self, task: TaskInfo) -> None:
        self._change(task.job, Resource() - without_pods(task.resreq))

    def _change(self, job: str, delta: Resource) -> None:
        self.allocated[job] = self.allocated.get(job, Resource()) + delta
        self.shares.pop(job, None)  # computed when JobOrder next asks
