"""Limits (issue 11): objects at the edge of what a cluster can hold get a clear status in bounded time.

- a Volcano Job with 10,000 replicas (expanded by `scheduler.jobs` into one PodGroup + 10,000 pods);
- a PodGroup whose minMember exceeds what the cluster could ever hold;
- a Queue with every resource at zero (capability all 0).

Each asserts the status a user reads; the time per cycle is printed (`pytest -s`) and recorded in
RELIABILITY.md, never asserted (a loaded CI machine must not fail a test for being slow).
"""

from __future__ import annotations

import time

from scheduler.api import reasons as R
from scheduler.cycle import builtin_default_conf
from scheduler.jobs.expand import podgroup_for, pods_for
from scheduler.testing import cluster

CONF = builtin_default_conf()


def timed_cycles(c, n: int = 3) -> tuple[list, float]:
    """n cycles; returns the results and the slowest cycle in seconds."""
    results, slowest = [], 0.0
    for _ in range(n):
        started = time.perf_counter()
        results.append(c.cycle(CONF))
        slowest = max(slowest, time.perf_counter() - started)
    return results, slowest


def unschedulable(c, group: str):
    condition = c.sim.condition(group)
    assert condition is not None and condition["status"] == "True", c.sim.podgroup(group).get("status")
    return condition


def test_a_job_with_10000_replicas_waits_with_a_reason_and_the_small_gang_beside_it_runs():
    job = {
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
        "metadata": {"name": "huge", "namespace": "default", "uid": "u-huge"},
        "spec": {"minAvailable": 10_000, "schedulerName": "volcano-py", "queue": "default",
                 "tasks": [{"name": "w", "replicas": 10_000, "template": {"spec": {"containers": [
                     {"name": "c", "image": "i", "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "1"}}}]}}}]},
    }
    started = time.perf_counter()
    pg, pods = podgroup_for(job), pods_for(job)
    expand = time.perf_counter() - started
    assert len(pods) == 10_000 and pg["spec"]["minMember"] == 10_000
    c = cluster().nodes("n", 32, cpu="64", gpu=8).job("small", min_available=4, replicas=4, gpu=1)
    pg.setdefault("status", {})["phase"] = "Inqueue"
    c.sim.add_podgroup(pg)
    for pod in pods:
        c.sim.add_pod(pod)
    results, slowest = timed_cycles(c)
    assert len(c.sim.bound("small")) == 4
    group = pg["metadata"]["name"]  # Volcano's name for a Job's PodGroup: <job>-<uid>
    assert not c.sim.bound(group), "a gang of 10,000 on 256 GPUs bound in part"
    condition = unschedulable(c, group)
    assert condition["reason"] == "NotEnoughResources", condition
    assert R.GangNotReady(10_000, 10_000, 0, 10_000) in c.sim.reasons(group), condition["message"]
    print(f"\n10,000-replica Job: expand {expand:.2f}s; slowest of 3 cycles {slowest:.2f}s (32 nodes, 10,004 pods)")


def test_a_podgroup_larger_than_the_cluster_could_ever_hold_says_so_each_cycle():
    c = (cluster().nodes("n", 4, cpu="64", gpu=8)
         .job("never", min_available=64, replicas=64, gpu=1)
         .job("fits", min_available=8, replicas=8, gpu=1))
    results, slowest = timed_cycles(c)
    assert len(c.sim.bound("fits")) == 8
    assert not c.sim.bound("never")
    condition = unschedulable(c, "never")
    assert condition["reason"] == "NotEnoughResources", condition
    assert R.GangNotReady(64, 64, 0, 64) in c.sim.reasons("never"), condition["message"]
    print(f"\nminMember 64 on 32 GPUs: slowest of 3 cycles {slowest * 1000:.1f} ms; message: {condition['message']}")


def test_a_queue_with_every_resource_at_zero_admits_nothing_and_says_why():
    c = (cluster().nodes("n", 4, cpu="64", gpu=8)
         .queue("empty", capability={"cpu": "0", "memory": "0", "nvidia.com/gpu": "0"})
         .job("starved", queue="empty", min_available=2, replicas=2, gpu=1)
         .job("other", min_available=2, replicas=2, gpu=1))
    results, slowest = timed_cycles(c)
    assert not c.sim.bound("starved")
    assert len(c.sim.bound("other")) == 2
    status = c.sim.podgroup("starved").get("status") or {}
    assert status.get("phase") in ("Pending", "Inqueue"), status
    condition = unschedulable(c, "starved")
    assert any(getattr(r, "queue", "") == "empty" for r in c.sim.reasons("starved")), condition
    print(f"\nzero Queue: slowest of 3 cycles {slowest * 1000:.1f} ms; {condition['reason']}: {condition['message']}")
