"""Time one scheduling cycle whose pods carry inter-pod (anti-)affinity and topology spread terms.

    .venv/bin/python bench/bench_affinity.py [--sizes 500x2000] [--repeat 3]

Half the pods of the cluster already run (bound to nodes, as a steady state has them); the other half are
pending gangs of 1 to 8 pods. Every pod is labelled with its app; each gang keeps its pods on distinct hosts
(required podAntiAffinity on the hostname), prefers the zone its app already runs in (preferred podAffinity),
and spreads over zones (a ScheduleAnyway topologySpreadConstraint). Nodes are in 4 zones of 16-node racks.
`bench_cycle.one_cycle` times the phases (wall clock); the last line is the process CPU time of the whole
cycle, the fairer number on a shared machine. Medians over the repeats are reported.
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import time
from typing import Any

from bench_cycle import one_cycle, timed

from scheduler.cycle import builtin_default_conf, load_conf
from scheduler.sim.cluster import InMemoryCluster
from scheduler.sim.objects import node_object, pod_object

GANG_SIZES = (1, 2, 4, 8)
APPS = 40
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def affinity(app: str) -> dict[str, Any]:
    selector = {"matchLabels": {"app": app}}
    return {
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": selector, "topologyKey": HOSTNAME}]},
        "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 10, "podAffinityTerm": {"labelSelector": selector, "topologyKey": ZONE}}]},
    }


def labelled_pod(name: str, app: str, group: str, node: str | None) -> dict[str, Any]:
    pod = pod_object(name, group=group, cpu="2", memory="4Gi", affinity=affinity(app))
    pod["metadata"].setdefault("labels", {})["app"] = app
    pod["spec"]["topologySpreadConstraints"] = [
        {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway",
         "labelSelector": {"matchLabels": {"app": app}}}]
    if node is not None:
        pod["spec"]["nodeName"] = node
        pod["status"] = {"phase": "Running"}
    return pod


def build(nodes: int, pods: int, seed: int = 11) -> InMemoryCluster:
    rng = random.Random(seed)
    sim = InMemoryCluster()
    sim.add_queue({"metadata": {"name": "default"}, "spec": {"weight": 1}})
    names = [f"node-{i:05d}" for i in range(nodes)]
    for i, name in enumerate(names):
        labels = {ZONE: f"zone-{i % 4}", "volcano.sh/rack": f"rack-{i // 16}", HOSTNAME: name}
        sim.add_node(node_object(name, cpu="64", memory="256Gi", labels=labels))
    made = gang = 0
    while made < pods:
        size = min(rng.choice(GANG_SIZES), pods - made)
        group, app = f"gang-{gang:05d}", f"app-{rng.randrange(APPS)}"
        running = made < pods // 2
        sim.add_podgroup({"metadata": {"name": group}, "spec": {"minMember": size, "queue": "default"},
                          "status": {"phase": "Running" if running else "Inqueue"}})
        hosts = rng.sample(names, size)
        for i in range(size):
            sim.add_pod(labelled_pod(f"{group}-{i}", app, group, hosts[i] if running else None))
        made += size
        gang += 1
    return sim


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="500x2000")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--conf", help="a volcano-scheduler.conf (default: the built-in default)")
    args = parser.parse_args()
    conf = load_conf(args.conf) if args.conf else builtin_default_conf()
    for size in args.sizes.split(","):
        nodes, pods = (int(x) for x in size.split("x"))
        sim, build_ms = timed(lambda nodes=nodes, pods=pods: build(nodes, pods))
        gc.collect()
        gc.freeze()
        runs = []
        bound = 0
        for _ in range(args.repeat):
            cpu = time.process_time()
            times, bound = one_cycle(sim, conf)
            times["cpu"] = (time.process_time() - cpu) * 1000
            runs.append(times)
        print(f"{nodes} nodes x {pods} pods, half running (built in {build_ms:.0f} ms), {bound} pods bound per cycle")
        for phase in runs[0]:
            values = [r[phase] for r in runs]
            print(f"  {phase:10s} median {statistics.median(values):8.1f} ms   runs "
                  + " ".join(f"{v:.1f}" for v in values))


if __name__ == "__main__":
    main()
