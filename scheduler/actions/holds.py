"""Layer `actions`: the room `consolidate` holds for the jobs it moved, honoured at the start of every cycle.

A moved job goes through what a cluster does to it: its pods are evicted (deleted with their grace period), its
controller recreates them, and a later cycle places them. Until then the room its plan chose is held
(`framework/holds.py` keeps the holds from cycle to cycle). Before any action of a cycle whose conf names
`consolidate` (`cycle.run_cycle`), each hold is honoured, pod by pod:

- a pod of the job that is on a node again (allocated, bound, running; not releasing) is done;
- a pod that is pending (recreated; under a new name, one the job's controller made in place of a held pod that
  is gone and that asks for the same; or the gang the move was for, whose room its victims are still freeing) is
  allocated on its held node, in one Statement for the job, committed (bound) as soon as the gang is ready
  (JobReady); short of that the placements stay in the session, never bound, as a reservation (as the starvation
  guard's, `starvation.py`), so no later job of the cycle takes the room. Where the node is still being freed the
  pod is pipelined there and the part of its room already idle gets a placeholder (below);
- a pod not yet recreated, or still terminating on its old node, holds its room with a placeholder: an
  allocation on the held node that belongs to no job, is no victim, is never bound and lasts this cycle only.

A hold ends when every pod is done (`placed`), when the job is gone (`gone`), after `holdSeconds` (`expired`), or
when a recreated pod no longer fits its held node (`refused`: a node gone or its labels changed): the job then
waits as any pending job does, and `allocate` places it where it fits.
"""

from __future__ import annotations

import logging

from scheduler.api.job import JobInfo, TaskInfo
from scheduler.api.phases import TaskStatus
from scheduler.framework import points as P
from scheduler.framework.holds import HeldPod, Hold
from scheduler.framework.session import Session

log = logging.getLogger("volcano_py.actions.consolidate")

PLACEHOLDER_JOB = "<held>"  # the job a placeholder belongs to: no job has this key (keys are namespace/name)
ON_NODE = frozenset({TaskStatus.ALLOCATED, TaskStatus.BINDING, TaskStatus.BOUND, TaskStatus.RUNNING})


def placeholder(held: HeldPod) -> TaskInfo:
    """What holds `held`'s room while its pod does not exist (or is still leaving its old node)."""
    namespace, _, name = held.pod.partition("/")
    return TaskInfo(key=f"{PLACEHOLDER_JOB}/{held.pod}", name=name, namespace=namespace, job=PLACEHOLDER_JOB,
                    resreq=held.request, status=TaskStatus.ALLOCATED, node_name=held.node, preemptable=False)


def hold_room(ssn: Session, pods: list[HeldPod]) -> None:
    """Placeholders for `pods` on their nodes, for the rest of this cycle; none where the node is gone or its idle
    no longer holds the pod (something else took the room: the recreated pod is then refused, `_place`), so a
    placeholder never drives a node's idle below zero."""
    for held in pods:
        node = ssn.nodes.get(held.node)
        if node is None or not held.request <= node.idle:
            continue
        node.add_task(placeholder(held))
        ssn.arrays.update(node)


def honour_holds(ssn: Session) -> None:
    """Every hold in force, as the module doc says; called before the cycle's first action."""
    book = ssn.holds
    for key, hold in sorted(book.holds.items()):
        job = ssn.jobs.get(key)
        if job is None:
            book.end(key, "gone")
            continue
        if ssn.now > hold.until:
            log.info("consolidate: gave up the room held for %s on %s after %.0fs; it is placed as any job", key,
                     ",".join(hold.nodes()), hold.until - hold.since)
            book.end(key, "expired")
            continue
        with ssn.guard(job):
            _honour(ssn, hold, job)


def _honour(ssn: Session, hold: Hold, job: JobInfo) -> None:
    book = ssn.holds
    waiting: list[HeldPod] = []
    recreated: list[tuple[TaskInfo, HeldPod]] = []
    named = {h.pod for h in hold.pods}
    # a controller that names new pods anew (a ReplicaSet's): its pending pods take the places of held pods that
    # are gone, one for one, where they ask for the same
    renamed = [t for t in job.tasks.values()
               if t.key not in named and (t.status in ON_NODE or t.status == TaskStatus.PENDING and not t.gated)]
    for held in hold.pods:
        task = job.tasks.get(held.pod)
        if task is None:
            task = next((t for t in renamed if t.resreq == held.request), None)
            if task is not None:
                renamed.remove(task)
        if task is not None and task.status in ON_NODE:
            continue
        if task is not None and task.status == TaskStatus.PENDING and not task.gated:
            recreated.append((task, held))
        else:
            waiting.append(held)
    if not waiting and not recreated:
        book.end(job.key, "placed")
        return
    if recreated and not _place(ssn, job, recreated):
        log.info("consolidate: %s no longer fits the room held for it; it is placed as any job", job.key)
        book.end(job.key, "refused")
        return
    hold_room(ssn, waiting)


def _place(ssn: Session, job: JobInfo, recreated: list[tuple[TaskInfo, HeldPod]]) -> bool:
    """Allocate the pending pods on their held nodes; commit if the gang is then ready. A pod whose node is still
    being freed (the gang's victims leaving through their grace period) is pipelined there, and the part of its
    room already idle is held with a placeholder, so a job placed later in the cycle cannot take it. False
    (nothing kept) if one of them does not fit its node."""
    stmt = ssn.statement()
    partial: list[HeldPod] = []
    for task, held in recreated:
        node = ssn.nodes.get(held.node)
        feasible = node is not None and any(n.name == held.node for n in ssn.fit.feasible_nodes(task))
        if node is None or not feasible:
            stmt.discard()
            return False
        if task.resreq <= node.idle:
            stmt.allocate(task, node)
        elif task.resreq <= node.future_idle():
            stmt.pipeline(task, node)
            free = task.resreq.min_with(node.idle.clamp_zero())  # what of it is idle already
            if not free.is_zero():
                partial.append(HeldPod(held.pod, held.node, free))
        else:
            stmt.discard()
            return False
    if ssn.tiers.run(P.JOB_READY, job):
        stmt.commit()
    hold_room(ssn, partial)
    return True
