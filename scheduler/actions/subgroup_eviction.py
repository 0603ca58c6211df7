"""Layer `actions`: gangpreempt and gangreclaim for a job with sub-groups — each sub-group that needs room gets a
HyperNode of its own inside the job's domain (Volcano's BuildNominationPlanInDomain, organizeEvictionWorksheet,
runSimulateTrialAtHyperNode and CollectPendingTasksForGangEviction, pkg/scheduler/actions/utils/simulate.go; the
sub-group gradient is network-topology-aware's HyperNodeGradientForSubJobFn with PurposeEvict,
plugins/network-topology-aware/network_topology_aware.go).

Once gang_evict.py has evicted a set of victims in the job's domain, the plan goes on here:

1. The worksheet: the job's sub-groups with pending pods (not gated, requesting something), those still needed for
   their policy's `minSubGroups` first, then by partition number; the pods in no sub-group (Volcano's default
   sub-job) with them, as allocate orders them (`SubGroupPlacer._group_order`). A job already ready asks room for
   its first sub-group only.
2. Each sub-group in turn: a hard one (a `highestTierAllowed`, or a `highestTierName` some HyperNode carries) is
   tried in the domains of tiers 1 up to its tier inside the job's domain; a sub-group that already has pods
   placed searches only under the domain of its tier that holds them (getSearchRoot), every domain there offered;
   otherwise only domains whose nodes' allocatable holds its pending pods (isEligibleHyperNode for eviction).
   Widest first, lower tiers after, each tier by name, at most `hypernode.gradient.evict.max-hypernodes` (8).
   A soft or topology-less sub-group, and the pods in no sub-group, are tried in the job's domain.
3. In a domain, every pending pod of the sub-group is pipelined, in TaskOrder, on the best node there that its
   predicates allow and whose future idle holds it (gang_evict's `best_node`, allocate's predicate error cache
   per trial), under Allocatable; the sub-group must then be ready or pipelined. A trial that fails is rolled
   back and the next domain tried; a sub-group that fits no domain ends the plan (undone by the caller).
4. The plan stops once the job is pipelined (or, for a ready job, after its one sub-group); it holds only if the
   job is then pipelined: its minAvailable, task minimums and every policy's minSubGroups.

So a hard sub-group never ends up pipelined across two domains of its tier, and the job is never left with part of
its minimum. The domain each sub-group got is returned (Volcano's NominatedHyperNode); volcano-py keeps it in the
session only (allocate places the job again next cycle, on the room its victims freed).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from scheduler.actions.subgroups import LOOSE, BoolArray, SubGroupPlacer, placed_positions
from scheduler.api.job import JobInfo, TaskInfo
from scheduler.api.node import NodeInfo
from scheduler.api.queue import QueueInfo
from scheduler.api.subgroups import GroupKey
from scheduler.framework import points as P
from scheduler.framework.session import Session
from scheduler.framework.statement import Statement
from scheduler.plugins.topology import DEFAULT_EVICT_MAX, TopologyArgs

BestNode = Callable[[Session, TaskInfo, set[str], dict[tuple[str, str], set[str]]], NodeInfo | None]
NO_HYPERNODE = "node:"  # solver.topology's name for a node with no domain at a tier


def evict_max(ssn: Session) -> int:
    """network-topology-aware's `hypernode.gradient.evict.max-hypernodes`, as configured (8 without it)."""
    for tier in ssn.conf.tiers:
        for option in tier.plugins:
            if option.name == "network-topology-aware" and isinstance(option.args, TopologyArgs):
                return option.args.evict_max
    return DEFAULT_EVICT_MAX


class SubGroupEviction(SubGroupPlacer):
    """One per gang-eviction run; the topology is built on first use."""

    def __init__(self, ssn: Session, best_node: BestNode) -> None:
        super().__init__(ssn)
        self.best_node = best_node
        self.max_domains = evict_max(ssn)

    def worksheet(self, job: JobInfo) -> list[tuple[GroupKey, list[TaskInfo]]]:
        """1.: the sub-groups with pending pods, in order, each with its pending pods in TaskOrder."""
        subs = job.subs
        assert subs is not None
        groups: dict[GroupKey, list[TaskInfo]] = {}
        for task in self.ssn.order.task_order(job.placeable()):
            if not task.resreq.is_zero():
                groups.setdefault(subs.of.get(task.key, LOOSE), []).append(task)
        sheet = [(key, groups[key]) for key in self._group_order(job, groups)]
        return sheet[:1] if job.is_ready() else sheet

    def pending(self, job: JobInfo) -> list[TaskInfo]:
        """What the job asks room for (CollectPendingTasksForGangEviction)."""
        return [task for _, tasks in self.worksheet(job) for task in tasks]

    def nominate(self, stmt: Statement, queue: QueueInfo, job: JobInfo, domain: str,
                 nodes: frozenset[str]) -> dict[GroupKey, str] | None:
        """2.-4.: pipeline the sub-groups inside the job's domain (`domain`, its `nodes`); the domain each got, or
        None if the job is not then pipelined (what was pipelined is left for the caller to roll back)."""
        ssn = self.ssn
        was_ready = job.is_ready()
        scope = np.zeros(len(ssn.node_list), dtype=bool)
        scope[[ssn.arrays.position[name] for name in nodes if name in ssn.arrays.position]] = True
        chosen: dict[GroupKey, str] = {}
        pipelined = False
        members = self.group_members(job)
        for key, tasks in self.worksheet(job):
            for name, allowed in self._domains(job, key, tasks, members.get(key, []), domain, scope):
                mark = stmt.mark()
                if self._trial(stmt, queue, job, key, tasks, allowed):
                    chosen[key] = name
                    break
                stmt.rollback(mark)
            else:
                return None
            pipelined = not ssn.tiers.run(P.JOB_PIPELINED, job).rejected
            if was_ready or pipelined:
                break
        return chosen if pipelined else None

    def _domains(self, job: JobInfo, key: GroupKey, tasks: list[TaskInfo], members: list[TaskInfo], domain: str,
                 scope: BoolArray) -> list[tuple[str, BoolArray]]:
        """2.: where the sub-group (its pending `tasks`, all its `members`) may go, as (name, node mask), in the
        order tried."""
        policy = job.sub_groups[key[0]] if key != LOOSE else None
        topo = self.topology
        tier = (policy.topology.hard_tier(topo.top, self.tier_names)
                if policy is not None and policy.topology is not None else None)
        if tier is None or tier >= topo.top:
            return [(domain, scope)]
        used = placed_positions(self.ssn, members)
        root = scope
        if used.size:
            held = np.unique(topo.domain[tier][used])
            if held.size > 1:
                return []  # its placed pods already span more than its tier
            root = scope & (topo.domain[tier] == held[0])
        need = self._need(tasks)
        allocatable = self.ssn.arrays.allocatable
        rows: list[list[tuple[str, BoolArray]]] = []
        for level in range(1, tier + 1):
            row = topo.domain[level]
            names = topo.domain_names[level]
            found = []
            for ident in np.unique(row[root]).tolist():
                name = names[ident]
                inside = row == ident
                if name.startswith(NO_HYPERNODE) or (inside & ~root).any():
                    continue  # no HyperNode here, or one that reaches outside the search root
                if used.size or (allocatable[:, inside].sum(axis=1) >= need).all():
                    found.append((name, inside))
            if found:
                rows.append(sorted(found, key=lambda pair: pair[0]))
        out: list[tuple[str, BoolArray]] = []
        for found in reversed(rows):  # widest first, cut as network-topology-aware cuts the job's gradient
            room = self.max_domains - len(out)
            if room <= 0:
                break
            out.extend(found[-room:] if len(found) > room else found)
        return out

    def _trial(self, stmt: Statement, queue: QueueInfo, job: JobInfo, key: GroupKey, tasks: list[TaskInfo],
               allowed: BoolArray) -> bool:
        """3.: every pending pod of the sub-group pipelined inside `allowed`, and the sub-group then pipelined."""
        ssn = self.ssn
        names = {ssn.node_list[i].name for i in np.flatnonzero(allowed).tolist()}
        turned_away: dict[tuple[str, str], set[str]] = {}
        for task in tasks:
            if not ssn.tiers.run(P.ALLOCATABLE, queue, task).ok:
                return False
            node = self.best_node(ssn, task, names, turned_away)
            if node is None:
                return False
            stmt.pipeline(task, node)
        subs = job.subs
        assert subs is not None
        return bool(tasks) and (key == LOOSE or subs.group_ready(key, waiting=True))
