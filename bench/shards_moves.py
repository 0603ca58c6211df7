"""`bench_shards.py --move-nodes FRACTION`: the harness's side of moving nodes between shards while binds are in
flight (the server's side: bench/shardsim/moves.py). The move is made once, --move-at wall seconds after the gangs
arrive; the phase then also waits (at most `WAIT_S` after the move) until every moved node is in its new shard's
`nodesInUse`. The report compares the slowest handoff with the row's target, 2 cycles + one watch delay, a cycle being
the longer of the schedule period and the slowest replica's cycle p95 (docs/scale-out.md)."""

from __future__ import annotations

import argparse
import json
import urllib.request
from typing import Any

WAIT_S = 30.0  # after the move: how long the phase waits for the handoffs once every pod is bound


def _call(url: str, body: Any | None = None) -> Any:
    req = urllib.request.Request(url, data=None if body is None else json.dumps(body).encode(),
                                 method="GET" if body is None else "POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.loads(resp.read())


class Mover:
    def __init__(self, base: str, fraction: float, at: float) -> None:
        self.base, self.fraction, self.at = base, fraction, at
        self.moved_at: float | None = None
        self.moved = 0

    def step(self, arrived: float, now: float) -> None:
        if self.moved_at is None and now - arrived >= self.at:
            self.moved = int(_call(f"{self.base}/sim/move", {"fraction": self.fraction})["moved"])
            self.moved_at = now
            print(f"  {self.moved:,} nodes moved between shards {now - arrived:.1f}s after the arrival", flush=True)

    def done(self, now: float) -> bool:
        """Moved, and every moved node handed off (or `WAIT_S` passed since)."""
        if self.moved_at is None:
            return False
        if now - self.moved_at > WAIT_S:
            return True
        moves = _call(f"{self.base}/sim/handoffs").get("moves") or [{}]
        return bool(moves[-1].get("moved")) and not moves[-1].get("not_handed_off")

    def report(self, per_replica: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any] | None:
        if self.moved_at is None:
            return None
        doc = _call(f"{self.base}/sim/handoffs")
        move = (doc.get("moves") or [{}])[-1]
        period = args.schedule_period if args.schedule_period is not None else 1.0
        cycle = max([period, *(r["cycle_p95_ms"] / 1000 for r in per_replica if r.get("cycle_p95_ms"))])
        bound = 2 * cycle + args.watch_delay
        slowest = move.get("max_s")
        met = (slowest is not None and slowest <= bound and not move.get("not_handed_off")
               and not doc.get("overlaps") and not doc.get("over_commits"))
        summary = (f"{move.get('handed_off', 0):,} of {move.get('moved', 0):,} handed off, p50 {move.get('p50_s')} s, "
                   f"p95 {move.get('p95_s')} s, max {slowest} s against 2 cycles + watch delay = {bound:.2f} s "
                   f"(cycle {cycle:.2f} s): {'met' if met else 'NOT met'}; {doc.get('overlaps', 0)} NodeShard writes "
                   f"with a node in two shards' nodesInUse, {doc.get('over_commits', 0)} over-commits")
        return {**move, "cycle_s": round(cycle, 3), "bound_s": round(bound, 3), "met": met,
                "overlaps": doc.get("overlaps", 0), "overlap_examples": doc.get("overlap_examples", []),
                "over_commits": doc.get("over_commits", 0), "summary": summary}
