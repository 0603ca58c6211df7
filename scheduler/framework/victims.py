"""Layer `framework`: the rules every eviction obeys, whatever plugins a config lists.

Preempt and reclaim ask plugins (Preemptable / Reclaimable) which tasks may go, but two rules are the
actions' own and no config can switch them off:

- a pod annotated `volcano.sh/preemptable: "false"` is never a victim;
- a running gang is never broken below its minAvailable: a job keeps at least minAvailable ready tasks, except
  a job whose minAvailable is 1 (a gang of one), which may lose any of its tasks (as in Volcano's gang plugin);
- nor below a task's own minimum (PodGroup `minTaskMember`, which Volcano defaults to the task's replicas): a
  job missing a role's minimum is not ready, so allocate would treat it as a partly bound gang and give it the
  freed resources first, undoing the eviction (Volcano's gang plugin counts only minAvailable here).

Victims are offered lowest priority first, then the most recently created first (the least work lost).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from scheduler.api.job import JobInfo, TaskInfo
from scheduler.api.status import READY_STATUSES, TaskStatus


def victim_order(task: TaskInfo, jobs: Mapping[str, JobInfo]) -> tuple[int, int, float, str]:
    job = jobs.get(task.job)
    return (task.priority, job.priority if job is not None else 0, -task.creation, task.uid)


def running_candidates(tasks: Iterable[TaskInfo]) -> list[TaskInfo]:
    """Tasks that may be asked about at all: running, and not marked non-preemptable."""
    return [t for t in tasks if t.status == TaskStatus.RUNNING and t.preemptable]


def gang_safe(candidates: Iterable[TaskInfo], jobs: Mapping[str, JobInfo]) -> list[TaskInfo]:
    """The candidates (in the order given) whose eviction, together with those before them, leaves every job
    at least minAvailable ready tasks (a gang of one may go entirely)."""
    taken: dict[str, int] = {}
    taken_role: dict[tuple[str, str], int] = {}
    roles: dict[str, dict[str, tuple[int, int]]] = {}
    kept = []
    for task in candidates:
        job = jobs.get(task.job)
        if job is None:
            continue
        if job.min_available > 1 and job.ready_task_num() - taken.get(job.uid, 0) - 1 < job.min_available:
            continue
        if job.uid not in roles:
            roles[job.uid] = job.roles_ready()
        have, need = roles[job.uid].get(task.role, (0, 0))
        if need > 1 and task.status in READY_STATUSES and have - taken_role.get((job.uid, task.role), 0) - 1 < need:
            continue
        taken[job.uid] = taken.get(job.uid, 0) + 1
        taken_role[(job.uid, task.role)] = taken_role.get((job.uid, task.role), 0) + 1
        kept.append(task)
    return kept
