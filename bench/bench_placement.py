"""Whole-gang placement: CP-SAT (network-topology-aware) against per-pod and topology-aware greedy (issue 7).

    .venv/bin/python bench/bench_placement.py [--sizes 1000,5000] [--gangs 8] [--time-limit-ms 200]
                                              [--workers 2] [--no-openb] [--seed 7] [--nodes-first]
                                              [--scorers none|binpack|default]

Instances (all seeded):
- synthetic: N nodes of 8 GPUs / 64 cpu / 512Gi in racks of 16, 16 racks to a zone. "typical": 35% of nodes
  empty, the rest with 1..8 GPUs in use; "fragmented": 5% empty, the rest with 1..7 in use.
- openb: the trace's 1,213 GPU nodes (2, 4 or 8 GPUs) in file order, racks of 16, zones of 16 racks, filled
  with pods sampled from `openb_pod_list_default.csv` (first fit, fewest GPUs left) to 60% / 85% of its GPUs.
Gangs: for each total size in 8, 16, 32, 64, 128, 256 GPUs, `--gangs` gangs. Synthetic gangs have pods of
1, 2, 4 or 8 GPUs, 40% of them with a second role of another shape; openb gangs are pods sampled from the trace
(num_gpu >= 1, whole GPUs) until they reach the size. Every gang is placed on the same cluster state
(independently, nothing is committed between gangs), by the three placers, and scored by `solver/evaluate.py`.

`--scorers` hands the solver the node scores a session with those scorers gives each task shape (the plugin
`network-topology-aware` does the same from the configured ones): `binpack`, or `default` (the built-in
conf's nodeorder and binpack). The evaluator ranks them after the topology terms (`solver/evaluate.py`).
"""

from __future__ import annotations

import argparse
import csv
import gc
import json
import random
import statistics
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from scheduler.api.job import TaskInfo
from scheduler.api.node import NodeInfo
from scheduler.api.resources import GPU, Resource
from scheduler.api.snapshot import ClusterSnapshot
from scheduler.cycle import conf_from_text
from scheduler.framework.session import Session
from scheduler.plugins.registry import PLUGINS
from scheduler.solver.cpsat import solve
from scheduler.solver.evaluate import GangProblem, Group, Score, evaluate
from scheduler.solver.greedy import per_pod_binpack, topology_greedy
from scheduler.solver.topology import IntArray, Topology, from_labels

GI = 2**30
MI = 2**20
G = 1000
SIZES = (8, 16, 32, 64, 128, 256)
RACK_NODES = 16
ZONE_RACKS = 16
TRACE = Path("/work/shared/traces/openb")
POLICIES = ("binpack-greedy", "topology-greedy", "cpsat")

Shape = tuple[int, IntArray]  # (tasks, request over dims cpu, memory, pods, gpu)


@dataclass
class Instance:
    name: str
    idle: IntArray
    topology: Topology
    gangs: list[list[Shape]]
    allocatable: IntArray
    labels: list[dict[str, str]]


def request(cpu_milli: int, memory: int, gpu_milli: int) -> IntArray:
    return np.array([cpu_milli, memory, 1, gpu_milli], dtype=np.int64)


def rack_labels(count: int) -> list[dict[str, str]]:
    return [
        {
            "volcano.sh/rack": f"rack-{i // RACK_NODES}",
            "topology.kubernetes.io/zone": f"zone-{i // (RACK_NODES * ZONE_RACKS)}",
        }
        for i in range(count)
    ]


def racked_topology(count: int, prefix: str) -> Topology:
    names = [f"{prefix}-{i:05d}" for i in range(count)]
    return from_labels(names, rack_labels(count))


# ---- synthetic ----------------------------------------------------------------------------------------


def synthetic(nodes: int, profile: str, gangs_per_size: int, seed: int) -> Instance:
    rng = random.Random(f"{seed}-{nodes}-{profile}")
    empty, low, high = (0.35, 1, 8) if profile == "typical" else (0.05, 1, 7)
    used = np.array([0 if rng.random() < empty else rng.randint(low, high) for _ in range(nodes)], dtype=np.int64)
    idle = np.zeros((4, nodes), dtype=np.int64)
    allocatable = np.array([[64_000], [512 * GI], [110], [8 * G]], dtype=np.int64).repeat(nodes, axis=1)
    idle[0] = 64_000 - used * 6_000
    idle[1] = 512 * GI - used * 48 * GI
    idle[2] = 110 - used
    idle[3] = (8 - used) * G
    gangs = []
    for size in SIZES:
        for _ in range(gangs_per_size):
            gangs.append(synthetic_gang(rng, size))
    return Instance(f"synthetic-{nodes}-{profile}", idle, racked_topology(nodes, "node"), gangs, allocatable,
                    rack_labels(nodes))


def synthetic_gang(rng: random.Random, size: int) -> list[Shape]:
    per_pod = rng.choice([g for g in (1, 2, 4, 8) if g <= size])
    shapes: list[Shape] = []
    if rng.random() < 0.4 and size >= 2 * per_pod:
        other = rng.choice([g for g in (1, 2, 4) if g != per_pod])
        other_pods = max(1, size // 4 // other)
        rest = size - other_pods * other
        shapes.append((other_pods, request(2_000 * other, 16 * GI * other, other * G)))
        if rest >= per_pod:
            shapes.append((rest // per_pod, request(4_000 * per_pod, 32 * GI * per_pod, per_pod * G)))
    else:
        shapes.append((size // per_pod, request(4_000 * per_pod, 32 * GI * per_pod, per_pod * G)))
    return shapes


# ---- openb --------------------------------------------------------------------------------------------


def openb(fill: float, gangs_per_size: int, seed: int) -> Instance:
    rng = random.Random(f"{seed}-openb-{fill}")
    with open(TRACE / "openb_node_list_gpu_node.csv") as f:
        rows = list(csv.DictReader(f))
    idle = np.zeros((4, len(rows)), dtype=np.int64)
    idle[0] = [int(r["cpu_milli"]) for r in rows]
    idle[1] = [int(r["memory_mib"]) * MI for r in rows]
    idle[2] = 110
    idle[3] = [int(r["gpu"]) * G for r in rows]
    allocatable = idle.copy()
    with open(TRACE / "openb_pod_list_default.csv") as f:
        pods = [r for r in csv.DictReader(f) if int(r["num_gpu"]) >= 1]
    total_gpu = int(idle[3].sum())
    target = fill * total_gpu
    allocated = 0
    misses = 0
    while allocated < target and misses < 2_000:
        r = rng.choice(pods)
        gpu = int(r["num_gpu"]) * 1000 if int(r["num_gpu"]) > 1 else int(r["gpu_milli"])
        need = request(int(r["cpu_milli"]), int(r["memory_mib"]) * MI, gpu)
        fits = np.flatnonzero((idle >= need[:, None]).all(axis=0))
        if fits.size == 0:
            misses += 1
            continue
        node = int(fits[np.argmin(idle[3, fits] - gpu)])
        idle[:, node] -= need
        allocated += gpu
    whole = [r for r in pods if int(r["num_gpu"]) > 1 or int(r["gpu_milli"]) == 1000]
    gangs: list[list[Shape]] = []
    for size in SIZES:
        for _ in range(gangs_per_size):
            gangs.append(openb_gang(rng, whole, size))
    return Instance(f"openb-{int(fill * 100)}%", idle, racked_topology(len(rows), "openb"), gangs, allocatable,
                    rack_labels(len(rows)))


def openb_gang(rng: random.Random, pods: list[dict[str, str]], size: int) -> list[Shape]:
    shapes: dict[tuple[int, int, int], int] = {}
    total = 0
    while total < size:
        r = rng.choice(pods)
        gpus = min(int(r["num_gpu"]), size - total)
        key = (int(r["cpu_milli"]), int(r["memory_mib"]) * MI, gpus * G)
        shapes[key] = shapes.get(key, 0) + 1
        total += gpus
    return [(count, request(*key)) for key, count in shapes.items()]


# ---- running ------------------------------------------------------------------------------------------


SCORER_CONFS = {
    "binpack": ["binpack"],
    "default": ["nodeorder", "binpack"],  # the built-in conf's scorers
}


def resource(column: IntArray) -> Resource:
    scalars = {GPU: int(column[3])} if column[3] else {}
    return Resource.of(int(column[0]), int(column[1]), int(column[2]), scalars)


def scorer_session(instance: Instance, scorers: str) -> Session | None:
    """A session over the instance's nodes (as they are before any gang) with the named scorers."""
    if scorers == "none":
        return None
    plugins = "".join(f"  - name: {name}\n" for name in SCORER_CONFS[scorers])
    conf = conf_from_text(f'actions: "allocate"\ntiers:\n- plugins:\n{plugins}', source="bench")
    nodes = {}
    for i, name in enumerate(instance.topology.node_names):
        allocatable, idle = resource(instance.allocatable[:, i]), resource(instance.idle[:, i])
        nodes[name] = NodeInfo(name, allocatable, instance.labels[i], idle=idle, used=allocatable - idle)
    return Session(ClusterSnapshot(nodes, {}, {}), conf, PLUGINS)


def problem(
    instance: Instance, gang: list[Shape], stranded_first: bool = True, session: Session | None = None
) -> GangProblem:
    groups = []
    for count, need in gang:
        candidates = np.flatnonzero((instance.idle >= need[:, None]).all(axis=0))
        scores = None
        if session is not None:
            task = TaskInfo("probe", "probe", "default", "probe", resource(need))
            scores = np.zeros(instance.idle.shape[1])
            scores[candidates] = session.fit.node_scores(task, candidates)
        groups.append(Group(count, need, candidates, scores))
    topo = instance.topology
    return GangProblem(tuple(groups), instance.idle, 3, topo, topo.top, False, stranded_first)


@dataclass
class Tally:
    times: list[float] = field(default_factory=list)
    gaps: list[float] = field(default_factory=list)
    optimal: int = 0
    cpsat_runs: int = 0
    cpsat_wins: int = 0
    worse: int = 0
    placed: dict[str, int] = field(default_factory=lambda: dict.fromkeys(POLICIES, 0))
    racks: dict[str, int] = field(default_factory=lambda: dict.fromkeys(POLICIES, 0))
    stranded: dict[str, int] = field(default_factory=lambda: dict.fromkeys(POLICIES, 0))
    nodes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(POLICIES, 0))
    node_score: dict[str, float] = field(default_factory=lambda: dict.fromkeys(POLICIES, 0.0))
    better_than_topology: int = 0
    common: int = 0
    gangs: int = 0


def run(
    instance: Instance,
    time_limit_ms: float,
    workers: int,
    stranded_first: bool = True,
    scorers: str = "none",
    unranked: bool = False,
) -> Tally:
    tally = Tally()
    session = scorer_session(instance, scorers)
    for gang in instance.gangs:
        scored = problem(instance, gang, stranded_first, session)
        if unranked:  # the solver without the scores; its answers judged by them afterwards
            plain = problem(instance, gang, stranded_first)
            result = solve(plain, time_limit_ms, workers)
            result.scores.update(
                {"binpack-greedy": evaluate(scored, per_pod_binpack(plain)),
                 "topology-greedy": evaluate(scored, topology_greedy(plain))})
            result.score = evaluate(scored, result.placement)
        else:
            result = solve(scored, time_limit_ms, workers)
        scores: dict[str, Score] = dict(result.scores)
        scores["cpsat"] = result.score  # the solver's answer: the best of the three
        tally.gangs += 1
        tally.times.append(result.elapsed_ms)
        if result.stats.models:
            tally.cpsat_runs += 1
            tally.optimal += result.stats.status == "OPTIMAL"
            if result.stats.gap is not None:
                tally.gaps.append(result.stats.gap)
        tally.cpsat_wins += result.source == "cpsat" and result.scores["cpsat"] < min(
            result.scores["binpack-greedy"], result.scores["topology-greedy"]
        )
        tally.worse += any(scores["cpsat"] > scores[p] for p in POLICIES[:2])
        tally.better_than_topology += scores["cpsat"] < scores["topology-greedy"]
        for policy in POLICIES:
            tally.placed[policy] += scores[policy].placed
        if all(scores[p].placed for p in POLICIES):
            tally.common += 1
            for policy in POLICIES:
                tally.racks[policy] += scores[policy].racks
                tally.stranded[policy] += scores[policy].stranded
                tally.nodes[policy] += scores[policy].nodes
                tally.node_score[policy] += scores[policy].node_score
    return tally


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, -(-95 * len(ordered) // 100) - 1)] if ordered else 0.0


def instances(args: argparse.Namespace) -> Iterator[Instance]:
    for size in (int(s) for s in args.sizes.split(",") if s):
        for profile in ("typical", "fragmented"):
            yield synthetic(size, profile, args.gangs, args.seed)
    if not args.no_openb:
        for fill in (0.6, 0.85):
            yield openb(fill, args.gangs, args.seed)


CYCLE_CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: predicates
  - name: network-topology-aware
    arguments:
      solver.everyGang: true
"""


def cycle_times(sizes: str, repeat: int) -> None:
    """Full cycles of bench_cycle.py's clusters (gangs of 1..64 one-GPU pods) with the plugin in the conf:
    the cycle budget (`solver.cycleBudgetMs`, 500) bounds what the solver adds."""
    sys.path.insert(0, str(Path(__file__).parent))
    from bench_cycle import build, one_cycle

    from scheduler.cycle import conf_from_text

    conf = conf_from_text(CYCLE_CONF, source="bench")
    for size in sizes.split(","):
        nodes, pods = (int(x) for x in size.split("x"))
        sim = build(nodes, pods)
        gc.collect()
        gc.freeze()  # as bench_cycle.py and the scheduler's runner do
        runs = [one_cycle(sim, conf) for _ in range(repeat)]
        totals = [times["total"] for times, _ in runs]
        allocate = [times["allocate"] for times, _ in runs]
        print(
            f"cycle {nodes} nodes x {pods} pods with network-topology-aware: total median "
            f"{statistics.median(totals):.0f} ms, p95 {p95(totals):.0f} ms (allocate median "
            f"{statistics.median(allocate):.0f} ms), {runs[0][1]} pods bound"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,5000")
    parser.add_argument("--gangs", type=int, default=8, help="gangs per size (8..256 GPUs)")
    parser.add_argument("--time-limit-ms", type=float, default=200)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--no-openb", action="store_true")
    parser.add_argument(
        "--nodes-first",
        action="store_true",
        help="rank nodes used before stranded GPUs (issue 7's order; default: stranded GPUs first)",
    )
    parser.add_argument("--scorers", choices=["none", *SCORER_CONFS], default="none",
                        help="hand the solver these scorers' node scores (default: none)")
    parser.add_argument("--scores-unranked", action="store_true",
                        help="solve without the scores and only report their sum (the solver before it ranked them)")
    parser.add_argument("--json", help="write the per-instance numbers here")
    parser.add_argument("--cycle", default="", help="also time full cycles, e.g. 1000x5000,5000x20000")
    args = parser.parse_args()
    if args.cycle:
        cycle_times(args.cycle, 3)
    header = (
        "| instance | gangs | solve median | p95 | proven optimal | gap median / max | placed b/t/s "
        "| racks b/t/s | stranded GPUs b/t/s | nodes b/t/s | better than topo-greedy |"
    )
    print(header)
    print("|" + "---|" * (header.count("|") - 1))
    totals = Tally()
    out = {}
    for instance in instances(args):
        t = run(instance, args.time_limit_ms, args.workers, not args.nodes_first, args.scorers, args.scores_unranked)
        gap = f"{statistics.median(t.gaps):.0%} / {max(t.gaps):.0%}" if t.gaps else "-"

        def trio(d: dict[str, int]) -> str:
            return "/".join(str(d[p]) for p in POLICIES)

        print(
            f"| {instance.name} | {t.gangs} | {statistics.median(t.times):.0f} ms | {p95(t.times):.0f} ms "
            f"| {t.optimal}/{t.cpsat_runs} | {gap} | {trio(t.placed)} | {trio(t.racks)} | {trio(t.stranded)} "
            f"| {trio(t.nodes)} | {t.better_than_topology} |",
            flush=True,
        )
        if t.worse:
            print(f"  !! the solver scored worse than a greedy on {t.worse} gangs", file=sys.stderr)
        out[instance.name] = {
            "median_ms": statistics.median(t.times),
            "p95_ms": p95(t.times),
            "optimal": t.optimal,
            "cpsat_runs": t.cpsat_runs,
            "gaps": t.gaps,
            "placed": t.placed,
            "racks": t.racks,
            "stranded": t.stranded,
            "nodes": t.nodes,
            "node_score": t.node_score,
            "common": t.common,
            "worse": t.worse,
            "better_than_topology": t.better_than_topology,
        }
        for policy in POLICIES:
            for name in ("placed", "racks", "stranded", "nodes", "node_score"):
                getattr(totals, name)[policy] += getattr(t, name)[policy]
        totals.worse += t.worse
        totals.better_than_topology += t.better_than_topology
        totals.gangs += t.gangs
    b, s = "binpack-greedy", "cpsat"
    print(f"\nsuite: {totals.gangs} gangs; placed b/t/s {totals.placed}; solver worse than a greedy: {totals.worse}")
    for name in ("racks", "stranded", "nodes", "node_score"):
        d = getattr(totals, name)
        ratio = d[s] / d[b] if d[b] else float("nan")
        print(
            f"  {name} (gangs all three placed): per-pod {d[b]:.6g}, topology {d['topology-greedy']:.6g}, "
            f"solver {d[s]:.6g} ({ratio:.0%} of per-pod)"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
