"""Layer `actions`: place a job with sub-groups sub-group by sub-group, each whole, a hard one inside one domain
(Volcano's allocateForJob / allocateForSubJob, pkg/scheduler/actions/allocate/allocate.go).

A job with a sub-group policy (PodGroup `spec.subGroupPolicy`, api/subgroups.py; the job controller writes one
per partitioned task) is placed here, as Volcano sends every such job through allocateForJob: never pod by pod
nor by a gang placer that does not know its sub-groups:

1. The job's scope: with the job's own hard `networkTopology`, the domains of tiers 1 up to its
   `highestTierAllowed` that hold every node the job already uses and whose free room holds its minResources,
   lower tiers first, tightest first within a tier (Volcano's hyperNodeGradientFn; at most `MAX_SCOPES`);
   otherwise the whole cluster.
2. In a scope, the sub-groups in Volcano's order: those still needed for their policy's `minSubGroups` first, then
   by partition number (`match_index`). A hard sub-group (a `highestTierAllowed`) goes whole into one domain of
   its gradient: tiers 1 up to its tier, the lowest tier first, within a tier the domains whose free room holds
   its pending pods, tightest first (pods packed, as Volcano's hypernode binpack prefers fuller domains), and
   only domains holding the pods it already runs. Its pods are placed one by one there through the configured
   predicates and scorers. A sub-group that does not reach `subGroupSize` placed pods is rolled back and tried
   in the next domain, else left pending (so a sub-group is placed whole or not at all, extras too). Soft or
   topology-less sub-groups go anywhere in the scope, whole; pods in no sub-group go anywhere in the scope.
3. If the job is then ready (the gang plugin: minAvailable, task minimums, each policy's minSubGroups), the
   placements are committed; otherwise they are discarded and the next scope is tried. A job that fits no scope
   keeps its pods pending with the reason (`SubGroupNoDomain`).

No placement is ever made that puts a hard sub-group's pods in two domains of its tier: each pod of such a
sub-group is placed only on a node of the domain chosen for it (tests/core/test_subgroup_placement.py checks
it over seeded random workloads, with every placer configured).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from scheduler.api.decision import Code, Status
from scheduler.api.job import JobInfo, TaskInfo
from scheduler.api.phases import READY_STATUSES, TaskStatus
from scheduler.api.queue import QueueInfo
from scheduler.api.reasons import Reason, SubGroupNoDomain, TopologyNoFit
from scheduler.api.resources import Resource
from scheduler.api.subgroups import (
    GroupKey,
    group_name,
    match_index,
    sub_group_job as sub_group_job,  # re-exported for the other actions
)
from scheduler.framework import points
from scheduler.framework.arrays import IntArray
from scheduler.framework.session import Session
from scheduler.framework.statement import Statement
from scheduler.solver.topology import Topology, TopologyLabels, from_domains, from_hypernodes, tier_names

MAX_SCOPES = 16  # job-level domains tried per job and cycle
LOOSE: GroupKey = (-1, "")  # the pods in no sub-group
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
        self._tier_names: dict[str, int] | None = None

    @property
    def tier_names(self) -> dict[str, int]:
        """HyperNodes' spec.tierName -> tier, built on first use: allocate makes a placer every cycle, and most
        cycles hold no job with sub-groups."""
        if self._tier_names is None:
            self._tier_names = tier_names(self.ssn.hypernodes or ())
        return self._tier_names

    @property
    def topology(self) -> Topology:
        if self._topology is None:
            self._topology = session_topology(self.ssn)
        return self._topology

    # ---- the job ----------------------------------------------------------------------------------------
    def place(self, queue: QueueInfo, job: JobInfo, requeue: Callable[[JobInfo], None] | None = None) -> bool:
        """Place what fits of the job, sub-group by sub-group; True if committed (the job is ready). Once the job
        is ready with sub-groups left, commit and requeue it, as Volcano's allocateForJob stops at JobReady: other
        jobs reach their minimums before this one takes its extras (one sub-group per turn once ready)."""
        ssn = self.ssn
        subs = job.subs
        assert subs is not None
        groups: dict[GroupKey, list[TaskInfo]] = {}
        for task in ssn.order.task_order(job.placeable()):
            groups.setdefault(subs.of.get(task.key, LOOSE), []).append(task)
        order = self._group_order(job, groups)
        why: Reason | None = None
        for scope in self._scopes(job):
            stmt = ssn.statement()
            missing: list[GroupKey] = []
            for index, key in enumerate(order):
                if key == LOOSE:
                    placed = self._place_loose(stmt, queue, groups[key], scope)
                else:
                    placed = self._place_group(stmt, queue, job, key, groups[key], scope)
                    if not placed:
                        missing.append(key)
                if placed and requeue is not None and index + 1 < len(order) \
                        and ssn.tiers.run(points.JOB_READY, job):
                    stmt.commit()
                    requeue(job)
                    return True
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
            ssn.trace(f"sub-groups of {job.key}: not placed ({why})")
        return False

    def _group_order(self, job: JobInfo, groups: dict[GroupKey, list[TaskInfo]]) -> list[GroupKey]:
        """Volcano's order (organizeJobWorksheet, SubJobOrderFn): the sub-groups still needed for their policy's
        minSubGroups first, then the rest by partition number; the pods in no sub-group (Volcano's default
        sub-job, whose id sorts first) before the partitions numbered 0."""
        subs = job.subs
        assert subs is not None
        ready: dict[int, int] = {}
        for key in subs.members:
            if subs.group_ready(key):
                ready[key[0]] = ready.get(key[0], 0) + 1
        by_number = sorted(groups, key=lambda k: (match_index(k), k))
        required: list[GroupKey] = []
        for key in by_number:
            if key != LOOSE and ready.get(key[0], 0) < job.sub_groups[key[0]].min_groups:
                required.append(key)
                ready[key[0]] = ready.get(key[0], 0) + 1
        return required + [k for k in by_number if k not in required]

    def _place_loose(self, stmt: Statement, queue: QueueInfo, tasks: list[TaskInfo], scope: BoolArray) -> bool:
        """The pods in no sub-group, anywhere in the scope, one by one; True if any was placed."""
        positions = np.flatnonzero(scope)
        placed = [self._place_task(stmt, queue, task, positions) for task in tasks]
        return any(placed)

    def _scopes(self, job: JobInfo) -> list[BoolArray]:
        """The node masks the job may be placed in: with a hard topology, the domains of tiers 1 up to its
        highestTierAllowed that hold its placed pods and whose free room holds its minResources, lower tiers
        first, tightest first within a tier (Volcano's hyperNodeGradientFn); otherwise the whole cluster."""
        nodes = len(self.ssn.node_list)
        everything = np.ones(nodes, dtype=bool)
        tier = _job_tier(job, self.topology.top)
        if tier is None or nodes == 0:
            return [everything]
        need = np.zeros(self.ssn.arrays.idle.shape[0], dtype=np.int64)
        if job.min_resources is not None:
            need = self._vector(job.min_resources)
        used = _placed_positions(self.ssn, list(job.tasks.values()))
        return self._gradient(range(1, tier + 1), everything, used, need)[:MAX_SCOPES]

    def _gradient(self, tiers: Sequence[int], scope: BoolArray, used: IntArray, need: IntArray) -> list[BoolArray]:
        """The domains of `tiers` inside `scope` that hold every position in `used` and whose free room holds
        `need`, tier by tier from the lowest, tightest first within a tier (ties by domain id)."""
        idle = self.ssn.arrays.idle
        out: list[BoolArray] = []
        for tier in tiers:
            row = self.topology.domain[tier]
            if used.size:
                ids = np.unique(row[used])
                if ids.size > 1:
                    continue  # the placed pods span more than this tier
            else:
                ids = np.unique(row[scope])
            fits: list[tuple[int, int]] = []
            for domain in ids.tolist():
                inside = scope & (row == domain)
                room = idle[:, inside].sum(axis=1)
                if inside.any() and (room >= need).all():
                    fits.append((int((room - need).sum()), domain))
            out.extend(scope & (row == d) for _, d in sorted(fits))
        return out

    # ---- one sub-group ---------------------------------------------------------------------------------------
    def _place_group(self, stmt: Statement, queue: QueueInfo, job: JobInfo, key: GroupKey,
                     tasks: list[TaskInfo], scope: BoolArray) -> bool:
        """Place the sub-group's pending tasks inside `scope`; a hard one inside one domain of its gradient (tiers
        1 up to its highestTierAllowed, the lowest that holds it, tightest first: allocateForSubJob). False if it
        does not reach subGroupSize placed pods (its placements are then rolled back)."""
        subs = job.subs
        assert subs is not None
        policy = job.sub_groups[key[0]]
        tier = policy.topology.hard_tier(self.topology.top, self.tier_names) if policy.topology is not None else None
        if tier is None:
            domains = [scope]
        else:
            members = [t for t in job.tasks.values() if subs.of.get(t.key) == key]
            used = _placed_positions(self.ssn, members)
            domains = self._gradient(range(1, tier + 1), scope, used, self._need(tasks))
        for allowed in domains:
            mark = stmt.mark()
            positions = np.flatnonzero(allowed)
            for task in tasks:
                self._place_task(stmt, queue, task, positions)
            if subs.group_ready(key, waiting=False):
                return True
            stmt.rollback(mark)
        return False

    def _need(self, tasks: list[TaskInfo]) -> IntArray:
        """The summed requests of the tasks (SubJobInfo.GetMinResources: its pending tasks)."""
        need = np.zeros(self.ssn.arrays.idle.shape[0], dtype=np.int64)
        for task in tasks:
            need = need + self._vector(task.resreq)
        return need

    def _vector(self, resource: Resource) -> IntArray:
        try:
            return self.ssn.arrays.vector(resource)
        except KeyError:  # a resource no node has: nothing holds it
            return np.full(self.ssn.arrays.idle.shape[0], np.iinfo(np.int64).max // 4, dtype=np.int64)

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
        tier = policy.topology.hard_tier(self.topology.top, self.tier_names) if policy.topology is not None else None
        if tier is None:
            return TopologyNoFit(self.topology.top)
        return SubGroupNoDomain(group_name(job.sub_groups, key), pending, tier, self.topology.tier_name(tier))
