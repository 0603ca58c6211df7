"""Count the PodGroup requests the status writer sends for the statuses of `bench_cycle.py --warm`'s cycles.

    .venv/bin/python bench/count_podgroup_writes.py [--size 5000x50000] [--cycles 10]

The cluster is built and filled as `bench_cycle.py --warm` builds it; then each of `--cycles` warm cycles follows a
churn of 1% of the pods (`warm_cycles.churn`), and its `CycleResult.podgroups` are weighed against the simulator's
PodGroups as the status writer weighs them (`cache/status_writer.py` `_write_podgroup`): a status write when
`status_body` differs from the stored status, the reasons annotation when `reasons_annotation` asks for a change.
Prints, per cycle and in all, the status writes, those whose reasons change with them, the annotations written
alone, and the requests: two for a status with its reasons when each is a patch of its own (before 49fe41d, and
through `/status` still), one when they go in one patch through the object. A count: the same whatever the load.
"""

from __future__ import annotations

import argparse
import gc
import random

from bench_cycle import build, one_cycle
from warm_cycles import churn, fill

from scheduler.adapter.podgroup_status import status_body
from scheduler.adapter.snapshot import AdapterRules
from scheduler.api.snapshot import CycleResult, reasons_annotation
from scheduler.cycle import builtin_default_conf
from scheduler.framework.memo import CycleMemo
from scheduler.sim.cluster import InMemoryCluster


def weigh(sim: InMemoryCluster, result: CycleResult) -> tuple[int, int, int]:
    """(status writes, of which with their reasons changing, reasons annotations alone) for the cycle's result."""
    writes = with_reasons = alone = 0
    for status in result.podgroups:
        group = sim.podgroups.get(status.job)
        if group is None:
            continue
        stored = group.manifest.get("status")
        current = stored if isinstance(stored, dict) else {}
        changed = any(current.get(k) != v for k, v in status_body(status, current, sim.now).items())
        reasons = reasons_annotation(status, (group.manifest.get("metadata") or {}).get("annotations")) is not None
        writes += changed
        with_reasons += changed and reasons
        alone += reasons and not changed
    return writes, with_reasons, alone


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="5000x50000")
    parser.add_argument("--cycles", type=int, default=10)
    args = parser.parse_args()
    nodes, pods = (int(x) for x in args.size.split("x"))
    conf = builtin_default_conf()
    sim = build(nodes, pods, gpu_share=0.6)
    gc.collect()
    gc.freeze()
    memo = CycleMemo()
    fill(sim, conf, memo, one_cycle)
    sim.changes.start(AdapterRules(sim.scheduler_names, sim.default_queue))
    one_cycle(sim, conf, memo)
    rng, serial = random.Random(11), [0]
    totals = [0, 0, 0]
    for cycle in range(args.cycles):
        churn(sim, rng, max(2, round(pods * 0.01)), serial, 0.6)
        kept: list[CycleResult] = []
        one_cycle(sim, conf, memo, kept)
        counts = weigh(sim, kept[0])
        totals = [a + b for a, b in zip(totals, counts, strict=True)]
        writes, with_reasons, alone = counts
        print(f"cycle {cycle}: status writes {writes} ({with_reasons} with their reasons), reasons alone {alone}: "
              f"requests {writes + with_reasons + alone} apart, {writes + alone} together")
        sim.apply(kept[0])
        sim.start_bound_pods()
    writes, with_reasons, alone = totals
    print(f"all {args.cycles} cycles: status writes {writes} ({with_reasons} with their reasons), reasons alone "
          f"{alone}: requests {writes + with_reasons + alone} apart, {writes + alone} together")


if __name__ == "__main__":
    main()
