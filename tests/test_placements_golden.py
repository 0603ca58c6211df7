"""Placements are identical before and after a refactor (issue 17's acceptance).

Each case runs one benchmark workload in the simulator and reduces what the scheduler decided to a digest:
for a single cycle, every (pod, node) bind; for the day-long replay, every bind with its simulated time and
every job's start and end. The digests in tests/data/placements-golden.json were recorded on the commit named
there; a change of behaviour shows up as a different digest, with the first differing records printed.

When a change of placement is intended (say so in the commit), rewrite the file:

    .venv/bin/python tests/test_placements_golden.py --write

The solver's CP-SAT search stops at a wall-clock time limit, so its answers depend on the machine's load: the
cases here are the deterministic paths: pod-by-pod allocate with the built-in default conf and with
bench/gang-only.conf on bench_cycle's workload (more pods than GPUs, so gang order and refusals matter), the
day-long replay (examples/sim/day-*.yaml) with the default conf, and the two-team replay with proportion and with
capacity (preempt and reclaim in the actions).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from scheduler.framework.conf import SchedulerConf

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "data" / "placements-golden.json"
sys.path.insert(0, str(ROOT / "bench"))

Records = list[str]


def _conf_file(name: str) -> SchedulerConf:
    from scheduler.cycle import conf_from_text

    return conf_from_text((ROOT / name).read_text(), source=name)


def _one_cycle(nodes: int, pods: int, conf_name: str | None) -> Records:
    from bench_cycle import build

    from scheduler.cycle import builtin_default_conf, run_cycle
    from scheduler.framework.memo import CycleMemo

    sim = build(nodes, pods)
    conf = builtin_default_conf() if conf_name is None else _conf_file(conf_name)
    result = run_cycle(sim.snapshot(), conf, memo=CycleMemo())
    return sorted(f"{task} {node}" for b in result.binds for task, node in b.binds)


def _replay(cluster: str, workload_file: str, conf_name: str | None) -> Records:
    from scheduler.cycle import builtin_default_conf
    from scheduler.sim.replay import replay
    from scheduler.sim.workload import load_cluster, load_workload

    spec = load_cluster(ROOT / cluster)
    workload = load_workload(ROOT / workload_file)
    conf = builtin_default_conf() if conf_name is None else _conf_file(conf_name)
    outcome = replay(spec, workload, conf, period=10.0)
    binds = [f"bind {r.time:.1f} {r.job} {r.task} {r.node}" for r in outcome.cluster.bind_log]
    runs = [f"run {r.key} {r.started} {r.ended}" for r in outcome.runs]
    return binds + runs


DAY = ("examples/sim/day-cluster.yaml", "examples/sim/day-workload.yaml")
TEAMS = ("examples/sim/teams-cluster.yaml", "examples/sim/teams-workload.yaml")
CASES: dict[str, Callable[[], Records]] = {
    "cycle-1000x12000-default": lambda: _one_cycle(1000, 12000, None),
    "cycle-1000x12000-gang-only": lambda: _one_cycle(1000, 12000, "bench/gang-only.conf"),
    "day-default": lambda: _replay(DAY[0], DAY[1], None),
    "teams-proportion": lambda: _replay(TEAMS[0], TEAMS[1], "examples/sim/proportion.conf"),
    "teams-capacity": lambda: _replay(TEAMS[0], TEAMS[1], "examples/sim/capacity.conf"),
}


def digest(records: Records) -> dict[str, object]:
    h = hashlib.sha256("\n".join(records).encode()).hexdigest()
    return {"records": len(records), "sha256": h, "head": records[:3]}


def _golden() -> dict[str, dict[str, object]]:
    return json.loads(GOLDEN.read_text())["cases"]


@pytest.mark.parametrize("case", sorted(CASES))
def test_placements_match_the_recorded_ones(case: str) -> None:
    expected = _golden()[case]
    records = CASES[case]()
    got = digest(records)
    assert (got["records"], got["sha256"]) == (expected["records"], expected["sha256"]), (
        f"{case}: placements changed (first records now {got['head']}, recorded {expected['head']}); "
        "if intended, rewrite with: .venv/bin/python tests/test_placements_golden.py --write")


def main() -> None:
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: tests/test_placements_golden.py --write")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                            check=False).stdout.strip()
    cases = {name: digest(fn()) for name, fn in sorted(CASES.items())}
    GOLDEN.parent.mkdir(parents=True, exist_ok=True)
    GOLDEN.write_text(json.dumps({"recorded_on": commit, "cases": cases}, indent=1) + "\n")
    print(f"wrote {GOLDEN.relative_to(ROOT)} ({len(cases)} cases, on {commit})")


if __name__ == "__main__":
    main()
