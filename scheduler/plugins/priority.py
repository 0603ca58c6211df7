"""Layer `plugins`: `priority` orders jobs and tasks by their PriorityClass value (higher first).

Preemptable: a task of another job may be evicted only for a job of strictly higher priority (within
one job, only for a task of strictly higher priority), so equal priorities never evict each other.
Evictable (gangpreempt): only a lower-priority job's tasks; gangreclaim is not priority's to judge.
JobStarving: an admitted job with fewer tasks placed or waiting than it has (an elastic job short of replicas).
"""

from __future__ import annotations

from collections.abc import Sequence

from scheduler.api.job import JobInfo, TaskInfo
from scheduler.framework import points as P
from scheduler.framework.conf_args import NoArgs
from scheduler.framework.evictable import EvictionContext, EvictionKind
from scheduler.framework.plugin import Plugin, SessionAPI


def _task_priority_key(task: TaskInfo) -> int:
    """TaskOrder by priority, higher first."""
    return -task.priority


def _job_priority_key(job: JobInfo) -> int:
    """JobOrder by priority, higher first."""
    return -job.priority


class PriorityPlugin(Plugin[NoArgs]):
    name = "priority"

    def on_session_open(self, ssn: SessionAPI) -> None:
        self.ssn = ssn

    def job_order(self, a: JobInfo, b: JobInfo) -> int:
        return P.compare(_job_priority_key(a), _job_priority_key(b))

    def job_order_key(self, job: JobInfo) -> int:
        return _job_priority_key(job)

    def task_order(self, a: TaskInfo, b: TaskInfo) -> int:
        return P.compare(_task_priority_key(a), _task_priority_key(b))

    def task_order_key(self, task: TaskInfo) -> int:
        return _task_priority_key(task)

    def preemptable(self, preemptor: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
        """Tasks of lower-priority jobs, and lower-priority tasks of the preemptor's own job."""
        jobs = self.ssn.jobs
        job = jobs.get(preemptor.job)
        priority = job.priority if job is not None else preemptor.priority
        out = []
        for task in candidates:
            if task.job == preemptor.job:
                if task.priority < preemptor.priority:
                    out.append(task)
                continue
            owner = jobs.get(task.job)
            if owner is not None and owner.priority < priority:
                out.append(task)
        return out

    def job_starving(self, job: JobInfo) -> bool:
        return job.ready_task_num() + job.waiting_task_num() < len(job.tasks)

    def evictable(self, ctx: EvictionContext, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
        """Gang eviction (Volcano's priority UnifiedEvictableFn, plugins/priority/priority.go): gangpreempt takes
        only tasks of a job of lower priority than the preemptor's; gangreclaim is about fair shares, so priority
        lets every candidate go."""
        if ctx.kind == EvictionKind.GANG_RECLAIM:
            return list(candidates)
        jobs = self.ssn.jobs
        return [t for t in candidates if t.job in jobs and jobs[t.job].priority < ctx.job.priority]
