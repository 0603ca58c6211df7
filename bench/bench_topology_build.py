"""The topology the scheduler builds from HyperNodes (solver/topology.from_hypernodes), the median CPU time of 3
builds: 1,000 tier-1 HyperNodes of 2 exactMatch nodes each over 2,000 nodes, 100 tier-2 HyperNodes of 10 each.

    .venv/bin/python bench/bench_topology_build.py
"""

from __future__ import annotations

import time

from scheduler.solver.topology import from_hypernodes


def main() -> None:
    nodes = [f"n{i}" for i in range(2000)]
    hypernodes = [{"metadata": {"name": f"r{r}"}, "spec": {"tier": 1, "members": [
        {"type": "Node", "selector": {"exactMatch": {"name": f"n{r * 2 + k}"}}} for k in range(2)]}}
        for r in range(1000)]
    hypernodes += [{"metadata": {"name": f"s{s}"}, "spec": {"tier": 2, "members": [
        {"type": "HyperNode", "selector": {"exactMatch": {"name": f"r{s * 10 + k}"}}} for k in range(10)]}}
        for s in range(100)]
    runs = []
    for _ in range(3):
        started = time.process_time()
        from_hypernodes(nodes, hypernodes)
        runs.append(time.process_time() - started)
    print(f"from_hypernodes, 1,100 HyperNodes over 2,000 nodes: median CPU {sorted(runs)[1] * 1000:.1f} ms")


if __name__ == "__main__":
    main()
