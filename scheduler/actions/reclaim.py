"""Layer `actions`: `reclaim` — a queue below its deserved share takes resources back from queues above theirs.

1. Reclaimers: starving admitted jobs (as for preempt) whose queue is open and not overused.
2. Visit queues by QueueOrder (the lowest share first), jobs by JobOrder. A task is taken only while its queue
   stays within its deserved share with it (Preemptive), so a reclaimer never ends up above its share.
3. Victims: running tasks of other queues that are `reclaimable`, that the Reclaimable plugins agree on
   (proportion: their queue stays at or above its deserved share without them, so the victim's queue never has
   a reason to reclaim back: no ping-pong), never non-preemptable pods, never a gang broken below minAvailable;
   lowest priority first. Evictions and the reclaimer's pipelined placement share one Statement, committed only
   if the job is pipelined, else discarded.
A task with `preemptionPolicy: Never` reclaims nothing (skipped before Preemptive, as in Volcano's reclaim.go).
"""

from __future__ import annotations

from scheduler.actions.base import round_robin
from scheduler.actions.preempt import preempt_job, starving_jobs
from scheduler.actions.subgroups import sub_group_job
from scheduler.api.job import JobInfo, TaskInfo
from scheduler.api.phases import QueueState
from scheduler.api.queue import QueueInfo
from scheduler.framework import points as P
from scheduler.framework.session import Session


class Reclaim:
    name = "reclaim"

    def execute(self, ssn: Session) -> None:
        # 1.
        by_queue: dict[str, list[JobInfo]] = {}
        for job in starving_jobs(ssn):
            # a job whose sub-groups have a hard topology is placed by allocate alone (actions/subgroups.py)
            if ssn.queues[job.queue].state == QueueState.OPEN and not sub_group_job(job):
                by_queue.setdefault(job.queue, []).append(job)
        # 2.
        for queue, job, _ in round_robin(ssn, by_queue, skip_queue=lambda q: bool(ssn.tiers.run(P.OVERUSED, q))):
            with ssn.guard(job):  # a plugin failing on this job costs this job alone (framework/faults.py)
                self.reclaim_for(ssn, queue, job)

    @staticmethod
    def reclaim_for(ssn: Session, queue: QueueInfo, job: JobInfo) -> bool:
        # 3.
        def eligible(victim: TaskInfo) -> bool:
            owner = ssn.jobs.get(victim.job)
            if owner is None or owner.queue == queue.name:
                return False
            victim_queue = ssn.queues.get(owner.queue)
            return victim_queue is not None and victim_queue.reclaimable

        def admit(task: TaskInfo) -> bool:
            return bool(ssn.tiers.has(P.PREEMPTIVE) and ssn.tiers.run(P.PREEMPTIVE, queue, task.resreq))

        def queue_fits(task: TaskInfo) -> bool:
            return ssn.tiers.run(P.ALLOCATABLE, queue, task).ok

        return preempt_job(ssn, job, eligible, P.RECLAIMABLE, "reclaimed", "Reclaimed", admit, queue_fits)
