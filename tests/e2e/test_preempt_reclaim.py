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

import subprocess
import sys
import time
from pathlib import Path

import pytest
from controlplane import REPO_ROOT, assert_no_overcommit, wait_for
from kubernetes import client
from vcjob_cluster import (
    BATCH,
    CONF,
    SCHED,
    TIMEOUT,
    evicted_uids,
    pods_of,
    running,
    scheduler_events,
    task,
    vcjob_cluster,
    wait_running,
)

from scheduler.api.evictions import POD_CAUSE, POD_NOTICE, read_cause
from scheduler.api.timestamps import parse_time

__all__ = ["vcjob_cluster"]  # the fixture
REPO = Path(__file__).resolve().parents[2]

# ---------------------------------------------------------------------------------------------- preempt


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

# ---------------------------------------------------------------------------------------------- pdb

# The same conf with Volcano's pdb plugin beside priority, gang and conformance.
PDB_CONF = CONF.replace("  - name: conformance\n", "  - name: conformance\n  - name: pdb\n", 1)


def considered(custom, namespace: str, job: str) -> bool:
    """The scheduler ran a cycle (its preempt included) with the job's PodGroup Inqueue and not placed: the
    status it wrote at the cycle's end says Inqueue with an Unschedulable condition."""
    items = custom.list_namespaced_custom_object(SCHED, "v1beta1", namespace, "podgroups")["items"]
    for pg in items:
        if any(o.get("name") == job for o in pg["metadata"].get("ownerReferences") or ()):
            status = pg.get("status") or {}
            return status.get("phase") == "Inqueue" and any(
                c.get("type") == "Unschedulable" for c in status.get("conditions") or ())
    return False


@pytest.mark.parametrize("vcjob_cluster", [PDB_CONF], indirect=True, ids=["pdb"])
def test_a_pdb_with_no_disruption_allowed_keeps_its_pods_from_preempt_until_it_allows_one(
    vcjob_cluster, core_v1, custom, namespace
):
    """1 node x 2 GPUs. `guarded` (2 pods, minAvailable 1, low priority) runs under a PodDisruptionBudget whose
    status allows no disruption (no disruption controller runs here: the status is what the test writes).
    `urgent` (1 pod, high priority) arrives: the scheduler considers it and evicts nothing. The PDB's status then
    allows one disruption: preempt evicts one pod of `guarded` and `urgent` runs."""
    policy = client.PolicyV1Api(core_v1.api_client)
    app = f"guarded-{vcjob_cluster.tag}"
    policy.create_namespaced_pod_disruption_budget(namespace, {
        "metadata": {"name": "guarded"}, "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": app}}}})
    vcjob_cluster.nodes(1, gpus=2)
    queue = vcjob_cluster.queue("pdb")
    low, high = (vcjob_cluster.priority_class(n, v) for n, v in (("low", 10), ("high", 99)))
    vcjob_cluster.job("guarded", queue, [task("worker", 2, min_available=1, labels={"app": app})], 1,
                      priorityClassName=low)
    guarded = wait_running(core_v1, namespace, "guarded", 2)

    vcjob_cluster.job("urgent", queue, [task("worker", 1)], 1, priorityClassName=high)
    wait_for(lambda: considered(custom, namespace, "urgent"), TIMEOUT, interval=0.2,
             what="urgent considered by a cycle")
    assert evicted_uids(core_v1, namespace) == set()
    assert set(running(core_v1, namespace, "guarded")) == set(guarded)
    assert running(core_v1, namespace, "urgent") == {}

    policy.patch_namespaced_pod_disruption_budget_status("guarded", namespace, {"status": {
        "disruptionsAllowed": 1, "currentHealthy": 2, "desiredHealthy": 1, "expectedPods": 2}})
    wait_running(core_v1, namespace, "urgent", 1)
    victims = wait_for(lambda: evicted_uids(core_v1, namespace), TIMEOUT, interval=0.2, what="an Evict event")
    assert len(victims) == 1 and victims <= set(guarded), victims
    policy.delete_namespaced_pod_disruption_budget("guarded", namespace)
    assert_no_overcommit(core_v1)

# ---------------------------------------------------------------------------------------------- eviction notice


def test_a_queue_notice_annotates_the_victims_and_deletes_them_only_once_it_ran_out(
    vcjob_cluster, core_v1, custom, namespace, control_plane
):
    """1 node x 4 GPUs; queue `notice` annotated `volcano-py.io/eviction-notice: 8s`. `low` (4 pods, minAvailable 1)
    fills it; `high` (2 pods, minAvailable 2, higher priority) preempts 2 of them. The victims are first annotated
    with the deadline and the cause and marked DisruptionTarget, still running, while high waits; they are deleted
    only once the deadline passed, and high then runs. explain shows both sides."""
    notice = 8
    vcjob_cluster.nodes(1, gpus=4)
    queue = vcjob_cluster.queue("notice", annotations={"volcano-py.io/eviction-notice": f"{notice}s"})
    low, high = (vcjob_cluster.priority_class(n, v) for n, v in (("low", 10), ("high", 99)))
    vcjob_cluster.job("low", queue, [task("worker", 4, min_available=1)], 1, priorityClassName=low)
    wait_running(core_v1, namespace, "low", 4)

    vcjob_cluster.job("high", queue, [task("worker", 2)], 2, priorityClassName=high)

    def noticed() -> list[dict]:
        # The notice is two writes (the annotation, then the DisruptionTarget condition through the status
        # subresource): a victim counts once both landed, or the checks below race the second.
        return [p for p in pods_of(core_v1, namespace, "low")
                if POD_NOTICE in (p["metadata"].get("annotations") or {})
                and any(c["type"] == "DisruptionTarget" for c in p["status"].get("conditions") or ())]

    victims = wait_for(lambda: (v := noticed()) and len(v) == 2 and v, TIMEOUT, interval=0.2,
                       what="2 victims given notice")
    high_group = job_podgroup(custom, namespace, "high")
    deadlines = {parse_time(v["metadata"]["annotations"][POD_NOTICE]) for v in victims}
    (deadline,) = deadlines  # one plan, one deadline
    for victim in victims:
        assert victim["metadata"].get("deletionTimestamp") is None, "deleted before its notice ran out"
        assert victim["status"]["phase"] == "Running"
        read = read_cause(victim["metadata"]["annotations"][POD_CAUSE])
        assert read is not None
        cause, pod, _ = read
        assert (cause.action, cause.by, cause.breaks_gang) == ("preempt", f"{namespace}/{high_group}", False)
        assert pod == f"{namespace}/{victim['metadata']['name']}"
        condition = next(c for c in victim["status"].get("conditions") or () if c["type"] == "DisruptionTarget")
        assert (condition["status"], condition["reason"]) == ("True", "PreemptionByScheduler")
        assert "preempt for" in condition["message"]
    assert running(core_v1, namespace, "high") == {}, "high runs before the victims went"

    wait_running(core_v1, namespace, "high", 2)
    assert time.time() >= deadline - 1, "high ran before the notice ran out"  # whole seconds on the apiserver
    assert {v["metadata"]["uid"] for v in victims}.isdisjoint(running(core_v1, namespace, "low"))

    def explained(name: str) -> str:
        proc = subprocess.run([sys.executable, "-m", "scheduler.cli", "explain", name, "-n", namespace,
                               "--kubeconfig", str(control_plane.kubeconfig)], capture_output=True, text=True,
                              cwd=REPO_ROOT, timeout=TIMEOUT)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    out = wait_for(lambda: (o := explained("low")) and o.count("evicted:  ") == 2 and o, TIMEOUT, interval=0.5,
                   what="explain low lists its 2 evictions")
    assert "lowest priority first" in out
    wait_for(lambda: explained("high").count("evicted for it: ") == 2, TIMEOUT, interval=0.5,
             what="explain high lists the 2 evictions made for it")
    assert_no_overcommit(core_v1)


def job_podgroup(custom, namespace: str, job: str) -> str:
    """The PodGroup the Job controller made for `job` (`<job>-<uid>`)."""
    uid = custom.get_namespaced_custom_object(BATCH, "v1alpha1", namespace, "jobs", job)["metadata"]["uid"]
    return f"{job}-{uid}"
