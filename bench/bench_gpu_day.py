"""A day of GPU training jobs in the simulator, one run, every conf: Volcano's, volcano-py's, and each policy.

    .venv/bin/python bench/bench_gpu_day.py [--seed 35] [--nodes 10] [--per-class 150,100,60] [--period 10]
                                            [--variants volcano,all] [--quick] [--out DIR] [--no-plots]

The workload (`gpu_day_workload.py`, seeded): 24 simulated hours of training jobs whose gang sizes, run times
and arrivals follow the distributions Jeon et al. published for Microsoft's Philly clusters (USENIX ATC 2019; see
that module for what we took and how), at least 50 jobs in each gang-size class (1, 2-8, 16-64 GPUs), four queues
of equal weight: one submits 3x the others, one in a burst overnight. On `--nodes` nodes of 8 GPUs.

Variants, the same workload each:
- volcano: Volcano's default `volcano-scheduler.conf` (its Helm chart's) as Volcano runs it: its binpack scores
  cpu and memory only (the conf lists no other resource), so GPUs are not packed; `make bench-day-slice` checked
  this row against Volcano's own scheduler on an hour of the day, job for job (docs/simulator.md). The baseline;
- volcano-conf: the same conf run by volcano-py as it is, whose binpack also packs `nvidia.com/gpu`;
- volcano-py: volcano-py's built-in default conf;
- consolidate, fair-share: volcano-py's default plus that one policy;
- min-runtime, victim-cost: consolidate plus that policy (both act on evictions; consolidate's moves are the
  only evictions of the default actions with it, so `consolidate` is their baseline);
- hold-idle: volcano-py's default plus the starvation guard's reserved nodes holding their free GPUs for the gang
  until they drain (`allocate`'s `starvationHoldIdle: 1h`);
- gangreclaim: volcano-py's default plus Volcano's gang-aware reclaim, with min-runtime and victim-cost (queues
  below their fair share take whole gangs back); shown because it is the one way to give a queue its share back
  now, and on this day it costs more than it gives (docs/simulator.md);
- all: the policies that pay off together (consolidate with each move losing at most 4 GPU-hours of work,
  time-based fair share, admission within the queue's share, admission room kept for a job refused an hour,
  reserved nodes' free GPUs held for the gang, min-runtime, victim-cost; not gangreclaim), from
  examples/sim/gpu-day.conf, the conf a user can take.

Measures (`gpu_day_metrics.py`): p50 / p95 queueing delay by gang-size class; GPU-hours doing work over the day;
pods evicted, gangs broken, GPU-hours lost (since the gang's start; and since its last checkpoint, the workload's
jobs checkpointing every 30 min); Jain's fairness index of each queue's GPU-hours over its max-min fair share,
hourly. Targets, each volcano-py variant against `volcano` in the same run: 16-64-GPU p95 wait <= 0.5 x
Volcano's; GPU-hours doing work >= Volcano's; lost GPU-hours <= 2% of the day's; fairness >= 0.95.

Writes bench/results/gpu-day.md (the tables), gpu-day.csv, and gpu-day-waits.png, gpu-day-evictions.png,
gpu-day-shares.png (`--out` elsewhere; `--quick`: a 4-node, 6-hour day of 18 jobs, for tests).
"""

from __future__ import annotations

import argparse
import csv
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_day_metrics import (  # noqa: E402
    HOUR,
    ClassWaits,
    busy_gpu_hours,
    evictions_by_hour,
    held_samples,
    hourly,
    hourly_demand,
    hourly_fairness,
    lost_gpu_hours,
    outcomes,
    waits_by_class,
)
from gpu_day_workload import CLASSES, QUEUES, DaySpec, cluster_doc, offered_load, workload_docs  # noqa: E402

from scheduler.cycle import builtin_default_conf, conf_from_text, load_conf  # noqa: E402
from scheduler.framework.conf import SchedulerConf  # noqa: E402
from scheduler.sim.replay import Replay, replay  # noqa: E402
from scheduler.sim.workload import load_cluster, workload_from_docs  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
ALL_CONF = ROOT / "examples" / "sim" / "gpu-day.conf"

# The ConfigMap volcano-py ships holds Volcano's installer/helm/chart/volcano/config/volcano-scheduler.conf (what
# `helm install volcano` runs) line for line; tests/deploy/test_shipped_conf.py pins it to Volcano's snapshot.
SHIPPED_CONFIGMAP = ROOT / "manifests" / "03-scheduler-configmap.yaml"


def volcano_conf() -> SchedulerConf:
    """Volcano's Helm chart conf, read from the shipped ConfigMap."""
    text = yaml.safe_load(SHIPPED_CONFIGMAP.read_text())["data"]["volcano-scheduler.conf"]
    return conf_from_text(text, source="volcano-scheduler.conf (Volcano's Helm chart, as manifests/ ships it)")


# volcano-py's default tiers with one policy or more: {actions}, {tier1} and {proportion} filled in
POLICY_CONF = """
actions: "{actions}"
tiers:
- plugins:
  - name: priority
  - name: gang{gang}
  - name: conformance{tier1}
- plugins:
  - name: overcommit
  - name: drf{gang}
  - name: predicates
  - name: proportion{proportion}
  - name: nodeorder
  - name: binpack
{configurations}"""
NOT_PREEMPTABLE = "\n    enablePreemptable: false"  # gang-aware reclaim takes whole gangs, as Volcano's conf for it
FAIR_SHARE = '\n    arguments: {"usage.weight": 1, "usage.halfLife": "4h", "usage.window": "24h"}'
MIN_RUNTIME = '\n  - name: minruntime\n    arguments: {"minRuntime": "30m"}'
VICTIM_COST = '\n  - name: victimcost\n    arguments: {"maxEvictionsPerCycle": 16, "maxEvictionsPerJob": 8}'
HOLD_IDLE = 'configurations:\n- name: allocate\n  arguments: {"starvationHoldIdle": "1h"}\n'


# Volcano's binpack weighs only cpu, memory and the resources `binpack.resources` lists (plugins/binpack); the Helm
# conf lists none. volcano-py's packs nvidia.com/gpu unless told otherwise (CONFORMANCE.md), so this is Volcano's.
NO_GPU_PACKING = {"binpack.resources": "nvidia.com/gpu", "binpack.resources.nvidia.com/gpu": 0}


def volcano_as_volcano() -> SchedulerConf:
    """Volcano's Helm conf with binpack scoring as Volcano's does (GPUs left out)."""
    text = yaml.safe_load(SHIPPED_CONFIGMAP.read_text())["data"]["volcano-scheduler.conf"]
    doc = yaml.safe_load(text)
    for tier in doc["tiers"]:
        for plugin in tier["plugins"]:
            if plugin["name"] == "binpack":
                plugin["arguments"] = {**(plugin.get("arguments") or {}), **NO_GPU_PACKING}
    return conf_from_text(yaml.safe_dump(doc), source="Volcano's Helm conf, binpack without GPUs as Volcano's")


def policy_conf(*, consolidate: bool = False, reclaim: bool = False, fair_share: bool = False,
                min_runtime: bool = False, victim_cost: bool = False, hold_idle: bool = False) -> SchedulerConf:
    actions = ["enqueue", "allocate"] + ["consolidate"] * consolidate + ["gangreclaim"] * reclaim + ["backfill"]
    text = POLICY_CONF.format(actions=", ".join(actions), gang=NOT_PREEMPTABLE if reclaim else "",
                              tier1=MIN_RUNTIME * min_runtime + VICTIM_COST * victim_cost,
                              proportion=FAIR_SHARE if fair_share else "",
                              configurations=HOLD_IDLE if hold_idle else "")
    return conf_from_text(text, source="bench_gpu_day")


VARIANTS: dict[str, Callable[[], SchedulerConf]] = {
    "volcano": volcano_as_volcano,
    "volcano-conf": volcano_conf,
    "volcano-py": builtin_default_conf,
    "consolidate": lambda: policy_conf(consolidate=True),
    "fair-share": lambda: policy_conf(fair_share=True),
    "min-runtime": lambda: policy_conf(consolidate=True, min_runtime=True),
    "victim-cost": lambda: policy_conf(consolidate=True, victim_cost=True),
    "hold-idle": lambda: policy_conf(hold_idle=True),
    "gangreclaim": lambda: policy_conf(reclaim=True, min_runtime=True, victim_cost=True),
    "all": lambda: load_conf(str(ALL_CONF)),
}
BASELINE = "volcano"
BIG = "16-64"


@dataclass(slots=True)
class Result:
    variant: str
    waits: dict[str, ClassWaits]
    work: float  # GPU-hours doing work over the day
    evicted: int  # pods
    broken: int  # gang breaks
    lost: float  # GPU-hours lost since the gangs' start
    lost_checkpoint: float  # ... since their last checkpoint
    fairness: list[tuple[int, float]]
    seconds: float
    cycles: int
    unfinished: int
    evictions_hourly: list[int] = field(default_factory=list)
    held: dict[str, list[float]] = field(default_factory=dict)  # queue -> GPU-hours per hour
    demand: dict[str, list[float]] = field(default_factory=dict)

    @property
    def fairness_mean(self) -> float | None:
        return sum(v for _, v in self.fairness) / len(self.fairness) if self.fairness else None


def measure(variant: str, outcome: Replay, gpus: int, day: float, seconds: float) -> Result:
    hours = round(day / HOUR)
    jobs = outcomes(outcome)
    lost, lost_checkpoint = lost_gpu_hours(jobs)
    held = {q: hourly(s, hours) for q, s in held_samples(outcome).items()}
    demand = hourly_demand(jobs, QUEUES, hours)
    return Result(
        variant, waits_by_class(jobs, outcome.end), busy_gpu_hours(outcome, day), len(outcome.cluster.eviction_log),
        sum(len(j.lost) for j in jobs), lost, lost_checkpoint, hourly_fairness(held, demand, float(gpus), hours),
        seconds, outcome.cycles, sum(1 for r in outcome.runs if r.ended is None),
        evictions_by_hour(outcome, hours), held, demand,
    )


def targets(result: Result, base: Result, gpus: int, day: float) -> list[tuple[str, bool | None, str]]:
    """(target, met (None: not measured), the numbers) for one variant against the baseline."""
    out: list[tuple[str, bool | None, str]] = []
    big, base_big = result.waits[BIG], base.waits[BIG]
    if big.p95 is None or base_big.p95 is None:
        out.append(("16-64 p95 wait <= 0.5 x volcano", None, f"{big.jobs} jobs < 50"))
    else:
        out.append(("16-64 p95 wait <= 0.5 x volcano", big.p95 <= 0.5 * base_big.p95,
                    f"{_m(big.p95)} vs {_m(0.5 * base_big.p95)}"))
    out.append(("GPU-h doing work >= volcano", result.work >= base.work,
                f"{result.work:.0f} vs {base.work:.0f}"))
    budget = 0.02 * gpus * day / HOUR
    out.append(("lost GPU-h <= 2% of the day", result.lost <= budget, f"{result.lost:.1f} vs {budget:.1f}"))
    fair = result.fairness_mean
    out.append(("fairness >= 0.95", None if fair is None else fair >= 0.95,
                "no hour with 2 queues" if fair is None else f"{fair:.3f}"))
    return out


def _m(seconds: float | None) -> str:
    return "n/m" if seconds is None else f"{seconds / 60:.1f}"


def tables(results: Sequence[Result], gpus: int, day: float, header: str) -> str:
    base = next((r for r in results if r.variant == BASELINE), results[0])
    lines = [header, "", "| variant | " + " | ".join(f"{c} GPU p50 / p95 wait (min)" for c in CLASSES)
             + " | GPU-h doing work | pods evicted | gangs broken | lost GPU-h (since start / since checkpoint)"
             " | fairness (mean / min, hours) | unfinished | replay s |",
             "|---" * (len(CLASSES) + 8) + "|"]
    for r in results:
        waits = [f"{_m(w.p50)} / {_m(w.p95)}" + (f" ({w.never_started} never)" if w.never_started else "")
                 if w.measured else f"not measured ({w.jobs} jobs)" for w in (r.waits[c] for c in CLASSES)]
        fair = (f"{r.fairness_mean:.3f} / {min(v for _, v in r.fairness):.3f}, {len(r.fairness)}"
                if r.fairness else "n/a")
        lines.append(f"| {r.variant} | " + " | ".join(waits) + f" | {r.work:.0f} | {r.evicted} | {r.broken} | "
                     f"{r.lost:.1f} / {r.lost_checkpoint:.1f} | {fair} | {r.unfinished} | {r.seconds:.0f} |")
    others = [r for r in results if r is not base]
    if others:
        lines += ["", "Targets (each variant against volcano, same run):", "",
                  "| target | " + " | ".join(r.variant for r in others) + " |", "|---" * (len(others) + 1) + "|"]
        rows = [targets(r, base, gpus, day) for r in others]
        for i, (name, _, _) in enumerate(rows[0]):
            cells = [("not measured" if met is None else "met" if met else "not met") + f" ({text})"
                     for _, met, text in (row[i] for row in rows)]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_csv(results: Sequence[Result], path: Path) -> None:
    with open(path, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["variant", *(f"{c}_{k}" for c in CLASSES for k in ("jobs", "p50_wait_s", "p95_wait_s",
                                                                          "never_started")),
                         "gpu_hours_doing_work", "pods_evicted", "gangs_broken", "lost_gpu_hours_since_start",
                         "lost_gpu_hours_since_checkpoint", "fairness_mean", "fairness_hours", "unfinished",
                         "cycles", "replay_s"])
        for r in results:
            waits = [v for c in CLASSES for v in (r.waits[c].jobs, r.waits[c].p50, r.waits[c].p95,
                                                   r.waits[c].never_started)]
            writer.writerow([r.variant, *waits, round(r.work, 2), r.evicted, r.broken, round(r.lost, 3),
                             round(r.lost_checkpoint, 3),
                             None if r.fairness_mean is None else round(r.fairness_mean, 4), len(r.fairness),
                             r.unfinished, r.cycles, round(r.seconds, 1)])


def load(spec: DaySpec, tmp: Path) -> tuple[Any, Any]:
    path = tmp / "gpu-day-cluster.yaml"
    path.write_text(yaml.safe_dump(cluster_doc(spec)))
    return load_cluster(path), workload_from_docs("gpu_day_workload", workload_docs(spec))


def run(argv: Sequence[str] | None = None) -> list[Result]:
    """The command line's run: the results, in the variants' order (tables, CSV and plots written)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=35)
    parser.add_argument("--nodes", type=int, default=10)
    parser.add_argument("--per-class", default="150,100,60", help="jobs of 1, 2-8 and 16-64 GPUs")
    parser.add_argument("--period", type=float, default=10.0, help="simulated seconds between cycles")
    parser.add_argument("--quick", action="store_true", help="a 4-node, 6-hour day of 18 jobs (for tests)")
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated, from: " + ", ".join(VARIANTS))
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"))
    parser.add_argument("--no-plots", action="store_true")
    args = parser.parse_args(argv)
    names = [v for v in args.variants.split(",") if v]
    unknown = [v for v in names if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown variant {unknown[0]!r}")
    spec = (DaySpec(nodes=4, per_class=(8, 6, 4), seed=args.seed, day=6 * HOUR) if args.quick
            else DaySpec(nodes=args.nodes, seed=args.seed, per_class=_three(parser, args.per_class)))
    gpus = spec.nodes * spec.gpus_per_node
    with tempfile.TemporaryDirectory() as tmp:
        cluster, workload = load(spec, Path(tmp))
    docs = workload_docs(spec)
    header = (f"{spec.nodes} nodes x {spec.gpus_per_node} GPUs; {len(docs)} jobs over {spec.day / HOUR:.0f} h "
              f"(seed {spec.seed}; classes 1 / 2-8 / 16-64 GPUs: {' / '.join(map(str, spec.per_class))} jobs); "
              f"offered load {offered_load(docs, gpus, spec.day):.0%} of the day's GPU-hours; period {args.period:g} s")
    print(header, flush=True)
    results = []
    for name in names:
        conf = VARIANTS[name]()
        start = time.perf_counter()
        outcome = replay(cluster, workload, conf, period=args.period, horizon=spec.day * 1.5)
        result = measure(name, outcome, gpus, spec.day, time.perf_counter() - start)
        results.append(result)
        print(f"{name}: {result.seconds:.0f} s, {result.cycles} cycles, {result.work:.0f} GPU-h doing work, "
              f"{result.evicted} pods evicted, fairness {result.fairness_mean}", flush=True)
    text = tables(results, gpus, spec.day, header)
    print(text)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu-day.md").write_text(text)
    write_csv(results, out / "gpu-day.csv")
    if not args.no_plots:
        from gpu_day_plots import plot_all

        plot_all(results, gpus, spec.day, out)
    return results


def _three(parser: argparse.ArgumentParser, text: str) -> tuple[int, int, int]:
    try:
        a, b, c = (int(v) for v in text.split(","))
    except ValueError:
        parser.error(f"--per-class: expected three integers such as 150,100,60, got {text!r}")
    return a, b, c


def main(argv: Sequence[str] | None = None) -> int:
    run(argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
