"""An offline upper bound for the openb packing benchmark (`bench_packing.py`): no policy, whatever the order of
arrivals, allocates a larger share of the cluster's GPUs than this from the same pods.

The benchmark's metric at a load level L is the share of the cluster's GPU capacity allocated once the sampled
pods requesting L x the capacity have been submitted. The offline problem behind it: from those pods (a multiset
of shapes), choose which to place on which node, every node within its cpu, memory and GPU devices (a pod asks
`count` devices with `milli` of each; a pod that names GPU models goes only to nodes of those models), to maximise
the GPU milli placed. Every policy's allocation is a feasible solution of it (drop its CPU-only pods: they add no
GPU), so the problem's optimum bounds every policy, and any relaxation's optimum bounds the problem's.

The relaxation (a configuration LP, Gilmore-Gomory): nodes of one type (cpu, memory, devices, model) are alike;
a *configuration* of a type is a multiset of pod shapes one node of that type can hold under the relaxed node
rule below; the LP chooses how many nodes of each type use each configuration (a fraction allowed), with no more
pods of a shape than were submitted and no more nodes of a type than the cluster has. It is a relaxation twice:
the numbers of nodes may be fractional, and the node rule is weaker than the benchmark's device packing:
  cpu and memory: the shapes' sums fit the node's;
  GPU milli: the shapes' `count x milli` sum fits `devices x 1000`;
  devices: for each k of `DFF_LEVELS`, the pods' `count x u^(k)(milli)` sum to at most `devices x k x 1000`,
  where u^(k) is a dual feasible function (`fs_dff`): k = 1 says a whole device, or one holding a share above
  500 milli, holds no other such use; k = 2 that three shares above a third need two devices; and so on.
Each rule holds for every placement the benchmark allows, so every real node's contents is a configuration and
the LP's optimum is >= the problem's. (An exact device-by-device pricing model was tried: on the full lists its
CP-SAT solves took minutes each; the inequalities keep the pricing a small knapsack.)

The LP has a column per configuration, far too many to list; column generation finds the ones that matter. The
restricted LP over the columns found so far is solved with OR-Tools' GLOP, giving duals u (per shape) >= 0; the
pricing problem of each node type (the configuration of largest `sum (milli_s - u_s) k_s`) is an integer
knapsack solved exactly by CP-SAT. Whatever the duals, the Lagrangian bound

    sum_s u_s n_s + sum_t N_t max(0, P_t(u))          (P_t: the pricing optimum of type t, N_t nodes of type t)

is an upper bound of the LP (relax the per-shape constraints with multipliers u >= 0), so the bound reported is
the least of these over the iterations, valid even if the loop stops before the LP's optimum. P_t is taken from
CP-SAT's proven objective bound on coefficients rounded up, so it is never below the true optimum.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from ortools.linear_solver import pywraplp
from ortools.sat.python import cp_model

if TYPE_CHECKING:
    from bench_packing import Summary

MILLI = 1000
EXCLUSIVE_ABOVE = 500  # a share above half a device leaves no room on it for another such share
SCALE = 1000  # pricing coefficients in 1/1000 milli, rounded up


@dataclass(frozen=True, slots=True)
class Kind:
    """A GPU pod shape: cpu (milli), memory (MiB), `count` devices of `milli` each, the models it accepts."""

    cpu: int
    memory: int
    count: int
    milli: int
    models: frozenset[str] | None = None

    @property
    def gpu(self) -> int:
        return self.count * self.milli


@dataclass(frozen=True, slots=True)
class NodeType:
    cpu: int
    memory: int
    devices: int
    model: str

    def holds(self, kind: Kind) -> bool:
        return (kind.cpu <= self.cpu and kind.memory <= self.memory and kind.count <= self.devices
                and kind.milli <= MILLI and (kind.models is None or self.model in kind.models))

    def most(self, kind: Kind) -> int:
        """How many pods of `kind` alone one node could hold under the relaxed rule."""
        limits = [self.devices * MILLI // kind.gpu]
        if kind.cpu:
            limits.append(self.cpu // kind.cpu)
        if kind.memory:
            limits.append(self.memory // kind.memory)
        if kind.milli > EXCLUSIVE_ABOVE:
            limits.append(self.devices // kind.count)
        return min(limits)


@dataclass(slots=True)
class Bound:
    gpu_milli: float  # the upper bound on GPU milli placed
    lp_value: float  # the last restricted LP's value (a lower bound of the LP's optimum)
    iterations: int
    columns: int
    demand_milli: int  # what the pods ask in all
    capacity_milli: int

    @property
    def gap(self) -> float:
        """How far the restricted LP is from the bound, as a share of the bound (0: the LP's optimum proven)."""
        return (self.gpu_milli - self.lp_value) / self.gpu_milli if self.gpu_milli else 0.0


@dataclass(slots=True)
class _Column:
    type_index: int
    counts: dict[int, int]  # kind index -> pods
    value: int  # GPU milli


@dataclass(slots=True)
class ConfigurationLP:
    """The configuration LP of one cluster (node types and how many of each), kept across calls so columns found
    for one set of pods seed the next (the prefixes of one sampled sequence share most of their columns)."""

    types: list[NodeType]
    nodes: list[int]  # per type
    kinds: list[Kind] = field(default_factory=list)
    columns: list[_Column] = field(default_factory=list)
    seen: set[tuple[int, tuple[tuple[int, int], ...]]] = field(default_factory=set)
    solves: int = 0  # pricing problems solved

    @classmethod
    def of_nodes(cls, nodes: Iterable[NodeType]) -> ConfigurationLP:
        counted = Counter(n for n in nodes if n.devices > 0)
        types = sorted(counted, key=lambda t: (t.model, t.devices, t.cpu, t.memory))
        return cls(types, [counted[t] for t in types])

    @property
    def capacity_milli(self) -> int:
        return sum(t.devices * MILLI * n for t, n in zip(self.types, self.nodes, strict=True))

    def _index(self, kind: Kind) -> int:
        try:
            return self.kinds.index(kind)
        except ValueError:
            self.kinds.append(kind)
            return len(self.kinds) - 1

    def bound(self, demand: Counter[Kind], *, max_iterations: int = 200, tolerance: float = 1e-4) -> Bound:
        """The upper bound on the GPU milli placed from `demand` (kind -> pods); CPU-only kinds are ignored."""
        wanted = {self._index(k): n for k, n in demand.items() if k.gpu > 0 and n > 0}
        total = sum(self.kinds[i].gpu * n for i, n in wanted.items())
        best = float(min(total, self.capacity_milli))
        lp_value, iterations = 0.0, 0
        for iterations in range(1, max_iterations + 1):  # noqa: B007 (reported)
            lp_value, duals = self._restricted(wanted)
            lagrangian = sum(duals.get(i, 0.0) * n for i, n in wanted.items())
            added = 0
            for t, (node_type, count) in enumerate(zip(self.types, self.nodes, strict=True)):
                column, upper = self._price(t, node_type, wanted, duals)
                lagrangian += count * max(0.0, upper)
                if column is not None and self._add(column):
                    added += 1
            best = min(best, lagrangian)
            if not added or best - lp_value <= tolerance * max(1.0, best):
                break
        return Bound(best, lp_value, iterations, len(self.columns), total, self.capacity_milli)

    def _add(self, column: _Column) -> bool:
        key = (column.type_index, tuple(sorted(column.counts.items())))
        if key in self.seen:
            return False
        self.seen.add(key)
        self.columns.append(column)
        return True

    def _restricted(self, wanted: dict[int, int]) -> tuple[float, dict[int, float]]:
        """The restricted LP over the columns whose kinds are all wanted: its value and the shapes' duals."""
        value, duals, _ = self._solve(wanted)
        return value, duals

    def configurations(self, demand: Counter[Kind]) -> list[tuple[NodeType, dict[Kind, int], float]]:
        """The restricted LP's solution for `demand` (after `bound`): (node type, pods per kind, nodes), nodes > 0."""
        wanted = {self._index(k): n for k, n in demand.items() if k.gpu > 0 and n > 0}
        _, _, used = self._solve(wanted)
        return [(self.types[c.type_index], {self.kinds[i]: k for i, k in c.counts.items()}, x) for c, x in used]

    def _solve(self, wanted: dict[int, int]) -> tuple[float, dict[int, float], list[tuple[_Column, float]]]:
        solver = pywraplp.Solver.CreateSolver("GLOP")
        usable = [c for c in self.columns if all(i in wanted and k <= wanted[i] for i, k in c.counts.items())]
        xs = [solver.NumVar(0.0, solver.infinity(), "") for _ in usable]
        shape_rows = {i: solver.Constraint(-solver.infinity(), float(n)) for i, n in wanted.items()}
        type_rows = [solver.Constraint(-solver.infinity(), float(n)) for n in self.nodes]
        objective = solver.Objective()
        for x, column in zip(xs, usable, strict=True):
            objective.SetCoefficient(x, float(column.value))
            type_rows[column.type_index].SetCoefficient(x, 1.0)
            for i, k in column.counts.items():
                shape_rows[i].SetCoefficient(x, float(k))
        objective.SetMaximization()
        status = solver.Solve()
        if status != pywraplp.Solver.OPTIMAL:
            raise RuntimeError(f"GLOP did not solve the restricted LP (status {status})")
        duals = {i: max(0.0, row.dual_value()) for i, row in shape_rows.items()}
        used = [(c, x.solution_value()) for c, x in zip(usable, xs, strict=True) if x.solution_value() > 1e-9]
        return objective.Value(), duals, used

    def _price(self, t: int, node_type: NodeType, wanted: dict[int, int],
               duals: dict[int, float]) -> tuple[_Column | None, float]:
        """(the best configuration of type t under the duals if it has a positive reduced value, an upper bound of
        that value). The type's own dual is left out: the Lagrangian bound takes max(0, P_t) per node instead."""
        items = []
        for i, n in wanted.items():
            kind = self.kinds[i]
            weight = kind.gpu - duals.get(i, 0.0)
            if weight > 1e-9 and node_type.holds(kind):
                items.append((i, kind, math.ceil(weight * SCALE), min(n, node_type.most(kind))))
        if not items:
            return None, 0.0
        model = cp_model.CpModel()
        ks = [model.NewIntVar(0, most, "") for _, _, _, most in items]
        kinds = [kind for _, kind, _, _ in items]
        model.Add(sum(k * kind.cpu for k, kind in zip(ks, kinds, strict=True)) <= node_type.cpu)
        model.Add(sum(k * kind.memory for k, kind in zip(ks, kinds, strict=True)) <= node_type.memory)
        model.Add(sum(k * kind.gpu for k, kind in zip(ks, kinds, strict=True)) <= node_type.devices * MILLI)
        for level in DFF_LEVELS:  # the devices' packing, as valid inequalities (see fs_dff)
            model.Add(sum(k * kind.count * fs_dff(kind.milli, level) for k, kind in zip(ks, kinds, strict=True))
                      <= node_type.devices * level * MILLI)
        model.Maximize(sum(k * coefficient for k, (_, _, coefficient, _) in zip(ks, items, strict=True)))
        solver = cp_model.CpSolver()
        solver.parameters.num_workers = 1
        solver.parameters.max_time_in_seconds = 10.0
        status = solver.Solve(model)
        self.solves += 1
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            raise RuntimeError(f"CP-SAT found no configuration for {node_type} (status {status})")
        upper = solver.BestObjectiveBound() / SCALE
        counts = {i: int(solver.Value(k)) for k, (i, _, _, _) in zip(ks, items, strict=True) if solver.Value(k)}
        reduced = sum((self.kinds[i].gpu - duals.get(i, 0.0)) * k for i, k in counts.items())
        if reduced <= 1e-6:
            return None, upper
        return _Column(t, counts, sum(self.kinds[i].gpu * k for i, k in counts.items())), upper


def fs_dff(milli: int, k: int) -> int:
    """Fekete and Schepers' dual feasible function u^(k) on a device of MILLI, scaled by k so it is an integer:
    `k x` where `(k + 1) x / MILLI` is a whole number, else `floor((k + 1) x / MILLI) x MILLI`. Any uses of one
    device have u-values summing to at most `k x MILLI` (Fekete & Schepers, Math. Programming 91, 2001), so over a
    node, `sum count x u(milli) <= devices x k x MILLI` holds for every placement the benchmark allows."""
    if (k + 1) * milli % MILLI == 0:
        return k * milli
    return ((k + 1) * milli // MILLI) * MILLI


DFF_LEVELS = (1, 2, 3, 4, 5, 6, 7, 9)  # k = 1 is the exclusive-device rule; the others bound shares of thirds ...


def prefix_bounds(lp: ConfigurationLP, sequence: Sequence[Kind | None], levels: Sequence[float],
                  **kwargs: float) -> list[Bound]:
    """The bound at each load level: the pods of `sequence` (None: a CPU-only pod) submitted until the GPU milli
    requested passes `level x capacity`, as the benchmark submits them (its last pod is the first past the level;
    the benchmark's curve reads the last submission not beyond a grid point)."""
    capacity = lp.capacity_milli
    out = []
    for level in levels:
        demand: Counter[Kind] = Counter()
        requested = 0
        for kind in sequence:
            if kind is not None:
                if requested + kind.gpu > level * capacity:
                    break
                requested += kind.gpu
                demand[kind] += 1
        out.append(lp.bound(demand, **kwargs))  # type: ignore[arg-type]
    return out


def exact_optimum(nodes: Sequence[NodeType], pods: Sequence[Kind], *, seconds: float = 60.0) -> int:
    """The offline problem solved exactly by CP-SAT, device by device, for the small samples that check the bound
    (`tests/gpu/test_packing_bound.py`): the most GPU milli that `pods` can place on `nodes`. Raises if CP-SAT does
    not prove its answer optimal within `seconds`."""
    model = cp_model.CpModel()
    placed = []  # per pod: its value and whether it is placed
    use: dict[tuple[int, int, int], cp_model.IntVar] = {}  # (pod, node, device) -> takes `milli` of it
    on: dict[tuple[int, int], cp_model.IntVar] = {}  # (pod, node) -> on that node
    for p, pod in enumerate(pods):
        here = []
        for n, node in enumerate(nodes):
            if not node.holds(pod):
                continue
            x = model.NewBoolVar("")
            on[p, n] = x
            here.append(x)
            devices = [model.NewBoolVar("") for _ in range(node.devices)]
            for d, y in enumerate(devices):
                use[p, n, d] = y
            model.Add(sum(devices) == pod.count * x)
        chosen = model.NewBoolVar("")
        model.Add(sum(here) == chosen)
        placed.append((pod.gpu, chosen))
    for n, node in enumerate(nodes):
        mine = [(pods[p], x) for (p, m), x in on.items() if m == n]
        model.Add(sum(pod.cpu * x for pod, x in mine) <= node.cpu)
        model.Add(sum(pod.memory * x for pod, x in mine) <= node.memory)
        for d in range(node.devices):
            model.Add(sum(pods[p].milli * y for (p, m, e), y in use.items() if m == n and e == d) <= MILLI)
    model.Maximize(sum(value * chosen for value, chosen in placed))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = seconds
    solver.parameters.num_workers = 1
    if solver.Solve(model) != cp_model.OPTIMAL:
        raise RuntimeError("CP-SAT did not prove the small sample's optimum in time")
    return round(solver.ObjectiveValue())


BOUND_LEVELS = (1.0, 1.1, 1.2)  # load levels where the bound is also reported, besides the end (130%)


@dataclass(slots=True)
class BoundSummary:
    variant: str
    seeds: int
    unallocated_gpus: float  # mean over seeds: GPUs no offline placement can fill at the end (130%)
    at_levels: dict[float, float]  # load level -> mean upper bound on the allocated share
    seconds: float


def bound_summary(variant: str, seeds: Sequence[int], trace_dir: Path) -> BoundSummary:
    """The offline upper bound (`packing_bound.py`) on each seed's pods, at the end and at BOUND_LEVELS."""
    from bench_packing import load_nodes, load_pods, sampled

    started = time.perf_counter()
    nodes = load_nodes(trace_dir / "openb_node_list_gpu_node.csv")
    pods = load_pods(trace_dir / f"openb_pod_list_{variant}.csv")
    lp = ConfigurationLP.of_nodes(NodeType(n.cpu, n.memory, n.gpus, n.model) for n in nodes)
    capacity = lp.capacity_milli
    ends, levels = [], []
    for seed in seeds:
        kinds = [Kind(s.cpu, s.memory, s.count, s.milli, s.models) if s.gpu_milli else None
                 for s in sampled(pods, seed, capacity)]
        *at, end = prefix_bounds(lp, kinds, (*BOUND_LEVELS, float("inf")))
        ends.append((capacity - end.gpu_milli) / MILLI)
        levels.append([b.gpu_milli / capacity for b in at])
    means = np.mean(levels, axis=0)
    return BoundSummary(variant, len(seeds), float(np.mean(ends)), dict(zip(BOUND_LEVELS, map(float, means),
                                                                              strict=True)),
                        time.perf_counter() - started)


def render_bound(bounds: Sequence[BoundSummary], summaries: Sequence[Summary]) -> str:
    """Each variant's bound, then each policy's distance to it: GPUs it leaves that an offline placement fills."""
    from bench_packing import GRID

    lines = ["", "offline upper bound (configuration LP, docs/benchmarks-history.md): GPUs no placement can fill",
             f"{'variant':<11} {'policy':<12} {'unalloc GPUs':>12} {'to bound':>9} "
             + " ".join(f"{'@' + format(100 * level, '.0f') + '%':>14}" for level in BOUND_LEVELS)]
    for b in bounds:
        cells = " ".join(f"{100 * b.at_levels[level]:>13.2f}%" for level in BOUND_LEVELS)
        lines.append(f"{b.variant:<11} {'(bound)':<12} {b.unallocated_gpus:>12.1f} {'':>9} {cells}")
        for s in (s for s in summaries if s.variant == b.variant):
            at = {level: float(np.interp(level, GRID, s.curve)) for level in BOUND_LEVELS}
            cells = " ".join(f"{100 * at[level]:>13.2f}%" for level in BOUND_LEVELS)
            lines.append(f"{'':<11} {s.policy:<12} {s.unallocated_gpus:>12.1f} "
                         f"{s.unallocated_gpus - b.unallocated_gpus:>9.1f} {cells}")
    return "\n".join(lines)
