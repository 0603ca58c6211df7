"""Time one full scheduling cycle on seeded in-memory clusters (issue 9's benchmark).

    .venv/bin/python bench/bench_cycle.py [--sizes 1000x5000,5000x20000,10000x50000] [--repeat 5] [--profile]
    .venv/bin/python bench/bench_cycle.py --sizes 5000x50000 --warm 20 [--churn 0.01] [--incremental]

Nodes have 8 GPUs, 64 cpu, 512Gi; 10% are tainted; 20% of pods carry a node selector; pods come in gangs of
1 to 64 one-GPU pods. Each repeat rebuilds the snapshot (as the scheduler does every period) and times
snapshot, session open, each action, and close. Reports median and p95 and the peak memory of the process.

The garbage collector is handled as the scheduler process handles it (`scheduler/cache/runner.py`): the
cluster's objects are frozen once built (the runner freezes its synced caches), each cycle runs with the
collector paused and freezes its snapshot once built, and the collector's pass over what the session made as
the cycle ends is timed as part of the cycle ("collect", in "total"); what happens between cycles is timed on
its own line ("free": dropping the cycle's objects and collecting their reference cycles), outside the cycle.

`--warm N` times a scheduler in steady state instead (`bench/warm_cycles.py`): the cluster is filled by cycles
whose binds are applied, then each of N cycles follows a churn of `--churn` of the pods (half of them running
pods that complete and go, half new pending pods in gangs), its binds applied and its pods started; cold cycles
on the same state are timed beside it in the same run. `--incremental` builds the warm cycles' snapshots from
the previous one and the changes (`adapter/incremental.py`) rather than afresh.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import pstats
import random
import resource
import statistics
import time
from collections.abc import Callable
from typing import Any

from warm_cycles import GANG_SIZES, warm_cycles

from scheduler.actions import ACTIONS
from scheduler.api.snapshot import CycleResult
from scheduler.cycle import builtin_default_conf, collect_between_cycles, collector_paused, freeze_snapshot, load_conf
from scheduler.framework.memo import CycleMemo
from scheduler.framework.session import Session
from scheduler.plugins.registry import PLUGINS
from scheduler.sim.cluster import InMemoryCluster
from scheduler.sim.objects import node_object, pod_object


def build(nodes: int, pods: int, seed: int = 7, gpu_share: float = 1.0) -> InMemoryCluster:
    """`gpu_share`: the share of gangs whose pods ask for a GPU; the others ask for cpu and memory alone."""
    rng = random.Random(seed)
    sim = InMemoryCluster()
    sim.add_queue({"metadata": {"name": "default"}, "spec": {"weight": 1}})
    for i in range(nodes):
        taints = [{"key": "dedicated", "value": "infer", "effect": "NoSchedule"}] if rng.random() < 0.1 else []
        labels = {"topology.kubernetes.io/zone": f"zone-{i % 4}", "volcano.sh/rack": f"rack-{i // 16}"}
        sim.add_node(node_object(f"node-{i:05d}", gpu=8, labels=labels, taints=taints))
    made = gang = 0
    while made < pods:
        size = min(rng.choice(GANG_SIZES), pods - made)
        name = f"gang-{gang:05d}"
        sim.add_podgroup({"metadata": {"name": name}, "spec": {"minMember": size, "queue": "default"},
                          "status": {"phase": "Inqueue"}})
        selector = {"topology.kubernetes.io/zone": f"zone-{rng.randrange(4)}"} if rng.random() < 0.2 else None
        gpu = 1 if gpu_share >= 1.0 or rng.random() < gpu_share else 0
        for i in range(size):
            sim.add_pod(pod_object(f"{name}-{i}", group=name, gpu=gpu, cpu="4", memory="32Gi",
                                   node_selector=selector))
        made += size
        gang += 1
    return sim


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    value = fn()
    return value, (time.perf_counter() - start) * 1000


def one_cycle(sim: InMemoryCluster, conf: Any, memo: CycleMemo | None = None,
              keep: list[CycleResult] | None = None) -> tuple[dict[str, float], int]:
    """Time one cycle; with `keep`, its result is appended there (to apply it)."""
    times: dict[str, float] = {}
    cpu = time.process_time()
    with collector_paused():
        snapshot, times["snapshot"] = timed(sim.snapshot)
        freeze_snapshot()  # as the scheduler's loop does (cache/runner.py)
        ssn, times["open"] = timed(lambda: Session(snapshot, conf, PLUGINS, memo=memo))
        for name in conf.actions:
            _, times[name] = timed(lambda name=name: ACTIONS[name]().execute(ssn))
        result, times["close"] = timed(ssn.close)
        bound = sum(len(b.binds) for b in result.binds)
        if keep is not None:
            keep.append(result)
        ended = time.perf_counter()
    # the collector's pass over what the session made, as the cycle ends (`collector_paused`): part of the cycle
    times["collect"] = (time.perf_counter() - ended) * 1000
    times["total"] = sum(times.values())
    # the process's CPU time over the same span: what another process on the machine does not add to
    times["cpu"] = (time.process_time() - cpu) * 1000

    def free() -> None:
        nonlocal snapshot, ssn, result
        del snapshot, ssn, result  # the cycle's objects go (reference counting), then any cycles among them
        collect_between_cycles()

    _, times["free"] = timed(free)  # between cycles, not part of "total"
    return times, bound


def profiled_cycle(sim: InMemoryCluster, conf: Any, lines: int) -> str:
    """One more cycle under cProfile: its `lines` costliest calls, cumulative."""
    profiler = cProfile.Profile()
    profiler.enable()
    one_cycle(sim, conf)
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(lines)
    return out.getvalue()


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, -(-95 * len(ordered) // 100) - 1)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000x5000,5000x20000,10000x50000")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--conf", help="a volcano-scheduler.conf (default: the built-in default)")
    parser.add_argument("--warm", type=int, default=0, help="time this many steady-state cycles (see above)")
    parser.add_argument("--churn", type=float, default=0.01, help="share of the pods changing between them")
    parser.add_argument("--gpu-share", type=float, help="share of GPU gangs (default 1, or 0.6 with --warm: "
                        "the cluster then holds its pods, as a cluster in steady state does)")
    parser.add_argument("--incremental", action="store_true", help="warm snapshots from the changes")
    args = parser.parse_args()
    conf = load_conf(args.conf) if args.conf else builtin_default_conf()
    print(f"actions: {', '.join(conf.actions)}; plugins: "
          + " / ".join(", ".join(p.name for p in t.plugins) for t in conf.tiers))
    for size in args.sizes.split(","):
        nodes, pods = (int(x) for x in size.split("x"))
        share = args.gpu_share if args.gpu_share is not None else (0.6 if args.warm else 1.0)
        sim, build_ms = timed(lambda nodes=nodes, pods=pods, share=share: build(nodes, pods, gpu_share=share))
        gc.collect()
        gc.freeze()  # as the scheduler freezes its caches once they are synced
        if args.warm:
            warm_cycles(sim, conf, nodes, pods, args, one_cycle)
            continue
        runs: list[dict[str, float]] = []
        bound = 0
        for _ in range(args.repeat):
            times, bound = one_cycle(sim, conf)
            runs.append(times)
        print(f"\n{nodes} nodes x {pods} pending pods (built in {build_ms:.0f} ms), {bound} pods bound per cycle")
        for phase in runs[0]:
            values = [r[phase] for r in runs]
            print(f"  {phase:10s} median {statistics.median(values):8.1f} ms   p95 {p95(values):8.1f} ms")
        if args.profile:
            print(profiled_cycle(sim, conf, 18))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\npeak RSS {peak:.0f} MiB")


if __name__ == "__main__":
    main()
