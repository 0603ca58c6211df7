"""Layer `plugins`: `priority` orders jobs and tasks by their PriorityClass value (higher first)."""

from __future__ import annotations

from scheduler.api.job import JobInfo, TaskInfo
from scheduler.framework import points as P
from scheduler.framework.plugin import Plugin
from scheduler.framework.session import Session


def _higher_first(a: int, b: int) -> int:
    return -1 if a > b else (1 if a < b else 0)


class PriorityPlugin(Plugin):
    name = "priority"

    def on_session_open(self, ssn: Session) -> None:
        def job_order(a: JobInfo, b: JobInfo) -> int:
            return _higher_first(a.priority, b.priority)

        def task_order(a: TaskInfo, b: TaskInfo) -> int:
            return _higher_first(a.priority, b.priority)

        ssn.register(P.JOB_ORDER, job_order)
        ssn.register(P.TASK_ORDER, task_order)
