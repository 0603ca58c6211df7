"""`explain` names the gate, the numbers and the way out, from the objects the scheduler publishes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from scheduler.api import reasons as R
from scheduler.api.decision import REASONS_ANNOTATION, Code, Status, publish
from scheduler.api.messages import message as render_message
from scheduler.api.resources import GPU
from scheduler.cli.ctl.explain import Facts, Gate, explain, rank_in_queue, render


def podgroup(name: str, queue: str = "q", phase: str = "Pending", reasons: Sequence[R.Reason] = (),
             reason: str = "NotEnqueued", created: str = "2026-01-01T00:00:00Z", priority_class: str = "",
             message: str = "", annotate: bool = True, condition: bool = True) -> dict[str, Any]:
    """A PodGroup as the scheduler leaves it: the condition rendered from `reasons`, and the reasons published
    as the annotation (unless `annotate` is False, as an older scheduler leaves it)."""
    status: dict[str, Any] = {"phase": phase}
    text = message or render_message(reasons)
    if text and condition:
        status["conditions"] = [{"type": "Unschedulable", "status": "True", "reason": reason, "message": text}]
    spec: dict[str, Any] = {"queue": queue, "minMember": 4}
    if priority_class:
        spec["priorityClassName"] = priority_class
    meta: dict[str, Any] = {"name": name, "namespace": "ml", "creationTimestamp": created}
    if reasons and annotate:
        meta["annotations"] = {REASONS_ANNOTATION: publish(Status(Code.UNSCHEDULABLE, tuple(reasons), "gang"))}
    return {"metadata": meta, "spec": spec, "status": status}


def queue(name: str = "q", state: str = "Open", **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": spec, "status": {"state": state}}


def gpus(n: float) -> int:
    return int(n * 1000)


HEAD = R.GangNotReady(4, 4, 0, 4)
GANG = (HEAD, R.ResourceShortfall(GPU, gpus(16), gpus(13), R.NODES, 4, 4))
TOPO = (HEAD, R.TopologyLimit(2, "rack", GPU, gpus(8), gpus(6), gpus(6), "zone:z/rack:a"))
CAP = (R.QueueLimit("team-a", R.CAPABILITY, GPU, gpus(16), total=gpus(20), requested=gpus(8), allocated=gpus(12)),)
OVER = (R.OvercommitLimit(GPU, gpus(16), 1.2, gpus(19), gpus(10), gpus(4), gpus(8), gpus(22)),)
@dataclass(frozen=True)
class Case:
    name: str
    facts: Facts
    gate: Gate
    says: tuple[str, ...] = ()
    unblock: tuple[str, ...] = ()
    numbers: dict[str, str] = field(default_factory=dict)
    published: str = ""


def facts(pg: dict[str, Any] | None, q: dict[str, Any] | None = None, job: dict[str, Any] | None = None,
          **extra: Any) -> Facts:
    return Facts(target="job ml/train", namespace="ml", job=job, podgroup=pg,
                 queue=q if q is not None else queue(), **extra)


CASES = [
    Case("a closed queue holds the job even before the scheduler says so",
         facts(podgroup("train"), queue(state="Closed")), Gate.QUEUE_CLOSED,
         says=("queue q is Closed",), unblock=("open queue q",)),
    Case("a queue that does not exist",
         Facts("job ml/train", "ml", podgroup=podgroup("train", reasons=[R.QueueMissing("q")])),
         Gate.QUEUE_MISSING, unblock=("create queue q",)),
    Case("queue capability: raise it or wait for the shortfall to be released",
         facts(podgroup("train", queue="team-a", reasons=CAP), queue("team-a")), Gate.QUEUE_CAPABILITY,
         says=("20 nvidia.com/gpu would exceed 16",),
         unblock=("raise queue team-a capability nvidia.com/gpu to at least 20",
                  "wait for 4 nvidia.com/gpu of queue team-a to be released"),
         numbers={"allocated": "12", "requested": "8", "short": "4"}),
    Case("queue capability smaller than the request itself: lower the request",
         facts(podgroup("train", queue="tiny", reasons=[R.QueueLimit("tiny", R.CAPABILITY, GPU, gpus(4), gpus(8),
                                                                     gpus(8))]), queue("tiny")),
         Gate.QUEUE_CAPABILITY, unblock=("lower the job's request",)),
    Case("the overcommit gate",
         facts(podgroup("train", reasons=OVER)), Gate.OVERCOMMIT,
         says=("22 > 19",), unblock=("wait for 3 nvidia.com/gpu",), numbers={"used": "10"}),
    Case("a gang short of GPUs: free them or lower minAvailable",
         facts(podgroup("train", phase="Inqueue", reasons=GANG, reason="NotEnoughResources")), Gate.GANG_SHORTFALL,
         unblock=("free 3 more nvidia.com/gpu on nodes the gang may use", "lower minAvailable (now 4)"),
         numbers={"minAvailable": "4", "tasks unschedulable": "4/4"}),
    Case("hard topology with no rack large enough",
         facts(podgroup("train", phase="Inqueue", reasons=TOPO, reason="NotEnoughResources")), Gate.TOPOLOGY,
         says=("the best rack has 6 free",),
         unblock=("free 2 more nvidia.com/gpu inside one rack", "highestTierAllowed > 2"),
         numbers={"highestTierAllowed": "2"}),
    Case("fragmented free GPUs",
         facts(podgroup("train", phase="Inqueue", reason="NotEnoughResources", reasons=(
             R.GangNotReady(2, 2, 0, 2), R.Fragmented(((GPU, gpus(8)),), ((GPU, gpus(3)),), "n1")))),
         Gate.FRAGMENTED, numbers={"most free on one node": "nvidia.com/gpu 3 (n1)"}),
    Case("too few live pods",
         facts(podgroup("train", phase="Inqueue", reason="NotEnoughTasks", reasons=[R.TooFewTasks("", 2, 4)])),
         Gate.GANG_TASKS,
         unblock=("lower its minAvailable to 2",)),
    Case("an aborted job says how to resume it",
         facts(podgroup("train"), job={"metadata": {"name": "train"}, "status": {"state": {"phase": "Aborted"}}}),
         Gate.JOB_STOPPED, unblock=("volcano-py job resume train -n ml",)),
    Case("a job in a queue with child queues (hierarchical capacity)",
         facts(podgroup("train", queue="org", reasons=[R.QueueNotLeaf("org", ("team-1", "team-2"))]), queue("org")),
         Gate.QUEUE_NOT_LEAF,
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
    Case("an older scheduler's message without published reasons is not parsed, and explain says so",
         facts(podgroup("train", message="queue q capability nvidia.com/gpu 16: 12 allocated + 0 admitted + 8 "
                        "requested = 20 > 16 (short nvidia.com/gpu 4)")), Gate.NO_REASONS,
         says=("no structured reasons published",)),
    Case("a warning event without published reasons is shown, not parsed",
         facts(podgroup("train"), events=[
             {"type": "Warning", "message": "old", "lastTimestamp": "2026-01-01T00:00:00Z"},
             {"type": "Warning", "message": "newer", "lastTimestamp": "2026-01-01T00:01:00Z"}]),
         Gate.NO_REASONS, published="newer"),
    Case("published reasons decide even when the condition is gone",
         facts(podgroup("train", queue="team-a", reasons=CAP, condition=False)), Gate.QUEUE_CAPABILITY),
    Case("reasons this explain cannot read are reported, not guessed",
         facts({**podgroup("train", reasons=CAP), "metadata": {"name": "train", "annotations": {
             REASONS_ANNOTATION: '{"version": 99}'}}}), Gate.NO_REASONS, says=("cannot be read",)),
    Case("a queue that holds its deserved share",
         facts(podgroup("train", phase="Inqueue", reasons=(HEAD, R.QueueOverused("q")))), Gate.QUEUE_SHARE),
    Case("a starving gang reserving resources",
         facts(podgroup("train", phase="Inqueue", reasons=(HEAD, R.Reserving(400.0, 2, 3, 4)))), Gate.RESERVING),
    Case("a queue whose parent does not exist",
         facts(podgroup("train", reasons=[R.QueueParentMissing("q", "q", "org-z")])), Gate.QUEUE_TREE,
         unblock=("fix spec.parent of queue q",)),
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
    if case.published:
        assert ex.published == case.published, text


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
    ex = explain(facts(podgroup("train", queue="team-a", reasons=CAP), queue("team-a")))
    text = render(ex)
    assert len(text.splitlines()) <= 24
    assert text.startswith("job ml/train: Pending in queue team-a")
    assert "#1 of 1 waiting" in text


# ---- evictions (issue 32): from the events' cause annotation --------------------------------------------------

def _evict_event(reason: str, kind: str, name: str, cause: str, at: str) -> dict[str, Any]:
    return {"metadata": {"namespace": "ml", "annotations": {"scheduling.volcano-py.io/eviction-cause": cause}},
            "involvedObject": {"kind": kind, "name": name, "namespace": "ml"}, "reason": reason,
            "type": "Normal" if kind == "PodGroup" else "Warning", "message": "as written", "lastTimestamp": at}


def test_explain_shows_the_evictions_a_job_suffered_and_caused() -> None:
    from scheduler.api.evictions import cause_json
    from scheduler.api.snapshot import EvictCause
    from scheduler.cli.ctl.explain import to_dict

    by_high = EvictCause("gangpreempt", "ml/high", "whole bundle", breaks_gang=True)
    on_low = cause_json(by_high, "ml/low-0", "ml/low")
    other = cause_json(EvictCause("reclaim", "ml/x", "lowest priority first"), "ml/y-0", "ml/y")
    pod_events = [_evict_event("Evict", "Pod", "low-0", on_low, "2026-01-01T00:00:12Z"),
                  _evict_event("Evict", "Pod", "y-0", other, "2026-01-01T00:00:13Z"),
                  _evict_event("Evict", "Pod", "bad", "{not json", "2026-01-01T00:00:14Z")]
    low = explain(Facts("job ml/low", "ml", podgroup=podgroup("low", phase="Running", condition=False),
                        queue=queue(), pod_evictions=pod_events))
    assert [(e.caused, e.pod, e.by, e.rule, e.breaks_gang) for e in low.evictions] == [
        (False, "ml/low-0", "ml/high", "whole bundle", True)]
    assert "evicted:  2026-01-01T00:00:12Z pod ml/low-0 (gangpreempt for ml/high, whole bundle, gang broken)" \
        in render(low)
    caused = [_evict_event("EvictedForJob", "PodGroup", "high", on_low, "2026-01-01T00:00:12Z")]
    high = explain(Facts("job ml/high", "ml", podgroup=podgroup("high", phase="Running", condition=False),
                         queue=queue(), events=caused, pod_evictions=pod_events))
    assert [(e.caused, e.pod, e.job) for e in high.evictions] == [(True, "ml/low-0", "ml/low")]
    assert to_dict(high)["evictions"][0]["side"] == "caused"
