"""The chaos bench's table (bench/shards_chaos.py): over every run of a results file, how many counted, each
event's count, each violation's count, wall time and CPU."""

from __future__ import annotations

from typing import Any

from shards_chaos_plan import VIOLATIONS


def table(rows: list[dict[str, Any]]) -> str:
    runs = len(rows)
    done = [r for r in rows if "error" not in r]
    counted = [r for r in done if r.get("counted")]
    total = {v: sum(int(r.get("violations", {}).get(v, 0)) for r in rows) for v in VIOLATIONS}
    bad = sorted(r["seed"] for r in rows if any(r.get("violations", {}).values()))
    seeds = sorted(r["seed"] for r in rows)
    wall = sum(float(r.get("wall_s") or 0) for r in done)
    cpu = sum(float(r.get("cpu_s") or 0) for r in done)
    lines = [
        f"| runs | {runs:,} (seeds {seeds[0] if seeds else '-'}..{seeds[-1] if seeds else '-'}; "
        f"{runs - len(done)} the harness could not finish) |",
        "|---|---|",
        f"| runs counted (a kill, an expiry and a move, each while binds were in flight) | {len(counted):,} |",
        f"| replica SIGKILLed while it was binding | {sum(1 for r in done if r.get('kill')):,} |",
        f"| replica SIGSTOPped while binding, past its Lease | {sum(1 for r in done if r.get('stop_in_flight')):,} |",
        f"| ... and a Lease of it taken over while it slept (an expiry) | {sum(1 for r in done if r.get('expiry')):,} "
        f"({sum(int(r.get('leases_taken_while_stopped') or 0) for r in done):,} Leases) |",
        f"| shard move within a second of a bind | {sum(1 for r in done if r.get('move')):,} "
        f"({sum(int(r.get('nodes_moved') or 0) for r in done):,} nodes moved in nodesDesired, "
        f"{sum(int(r.get('handoffs') or 0) for r in done):,} handoffs of nodesInUse) |",
        f"| binds accepted; refused by the bind fence | {sum(int(r.get('binds') or 0) for r in done):,}; "
        f"{sum(int(r.get('fence_refused') or 0) for r in done):,} |",
        f"| runs whose replicas settled (no partial gang, shards held, quiet) | "
        f"{sum(1 for r in done if (r.get('end') or {}).get('settled')):,} |",
        f"| nodes in two shards' nodesInUse (at any write) | {total['nodes_in_two_shards']} |",
        f"| over-committed nodes (at any bind) | {total['over_committed_nodes']} |",
        f"| pods bound twice | {total['pods_bound_twice']} |",
        f"| partial gangs (at the end) | {total['partial_gangs']} |",
        f"| seeds with a violation | {', '.join(map(str, bad)) or 'none'} |",
        f"| wall | {wall:,.0f} s ({wall / max(1, len(done)):.1f} s a run) |",
        f"| CPU (replicas + simulated apiserver) | {cpu:,.0f} s |",
    ]
    return "\n".join(lines)
