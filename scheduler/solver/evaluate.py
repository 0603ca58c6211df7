"""Layer `solver`: one gang placement problem and the one evaluator every placer is scored by.

A `GangProblem` is pure arrays: the gang's task groups (tasks with the same request and the same feasible
nodes), the nodes' idle resources, the topology's per-tier domain ids, and the highest tier the gang may span.
A placement gives, per group, the node index of each of its tasks.

`evaluate` scores a placement lexicographically (smaller is better): placed at all, the highest tier it spans,
the number of domains it touches at each tier from the top down (zones, racks, NVLink domains), the GPUs it
leaves stranded (free whole GPUs remaining on the nodes it touches), and the nodes it uses. The CP-SAT model
minimises the same key, and the plugin keeps whichever answer scores best, so the solver is never worse than
the greedy placers.

Two departures from issue 7's order (tier, domains, nodes, stranded GPUs), both measured on
`bench/bench_placement.py`:
- Stranded GPUs rank before nodes (`GangProblem.stranded_first`, default True). Inside the racks (and NVLink
  domains) a gang must span anyway, filling holes exactly leaves whole GPUs usable for the next gang, which is
  what the issue's acceptance measures; the node count only breaks ties. On the seeded suite (seeds 7 and
  11) this cut the solver's stranded GPUs by 17-27% with racks and nodes within 2%. False gives the issue's
  order.
- A tier whose domains are exactly those of the tier below (`Topology.redundant`: a cluster without NVLink
  labels makes every node its own NVLink domain) is not ranked: its count is the node count, which would rank
  nodes before stranded GPUs whatever the order asked for. `Score.domains` still reports every tier.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from scheduler.solver.topology import RACK, IntArray, Topology

GPU_MILLI = 1000

Placement = tuple[IntArray, ...]  # per group: the node index of each task


@dataclass(frozen=True, slots=True)
class Group:
    """`count` tasks with one request (a column over the problem's dims) and one set of feasible nodes."""

    count: int
    request: IntArray
    candidates: IntArray  # node indices the predicates allow (resource fit is checked against idle)


@dataclass(frozen=True, slots=True)
class GangProblem:
    groups: tuple[Group, ...]
    idle: IntArray  # (dims, nodes)
    gpu_row: int | None
    topology: Topology
    max_tier: int  # the highest tier the gang may span (topology.top when unconstrained)
    hard: bool = False
    stranded_first: bool = True  # rank stranded GPUs before nodes used (False: the order, nodes first)

    @property
    def nodes(self) -> int:
        return int(self.idle.shape[1])

    def need(self) -> IntArray:
        total = np.zeros(self.idle.shape[0], dtype=np.int64)
        for group in self.groups:
            total += group.request * group.count
        return total

    def need_gpu(self) -> int:
        return 0 if self.gpu_row is None else int(self.need()[self.gpu_row])

    def gpu_free(self) -> IntArray:
        if self.gpu_row is None:
            return np.zeros(self.nodes, dtype=np.int64)
        row: IntArray = self.idle[self.gpu_row]
        return row


@dataclass(frozen=True, slots=True, order=True)
class Score:
    """Compared by `rank` alone: (unplaced, max tier, domains per non-redundant tier top down, then stranded
    GPUs and nodes in the problem's order)."""

    rank: tuple[int | tuple[int, ...], ...]
    unplaced: int = field(compare=False)
    max_tier: int = field(compare=False)
    domains: tuple[int, ...] = field(compare=False)  # per tier, from below the cluster down to tier 1
    nodes: int = field(compare=False)
    stranded: int = field(compare=False)  # whole GPUs left free on touched nodes
    racks: int = field(default=0, compare=False)

    @property
    def placed(self) -> bool:
        return self.unplaced == 0


def score(
    unplaced: int,
    tier: int,
    domains: tuple[int, ...],
    nodes: int,
    stranded: int,
    racks: int = 0,
    *,
    stranded_first: bool = True,
    ranked: tuple[int, ...] | None = None,
) -> Score:
    """`ranked`: the domain counts that take part in the comparison (default: all of `domains`)."""
    last = (stranded, nodes) if stranded_first else (nodes, stranded)
    key = domains if ranked is None else ranked
    return Score((unplaced, tier, key, *last), unplaced, tier, domains, nodes, stranded, racks)


BIG = 1 << 30
UNPLACED = score(1, BIG, (), BIG, BIG)


def used_nodes(placement: Placement) -> IntArray:
    if not placement:
        return np.zeros(0, dtype=np.int64)
    return np.unique(np.concatenate(placement))


def fits(problem: GangProblem, placement: Placement) -> bool:
    """Every task on a feasible node, every node's idle holding what is put on it."""
    if len(placement) != len(problem.groups):
        return False
    load = np.zeros_like(problem.idle)
    for group, nodes in zip(problem.groups, placement, strict=True):
        if nodes.size != group.count or not np.isin(nodes, group.candidates).all():
            return False
        counts = np.bincount(nodes, minlength=problem.nodes)
        load += group.request[:, None] * counts[None, :]
    return bool((load <= problem.idle).all())


def stranded_gpus(problem: GangProblem, placement: Placement, touched: IntArray) -> int:
    if problem.gpu_row is None or touched.size == 0:
        return 0
    taken = np.zeros(problem.nodes, dtype=np.int64)
    for group, nodes in zip(problem.groups, placement, strict=True):
        np.add.at(taken, nodes, int(group.request[problem.gpu_row]))
    left = problem.idle[problem.gpu_row, touched] - taken[touched]
    return int((left // GPU_MILLI).sum())


def evaluate(problem: GangProblem, placement: Placement | None) -> Score:
    """The shared score; an invalid placement (misfit, or above a hard tier limit) counts as unplaced."""
    if placement is None or not fits(problem, placement):
        return UNPLACED
    touched = used_nodes(placement)
    topo = problem.topology
    tier = max(topo.span_tier(touched), 0)
    if problem.hard and tier > problem.max_tier:
        return UNPLACED
    domains = tuple(topo.domains_spanned(touched, t) for t in range(topo.top - 1, 0, -1))
    racks = topo.domains_spanned(touched, RACK) if topo.top > RACK else 1
    ranked = tuple(d for t, d in zip(range(topo.top - 1, 0, -1), domains, strict=True) if not topo.redundant(t))
    return score(
        0,
        tier,
        domains,
        int(touched.size),
        stranded_gpus(problem, placement, touched),
        racks,
        stranded_first=problem.stranded_first,
        ranked=ranked,
    )
