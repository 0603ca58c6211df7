"""Virtual time: what each request costs the simulated apiserver, and each replica's virtual clock.

The server is C simulated cores (`cores`). Each request is charged its cost from the calibration file
(bench/shardsim/calibration.json, milliseconds of apiserver+etcd CPU, from a named `make bench-peers` run), to the
replica that sent it (its bearer token). A replica's virtual clock is its own process CPU (utime + stime, all its
threads, from /proc/<pid>/stat) plus the server time its requests cost, spread over the C cores: a replica never
waits on a CPU it does not have (on this 2-core machine, N replicas share 2 cores in wall-clock time; in virtual
time each has its own). The run's virtual length is the later of the last replica's clock at its last accepted
bind and the server's total charge over C (the server cannot do more than C cores of work): see
docs/scale-out.md, "Simulated apiserver".
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TICK = os.sysconf("SC_CLK_TCK")


def process_cpu(pid: int) -> float:
    """utime + stime of the process and its threads, seconds (0 when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICK


@dataclass
class Replica:
    pid: int = 0
    charged_ms: float = 0.0
    requests: dict[str, int] = field(default_factory=dict)
    binds: int = 0
    first_bind: dict[str, float] | None = None
    last_bind: dict[str, float] | None = None
    arrival: dict[str, float] | None = None  # its clock when the pending gangs arrived (with --gangs-later)
    watch_lag: dict[str, float] = field(default_factory=dict)  # resource -> the longest write-to-sent, seconds


class Accounting:
    def __init__(self, costs_ms: dict[str, float], cores: int, cpu_of: Callable[[int], float] = process_cpu,
                 wall: Callable[[], float] = time.monotonic):
        self.costs = costs_ms
        self.cores = max(1, cores)
        self.cpu_of, self.wall = cpu_of, wall
        self.replicas: dict[str, Replica] = {}
        self.total_ms = 0.0
        self.started = wall()
        self.arrived: float | None = None  # the server's total charge (ms) when the pending gangs arrived

    def register(self, token: str, pid: int) -> None:
        """A replica's process; the first registration starts the wall clock (the replicas start then)."""
        if not any(r.pid for r in self.replicas.values()):
            self.started = self.wall()
        self.replicas.setdefault(token, Replica()).pid = pid

    def cost(self, key: str, items: int) -> float:
        """The charge of one request: its kind's cost, and per object for a list page or per watch event."""
        c = self.costs
        if key == "list":
            return c["list_page"] + items * c["list_item"]
        if key == "watch_event":
            return items * c["watch_event"]
        return c.get(key, c["write"])  # a kind of write the file does not name: a plain write

    def charge(self, who: str, key: str, items: int, status: int) -> None:
        ms = self.cost(key, items)
        self.total_ms += ms
        if not who:
            return  # the harness's own requests (no token): charged to the server's total only
        rep = self.replicas.get(who)
        if rep is None:
            rep = self.replicas[who] = Replica()
        rep.charged_ms += ms
        label = f"{key} {status}"
        rep.requests[label] = rep.requests.get(label, 0) + (items if key == "watch_event" else 1)

    def lagged(self, who: str, resource: str, seconds: float) -> None:
        """A watch chunk to `who` held events written `seconds` before it was sent (its socket drained): the
        longest per resource, a lower bound on how far behind the replica read its watch."""
        if not who:
            return  # the harness's own watches
        rep = self.replicas.setdefault(who, Replica())
        rep.watch_lag[resource] = max(rep.watch_lag.get(resource, 0.0), seconds)

    def clock(self, rep: Replica) -> float:
        """The replica's virtual clock now, seconds."""
        return self.cpu_of(rep.pid) + rep.charged_ms / 1000.0 / self.cores

    def arrive(self) -> None:
        """The pending gangs arrive now: each replica's clock and the server's charge, to measure from."""
        self.arrived = self.total_ms
        for rep in self.replicas.values():
            rep.arrival = {"virtual_s": self.clock(rep), "server_total_s": self.total_ms / 1000.0}

    def bound(self, who: str, pod: str) -> None:
        rep = self.replicas.setdefault(who, Replica())
        rep.binds += 1
        mark = {"virtual_s": self.clock(rep), "cpu_s": self.cpu_of(rep.pid), "wall_s": self.wall() - self.started,
                "server_total_s": self.total_ms / 1000.0}
        if rep.first_bind is None:
            rep.first_bind = mark
        rep.last_bind = mark

    def stats(self) -> dict[str, Any]:
        reps = {token: {"pid": r.pid, "binds": r.binds, "charged_s": round(r.charged_ms / 1000, 4),
                        "requests": dict(sorted(r.requests.items(), key=lambda kv: -kv[1])),
                        "first_bind": r.first_bind, "last_bind": r.last_bind, "arrival": r.arrival,
                        "watch_lag_max_s": {k: round(v, 3) for k, v in sorted(r.watch_lag.items())},
                        "virtual_now_s": self.clock(r),
                        "cpu_now_s": self.cpu_of(r.pid)}
                for token, r in self.replicas.items()}
        binds = sum(r.binds for r in self.replicas.values())
        lasts = [r.last_bind for r in self.replicas.values() if r.last_bind]
        server_at_last = max((m["server_total_s"] for m in lasts), default=0.0)
        replica_end = max((m["virtual_s"] for m in lasts), default=0.0)
        virtual = max(replica_end, server_at_last / self.cores)
        since = None  # the virtual length from the arrival to the last bind, as `virtual` from the start
        arrived = [r for r in self.replicas.values() if r.arrival and r.last_bind]
        if self.arrived is not None and arrived:
            since = max(max(r.last_bind["virtual_s"] - r.arrival["virtual_s"] for r in arrived if r.last_bind
                            and r.arrival),
                        (server_at_last - self.arrived / 1000.0) / self.cores)
        return {"cores": self.cores, "binds": binds,
                "virtual_from_arrival_s": round(since, 4) if since else None,
                "decisions_per_virtual_s_from_arrival": round(binds / since, 1) if since else None,
                "server_charged_s": round(self.total_ms / 1000, 4),
                "server_charged_at_last_bind_s": round(server_at_last, 4), "virtual_s": round(virtual, 4),
                "bound_by": "server" if server_at_last / self.cores > replica_end else "replicas",
                "decisions_per_virtual_s": round(binds / virtual, 1) if virtual > 0 else 0.0,
                "server_load": round(server_at_last / self.cores / virtual, 3) if virtual > 0 else 0.0,
                "wall_last_bind_s": round(max((m["wall_s"] for m in lasts), default=0.0), 2),
                "replicas": reps}
