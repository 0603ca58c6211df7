"""A fork server for the chaos bench (bench/shards_chaos.py): imports the scheduler and the simulated apiserver
once, then forks each replica (and each run's simulated apiserver) from that warm process, so a run of a few
seconds does not spend most of them importing. Each child is still its own OS process (its own pid to SIGKILL or
SIGSTOP, its own memory and CPU), running `scheduler.cli.main(argv)` or `shardsim.chaos.main(argv)` as
`python -m ...` would, with its output in its own log file.

Protocol (lines of JSON on stdin and stdout): `{"run": "scheduler"|"sim", "argv": [...], "log": PATH, "seed": S}`
answers `{"pid": PID}`; `{"exited": PID}` answers `{"code": CODE}` (None while it runs or once unknown). The
server itself starts no thread (a fork copies only the forking thread), reaps its children on SIGCHLD, and exits
when stdin closes, killing the children it still has.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import random
import signal
import sys
from typing import Any

WARM = ("scheduler.cli", "scheduler.cache.kube", "scheduler.cache.pages", "scheduler.cache.cluster_cache",
        "scheduler.cache.leader", "scheduler.cache.runner", "scheduler.cycle", "scheduler.cache.active",
        "scheduler.cache.freshen", "shardsim.chaos")
codes: dict[int, int] = {}
live: set[int] = set()


def reap(*_: Any) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        live.discard(pid)
        codes[pid] = os.waitstatus_to_exitcode(status)


def child(order: dict[str, Any]) -> None:
    """In the forked child: its own process group, its output to its log, then the command; never returns."""
    code = 1
    try:
        os.setpgid(0, 0)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        fd = os.open(order["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        sys.stdout = os.fdopen(1, "w", buffering=1)
        sys.stderr = os.fdopen(2, "w", buffering=1)
        random.seed(order.get("seed"))
        if order["run"] == "scheduler":
            from scheduler.cli import main as scheduler_main

            code = int(scheduler_main(list(order["argv"])))
        else:
            from shardsim.chaos import main as sim_main

            code = int(sim_main(list(order["argv"])))
    except BaseException as exc:  # noqa: BLE001 - whatever ends the child is its exit code
        code = exc.code if isinstance(exc, SystemExit) and isinstance(exc.code, int) else 1
        if not isinstance(exc, SystemExit | KeyboardInterrupt):
            import traceback

            traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def serve() -> int:
    for name in WARM:
        importlib.import_module(name)
    signal.signal(signal.SIGCHLD, reap)
    out = sys.stdout
    print(json.dumps({"ready": os.getpid()}), file=out, flush=True)
    for line in sys.stdin:
        order = json.loads(line)
        if "exited" in order:
            reap()
            print(json.dumps({"code": codes.get(int(order["exited"]))}), file=out, flush=True)
            continue
        pid = os.fork()
        if pid == 0:
            child(order)
        live.add(pid)
        print(json.dumps({"pid": pid}), file=out, flush=True)
    for pid in list(live):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return 0


if __name__ == "__main__":
    sys.exit(serve())
