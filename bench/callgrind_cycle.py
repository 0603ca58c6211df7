"""Count the instructions of one scheduling cycle with valgrind's callgrind: the same count whatever else the
machine does, so two trees can be compared on a noisy machine (BENCHMARKS.md).

    .venv/bin/python bench/callgrind_cycle.py [--size 5000x20000] [--conf bench/gang-only.conf] [--tree DIR]
    .venv/bin/python bench/callgrind_cycle.py --size 5000x50000 --warm 30 [--tree DIR]

The cluster is built as bench_cycle builds it and frozen with the instrumentation off; a two-function C helper
(compiled once with the system's callgrind.h, loaded with ctypes) zeroes the counters and starts them just before
the cycle (snapshot, session, actions, close) and stops and dumps them just after, so only the cycle is counted.
`--tree DIR` counts another checkout's code (a worktree of an earlier commit) with this script.
Prints one line: `<conf> <size> <instructions>`. Needs valgrind and a C compiler.

`--warm N` counts `bench_cycle.py --warm N --incremental`'s cycles instead (`bench/warm_cycles.py`: the cluster
filled, one cold cycle on it, then N warm cycles after a churn of 1% of the pods each, incremental snapshots and
the memo kept): prints the cold cycle's count, each warm cycle's, and the largest warm one over the cold one.
Each counted cycle runs as the scheduler's loop runs it: its snapshot frozen once built, and the collector's
pass over what the session made, as the cycle ends, counted with it (not counted before 2026-12-07 midday).
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import glob
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HELPER_C = r"""
#include <valgrind/callgrind.h>
void cg_start(void) { CALLGRIND_ZERO_STATS; CALLGRIND_START_INSTRUMENTATION; }
void cg_stop(void) { CALLGRIND_STOP_INSTRUMENTATION; CALLGRIND_DUMP_STATS_AT("cycle"); }
"""
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "volcano-py" / "callgrind"


def helper() -> Path:
    """The shared library with cg_start/cg_stop, compiled once."""
    lib = CACHE / "cg_helper.so"
    if not lib.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        source = CACHE / "cg_helper.c"
        source.write_text(HELPER_C)
        subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", str(lib), str(source)], check=True)
    return lib


def inner(size: str, conf_path: str | None) -> None:
    """Under valgrind: build, freeze, count one cycle (`conf_path` "": the built-in default)."""
    from bench.bench_cycle import build
    from scheduler.cycle import builtin_default_conf, load_conf, run_cycle

    nodes, pods = (int(x) for x in size.split("x"))
    conf = load_conf(conf_path) if conf_path else builtin_default_conf()
    sim = build(nodes, pods)
    gc.collect()
    gc.freeze()
    gc.disable()  # as the scheduler runs a cycle (`cycle.collector_paused`)
    lib = ctypes.CDLL(str(helper()))
    lib.cg_start()
    run_cycle(sim.snapshot(), conf)
    lib.cg_stop()


def inner_warm(size: str, conf_path: str | None, warm: int | str) -> None:
    """Under valgrind: `warm_cycles` with the cold cycle and the warm ones counted, one dump each, in order
    (`conf_path` "": the built-in default)."""
    warm = int(warm)
    import argparse

    sys.path.insert(0, str(Path(__file__).parent))  # (bench_cycle imports warm_cycles as a sibling)
    from bench.bench_cycle import build, one_cycle
    from bench.warm_cycles import warm_cycles
    from scheduler.actions import ACTIONS
    from scheduler.cycle import (
        builtin_default_conf,
        collect_between_cycles,
        collector_paused,
        freeze_snapshot,
        load_conf,
    )
    from scheduler.framework.session import Session
    from scheduler.plugins.registry import PLUGINS

    nodes, pods = (int(x) for x in size.split("x"))
    conf = load_conf(conf_path) if conf_path else builtin_default_conf()
    sim = build(nodes, pods, gpu_share=0.6)
    gc.collect()
    gc.freeze()
    lib = ctypes.CDLL(str(helper()))
    seen_cold = [False]

    def counted(sim: Any, conf: Any, memo: Any = None, keep: Any = None) -> tuple[dict[str, float], int]:
        if memo is not None and not (seen_cold[0] and keep is not None):
            return one_cycle(sim, conf, memo, keep)  # filling, and the incremental builder's first (cold) build
        seen_cold[0] = True
        lib.cg_start()
        with collector_paused():  # (its pass over what the session made, as the cycle ends, counted too)
            snapshot = sim.snapshot()
            freeze_snapshot()  # as the scheduler's loop does (cache/runner.py)
            ssn = Session(snapshot, conf, PLUGINS, memo=memo)
            for name in conf.actions:
                ACTIONS[name]().execute(ssn)
            result = ssn.close()
        lib.cg_stop()
        if keep is not None:
            keep.append(result)
        bound = sum(len(b.binds) for b in result.binds)
        del snapshot, ssn, result
        collect_between_cycles()
        return {"total": 1.0}, bound

    args = argparse.Namespace(repeat=1, warm=warm, churn=0.01, gpu_share=None, incremental=True)
    warm_cycles(sim, conf, nodes, pods, args, counted)


def _cycle_dumps(tree: Path, call: str, *args: str) -> list[int]:
    """Run `call` (a function of this module, given `args`) under callgrind with `tree`'s code; the instruction
    totals of the dumps it made of cycles (not the one at exit), in the order it made them."""
    helper()
    with tempfile.TemporaryDirectory() as out:
        env = dict(os.environ, PYTHONHASHSEED="0", PYTHONPATH=f"{tree}{os.pathsep}{Path(__file__).parents[1]}")
        code = (f"import sys; sys.path.insert(0, sys.argv[1]); from bench.callgrind_cycle import {call}; "
                f"{call}(*sys.argv[2:])")
        cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}/cg.out",
               sys.executable, "-c", code, str(tree), *args]
        subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        totals: list[tuple[int, int]] = []
        for name in glob.glob(f"{out}/cg.out*"):
            text = Path(name).read_text(errors="replace")
            head = text.split("\nevents:", 1)[0]
            part = re.search(r"^part: (\d+)", head, re.M)
            found = re.search(r"^totals: (\d+)", text, re.M)
            if "Trigger: Client Request: cycle" in head and found:
                totals.append((int(part.group(1)) if part else 0, int(found.group(1))))
        return [total for _, total in sorted(totals)]


def count_warm(size: str, conf: str | None, tree: Path, warm: int) -> list[int]:
    """[the cold cycle's instructions, each warm cycle's]."""
    totals = _cycle_dumps(tree, "inner_warm", size, conf or "", str(warm))
    if len(totals) != warm + 1:
        raise SystemExit(f"expected {warm + 1} dumps (one cold cycle, {warm} warm), found {len(totals)}")
    return totals


def count(size: str, conf: str | None, tree: Path) -> int:
    totals = _cycle_dumps(tree, "inner", size, conf or "")
    if len(totals) != 1:
        raise SystemExit(f"expected one dump of the cycle, found {len(totals)}")
    return totals[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="5000x20000", help="nodes x pods, as bench_cycle (default 5000x20000)")
    parser.add_argument("--conf", help="a volcano-scheduler.conf (default: the built-in default)")
    parser.add_argument("--tree", type=Path, default=Path(__file__).resolve().parents[1],
                        help="the checkout whose scheduler is counted (default: this one)")
    parser.add_argument("--warm", type=int, default=0, help="count this many warm cycles (see above)")
    args = parser.parse_args()
    conf = str(Path(args.conf).resolve()) if args.conf else None
    if args.warm:
        cold, *warm = count_warm(args.size, conf, args.tree.resolve(), args.warm)
        print(f"{args.conf or 'default'} {args.size} cold {cold} warm {' '.join(str(w) for w in warm)} "
              f"largest warm / cold {max(warm) / cold:.3f} median warm / cold "
              f"{sorted(warm)[len(warm) // 2] / cold:.3f}")
        return
    print(f"{args.conf or 'default'} {args.size} {count(args.size, conf, args.tree.resolve())}")


if __name__ == "__main__":
    main()
