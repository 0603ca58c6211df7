"""The legacy preempt's evictions carry their cause (issue 32): the action, the job room is made for, the rule
(`lowest priority first`), and whether the victim's gang falls below its minimum."""

from __future__ import annotations

from preemption_confs import make_conf
from test_preempt import CASES, build

from scheduler.api.snapshot import EvictCause

CONF = make_conf()


def test_victims_above_their_minimum_leave_the_gang_whole() -> None:
    """`lowest` (3 pods, minMember 1) loses 2 pods to `high`: 1 left, its minimum: not broken."""
    c = build(CASES[0])
    c.job("high", replicas=2, gpu=1, priority_class="high")
    causes = [e.cause for _ in range(3) for e in c.cycle(CONF).evictions]
    assert causes == [EvictCause("preempt", "default/high", "lowest priority first", breaks_gang=False)] * 2


def test_a_victim_that_takes_its_gang_below_its_minimum_is_said_to_break_it() -> None:
    """With gang's Preemptable off, the 4-pod gang at minMember 4 loses one pod: 3 < 4, broken."""
    case = next(x for x in CASES if x.name.startswith("a running gang is never broken"))
    c = build(case)
    c.job("high", replicas=1, gpu=1, priority_class="high")
    off = make_conf(first=("priority", {"name": "gang", "enablePreemptable": False}, "conformance"))
    (eviction,) = c.cycle(off).evictions
    assert eviction.task == "default/gang-3"
    assert eviction.cause == EvictCause("preempt", "default/high", "lowest priority first", breaks_gang=True)
    (record,) = c.sim.eviction_log
    assert (record.job, record.cause) == ("default/gang", eviction.cause)
