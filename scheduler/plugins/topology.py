"""Layer `plugins`: `network-topology-aware` — place a whole gang at once, as low in the topology as it fits.

At `PLACE_GANG` the plugin turns the gang's pending tasks into a `solver.GangProblem` (tasks grouped by request
and constraints; each group's nodes are those its predicates allow and whose idle holds one task, with the
configured node scorers' score for one task there, `SessionAPI.node_scores`), solves it with CP-SAT warm-started
from the greedy placers (`solver/cpsat.py`) and hands allocate the placement, which allocate replays through a
Statement. Placements are ranked by their topology terms, then by the scorers allocate uses pod by pod
(binpack, nodeorder, deviceshare's fragmentation score; `solver/evaluate.py` says where in the key). The
topology comes from HyperNodes when the session has them, otherwise from node labels (the session's label
domains, `SessionAPI.domains`, which the predicates' pod affinity counts by too).

The job's `networkTopology` (PodGroup spec) is honoured as in Volcano: `mode: hard` never spans above
`highestTierAllowed` (default 1) or the tier `highestTierName` names (a HyperNode `spec.tierName`) and leaves
the gang pending with a reason that says what is missing; `mode: soft` prefers low tiers but spans when it must.

With HyperNodes, the HyperNode a job with a `networkTopology` goes to is chosen as Volcano chooses it
(`plugins/hypernode_score.py`): lower tiers first, then the highest hypernode-level binpack score (so a
HyperNode whose nodes already hold work wins), the first that holds the job's tasks pod by pod; the job's
HyperNode is kept in the PodGroup annotation `volcano.sh/job-allocated-hypernode`, so a pod that comes back
(killed, evicted) or a restarted scheduler keeps the job inside it. CP-SAT then places the tasks inside the
chosen HyperNode, and tries the HyperNodes in the same order only when none holds the job pod by pod.
`solver.chooseDomains: true` gives the choice back to CP-SAT's own objective (lowest tier, fewest domains,
fewest stranded GPUs, then the node scorers) over every allowed domain at once, as volcano-py did before.

Only jobs with a `networkTopology` are placed this way, as in Volcano; the others go pod by pod through the
configured scorers. `solver.everyGang: true` places every gang of two or more tasks whole (a topology-less gang
then prefers the lowest tier it fits in).

A job that holds nodes and has a hard topology is placed only inside its search root (Volcano's getSearchRoot:
the domain of its highest tier around its pods); allocate asks this plugin for each further pod of such a job
once it is ready (its extras, a killed pod's replacement), so they never land outside it.

At `HYPERNODE_ORDER` the plugin scores the domains a sub-group fits in (`actions/subgroups.py`) by the same
hypernode-level binpack (Volcano's HyperNodeOrderFn); `enabledHyperNodeOrder: false` turns it off.

With HyperNodes, a pod of a job without a `networkTopology` is scored on each node by the HyperNodes around
it (Volcano's normal-pod score, `hypernode_score.NodeLevel`), so such pods also fill the domains in use first.

Arguments: `solver.everyGang` (false), `solver.chooseDomains` (false), Volcano's `weight` (1),
`hypernode.binpack.cpu` (1), `hypernode.binpack.memory` (1), `hypernode.binpack.resources` (a comma list) with
`hypernode.binpack.resources.<name>` (1 each), `hypernode.binpack.normal-pod.enable` (true),
`hypernode.binpack.normal-pod.fading` (0.8), and
`solver.timeLimitMs` (200) per gang, `solver.cycleBudgetMs` (500) for all gangs of a cycle (after
it, and for single pods, allocate places pod by pod; a hard-mode gang then gets only the topology greedy),
`solver.workers` (2), `topology.zoneLabel`, `topology.rackLabel`, `topology.nvlinkLabel` (node label names),
`topology.hypernodes` (a list of HyperNode objects, for a cluster without the HyperNode API).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from scheduler.api.decision import SUCCESS, unschedulable
from scheduler.api.job import JobInfo, TaskInfo
from scheduler.api.node import NodeInfo
from scheduler.api.reasons import Reason, TopologyLimit, TopologyNoFit, TopologyNoNode
from scheduler.api.resources import CPU, GPU, ZERO, Resource
from scheduler.framework import points as P
from scheduler.framework.arrays import IntArray, NodeArrays
from scheduler.framework.conf_args import ArgReader
from scheduler.framework.evictable import CLUSTER_DOMAIN, Domain
from scheduler.framework.plugin import Plugin, SessionAPI
from scheduler.plugins import hypernode_score as hn
from scheduler.plugins.shares import without_pods
from scheduler.solver.evaluate import GangProblem, Group, Placement, evaluate
from scheduler.solver.greedy import per_pod_binpack, topology_greedy
from scheduler.solver.subgroups import abstain_for_sub_groups
from scheduler.solver.topology import Topology, TopologyLabels, from_domains, from_hypernodes, tier_names

TIME_LIMIT = "solver.timeLimitMs"
EVERY_GANG = "solver.everyGang"
CYCLE_BUDGET = "solver.cycleBudgetMs"
WORKERS = "solver.workers"
HYPERNODES = "topology.hypernodes"
CHOOSE_DOMAINS = "solver.chooseDomains"
EVICT_MAX = "hypernode.gradient.evict.max-hypernodes"  # Volcano's argument, default 8
DEFAULT_EVICT_MAX = 8


@dataclass(frozen=True, slots=True)
class TopologyArgs:
    time_limit_ms: int = 200
    cycle_budget_ms: int = 500
    workers: int = 2  # at least 1
    labels: TopologyLabels = field(default_factory=TopologyLabels)
    # Volcano's plugin shapes only the jobs that ask for a network topology; the rest are allocated pod by pod
    # (pkg/scheduler/actions/allocate/allocate.go takes the hypernode path only for such jobs). With
    # `solver.everyGang: true` volcano-py places every gang of 2+ tasks whole, preferring low tiers.
    every_gang: bool = False
    hypernodes: tuple[Mapping[str, Any], ...] = ()  # used when the session has no HyperNodes of its own
    evict_max: int = DEFAULT_EVICT_MAX  # at most this many domains to look for victims in (gang eviction)
    weights: hn.BinpackWeights = field(default_factory=hn.BinpackWeights)  # the hypernode-level binpack's
    choose_domains: bool = False  # CP-SAT's objective picks the HyperNode, not Volcano's gradients and score
    normal_pods: hn.NormalPods = field(default_factory=hn.NormalPods)  # hypernode.binpack.normal-pod.*


def _hypernodes(reader: ArgReader) -> tuple[Mapping[str, Any], ...]:
    value = reader.raw(HYPERNODES)
    if value is None:
        return ()
    if not isinstance(value, tuple) or not all(isinstance(h, Mapping) for h in value):
        raise reader.fail(HYPERNODES, "a list of HyperNode objects")
    return value


class NetworkTopologyAwarePlugin(Plugin[TopologyArgs]):
    name = "network-topology-aware"

    @classmethod
    def parse_args(cls, reader: ArgReader) -> TopologyArgs:
        defaults = TopologyLabels()
        time_limit = reader.integer(TIME_LIMIT, 200)
        budget = reader.integer(CYCLE_BUDGET, 500)
        workers = max(1, reader.integer(WORKERS, 2))
        nvlink = reader.string("topology.nvlinkLabel", "")
        labels = TopologyLabels(
            zone=reader.string("topology.zoneLabel", defaults.zone),
            rack=reader.string("topology.rackLabel", defaults.rack),
            nvlink=(nvlink,) if nvlink else defaults.nvlink,
        )
        evict_max = reader.integer(EVICT_MAX, DEFAULT_EVICT_MAX)
        return TopologyArgs(time_limit, budget, workers, labels, reader.boolean(EVERY_GANG, False),
                            _hypernodes(reader), evict_max if evict_max > 0 else DEFAULT_EVICT_MAX,
                            hn.parse_weights(reader), reader.boolean(CHOOSE_DOMAINS, False),
                            hn.parse_normal_pods(reader))

    def on_session_open(self, ssn: SessionAPI) -> None:
        self.ssn = ssn
        self.time_limit_ms = self.args.time_limit_ms
        self.budget_ms = self.args.cycle_budget_ms
        self.workers = self.args.workers
        self.labels = self.args.labels
        self.every_gang = self.args.every_gang
        self.spent_ms = 0.0
        self._topology: Topology | None = None
        self._members: list[list[TaskInfo]] = []
        self._volcano = (None if self.args.choose_domains
                        else hn.HyperNodeChoice.open(ssn, self.args.hypernodes, self.args.weights))
        hypernodes = ssn.hypernodes or self.args.hypernodes
        self._node_level = (hn.NodeLevel.build(hn.HyperNodeTree.cached([n.name for n in ssn.node_list], hypernodes),
                                               len(ssn.node_list), self.args.weights, self.args.normal_pods.fading)
                            if hypernodes and self.args.normal_pods.enable else None)
        self._position = {n.name: i for i, n in enumerate(ssn.node_list)}

    def inactive_points(self) -> frozenset[str]:
        return frozenset({"batch_node_order", "batch_node_order_one"}) if self._node_level is None else frozenset()

    def on_session_close(self, ssn: SessionAPI) -> None:
        if self._volcano is not None:
            self._volcano.close(ssn)

    # ---- BATCH_NODE_ORDER (with HyperNodes, for pods of jobs without a network topology) -------------------
    def batch_node_order(self, task: TaskInfo, arrays: NodeArrays, indices: IntArray) -> P.FloatArray:
        """Volcano's hypernode-level binpack for such pods (`hypernode_score.NodeLevel`); 0 for the pods of a job
        with a network topology (Volcano scores those by their job's HyperNode, which CP-SAT's topology terms
        stand for here)."""
        job = self.ssn.jobs.get(task.job)
        if self._node_level is None or job is None or job.extra.get("networkTopology"):
            return np.zeros(indices.size)

        def row(table: IntArray) -> Callable[[str], IntArray | None]:
            return lambda name: table[arrays.row[name]] if name in arrays.row else None

        return self._node_level.scores(task.resreq, row(arrays.allocatable), row(arrays.idle), indices)

    def batch_node_order_one(self, task: TaskInfo, node: NodeInfo) -> float:
        return float(self.batch_node_order(task, self.ssn.arrays, np.array([self._position[node.name]]))[0])

    # ---- HYPERNODE_ORDER (which HyperNode a sub-group goes to, actions/subgroups.py) ----------------------
    def hypernode_order(self, job: JobInfo, tasks: Sequence[TaskInfo],
                        candidates: Mapping[str, IntArray]) -> dict[str, float]:
        """Volcano's HyperNodeOrderFn: the hypernode-level binpack of the sub-group's tasks in each candidate
        (`hypernode_score.sub_group_scores`)."""
        return hn.sub_group_scores(self.args.weights, tasks, self.ssn.node_list, self._position, candidates)

    # ---- EVICT_DOMAINS ----------------------------------------------------------------------------------
    def evict_domains(self, job: JobInfo) -> list[Domain]:
        """Where gangpreempt and gangreclaim look for a job with a hard network topology (Volcano's
        HyperNodeGradientForJobFn with PurposeEvict, plugins/network-topology-aware): every domain of tiers 1 up to
        highestTierAllowed whose nodes' allocatable holds the job's minResources, lower tiers first and each tier
        by name, then the whole list reversed (widest first) and cut to `hypernode.gradient.evict.max-hypernodes`
        (taking each tier's last ones). Any other job: the whole cluster. (Volcano walks a tier's HyperNodes in
        Go map order; by name is ours.)

        A job that already holds a HyperNode (`volcano.sh/job-allocated-hypernode`, hypernode_score's rule 4)
        searches only under its search root, the highest ancestor of that HyperNode within its tiers, and every
        domain there is offered whatever its room (Volcano's getSearchRoot and isEligibleHyperNode, which skips the
        pre-filter for a partly placed job); none when that HyperNode is above its highest tier."""
        spec: Mapping[str, Any] | None = job.extra.get("networkTopology")
        everything = Domain(CLUSTER_DOMAIN, -1, frozenset(n.name for n in self.ssn.node_list))
        if not spec or str(spec.get("mode", "hard")).lower() == "soft":
            return [everything]
        allowed = spec.get("highestTierAllowed")
        if allowed is None and spec.get("highestTierName"):
            allowed = tier_names(self.ssn.hypernodes or self.args.hypernodes).get(str(spec["highestTierName"]))
        if allowed is None:
            return [everything]
        topo = self.topology
        highest = min(int(allowed), topo.top - 1)
        root = self._search_root(job, int(allowed))
        if root == frozenset():
            return []
        need = without_pods(job.min_resources or ZERO)
        gradients: list[list[Domain]] = []
        for tier in range(1, highest + 1):
            members: dict[int, list[int]] = {}
            for index, domain_id in enumerate(topo.domain[tier].tolist()):
                members.setdefault(int(domain_id), []).append(index)
            row = []
            for domain_id, indices in members.items():
                name = topo.domain_names[tier][domain_id]
                if name.startswith("node:"):  # no HyperNode of this tier above the node
                    continue
                if root is not None and not root.issuperset(indices):
                    continue  # outside the job's search root
                nodes = [self.ssn.node_list[i] for i in indices]
                if root is not None or need <= without_pods(Resource.total(n.allocatable for n in nodes)):
                    row.append(Domain(name, tier, frozenset(n.name for n in nodes)))
            if row:
                gradients.append(sorted(row, key=lambda d: d.name))
        out: list[Domain] = []
        for row in reversed(gradients):
            room = self.args.evict_max - len(out)
            if room <= 0:
                break
            out.extend(row[-room:] if len(row) > room else row)
        return out

    def _search_root(self, job: JobInfo, highest: int) -> frozenset[int] | None:
        """The node positions under the job's search root for eviction: None when the job holds no HyperNode
        (search the whole cluster); empty when its HyperNode is above `highest` (Volcano's getSearchRoot fails and
        the job gets no domain). The job's HyperNode is the one read when the session opened, widened to take in
        a placement this session committed (as on_session_close writes it)."""
        hypernodes = self.ssn.hypernodes or self.args.hypernodes
        if not hypernodes:
            return None
        if self._volcano is not None:
            tree, allocated = self._volcano.tree, self._volcano.allocated.get(job.key, "")
            chosen = self._volcano.chosen.get(job.key)
            if chosen and self.ssn.got_binds(job.key):
                allocated = tree.lca(allocated, chosen)
        else:
            tree = hn.HyperNodeTree.cached([n.name for n in self.ssn.node_list], hypernodes)
            allocated = hn.allocated_hypernode(tree, job, self._position)
        if not allocated or allocated not in tree.tier:
            return None
        root = ""
        for name in tree.ancestors(allocated):
            if tree.tier[name] > highest:
                break
            root = name
        return tree.nodes[root] if root else frozenset()

    @property
    def topology(self) -> Topology:
        if self._topology is None:
            names = [n.name for n in self.ssn.node_list]
            hypernodes = self.ssn.hypernodes or self.args.hypernodes
            if hypernodes:
                self._topology = from_hypernodes(names, hypernodes)
            else:
                self._topology = from_domains(names, self.ssn.domains, self.labels)
        return self._topology

    # ---- PLACE_GANG -------------------------------------------------------------------------------------
    def place_gang(self, job: JobInfo, tasks: Sequence[TaskInfo]) -> P.GangAnswer:
        spec: Mapping[str, Any] = job.extra.get("networkTopology") or {}
        if spec and self._limits(job)[0] < 0:
            return P.PLACE_BY_POD  # a highestTierName no HyperNode carries: no limit, pod by pod as in Volcano
        volcano = self._volcano is not None and self._volcano.takes(job)
        root = None if volcano else self._root(job)
        if not volcano and root is None and (len(tasks) < 2 or not (self.every_gang or spec)):
            return P.PLACE_BY_POD
        if abstain_for_sub_groups(job):  # the sub-group placer places it (actions/subgroups.py)
            return P.PLACE_BY_POD
        start = time.perf_counter()
        try:
            return self._place_in_hypernode(job, list(tasks), start) if volcano else self._place(job, list(tasks), root)
        finally:
            self.spent_ms += (time.perf_counter() - start) * 1000

    def _place_in_hypernode(self, job: JobInfo, tasks: list[TaskInfo], start: float) -> P.GangAnswer:
        """Volcano's choice of HyperNode (`hypernode_score.py`): each HyperNode in its order is tried with the
        largest task set that fits in it pod by pod; the first that holds one wins, and CP-SAT places that set
        inside it. Only when none does, CP-SAT tries them in the same order (Volcano would leave the job
        waiting, or go a tier up for a soft one)."""
        choice = self._volcano
        assert choice is not None
        highest = choice.highest(job)
        attempts = self._subsets(job, tasks)
        need = max(0, job.min_available - job.ready_task_num())
        if len(attempts) == 1 and 0 < need < len(tasks):  # Volcano places the minimum first, the rest after
            attempts.append(job.minimums_first(tasks)[:need])
        built = [b for b in (self._problem(s, self.topology.top, False) for s in attempts) if b is not None]
        if not built:
            return P.GangAnswer(unschedulable(TopologyNoFit(highest))) if choice.hard(job) else P.PLACE_BY_POD

        def by_pod(name: str) -> tuple[int, Placement] | None:
            mask = choice.mask(name)
            return next(((i, p) for i, (problem, _) in enumerate(built)
                         if (p := per_pod_binpack(problem, mask, by_score=True)) is not None), None)

        def by_solver(name: str) -> tuple[int, Placement] | None:
            if self.spent_ms + (time.perf_counter() - start) * 1000 >= self.budget_ms:
                return None
            for i, (problem, _) in enumerate(built):
                placement = self._solve(_inside(problem, choice.mask(name)), False)
                if placement is not None:
                    return i, placement
            return None

        found = choice.choose(job, highest, by_pod)
        if found is not None and self.spent_ms + (time.perf_counter() - start) * 1000 < self.budget_ms:
            name, (i, placement) = found
            better = self._solve(_inside(built[i][0], choice.mask(name)), False)
            found = (name, (i, better if better is not None else placement))
        found = found or choice.choose(job, highest, by_solver)
        if found is None:
            self._members = built[-1][1]
            return (P.GangAnswer(unschedulable(self._why(built[-1][0], min(highest, self.topology.top))))
                    if choice.hard(job) else P.PLACE_BY_POD)
        name, (i, placement) = found
        choice.chosen[job.key] = name
        groups = built[i][1]
        pairs = (zip(members, nodes, strict=True) for members, nodes in zip(groups, placement, strict=True))
        return P.GangAnswer(SUCCESS, tuple((task, self.ssn.node_list[int(node)]) for group in pairs
                                           for task, node in group))

    def _root(self, job: JobInfo) -> npt.NDArray[np.bool_] | None:
        """Without Volcano's HyperNode choice (label domains, or `solver.chooseDomains`), the nodes a hard job that
        already holds nodes may take more of: the domain of its highest tier around those pods (Volcano's
        getSearchRoot; none at all if they span more); None for any other job."""
        if not job.extra.get("networkTopology"):
            return None  # every job asks: one without a topology builds no topology and scans none of its pods
        max_tier, hard = self._limits(job)
        if not hard or max_tier < 0:
            return None
        held = [self._position[t.node_name] for t in job.tasks.values()
                if t.status in hn.HOLDING and t.node_name in self._position]
        if not held:
            return None
        row = self.topology.domain[max_tier]
        ids = np.unique(row[held])
        return row == ids[0] if ids.size == 1 else np.zeros(row.size, dtype=bool)

    def _place(self, job: JobInfo, tasks: list[TaskInfo], root: npt.NDArray[np.bool_] | None = None,
               ) -> P.GangAnswer:
        max_tier, hard = self._limits(job)
        over_budget = self.spent_ms >= self.budget_ms
        if over_budget and not hard:
            return P.PLACE_BY_POD
        attempts = self._subsets(job, tasks)
        problem: GangProblem | None = None
        for subset in attempts:
            built = self._problem(subset, max_tier, hard)
            if built is None:
                continue
            problem, groups = built
            if root is not None:  # only inside the job's search root
                problem = _inside(problem, root)
            self._members = groups
            placement = self._solve(problem, over_budget)
            if placement is not None:
                pairs = (zip(members, nodes, strict=True) for members, nodes in zip(groups, placement, strict=True))
                return P.GangAnswer(SUCCESS, tuple(
                    (task, self.ssn.node_list[int(node)]) for group in pairs for task, node in group))
        if hard:
            return P.GangAnswer(unschedulable(self._why(problem, max_tier)))
        return P.PLACE_BY_POD

    @staticmethod
    def _subsets(job: JobInfo, tasks: list[TaskInfo]) -> list[list[TaskInfo]]:
        """The task sets to try, largest first: every pending task; then just enough for the job's minimum,
        in task order (allocate hands them minimums first, `JobInfo.minimums_first`); then just enough with the
        smallest extras. Which extras matters: a gang whose first extras are large can fit with small ones, and
        for requests of one resource (pods count alike) the smallest extras fit whenever any do."""
        need = max(0, job.min_available - job.ready_task_num())
        if need >= len(tasks) or need < 2:
            return [tasks]
        tasks = job.minimums_first(tasks)
        required = sum(least - have for have, least in job.roles_short().values())
        smallest = sorted(tasks[required:], key=lambda t: (t.resreq.get(GPU), t.resreq.cpu, t.resreq.memory))
        attempts = [tasks, tasks[:need]]
        by_size = tasks[:required] + smallest[: max(0, need - required)]
        if [t.key for t in by_size] != [t.key for t in attempts[-1]]:
            attempts.append(by_size)
        return attempts

    def _solve(self, problem: GangProblem, greedy_only: bool) -> Placement | None:
        if greedy_only:
            placement = topology_greedy(problem)
            return placement if evaluate(problem, placement).placed else None
        limit = min(self.time_limit_ms, max(1.0, self.budget_ms - self.spent_ms))
        from scheduler.solver.cpsat import solve  # OR-Tools loads in 0.35 s: only once a gang needs it

        result = solve(problem, limit, self.workers)
        if self.ssn.trace:
            self.ssn.trace(f"solver: {result.source} {result.score} in {result.elapsed_ms:.1f} ms "
                           f"({result.stats.status}; greedy {result.scores})")
        return result.placement if result.score.placed else None

    def _limits(self, job: JobInfo) -> tuple[int, bool]:
        spec: Mapping[str, Any] | None = job.extra.get("networkTopology")
        top = self.topology.top
        if not spec:
            return top, False
        hard = str(spec.get("mode", "hard")).lower() != "soft"
        allowed = spec.get("highestTierAllowed")
        if allowed is None and spec.get("highestTierName"):
            allowed = tier_names(self.ssn.hypernodes or self.args.hypernodes).get(str(spec["highestTierName"]))
            if allowed is None:  # Volcano's translateHighestTierNameToAllowed fails: the job has no tier limit
                hn.warn_unknown_tier(job, str(spec["highestTierName"]))
                return -1, False
        if allowed is None:
            return (1, True) if hard else (top, False)
        return min(int(allowed), top), hard

    def _problem(self, tasks: list[TaskInfo], max_tier: int,
                 hard: bool) -> tuple[GangProblem, list[list[TaskInfo]]] | None:
        arrays = self.ssn.arrays
        members: dict[tuple[Any, Any], list[TaskInfo]] = {}
        for task in tasks:
            members.setdefault((task.constraints, task.resreq), []).append(task)
        groups: list[Group] = []
        for shape in members.values():
            try:
                request = arrays.vector(shape[0].resreq)
            except KeyError:  # a resource no node has
                return None
            groups.append(self._group(shape[0], len(shape), request))
        problem = GangProblem(tuple(groups), arrays.idle, arrays.row.get(GPU), self.topology, max_tier, hard)
        return problem, list(members.values())

    def _group(self, task: TaskInfo, count: int, request: IntArray) -> Group:
        """`count` tasks like `task` on the nodes that hold one now, with the configured scorers' score for one
        there: the placement is ranked by the scores allocate would give its tasks pod by pod (a node a scorer
        vetoes, e.g. deviceshare's no card holds the share, is no candidate)."""
        candidates = self.ssn.fitting_indices(task)
        scored = self.ssn.node_scores(task, candidates)
        scores = np.zeros(len(self.ssn.node_list))
        scores[candidates] = scored
        return Group(count, request, candidates[scored > -np.inf], scores)

    def _why(self, problem: GangProblem | None, max_tier: int) -> Reason:
        """What is missing, e.g. 8 GPUs inside one rack where the best rack has 6 free."""
        topo = self.topology
        where = topo.tier_name(max_tier)
        if problem is None:
            return TopologyNoFit(max_tier)
        resource = GPU if problem.need_gpu() else CPU
        row = problem.gpu_row if resource == GPU else self.ssn.arrays.row[CPU]
        assert row is not None
        need = int(problem.need()[row])
        fitting = np.unique(np.concatenate([g.candidates for g in problem.groups]))
        allowed = np.unique(np.fromiter(
            (self.ssn.arrays.position[n.name] for tasks in self._members for n in self.ssn.feasible_nodes(tasks[0])),
            dtype=np.int64))
        if allowed.size == 0:
            return TopologyNoNode(max_tier, where, resource, need)
        count = int(topo.domain[max_tier].max()) + 1
        free = np.bincount(topo.domain[max_tier, allowed], weights=problem.idle[row, allowed].astype(np.float64),
                           minlength=count)
        usable = np.bincount(topo.domain[max_tier, fitting], weights=problem.idle[row, fitting].astype(np.float64),
                             minlength=count)
        best = int(np.argmax(free))
        names = topo.domain_names[max_tier] if max_tier < len(topo.domain_names) else []
        return TopologyLimit(max_tier, where, resource, need, int(free[best]), int(usable[best]),
                             names[best] if best < len(names) else "")


def _inside(problem: GangProblem, mask: npt.NDArray[np.bool_]) -> GangProblem:
    """The problem with each group's candidate nodes cut to those `mask` keeps (one HyperNode's)."""
    groups = tuple(replace(g, candidates=g.candidates[mask[g.candidates]]) for g in problem.groups)
    return replace(problem, groups=groups)
