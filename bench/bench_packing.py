"""The FGD paper's GPU packing benchmark on the Alibaba openb trace (issue 10), on arrays.

    .venv/bin/python bench/bench_packing.py [--variants default|all|a,b] [--policies ...] [--seeds 10] [--out DIR]
    .venv/bin/volcano-py bench packing ...      (the same, from a clone: the CLI finds this file beside scheduler/)

Method (Weng et al., ATC 2023, section 6): sample pods from the trace's pod list with replacement (seeded)
and submit them one by one, with no departures, until the GPUs requested reach 130% of the cluster's; each
pod is placed at once or left unplaced. After each submission, record the share of the cluster's GPUs that
is allocated. Averaged over seeds, per policy.

The placement loop runs directly on `scheduler.gpu.frag.GpuArrays` (per node per device free milli), not
through a scheduling session, so ten seeds of ~11,000 pods take seconds; it scores with the same functions
the `deviceshare` plugin registers, and the `binpack` policy calls volcano-py's own binpack plugin.
Writes packing_curve.csv, packing_summary.csv and (with matplotlib) one PNG per variant.
"""

from __future__ import annotations

import csv
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING

import numpy as np

from scheduler.api.job import TaskInfo
from scheduler.api.node import NodeInfo
from scheduler.api.resources import GPU, Resource
from scheduler.framework.arrays import NodeArrays
from scheduler.framework.conf import PluginOption
from scheduler.gpu.frag import (
    MILLI,
    FragModel,
    GpuArrays,
    Shape,
    ShapeMix,
    devices_on,
    frag_model,
    mix_for,
    models_of,
    score_nodes,
)
from scheduler.plugins.binpack import BinpackPlugin
from scheduler.report.progress import Progress

if TYPE_CHECKING:
    import argparse

MIB = 2**20
TRACE_DIR = Path("/work/shared/traces/openb")
VARIANTS = ("default", "multigpu50", "gpushare40", "gpuspec10")
BENCH_POLICIES = ("random", "bestfit", "binpack", "fgd", "fgd-bestfit", "fgd-weighted", "fgd-blend", "fgd-next")
GRID = np.round(np.arange(0.0, 1.3001, 0.01), 2)


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    cpu: int  # millicores
    memory: int  # MiB
    gpus: int
    model: str


def load_nodes(path: Path) -> list[Node]:
    with path.open() as f:
        return [
            Node(r["sn"], int(r["cpu_milli"]), int(r["memory_mib"]), int(r["gpu"]), r["model"])
            for r in csv.DictReader(f)
        ]


def load_pods(path: Path) -> list[Shape]:
    """Each row as a Shape (memory in MiB); `gpu_milli` is per device, `num_gpu` devices."""
    with path.open() as f:
        out = []
        for r in csv.DictReader(f):
            count = int(r["num_gpu"])
            milli = int(r["gpu_milli"]) if count else 0
            models = models_of(r.get("gpu_spec") or "")
            out.append(Shape(int(r["cpu_milli"]), int(r["memory_mib"]), count, milli, models))
        return out


def gpu_arrays(nodes: Sequence[Node]) -> GpuArrays:
    width = max(n.gpus for n in nodes)
    free = np.zeros((len(nodes), width), dtype=np.int64)
    for i, n in enumerate(nodes):
        free[i, : n.gpus] = MILLI
    return GpuArrays(
        free, [n.cpu for n in nodes], [n.memory for n in nodes], [n.model for n in nodes], [n.gpus for n in nodes]
    )


class BinpackScorer:
    """volcano-py's default node scoring (the binpack plugin, GPU weight 1) over a NodeArrays kept in step."""

    def __init__(self, nodes: Sequence[Node]) -> None:
        self.infos = [
            NodeInfo(n.name, Resource.of(n.cpu, n.memory * MIB, 110, {GPU: n.gpus * MILLI} if n.gpus else None))
            for n in nodes
        ]
        self.arrays = NodeArrays(self.infos)
        self.plugin = BinpackPlugin(PluginOption("binpack"))
        self.plugin.weight = 1
        self.plugin.resource_weights = self.plugin.args.resource_weights
        self.plugin.ssn = SimpleNamespace(node_list=self.infos)  # type: ignore[assignment]

    @staticmethod
    def task(shape: Shape) -> TaskInfo:
        scalars = {GPU: shape.gpu_milli} if shape.gpu_milli else None
        return TaskInfo("t", "t", "bench", "bench", Resource.of(shape.cpu, shape.memory * MIB, 1, scalars))

    def scores(self, shape: Shape, nodes: np.ndarray) -> np.ndarray:
        return np.asarray(self.plugin.batch_node_order(self.task(shape), self.arrays, nodes), dtype=float)

    def place(self, node: int, shape: Shape) -> None:
        info = self.infos[node]
        request = self.task(shape).resreq
        info.idle, info.used = info.idle - request, info.used + request
        self.arrays.update(info)


@dataclass(slots=True)
class Run:
    policy: str
    seed: int
    requested: np.ndarray  # share of the cluster's GPUs requested after each submission
    allocated: np.ndarray  # share allocated after each submission
    score_seconds: list[float] = field(default_factory=list)
    unplaced: int = 0

    def at(self, grid: np.ndarray) -> np.ndarray:
        """The allocated share at each requested-load grid point (the last submission not beyond it)."""
        idx = np.searchsorted(self.requested, grid, side="right") - 1
        return np.where(idx >= 0, self.allocated[np.maximum(idx, 0)], 0.0)


def refresh_points(limit: int = 1 << 20) -> set[int]:
    """When the FGD mix is re-estimated: after 1, 2, 4, ... 256 pods, then every 256 pods."""
    points = {1 << i for i in range(9)}
    points.update(range(512, limit, 256))
    return points


def run_once(
    policy: str,
    nodes: Sequence[Node],
    pods: Sequence[Shape],
    seed: int,
    *,
    load: float = 1.3,
    half_life: float = 0.0,
    arrays: GpuArrays | None = None,
    mix: ShapeMix | None = None,
) -> Run:
    """One seed of the benchmark; `arrays` and `mix` (fresh when not given) are left in their final state."""
    rng = np.random.default_rng(seed)
    arrays = gpu_arrays(nodes) if arrays is None else arrays
    capacity = int(arrays.devices.sum()) * MILLI
    binpack = BinpackScorer(nodes) if policy == "binpack" else None
    mix = mix_for(policy, half_life) if mix is None else mix
    frag: FragModel | None = None
    refresh = refresh_points()
    everyone = np.arange(arrays.size)
    requested_milli, allocated_milli = 0, 0
    requested: list[float] = []
    allocated: list[float] = []
    run = Run(policy, seed, np.zeros(0), np.zeros(0))
    tie_rng = np.random.default_rng(seed + 1_000_003)
    while requested_milli < load * capacity:
        shape = pods[int(rng.integers(len(pods)))]
        requested_milli += shape.gpu_milli
        mix.observe(shape)
        if policy.startswith("fgd") and (frag is None or mix.seen in refresh):
            frag = frag_model(policy, arrays, mix.top())
        fits = everyone[arrays.fit_mask(shape, everyone)]
        if fits.size:
            start = time.perf_counter()
            if binpack is not None:
                scores, share_device = binpack.scores(shape, fits), None
            else:
                scored = score_nodes(policy, arrays, shape, fits, frag, tie_rng)
                scores, share_device = scored.scores, scored.share_device
            best = int(np.argmax(scores))
            node = int(fits[best])
            chosen = devices_on(
                "firstfit" if policy == "binpack" else policy,
                arrays,
                node,
                shape,
                -1 if share_device is None else int(share_device[best]),
            )
            run.score_seconds.append(time.perf_counter() - start)
            arrays.apply(node, shape, chosen)
            if binpack is not None:
                binpack.place(node, shape)
            allocated_milli += shape.gpu_milli
        else:
            run.unplaced += 1
        requested.append(requested_milli / capacity)
        allocated.append(allocated_milli / capacity)
    run.requested, run.allocated = np.array(requested), np.array(allocated)
    return run


def sampled(pods: Sequence[Shape], seed: int, capacity_milli: int, load: float = 1.3) -> list[Shape]:
    """The pods `run_once` submits for `seed`, in order (the same draws from the same generator)."""
    rng = np.random.default_rng(seed)
    out, requested = [], 0
    while requested < load * capacity_milli:
        shape = pods[int(rng.integers(len(pods)))]
        requested += shape.gpu_milli
        out.append(shape)
    return out


def score_cost(
    policy: str, nodes: Sequence[Node], pods: Sequence[Shape], seed: int = 0, load: float = 0.5, samples: int = 2000
) -> dict[str, tuple[float, float]]:
    """Milliseconds to score one pod on every node (`score_nodes` over all of them, the cycle's worst case) of a
    cluster packed by `policy` to `load`, with the mix it learnt: (median, p99) for GPU shares and whole GPUs."""
    arrays, mix = gpu_arrays(nodes), mix_for(policy)
    run_once(policy, nodes, pods, seed, load=load, arrays=arrays, mix=mix)
    frag = frag_model(policy, arrays, mix.top()) if policy.startswith("fgd") else None
    everyone = np.arange(arrays.size)
    rng = np.random.default_rng(seed)
    out = {}
    for kind, chosen in (("share", [p for p in pods if p.is_share]), ("whole", [p for p in pods if p.is_whole])):
        times = []
        for i in rng.integers(len(chosen), size=samples):
            start = time.perf_counter()
            score_nodes(policy, arrays, chosen[int(i)], everyone, frag, rng)
            times.append(time.perf_counter() - start)
        ms = np.array(times) * 1000.0
        out[kind] = (float(np.median(ms)), float(np.percentile(ms, 99)))
    return out


@dataclass(slots=True)
class Summary:
    variant: str
    policy: str
    seeds: int
    final_allocated: float  # mean share at the end (130% requested)
    final_std: float
    unallocated_gpus: float  # mean GPUs left unallocated at the end
    curve: np.ndarray  # mean allocated share on GRID
    median_ms: float
    p99_ms: float
    pods: float


def summarise(variant: str, policy: str, runs: Sequence[Run], total_gpus: int) -> Summary:
    finals = np.array([r.allocated[-1] for r in runs])
    times = np.concatenate([np.array(r.score_seconds) for r in runs]) * 1000.0
    return Summary(
        variant,
        policy,
        len(runs),
        float(finals.mean()),
        float(finals.std()),
        float(total_gpus * (1.0 - finals.mean())),
        np.mean([r.at(GRID) for r in runs], axis=0),
        float(np.median(times)) if times.size else 0.0,
        float(np.percentile(times, 99)) if times.size else 0.0,
        float(np.mean([len(r.requested) for r in runs])),
    )


def _job(args: tuple[str, str, int, str]) -> Run:
    variant, policy, seed, trace_dir = args
    nodes = load_nodes(Path(trace_dir) / "openb_node_list_gpu_node.csv")
    pods = load_pods(Path(trace_dir) / f"openb_pod_list_{variant}.csv")
    return run_once(policy, nodes, pods, seed)


def bench(
    variants: Sequence[str],
    policies: Sequence[str],
    seeds: Sequence[int],
    trace_dir: Path = TRACE_DIR,
    workers: int = 1,
    progress: Callable[[int, int], None] | None = None,
) -> list[Summary]:
    """Every (variant, policy, seed) run, in `workers` processes; one Summary per (variant, policy).
    `progress(done, total)` after each run."""
    jobs = [(v, p, s, str(trace_dir)) for v in variants for p in policies for s in seeds]
    runs: list[Run] = []
    if workers > 1:
        from multiprocessing import get_context

        with get_context("spawn").Pool(workers) as pool:
            for run in pool.imap(_job, jobs, chunksize=1):  # in order, each as soon as it and those before it end
                runs.append(run)
                if progress is not None:
                    progress(len(runs), len(jobs))
    else:
        for j in jobs:
            runs.append(_job(j))
            if progress is not None:
                progress(len(runs), len(jobs))
    total = sum(n.gpus for n in load_nodes(Path(trace_dir) / "openb_node_list_gpu_node.csv"))
    by_key: dict[tuple[str, str], list[Run]] = {}
    for (variant, policy, _, _), run in zip(jobs, runs, strict=True):
        by_key.setdefault((variant, policy), []).append(run)
    return [summarise(v, p, rs, total) for (v, p), rs in by_key.items()]


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="volcano-py bench packing", description=__doc__.split("\n\n")[0])
    add_arguments(ap)
    args = ap.parse_args(argv)
    return run_cli(args)


def add_arguments(ap: argparse.ArgumentParser) -> None:
    import os

    ap.add_argument("--trace-dir", type=Path, default=TRACE_DIR, help="folder with the openb CSV files")
    ap.add_argument("--variants", default="default", help=f"comma list of pod lists ({', '.join(VARIANTS)}; all)")
    ap.add_argument("--policies", default=",".join(BENCH_POLICIES), help="comma list of policies")
    ap.add_argument("--seeds", type=int, default=10, help="how many seeds (default 10)")
    ap.add_argument(
        "--first-seed",
        type=int,
        default=0,
        help="seeds FIRST..FIRST+N-1 (default 0; tune on other seeds than the reported 0..9)",
    )
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="processes (default: all cores)")
    ap.add_argument(
        "--score-cost",
        action="store_true",
        help="instead: time scoring one pod on all nodes of a half-full cluster (seed FIRST), per policy",
    )
    ap.add_argument("--out", type=Path, default=Path("bench/results"), help="where the CSV and PNG files go")
    ap.add_argument("--bound", action="store_true",
                    help="also the offline upper bound on the same seeds' pods, and each policy's distance to it")


def run_cli(args: argparse.Namespace) -> int:
    variants = VARIANTS if args.variants == "all" else tuple(v.strip() for v in args.variants.split(","))
    policies = tuple(p.strip() for p in args.policies.split(","))
    for policy in policies:
        if policy not in BENCH_POLICIES:
            raise SystemExit(f"volcano-py: error: unknown policy {policy!r}; expected {', '.join(BENCH_POLICIES)}")
    started = time.perf_counter()
    if args.score_cost:
        nodes = load_nodes(args.trace_dir / "openb_node_list_gpu_node.csv")
        for variant in variants:
            pods = load_pods(args.trace_dir / f"openb_pod_list_{variant}.csv")
            for policy in policies:
                if policy == "binpack":
                    continue
                cost = score_cost(policy, nodes, pods, args.first_seed)
                print(
                    f"{variant:<11} {policy:<12} "
                    + "  ".join(f"{kind} {med:.3f} / {p99:.3f} ms (median / p99)" for kind, (med, p99) in cost.items())
                )
        return 0
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    with Progress("bench packing", len(variants) * len(policies) * len(seeds), "run") as bar:
        summaries = bench(variants, policies, seeds, args.trace_dir, args.workers,
                          progress=lambda done, _: bar.update(done))
    curve, summary = write_csv(summaries, args.out)
    pngs = plot(summaries, args.out)
    print(render(summaries))
    if args.bound:
        from packing_bound import bound_summary, render_bound

        print(render_bound([bound_summary(v, seeds, args.trace_dir) for v in variants], summaries))
    print(
        f"\nwrote {curve}, {summary}"
        + "".join(f", {p}" for p in pngs)
        + ("" if pngs else " (no PNG: matplotlib is not installed)")
        + f" in {time.perf_counter() - started:.0f}s"
    )
    return 0


def write_csv(summaries: Sequence[Summary], out: Path) -> tuple[Path, Path]:
    out.mkdir(parents=True, exist_ok=True)
    curve, summary = out / "packing_curve.csv", out / "packing_summary.csv"
    with curve.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["variant", "policy", "requested_pct", "allocated_pct"])
        for s in summaries:
            for g, a in zip(GRID, s.curve, strict=True):
                w.writerow([s.variant, s.policy, f"{100 * g:.0f}", f"{100 * a:.3f}"])
    with summary.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(
            [
                "variant",
                "policy",
                "seeds",
                "allocated_pct_at_130",
                "std_pct",
                "unallocated_gpus",
                "pods_submitted",
                "score_median_ms",
                "score_p99_ms",
            ]
        )
        for s in summaries:
            w.writerow(
                [
                    s.variant,
                    s.policy,
                    s.seeds,
                    f"{100 * s.final_allocated:.2f}",
                    f"{100 * s.final_std:.2f}",
                    f"{s.unallocated_gpus:.0f}",
                    f"{s.pods:.0f}",
                    f"{s.median_ms:.3f}",
                    f"{s.p99_ms:.3f}",
                ]
            )
    return curve, summary


def plot(summaries: Sequence[Summary], out: Path) -> list[Path]:
    """One PNG per variant: allocated share versus requested load; nothing if matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    paths = []
    for variant in dict.fromkeys(s.variant for s in summaries):
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for s in (s for s in summaries if s.variant == variant):
            ax.plot(100 * GRID, 100 * s.curve, label=f"{s.policy} ({100 * s.final_allocated:.1f}%)")
        ax.plot([0, 100], [0, 100], color="grey", linewidth=0.5, linestyle=":")
        ax.set_xlabel("GPUs requested (% of cluster)")
        ax.set_ylabel("GPUs allocated (% of cluster)")
        ax.set_title(f"openb {variant}: allocated GPU share, mean of {summaries[0].seeds} seeds")
        ax.set_xlim(60, 130)
        ax.set_ylim(60, 100)
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right")
        path = out / f"packing_{variant}.png"
        fig.savefig(path, dpi=120, bbox_inches="tight")
        plt.close(fig)
        paths.append(path)
    return paths


def render(summaries: Sequence[Summary]) -> str:
    lines = [f"{'variant':<11} {'policy':<12} {'alloc@130%':>10} {'unalloc GPUs':>12} {'score ms (med/p99)':>19}"]
    for s in summaries:
        lines.append(
            f"{s.variant:<11} {s.policy:<12} {100 * s.final_allocated:>9.2f}% {s.unallocated_gpus:>12.0f}"
            f" {s.median_ms:>9.3f} / {s.p99_ms:<7.3f}"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
