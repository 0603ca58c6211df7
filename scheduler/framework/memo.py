"""Layer `framework`: what the scheduler remembers from one cycle to the next.

Two things are worth keeping while nothing relevant changes:

- Which nodes each constraint set's predicates allow. Predicates read only a node's labels, taints,
  readiness and cordon, and a task's constraints, so while no node's of those changed (and the conf did not)
  the answer of the last cycle stands and no predicate runs again.
- Gangs that did not fit. A gang that failed for lack of resources fails again as long as it is the same
  (same pending tasks, same minimum) and no node it may use has gained free resources since the end of the
  cycle in which it failed. Such a gang costs a few array lookups per cycle instead of a pass over nodes.

The adapter that runs cycles (the Kubernetes runner, the simulator) keeps one `CycleMemo` and hands it to
every cycle; without one, every cycle starts from scratch.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from scheduler.api.job import JobInfo
from scheduler.api.node import NodeInfo
from scheduler.api.phases import TaskStatus
from scheduler.api.reasons import NodeFilter
from scheduler.framework.carry import Carry, moved
from scheduler.framework.holds import HoldBook


def node_statics(nodes: list[NodeInfo], known: dict[str, tuple[object, ...]] | None = None,
                 last: list[Any] | None = None) -> tuple[object, ...]:
    """Everything about the nodes that predicates read, besides resources. With `known` (node name -> what the
    last call read and made of it, kept by the caller), a node whose labels and allocatable are the very objects
    of last time (a snapshot shares them from the node as read) and whose taints, unschedulable and ready are
    equal gives the same tuple, not made again: the tuple of tuples then compares by identity, element by
    element. With `last` (kept by the caller: [the nodes, their statics] of the last call), a node that is the
    very NodeInfo at the same place is not looked at at all."""
    if known is None:
        return tuple(
            (n.name, frozenset(n.labels.items()), n.taints, n.unschedulable, n.ready, n.allocatable.names())
            for n in nodes
        )
    book = known  # (a name of its own for the function below)

    def statics(n: NodeInfo) -> object:
        seen = book.get(n.name)
        if (seen is None or seen[0] is not n.labels or seen[1] is not n.allocatable or seen[2] != n.taints
                or seen[3] != n.unschedulable or seen[4] != n.ready):
            made = (n.name, frozenset(n.labels.items()), n.taints, n.unschedulable, n.ready, n.allocatable.names())
            seen = book[n.name] = (n.labels, n.allocatable, n.taints, n.unschedulable, n.ready, made)
        return seen[5]

    changed = moved(last[0], nodes) if last else None
    if last and changed is not None:
        # the very NodeInfo of last time at a place (kept by an incremental snapshot) has the statics it had (a
        # snapshot never changes them): only the others are looked at
        out: list[object] = list(last[1])
        for i in changed:
            out[i] = statics(nodes[i])
    else:
        out = [statics(n) for n in nodes]
    if len(known) > 2 * len(nodes) + 1000:  # nodes gone: forget them
        names = {n.name for n in nodes}
        for name in [name for name in known if name not in names]:
            del known[name]
    if last is not None:
        last[:] = [list(nodes), out]
    return tuple(out)


def gang_signature(job: JobInfo) -> tuple[object, ...]:
    pending = frozenset(t.key for t in job.with_status(TaskStatus.PENDING))
    return (job.min_available, tuple(sorted(job.min_task_member.items())), job.ready_task_num(), pending)


@dataclass(slots=True)
class Failure:
    signature: tuple[object, ...]
    positions: Any  # node positions the gang's tasks may use (numpy int array)
    reasons: Counter[NodeFilter]
    task: str
    held: Any = None  # the Status a gate held the gang with in that cycle (a queue limit), said again when skipped


@dataclass(slots=True)
class CycleMemo:
    statics: tuple[object, ...] = ()
    conf: Any = None
    feasible: dict[Any, Any] = field(default_factory=dict)  # Constraints -> the session's feasible record
    # a plugin's answers that depend on the nodes' statics and the conf alone (`FeasibilityCache.kept`), by the
    # plugin's name: dropped with `feasible`
    kept: dict[str, dict[Any, Any]] = field(default_factory=dict)
    baseline: Any = None  # idle matrix at the end of the last cycle
    failures: dict[str, Failure] = field(default_factory=dict)
    gained: Any = None  # per node: more idle than at the end of the last cycle (this cycle only)
    skipped: int = 0  # gangs skipped in the last cycle (for logs and tests)
    # job key (or "queue/<name>") -> (plugin, action, exception type) of the fault it had last cycle, so a fault
    # that repeats every cycle is logged once (`faults.py`)
    faults_logged: dict[str, tuple[str, str, str]] = field(default_factory=dict)
    # room held for jobs the `consolidate` action moved, until they are placed again (`holds.py`)
    holds: HoldBook = field(default_factory=HoldBook)
    # node name -> its statics as last read (`node_statics`): kept, so an unchanged node is not read again
    known_nodes: dict[str, tuple[object, ...]] = field(default_factory=dict)
    last_nodes: list[Any] = field(default_factory=list)  # `node_statics`'s `last`
    # the per-job work sessions carry over for the jobs an incremental snapshot kept (`carry.py`)
    carry: Carry = field(default_factory=Carry)

    def begin(self, nodes: list[NodeInfo], conf: Any, idle: Any) -> dict[Any, Any]:
        """Called when a session opens; returns the feasible cache the session should use."""
        statics = node_statics(nodes, self.known_nodes, self.last_nodes)
        if statics != self.statics or conf != self.conf:
            self.statics, self.conf = statics, conf
            self.feasible, self.failures, self.baseline, self.kept = {}, {}, None, {}
        if self.baseline is not None and self.baseline.shape == idle.shape:
            self.gained = np.any(idle > self.baseline, axis=0)
        else:
            self.gained, self.failures = None, {}
        self.skipped = 0
        return self.feasible

    def still_failing(self, job: JobInfo) -> Failure | None:
        failure = self.failures.get(job.key)
        if failure is None or self.gained is None:
            return None
        if failure.signature != gang_signature(job) or bool(self.gained[failure.positions].any()):
            del self.failures[job.key]
            return None
        self.skipped += 1
        return failure

    def record_failure(self, job: JobInfo, positions: Any, reasons: Counter[NodeFilter], task: str,
                       held: Any = None) -> None:
        self.failures[job.key] = Failure(gang_signature(job), positions, Counter(reasons), task, held)

    def end(self, jobs: dict[str, JobInfo], idle: Any) -> None:
        self.baseline = idle.copy()
        for uid in [uid for uid in self.failures if uid not in jobs]:
            del self.failures[uid]
