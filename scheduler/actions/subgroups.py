"""Layer `actions`: place a job with sub-groups sub-group by sub-group, each whole, in the HyperNode Volcano
would choose for it (Volcano's allocateForJob / allocateForSubJob, pkg/scheduler/actions/allocate/allocate.go).

A job with a sub-group policy (PodGroup `spec.subGroupPolicy`, api/subgroups.py; the job controller writes one
per partitioned task) is placed here, as Volcano sends every such job through allocateForJob: never pod by pod
nor by a gang placer that does not know its sub-groups:

1. The job's gradients: with a job-level tier (hard `networkTopology` with `highestTierAllowed` or a known
   `highestTierName`; soft mode is the cluster's tier, as session.go convertSoftToHardTopology makes it), the
   domains of tiers 1 up to it under the job's search root, lower tiers first (Volcano's hyperNodeGradientFn): the
   root is the whole cluster for a job that holds no node yet, and then only domains whose idle (or future idle)
   holds its minResources are tried; otherwise the domain of that tier around the pods it holds (getSearchRoot),
   with no room check. Without a tier: the whole cluster.
2. In each domain of a gradient, the sub-groups are placed (a dry run) in Volcano's order: those still needed for
   their policy's `minSubGroups` first, then by partition number (`match_index`); with `requeue`, it stops once
   the job is ready. The domain whose run makes the job ready with the highest sum of its sub-groups' scores
   wins (selectBestHyperNodeForJob; equal sums: the tightest domain first), and the job is placed there again.
   At most `MAX_SCOPES` job-level domains of each tier are tried per job and turn, the tightest (Volcano tries
   every one); every tier up to the job's is still tried when no lower one holds the job.
3. One sub-group in the job's domain: its gradients the same way from its own tier (a hard one's, or for a soft
   one the job's tier, else the cluster's: convertSoftToHardTopology), its root the domain around its placed pods,
   and its need its pending pods' requests. In each domain of the lowest gradient where it reaches
   `subGroupSize` placed pods (dry run, pods placed one by one through the configured predicates and scorers),
   the HYPERNODE_ORDER point scores it (network-topology-aware's hypernode binpack: the fullest wins); it is
   placed again in the best (selectBestHyperNodeForSubJob; equal scores: the tightest domain first, where Volcano
   picks at random). A sub-group without a topology takes the job's domain as its one candidate. A sub-group
   that reaches `subGroupSize` nowhere is left pending, whole.
4. Pods in no sub-group go anywhere in the job's domain, pod by pod.
5. If the job is then ready (the gang plugin: minAvailable, task minimums, each policy's minSubGroups), the
   placements are committed; otherwise they are discarded. A job that fits nowhere keeps its pods pending with the
   reason (`SubGroupNoDomain`).

No placement is ever made that puts a hard sub-group's pods in two domains of its tier, or a job's outside its
search root: each pod is placed only on a node of the domain chosen for it (tests/core/test_subgroup_placement.py
and tests/core/test_subgroup_hypernode_choice.py check it over seeded random workloads).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

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
    SubGroupPolicy,
    group_name,
    match_index,
    sub_group_job as sub_group_job,  # re-exported for the other actions
)
from scheduler.framework import points
from scheduler.framework.arrays import IntArray
from scheduler.framework.session import Session
from scheduler.framework.statement import Statement
from scheduler.solver.topology import Topology, TopologyLabels, from_domains, from_hypernodes, tier_names

MAX_SCOPES = 16  # job-level domains tried per tier, per job and turn
LOOSE: GroupKey = (-1, "")  # the pods in no sub-group
CLUSTER = "<cluster>"
BoolArray = npt.NDArray[np.bool_]
Candidate = tuple[str, BoolArray]  # a domain's name and its nodes as a mask over the session's node list


def session_topology(ssn: Session) -> Topology:
    """The session's topology as network-topology-aware builds it by default: HyperNodes, else node labels."""
    names = [n.name for n in ssn.node_list]
    if ssn.hypernodes:
        return from_hypernodes(names, ssn.hypernodes)
    return from_domains(names, ssn.domains, TopologyLabels())


def spec_tier(spec: Mapping[str, Any] | None, top: int, names: Mapping[str, int]) -> int | None:
    """A job's highest tier as Volcano's session leaves it (translateHighestTierNameToAllowed, then
    convertSoftToHardTopology): soft is the cluster's tier; hard is highestTierAllowed or the tier its
    highestTierName names; None without a topology or for a hard one with neither (IsHardTopologyMode)."""
    if not spec:
        return None
    if str(spec.get("mode", "hard")).lower() == "soft":
        return top
    allowed = spec.get("highestTierAllowed")
    if allowed is None and spec.get("highestTierName"):
        allowed = names.get(str(spec["highestTierName"]))
    return None if allowed is None else min(int(allowed), top)


def group_tier(policy: SubGroupPolicy, job_tier: int | None, top: int, names: Mapping[str, int]) -> int | None:
    """A sub-group's highest tier as Volcano's session leaves it: hard, its own (SubJobInfo.IsHardTopologyMode);
    soft, the job's tier, else the cluster's (convertSoftToHardTopology: a soft sub-group prefers low tiers but
    never leaves the job's); None without a topology (placed anywhere in the job's domain)."""
    topology = policy.topology
    if topology is None:
        return None
    if topology.hard:
        return topology.hard_tier(top, names)
    return top if job_tier is None else job_tier


def placed_positions(ssn: Session, tasks: Sequence[TaskInfo]) -> IntArray:
    """Where the tasks that hold a node (placed or waiting) are, as node positions."""
    out = [ssn.arrays.position[t.node_name] for t in tasks
           if t.node_name and (t.status in READY_STATUSES or t.status is TaskStatus.PIPELINED)
           and t.node_name in ssn.arrays.position]
    return np.array(out, dtype=np.int64)


@dataclass(slots=True)
class _Run:
    """One dry run of the job in a domain: the sum of its sub-groups' scores, whether it stopped ready with
    sub-groups left, and the sub-groups that fit nowhere."""

    score: float = 0.0
    early: bool = False
    missing: list[GroupKey] = field(default_factory=list)


class SubGroupPlacer:
    """One per allocate run (the topology is built on first use)."""

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self._topology: Topology | None = None
        self._tier_names: dict[str, int] | None = None
        self._releasing: BoolArray | None = None  # nodes with pods releasing, read at need in each `place`

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

    def job_tier(self, job: JobInfo) -> int | None:
        return spec_tier(job.extra.get("networkTopology"), self.topology.top, self.tier_names)

    # ---- the job ----------------------------------------------------------------------------------------
    def place(self, queue: QueueInfo, job: JobInfo, requeue: Callable[[JobInfo], None] | None = None) -> bool:
        """Place what fits of the job, sub-group by sub-group; True if committed (the job is ready). Once the job
        is ready with sub-groups left, commit and requeue it, as Volcano's allocateForJob stops at JobReady: other
        jobs reach their minimums before this one takes its extras (one sub-group per turn once ready)."""
        ssn = self.ssn
        subs = job.subs
        assert subs is not None
        self._releasing = None
        groups: dict[GroupKey, list[TaskInfo]] = {}
        for task in ssn.order.task_order(job.placeable()):
            groups.setdefault(subs.of.get(task.key, LOOSE), []).append(task)
        order = self._group_order(job, groups)
        members = self.group_members(job)
        why: Reason | None = None
        for gradient in self._job_gradients(job):
            gradient = gradient[:MAX_SCOPES]  # per tier: a cap across tiers left the higher ones untried
            best: tuple[float, int] | None = None
            for index, (_, scope) in enumerate(gradient if len(gradient) > 1 else ()):
                stmt = ssn.statement()
                run = self._run(stmt, queue, job, groups, members, order, scope, requeue is not None)
                if len(stmt) and ssn.tiers.run(points.JOB_READY, job) and (best is None or run.score > best[0]):
                    best = (run.score, index)
                stmt.discard()
                if run.missing and why is None:
                    why = self._no_domain(job, run.missing[0], len(groups[run.missing[0]]))
            if len(gradient) > 1 and best is None:
                continue
            stmt = ssn.statement()
            scope = gradient[best[1] if best else 0][1]
            run = self._run(stmt, queue, job, groups, members, order, scope, requeue is not None)
            if len(stmt) and ssn.tiers.run(points.JOB_READY, job):
                stmt.commit()
                if run.early and requeue is not None:
                    requeue(job)
                return True
            stmt.discard()
            if run.missing and why is None:
                why = self._no_domain(job, run.missing[0], len(groups[run.missing[0]]))
        if why is None:
            tier = self.job_tier(job)
            why = TopologyNoFit(self.topology.top if tier is None else tier)  # tier 0 is a tier, not "none"
        ssn.results.hold(job, Status(Code.UNSCHEDULABLE, (why,), "allocate"))
        if ssn.trace:
            ssn.trace(f"sub-groups of {job.key}: not placed ({why})")
        return False

    def _run(self, stmt: Statement, queue: QueueInfo, job: JobInfo, groups: dict[GroupKey, list[TaskInfo]],
             members: Mapping[GroupKey, list[TaskInfo]], order: list[GroupKey], scope: BoolArray,
             stop_when_ready: bool) -> _Run:
        """The sub-groups in `order` placed inside `scope` (allocateForJob's loop over one HyperNode)."""
        run = _Run()
        job_tier = self.job_tier(job)
        for index, key in enumerate(order):
            if key == LOOSE:
                loose = self._score(job, members.get(key, []), [(CLUSTER, scope)])[CLUSTER]
                placed = self._place_loose(stmt, queue, groups[key], scope)
                run.score += loose if placed else 0.0
            else:
                score = self._place_group(stmt, queue, job, key, groups[key], members.get(key, []), scope, job_tier)
                placed = score is not None
                if score is None:
                    run.missing.append(key)
                else:
                    run.score += score
            if placed and stop_when_ready and index + 1 < len(order) and self.ssn.tiers.run(points.JOB_READY, job):
                run.early = True
                return run
        return run

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

    def _job_gradients(self, job: JobInfo) -> list[list[Candidate]]:
        everything = np.ones(len(self.ssn.node_list), dtype=bool)
        tier = self.job_tier(job)
        if tier is None or not everything.size:
            return [[(CLUSTER, everything)]]
        need = np.zeros(self.ssn.arrays.idle.shape[0], dtype=np.int64)
        if job.min_resources is not None:
            need = self._vector(job.min_resources)
        used = placed_positions(self.ssn, list(job.tasks.values()))
        return self._gradients(tier, everything, used, need)

    def _gradients(self, tier: int, scope: BoolArray, used: IntArray, need: IntArray) -> list[list[Candidate]]:
        """Volcano's hyperNodeGradientFn below `scope`: the search root is `scope`, or with pods `used` already
        placed, the highest domain of tier <= `tier` around them (getSearchRoot; none if they span more, or if it
        and `scope` do not nest). Then the domains of tiers 1 up to `tier` under the root, per tier, tightest
        first; without placed pods only those whose idle or future idle holds `need` (isEligibleHyperNode).
        A node without a HyperNode at a tier is no domain there (only with HyperNodes: label tiers are volcano-py's
        own, where a node is its own NVLink domain)."""
        topo = self.topology
        pseudo = bool(self.ssn.hypernodes)
        root, check = scope, True
        if used.size:
            check = False
            around = None
            for t in range(tier, 0, -1):
                ids = np.unique(topo.domain[t][used])
                if ids.size == 1 and not (pseudo and topo.domain_names[t][int(ids[0])].startswith("node:")):
                    around = topo.domain[t] == ids[0]
                    break
            if around is None:
                return []
            if not (scope & ~around).any():
                root = scope
            elif not (around & ~scope).any():
                root = around
            else:
                return []
        arrays = self.ssn.arrays
        out: list[list[Candidate]] = []
        for t in range(1, tier + 1):
            row = topo.domain[t]
            fits: list[tuple[int, int, Candidate]] = []
            for domain in np.unique(row[root]).tolist():
                name = topo.domain_names[t][domain]
                if pseudo and name.startswith("node:"):
                    continue
                inside = root & (row == domain)
                room = arrays.idle[:, inside].sum(axis=1)
                if check and not ((room >= need).all() or self._future_holds(inside, need)):
                    continue
                fits.append((int((room - need).sum()), domain, (name, inside)))
            if fits:
                out.append([candidate for _, _, candidate in sorted(fits, key=lambda f: f[:2])])
        return out

    def _future_holds(self, inside: BoolArray, need: IntArray) -> bool:
        """Whether the nodes' future idle (idle plus releasing, less pipelined) holds `need`. Asked only where idle
        does not: without a releasing node among them future idle is no more than idle, so the Python sum over
        the nodes is skipped (nothing is evicted while a job is placed: the releasing nodes are read once per
        `place`)."""
        if self._releasing is None:
            self._releasing = np.array([not n.releasing.is_zero() for n in self.ssn.node_list], dtype=bool)
        if not (inside & self._releasing).any():
            return False
        nodes = self.ssn.node_list
        total = Resource.total(nodes[int(i)].future_idle() for i in np.flatnonzero(inside))
        return bool((self.ssn.arrays.vector(total, strict=False) >= need).all())

    # ---- one sub-group ---------------------------------------------------------------------------------------
    @staticmethod
    def group_members(job: JobInfo) -> dict[GroupKey, list[TaskInfo]]:
        """Each sub-group's tasks, placed or not (Volcano's SubJobInfo.Tasks), LOOSE for the pods in none: one pass
        over the job's tasks, taken once per placement of the job (a scan per sub-group was quadratic in them)."""
        subs = job.subs
        assert subs is not None
        out: dict[GroupKey, list[TaskInfo]] = {}
        for task in job.tasks.values():
            out.setdefault(subs.of.get(task.key, LOOSE), []).append(task)
        return out

    def _score(self, job: JobInfo, members: list[TaskInfo], candidates: list[Candidate]) -> dict[str, float]:
        """HYPERNODE_ORDER's scores of the candidates for the sub-group (0 each when no plugin scores)."""
        if not self.ssn.tiers.has(points.HYPERNODE_ORDER):
            return {name: 0.0 for name, _ in candidates}
        masks = {name: np.flatnonzero(mask) for name, mask in candidates}
        return self.ssn.tiers.run(points.HYPERNODE_ORDER, job, members, masks)

    def _place_group(self, stmt: Statement, queue: QueueInfo, job: JobInfo, key: GroupKey, tasks: list[TaskInfo],
                     members: list[TaskInfo], scope: BoolArray, job_tier: int | None) -> float | None:
        """Place the sub-group's pending tasks inside `scope` in the domain Volcano would choose
        (allocateForSubJob: the lowest gradient where it fits, the best HYPERNODE_ORDER score there); its score,
        or None if it reaches subGroupSize placed pods nowhere (nothing of it is then kept)."""
        subs = job.subs
        assert subs is not None
        tier = group_tier(job.sub_groups[key[0]], job_tier, self.topology.top, self.tier_names)
        if tier is None:
            gradients: list[list[Candidate]] = [[(CLUSTER, scope)]]
        else:
            gradients = self._gradients(tier, scope, placed_positions(self.ssn, members), self._need(tasks))
        placed_before = any(t.status is not TaskStatus.PENDING for t in members)
        for gradient in gradients:
            fits = self._fitting(stmt, queue, job, key, tasks, members, gradient, placed_before)
            if not fits:
                continue
            scores = self._score(job, members, fits)
            name, allowed = max(fits, key=lambda c: scores[c[0]])  # the first of equal scores
            self._place_all(stmt, queue, tasks, allowed)
            return scores[name]
        return None

    def _fitting(self, stmt: Statement, queue: QueueInfo, job: JobInfo, key: GroupKey, tasks: list[TaskInfo],
                 members: list[TaskInfo], gradient: list[Candidate], placed_before: bool) -> list[Candidate]:
        """The candidates Volcano's choice among those where the sub-group fits can fall on: a score does not
        depend on the dry run (it is taken after it is undone), so the candidates are tried best score first, and
        only those sharing the score of the first that holds the sub-group are kept (all of them when the
        sub-group already has pods placed, whose share breaks ties; otherwise the first, which is the one the
        choice among equals takes)."""
        subs = job.subs
        assert subs is not None
        scores = self._score(job, members, gradient)
        fits: list[Candidate] = []
        for candidate in sorted(gradient, key=lambda c: -scores[c[0]]):  # stable: the tightest first among equals
            if fits and (scores[candidate[0]] != scores[fits[0][0]] or not placed_before):
                break
            mark = stmt.mark()
            self._place_all(stmt, queue, tasks, candidate[1])
            if subs.group_ready(key, waiting=False):
                fits.append(candidate)
            stmt.rollback(mark)
        return fits

    def _place_all(self, stmt: Statement, queue: QueueInfo, tasks: list[TaskInfo], allowed: BoolArray) -> None:
        positions = np.flatnonzero(allowed)
        for task in tasks:
            self._place_task(stmt, queue, task, positions)

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
        tier = group_tier(job.sub_groups[key[0]], self.job_tier(job), self.topology.top, self.tier_names)
        if tier is None:
            return TopologyNoFit(self.topology.top)
        return SubGroupNoDomain(group_name(job.sub_groups, key), pending, tier, self.topology.tier_name(tier))
