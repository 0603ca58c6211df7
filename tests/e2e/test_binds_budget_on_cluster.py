"""allocate's budget of binds per cycle (`maxBindsPerCycle`, scheduler/actions/allocate.py) in the scheduler
process on the real apiserver: no cycle binds more than the budget, except to bind a gang whole, and the jobs a
cycle left are bound by the cycles after it.

A 4-pod gang (minAvailable 4) and three one-pod jobs wait, every pod created, until the one node they may use
(8 GPUs) joins; the conf has no `enqueue`, so allocate admits each PodGroup at once and the Job controller creates
the pods while no node holds them. With a budget of 2, the cycles after the node joins bind the gang's 4 pods in
one cycle (its turn crosses the budget, after at most one other pod) and the others at most 2 a cycle, and at
least one cycle says it left jobs for the next.
"""

from __future__ import annotations

import re

import pytest
from controlplane import wait_for
from vcjob_cluster import TIMEOUT, pods_of, task, vcjob_cluster, wait_running

from scheduler.testing import conf_text_from_tiers

__all__ = ["vcjob_cluster"]  # the fixture
BUDGET = 2
CONF = conf_text_from_tiers(["priority", "gang", "conformance"], ["drf", "predicates", "proportion", "nodeorder"],
                            actions="allocate, backfill", configurations={"allocate": {"maxBindsPerCycle": BUDGET}})
CYCLE = re.compile(r"cycle (\d+): .*; bound (\d+) pods in (\d+) gangs, evicted \d+ \([^)]*\)"
                   r"(?:; (\d+) jobs left for the next cycle)?")


@pytest.mark.scheduler_conf(CONF)
def test_no_cycle_binds_past_the_budget_but_to_bind_a_gang_whole(vcjob_cluster, core_v1, namespace):
    queue = vcjob_cluster.queue("budget")
    vcjob_cluster.job("gang", queue, [task("worker", 4)], 4)
    for name in ("a", "b", "c"):
        vcjob_cluster.job(name, queue, [task("worker", 1)], 1)
    wait_for(lambda: all(len(pods_of(core_v1, namespace, j)) == n for j, n in (("gang", 4), ("a", 1), ("b", 1),
                                                                                  ("c", 1))),
             TIMEOUT, interval=0.2, what="every pod created, none bound (no node of this test yet)")
    assert not [p for j in ("gang", "a", "b", "c") for p in pods_of(core_v1, namespace, j) if p["spec"].get("nodeName")]

    vcjob_cluster.nodes(1, gpus=8)
    wait_running(core_v1, namespace, "gang", 4)
    for name in ("a", "b", "c"):
        wait_running(core_v1, namespace, name, 1)

    cycles = [(int(n), int(pods), int(gangs), int(left or 0))
              for n, pods, gangs, left in CYCLE.findall(vcjob_cluster.scheduler_log())]
    assert sum(pods for _, pods, _, _ in cycles) == 7, cycles
    for _, pods, gangs, _ in cycles:  # the budget, or past it only by the gang whose turn crossed it, bound whole
        assert pods <= BUDGET or (gangs >= 1 and pods - 4 < BUDGET), cycles
    assert any(left for *_, left in cycles), cycles
