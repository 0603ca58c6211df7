"""Preempt and reclaim on the real apiserver (issue 22), the scheduler and the controllers as processes.

The conf is Volcano's default one with the actions `enqueue, allocate, preempt, reclaim, backfill` (Volcano's
e2e suites, test/e2e/schedulingaction/{preempt,reclaim}.go, run these actions with it), except that gang's
Preemptable is left on (Volcano's shipped conf turns it off with `enablePreemptable: false`), so the gang rule
of plugins/gang/gang.go (preemptableFn: a job gives up tasks only while it keeps more than minAvailable ready)
limits the victims.

Volcano Jobs go through the Job controller (PodGroup, pods, policies); kwok runs the pods. Each test has its own
namespace, nodes (pods select them), Queues and PriorityClasses.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest
from controlplane import assert_no_overcommit, wait_for
from vcjob_cluster import (
    TIMEOUT,
    evicted_uids,
    job_status,
    pods_of,
    running,
    scheduler_events,
    task,
    vcjob_cluster,
    wait_running,
)

__all__ = ["vcjob_cluster"]  # the fixture
REPO = Path(__file__).resolve().parents[2]

# ---------------------------------------------------------------------------------------------- preempt


def test_a_high_priority_job_preempts_only_what_it_needs_within_the_gang_rule_and_the_victims_policy_runs(
    vcjob_cluster, core_v1, custom, namespace
):
    """2 nodes x 5 GPUs, one queue. Lowest priority: `held` (3 pods, minAvailable 2: the gang rule lets one go)
    and `pinned` (1 pod annotated volcano.sh/preemptable "false"); low priority: `restartable` (5 pods,
    minAvailable 1, PodEvicted -> RestartJob). 1 GPU free. `urgent` (4 pods, minAvailable 4, high priority)
    needs 3 victims: the cheapest are the lowest-priority ones, but `held` may give only 1 and `pinned` none,
    so 2 come from `restartable`, whose policy then restarts it."""
    vcjob_cluster.nodes(2, gpus=5)
    queue = vcjob_cluster.queue("preempt")
    lowest, low, high = (vcjob_cluster.priority_class(n, v) for n, v in (("lowest", 10), ("low", 20), ("high", 99)))
    vcjob_cluster.job("held", queue, [task("worker", 3, min_available=2)], 2, priorityClassName=lowest)
    vcjob_cluster.job("pinned", queue, [task("keeper", 1, annotations={"volcano.sh/preemptable": "false"})], 1,
                priorityClassName=lowest)
    vcjob_cluster.job("restartable", queue, [task("worker", 5, min_available=1)], 1, priorityClassName=low,
                policies=[{"event": "PodEvicted", "action": "RestartJob"}], maxRetry=3)
    held = wait_running(core_v1, namespace, "held", 3)
    pinned = wait_running(core_v1, namespace, "pinned", 1)
    restartable = wait_running(core_v1, namespace, "restartable", 5)
    assert evicted_uids(core_v1, namespace) == set()

    vcjob_cluster.job("urgent", queue, [task("worker", 4)], 4, priorityClassName=high)
    urgent = wait_running(core_v1, namespace, "urgent", 4)

    # Events are sent after the cycle's binds: wait for the three the scheduler must have sent.
    victims = wait_for(lambda: (v := evicted_uids(core_v1, namespace)) and len(v) >= 3 and v, TIMEOUT,
                       interval=0.2, what="3 Evict events")
    assert len(victims & set(held)) == 1, "the gang rule lets `held` give up exactly one pod"
    assert not victims & set(pinned), "a pod annotated not preemptable is never a victim"
    assert len(victims & set(restartable)) == 2, "exactly as many victims as urgent needs: 1 GPU was free"
    assert victims <= set(held) | set(restartable), victims
    assert set(running(core_v1, namespace, "pinned")) == set(pinned)
    assert set(held) - victims <= set(running(core_v1, namespace, "held")), "held kept its minAvailable"
    on_groups = Counter(e["involvedObject"]["name"].split("-")[0]
                        for e in scheduler_events(core_v1, namespace, "Evict", kind="PodGroup"))
    assert on_groups == {"held": 1, "restartable": 2}, on_groups  # Volcano's Normal Evict on the PodGroup

    # Volcano's RestartJob (controllers/job/state/running.go): every pod killed, retryCount and the version +1,
    # the job back to Running with a new run of pods.
    def restarted() -> dict | None:
        status = job_status(custom, namespace, "restartable")
        now = running(core_v1, namespace, "restartable")
        fresh = now and not set(now) & set(restartable)
        return status if fresh and (status.get("state") or {}).get("phase") == "Running" else None

    status = wait_for(restarted, TIMEOUT, interval=0.2, what="restartable restarted and Running again")
    assert (status.get("retryCount"), status.get("version")) == (1, 1), status
    versions = {(p["metadata"].get("annotations") or {}).get("volcano.sh/job-version")
                for p in pods_of(core_v1, namespace, "restartable")}
    assert versions == {"1"}, versions
    assert set(running(core_v1, namespace, "urgent")) == set(urgent), "urgent kept its pods"
    assert evicted_uids(core_v1, namespace) == victims, "nothing else was evicted"
    assert_no_overcommit(core_v1)


# ---------------------------------------------------------------------------------------------- reclaim


def test_a_starved_queue_reclaims_from_an_overused_one_down_to_its_deserved_share(
    vcjob_cluster, core_v1, custom, namespace
):
    """2 nodes x 4 GPUs; queues `greedy` and `starved`, weight 1 each. greedy's job (8 pods, minAvailable 2)
    takes all 8 GPUs while starved is empty; then starved's job (4 pods, minAvailable 4) arrives: reclaim
    evicts 4 of greedy's pods (greedy down to its deserved 4 of 8, not below), and starved runs."""
    vcjob_cluster.nodes(2, gpus=4)
    greedy, starved = vcjob_cluster.queue("greedy"), vcjob_cluster.queue("starved")
    vcjob_cluster.job("hog", greedy, [task("worker", 8, min_available=2)], 2)
    hog = wait_running(core_v1, namespace, "hog", 8)

    vcjob_cluster.job("late", starved, [task("worker", 4)], 4)
    late = wait_running(core_v1, namespace, "late", 4)

    victims = wait_for(lambda: (v := evicted_uids(core_v1, namespace)) and len(v) >= 4 and v, TIMEOUT,
                       interval=0.2, what="4 Evict events")
    assert len(victims) == 4 and victims <= set(hog), victims
    left = running(core_v1, namespace, "hog")
    assert set(hog) - victims == set(left), "greedy kept exactly its deserved share, its own pods"
    assert len(left) == 4
    # The evicted pods are recreated by the Job controller (no policy: SyncJob) and wait: greedy is at its
    # share, so nothing is reclaimed back from starved.
    wait_for(lambda: len(pods_of(core_v1, namespace, "hog")) == 8, TIMEOUT, interval=0.2,
             what="hog's evicted pods recreated")
    assert set(running(core_v1, namespace, "late")) == set(late)
    assert evicted_uids(core_v1, namespace) == victims
    assert_no_overcommit(core_v1)


# ---------------------------------------------------------------------------------------------- gang eviction

GANG_EVICTION_CONF = (REPO / "examples" / "sim" / "gang-eviction.conf").read_text()


@pytest.mark.scheduler_conf(GANG_EVICTION_CONF)
def test_a_high_priority_rigid_gang_preempts_a_whole_rigid_gang_at_once(vcjob_cluster, core_v1, custom, namespace):
    """Issue 32's case on the real apiserver, under Volcano's gang-eviction conf: 2 nodes x 4 GPUs, `low` (8 x 1
    GPU, minAvailable 8, priority 10) fills them; `high` (4 x 1 GPU, minAvailable 4, priority 1000) arrives.
    gangpreempt evicts low's whole bundle (a rigid gang has no safe one), every eviction with a DisruptionTarget
    condition first, and high runs; low's pods, recreated by its Job controller, wait whole (never partly
    bound): 4 GPUs are left for its 8."""
    vcjob_cluster.nodes(2, gpus=4)
    queue = vcjob_cluster.queue("gangs")
    low, high = (vcjob_cluster.priority_class(n, v) for n, v in (("low", 10), ("high", 1000)))
    vcjob_cluster.job("low", queue, [task("worker", 8)], 8, priorityClassName=low)
    low_pods = wait_running(core_v1, namespace, "low", 8)

    started = time.monotonic()
    vcjob_cluster.job("high", queue, [task("worker", 4)], 4, priorityClassName=high)
    wait_running(core_v1, namespace, "high", 4)
    took = time.monotonic() - started
    victims = wait_for(lambda: (v := evicted_uids(core_v1, namespace)) and len(v) >= 8 and v, TIMEOUT,
                       interval=0.2, what="8 Evict events")
    assert victims == set(low_pods), "low's whole bundle, and nothing else"
    messages = {e["message"] for e in scheduler_events(core_v1, namespace, "Preempted")}
    assert messages and all("whole bundle" in m for m in messages), messages
    wait_for(lambda: len(pods_of(core_v1, namespace, "low")) == 8, TIMEOUT, interval=0.2,
             what="low's pods recreated by its Job controller")
    assert running(core_v1, namespace, "low") == {}, "low waits whole: never partly bound"
    print(f"high Running {took:.1f} s after it was created (victims' grace 0 s, schedule period 0.2 s)")
    assert_no_overcommit(core_v1)
