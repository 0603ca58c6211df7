"""`make bench-shards`: N scheduler replicas, each the real `volcano-py scheduler` in its own process, against the
simulated apiserver (bench/shardsim/), measured in virtual time (docs/scale-out.md, "Simulated apiserver").

Each phase starts the simulated apiserver with a generated cluster (bench/shardsim/cluster.py), then R replicas
under Volcano's sharding contract: replica i is `--scheduler-name shard-i --scheduler-sharding-mode hard
--scheduler-sharding-name shard-i`, the NodeShard shard-i holding the i-th of R blocks of nodes, the pending
gangs split between the schedulerNames. It waits until every pending pod is bound, or no bind came for --idle
seconds, or --timeout, or the machine runs short of memory; then reads each replica's metrics (cycle p95), RSS and
CPU, stops them, and counts from the store the over-committed nodes, pods bound twice and partial gangs.
Phases: first ONE replica (--nodes1 etc.), then --replicas.

With --active, volcano-py's own N active replicas instead (bench/shards_active.py): every replica is the scheduler
`volcano-py` with `--active-shards N` and its own --leader-elect-identity, the shards decided by Leases; both phases
then run the SAME cluster (--nodes, --running, --pending; the one-replica phase is the plain scheduler), so the
aggregate rate of N replicas is compared with one replica's on equal work. --kill-one AFTER_S SIGKILLs replica 1
that long after the gangs arrive and times the survivors' takeover.

    make bench-shards
    make bench-shards BENCH_SHARDS_ARGS='--nodes 50000 --running 500000 --pending 20000 --replicas 4 --skip-one'
    make bench-shards BENCH_SHARDS_ARGS='--active --nodes 8000 --running 80000 --pending 20000 --kill-one 3'
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from shards_active import KillWatch, identity, replica_args, view, wait_settled
from shards_moves import Mover
from shards_report import binding_cycles, markdown, p95_from_histogram, sample_value
from shardsim.accounting import process_cpu

REPO = Path(__file__).resolve().parent.parent
PY = sys.executable
SCHEDULER = [PY, "-m", "scheduler.cli", "scheduler"]  # this checkout's scheduler (cwd and PYTHONPATH: REPO)
CYCLE_METRIC = "volcano_e2e_scheduling_latency_milliseconds"
CYCLE_CPU_METRIC = "volcano_py_cycle_cpu_milliseconds"  # the process's CPU over a cycle: its virtual length


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss_mib(pid: int, field: str = "VmHWM") -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def mem_available_gib() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 1024 / 1024
    return 0.0


def get(url: str, timeout: float = 300.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return resp.read()


def post(url: str, body: Any) -> Any:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.loads(resp.read())


def kubeconfig(path: Path, port: int, token: str) -> None:
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "sim",
        "clusters": [{"name": "sim", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": token, "user": {"token": token}}],
        "contexts": [{"name": "sim", "context": {"cluster": "sim", "user": token}}]}))


def start_server(args: argparse.Namespace, shape: dict[str, int], replicas: int, log: Path) -> tuple[Any, int]:
    # --active: the cluster of --replicas shards in every phase (one cluster, whatever the phase's replicas)
    cmd = [PY, "-m", "shardsim.main", "--cores", str(args.cores), "--calibration", str(args.calibration),
           "--nodes", str(shape["nodes"]), "--running", str(shape["running"]), "--pending", str(shape["pending"]),
           "--replicas", str(args.replicas if args.active else replicas), "--seed", str(args.seed),
           "--watch-delay", str(args.watch_delay), *(["--gangs-later"] if args.gangs_later else []),
           *(["--active"] if args.active else []), *(["--openb", args.openb] if args.openb else []),
           *(["--monitor"] if args.move_nodes else []), *(["--bind-cap", str(args.bind_cap)] if args.bind_cap else []),
           *(["--queues", args.queues] if args.queues else [])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "bench"), str(REPO)])}
    with open(log, "wb") as err:  # the child keeps its own copy of the descriptor
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, env=env, cwd=REPO)
    line = proc.stdout.readline().decode() if proc.stdout else ""  # blocks until READY (the load) or exit
    if not line.startswith("READY "):
        raise SystemExit(f"the simulated apiserver did not start: {log.read_text()[-2000:]}")
    return proc, int(line.split()[1])


def start_replicas(args: argparse.Namespace, port: int, replicas: int,
                   workdir: Path) -> list[tuple[str, subprocess.Popen[bytes], int]]:
    """The replicas' processes: (token, process, metrics port) each."""
    procs: list[tuple[str, subprocess.Popen[bytes], int]] = []
    for i in range(replicas):
        name = identity(i) if args.active else f"shard-{i}"
        kc = workdir / f"kubeconfig-{replicas}-{i}.json"
        kubeconfig(kc, port, name)
        mport = free_port()
        mode = replica_args(args, i, replicas) if args.active else [
            "--scheduler-name", name, "--scheduler-sharding-mode", "hard", "--scheduler-sharding-name", name,
            *(["--schedule-period", f"{args.schedule_period}s"] if args.schedule_period is not None else [])]
        cmd = [*SCHEDULER, "--kubeconfig", str(kc), *mode, "--listen-address", f"127.0.0.1:{mport}",
               *(["--scheduler-conf", str(args.conf)] if args.conf else [])]
        with open(workdir / f"replica-{replicas}-{i}.log", "wb") as out:
            p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=REPO,
                                 env={**os.environ, "PYTHONPATH": str(REPO)})
        procs.append((name, p, mport))
    return procs


def arrive_when_ready(args: argparse.Namespace, base: str, procs: list[tuple[str, subprocess.Popen[bytes], int]],
                      t0: float) -> None:
    """Create the pending gangs once every replica answers /readyz (with --active and N replicas, also once the
    shards' Leases and NodeShards settled), or at --start-timeout."""
    deadline = time.monotonic() + args.start_timeout
    waiting = {mport for _, _, mport in procs}
    while waiting and time.monotonic() < deadline:
        for mport in list(waiting):
            try:
                get(f"http://127.0.0.1:{mport}/readyz", timeout=5)
                waiting.discard(mport)
            except OSError:
                pass
        time.sleep(0.5)  # polling the replicas' readiness, the harness's own pace
    ready = len(procs) - len(waiting)
    if args.active and len(procs) > 1:  # and the Leases and NodeShards settled: one shard each, nodes in use
        ok, took, doc = wait_settled(base, len(procs), max(0.0, deadline - time.monotonic()))
        print(f"  {ready} of {len(procs)} replicas ready after {time.monotonic() - t0 - took:.1f}s; shards "
              f"{'settled' if ok else 'NOT settled'} {took:.1f}s later: leases {doc['leases']}, NodeShards "
              f"{doc['nodeshards']}", flush=True)
    created = post(f"{base}/sim/arrive", {})["created"]
    print(f"  {ready} of {len(procs)} replicas ready after {time.monotonic() - t0:.1f}s; "
          f"{created:,} pending pods arrive", flush=True)


def run_phase(args: argparse.Namespace, shape: dict[str, int], replicas: int, workdir: Path) -> dict[str, Any]:
    what = f"the openb trace ({args.openb}, seed {args.seed})" if args.openb else (
        f"{shape['nodes']:,} nodes, {shape['running']:,} running, {shape['pending']:,} pending")
    print(f"phase: {replicas} replica(s), {what}", flush=True)
    t_load = time.monotonic()
    server, port = start_server(args, shape, replicas, workdir / f"server-{replicas}.log")
    base = f"http://127.0.0.1:{port}"
    made = json.loads(get(f"{base}/sim/made"))
    print(f"  server up in {time.monotonic() - t_load:.1f}s: {made}", flush=True)
    t0 = time.monotonic()
    cpu0 = process_cpu(server.pid)
    procs = start_replicas(args, port, replicas, workdir)
    post(f"{base}/sim/replicas", {name: p.pid for name, p, _ in procs})
    if args.gangs_later:  # every replica synced (its /readyz), then the gangs arrive
        arrive_when_ready(args, base, procs, t0)
    arrived = time.monotonic()
    kill = KillWatch(args.kill_one, 1, replicas) if args.kill_one is not None and replicas > 1 else None
    last_binds, last_change = -1, time.monotonic()
    stopped = "all pending pods bound"
    mover = Mover(base, args.move_nodes, args.move_at, [m for _, _, m in procs], [n for n, _, _ in procs]) \
        if args.move_nodes and replicas > 1 else None
    peak_mem_used = 0.0
    churner = Churner(base, args.churn, args.churn_period) if args.churn else None
    turner = Turner(base, args.turnover, args.turnover_period, args.turnover_after) if args.turnover else None
    # the binds that end a phase: with turnover none (the cluster stays full; the phase lasts --turnover-for)
    # and the binds below which a phase waits for more (none with turnover: the cluster is full by design)
    all_pods, ends_at, waits_below = (math.inf, arrived + args.turnover_for, 0) if turner else (
        made["pending"], math.inf, made["pending"])
    all_bound_at: float | None = None
    while True:
        stats = json.loads(get(f"{base}/sim/stats"))
        now = time.monotonic()
        peak_mem_used = max(peak_mem_used, sum(rss_mib(p.pid, "VmRSS") for _, p, _ in procs) + rss_mib(
            server.pid, "VmRSS"))
        if stats["binds"] != last_binds:
            last_binds, last_change = stats["binds"], now
        if kill is not None:
            if kill.due(arrived, now) and stats["binds"] < made["pending"]:
                victim = procs[kill.victim][1]
                kill.rss_peak_mib, kill.cpu_s = rss_mib(victim.pid), process_cpu(victim.pid)
                kill.kill(base, victim, stats["binds"], arrived)
            kill.observe(base, stats["binds"], made["pending"])
        if mover is not None:
            mover.step(arrived, now)
        moved = mover is None or mover.done(now)  # asked every turn: it notes when the last handoff came
        if stats["binds"] >= all_pods and moved:
            all_bound_at = now if all_bound_at is None else all_bound_at
            if churner is None or now - all_bound_at >= args.churn_for:
                break
        waited = "--turnover-for seconds of turnover" if now >= ends_at else waited_out(
            args, now - t0, now - last_change, last_binds, stats["binds"] < waits_below)
        if waited is not None:
            stopped = waited
            print(f"  stopped waiting ({stopped}): {stats['binds']:,}/{made['pending']:,} bound", flush=True)
            break
        if any(p.poll() is not None for i, (_, p, _) in enumerate(procs) if kill is None or i != kill.victim):
            stopped = "a replica exited early"
            print(f"  {stopped}", flush=True)
            break
        if mem_available_gib() < args.min_free_gib:  # the machine is shared: stop before anyone is OOM-killed
            stopped = f"memory: under {args.min_free_gib} GiB available"
            print(f"  stopped: {stopped}", flush=True)
            break
        # polling the store's counts once a second (5 times after a kill, to time the takeover): the harness's own
        # pace, not a sync
        time.sleep(0.2 if (kill is not None and kill.killed_at is not None) or mover is not None else 1.0)
    wall = time.monotonic() - t0
    churned = churner.stop() if churner is not None else None
    turned = turner.stop() if turner is not None else None
    per = []
    for name, p, mport in procs:
        try:
            text = get(f"http://127.0.0.1:{mport}/metrics", timeout=30).decode()
        except OSError:
            text = ""
        rep = stats["replicas"].get(name, {})
        cycles = sample_value(text, f"{CYCLE_METRIC}_count") or 0.0
        last = rep.get("last_bind") or {}
        per.append({"name": name, "pid": p.pid, "binds": rep.get("binds", 0),
                    "virtual_last_bind_s": last.get("virtual_s", 0.0),
                    "decisions_per_virtual_s": rep.get("binds", 0) / last["virtual_s"] if last.get("virtual_s") else 0,
                    "cpu_s": process_cpu(p.pid), "cpu_at_last_bind_s": last.get("cpu_s", 0.0),
                    "server_charged_s": rep.get("charged_s", 0.0), "requests": rep.get("requests", {}),
                    "cycle_p95_ms": p95_from_histogram(text, CYCLE_METRIC), "cycles": int(cycles),
                    "cycle_cpu_p95_ms": p95_from_histogram(text, CYCLE_CPU_METRIC),
                    "rss_peak_mib": rss_mib(p.pid), "rss_now_mib": rss_mib(p.pid, "VmRSS"),
                    "watch_lag_max_s": rep.get("watch_lag_max_s") or {}})
        if kill is not None and kill.killed_at is not None and p is procs[kill.victim][1]:  # as it was at the kill
            per[-1].update(cpu_s=kill.cpu_s, rss_peak_mib=kill.rss_peak_mib, killed=True)
    server_cpu = process_cpu(server.pid) - cpu0
    shards = view(base) if args.active else None  # who holds what, before the replicas release their Leases
    for _, p, _ in procs:
        p.send_signal(signal.SIGTERM)
    for _, p, _ in procs:
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    for i, r in enumerate(per):  # every replica has ended: its log is whole
        r.update(binding_cycles((workdir / f"replica-{replicas}-{i}.log").read_text(errors="replace")))
    check = json.loads(get(f"{base}/sim/check"))
    stats = json.loads(get(f"{base}/sim/stats"))
    moves = mover.report() if mover is not None else None
    gpus = json.loads(get(f"{base}/sim/gpus")) if args.openb else None
    server_rss = rss_mib(server.pid)
    server.terminate()
    server.wait(timeout=60)
    phase = {"replicas": replicas, "shape": shape, "made": made, "stats": stats, "check": check,
             "wall": {"to_last_bind_s": stats["wall_last_bind_s"], "phase_s": round(wall, 1)},
             "cpu": {"replicas_s": round(sum(r["cpu_s"] for r in per), 2), "server_s": round(server_cpu, 2)},
             "per_replica": per, "stopped": stopped, "peak_rss_sum_mib": round(peak_mem_used),
             "server": {"load_s": round(t0 - t_load, 1), "rss_peak_mib": server_rss},
             "mode": "active" if args.active else "volcano", **({"shards_at_end": shards} if shards else {}),
             **({"kill": kill.report(args)} if kill is not None else {}), **({"gpus": gpus} if gpus else {}),
             **({"moves": moves} if moves else {}), **({"churn": churned} if churned else {}),
             **({"turnover": turned} if turned else {}),
             **({"bind_cap": capped(stats, args.bind_cap)} if args.bind_cap else {})}
    _print_phase(phase)
    return phase


def waited_out(args: argparse.Namespace, since_start: float, since_bind: float, last_binds: int,
               unbound: bool) -> str | None:
    """Why a phase stops waiting, or None: no bind for --idle seconds while pods are unbound (--start-timeout
    before the first bind: the first lists take long at scale), or --timeout."""
    idle_out = since_bind > (args.idle if last_binds > 0 else args.start_timeout)
    if not (idle_out and unbound) and since_start <= args.timeout:
        return None
    if last_binds <= 0 and idle_out:
        return "no bind within --start-timeout seconds"
    return "--timeout" if since_start > args.timeout else "no bind for --idle seconds"


class Churner:
    """`--churn`: a thread asking the simulated apiserver to replace a share of another scheduler's running pods
    every period (shardsim/churn.py), from the arrival until `stop`; how many it replaced, and how late it ran
    (a step the server took longer than the period to answer delays the next: the churn asked is not the churn
    made, and the report says so)."""

    def __init__(self, base: str, fraction: float, period: float) -> None:
        self.base, self.fraction, self.period = base, fraction, period
        self.steps, self.replaced, self.late = 0, 0, 0
        self.started = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="churn", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        due = time.monotonic()
        while not self._stop.is_set():
            answer = post(f"{self.base}/sim/churn", {"fraction": self.fraction})
            self.steps += 1
            self.replaced += int(answer.get("replaced") or 0)
            due += self.period
            wait = due - time.monotonic()
            if wait < 0:
                self.late += 1
                due = time.monotonic()
            self._stop.wait(max(0.0, wait))  # the churn's own pace, not a sync

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        self._thread.join(60)
        seconds = time.monotonic() - self.started
        return {"fraction": self.fraction, "period_s": self.period, "steps": self.steps, "replaced": self.replaced,
                "seconds": round(seconds, 1), "replaced_per_s": round(self.replaced / seconds, 1) if seconds else 0,
                "late_steps": self.late}


class Turner:
    """`--turnover`: a thread asking the simulated apiserver every period to end a share of the gangs bound whole
    and put new ones in their place (shardsim/turnover.py), from the arrival until `stop`; each step's answer holds
    each queue's allocation just before it, one window of the queue comparison."""

    def __init__(self, base: str, fraction: float, period: float, after: float) -> None:
        self.base, self.fraction, self.period, self.after = base, fraction, period, after
        self.windows: list[dict[str, Any]] = []
        self.ended = 0
        self.started = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="turnover", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        if self._stop.wait(max(0.0, self.after - self.period)):  # the cluster filled first (not a sync: a pace)
            return
        while not self._stop.wait(self.period):  # the turnover's own pace, not a sync
            answer = post(f"{self.base}/sim/turnover", {"fraction": self.fraction})
            self.windows.append({"at_s": round(time.monotonic() - self.started, 1),
                                 "allocation": answer.get("allocation") or {}})
            self.ended += int(answer.get("ended") or 0)

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        self._thread.join(60)
        return {"fraction": self.fraction, "period_s": self.period, "after_s": self.after, "ended": self.ended,
                "windows": self.windows}


def capped(stats: dict[str, Any], cap: float) -> dict[str, Any]:
    """Under --bind-cap: the replicas' binds per wall second from the first bind to the last, against 95% of the cap
    (virtual time does not count a bind's wait for its turn, so the row is read in wall time)."""
    marks = [r for r in stats["replicas"].values() if r.get("first_bind") and r.get("last_bind")]
    first = min((r["first_bind"]["wall_s"] for r in marks), default=0.0)
    last = max((r["last_bind"]["wall_s"] for r in marks), default=0.0)
    rate = (stats["binds"] - 1) / (last - first) if last > first else 0.0
    return {"cap": cap, "binds_per_wall_s": round(rate, 1), "share_of_cap": round(rate / cap, 4),
            "met": rate >= 0.95 * cap, "first_bind_wall_s": first, "last_bind_wall_s": last}


def _print_phase(phase: dict[str, Any]) -> None:
    stats, check, per = phase["stats"], phase["check"], phase["per_replica"]
    moves, gpus, cap = phase.get("moves"), phase.get("gpus"), phase.get("bind_cap")
    if cap:
        print(f"  bind cap {cap['cap']:,.0f}/s: {cap['binds_per_wall_s']:,.1f} binds per wall second from the first "
              f"to the last, {100 * cap['share_of_cap']:.1f}% of the cap (target 95%: "
              f"{'met' if cap['met'] else 'NOT met'})", flush=True)
    if moves:
        print(f"  nodes moved: {moves['summary']}", flush=True)
    if gpus:
        print(f"  GPUs allocated: {gpus['allocated']:,.1f} of {gpus['gpus']:,.0f} ({100 * gpus['share']:.2f}%)",
              flush=True)
    churn = phase.get("churn")
    if churn:
        print(f"  churn: {churn['replaced']:,} of another scheduler's pods replaced in {churn['seconds']:.0f}s "
              f"({churn['replaced_per_s']:,.0f}/s; asked {100 * churn['fraction']:g}% every {churn['period_s']:g}s, "
              f"{churn['late_steps']} steps late)", flush=True)
    if stats.get("decisions_per_virtual_s_from_arrival"):
        print(f"  from the arrival: {stats['decisions_per_virtual_s_from_arrival']:,.0f} decisions/s virtual "
              f"({stats['virtual_from_arrival_s']:.2f} virtual s)", flush=True)
    print(f"  {stats['binds']:,} binds, {stats['decisions_per_virtual_s']:,.0f} decisions/s virtual "
          f"({stats['virtual_s']:.2f} virtual s, bound by {stats['bound_by']}), {stats['wall_last_bind_s']:.1f}s wall "
          f"to last bind; checks {check['over_committed_nodes']}/{check['pods_bound_twice']}/{check['partial_gangs']};"
          f" RSS {', '.join(str(round(r['rss_peak_mib'])) for r in per)} MiB", flush=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes1", type=int, default=2000, help="the one-replica phase's nodes")
    p.add_argument("--running1", type=int, default=20000)
    p.add_argument("--pending1", type=int, default=5000)
    p.add_argument("--nodes", type=int, default=8000, help="the N-replica phase's nodes")
    p.add_argument("--running", type=int, default=80000)
    p.add_argument("--pending", type=int, default=20000)
    p.add_argument("--replicas", type=int, default=4)
    p.add_argument("--skip-one", action="store_true", help="only the N-replica phase")
    p.add_argument("--one-last", action="store_true", help="the N-replica phase first, then the one-replica phase "
                   "(alternate the order between rounds: a phase may run slower right after another)")
    p.add_argument("--cores", type=int, default=8, help="the simulated apiserver's cores")
    p.add_argument("--calibration", type=Path, default=REPO / "bench/shardsim/calibration.json")
    p.add_argument("--conf", type=Path, default=None, help="--scheduler-conf (default: Volcano's default conf)")
    p.add_argument("--idle", type=float, default=60.0, help="stop a phase after this long without a bind")
    p.add_argument("--timeout", type=float, default=1800.0)
    p.add_argument("--start-timeout", type=float, default=900.0, help="stop a phase with no bind after this long")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--logs", type=Path, default=None, help="keep the replicas' and the server's logs here")
    p.add_argument("--gangs-at-start", dest="gangs_later", action="store_false",
                   help="load the pending gangs with the cluster (a restart: the start-up lists in the figures); by "
                        "default they are created once every replica is ready, and decisions/s is also measured "
                        "from their arrival")
    p.add_argument("--min-free-gib", type=float, default=3.0, help="stop a phase when the machine has less free")
    p.add_argument("--watch-delay", type=float, default=0.0, help="seconds from a write to its watch events")
    p.add_argument("--queues", default="", metavar="W1,W2,...", help="queues q0, q1, ... of these weights, the "
                   "pending gangs drawn among them; the report compares each queue's allocation with one replica's")
    p.add_argument("--turnover", type=float, default=0.0, metavar="FRACTION", help="from the arrival, end this "
                   "share of the gangs bound whole every --turnover-period and put new ones of the same queues in "
                   "their place; the queue comparison is then made window by window (with --queues)")
    p.add_argument("--turnover-period", type=float, default=10.0, help="with --turnover: seconds between steps")
    p.add_argument("--turnover-for", type=float, default=60.0, help="with --turnover: seconds the phase lasts "
                   "from the arrival")
    p.add_argument("--turnover-after", type=float, default=0.0, help="with --turnover: the first window ends this "
                   "many seconds after the arrival (time for the cluster to fill; default one period)")
    p.add_argument("--results", type=Path, default=REPO / "bench/results")
    p.add_argument("--active", action="store_true", help="volcano-py's N active replicas (--active-shards N, one "
                   "scheduler name, Leases) instead of Volcano's NodeShard contract; both phases on the cluster of "
                   "--nodes, --running, --pending (--nodes1 etc. unused)")
    p.add_argument("--openb", default=None, metavar="VARIANT", help="the openb trace (default, multigpu50, gpushare40, "
                   "gpuspec10) instead of a generated cluster: its GPU nodes, and pods drawn to 130%% of its GPUs "
                   "(--seed); both phases on it with --active; reports the GPUs allocated (shardsim/openb_load.py)")
    p.add_argument("--kill-one", type=float, default=None, metavar="AFTER_S", help="with --active: SIGKILL replica 1 "
                   "this many wall seconds after the gangs arrive, and time the survivors' takeover")
    p.add_argument("--lease-duration", type=float, default=15.0, help="with --active: --leader-elect-lease-duration")
    p.add_argument("--renew-deadline", type=float, default=10.0, help="with --active: --leader-elect-renew-deadline")
    p.add_argument("--retry-period", type=float, default=2.0, help="with --active: --leader-elect-retry-period")
    p.add_argument("--schedule-period", type=float, default=None, help="the replicas' --schedule-period, seconds "
                   "(default: the scheduler's, 1s)")
    p.add_argument("--move-nodes", type=float, default=None, metavar="FRACTION", help="without --active: move this "
                   "share of each shard's nodes to the next shard (as Volcano's sharding controller would) --move-at "
                   "seconds after the gangs arrive, and time each node's handoff (shardsim/moves.py)")
    p.add_argument("--bind-cap", type=float, default=0.0, metavar="BINDS_PER_S", help="the simulated apiserver takes "
                   "at most this many binds per wall second (a bind beyond waits its turn, as priority and fairness "
                   "queues it); the phase reports the replicas' binds per wall second against 95%% of it")
    p.add_argument("--move-at", type=float, default=2.0, help="with --move-nodes: wall seconds after the arrival")
    p.add_argument("--churn", type=float, default=0.0, metavar="FRACTION", help="from the arrival, replace this "
                   "share of another scheduler's running pods every --churn-period (shardsim/churn.py)")
    p.add_argument("--churn-period", type=float, default=1.0, help="with --churn: seconds between steps")
    p.add_argument("--churn-for", type=float, default=30.0, help="with --churn: seconds the phase goes on after its "
                   "last bind, the churn with it (the replicas' steady cycles)")
    a = p.parse_args(argv)
    if not 0 <= a.bind_cap < float("inf"):  # NaN fails too
        p.error("--bind-cap: binds per second, 0 (no cap) or more")
    if a.move_nodes is not None and (a.active or not 0 < a.move_nodes <= 0.5):
        p.error("--move-nodes: a share in (0, 0.5], without --active (there the holder of shard 0 writes the plan)")
    if not 0 <= a.churn <= 1 or a.churn_period <= 0 or a.churn_for < 0:
        p.error("--churn: a share in [0, 1]; --churn-period above 0; --churn-for 0 or more")
    if not 0 <= a.turnover <= 1 or a.turnover_period <= 0 or a.turnover_for <= 0 or a.turnover_after < 0 or (
            a.turnover and a.openb):
        p.error("--turnover: a share in [0, 1], not with --openb; --turnover-period and --turnover-for above 0")
    if a.queues and not all(w.isascii() and w.isdigit() and 0 < int(w) <= 1000 for w in a.queues.split(",")):
        p.error("--queues: weights 1-1000, comma-separated (e.g. 1,2,3)")
    if a.kill_one is not None and not a.active:
        p.error("--kill-one needs --active (under Volcano's contract no replica takes another's shard over)")
    started = datetime.datetime.now(datetime.UTC)
    load_before = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    t = time.monotonic()
    phases = []
    with tempfile.TemporaryDirectory(prefix="bench-shards-") as tmp:
        workdir = a.logs or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        one = {"nodes": a.nodes, "running": a.running, "pending": a.pending} if a.active else {
            "nodes": a.nodes1, "running": a.running1, "pending": a.pending1}
        many = {"nodes": a.nodes, "running": a.running, "pending": a.pending}
        order = [(many, a.replicas)] if a.skip_one else [(one, 1), (many, a.replicas)]
        for shape, replicas in (reversed(order) if a.one_last else order):
            phases.append(run_phase(a, shape, replicas, workdir))
    calibration = json.loads(a.calibration.read_text())
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=REPO).stdout.strip()
    run = {"started": started.isoformat(timespec="seconds"), "commit": commit, "cpus": os.cpu_count(),
           "seconds": time.monotonic() - t, "load_before": load_before,
           "load_after": subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(),
           "command": " ".join(["python", "bench/bench_shards.py", *(argv if argv is not None else sys.argv[1:])]),
           "cores": a.cores, "calibration": str(a.calibration.relative_to(REPO)) if a.calibration.is_relative_to(
               REPO) else str(a.calibration), "calibration_source": calibration.get("source_run"), "phases": phases}
    text = markdown(run)
    print(text)
    a.results.mkdir(parents=True, exist_ok=True)
    stem = a.results / f"shards-{started.strftime('%Y%m%d-%H%M%S')}"  # two short runs in one minute: two files
    stem.with_suffix(".json").write_text(json.dumps(run, indent=1))
    stem.with_suffix(".md").write_text(text)
    print(f"results: {stem}.md, {stem}.json")
    failed = any(ph["check"][k] for ph in phases for k in ("over_committed_nodes", "pods_bound_twice",
                                                               "partial_gangs"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
