"""`python -m shardsim.main`: the simulated apiserver as its own process, its cluster generated into the store
before it listens. Prints `READY <port>` on stdout once it serves. See bench/bench_shards.py."""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import sys
import time
from pathlib import Path
from typing import Any

import orjson

from shardsim import openb_load
from shardsim.accounting import Accounting
from shardsim.churn import Churn
from shardsim.cluster import LEASE_NS, Shape, check, create_gangs, load, shards_view
from shardsim.kinds import all_kinds
from shardsim.monitor import Monitor
from shardsim.moves import handoff_report, move_nodes
from shardsim.server import Request, Server, serve
from shardsim.store import Store
from shardsim.turnover import Turnover

CALIBRATION = Path(__file__).with_name("calibration.json")


def read_calibration(path: Path) -> dict[str, Any]:
    doc = json.loads(path.read_text())
    costs = doc.get("costs_ms")
    if not isinstance(costs, dict) or not all(isinstance(v, int | float) and v >= 0 for v in costs.values()):
        raise SystemExit(f"{path}: costs_ms must map request kinds to milliseconds")
    for needed in ("bind", "event", "write", "get", "list_page", "list_item", "watch", "watch_event", "error"):
        if needed not in costs:
            raise SystemExit(f"{path}: costs_ms has no {needed!r}")
    if not doc.get("source_run"):
        raise SystemExit(f"{path}: source_run (the bench-peers run it came from) is missing")
    return doc


def build(shape: Shape, calibration: dict[str, Any], cores: int, watch_delay: float = 0.0,
          gangs_later: bool = False, lease_namespace: str = LEASE_NS,
          openb: str | None = None, monitor: bool = False,
          bind_cap: float = 0.0) -> tuple[Server, dict[str, Any], float]:
    store = Store(all_kinds())
    t0 = time.monotonic()
    if openb is not None:  # the trace's nodes and pods instead of a generated cluster (shardsim/openb_load.py)
        made, plan, docs = openb_load.load(store, shape.replicas, variant=openb, seed=shape.seed,
                                           active=shape.active)
        if not gangs_later:
            openb_load.create(store, docs)
    else:
        made, plan = load(store, shape, gangs_later=gangs_later)
    acct = Accounting(calibration["costs_ms"], cores)
    # --monitor: the chaos runs' checks at every write, and nodes moved on POST /sim/move (shardsim/moves.py)
    watch = Monitor(store) if monitor else None
    moves: list[dict[str, Any]] = []

    def move(req: Request) -> dict[str, Any]:
        if watch is None:
            return {"error": "the server runs without --monitor"}
        try:  # the harness's request: a bad one gets its reason, and the server goes on
            body = orjson.loads(req.body or b"{}")
            moves.append(move_nodes(store, float(body.get("fraction", 0.1)), watch.clock))
        except (ValueError, TypeError, AttributeError) as exc:
            return {"error": f"cannot move nodes: {exc}"}
        return {"moved": len(moves[-1]["moved"])}

    def handoffs(req: Request) -> dict[str, Any]:
        if watch is None:
            return {}
        return {"moves": [handoff_report(m, watch.handoffs, watch.overlaps, watch.releases) for m in moves],
                "overlaps": watch.overlaps, "overlap_examples": watch.overlap_examples[:3],
                "over_commits": watch.over_commits}

    def arrive(req: Request) -> dict[str, Any]:
        """The pending gangs, created now (once): every replica sees them arrive through its pod watch."""
        if not gangs_later or acct.arrived is not None:
            return {"created": 0}
        acct.arrive()
        return {"created": openb_load.create(store, docs) if openb is not None else create_gangs(store, plan)}

    def replicas(req: Request) -> dict[str, Any]:
        for token, pid in orjson.loads(req.body).items():
            acct.register(str(token), int(pid))
        return {"registered": len(acct.replicas)}

    churn = Churn(store, shape.seed)

    def replace_pods(req: Request) -> dict[str, Any]:
        """The harness's churn step (`--churn`, shardsim/churn.py): a bad request gets its reason."""
        try:
            return churn.step(float(orjson.loads(req.body or b"{}").get("fraction", 0.01)))
        except (ValueError, TypeError, AttributeError) as exc:
            return {"error": f"cannot churn: {exc}"}

    turnover = Turnover(store, plan, shape.replicas, shape.active, shape.seed) if openb is None else None

    def turn_over(req: Request) -> dict[str, Any]:
        """The harness's gang turnover step (`--turnover`, shardsim/turnover.py): a bad request gets its reason."""
        if turnover is None:
            return {"error": "no turnover on the openb trace"}
        try:
            return turnover.step(float(orjson.loads(req.body or b"{}").get("fraction", 0.05)))
        except (ValueError, TypeError, AttributeError) as exc:
            return {"error": f"cannot turn gangs over: {exc}"}

    extra = {"replicas": replicas, "stats": lambda req: acct.stats(), "check": lambda req: check(store),
             "churn": replace_pods, "turnover": turn_over,
             "queues": lambda req: turnover.allocation() if turnover is not None else {},
             "made": lambda req: made, "arrive": arrive,
             "shards": lambda req: shards_view(store, plan, lease_namespace),
             "gpus": lambda req: openb_load.gpus_allocated(store), "move": move, "handoffs": handoffs}
    return Server(store, acct, extra, watch_delay, bind_cap), made, time.monotonic() - t0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--cores", type=int, default=8, help="the simulated apiserver's cores (default 8)")
    p.add_argument("--calibration", type=Path, default=CALIBRATION)
    p.add_argument("--nodes", type=int, default=2000)
    p.add_argument("--running", type=int, default=20000)
    p.add_argument("--pending", type=int, default=10000)
    p.add_argument("--replicas", type=int, default=1)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--watch-delay", type=float, default=0.0, help="seconds from a write to its watch events")
    p.add_argument("--queues", default="", metavar="W1,W2,...", help="queues q0, q1, ... of these weights, the "
                   "pending gangs drawn among them (default: every gang in `default`)")
    p.add_argument("--gangs-later", action="store_true", help="create the pending gangs on POST /sim/arrive")
    p.add_argument("--active", action="store_true", help="the cluster of --active-shards REPLICAS: pending pods for "
                   "volcano-py, gangs routed by the hash of their PodGroup, NodeShards volcano-py-shard-i")
    p.add_argument("--bind-cap", type=float, default=0.0, help="binds per wall second the server takes at most; "
                   "a bind beyond waits its turn (kube-apiserver's priority and fairness queueing; 0: no cap)")
    p.add_argument("--monitor", action="store_true", help="check no node in two shards' nodesInUse and no "
                   "over-commit at every write (shardsim/monitor.py), and move nodes between shards on POST /sim/move")
    p.add_argument("--openb", default=None, metavar="VARIANT", help="the openb trace's GPU nodes and pods drawn from "
                   "openb_pod_list_VARIANT.csv to 130%% of its GPUs (--seed), instead of a generated cluster")
    a = p.parse_args(argv)
    calibration = read_calibration(a.calibration)
    gc.disable()  # millions of long-lived objects: the cyclic collector would rescan them all
    shape = Shape(a.nodes, a.running, a.pending, a.replicas, seed=a.seed, active=a.active,
                  queues=tuple(int(w) for w in a.queues.split(",")) if a.queues else ())
    server, made, seconds = build(shape, calibration, a.cores, a.watch_delay, a.gangs_later, openb=a.openb,
                                  monitor=a.monitor, bind_cap=a.bind_cap)
    gc.freeze()
    print(f"loaded {json.dumps(made)} in {seconds:.1f}s", file=sys.stderr, flush=True)

    def ready(port: int) -> None:
        print(f"READY {port}", flush=True)

    asyncio.run(serve(server, "127.0.0.1", a.port, ready))
    return 0


if __name__ == "__main__":
    sys.exit(main())
