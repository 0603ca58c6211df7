"""Nodes moved between shards while binds are in flight, as Volcano's sharding controller moves them, and how long
each handoff took (`bench_shards.py --move-nodes`; the row "10% of nodes moved between shards" of docs/scale-out.md).

`move_nodes` rewrites every NodeShard's `spec.nodesDesired` at once, shard by shard in name order, as a controller
that recomputed its assignment writes it (pkg/controllers/sharding/ in Volcano updates each NodeShard's spec on its
own): shard r gives the last `fraction` of its desired nodes to shard r+1 (the last to the first). So for a moment a
node may be in two shards' `nodesDesired` (the gaining shard written before the losing one): the schedulers'
two-phase `nodesInUse` is what keeps it from being used by two, and the monitor (shardsim/monitor.py) checks that at
every NodeShard write.

`handoff_report` times each moved node: from the move's write to the write that put it in its new shard's
`nodesInUse` (the gaining scheduler uses it from its next session; the loser published it gone before that, or the
monitor counts an overlap).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import orjson

from shardsim.store import Store

NODESHARDS = ("shard.volcano.sh/v1alpha1", "nodeshards")


def move_nodes(store: Store, fraction: float, clock: Callable[[], float] = time.monotonic) -> dict[str, Any]:
    """Move ceil(fraction x its desired nodes) from each shard to the next; returns {node: [from, to]} and when (by
    `clock`, the monitor's, taken before the first write)."""
    if not 0 < fraction <= 0.5:
        raise ValueError("fraction: between 0 (excluded) and 0.5")
    kind = store.kind(*NODESHARDS)
    names = sorted(kind.objects)
    if len(names) < 2:
        raise ValueError("moving nodes needs at least two NodeShards")
    docs = {name: orjson.loads(kind.objects[name].data) for name in names}
    desired = {name: list((docs[name].get("spec") or {}).get("nodesDesired") or ()) for name in names}
    given = {name: desired[name][len(desired[name]) - math.ceil(fraction * len(desired[name])):] for name in names}
    moved: dict[str, list[str]] = {}
    t = clock()
    store.writer = ""  # the harness: as Volcano's controller, no replica's token
    for i, name in enumerate(names):
        before = names[i - 1]  # gains from the shard before it (the first from the last)
        keep = [n for n in desired[name] if n not in set(given[name])]
        doc = docs[name]
        doc["spec"] = {**(doc.get("spec") or {}), "nodesDesired": keep + given[before]}
        store.update(kind, "", name, doc)
        moved.update((node, [before, name]) for node in given[before])
    return {"t": t, "moved": moved}


def handoff_report(move: dict[str, Any], handoffs: list[dict[str, Any]], overlaps: int,
                   releases: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """Each moved node's handoff time (seconds from the move to its new shard's `nodesInUse`): how many were done,
    p50/p95/max, the NodeShard writes that left a node in two shards' `nodesInUse` (`overlaps`), and per node the
    seconds from the move to its release by the shard that lost it and to its take by the one that gained it."""
    t0 = float(move["t"])
    moved = move["moved"]
    done: dict[str, float] = {}
    for h in handoffs:  # in write order: the first that put the node where it was moved to
        node, to = h["node"], h["to"]
        if node in moved and to == moved[node][1] and node not in done and h["t"] >= t0:
            done[node] = h["t"] - t0
    released: dict[str, float] = {}
    for r in releases:  # the first write of the losing shard without the node
        node = r["node"]
        if node in moved and r["from"] == moved[node][0] and node not in released and r["t"] >= t0:
            released[node] = r["t"] - t0
    times = sorted(done.values())

    def pct(q: float) -> float | None:
        return round(times[min(len(times) - 1, math.ceil(q * len(times)) - 1)], 3) if times else None

    return {"moved": len(moved), "handed_off": len(times), "not_handed_off": len(moved) - len(times),
            "p50_s": pct(0.5), "p95_s": pct(0.95), "max_s": round(times[-1], 3) if times else None,
            "overlaps": overlaps, "t": t0,
            "nodes": {node: [moved[node][0], moved[node][1], released.get(node), done.get(node)] for node in moved}}


def ended(series: list[tuple[float, float]], start: float, end: float) -> int | None:
    """Cycles a replica ended between `start` and `end`, from its cycle counter sampled at (time, count): the last
    sample at or before `start` against the first at or after `end`, so never fewer than ended (None: no sample
    on either side)."""
    before = [c for t, c in series if t <= start]
    after = [c for t, c in series if t >= end]
    if not before or not after:
        return None
    return int(after[0] - before[-1])


def cycles_per_node(report: dict[str, Any], series: dict[str, list[tuple[float, float]]]) -> dict[str, int | None]:
    """Per moved node, the cycles its handoff took: those the losing shard's replica ended from the move to its
    release, and those the gaining one ended from the release to its take (None: not handed off, or unsampled)."""
    t0 = float(report["t"])
    out: dict[str, int | None] = {}
    for node, (lost, gained, released, taken) in report["nodes"].items():
        if released is None or taken is None or lost not in series or gained not in series:
            out[node] = None
            continue
        a = ended(series[lost], t0, t0 + released)
        b = ended(series[gained], t0 + released, t0 + max(taken, released))
        out[node] = None if a is None or b is None else a + b
    return out
