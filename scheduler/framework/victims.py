"""Layer `framework`: the rules every eviction obeys, whatever plugins a config lists.

Preempt and reclaim ask plugins (Preemptable / Reclaimable) which tasks may go. One rule is the actions' own
and no config can switch it off: a pod annotated `volcano.sh/preemptable: "false"` is never a victim. The gang
rule is the gang plugin's, as in Volcano, so `enablePreemptable: false` on gang switches it off:

- a running gang is never broken below its minAvailable: a task may go only while its job has more ready tasks
  than minAvailable (Volcano's gang plugin, pkg/scheduler/plugins/gang/gang.go). As there, task minimums are
  not counted: a job with several tasks loses pods down to its minAvailable, whichever task they belong to. The
  gang plugin offers no task of a job at its minAvailable (a lone pod included); Volcano's next tier may then
  take the lone pod, and so may ours (a job of minAvailable 1 is never left partial), but not a larger gang.

Victims are offered lowest priority first, then the most recently created first (the least work lost).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from scheduler.api.job import JobInfo, TaskInfo
from scheduler.api.phases import TaskStatus

SYSTEM_NAMESPACE = "kube-system"
# system-cluster-critical is 2000000000, system-node-critical 2000001000.
CRITICAL_PRIORITY = 2_000_000_000


def is_critical(task: TaskInfo) -> bool:
    """A pod the conformance plugin never offers as a victim (and that no estimate of what eviction could free
    counts on)."""
    return task.namespace == SYSTEM_NAMESPACE or task.priority >= CRITICAL_PRIORITY


def victim_order(task: TaskInfo, jobs: Mapping[str, JobInfo]) -> tuple[int, int, float, str]:
    job = jobs.get(task.job)
    return (task.priority, job.priority if job is not None else 0, -task.creation, task.key)


def running_candidates(tasks: Iterable[TaskInfo]) -> list[TaskInfo]:
    """Tasks that may be asked about at all: running, and not marked non-preemptable."""
    return [t for t in tasks if t.status == TaskStatus.RUNNING and t.preemptable]


def gang_safe(
    candidates: Iterable[TaskInfo], jobs: Mapping[str, JobInfo], *, singles_may_go: bool = False
) -> list[TaskInfo]:
    """The candidates (in the order given) whose eviction, together with those before them, leaves every job
    at least minAvailable ready tasks. As Volcano's gang plugin (pkg/scheduler/plugins/gang/gang.go,
    preemptableFn): a task may go while its job has more ready tasks than minAvailable.

    `singles_may_go` (the guard that holds across tiers) also lets a job whose minAvailable is 1 lose any of its
    tasks: whatever is left of it is still a whole gang or nothing, never a partial one."""
    left: dict[str, int] = {}
    kept = []
    for task in candidates:
        job = jobs.get(task.job)
        if job is None:
            continue
        ready = left.setdefault(job.key, job.ready_task_num())
        if ready <= job.min_available and not (singles_may_go and job.min_available <= 1):
            continue
        left[job.key] = ready - 1
        kept.append(task)
    return kept
