"""A job whose running gang is broken by evictions waits again: the report shows that wait too (issue 38, "the
reason of each wait period"), on the job's bar and as a period of its own with what the scheduler said then."""

from __future__ import annotations

from pathlib import Path

from scheduler.cycle import load_conf
from scheduler.report.plain import BROKEN, periods
from scheduler.report.series import Labelled
from scheduler.report.timeline import section
from scheduler.sim.replay import replay
from scheduler.sim.report import job_rows
from scheduler.sim.workload import load_cluster, load_workload

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "sim"


def test_a_gang_broken_by_gangpreempt_shows_its_second_wait() -> None:
    run = replay(load_cluster(str(EXAMPLES / "rigid-gangs-cluster.yaml")),
                 load_workload(str(EXAMPLES / "rigid-gangs.yaml")), load_conf(str(EXAMPLES / "gang-eviction.conf")))
    rows = {row.name: row for row in job_rows(run)}
    low, high = rows["low"], rows["high"]
    assert low.started is not None and high.started is not None and low.started < high.started
    assert len(low.rewaits) == 1
    broke, again = low.rewaits[0]
    assert broke <= high.started and again is not None and again >= high.started  # it waited while high ran
    later = [p for p in periods(low, run.end) if p.start >= broke]
    assert later[0].why == BROKEN and (later[0].start, later[0].end) == (broke, again)
    html = section([Labelled("gang eviction", run)], ["#1f77b4"])
    assert 'data-kinds="GangBroken"' in html and "waiting again" in html
