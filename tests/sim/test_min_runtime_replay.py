"""The simulator with minruntime (issue 35): the replay stops its clock when a victim's minimum runtime ends, so a
waiting gang evicts it then (not at the next unrelated event), and its report says why it waited before.

examples/sim/rigid-gangs*.yaml under the gang-eviction conf plus `minruntime` (minRuntime 2m): `low` (8 x 1 GPU,
minAvailable 8, 1,000 s) fills 2 x 4 GPUs; `high` (4 x 1 GPU, minAvailable 4, higher priority) arrives at 10 s.
"""

from __future__ import annotations

from pathlib import Path

from scheduler.api import reasons as R
from scheduler.cycle import conf_from_text
from scheduler.sim.replay import Replay, replay
from scheduler.sim.workload import load_cluster, load_workload

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "sim"
MIN_RUNTIME = 120.0
PERIOD = 1.0


def _replay(min_runtime: bool) -> Replay:
    text = (EXAMPLES / "gang-eviction.conf").read_text()
    if min_runtime:
        text = text.replace("  - name: conformance\n", "  - name: conformance\n  - name: minruntime\n"
                            f"    arguments:\n      minRuntime: {MIN_RUNTIME:g}s\n", 1)
    return replay(load_cluster(EXAMPLES / "rigid-gangs-cluster.yaml"), load_workload(EXAMPLES / "rigid-gangs.yaml"),
                  conf_from_text(text), period=PERIOD)


def test_the_gang_evicts_when_the_victims_minimum_runtime_ends_and_the_report_says_why_it_waited() -> None:
    done = _replay(True)
    low_bound = min(b.time for b in done.cluster.bind_log if b.job == "default/low")
    evicted = [e.time for e in done.cluster.eviction_log if e.job == "default/low"]
    assert evicted and min(evicted) == low_bound + MIN_RUNTIME  # the clock stopped exactly then
    high = next(r for r in done.runs if r.key == "default/high")
    said = [r for _, status in high.said for r in status.reasons if isinstance(r, R.MinRuntimeProtected)]
    assert said and said[0].job == "default/low" and said[0].min_runtime_seconds == MIN_RUNTIME

    without = _replay(False)  # the rule off: low is evicted as soon as high arrives
    evicted = [e.time for e in without.cluster.eviction_log if e.job == "default/low"]
    assert evicted and min(evicted) < low_bound + MIN_RUNTIME
