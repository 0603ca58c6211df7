"""One cycle of a ready elastic job: N 1-cpu pods with minAvailable 2 on 4-cpu nodes, default conf, CPU time.

    .venv/bin/python bench/bench_ready_job.py [N] [NODES]      # default 3000 500

Once the gang is ready, allocate places its extras one per turn; the cost of a turn must not grow with N
(actions/allocate.py, `_ReadyOrder`: the order is taken once per action, as Volcano's allocate keeps it).
"""

from __future__ import annotations

import sys
import time

from scheduler.cycle import builtin_default_conf, run_cycle
from scheduler.testing import cluster


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
    nodes = int(sys.argv[2]) if len(sys.argv) > 2 else 500
    c = cluster()
    for i in range(nodes):
        c.node(f"n{i:05d}", cpu="4", memory="16Gi")
    c.job("big", replicas=n, min_available=2, cpu="1", memory="1Gi")
    snapshot = c.sim.snapshot()
    started = time.process_time()
    result = run_cycle(snapshot, builtin_default_conf())
    bound = sum(len(b.binds) for b in result.binds)
    print(f"{n} replicas on {nodes} nodes: {time.process_time() - started:.2f} s CPU, {bound} bound")


if __name__ == "__main__":
    main()
