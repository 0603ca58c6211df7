"""A day of training jobs replayed in the simulator: greedy binpack against the network-topology-aware solver.

    .venv/bin/python bench/bench_day.py [--seed 7] [--nodes 32] [--rack 8] [--jobs-per-hour 15] [--period 10]
                                        [--no-greedy-topology] [--no-write]

Generates (seeded) a cluster of `--nodes` nodes with 8 GPUs each, `--rack` nodes to a rack
(`volcano.sh/rack`), 4 racks to a zone (`topology.kubernetes.io/zone`), and 24 hours of Volcano Jobs with
Poisson arrivals: gangs of 1..64 GPUs (1-GPU workers up to 8 GPUs, 8-GPU workers above; 8 GPUs is either),
log-uniform durations of 5 minutes to 6 hours; 50% of the multi-pod jobs carry `networkTopology: {mode: soft}`
and 20% `{mode: hard, highestTierAllowed: 2}` (one rack). Writes them to examples/sim/day-cluster.yaml and
examples/sim/day-workload.yaml (unless --no-write), then replays the same workload with:

- greedy: the built-in default conf (pod by pod, binpack), which ignores `networkTopology`;
- solver: the same conf plus `network-topology-aware` (CP-SAT per gang, defaults: 200 ms, 500 ms per cycle);
- topo-greedy: the plugin with `solver.timeLimitMs: 1` (CP-SAT gets no time: the better of the two greedy
  placers, in practice the topology-aware greedy).

Reports the simulator's totals (GPUs doing work, mean / p95 wait, jobs finished) plus the GPUs doing work over
the first 24 h only, and racks spanned per multi-node gang (from the cluster's bind log and node labels).
Writes bench/results/day-summary.csv, day-utilisation.csv and day-utilisation.png.
"""

from __future__ import annotations

import argparse
import csv
import math
import random
import statistics
import time
from pathlib import Path
from typing import Any

import yaml

from scheduler.cycle import builtin_default_conf, conf_from_text
from scheduler.framework.conf import SchedulerConf
from scheduler.sim.replay import Replay, replay
from scheduler.sim.report import totals
from scheduler.sim.workload import load_cluster, load_workload

ROOT = Path(__file__).resolve().parent.parent


DAY = 24 * 3600
RACK_LABEL = "volcano.sh/rack"
ZONE_LABEL = "topology.kubernetes.io/zone"

SOLVER_CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
  - name: network-topology-aware{args}
"""

# gang size in GPUs -> weight (many small jobs, a tail of big ones)
SIZES = {1: 0.22, 2: 0.12, 4: 0.14, 8: 0.2, 16: 0.14, 32: 0.1, 64: 0.08}


def make_conf(args: str = "") -> SchedulerConf:
    return conf_from_text(SOLVER_CONF.format(args=args), source="bench_day")


def cluster_yaml(nodes: int, rack: int) -> dict[str, Any]:
    out = []
    racks = -(-nodes // rack)
    for r in range(racks):
        count = min(rack, nodes - r * rack)
        out.append({"name": f"gpu-r{r:02d}", "count": count, "cpu": 96, "memory": "1024Gi", "gpu": 8,
                    "labels": {ZONE_LABEL: f"zone-{r // 4}", RACK_LABEL: f"rack-{r:02d}"}})
    return {"nodes": out, "queues": [{"name": "default", "weight": 1}]}


def job(name: str, rng: random.Random, arrival: float) -> dict[str, Any]:
    size = rng.choices(list(SIZES), weights=list(SIZES.values()))[0]
    per_pod = 8 if size > 8 or (size == 8 and rng.random() < 0.5) else 1
    replicas = size // per_pod
    duration = round(math.exp(rng.uniform(math.log(300), math.log(6 * 3600))))
    resources = {"nvidia.com/gpu": per_pod, "cpu": 10 * per_pod, "memory": f"{100 * per_pod}Gi"}
    spec: dict[str, Any] = {
        "minAvailable": replicas, "schedulerName": "volcano-py", "queue": "default",
        "tasks": [{"name": "worker", "replicas": replicas, "template": {"spec": {"containers": [
            {"name": "worker", "image": "train", "resources": {"requests": resources, "limits": resources}}]}}}],
    }
    if replicas > 1:
        roll = rng.random()
        if roll < 0.5:
            spec["networkTopology"] = {"mode": "soft"}
        elif roll < 0.7:
            spec["networkTopology"] = {"mode": "hard", "highestTierAllowed": 2}
    return {"arrival": round(arrival), "duration": duration, "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job", "metadata": {"name": name}, "spec": spec}


def workload_yaml(rng: random.Random, per_hour: float) -> dict[str, Any]:
    jobs, t = [], rng.expovariate(per_hour / 3600)
    while t < DAY:
        jobs.append(job(f"train-{len(jobs):04d}", rng, t))
        t += rng.expovariate(per_hour / 3600)
    return {"jobs": jobs}


def dump(doc: dict[str, Any], path: Path, header: str) -> None:
    text = yaml.safe_dump(doc, sort_keys=False, default_flow_style=None, width=200)
    path.write_text(header + text)


def racks_spanned(outcome: Replay) -> list[int]:
    """Distinct racks per gang that was bound on more than one node."""
    rack_of = {name: node.labels.get(RACK_LABEL, name) for name, node in outcome.cluster.nodes.items()}
    nodes_of: dict[str, set[str]] = {}
    for record in outcome.cluster.bind_log:
        nodes_of.setdefault(record.job, set()).add(record.node)
    return [len({rack_of[n] for n in nodes}) for nodes in nodes_of.values() if len(nodes) > 1]


def busy_share(outcome: Replay, until: float) -> float:
    """Time-weighted share of GPUs held by running gangs over [0, until]."""
    samples = [s for s in outcome.utilisation if s[0] <= until]
    area, prev_t, prev_b = 0.0, 0.0, 0.0
    for t, _, b in samples:
        area += prev_b * (t - prev_t)
        prev_t, prev_b = t, b
    area += prev_b * (until - prev_t)
    return area / until


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--nodes", type=int, default=32)
    parser.add_argument("--rack", type=int, default=8)
    parser.add_argument("--jobs-per-hour", type=float, default=15)
    parser.add_argument("--period", type=float, default=10.0)
    parser.add_argument("--no-greedy-topology", action="store_true", help="skip the solver.timeLimitMs=1 run")
    parser.add_argument("--no-write", action="store_true", help="do not overwrite examples/sim/day-*.yaml")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = parser.parse_args()

    rng = random.Random(args.seed)
    cluster_path, workload_path = ROOT / "examples/sim/day-cluster.yaml", ROOT / "examples/sim/day-workload.yaml"
    if not args.no_write:
        cmd = f"# Generated by bench/bench_day.py --seed {args.seed} --nodes {args.nodes} --rack {args.rack}"
        dump(cluster_yaml(args.nodes, args.rack), cluster_path, f"{cmd}\n")
        dump(workload_yaml(rng, args.jobs_per_hour), workload_path,
             f"{cmd} --jobs-per-hour {args.jobs_per_hour:g}\n# 24 h of training jobs (Poisson arrivals).\n")
    spec, workload = load_cluster(cluster_path), load_workload(workload_path)
    gpus = sum(int(n["status"]["allocatable"]["nvidia.com/gpu"]) for n in spec.nodes)
    demand = sum(int(i.manifest["spec"]["tasks"][0]["replicas"])
                 * int(i.manifest["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["resources"]["limits"]
                       ["nvidia.com/gpu"]) * i.duration for i in workload.items)
    print(f"{len(spec.nodes)} nodes, {gpus} GPUs; {len(workload.items)} jobs; offered load "
          f"{demand / (gpus * DAY):.0%} of the cluster's GPU-hours over 24 h; period {args.period:g}s")

    variants = [("greedy", builtin_default_conf()),
                ("solver", make_conf('\n    arguments: {"solver.everyGang": true}'))]
    if not args.no_greedy_topology:
        no_time = '\n    arguments: {"solver.everyGang": true, "solver.timeLimitMs": 1}'
        variants.append(("topo-greedy", make_conf(no_time)))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows, series = [], {}
    for name, conf in variants:
        start = time.perf_counter()
        outcome = replay(spec, workload, conf, period=args.period)
        elapsed = time.perf_counter() - start
        t = totals(outcome)
        spans = racks_spanned(outcome)
        waits = sorted(r.started - r.item.arrival for r in outcome.runs if r.started is not None)
        row = {
            "variant": name,
            "jobs": t.jobs,
            "finished": t.finished,
            "gpu_doing_work": round(t.gpu_utilisation, 4),
            "gpu_doing_work_first_24h": round(busy_share(outcome, DAY), 4),
            "gpu_held": round(t.gpu_held, 4),
            "mean_wait_s": round(t.mean_wait or 0.0, 1),
            "median_wait_s": round(statistics.median(waits), 1) if waits else 0.0,
            "p95_wait_s": round(t.p95_wait or 0.0, 1),
            "multi_node_gangs": len(spans),
            "racks_per_multi_node_gang": round(statistics.mean(spans), 3) if spans else 0.0,
            "multi_rack_gangs": sum(1 for s in spans if s > 1),
            "makespan_s": round(t.makespan),
            "cycles": t.cycles,
            "partial_gang_cycles": t.partial_gang_cycles,
            "stalled": t.stalled,
            "replay_s": round(elapsed, 1),
        }
        rows.append(row)
        series[name] = outcome.utilisation
        print(", ".join(f"{k}={v}" for k, v in row.items()), flush=True)

    with open(out / "day-summary.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    # GPUs doing work, sampled every 10 simulated minutes (the value in force at that moment)
    end = max(s[-1][0] for s in series.values())
    grid = list(range(0, int(end) + 600, 600))
    sampled = {name: _sample(s, grid) for name, s in series.items()}
    with open(out / "day-utilisation.csv", "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["time_h", *(f"{n}_gpu_doing_work" for n in sampled)])
        for i, t in enumerate(grid):
            writer.writerow([round(t / 3600, 3), *(round(v[i], 4) for v in sampled.values())])
    _plot(grid, sampled, rows, out / "day-utilisation.png")


def _sample(samples: list[tuple[float, float, float]], grid: list[int]) -> list[float]:
    out, j, value = [], 0, 0.0
    for t in grid:
        while j < len(samples) and samples[j][0] <= t:
            value = samples[j][2]
            j += 1
        out.append(value)
    return out


def _plot(grid: list[int], sampled: dict[str, list[float]], rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4), dpi=100)
    hours = [t / 3600 for t in grid]
    for row in rows:
        name = row["variant"]
        ax.plot(hours, [100 * v for v in sampled[name]], lw=1.1,
                label=f"{name}: {row['gpu_doing_work_first_24h']:.1%} over 24 h, "
                      f"mean wait {row['mean_wait_s'] / 60:.0f} min, {row['racks_per_multi_node_gang']:.2f} racks/gang")
    ax.axvline(24, color="grey", ls=":", lw=0.8)
    ax.set_xlabel("simulated time (h)")
    ax.set_ylabel("GPUs doing work (%)")
    ax.set_ylim(0, 105)
    ax.set_title("A day of training jobs: greedy binpack vs network-topology-aware (bench_day.py)")
    ax.legend(loc="lower center", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)


if __name__ == "__main__":
    main()
