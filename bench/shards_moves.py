"""`bench_shards.py --move-nodes FRACTION`: the harness's side of moving nodes between shards while binds are in
flight (the server's side: bench/shardsim/moves.py). The move is made once, --move-at wall seconds after the gangs
arrive; the phase then also waits (at most `WAIT_S` after the move) until every moved node is in its new shard's
`nodesInUse`. The target, 2 cycles + one watch delay, is read in cycles: each replica's cycle counter is read at
the move and again when the last handoff is seen (polled every 0.2 s, so a cycle ending just after it may be
counted: never fewer than ran); the target is met when every node was handed off and no replica ended more than 2
cycles in that window (the cycle running at the move, in which the losing shard may still use the node, and the one
after it; the watch delay is the bench's --watch-delay, none by default) (docs/scale-out.md)."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

WAIT_S = 30.0  # after the move: how long the phase waits for the handoffs once every pod is bound
CYCLES = "volcano_e2e_scheduling_latency_milliseconds_count"


def _call(url: str, body: Any | None = None) -> Any:
    req = urllib.request.Request(url, data=None if body is None else json.dumps(body).encode(),
                                 method="GET" if body is None else "POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.loads(resp.read())


def cycles(metrics_port: int) -> float | None:
    """A replica's cycles ended so far (its e2e latency histogram's count); None if it does not answer."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=30) as resp:
            text = resp.read().decode()
    except OSError:
        return None
    return next((float(line.rpartition(" ")[2]) for line in text.splitlines() if line.startswith(CYCLES)), None)


class Mover:
    def __init__(self, base: str, fraction: float, at: float, metrics_ports: list[int]) -> None:
        self.base, self.fraction, self.at, self.ports = base, fraction, at, metrics_ports
        self.moved_at: float | None = None
        self.ended_at: float | None = None  # when every moved node was seen handed off (or WAIT_S passed)
        self.moved = 0
        self.cycles_at_move: list[float | None] = []
        self.cycles_at_end: list[float | None] = []

    def step(self, arrived: float, now: float) -> None:
        if self.moved_at is None and now - arrived >= self.at:
            self.cycles_at_move = [cycles(p) for p in self.ports]
            self.moved = int(_call(f"{self.base}/sim/move", {"fraction": self.fraction})["moved"])
            self.moved_at = now
            print(f"  {self.moved:,} nodes moved between shards {now - arrived:.1f}s after the arrival", flush=True)

    def done(self, now: float) -> bool:
        """Moved, and every moved node handed off (or `WAIT_S` passed since)."""
        if self.moved_at is None:
            return False
        if self.ended_at is not None:
            return True
        moves = _call(f"{self.base}/sim/handoffs").get("moves") or [{}]
        if now - self.moved_at > WAIT_S or (moves[-1].get("moved") and not moves[-1].get("not_handed_off")):
            self.ended_at = now
            self.cycles_at_end = [cycles(p) for p in self.ports]
        return self.ended_at is not None

    def report(self) -> dict[str, Any] | None:
        if self.moved_at is None:
            return None
        doc = _call(f"{self.base}/sim/handoffs")
        move = (doc.get("moves") or [{}])[-1]
        ended = [None if x is None or y is None else int(y - x)
                 for x, y in zip(self.cycles_at_move, self.cycles_at_end, strict=False)]
        most = None if not ended or None in ended else max(e for e in ended if e is not None)
        met = (most is not None and most <= 2 and bool(move.get("moved")) and not move.get("not_handed_off")
               and not doc.get("overlaps") and not doc.get("over_commits"))
        window = None if self.ended_at is None or self.moved_at is None else round(self.ended_at - self.moved_at, 2)
        summary = (f"{move.get('handed_off', 0):,} of {move.get('moved', 0):,} handed off, p50 {move.get('p50_s')} s, "
                   f"p95 {move.get('p95_s')} s, max {move.get('max_s')} s; cycles each replica ended from the move to "
                   f"the last handoff ({window} s): {ended} (target 2 cycles + watch delay: at most 2 each): "
                   f"{'met' if met else 'NOT met'}; {doc.get('overlaps', 0)} NodeShard writes with a node in two "
                   f"shards' nodesInUse, {doc.get('over_commits', 0)} over-commits")
        return {**move, "cycles_ended_in_window": ended, "window_s": window, "met": met,
                "overlaps": doc.get("overlaps", 0), "overlap_examples": doc.get("overlap_examples", []),
                "over_commits": doc.get("over_commits", 0), "summary": summary}
