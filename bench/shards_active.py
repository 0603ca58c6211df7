"""`make bench-shards --active`: volcano-py's own N active replicas (`--active-shards N`, docs/scale-out.md "N active
replicas") on the simulated apiserver, beside the Volcano-contract mode of bench/bench_shards.py.

Every replica runs the same scheduler name (volcano-py) with `--active-shards N` and an identity of its own
(`active-<i>`); the Leases `<lease-name>-shard-<i>` in the lease namespace decide who schedules which shard, and the
holder of shard 0 keeps the NodeShards `volcano-py-shard-<i>` (pre-made by bench/shardsim/cluster.py with the same
blocks of nodes as Volcano's mode). The one-replica phase runs the plain scheduler (one active replica, no Lease)
on the same cluster. `--kill-one AFTER_S` SIGKILLs replica 1 that long after the gangs arrive (`KillWatch`) and
times, from the kill, the survivor's takeover of its shards, their pending pods bound, and every pending pod bound.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from typing import Any

LEASE_NAME = "volcano-py-scheduler"  # the scheduler's default --leader-elect-lease-name
LEASE_NS = "volcano-py-system"  # its default --leader-elect-namespace (bench/shardsim/cluster.py creates it)


def identity(i: int) -> str:
    return f"active-{i}"


def seconds(value: float) -> str:
    return f"{value:g}s"


def replica_args(args: argparse.Namespace, i: int, replicas: int) -> list[str]:
    """The flags of active replica i of `replicas` (besides --kubeconfig and --listen-address): the plain
    scheduler for one replica, `--active-shards N` with this replica's identity and the Lease durations for N."""
    out = ["--leader-elect-identity", identity(i)]
    if args.schedule_period is not None:
        out += ["--schedule-period", seconds(args.schedule_period)]
    if replicas > 1:
        out += ["--active-shards", str(replicas), "--leader-elect-namespace", LEASE_NS,
                "--leader-elect-lease-name", LEASE_NAME,
                "--leader-elect-lease-duration", seconds(args.lease_duration),
                "--leader-elect-renew-deadline", seconds(args.renew_deadline),
                "--leader-elect-retry-period", seconds(args.retry_period)]
    return out


def shard_lease(i: int) -> str:
    return f"{LEASE_NAME}-shard-{i}"


def view(base: str) -> dict[str, Any]:
    """The harness's own view of the shards (/sim/shards, read from the store, no request charged)."""
    with urllib.request.urlopen(f"{base}/sim/shards", timeout=60) as resp:
        doc: dict[str, Any] = json.loads(resp.read())
    return doc


def settled(doc: dict[str, Any], replicas: int) -> bool:
    """Every shard's Lease held by its own replica (N shards over N replicas: one each), and every NodeShard's
    nodes in use as desired: the replicas start scheduling where they will stay."""
    holders = [doc["leases"].get(shard_lease(i), "") for i in range(replicas)]
    if any(not h for h in holders) or len(set(holders)) != replicas:
        return False
    shards = doc["nodeshards"]
    return all(s["desired"] > 0 and s["in_use"] == s["desired"] for s in shards.values()) and len(shards) >= replicas


def wait_settled(base: str, replicas: int, timeout: float) -> tuple[bool, float, dict[str, Any]]:
    """Wait (polling once a second, the harness's pace) until `settled`; whether it did, after how long, and the
    last view."""
    t0 = time.monotonic()
    doc = view(base)
    while not settled(doc, replicas) and time.monotonic() - t0 < timeout:
        time.sleep(1.0)
        doc = view(base)
    return settled(doc, replicas), time.monotonic() - t0, doc


def held_by(doc: dict[str, Any], replicas: int) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for i in range(replicas):
        out.setdefault(doc["leases"].get(shard_lease(i), ""), []).append(i)
    return out


@dataclass
class KillWatch:
    """`--kill-one AFTER_S`: SIGKILL one replica AFTER_S wall seconds after the gangs arrived, then time (wall,
    from the kill) the first new holder of each of its shards' Leases, the last of its shards' pending pods bound,
    and every pending pod bound."""

    after_s: float
    victim: int
    replicas: int
    killed_at: float | None = None
    at_s: float = 0.0  # when it was killed, wall seconds after the arrival (the harness polls once a second)
    shards: list[int] = field(default_factory=list)
    unbound_at_kill: int = 0
    bound_at_kill: int = 0
    taken: dict[int, tuple[str, float]] = field(default_factory=dict)  # shard -> (new holder, s after the kill)
    shards_bound_s: float | None = None
    all_bound_s: float | None = None
    rss_peak_mib: float = 0.0  # the victim's, read just before the kill
    cpu_s: float = 0.0

    def due(self, arrived: float, now: float) -> bool:
        return self.killed_at is None and now - arrived >= self.after_s

    def kill(self, base: str, proc: subprocess.Popen[bytes], binds: int, arrived: float) -> None:
        doc = view(base)
        self.shards = held_by(doc, self.replicas).get(identity(self.victim), [])
        self.unbound_at_kill = sum(doc["unbound_by_shard"].get(str(i), 0) for i in self.shards)
        self.bound_at_kill = binds
        proc.kill()
        self.killed_at = time.monotonic()
        self.at_s = self.killed_at - arrived
        proc.wait()
        print(f"  SIGKILL {identity(self.victim)} {self.at_s:.1f}s after the arrival ({binds:,} bound): it held "
              f"shards {self.shards}, {self.unbound_at_kill:,} of their pending pods unbound", flush=True)

    def observe(self, base: str, binds: int, pending: int) -> None:
        if self.killed_at is None:
            return
        now = time.monotonic() - self.killed_at
        doc = view(base)
        for i in self.shards:
            holder = doc["leases"].get(shard_lease(i), "")
            if i not in self.taken and holder and holder != identity(self.victim):
                self.taken[i] = (holder, now)
                print(f"  shard {i} taken by {holder} {now:.1f}s after the kill", flush=True)
        if self.shards_bound_s is None and not any(doc["unbound_by_shard"].get(str(i), 0) for i in self.shards):
            self.shards_bound_s = now
            print(f"  the killed replica's shards' pending pods all bound {now:.1f}s after the kill", flush=True)
        if self.all_bound_s is None and binds >= pending:
            self.all_bound_s = now

    def report(self, args: argparse.Namespace) -> dict[str, Any]:
        period = args.schedule_period if args.schedule_period is not None else 1.0
        target = args.lease_duration + 2 * period
        return {"after_s": self.after_s, "killed_after_s": round(self.at_s, 2), "victim": identity(self.victim),
                "shards": self.shards,
                "unbound_at_kill": self.unbound_at_kill, "bound_at_kill": self.bound_at_kill,
                "killed": self.killed_at is not None,
                "taken": {str(i): {"by": by, "s": round(s, 2)} for i, (by, s) in self.taken.items()},
                "shards_bound_s": None if self.shards_bound_s is None else round(self.shards_bound_s, 2),
                "all_bound_s": None if self.all_bound_s is None else round(self.all_bound_s, 2),
                "lease_duration_s": args.lease_duration, "renew_deadline_s": args.renew_deadline,
                "retry_period_s": args.retry_period, "schedule_period_s": period, "target_s": target,
                "met": self.shards_bound_s is not None and self.shards_bound_s <= target}


def kill_line(kill: dict[str, Any]) -> str:
    """The Markdown sentence of a phase's `--kill-one`."""
    if not kill["killed"]:
        return f"- kill: not done (the phase ended within {kill['after_s']:g}s of the arrival)"
    taken = ", ".join(f"shard {i} by {t['by']} at {t['s']:.1f}s" for i, t in kill["taken"].items()) or "never"
    bound = "never" if kill["shards_bound_s"] is None else f"{kill['shards_bound_s']:.1f}s"
    every = "never" if kill["all_bound_s"] is None else f"{kill['all_bound_s']:.1f}s"
    return (f"- kill: SIGKILL {kill['victim']} {kill.get('killed_after_s', kill['after_s']):.1f}s (wall) after the "
            "gangs arrived, "
            f"{kill['bound_at_kill']:,} pods bound then; it held shards {kill['shards']} with "
            f"{kill['unbound_at_kill']:,} pending pods unbound."
            f" After the kill (wall): taken over: {taken}; its shards' pending pods all bound at {bound}; every "
            f"pending pod bound at {every}. Lease duration {kill['lease_duration_s']:g}s (renew deadline "
            f"{kill['renew_deadline_s']:g}s, retry {kill['retry_period_s']:g}s), schedule period "
            f"{kill['schedule_period_s']:g}s: target lease duration + 2 periods = {kill['target_s']:g}s, "
            f"{'met' if kill['met'] else 'NOT met'}")
