"""`explain` names the gate, the numbers and the way out, from the objects the scheduler publishes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from scheduler.ctl.explain import Facts, Gate, explain, rank_in_queue, render


def podgroup(name: str, queue: str = "q", phase: str = "Pending", message: str = "", reason: str = "NotEnqueued",
             created: str = "2026-01-01T00:00:00Z", priority_class: str = "") -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase}
    if message:
        status["conditions"] = [{"type": "Unschedulable", "status": "True", "reason": reason, "message": message}]
    spec: dict[str, Any] = {"queue": queue, "minMember": 4}
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {"metadata": {"name": name, "namespace": "ml", "creationTimestamp": created}, "spec": spec,
            "status": status}


def queue(name: str = "q", state: str = "Open", **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": spec, "status": {"state": state}}


GANG = ("4/4 tasks in gang unschedulable: pod group is not ready, 0 ready, 4 minAvailable; short nvidia.com/gpu 3: "
        "4 more tasks need nvidia.com/gpu 16, the 4 nodes they may use have nvidia.com/gpu 13 free")
TOPO = ("4/4 tasks in gang unschedulable: pod group is not ready, 0 ready, 4 minAvailable; needs 8 nvidia.com/gpu "
        "inside one rack (hard mode, highestTierAllowed 2); the best rack has 6 free")
CAP = ("queue team-a capability nvidia.com/gpu 16: 12 allocated + 0 admitted + 8 requested = 20 > 16 "
       "(short nvidia.com/gpu 4)")
OVER = ("cluster nvidia.com/gpu 16 x overcommit-factor 1.2 = 19: 10 used + 4 admitted + 8 requested = 22 > 19 "
        "(short nvidia.com/gpu 3)")


@dataclass(frozen=True)
class Case:
    name: str
    facts: Facts
    gate: Gate
    says: tuple[str, ...] = ()
    unblock: tuple[str, ...] = ()
    numbers: dict[str, str] = field(default_factory=dict)


def facts(pg: dict[str, Any] | None, q: dict[str, Any] | None = None, job: dict[str, Any] | None = None,
          **extra: Any) -> Facts:
    return Facts(target="job ml/train", namespace="ml", job=job, podgroup=pg,
                 queue=q if q is not None else queue(), **extra)


CASES = [
    Case("a closed queue holds the job even before the scheduler says so",
         facts(podgroup("train"), queue(state="Closed")), Gate.QUEUE_CLOSED,
         says=("queue q is Closed",), unblock=("open queue q",)),
    Case("a queue that does not exist",
         Facts("job ml/train", "ml", podgroup=podgroup("train", message="queue 'q' does not exist")),
         Gate.QUEUE_MISSING, unblock=("create queue q",)),
    Case("queue capability: raise it or wait for the shortfall to be released",
         facts(podgroup("train", queue="team-a", message=CAP), queue("team-a")), Gate.QUEUE_CAPABILITY,
         says=("20 nvidia.com/gpu would exceed 16",),
         unblock=("raise queue team-a capability nvidia.com/gpu to at least 20",
                  "wait for 4 nvidia.com/gpu of queue team-a to be released"),
         numbers={"allocated": "12", "requested": "8", "short": "4"}),
    Case("queue capability smaller than the request itself: lower the request",
         facts(podgroup("train", queue="tiny", message="queue tiny capability nvidia.com/gpu 4: 0 allocated + "
                        "0 admitted + 8 requested = 8 > 4 (short nvidia.com/gpu 4)"), queue("tiny")),
         Gate.QUEUE_CAPABILITY, unblock=("lower the job's request",)),
    Case("the overcommit gate",
         facts(podgroup("train", message=OVER)), Gate.OVERCOMMIT,
         says=("22 > 19",), unblock=("wait for 3 nvidia.com/gpu",), numbers={"used": "10"}),
    Case("a gang short of GPUs: free them or lower minAvailable",
         facts(podgroup("train", phase="Inqueue", message=GANG, reason="NotEnoughResources")), Gate.GANG_SHORTFALL,
         unblock=("free 3 more nvidia.com/gpu on nodes the gang may use", "lower minAvailable (now 4)"),
         numbers={"minAvailable": "4", "tasks unschedulable": "4/4"}),
    Case("hard topology with no rack large enough",
         facts(podgroup("train", phase="Inqueue", message=TOPO, reason="NotEnoughResources")), Gate.TOPOLOGY,
         says=("the best rack has 6 free",),
         unblock=("free 2 more nvidia.com/gpu inside one rack", "highestTierAllowed > 2"),
         numbers={"highestTierAllowed": "2"}),
    Case("fragmented free GPUs",
         facts(podgroup("train", phase="Inqueue", reason="NotEnoughResources", message=(
             "2/2 tasks in gang unschedulable: pod group is not ready, 0 ready, 2 minAvailable; enough "
             "nvidia.com/gpu 8 is free in total but it is fragmented: the most on one node is nvidia.com/gpu 3 "
             "(n1)"))), Gate.FRAGMENTED, numbers={"most free on one node": "nvidia.com/gpu 3 (n1)"}),
    Case("too few live pods",
         facts(podgroup("train", phase="Inqueue", reason="NotEnoughTasks", message=(
             "Not enough valid tasks for gang-scheduling, valid: 2, min: 4"))), Gate.GANG_TASKS,
         unblock=("lower its minAvailable to 2",)),
    Case("an aborted job says how to resume it",
         facts(podgroup("train"), job={"metadata": {"name": "train"}, "status": {"state": {"phase": "Aborted"}}}),
         Gate.JOB_STOPPED, unblock=("volcano-py job resume train -n ml",)),
    Case("a job in a queue with child queues (hierarchical capacity)",
         facts(podgroup("train", queue="org", message="queue org has child queues (team-1, team-2): jobs go to "
                        "leaf queues"), queue("org")), Gate.QUEUE_NOT_LEAF,
         unblock=("submit the job to one of org's child queues: team-1, team-2",),
         numbers={"child queues": "team-1, team-2"}),
    Case("a job whose PodGroup the controllers have not made", facts(None), Gate.NO_PODGROUP),
    Case("a running gang is not held", facts(podgroup("train", phase="Running")), Gate.NOT_HELD),
    Case("a running gang whose master waits for its workers (dependsOn)",
         facts(podgroup("train", phase="Running"), job={
             "metadata": {"name": "train"},
             "spec": {"tasks": [{"name": "master", "replicas": 1, "dependsOn": {"name": ["worker"]}},
                                {"name": "worker", "replicas": 4}]},
             "status": {"state": {"phase": "Running"},
                        "taskStatusCount": {"worker": {"phase": {"Running": 3, "Pending": 1}}}}}),
         Gate.TASK_ORDER, says=("task master has no pods yet: it waits for worker 3/4 running",),
         numbers={"worker running": "3/4"}),
    Case("a Pending PodGroup with no word from the scheduler is waiting", facts(podgroup("train")), Gate.WAITING),
    Case("the latest warning event stands in for a missing condition",
         facts(podgroup("train"), events=[
             {"type": "Warning", "message": "old", "lastTimestamp": "2026-01-01T00:00:00Z"},
             {"type": "Warning", "message": CAP, "lastTimestamp": "2026-01-01T00:01:00Z"}]),
         Gate.QUEUE_CAPABILITY),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_explain(case: Case) -> None:
    ex = explain(case.facts)
    text = render(ex)
    assert ex.gate == case.gate, text
    for phrase in case.says:
        assert phrase in ex.summary, text
    for phrase in case.unblock:
        assert any(phrase in u for u in ex.unblock), text
    numbers = dict(ex.numbers)
    for key, value in case.numbers.items():
        assert numbers.get(key, "").startswith(value), text


def test_rank_is_by_priority_then_age_among_waiting_podgroups() -> None:
    mine = podgroup("mine", created="2026-01-01T00:05:00Z")
    others = [
        podgroup("older", created="2026-01-01T00:01:00Z"),
        podgroup("urgent", created="2026-01-01T00:09:00Z", priority_class="high"),
        podgroup("younger", created="2026-01-01T00:07:00Z"),
        podgroup("running", phase="Running", created="2026-01-01T00:00:00Z"),
    ]
    assert rank_in_queue(mine, others, {"high": 1000}) == (3, 4)


def test_render_fits_one_screen() -> None:
    ex = explain(facts(podgroup("train", queue="team-a", message=CAP), queue("team-a")))
    text = render(ex)
    assert len(text.splitlines()) <= 24
    assert text.startswith("job ml/train: Pending in queue team-a")
    assert "#1 of 1 waiting" in text
