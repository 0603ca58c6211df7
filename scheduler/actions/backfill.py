"""Layer `actions`: `backfill` places pods that request no resources (BestEffort) on any node they fit.

1. Visit admitted jobs (not Pending) in JobOrder.
2. Each pending BestEffort task goes to the best node its predicates allow with a free pod slot.
3. Commit per task when the job is ready (BestEffort tasks count as ready for their gang), else discard.
"""

from __future__ import annotations

import functools

from scheduler.api.job import JobInfo
from scheduler.api.phases import PodGroupPhase, TaskStatus
from scheduler.api.reasons import NO_FEASIBLE_NODE, TOO_MANY_PODS, NodeFilter
from scheduler.framework import points as P
from scheduler.framework.session import Session


class Backfill:
    name = "backfill"

    def execute(self, ssn: Session) -> None:
        # 1.
        jobs = [j for j in ssn.jobs.values() if j.pending_best_effort and j.phase != PodGroupPhase.PENDING]
        def compare(a: JobInfo, b: JobInfo) -> int:
            return -1 if ssn.order.job_less(a, b) else (1 if ssn.order.job_less(b, a) else 0)

        for job in sorted(jobs, key=functools.cmp_to_key(compare)):
            if not ssn.faulted(job) and not ssn.deferred(job):  # (deferred: allocate's budget, allocate.py)
                with ssn.guard(job):  # a plugin failing on this job costs this job alone (framework/faults.py)
                    self._backfill(ssn, job)

    def _backfill(self, ssn: Session, job: JobInfo) -> None:
        tasks = [t for t in job.with_status(TaskStatus.PENDING) if t.best_effort and not t.gated]
        for task in ssn.order.task_order(tasks):
            # 2.
            node = ssn.fit.pick_node(task, ssn.fit.fitting_indices(task))
            if node is None:
                reason = TOO_MANY_PODS if ssn.fit.feasible_nodes(task) else NO_FEASIBLE_NODE
                ssn.fit.record_fit_error(task, NodeFilter(reason))
                continue
            # 3.
            stmt = ssn.statement()
            stmt.allocate(task, node)
            if ssn.tiers.run(P.JOB_READY, job):
                stmt.commit()
            else:
                stmt.discard()
