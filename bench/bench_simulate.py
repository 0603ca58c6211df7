"""`volcano-py simulate` on a large input: one Volcano Job of 100,000 replicas (minAvailable 2) on 10,000 nodes
that cannot hold it at once, so the replay runs over many cycles. A benchmark, not a test (issue 38).

    .venv/bin/python bench/bench_simulate.py [--replicas 100000] [--nodes 10000] [--node-cpu 4] [--duration 60]
                                             [--profile FILE.pstats] [--timeout 600] [--keep DIR]

Writes the cluster and workload YAML into a temporary folder, runs the command as a user would
(`volcano-py simulate CLUSTER WORKLOAD`, stderr a pipe: the plain progress lines), and prints

- the wall time of the whole command, and when its first progress line came (the target: within 1 s, the cluster
  build and the pod expansion included, and under a minute in all on the machine of BENCHMARKS.md);
- every progress line with the second it came at, so a stall shows;
- the command, date, commit and load average, for the BENCHMARKS.md row.

With `--profile FILE`, the command runs under cProfile instead (slower) and the 25 costliest functions by
cumulative time are printed.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO

import yaml

ROOT = Path(__file__).resolve().parent.parent

RUN = "import sys; from scheduler.cli import main; sys.exit(main(sys.argv[1:]))"


def write_inputs(folder: Path, *, replicas: int, nodes: int, node_cpu: int, duration: int) -> tuple[Path, Path]:
    cluster = {"nodes": [{"name": "small", "count": nodes, "cpu": node_cpu, "memory": f"{4 * node_cpu}Gi"}],
               "queues": [{"name": "default", "weight": 1}]}
    container = {"name": "w", "image": "worker:latest", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}
    job = {"arrival": 0, "duration": duration, "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
           "metadata": {"name": "wide"},
           "spec": {"minAvailable": 2, "schedulerName": "volcano-py", "queue": "default",
                    "tasks": [{"name": "worker", "replicas": replicas,
                               "template": {"spec": {"containers": [container]}}}]}}
    (folder / "cluster.yaml").write_text(yaml.safe_dump(cluster))
    (folder / "workload.yaml").write_text(yaml.safe_dump({"jobs": [job]}))
    return folder / "cluster.yaml", folder / "workload.yaml"


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def run(cluster: Path, workload: Path, profile: str | None,
        timeout: float) -> tuple[float, list[tuple[float, str]], int | None, str]:
    """(wall seconds, [(second, stderr line)], exit code (None: stopped at `timeout`), stdout's last lines)."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    command = [sys.executable]
    if profile:
        command += ["-m", "cProfile", "-o", profile]
        script = Path(tempfile.mkdtemp()) / "run.py"
        script.write_text(RUN.replace("; ", "\n"))
        command.append(str(script))
    else:
        command += ["-c", RUN]
    command += ["simulate", str(cluster), str(workload)]
    with tempfile.TemporaryFile(mode="w+") as out_file:  # stdout to a file: only the reader thread reads stderr
        return _watch(command, env, out_file, timeout)


def _watch(command: list[str], env: dict[str, str], out_file: IO[str],
           timeout: float) -> tuple[float, list[tuple[float, str]], int | None, str]:
    started = time.perf_counter()
    proc = subprocess.Popen(command, stdout=out_file, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    lines: list[tuple[float, str]] = []

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append((time.perf_counter() - started, line.rstrip()))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()  # the child this function started, by its handle
        proc.wait()
        reader.join(timeout=5)
        return time.perf_counter() - started, lines, None, f"stopped after {timeout:g}s: not finished"
    wall = time.perf_counter() - started
    reader.join(timeout=5)
    out_file.seek(0)
    return wall, lines, proc.returncode, "\n".join(out_file.read().splitlines()[-12:])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", type=int, default=100_000)
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--node-cpu", type=int, default=4, help="cores per node (each pod asks for one)")
    parser.add_argument("--duration", type=int, default=60, help="simulated seconds the gang's work takes")
    parser.add_argument("--profile", metavar="FILE", help="run under cProfile, write the stats to FILE")
    parser.add_argument("--timeout", type=float, default=600.0, help="stop the command after this many seconds")
    parser.add_argument("--keep", metavar="DIR", help="write the inputs into DIR (kept) instead of a temp folder")
    args = parser.parse_args()
    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-simulate-"))
    folder.mkdir(parents=True, exist_ok=True)
    cluster, workload = write_inputs(folder, replicas=args.replicas, nodes=args.nodes, node_cpu=args.node_cpu,
                                     duration=args.duration)
    load = os.getloadavg()
    wall, lines, code, tail = run(cluster, workload, args.profile, args.timeout)
    first = lines[0][0] if lines else None
    print(f"command: volcano-py simulate CLUSTER WORKLOAD  ({args.replicas} replicas, minAvailable 2, "
          f"{args.nodes} nodes x {args.node_cpu} cpu, duration {args.duration}s)")
    print(f"date: {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC  commit: {_commit()}  "
          f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}  cpus: {os.cpu_count()}")
    print(f"exit code: {code}  wall: {wall:.1f}s  first progress line: "
          + (f"{first:.2f}s" if first is not None else "none"))
    for at, line in lines:
        print(f"  {at:7.2f}s  {line}")
    print(tail)
    if args.profile:
        import pstats

        pstats.Stats(args.profile).sort_stats("cumulative").print_stats(25)
    return 0 if code in (0, 1) else 1


if __name__ == "__main__":
    sys.exit(main())
