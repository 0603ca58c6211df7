"""Layer `actions`: `enqueue` admits Pending PodGroups (phase -> Inqueue) when every gate permits.

1. Collect the Pending jobs by queue.
2. Visit queues and jobs in order; a closed queue admits nothing.
3. Ask JobEnqueueable (plugins vote); on permit move the job to Inqueue, so its controller creates the pods;
   otherwise keep it Pending and remember which gate held it and why, for its condition.
"""

from __future__ import annotations

from scheduler.actions.base import queue_missing, round_robin
from scheduler.api.decision import Code, Status
from scheduler.api.job import JobInfo
from scheduler.api.messages import UNSCHEDULABLE, unschedulable_condition
from scheduler.api.phases import PodGroupPhase, QueueState
from scheduler.api.queue import QueueInfo
from scheduler.api.reasons import QueueClosed
from scheduler.framework import points as P
from scheduler.framework.session import Session

NOT_ENQUEUED = "NotEnqueued"
# The event's reason is Volcano's for a PodGroup that is Pending, Inqueue or Unknown at session close
# (pkg/scheduler/cache/cache.go, RecordJobStatusEvent); tools and Volcano's e2e suites wait for it. The
# condition's reason says more: it was the enqueue gate that held the job.


class Enqueue:
    name = "enqueue"

    def execute(self, ssn: Session) -> None:
        # 1.
        pending: dict[str, list[JobInfo]] = {}
        for job in ssn.jobs.values():
            if job.phase == PodGroupPhase.PENDING and not ssn.faulted(job):
                if job.queue not in ssn.queues:
                    hold(ssn, job, queue_missing(ssn, job, Enqueue.name))
                    continue
                pending.setdefault(job.queue, []).append(job)
        # 2.
        for queue, job, _ in round_robin(ssn, pending):
            with ssn.guard(job):  # a plugin failing on this job costs this job alone (framework/faults.py)
                self.enqueue_job(ssn, queue, job)

    @staticmethod
    def enqueue_job(ssn: Session, queue: QueueInfo, job: JobInfo) -> None:
        if queue.state != QueueState.OPEN:
            hold(ssn, job, Status(Code.UNRESOLVABLE, (QueueClosed(queue.name, queue.state.value),), Enqueue.name))
            return
        # 3.
        verdict = ssn.tiers.run(P.JOB_ENQUEUEABLE, job)
        if verdict.rejected:
            hold(ssn, job, verdict)
            return
        ssn.results.set_phase(job, PodGroupPhase.INQUEUE)
        ssn.tiers.job_enqueued(job)


def hold(ssn: Session, job: JobInfo, status: Status) -> None:
    ssn.results.hold(job, status)
    condition = unschedulable_condition(NOT_ENQUEUED, status)
    ssn.results.set_condition(job, condition, status)
    if condition not in job.conditions:
        ssn.results.event("PodGroup", job.key, "Warning", UNSCHEDULABLE, condition.message)
