"""Layer `sim`: the per-pod baseline — what a scheduler without gangs does (kube-scheduler's default).

Every pending pod is placed on its own, in the order pods were created (pods of jobs submitted together
interleave, as their controllers race), on the fitting node with the fewest free GPUs left. A PodGroup is
admitted at once. Nothing waits for a gang: pods hold GPUs while their siblings cannot start.
"""

from __future__ import annotations

from scheduler.api.snapshot import ClusterSnapshot, CycleResult, GangBind, PodGroupStatus
from scheduler.api.status import PodGroupPhase, TaskStatus


def per_pod_cycle(snapshot: ClusterSnapshot) -> CycleResult:
    result = CycleResult()
    pending = []
    for job in snapshot.jobs.values():
        if job.phase == PodGroupPhase.PENDING:
            result.podgroups.append(PodGroupStatus(job.uid, PodGroupPhase.INQUEUE, job.conditions, 0, 0, 0))
        for index, task in enumerate(sorted(job.with_status(TaskStatus.PENDING), key=lambda t: t.name)):
            pending.append((task.creation, index, job.uid, task))
    nodes = sorted(snapshot.nodes.values(), key=lambda n: n.name)
    for _, _, job_uid, task in sorted(pending, key=lambda p: p[:3]):
        fits = [n for n in nodes if n.ready and not n.unschedulable and task.resreq <= n.idle]
        if not fits:
            continue
        node = min(fits, key=lambda n: (n.idle.gpu - task.resreq.gpu, n.name))
        task.status = TaskStatus.ALLOCATED
        node.add_task(task)
        result.binds.append(GangBind(job_uid, ((task.uid, node.name),)))
    return result
