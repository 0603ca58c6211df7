"""The cyclic garbage collector's cost over a run of scheduling cycles on a large cache (scheduler/cycle.py
`collector_paused`): N other schedulers' pods stored, then cycles with gangs of ours arriving between them and
their binds landing, under the scheduler's collector policy and under the one before 2026-12-05 (the collector
turned back on at a cycle's end, its young generations collected after it, nothing frozen after the first lists).

    .venv/bin/python bench/bench_gc_cycles.py [--pods 200000] [--cycles 12] [--arrive 4000]

Prints, per policy, the process CPU over the cycles and the time inside the collector (gc.callbacks).
"""

from __future__ import annotations

import argparse
import gc
import json
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from scheduler.cache.cluster_cache import ClusterCache
from scheduler.cache.kube import loads
from scheduler.cycle import builtin_default_conf, collect_between_cycles, collector_paused, freeze_snapshot, run_cycle

GROUP = "scheduling.k8s.io/group-name"


def pod(j: int, nodes: int, ours: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": f"{'g' if ours else 'run'}-{j}", "namespace": "bench",
                            "uid": f"{'b' if ours else 'a'}-{j:012d}", "resourceVersion": str(1000 + j),
                            "creationTimestamp": "2026-12-05T10:00:00Z", "labels": {"app": "bench"}}
    spec: dict[str, Any] = {"schedulerName": "volcano-py" if ours else "default-scheduler", "containers": [
        {"name": "main", "image": "registry.invalid/train:latest",
         "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}
    if ours:
        meta["annotations"] = {GROUP: f"pg{j // 8}"}
        return {"metadata": meta, "spec": spec, "status": {"phase": "Pending"}}
    spec["nodeName"] = f"n{j % nodes}"
    return {"metadata": meta, "spec": spec,
            "status": {"phase": "Running", "conditions": [{"type": "PodScheduled", "status": "True"}]}}


def node(i: int) -> dict[str, Any]:
    res = {"cpu": "64", "memory": "256Gi", "pods": "110"}
    return {"metadata": {"name": f"n{i}", "uid": f"u{i}", "resourceVersion": str(i + 1),
                         "labels": {"kubernetes.io/hostname": f"n{i}"}},
            "spec": {}, "status": {"capacity": res, "allocatable": dict(res),
                                   "conditions": [{"type": "Ready", "status": "True"}]}}


@contextmanager
def before_2026_12_05() -> Iterator[None]:
    """The policy before: off during the cycle, on again at its end (the young generations collected after)."""
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def run(policy: str, pods: int, cycles: int, arrive: int) -> tuple[float, float]:
    gc.disable()
    nodes = max(1, pods // 10)
    cache = ClusterCache(None, {"volcano-py"}, "default", clock=lambda: 1.8e9)
    on = cache.watcher._on_event
    on(cache.queues, "ADDED", {"metadata": {"name": "default", "resourceVersion": "1"}, "spec": {"weight": 1},
                               "status": {"state": "Open"}})
    for i in range(nodes):
        on(cache.nodes, "ADDED", node(i))
    for start in range(0, pods, 1000):
        page = json.dumps({"items": [pod(j, nodes) for j in range(start, min(pods, start + 1000))]}).encode()
        for obj in loads(page)["items"]:
            on(cache.pods, "ADDED", obj)
    gc.freeze()  # as the scheduler does once its first lists are in
    gc.enable()
    spent, began = [0.0], [0.0]

    def timed(phase: str, _: dict[str, Any]) -> None:
        if phase == "start":
            began[0] = time.perf_counter()
        else:
            spent[0] += time.perf_counter() - began[0]

    gc.callbacks.append(timed)
    conf, made, cpu = builtin_default_conf(), 0, time.process_time()
    try:
        for _ in range(cycles):
            for j in range(made, made + arrive):
                if j % 8 == 0:
                    on(cache.podgroups, "ADDED", {
                        "metadata": {"name": f"pg{j // 8}", "namespace": "bench", "uid": f"pg{j // 8}",
                                     "resourceVersion": str(5_000_000 + j)},
                        "spec": {"minMember": 8, "queue": "default"}, "status": {"phase": "Inqueue"}})
                on(cache.pods, "ADDED", loads(json.dumps(pod(j, nodes, ours=True)).encode()))
            made += arrive
            paused: AbstractContextManager[None] = collector_paused() if policy == "now" else before_2026_12_05()
            with paused:
                snapshot = cache.snapshot()
                if policy == "now":
                    freeze_snapshot()  # as the scheduler's loop does (cache/runner.py)
                result = run_cycle(snapshot, conf)
                for gang in result.binds:  # each bind lands, as the watch would show it
                    for key, name in gang.binds:
                        obj = dict(cache.pods.objects[key])
                        obj["spec"] = {**obj["spec"], "nodeName": name}
                        rv = int(obj["metadata"]["resourceVersion"]) + 10_000_000
                        obj["metadata"] = {**obj["metadata"], "resourceVersion": str(rv)}
                        on(cache.pods, "MODIFIED", obj)
            if policy == "now":
                collect_between_cycles()
            else:
                gc.collect(1)
        return time.process_time() - cpu, spent[0]
    finally:
        gc.callbacks.remove(timed)
        gc.unfreeze()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pods", type=int, default=200_000)
    p.add_argument("--cycles", type=int, default=12)
    p.add_argument("--arrive", type=int, default=4000, help="pods of ours arriving before each cycle (gangs of 8)")
    p.add_argument("--policy", choices=("now", "before"), action="append")
    args = p.parse_args()
    for policy in args.policy or ("before", "now"):
        cpu, collector = run(policy, args.pods, args.cycles, args.arrive)
        print(f"{policy}: CPU {cpu:.2f} s over {args.cycles} cycles, in the collector {collector:.2f} s "
              f"({100 * collector / cpu:.0f}%)")


if __name__ == "__main__":
    main()
