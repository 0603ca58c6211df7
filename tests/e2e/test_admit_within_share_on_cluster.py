"""proportion's `admitWithinShare` on the real apiserver (issue 35): a gang its queue's deserved share cannot hold
waits at admission, reserving nothing, so another queue's job that fits is admitted and runs on the idle GPUs.

One node of 10 GPUs, the only GPUs in the cluster; three queues of weight 1; overcommit's room is 10 x 1.2 = 12
GPUs. `b-run` (5 GPUs, queue b) runs. `a-big` (a 6-GPU gang, queue a) asks: with it, a and b would deserve 5 GPUs
each, short of its 6, so proportion refuses it (QueueLimit, limit `deserved`) and it stays Pending. Then `c-small`
(2 GPUs, queue c) is admitted and runs on the free GPUs. Without the argument, `a-big` is admitted (its queue's
capability, the whole cluster, holds it; overcommit's room too: 5 + 6 <= 12) and waits in allocate for room its
share never gives it, while its 6 GPUs count against overcommit's room: `c-small` (5 + 6 + 2 > 12) would then stay
Pending with 5 GPUs idle. When `b-run` finishes, the other queues ask for less, a deserves 6 and `a-big` runs.

The scheduler and the Job controller run as processes; kwok runs the pods. Each job is created after the previous
one's state was seen on the apiserver, so no cycle sees them in another order.
"""

from __future__ import annotations

import json

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
from scheduler.api.reasons import DESERVED, QueueLimit

__all__ = ["vcjob_cluster"]  # the fixture
GPUS = 10
CONF = """actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: predicates
  - name: proportion
    arguments:
      admitWithinShare: true
  - name: overcommit
  - name: nodeorder
"""


def decision(pg: dict | None) -> Status | None:
    """The decision the scheduler published on the PodGroup (its reasons annotation), if any."""
    text = ((pg or {}).get("metadata", {}).get("annotations") or {}).get(REASONS_ANNOTATION)
    return Status.from_json(json.loads(text)) if text else None


def admitted_or_refused(custom, namespace: str, job: str) -> tuple[str, Status | None] | None:
    """(phase, published decision) once the scheduler admitted the job or published why not."""
    pg = podgroup_of(custom, namespace, job)
    status = decision(pg)
    return (pg_phase(pg), status) if pg_phase(pg) != "Pending" or status is not None else None


@pytest.mark.scheduler_conf(CONF)
def test_a_gang_beyond_its_queues_share_waits_at_admission_and_another_queues_job_runs(
    vcjob_cluster, core_v1, custom, namespace
):
    vcjob_cluster.nodes(1, gpus=GPUS)
    wait_for(lambda: not others_in_cluster(core_v1, custom, namespace, GPUS), TIMEOUT,
             what="this test's queues alone in the cluster")
    a, b, c = (vcjob_cluster.queue(name) for name in ("a", "b", "c"))
    vcjob_cluster.job("b-run", b, [task("worker", 5)], 5)
    b_run = wait_running(core_v1, namespace, "b-run", 5)

    # a-big: with it asking, a deserves 5 of the 10 GPUs (b asks 5), short of its 6
    vcjob_cluster.job("a-big", a, [task("worker", 6)], 6)
    phase_big, status = wait_for(lambda: admitted_or_refused(custom, namespace, "a-big"), TIMEOUT, interval=0.2,
                                 what="a-big's PodGroup admitted or refused")
    assert phase_big == "Pending", "a-big was admitted though its queue's share cannot hold it"
    assert status is not None and status.plugin == "proportion", status
    limit = next(r for r in status.reasons if isinstance(r, QueueLimit) and r.resource == GPU_RESOURCE)
    assert (limit.queue, limit.limit, limit.limit_amount, limit.total, limit.requested, limit.allocated,
            limit.admitted) == (a, DESERVED, 5_000, 6_000, 6_000, 0, 0), limit
    condition = next(cd for cd in podgroup_of(custom, namespace, "a-big")["status"].get("conditions") or ()
                     if cd.get("type") == "Unschedulable")
    assert condition.get("reason") == "NotEnqueued", condition

    # c-small, in another queue, fits its share and the admission room a-big does not fill: it runs
    vcjob_cluster.job("c-small", c, [task("worker", 2)], 2)
    wait_running(core_v1, namespace, "c-small", 2)
    assert pg_phase(podgroup_of(custom, namespace, "a-big")) == "Pending"
    assert pods_of(core_v1, namespace, "a-big") == []

    # b-run finishes: b asks nothing, a deserves 6 (c asks 2) and a-big is admitted and runs
    for pod in pods_of(core_v1, namespace, "b-run"):
        core_v1.patch_namespaced_pod(pod["metadata"]["name"], namespace,
                                     {"metadata": {"annotations": {COMPLETE_ANNOTATION: "Succeeded"}}})
    wait_running(core_v1, namespace, "a-big", 6)
    assert not set(running(core_v1, namespace, "b-run")) & set(b_run)
    assert len(running(core_v1, namespace, "c-small")) == 2
