"""The chaos bench's seeded plan of one run and its verdicts (bench/shards_chaos.py; pure, unit-tested in
tests/cli/test_bench_shards_chaos.py).

A run, chosen by its seed: a cluster of 24-36 nodes, 3 replicas, gangs of 1-8 pods of 1, 2 or 4 CPUs arriving
every 0.08-0.25 s for `arrival_s`, and three events in a seeded order, each in its own slot of the arrival window
(so binds are in flight: the cluster is then filling and gangs keep arriving):

- `kill`: SIGKILL one replica (a replacement with a new identity starts `restart_after_s` later, as a
  Deployment's would);
- `stop`: SIGSTOP another replica for longer than its Lease (`lease + 0.8..2 s`), then SIGCONT: its Leases
  expire and are taken while it sleeps; awake, it must see it lost them and bind nothing under their fence;
- `move`: nodes move between shards: `loan`, a gang larger than its shard (whole-node pods, its shard's nodes + 2)
  so the holder of shard 0 lends it nodes, ended 3 s later so they go back; or `drain`, 3 nodes of one shard
  deleted (their gangs ended whole first) and 3 new ones added 1.5 s later, so the plan evens the shards out.

Verdicts, from what the simulated apiserver's monitor recorded (shardsim/monitor.py): an event counts only when it
happened while binds were in flight (`IN_FLIGHT_S`): the kill and the stop while their victim had a bind accepted
within the second before; the expiry only if, during the stop, another replica became the holder of a shard Lease
the victim held; the move only if a node left one shard's nodesDesired for another's within a second of an
accepted bind. A run counts when all three did.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

IN_FLIGHT_S = 1.0
VIOLATIONS = ("nodes_in_two_shards", "over_committed_nodes", "pods_bound_twice", "partial_gangs")


@dataclass(frozen=True)
class GangArrival:
    at_s: float
    name: str
    size: int
    cpu: int


@dataclass(frozen=True)
class Event:
    kind: str  # kill, stop, move
    at_s: float
    victim: int = -1  # kill, stop: the replica's index at the run's start
    stop_s: float = 0.0  # stop: how long
    move: str = ""  # move: loan or drain
    shard: int = -1  # move drain: the shard whose nodes go


@dataclass(frozen=True)
class RunPlan:
    seed: int
    nodes: int
    replicas: int
    arrival_s: float
    gangs: tuple[GangArrival, ...]
    events: tuple[Event, ...]
    restart_after_s: float = 2.0
    extra: dict[str, Any] = field(default_factory=dict)


def plan_run(seed: int, lease_s: float = 2.0, replicas: int = 3, arrival_s: float = 7.0) -> RunPlan:
    rnd = random.Random(seed)
    nodes = rnd.randint(24, 36)
    gangs = []
    t = 0.0
    while t < arrival_s:
        gangs.append(GangArrival(round(t, 3), f"g{len(gangs)}", rnd.randint(1, 8), rnd.choice((1, 2, 2, 4))))
        t += rnd.uniform(0.08, 0.25)
    order = ["kill", "stop", "move"]
    rnd.shuffle(order)
    victims = rnd.sample(range(replicas), 2)
    slot = (arrival_s - 1.5) / 3  # three slots after the first second, each event somewhere in its own
    events = []
    for i, kind in enumerate(order):
        at = round(1.0 + i * slot + rnd.uniform(0.0, slot * 0.6), 3)
        if kind == "kill":
            events.append(Event("kill", at, victim=victims[0]))
        elif kind == "stop":
            events.append(Event("stop", at, victim=victims[1], stop_s=round(lease_s + rnd.uniform(0.8, 2.0), 3)))
        else:
            events.append(Event("move", at, move=rnd.choice(("loan", "drain")), shard=rnd.randrange(replicas)))
    return RunPlan(seed, nodes, replicas, arrival_s, tuple(gangs), tuple(events))


def bound_near(binds: list[tuple[float, str]], t: float, who: str | None = None,
               before: float = IN_FLIGHT_S, after: float = 0.0) -> bool:
    """Some bind (by `who`, or anyone) accepted within [t - before, t + after]."""
    return any(t - before <= bt <= t + after and (who is None or bw == who) for bt, bw in binds)


def verdict(fired: dict[str, dict[str, Any]], report: dict[str, Any]) -> dict[str, Any]:
    """Whether each event happened while binds were in flight, whether the run counts, and its violations.
    `fired`: kind -> what the driver did (kill: t, victim; stop: t, t_cont, victim, held: the shard Leases it
    held; move: t); `report`: /sim/chaos/report."""
    mon = report["monitor"]
    binds = [(float(t), str(w)) for t, w in mon["binds"]]
    out: dict[str, Any] = {}
    kill = fired.get("kill")
    out["kill"] = bool(kill) and bound_near(binds, kill["t"], kill["victim"])
    stop = fired.get("stop")
    taken = []
    if stop and stop.get("t_cont") is not None:
        held = set(stop.get("held") or ())
        taken = [c for c in mon["lease_changes"] if c["lease"] in held and c["from"] == stop["victim"]
                 and c["to"] not in ("", stop["victim"]) and stop["t"] <= c["t"] <= stop["t_cont"]]
    out["stop_in_flight"] = bool(stop) and bound_near(binds, stop["t"], stop["victim"])
    out["expiry"] = out["stop_in_flight"] and bool(taken)
    out["leases_taken_while_stopped"] = len(taken)
    move = fired.get("move")
    moves = [m for m in mon["moves"] if move and m["t"] >= move["t"]]
    out["nodes_moved"] = len(moves)
    out["move"] = any(bound_near(binds, m["t"]) for m in moves)
    out["handoffs"] = len([h for h in mon["handoffs"] if move and h["t"] >= move["t"]])
    out["counted"] = out["kill"] and out["expiry"] and out["move"]
    out["violations"] = {
        "nodes_in_two_shards": int(mon["overlaps"]),
        "over_committed_nodes": len(set(mon["over_committed_ever"]) | set(mon["over_committed_now"])),
        "pods_bound_twice": int(report["check"]["pods_bound_twice"]),
        "partial_gangs": len(report["gangs"]["partial"]),
    }
    return out
