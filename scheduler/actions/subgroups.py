"""Layer `actions`: place a job with sub-groups sub-group by sub-group, each whole, a hard one inside one domain
(Volcano's allocateForJob / allocateForSubJob, pkg/scheduler/actions/allocate/allocate.go).

A job with a sub-group policy (PodGroup `spec.subGroupPolicy`, api/subgroups.py; the job controller writes one
per partitioned task) is placed here, as Volcano sends every such job through allocateForJob: never pod by pod
nor by a gang placer that does not know its sub-groups:

1. The job's scope: with the job's own hard `networkTopology`, each domain of its `highestTierAllowed` tier that
   holds every node the job already uses, most free room first (at most `MAX_SCOPES` of them); otherwise the
   whole cluster.
2. In a scope, the sub-groups in Volcano's order: those still needed for their policy's `minSubGroups` first, then
   by partition number (`match_index`). A hard sub-group goes whole into one domain of its tier inside the scope
   (the one it already uses, if some of its pods run), trying the domains that hold its request with the least
   room left first (pods packed, bigger domains kept for bigger sub-groups); its pods are placed one by one there
   through the configured predicates and scorers. A sub-group that does not reach `subGroupSize` placed pods in
   any domain is rolled back and left pending (so a sub-group is placed whole or not at all, extras too). Soft
   or topology-less sub-groups go anywhere in the scope, whole; pods in no sub-group go anywhere in the scope.
3. If the job is then ready (the gang plugin: minAvailable, task minimums, each policy's minSubGroups), the
   placements are committed; otherwise they are discarded and the next scope is tried. A job that fits no scope
   keeps its pods pending with the reason (`SubGroupNoDomain`).

No placement is ever made that puts a hard sub-group's pods in two domains of its tier: each pod of such a
sub-group is placed only on a node of the domain chosen for it (tests/core/test_subgroup_placement.py checks
it over seeded random workloads, with every placer configured).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from scheduler.api.decision import Code, Status
from scheduler.api.job import JobInfo, TaskInfo
from scheduler.api.phases import READY_STATUSES, TaskStatus
from scheduler.api.queue import QueueInfo
from scheduler.api.reasons import Reason, SubGroupNoDomain, TopologyNoFit
from scheduler.api.subgroups import GroupKey, group_name, match_index
from scheduler.api.subgroups import sub_group_job as sub_group_job  # re-exported for the other actions
from scheduler.framework import points
from scheduler.framework.arrays import IntArray
from scheduler.framework.session import Session
from scheduler.framework.statement import Statement
from scheduler.solver.topology import Topology, TopologyLabels, from_domains, from_hypernodes

log = logging.getLogger(__name__)

MAX_SCOPES = 16  # job-level domains tried per job and cycle
BoolArray = npt.NDArray[np.bool_]


def session_topology(ssn: Session) -> Topology:
    """The session's topology as network-topology-aware builds it by default: HyperNodes, else node labels."""
    names = [n.name for n in ssn.node_list]
    if ssn.hypernodes:
        return from_hypernodes(names, ssn.hypernodes)
    return from_domains(names, ssn.domains, TopologyLabels())


def _job_tier(job: JobInfo, top: int) -> int | None:
    spec = job.extra.get("networkTopology")
    if not spec or str(spec.get("mode", "hard")).lower() == "soft":
        return None
    allowed = spec.get("highestTierAllowed")
    return min(1 if allowed is None else int(allowed), top)


def _placed_positions(ssn: Session, tasks: Sequence[TaskInfo]) -> IntArray:
    """Where the tasks that hold a node (placed or waiting) are, as node positions."""
    out = [ssn.arrays.position[t.node_name] for t in tasks
           if t.node_name and (t.status in READY_STATUSES or t.status is TaskStatus.PIPELINED)
           and t.node_name in ssn.arrays.position]
    return np.array(out, dtype=np.int64)


class SubGroupPlacer:
    """One per allocate run (the topology is built on first use)."""

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self._topology: Topology | None = None

    @property
    def topology(self) -> Topology:
        if self._topology is None:
            self._topology = session_topology(self.ssn)
        return self._topology

    # ---- the job ----------------------------------------------------------------------------------------
    def place(self, queue: QueueInfo, job: JobInfo) -> bool:
        """Place what fits of the job, sub-group by sub-group; True if committed (the job is ready)."""
        ssn = self.ssn
        subs = job.subs
        assert subs is not None
        groups: dict[GroupKey, list[TaskInfo]] = {}
        loose: list[TaskInfo] = []
        for task in ssn.order.task_order(job.placeable()):
            key = subs.of.get(task.uid)
            if key is None:
                loose.append(task)
            else:
                groups.setdefault(key, []).append(task)
        order = self._group_order(job, groups)
        why: Reason | None = None
        for scope in self._scopes(job):
            stmt = ssn.statement()
            missing = [key for key in order if not self._place_group(stmt, queue, job, key, groups[key], scope)]
            for task in loose:
                self._place_task(stmt, queue, task, np.flatnonzero(scope))
            if len(stmt) and ssn.tiers.run(points.JOB_READY, job):
                stmt.commit()
                return True
            stmt.discard()
            if missing and why is None:
                why = self._no_domain(job, missing[0], len(groups[missing[0]]))
        if why is None:
            why = TopologyNoFit(_job_tier(job, self.topology.top) or self.topology.top)
        ssn.results.hold(job, Status(Code.UNSCHEDULABLE, (why,), "allocate"))
        if ssn.trace:
            ssn.trace(f"sub-groups of {job.uid}: not placed ({why})")
        return False

    def _group_order(self, job: JobInfo, groups: dict[GroupKey, list[TaskInfo]]) -> list[GroupKey]:
        """Volcano's order: the sub-groups still needed for their policy's minSubGroups first (organizeJobWorksheet),
        each part by partition number, then name."""
        subs = job.subs
        assert subs is not None
        ready: dict[int, int] = {}
        for key in subs.members:
            if subs.group_ready(key):
                ready[key[0]] = ready.get(key[0], 0) + 1
        by_number = sorted(groups, key=lambda k: (match_index(k), k))
        required: list[GroupKey] = []
        for key in by_number:
            if ready.get(key[0], 0) < job.sub_groups[key[0]].min_groups:
                required.append(key)
                ready[key[0]] = ready.get(key[0], 0) + 1
        return required + [k for k in by_number if k not in required]

    def _scopes(self, job: JobInfo) -> list[BoolArray]:
        """The node masks the job may be placed in: one per domain of its hard tier (most free room first), or
        the whole cluster."""
        topo = self.topology
        nodes = len(self.ssn.node_list)
        tier = _job_tier(job, topo.top)
        if tier is None or nodes == 0:
            return [np.ones(nodes, dtype=bool)]
        row = topo.domain[tier]
        used = _placed_positions(self.ssn, list(job.tasks.values()))
        ids = np.unique(row[used]) if used.size else np.unique(row)
        if ids.size > 1 and used.size:
            return []  # the job already spans more than its tier: nothing more may join it
        free = self._free(row, ids)
        ranked = [int(d) for _, d in sorted(zip(free, ids.tolist(), strict=True), key=lambda p: (-p[0], p[1]))]
        return [row == d for d in ranked[:MAX_SCOPES]]

    def _free(self, row: IntArray, ids: IntArray) -> list[float]:
        """Each domain's free room, as the sum of its nodes' idle over the resources, each scaled to its total."""
        idle = self.ssn.arrays.idle.astype(np.float64)
        scale = np.maximum(idle.sum(axis=1, keepdims=True), 1.0)
        per_node = (idle / scale).sum(axis=0)
        return [float(per_node[row == d].sum()) for d in ids.tolist()]

    # ---- one sub-group ---------------------------------------------------------------------------------------
    def _place_group(self, stmt: Statement, queue: QueueInfo, job: JobInfo, key: GroupKey,
                     tasks: list[TaskInfo], scope: BoolArray) -> bool:
        """Place the sub-group's pending tasks inside `scope` (inside one domain of its tier if hard); False if it
        does not reach subGroupSize placed there (its placements are then rolled back)."""
        subs = job.subs
        assert subs is not None
        policy = job.sub_groups[key[0]]
        tier = policy.topology.hard_tier(self.topology.top) if policy.topology is not None else None
        domains = [scope] if tier is None else self._domains(job, key, tier, scope, tasks)
        for allowed in domains:
            mark = stmt.mark()
            positions = np.flatnonzero(allowed)
            for task in tasks:
                self._place_task(stmt, queue, task, positions)
            if subs.group_ready(key, waiting=False):
                return True
            stmt.rollback(mark)
        return False

    def _domains(self, job: JobInfo, key: GroupKey, tier: int, scope: BoolArray,
                 tasks: list[TaskInfo]) -> list[BoolArray]:
        """The domains of `tier` inside `scope` the sub-group may go to (the one its placed pods are in, if any),
        tightest first among those whose free room could hold it."""
        subs = job.subs
        assert subs is not None
        row = self.topology.domain[tier]
        members = [t for t in job.tasks.values() if subs.of.get(t.uid) == key]
        used = _placed_positions(self.ssn, members)
        if used.size:
            ids = np.unique(row[used])
            if ids.size > 1:
                return []  # already spans more than its tier (placed before it had this policy): left as it is
        else:
            ids = np.unique(row[scope])
        need = self._need(tasks)
        idle = self.ssn.arrays.idle
        fits: list[tuple[int, int]] = []
        for domain in ids.tolist():
            inside = scope & (row == domain)
            room = idle[:, inside].sum(axis=1)
            if (room >= need).all():
                fits.append((int((room - need).sum()), domain))
        return [scope & (row == d) for _, d in sorted(fits)]

    def _need(self, tasks: list[TaskInfo]) -> IntArray:
        need = np.zeros(self.ssn.arrays.idle.shape[0], dtype=np.int64)
        for task in tasks:
            try:
                need = need + self.ssn.arrays.vector(task.resreq)
            except KeyError:  # a resource no node has: nothing holds it
                return np.full_like(need, np.iinfo(np.int64).max // 2)
        return need

    def _place_task(self, stmt: Statement, queue: QueueInfo, task: TaskInfo, positions: IntArray) -> bool:
        ssn = self.ssn
        if task.status is not TaskStatus.PENDING or not ssn.tiers.run(points.ALLOCATABLE, queue, task).ok:
            return False
        fitting = ssn.fit.fitting_indices(task)
        node = ssn.fit.pick_node(task, np.intersect1d(fitting, positions))
        if node is None:
            return False
        stmt.allocate(task, node)
        return True

    def _no_domain(self, job: JobInfo, key: GroupKey, pending: int) -> Reason:
        policy = job.sub_groups[key[0]]
        tier = policy.topology.hard_tier(self.topology.top) if policy.topology is not None else None
        if tier is None:
            return TopologyNoFit(self.topology.top)
        return SubGroupNoDomain(group_name(job.sub_groups, key), pending, tier, self.topology.tier_name(tier))
