"""`bench_shards.py --move-nodes FRACTION`: the harness's side of moving nodes between shards while binds are in
flight (the server's side: bench/shardsim/moves.py). The move is made once, --move-at wall seconds after the gangs
arrive; the phase then also waits (at most `WAIT_S` after the move) until every moved node is in its new shard's
`nodesInUse`. The target, 2 cycles + one watch delay, is read in cycles, per node: the cycles the losing shard's
replica ended from the move to its write without the node, plus those the gaining one ended from then to its write
with it (each replica's cycle counter sampled at the move and every turn after, about every 0.2 s, the later sample
taken at each end, so never fewer than ran). Met when every node was handed off within 2 (the losing replica's
session running at the move, which may still use the node, and the gaining one's next), with no node in two shards'
`nodesInUse` at any write and no over-commit; the watch delay is the bench's --watch-delay, none by default
(docs/scale-out.md)."""

from __future__ import annotations

import json
import time
import urllib.request
from typing import Any

from shards_report import sample_value
from shardsim.moves import cycles_per_node

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
    return sample_value(text, CYCLES)


class Mover:
    """`shards[i]`: the NodeShard of the replica whose metrics are on `metrics_ports[i]`."""

    def __init__(self, base: str, fraction: float, at: float, metrics_ports: list[int], shards: list[str]) -> None:
        self.base, self.fraction, self.at, self.ports, self.shards = base, fraction, at, metrics_ports, shards
        self.moved_at: float | None = None
        self.ended_at: float | None = None  # when every moved node was seen handed off (or WAIT_S passed)
        self.moved = 0
        self.series: dict[str, list[tuple[float, float]]] = {name: [] for name in shards}

    def _sample(self) -> None:
        for name, port in zip(self.shards, self.ports, strict=True):
            count = cycles(port)
            if count is not None:
                self.series[name].append((time.monotonic(), count))

    def step(self, arrived: float, now: float) -> None:
        if self.moved_at is None and now - arrived >= self.at:
            self._sample()
            answer = _call(f"{self.base}/sim/move", {"fraction": self.fraction})
            if "moved" not in answer:
                raise SystemExit(f"the simulated apiserver refused the move: {answer.get('error')}")
            self.moved = int(answer["moved"])
            self.moved_at = now
            print(f"  {self.moved:,} nodes moved between shards {now - arrived:.1f}s after the arrival", flush=True)

    def done(self, now: float) -> bool:
        """Moved, and every moved node handed off (or `WAIT_S` passed since); samples the cycle counters."""
        if self.moved_at is None:
            return False
        if self.ended_at is not None:
            return True
        self._sample()
        moves = _call(f"{self.base}/sim/handoffs").get("moves") or [{}]
        if now - self.moved_at > WAIT_S or (moves[-1].get("moved") and not moves[-1].get("not_handed_off")):
            self.ended_at = now
            self._sample()  # after the last handoff seen: the sample that closes its count
        return self.ended_at is not None

    def report(self) -> dict[str, Any] | None:
        if self.moved_at is None:
            return None
        doc = _call(f"{self.base}/sim/handoffs")
        move = (doc.get("moves") or [{}])[-1]
        per_node = cycles_per_node(move, self.series) if move.get("nodes") else {}
        counts = [c for c in per_node.values() if c is not None]
        histogram = {str(k): counts.count(k) for k in sorted(set(counts))}
        met = (bool(per_node) and len(counts) == len(per_node) and max(counts) <= 2
               and not move.get("not_handed_off") and not doc.get("overlaps") and not doc.get("over_commits"))
        summary = (f"{move.get('handed_off', 0):,} of {move.get('moved', 0):,} handed off, p50 {move.get('p50_s')} s, "
                   f"p95 {move.get('p95_s')} s, max {move.get('max_s')} s; cycles per handoff (the losing replica's "
                   f"to the release, the gaining one's to the take; nodes): {histogram or '-'}"
                   f"{'' if len(counts) == len(per_node) else f', {len(per_node) - len(counts)} not counted'} "
                   f"(target 2 cycles + watch delay: at most 2): {'met' if met else 'NOT met'}; "
                   f"{doc.get('overlaps', 0)} NodeShard writes with a node in two shards' nodesInUse, "
                   f"{doc.get('over_commits', 0)} over-commits")
        return {**{k: v for k, v in move.items() if k != "nodes"}, "cycles_per_handoff": histogram, "met": met,
                "overlaps": doc.get("overlaps", 0), "overlap_examples": doc.get("overlap_examples", []),
                "over_commits": doc.get("over_commits", 0), "summary": summary}
