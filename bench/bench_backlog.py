"""One scheduling cycle on a full cluster with a backlog, in memory: the case of a busy GPU fleet, whose nodes are
all taken while queues hold more work than fits. Every node (64 cpu, 256Gi) holds 64 bound one-cpu pods in gangs
of 16; `--pending` pods wait in gangs of 1-64, already `Inqueue`, in three queues of weights 1, 2 and 3 (and the
default queue). Nothing can be placed, so allocate tries each queue's jobs against every node and records why
each fits none: the work a cycle spends on a backlog. Prints each cold cycle's times (ms), as bench_cycle.py does.

    .venv/bin/python bench/bench_backlog.py [--nodes 500] [--pending 16000] [--repeat 5] [--profile]
"""

from __future__ import annotations

import argparse
import random
import statistics

from bench_cycle import one_cycle, profiled_cycle

from scheduler.cycle import builtin_default_conf
from scheduler.sim.cluster import InMemoryCluster
from scheduler.sim.objects import node_object, pod_object

QUEUES = {"q0": 1, "q1": 2, "q2": 3}


def build(nodes: int, pending: int, seed: int = 3) -> InMemoryCluster:
    rng = random.Random(seed)
    sim = InMemoryCluster()
    for name, weight in (("default", 1), *QUEUES.items()):
        sim.add_queue({"metadata": {"name": name}, "spec": {"weight": weight}})
    for i in range(nodes):
        sim.add_node(node_object(f"n{i}", cpu="64", memory="256Gi"))
    gang = 0

    def add_gang(size: int, phase: str, node: str | None = None) -> None:
        nonlocal gang
        name = f"g{gang}"
        gang += 1
        queue = rng.choices(list(QUEUES), weights=list(QUEUES.values()))[0]
        sim.add_podgroup({"metadata": {"name": name, "namespace": "ns"}, "spec": {"minMember": size, "queue": queue},
                          "status": {"phase": phase}})
        for m in range(size):
            pod = pod_object(f"{name}-{m}", namespace="ns", group=name, cpu="1", memory="4Gi")
            if node is not None:
                pod["spec"]["nodeName"] = node
                pod["status"] = {"phase": "Running"}
            sim.add_pod(pod)

    for i in range(nodes):
        for _ in range(4):
            add_gang(16, "Running", f"n{i}")
    made = 0
    while made < pending:
        size = min(rng.randint(1, 64), pending - made)
        add_gang(size, "Inqueue")
        made += size
    return sim


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=500)
    ap.add_argument("--pending", type=int, default=16000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    sim = build(args.nodes, args.pending)
    conf = builtin_default_conf()
    runs = []
    for _ in range(args.repeat):
        times, bound = one_cycle(sim, conf)
        runs.append(times)
        print({k: round(v, 1) for k, v in times.items()}, "bound", bound, flush=True)
    for key in ("allocate", "total", "cpu"):
        print(f"{key}: median {statistics.median(r[key] for r in runs):.1f} ms")
    if args.profile:
        print(profiled_cycle(sim, conf, 30))


if __name__ == "__main__":
    main()
