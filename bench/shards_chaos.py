"""`make bench-shards-chaos`: many short seeded runs of volcano-py's N active replicas (`--active-shards 3`) on the
simulated apiserver, each with a replica killed, a replica stopped past its Lease (a lease expiry without death)
and nodes moved between shards while binds are in flight; the safety row of the scale-out benchmark
(docs/scale-out.md, "Chaos runs").

Each run (its plan: bench/shards_chaos_plan.py) starts its own simulated apiserver (`shardsim.chaos`: a small
cluster, the invariants checked at every write by shardsim/monitor.py) and three replicas, each the real scheduler
in its own OS process forked from a warm fork server (bench/shards_forks.py), waits until each holds one shard,
then plays the gangs' arrivals and the three events, waits until the replicas settle (no partial gang, every
shard held by a live replica, 1.5 s without a bind or a shard Lease changing hands; or `--settle-timeout`), and
reads the monitor's record:
over-committed nodes and nodes in two shards' nodesInUse at any moment, pods bound twice, partial gangs at the end.
Each run's verdict is one line of `--out` (JSON lines; a later call with the same file adds to it), and the table
covers every run in the file. A run with a violation keeps its logs and record under bench/results/.

    make bench-shards-chaos RUNS=50 SEED=1
    python bench/shards_chaos.py --runs 50 --seed 1 --budget 840 --out bench/results/shards-chaos.jsonl
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from shards_active import LEASE_NAME, identity, replica_args, settled
from shards_chaos_plan import RunPlan, plan_run, verdict
from shards_chaos_report import table
from shardsim.accounting import process_cpu

REPO = Path(__file__).resolve().parent.parent
PY = sys.executable
TICK_S = 0.05  # the driver's pace: gangs, events and polls
MIN_SETTLE_S = 2.5  # watched at least this long after the last event (the stopped replica's first cycles awake)
QUIET_S = 1.5  # the end: this long without a bind or a shard Lease changing hands


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Forks:
    """The fork server (bench/shards_forks.py) and what it forked."""

    def __init__(self) -> None:
        self.lock = threading.Lock()  # one order at a time (runs in parallel share the server)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "bench")])}
        self.proc = subprocess.Popen([PY, str(REPO / "bench/shards_forks.py")], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, cwd=REPO, env=env, text=True)
        self._ask(None)  # {"ready": pid}

    def _ask(self, order: dict[str, Any] | None) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        if order is not None:
            self.proc.stdin.write(json.dumps(order) + "\n")
            self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit("the fork server ended")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def spawn(self, run: str, argv: list[str], log: Path, seed: str) -> int:
        with self.lock:
            return int(self._ask({"run": run, "argv": argv, "log": str(log), "seed": seed})["pid"])

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=30)


def signal_pid(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


class Run:
    def __init__(self, plan: RunPlan, args: argparse.Namespace, forks: Forks, workdir: Path) -> None:
        self.plan, self.args, self.forks, self.workdir = plan, args, forks, workdir
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.pids: dict[str, int] = {}  # identity -> pid, the live replicas
        self.dead: dict[str, int] = {}
        self.cpu: dict[str, float] = {}  # identity (or "server") -> CPU seconds, read before it was killed
        self.fired: dict[str, dict[str, Any]] = {}
        self.log: list[str] = []
        self.next_identity = 0  # replica k is active-k; a replacement gets the next number

    # ---- the simulated apiserver ----------------------------------------------------------------------------
    def get(self, path: str) -> Any:
        with urllib.request.urlopen(f"{self.base}{path}", timeout=30) as resp:
            return json.loads(resp.read())

    def post(self, path: str, body: Any) -> Any:
        req = urllib.request.Request(f"{self.base}{path}", data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read())

    def start_server(self) -> None:
        argv = ["--port", str(self.port), "--nodes", str(self.plan.nodes), "--shards", str(self.plan.replicas)]
        self.server = self.forks.spawn("sim", argv, self.workdir / "server.log", f"{self.plan.seed}-server")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                time.sleep(TICK_S)  # polling the port the child listens on: the harness's pace
        raise RuntimeError(f"the simulated apiserver did not listen: {(self.workdir / 'server.log').read_text()}")

    # ---- replicas -------------------------------------------------------------------------------------------
    def start_replica(self) -> str:
        name = identity(self.next_identity)
        self.next_identity += 1
        kc = self.workdir / f"kubeconfig-{name}.json"
        kc.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "sim",
            "clusters": [{"name": "sim", "cluster": {"server": self.base}}],
            "users": [{"name": name, "user": {"token": name}}],
            "contexts": [{"name": "sim", "context": {"cluster": "sim", "user": name}}]}))
        a = self.args
        flags = replica_args(SimpleNamespace(schedule_period=a.schedule_period, lease_duration=a.lease_duration,
                                             renew_deadline=a.renew_deadline, retry_period=a.retry_period),
                             0, self.plan.replicas)
        flags[1] = name  # --leader-elect-identity
        pid = self.forks.spawn("scheduler", ["scheduler", "--kubeconfig", str(kc), *flags],
                               self.workdir / f"replica-{name}.log", f"{self.plan.seed}-{name}")
        self.pids[name] = pid
        self.post("/sim/replicas", {name: pid})
        return name

    def kill(self, name: str) -> None:
        pid = self.pids.pop(name)
        self.cpu[name] = process_cpu(pid)
        signal_pid(pid, signal.SIGKILL)
        self.dead[name] = pid

    # ---- one run --------------------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        t_start = time.monotonic()
        self.start_server()
        for _ in range(self.plan.replicas):
            self.start_replica()
        deadline = time.monotonic() + self.args.settle_timeout
        state = self.get("/sim/chaos/state")
        while not settled(state, self.plan.replicas) and time.monotonic() < deadline:
            time.sleep(TICK_S)
            state = self.get("/sim/chaos/state")
        was_settled = settled(state, self.plan.replicas)
        t_settled = time.monotonic()
        self.play(t_settled)
        end, report = self.settle()
        for name, _pid in list(self.pids.items()):
            self.kill(name)
        self.cpu["server"] = process_cpu(self.server)
        signal_pid(self.server, signal.SIGKILL)
        out = verdict(self.fired, report)
        out.update(seed=self.plan.seed, nodes=self.plan.nodes, settled_first=was_settled,
                   start_s=round(t_settled - t_start, 2), wall_s=round(time.monotonic() - t_start, 2),
                   cpu_s=round(sum(self.cpu.values()), 2), end=end, binds=len(report["monitor"]["binds"]),
                   fence_refused=len(report["monitor"]["fence_refused"]),
                   fence_refused_binds=[{**f, "t": round(t - self.t0, 2)} for t, f in
                                        report["monitor"]["fence_refused"]][:10],
                   binds_to_gone_nodes=report["monitor"]["binds_to_gone_nodes"], gangs=report["gangs"],
                   fired={k: {kk: vv for kk, vv in v.items() if kk != "t"} for k, v in self.fired.items()},
                   log=self.log)
        self.report = report
        return out

    def play(self, t0: float) -> None:
        """The arrivals and the events, on the driver's clock from t0."""
        self.t0 = t0
        plan = self.plan
        gangs = list(plan.gangs)
        events = sorted(plan.events, key=lambda e: e.at_s)
        later: list[tuple[float, str, Any]] = []  # (due, what, arg): SIGCONT, restarts, node adds, loan ends
        waiting_since: dict[str, float] = {}
        while gangs or events or later:
            now = time.monotonic() - t0
            while gangs and gangs[0].at_s <= now:
                g = gangs.pop(0)
                self.post("/sim/chaos/gang", {"name": g.name, "size": g.size, "cpu": g.cpu})
            state = self.get("/sim/chaos/state")
            if state["cpu"] and state["used_cpu"] / state["cpu"] > 0.7 and gangs:
                self.post("/sim/chaos/finish", {"n": 1})
            for item in sorted(later):
                if item[0] <= now:
                    later.remove(item)
                    self.later(item[1], item[2], state)
            if events and events[0].at_s <= now:
                e = events[0]
                victim = self.victim(e.victim) if e.kind in ("kill", "stop") else ""
                last = state["last_bind"].get(victim) if victim else max(state["last_bind"].values(), default=None)
                recent = last is not None and state["t"] - last <= 1.0
                waiting_since.setdefault(e.kind, now)
                if recent or now - waiting_since[e.kind] > 1.5:  # binds in flight, or waited long enough
                    events.pop(0)
                    later.extend(self.fire(e, victim, state, now))
            time.sleep(TICK_S)

    def victim(self, index: int) -> str:
        """The replica of the plan's index, or (it was killed) the live one after it."""
        names = sorted(self.pids)
        return names[index % len(names)] if identity(index) not in self.pids else identity(index)

    def fire(self, e: Any, victim: str, state: dict[str, Any], now: float) -> list[tuple[float, str, Any]]:
        t = state["t"]
        held = sorted(f"volcano-py-system/{lease}" for lease, who in state["leases"].items()
                      if who == victim and "-shard-" in lease)
        self.log.append(f"{now:.2f}s {e.kind} {victim or e.move} (unbound {state['unbound']}, held {held})")
        if e.kind == "kill":
            self.kill(victim)
            self.fired["kill"] = {"t": t, "victim": victim, "held": held, "unbound": state["unbound"]}
            return [(now + self.plan.restart_after_s, "restart", None)]
        if e.kind == "stop":
            signal_pid(self.pids[victim], signal.SIGSTOP)
            self.fired["stop"] = {"t": t, "t_cont": None, "victim": victim, "held": held, "stop_s": e.stop_s}
            return [(now + e.stop_s, "cont", victim)]
        self.fired["move"] = {"t": t, "move": e.move}
        shard = state["nodeshards"].get(f"volcano-py-shard-{e.shard}") or {"nodes": []}
        if e.move == "loan":
            biggest = max((s["desired"] for s in state["nodeshards"].values()), default=10)
            self.post("/sim/chaos/gang", {"name": "big", "size": biggest + 2, "cpu": 8})
            return [(now + 3.0, "end_loan", None)]
        doomed = shard["nodes"][:3]
        self.fired["move"]["deleted"] = self.post("/sim/chaos/nodes", {"delete": doomed})["deleted"]
        return [(now + 1.5, "add_nodes", len(doomed))]

    def later(self, what: str, arg: Any, state: dict[str, Any]) -> None:
        self.log.append(f"{time.monotonic() - self.t0:.2f}s {what} {arg or ''}")
        if what == "restart":
            self.fired["kill"]["replacement"] = self.start_replica()
        elif what == "cont":
            signal_pid(self.pids[arg], signal.SIGCONT)
            self.fired["stop"]["t_cont"] = state["t"]
        elif what == "end_loan":
            self.post("/sim/chaos/finish", {"names": ["big"]})
        elif what == "add_nodes":
            self.post("/sim/chaos/nodes", {"add": [f"a{i}" for i in range(int(arg))]})

    def settle(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """After the arrivals: until no gang is partial, every shard is held by a live replica, and for QUIET_S
        neither a bind was accepted nor a shard Lease changed hands (a replica that just took a shard binds in its
        first cycles), and the report read then still shows no partial gang (a gang's binds may be in flight at
        the moment it is read: then it waits on); gangs are ended meanwhile while one is partial, to make it room.
        Or --settle-timeout, whose report counts as it is. The end's summary and the report."""
        t0 = time.monotonic()
        while True:
            state = self.get("/sim/chaos/state")
            holders = [state["leases"].get(f"{LEASE_NAME}-shard-{i}", "") for i in range(self.plan.replicas)]
            last = max([*state["last_bind"].values(), state["last_shard_lease_change"]], default=0.0)
            waited = time.monotonic() - t0
            ok = (not state["partial"] and all(h in self.pids for h in holders) and state["t"] - last >= QUIET_S
                  and waited >= MIN_SETTLE_S)
            report: dict[str, Any] = self.get("/sim/chaos/report") if ok or waited > self.args.settle_timeout else {}
            if report and (not report["gangs"]["partial"] or waited > self.args.settle_timeout):
                return {"settled": ok and not report["gangs"]["partial"], "s": round(waited, 2),
                        "partial": report["gangs"]["partial"], "holders": holders,
                        "unbound": state["unbound"]}, report
            if state["partial"]:
                self.post("/sim/chaos/finish", {"n": 1})
            time.sleep(0.2)  # the harness's pace while it waits for the replicas


def one(seed: int, a: argparse.Namespace, forks: Forks, commit: str) -> dict[str, Any]:
    """One run, its verdict as the line written; a violating run's logs and record kept under --keep."""
    with tempfile.TemporaryDirectory(prefix=f"chaos-{seed}-") as tmp:
        run = Run(plan_run(seed, a.lease_duration), a, forks, Path(tmp))
        try:
            out = run.run()
        except Exception as exc:  # noqa: BLE001 - a run the harness could not finish is said, not counted
            out = {"seed": seed, "error": repr(exc), "counted": False, "violations": {}}
            for pid in [*run.pids.values(), getattr(run, "server", 0)]:
                if pid:
                    signal_pid(pid, signal.SIGKILL)
        out.update(commit=commit, at=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                   load=os.getloadavg()[0], parallel=a.parallel)
        if any(out.get("violations", {}).values()) or "error" in out or a.keep_all:
            keep = a.keep / f"shards-chaos-seed-{seed}"
            shutil.copytree(tmp, keep, dirs_exist_ok=True)
            if hasattr(run, "report"):
                (keep / "report.json").write_text(json.dumps(run.report, indent=1))
            out["kept"] = str(keep)
    return out


def say(out: dict[str, Any]) -> None:
    print(f"seed {out['seed']}: {'counted' if out.get('counted') else 'NOT counted'} kill={out.get('kill')} "
          f"expiry={out.get('expiry')} move={out.get('move')} ({out.get('nodes_moved')} moved) "
          f"binds={out.get('binds')} fenced={out.get('fence_refused')} violations={out.get('violations')} "
          f"wall={out.get('wall_s')}s {out.get('error', '')}", flush=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--seed", type=int, default=1, help="the first run's seed; run k has seed SEED+k")
    p.add_argument("--parallel", type=int, default=1, help="runs at once (each its own apiserver and replicas)")
    p.add_argument("--budget", type=float, default=0.0, help="start no run after this many seconds (0: none)")
    p.add_argument("--lease-duration", type=float, default=2.0)
    p.add_argument("--renew-deadline", type=float, default=1.5)
    p.add_argument("--retry-period", type=float, default=0.3)
    p.add_argument("--schedule-period", type=float, default=0.25)
    p.add_argument("--settle-timeout", type=float, default=20.0)
    p.add_argument("--out", type=Path, default=REPO / "bench/results/shards-chaos.jsonl")
    p.add_argument("--keep", type=Path, default=REPO / "bench/results", help="where a violating run's logs go")
    p.add_argument("--keep-all", action="store_true", help="keep every run's logs and record under --keep")
    p.add_argument("--table-only", action="store_true", help="print the table of --out and run nothing")
    a = p.parse_args(argv)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    if not a.table_only:
        forks = Forks()
        t0 = time.monotonic()
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=REPO).stdout.strip()
        seeds = iter(range(a.seed, a.seed + a.runs))
        running: set[Future[dict[str, Any]]] = set()
        try:
            with ThreadPoolExecutor(max_workers=max(1, a.parallel)) as pool:
                while True:
                    while len(running) < max(1, a.parallel) and not (a.budget and time.monotonic() - t0 > a.budget):
                        seed = next(seeds, None)
                        if seed is None:
                            break
                        running.add(pool.submit(one, seed, a, forks, commit))
                    if not running:
                        break
                    done, running = wait(running, return_when=FIRST_COMPLETED)
                    for future in done:
                        out = future.result()
                        with a.out.open("a") as f:
                            f.write(json.dumps(out) + "\n")
                        say(out)
            if a.budget and time.monotonic() - t0 > a.budget:
                print(f"budget of {a.budget:g}s spent after {time.monotonic() - t0:.0f}s", flush=True)
        finally:
            forks.close()
    rows = [json.loads(line) for line in a.out.read_text().splitlines() if line.strip()]
    print(table(rows))
    return 1 if any(any(r.get("violations", {}).values()) for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
