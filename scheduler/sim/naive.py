"""Layer `sim`: the per-pod baseline — what a scheduler without gangs does (kube-scheduler's default).

Every pending pod is placed on its own, in the order pods were created (pods of jobs submitted together
interleave, as their controllers race), on the fitting node with the fewest free GPUs left. A PodGroup is
admitted at once. Nothing waits for a gang: pods hold GPUs while their siblings cannot start.

A job whose pods found no node is told why, as kube-scheduler tells a pod ("0/2 nodes are available: 2
Insufficient nvidia.com/gpu"), beside how far its gang got (`GangNotReady`: 6 of 8 bound), so the report says why
its jobs waited as it does for volcano-py's.
"""

from __future__ import annotations

from scheduler.api import reasons as R
from scheduler.api.decision import Code, Status
from scheduler.api.job import JobInfo, TaskInfo
from scheduler.api.phases import PodGroupPhase, TaskStatus
from scheduler.api.snapshot import ClusterSnapshot, CycleResult, GangBind, PodGroupStatus

PLUGIN = "per-pod"


def per_pod_cycle(snapshot: ClusterSnapshot) -> CycleResult:
    result = CycleResult()
    pending = []
    for job in snapshot.jobs.values():
        if job.phase == PodGroupPhase.PENDING:
            result.podgroups.append(PodGroupStatus(job.key, PodGroupPhase.INQUEUE, job.conditions, 0, 0, 0))
        for index, task in enumerate(sorted(job.with_status(TaskStatus.PENDING), key=lambda t: t.name)):
            pending.append((task.creation, index, job.key, task))
    nodes = sorted(snapshot.nodes.values(), key=lambda n: n.name)
    placed: dict[str, int] = {}
    unplaced: dict[str, list[TaskInfo]] = {}
    for _, _, job_uid, task in sorted(pending, key=lambda p: p[:3]):
        fits = [n for n in nodes if n.ready and not n.unschedulable and task.resreq <= n.idle]
        if not fits:
            unplaced.setdefault(job_uid, []).append(task)
            continue
        node = min(fits, key=lambda n: (n.idle.gpu - task.resreq.gpu, n.name))
        task.status = TaskStatus.ALLOCATED
        node.add_task(task)
        result.binds.append(GangBind(job_uid, ((task.key, node.name),)))
        placed[job_uid] = placed.get(job_uid, 0) + 1
    for job_uid, tasks in unplaced.items():
        job = snapshot.jobs[job_uid]
        phase = PodGroupPhase.INQUEUE if job.phase == PodGroupPhase.PENDING else job.phase
        result.podgroups.append(PodGroupStatus(job_uid, phase, job.conditions, 0, 0, 0,
                                               decision=_why(snapshot, job, tasks, placed.get(job_uid, 0))))
    return result


def _why(snapshot: ClusterSnapshot, job: JobInfo, tasks: list[TaskInfo], placed: int) -> Status:
    """How far the gang got, and why its first unplaced pod fit no node (per node, kube-scheduler's count)."""
    ready = job.ready_task_num() + placed
    counts: dict[R.NodeFilter, int] = {}
    for node in snapshot.nodes.values():
        misfit = (R.NodeFilter(R.NODE_NOT_READY) if not node.ready else
                  R.NodeFilter(R.NODE_UNSCHEDULABLE) if node.unschedulable else
                  R.resource_misfit(tasks[0].resreq, node.idle))
        if misfit is not None:
            counts[misfit] = counts.get(misfit, 0) + 1
    reasons: list[R.Reason] = [R.GangNotReady(len(tasks), len(job.tasks), ready, job.min_available)]
    if counts:
        reasons.append(R.NodesUnavailable(len(snapshot.nodes),
                                          tuple(R.FilterCount(f, n) for f, n in sorted(counts.items(), key=str))))
    return Status(Code.UNSCHEDULABLE, tuple(reasons), PLUGIN)
