"""Steady-state cycles for `bench/bench_cycle.py --warm N`: a full cluster, a churn of pods between cycles.

The cluster `bench_cycle.build` made (every pod pending; a share `--gpu-share` of the gangs with one GPU per
pod, 0.6 by default, so the cluster holds its pods as one in steady state does) is filled by cycles whose binds
are applied and whose pods then start, as a kubelet starts them. Then `--repeat` cold cycles on that state are
timed (snapshot built afresh, no memo, nothing applied: a cycle after a restart), and N warm cycles, each after
a churn: `--churn` of the pods change, half of them running pods that complete and are deleted, half new
pending pods in gangs of 1 to 64. Each warm cycle's binds are applied and its pods started before the next
churn (untimed). With `--incremental` the cluster builds the warm cycles' snapshots from the previous one and
the changes (`adapter/incremental.py`).
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable
from typing import Any

from gpu_day_metrics import percentile

from scheduler.adapter.snapshot import AdapterRules
from scheduler.api.snapshot import CycleResult
from scheduler.framework.memo import CycleMemo
from scheduler.sim.cluster import InMemoryCluster
from scheduler.sim.objects import pod_object

GANG_SIZES = (1, 2, 4, 8, 16, 32, 64)  # (bench_cycle.build's too)
CycleFn = Callable[..., tuple[dict[str, float], int]]


def churn(sim: InMemoryCluster, rng: random.Random, count: int, serial: list[int], gpu_share: float) -> tuple[int, int]:
    """`count` pod changes: half running pods complete and go, half arrive pending in new gangs (a share
    `gpu_share` of them asking for a GPU, as `bench_cycle.build` makes them)."""
    running = [key for key, pod in sim.pods.items() if pod.manifest["status"].get("phase") == "Running"]
    gone = rng.sample(running, min(len(running), count // 2))
    for key in gone:
        sim.delete_pod(key)
    made = 0
    while made < count - count // 2:
        size = min(rng.choice(GANG_SIZES), count - count // 2 - made)
        name = f"late-{serial[0]:05d}"
        serial[0] += 1
        sim.add_podgroup({"metadata": {"name": name}, "spec": {"minMember": size, "queue": "default"},
                          "status": {"phase": "Inqueue"}})
        gpu = 1 if rng.random() < gpu_share else 0
        for i in range(size):
            sim.add_pod(pod_object(f"{name}-{i}", group=name, gpu=gpu, cpu="4", memory="32Gi"), owned=True)
        made += size
    return len(gone), made


def fill(sim: InMemoryCluster, conf: Any, memo: CycleMemo, one_cycle: CycleFn) -> None:
    """Fill the cluster: cycles with their binds applied and their pods started, until one binds nothing (4 at
    most)."""
    for _ in range(4):
        kept: list[CycleResult] = []
        _, bound = one_cycle(sim, conf, memo, kept)
        sim.apply(kept[0])
        sim.start_bound_pods()
        if not bound:
            break


def warm_cycles(sim: InMemoryCluster, conf: Any, nodes: int, pods: int, args: Any, one_cycle: CycleFn) -> None:
    memo = CycleMemo()
    started = time.perf_counter()
    fill(sim, conf, memo, one_cycle)
    running = sum(1 for p in sim.pods.values() if p.manifest["status"].get("phase") == "Running")
    print(f"\n{nodes} nodes x {pods} pods: {running} running after filling ({time.perf_counter() - started:.1f} s)")
    cold = [one_cycle(sim, conf)[0] for _ in range(args.repeat)]  # as after a restart: no memo either
    if args.incremental:
        sim.changes.start(AdapterRules(sim.scheduler_names, sim.default_queue))
        one_cycle(sim, conf, memo)  # the first snapshot of the incremental builder is a cold one
    rng = random.Random(11)
    serial = [0]
    warm: list[dict[str, float]] = []
    count = max(2, round(pods * args.churn))
    binds = []
    share = args.gpu_share if args.gpu_share is not None else 0.6
    for _ in range(args.warm):
        churn(sim, rng, count, serial, share)
        kept = []
        times, bound = one_cycle(sim, conf, memo, kept)
        warm.append(times)
        binds.append(bound)
        sim.apply(kept[0])
        sim.start_bound_pods()
    print(f"churn {count} pods per cycle ({args.churn:.1%}); binds per warm cycle: median "
          f"{statistics.median(binds):.0f}, min {min(binds)}, max {max(binds)}; incremental: {args.incremental}")
    for label, runs in (("cold", cold), ("warm", warm)):
        print(f"  {label} ({len(runs)} cycles)")
        for phase in runs[0]:
            values = [r[phase] for r in runs]
            print(f"    {phase:10s} median {statistics.median(values):8.1f} ms   p99 {percentile(values, 99):8.1f} ms")
    print("  warm totals, cycle by cycle (ms): " + " ".join(f"{r['total']:.0f}" for r in warm))
    print("  warm snapshots rebuilt (pods, jobs, nodes), last cycle: " + str(getattr(
        sim.changes.builder, "rebuilt", None)))
    cold_total = statistics.median(r["total"] for r in cold)
    warm_p99 = percentile([r["total"] for r in warm], 99)
    print(f"  warm p99 / cold median = {warm_p99 / cold_total:.3f}")
    # the same in the process's CPU time (`one_cycle`'s "cpu"), which time the machine gives other processes does
    # not inflate: the wall-clock ratio above is the target's; this one says how much of it is the machine
    if "cpu" not in cold[0]:  # (a caller that counts instructions times nothing)
        return
    cold_cpu = statistics.median(r["cpu"] for r in cold)
    warm_cpu = [r["cpu"] for r in warm]
    print(f"  in CPU time: warm median {statistics.median(warm_cpu):.1f} ms, p99 {percentile(warm_cpu, 99):.1f} ms; "
          f"warm p99 / cold median = {percentile(warm_cpu, 99) / cold_cpu:.3f}")
