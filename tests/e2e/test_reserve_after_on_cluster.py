"""overcommit's `reserveAfter` on the real apiserver (issue 35): a gang refused at admission that has waited that
long keeps the admission room it lacks, so a smaller job submitted after it is not admitted into that room.

One node of 4 GPUs, the only GPUs in the cluster; overcommit's room is 4 x 1.2 = 4.8 GPUs. `busy` (2 GPUs, queue
`busy`) runs. `big` (a 4-GPU gang, queue `wait`) is refused: 2 used + 4 > 4.8. Once `big` is older than
reserveAfter (1 s from its PodGroup's creationTimestamp, the time the plugin measures from, plus a margin for the
scheduler's estimate of the apiserver's clock), `small` (2 GPUs, same queue, same priority, so behind `big`) is
submitted: it would fit beside `busy` (2 + 2 <= 4.8), and without the argument it is admitted and runs at once,
but `big` reserves its 4 GPUs every cycle, so `small` is refused with `big`'s room counted as admitted. When
`busy` finishes, `big` is admitted and runs first.

`proportion` comes before `overcommit` in the tier, as docs/configuration.md asks; the two queues keep `big`
within its queue's capability, so proportion lets it through to overcommit. The scheduler and the Job controller
run as processes; kwok runs the pods. Every job is created after the previous one's state was seen on the
apiserver, and `small` only once `big` is old enough, so every cycle that sees `small` sees `big` reserving.
"""

from __future__ import annotations

import json
import time

import pytest
from controlplane import COMPLETE_ANNOTATION, GPU_RESOURCE, wait_for
from vcjob_cluster import (
    TIMEOUT,
    others_in_cluster,
    pg_phase,
    podgroup_of,
    pods_of,
    running,
    task,
    vcjob_cluster,
    wait_running,
)

from scheduler.api.decision import REASONS_ANNOTATION, Status
from scheduler.api.reasons import OvercommitLimit
from scheduler.api.timestamps import parse_time

__all__ = ["vcjob_cluster"]  # the fixture
RESERVE_AFTER = 1.0  # seconds
# The scheduler's clock is this machine's corrected by the apiserver's offset as estimated from the whole-second
# Date headers of its answers (scheduler/cache/clock.py): off by up to about half a second plus a round trip even
# on one machine. What the test measures against the scheduler's clock gets this much more.
CLOCK_SLACK = 1.5
GPUS = 4
CONF = f"""actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: predicates
  - name: proportion
  - name: overcommit
    arguments:
      reserveAfter: {RESERVE_AFTER:g}s
  - name: nodeorder
"""


def gpu_limit(pg: dict | None) -> OvercommitLimit | None:
    """overcommit's GPU reason in the decision the scheduler published on the PodGroup, if any."""
    text = ((pg or {}).get("metadata", {}).get("annotations") or {}).get(REASONS_ANNOTATION)
    if not text:
        return None
    status = Status.from_json(json.loads(text))
    return next((r for r in status.reasons if isinstance(r, OvercommitLimit) and r.resource == GPU_RESOURCE), None)


def admitted_or_refused(custom, namespace: str, job: str) -> tuple[str, OvercommitLimit | None] | None:
    """(phase, overcommit's GPU reason) once the scheduler admitted the job or overcommit refused it."""
    pg = podgroup_of(custom, namespace, job)
    limit = gpu_limit(pg)
    return (pg_phase(pg), limit) if pg_phase(pg) != "Pending" or limit is not None else None


@pytest.mark.scheduler_conf(CONF)
def test_a_gang_refused_for_reserve_after_keeps_its_room_from_a_later_small_job(
    vcjob_cluster, core_v1, custom, namespace
):
    vcjob_cluster.nodes(1, gpus=GPUS)
    wait_for(lambda: not others_in_cluster(core_v1, custom, namespace, GPUS), TIMEOUT,
             what="this test alone in the admission room")
    busy_queue, wait_queue = vcjob_cluster.queue("busy"), vcjob_cluster.queue("wait")
    vcjob_cluster.job("busy", busy_queue, [task("worker", 2)], 2)
    busy = wait_running(core_v1, namespace, "busy", 2)

    # big is refused by overcommit: 2 GPUs used + its 4 > the room of 4.8
    vcjob_cluster.job("big", wait_queue, [task("worker", 4)], 4)
    seen = wait_for(lambda: admitted_or_refused(custom, namespace, "big"), TIMEOUT, interval=0.2,
                    what="big's PodGroup admitted or refused by overcommit")
    assert seen[0] == "Pending" and seen[1] is not None, seen
    assert (seen[1].capacity, seen[1].used, seen[1].admitted, seen[1].requested) == (4_800, 2_000, 0, 4_000)

    # small only once big has waited reserveAfter: every cycle that sees small then sees big reserving
    created = parse_time(podgroup_of(custom, namespace, "big")["metadata"]["creationTimestamp"])
    wait_for(lambda: time.time() >= created + RESERVE_AFTER + CLOCK_SLACK, TIMEOUT, interval=0.1,
             what="big older than reserveAfter on the scheduler's clock")
    vcjob_cluster.job("small", wait_queue, [task("worker", 2)], 2)
    phase_small, held = wait_for(lambda: admitted_or_refused(custom, namespace, "small"), TIMEOUT, interval=0.2,
                                 what="small's PodGroup admitted or refused by overcommit")
    assert phase_small == "Pending", "small was admitted into the room big waits for"
    # refused for the reservation alone: 2 used + 2 requested fit the room, big's 4 counted as admitted do not
    assert held is not None and (held.used, held.admitted, held.requested, held.total) == (2_000, 4_000, 2_000, 8_000)
    assert pods_of(core_v1, namespace, "small") == [] and pods_of(core_v1, namespace, "big") == []
    assert pg_phase(podgroup_of(custom, namespace, "big")) == "Pending"

    # busy finishes: big is admitted and runs; small, behind it, still waits (4 used + 2 > 4.8)
    for pod in pods_of(core_v1, namespace, "busy"):
        core_v1.patch_namespaced_pod(pod["metadata"]["name"], namespace,
                                     {"metadata": {"annotations": {COMPLETE_ANNOTATION: "Succeeded"}}})
    wait_running(core_v1, namespace, "big", 4)
    assert not set(running(core_v1, namespace, "busy")) & set(busy)
    assert running(core_v1, namespace, "small") == {}
    assert pg_phase(podgroup_of(custom, namespace, "small")) == "Pending"
