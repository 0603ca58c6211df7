"""Table-driven tests of each built-in plugin and action on the in-memory cluster."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from scheduler.api import reasons as R
from scheduler.api.decision import ABSTAIN as ABSTAIN_, SUCCESS, unschedulable
from scheduler.api.job import TaskInfo
from scheduler.api.reasons import NotPipelined
from scheduler.api.resources import Resource
from scheduler.framework import points as P
from scheduler.plugins.conformance import ConformancePlugin
from scheduler.testing import ClusterBuilder, cluster, conf_from_tiers, node_filters, pod_object


# ---- predicates -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Placement:
    name: str
    nodes: tuple[tuple[str, dict[str, Any]], ...]
    pod: dict[str, Any]
    expected_node: str | None
    reason: R.NodeFilter | None = None  # what turned the node away


GPU_ZONE = {"topology.kubernetes.io/zone": "a"}
PLACEMENTS = [
    Placement("a nodeSelector picks the labelled node", (("n1", {}), ("n2", {"labels": GPU_ZONE})),
              {"node_selector": GPU_ZONE}, "n2"),
    Placement("a nodeSelector nothing matches leaves the pod pending", (("n1", {}),),
              {"node_selector": GPU_ZONE}, None, R.NodeFilter(R.NODE_AFFINITY)),
    Placement(
        "required node affinity In picks the matching node",
        (("n1", {"labels": {"gpu": "a100"}}), ("n2", {"labels": {"gpu": "h100"}})),
        {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["h100"]}]}]}}}},
        "n2",
    ),
    Placement(
        "required node affinity NotIn avoids the node",
        (("n1", {"labels": {"gpu": "a100"}}), ("n2", {"labels": {"gpu": "h100"}})),
        {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "gpu", "operator": "NotIn", "values": ["h100"]}]}]}}}},
        "n1",
    ),
    Placement("an unschedulable node is skipped", (("n1", {"unschedulable": True}),), {}, None,
              R.NodeFilter(R.NODE_UNSCHEDULABLE)),
    Placement("a NotReady node is skipped", (("n1", {"ready": False}),), {}, None, R.NodeFilter(R.NODE_NOT_READY)),
    Placement("a full node by pod count is skipped", (("n1", {"pods": 0}),), {}, None,
              R.NodeFilter(R.TOO_MANY_PODS)),
    Placement("a PreferNoSchedule taint does not forbid", (("n1", {"taints": [
        {"key": "k", "value": "v", "effect": "PreferNoSchedule"}]}),), {}, "n1"),
    Placement("a NoExecute taint forbids", (("n1", {"taints": [{"key": "k", "effect": "NoExecute"}]}),), {}, None,
              R.NodeFilter(R.TAINT_TOLERATION, "k")),
    Placement("too little memory is named", (("n1", {"memory": "1Gi"}),), {"memory": "2Gi"}, None,
              R.NodeFilter(R.INSUFFICIENT, "memory")),
]


@pytest.mark.parametrize("case", PLACEMENTS, ids=lambda c: c.name)
def test_predicates(case: Placement) -> None:
    c = cluster()
    for name, kwargs in case.nodes:
        c.node(name, gpu=8, **kwargs)
    c.job("j", replicas=1, gpu=1, **case.pod)
    c.cycle()
    bound = c.sim.bound("j")
    if case.expected_node is None:
        assert bound == {}
        assert node_filters(c.sim.reasons("j")) == {case.reason}
    else:
        assert bound == {"j-0": case.expected_node}


# ---- priority -------------------------------------------------------------------------------------------
def test_priority_orders_tasks_within_a_job_when_only_some_fit() -> None:
    c = cluster().priority_class("high", 100).node("n1", gpu=1)
    c.sim.add_podgroup({"metadata": {"name": "g"}, "spec": {"minMember": 1}})
    c.sim.add_pod(pod_object("low-task", group="g", gpu=1))
    c.sim.add_pod(pod_object("high-task", group="g", gpu=1, priority_class="high"))
    c.cycle()
    assert c.sim.bound("g") == {"high-task": "n1"}


def test_among_equal_priority_the_older_job_goes_first() -> None:
    c = cluster().node("n1", gpu=4).job("older", replicas=4, gpu=1)
    c.sim.now += 5
    c.job("newer", replicas=4, gpu=1)
    c.cycle()
    assert len(c.sim.bound("older")) == 4 and c.sim.bound("newer") == {}


# ---- conformance ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Victim:
    name: str
    namespace: str
    priority: int
    offered: bool


VICTIMS = [
    Victim("a normal pod may be a victim", "team-a", 0, True),
    Victim("a kube-system pod is never a victim", "kube-system", 0, False),
    Victim("a system-cluster-critical pod is never a victim", "team-a", 2_000_000_000, False),
]


@pytest.mark.parametrize("case", VICTIMS, ids=lambda c: c.name)
def test_conformance_filters_victims(case: Victim) -> None:
    from scheduler.cycle import builtin_default_conf
    from scheduler.framework.session import Session

    c = cluster().node("n1")
    ssn = Session(c.sim.snapshot(), builtin_default_conf(), {"conformance": ConformancePlugin})
    task = TaskInfo("x", "x", case.namespace, "j", Resource(), priority=case.priority)
    preemptor = TaskInfo("p", "p", "team-a", "k", Resource())
    assert (ssn.tiers.run(P.PREEMPTABLE, preemptor, [task]) == [task]) is case.offered
    assert (ssn.tiers.run(P.RECLAIMABLE, preemptor, [task]) == [task]) is case.offered


# ---- enqueue ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Admission:
    name: str
    build: Any
    phase: str
    reason: R.Reason | None = None


ADMISSIONS = [
    # Inqueue while its pods are being bound; Running once they are on nodes, the next cycle (Volcano's
    # getPodGroupPhase counts running, bound and finished pods, not allocated ones).
    Admission("a job in an open queue is admitted", lambda: cluster().node("n", gpu=1).job("j", gpu=1), "Inqueue"),
    Admission("a job without pods yet is admitted to Inqueue", lambda: cluster().node("n").job("j", replicas=0),
              "Inqueue"),
    Admission(
        "a closed queue admits nothing and says so",
        lambda: cluster().node("n", gpu=1).queue("q", state="Closed").job("j", queue="q", gpu=1),
        "Pending",
        R.QueueClosed("q", "Closed"),
    ),
    Admission("a missing queue is named", lambda: cluster().node("n", gpu=1).job("j", queue="nope", gpu=1), "Pending",
              R.QueueMissing("nope")),
]


@pytest.mark.parametrize("case", ADMISSIONS, ids=lambda c: c.name)
def test_enqueue(case: Admission) -> None:
    c: ClusterBuilder = case.build()
    c.cycle()
    pg = c.sim.podgroup("j")
    assert pg["status"]["phase"] == case.phase
    if case.reason:
        decision = c.sim.decision("j")
        assert decision is not None and decision.reasons == (case.reason,) and decision.plugin == "enqueue"
        condition = c.sim.condition("j")
        assert condition is not None and condition["reason"] == "NotEnqueued"
        assert any(e.reason == "Unschedulable" and e.message == condition["message"] for _, e in c.sim.events)


def test_without_enqueue_in_the_actions_allocate_admits_pending_jobs_itself() -> None:
    """Volcano's allocate moves a Pending PodGroup to Inqueue when no enqueue action is configured
    (actions/allocate/allocate.go); its e2e spec "allocate work even not config enqueue action" relies on it."""
    conf = conf_from_tiers(("priority", "gang"), ("predicates", "proportion"), actions="allocate, backfill")
    c = cluster().node("n", gpu=2).job("j", replicas=2, gpu=1)
    assert c.sim.podgroup("j")["status"]["phase"] == "Pending"
    c.cycle(conf)
    assert c.sim.podgroup("j")["status"]["phase"] == "Inqueue"  # Running once the kubelet reports the pods
    assert len(c.sim.bound("j")) == 2


# ---- backfill --------------------------------------------------------------------------------------------
def test_backfill_places_pods_without_requests_even_on_a_full_node() -> None:
    c = cluster().node("n1", cpu="1", gpu=1).job("big", replicas=1, gpu=1, cpu="1")
    c.job("be", replicas=2, cpu=None, memory=None)
    c.cycle()
    assert len(c.sim.bound("big")) == 1
    assert len(c.sim.bound("be")) == 2


def test_backfill_is_only_for_admitted_jobs_and_respects_the_pod_limit() -> None:
    c = cluster().node("n1", pods=1).job("be", replicas=2, cpu=None, memory=None)
    c.cycle()
    assert len(c.sim.bound("be")) == 1


# ---- statement and combiners ----------------------------------------------------------------------------
def test_a_discarded_statement_restores_every_node_and_task() -> None:
    from scheduler.cycle import builtin_default_conf
    from scheduler.framework.session import Session
    from scheduler.plugins.registry import PLUGINS

    c = cluster().node("n1", gpu=8).job("j", replicas=3, gpu=2)
    ssn = Session(c.sim.snapshot(), builtin_default_conf(), PLUGINS)
    node = ssn.nodes["n1"]
    before = node.idle
    stmt = ssn.statement()
    for task in ssn.jobs["default/j"].tasks.values():
        stmt.allocate(task, node)
    assert node.idle.gpu == 2000
    stmt.discard()
    assert node.idle == before and not node.tasks
    assert all(t.node_name == "" for t in ssn.jobs["default/j"].tasks.values())
    assert ssn.close().binds == []


PERMIT, ABSTAIN, REJECT = SUCCESS, ABSTAIN_, unschedulable(NotPipelined(2))


# ---- the plugin stamp (the combiners: tests/framework/test_combiners.py) --------------------------------
def test_the_session_stamps_the_plugin_that_rejected() -> None:
    c = cluster().node("n1", gpu=1).job("j", gpu=1, node_selector={"pool": "none"})
    c.cycle()
    decision = c.sim.decision("j")
    assert decision is not None and decision.plugin == "gang"  # gang writes the condition
    from scheduler.cycle import builtin_default_conf
    from scheduler.framework.session import Session
    from scheduler.plugins.predicates import PredicatesPlugin

    task = next(iter(c.sim.pods.values())).task
    ssn = Session(c.sim.snapshot(), builtin_default_conf(), {"predicates": PredicatesPlugin})
    status = ssn.tiers.run(P.PREDICATE, task, ssn.node_list)[0]
    assert status.reasons == (R.NodeFilter(R.NODE_AFFINITY),) and status.plugin == "predicates"
