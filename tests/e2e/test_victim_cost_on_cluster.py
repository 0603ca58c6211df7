"""victimcost on the real apiserver (issue 35): when a high-priority gang must evict, the cheapest victims go, not
the ones Volcano's order takes: first the jobs whose eviction breaks no gang, then the least work lost.

1. Lost work. Volcano's gang-eviction conf (examples/sim/gang-eviction.conf) with `victimcost` added to the first
   tier, no arguments. One node of 4 GPUs, held by two gangs of 2 one-GPU pods (minAvailable 2, priority 10) of
   one queue: `old`, started first, then `fresh`, created in a later second. Then `old`'s training loop records a
   checkpoint: its pods get `volcano-py.io/last-checkpoint`, half a second after `fresh`'s start (its
   PodScheduled time). `urgent` (2 x 1 GPU, minAvailable 2, priority 1000) arrives once that time is past on the
   scheduler's clock too (victimcost ignores a checkpoint in the future), and gangpreempt must evict one whole
   gang. Both would break (each is at its minAvailable), so victimcost takes the one that loses less work: `old`
   (since its checkpoint) rather than `fresh` (since its start). Without the plugin, Volcano's order (the reverse
   of JobOrder: the newer job first) evicts `fresh`.
2. Gangs broken. Legacy `preempt` (gang's and drf's Preemptable off, as in tests/plugins/test_victimcost.py), one
   node of 5 GPUs: `elastic` (3 pods, minAvailable 1) started first, `rigid` (2 pods, minAvailable 2) in a later
   second. `urgent` needs 2 GPUs: victimcost takes 2 pods of `elastic`, which stays a whole gang, though it loses
   more work; without the plugin a pod of the newer `rigid` goes first (breaking it), then one of `elastic`.

The scheduler and the Job controller run as processes; kwok runs the pods. Each job is created after the previous
one was seen running, the checkpoint before `urgent`, so the scheduler has seen it (one watch of pods, in order)
before it sees `urgent`'s pods.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from controlplane import wait_for
from vcjob_cluster import (
    TIMEOUT,
    evicted_uids,
    podgroup_of,
    pods_of,
    running,
    started_at,
    task,
    vcjob_cluster,
    wait_running,
)

from scheduler.api.timestamps import parse_time
from scheduler.plugins.victimcost import CHECKPOINT

__all__ = ["vcjob_cluster"]  # the fixture
REPO = Path(__file__).resolve().parents[2]
CONF = (REPO / "examples" / "sim" / "gang-eviction.conf").read_text().replace(
    "  - name: conformance\n", "  - name: conformance\n  - name: victimcost\n", 1)
# The scheduler's clock is this machine's corrected by the apiserver's offset as estimated from the whole-second
# Date headers of its answers (scheduler/cache/clock.py): off by up to about half a second plus a round trip.
CLOCK_SLACK = 1.5
LEGACY_CONF = """actions: "enqueue, allocate, preempt, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
  - name: victimcost
- plugins:
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: proportion
  - name: nodeorder
"""


def podgroup_created(custom, namespace: str, job: str) -> float | None:
    """The creationTimestamp of the job's PodGroup (the job's creation, as JobOrder reads it), once it exists."""
    pg = podgroup_of(custom, namespace, job)
    return parse_time(pg["metadata"]["creationTimestamp"]) if pg else None


def a_second_after(custom, namespace: str, job: str) -> None:
    """Wait until a PodGroup created now has a later creationTimestamp (whole seconds) than the job's."""
    created = wait_for(lambda: podgroup_created(custom, namespace, job), TIMEOUT, what=f"{job}'s PodGroup")
    wait_for(lambda: time.time() >= created + 1, TIMEOUT, interval=0.05, what=f"a second after {job}'s PodGroup")


@pytest.mark.scheduler_conf(CONF)
def test_the_gang_that_checkpointed_last_is_evicted_rather_than_the_newer_one(
    vcjob_cluster, core_v1, custom, namespace
):
    vcjob_cluster.nodes(1, gpus=4)
    queue = vcjob_cluster.queue("vcost")
    low, high = (vcjob_cluster.priority_class(n, v) for n, v in (("low", 10), ("high", 1000)))
    vcjob_cluster.job("old", queue, [task("worker", 2)], 2, priorityClassName=low)
    old = wait_running(core_v1, namespace, "old", 2)
    a_second_after(custom, namespace, "old")  # Volcano's order (the newer first) is then no tie
    vcjob_cluster.job("fresh", queue, [task("worker", 2)], 2, priorityClassName=low)
    fresh = wait_running(core_v1, namespace, "fresh", 2)
    fresh_start = started_at(pods_of(core_v1, namespace, "fresh"))

    # old checkpoints after fresh started (as fresh's pods record it): it has less work to lose than fresh
    checkpoint = fresh_start + 0.5
    assert fresh_start >= started_at(pods_of(core_v1, namespace, "old"))
    stamp = datetime.fromtimestamp(checkpoint, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    for pod in pods_of(core_v1, namespace, "old"):
        core_v1.patch_namespaced_pod(pod["metadata"]["name"], namespace,
                                     {"metadata": {"annotations": {CHECKPOINT: stamp}}})
    # victimcost ignores a checkpoint in the future: urgent comes once it is past on the scheduler's clock too
    wait_for(lambda: time.time() >= checkpoint + CLOCK_SLACK, TIMEOUT, interval=0.05, what="the checkpoint past")

    vcjob_cluster.job("urgent", queue, [task("worker", 2)], 2, priorityClassName=high)
    wait_running(core_v1, namespace, "urgent", 2)
    victims = wait_for(lambda: (v := evicted_uids(core_v1, namespace)) and len(v) >= 2 and v, TIMEOUT,
                       interval=0.2, what="2 Evict events")
    assert victims == set(old), f"evicted {victims}: old's pods are {set(old)}, fresh's {set(fresh)}"
    assert set(running(core_v1, namespace, "fresh")) == set(fresh), "fresh, which would lose more work, runs on"


@pytest.mark.scheduler_conf(LEGACY_CONF)
def test_pods_of_a_job_above_its_minimum_are_evicted_rather_than_a_gang_at_its_minimum(
    vcjob_cluster, core_v1, custom, namespace
):
    vcjob_cluster.nodes(1, gpus=5)
    queue = vcjob_cluster.queue("vbreak")
    low, high = (vcjob_cluster.priority_class(n, v) for n, v in (("low", 10), ("high", 1000)))
    vcjob_cluster.job("elastic", queue, [task("worker", 3)], 1, priorityClassName=low)
    elastic = wait_running(core_v1, namespace, "elastic", 3)
    a_second_after(custom, namespace, "elastic")  # the legacy order (the newer first) is then no tie
    vcjob_cluster.job("rigid", queue, [task("worker", 2)], 2, priorityClassName=low)
    rigid = wait_running(core_v1, namespace, "rigid", 2)

    vcjob_cluster.job("urgent", queue, [task("worker", 2)], 2, priorityClassName=high)
    wait_running(core_v1, namespace, "urgent", 2)
    victims = wait_for(lambda: (v := evicted_uids(core_v1, namespace)) and len(v) >= 2 and v, TIMEOUT,
                       interval=0.2, what="2 Evict events")
    assert len(victims) == 2 and victims <= set(elastic), \
        f"evicted {victims}: elastic's pods are {set(elastic)}, rigid's {set(rigid)}"
    assert set(running(core_v1, namespace, "rigid")) == set(rigid), "rigid, at its minimum, runs on whole"
    assert len(set(running(core_v1, namespace, "elastic")) & set(elastic)) == 1, "elastic keeps its minimum"
