"""A pod with `spec.schedulingGates` is placed by no scheduler until the gates go (Kubernetes' PodSchedulingReadiness,
which Volcano honours: TaskInfo.SchGated, skipped by allocate, backfill, preempt and reclaim). Its gang waits and
says so (Volcano's e2e "Scheduling gates block vcjob. vcjob allocated after removed." waits for the PodGroup's
Unschedulable event), and is placed once the gates are removed."""

from __future__ import annotations

import copy

from scheduler.api.reasons import GangNotReady, SchedulingGated
from scheduler.sim.objects import pod_object
from scheduler.testing import cluster


def _gated(name: str, **kwargs: object) -> dict[str, object]:
    pod = pod_object(name, **kwargs)  # type: ignore[arg-type]
    pod["spec"]["schedulingGates"] = [{"name": "example.com/g1"}]
    return pod


def test_a_gated_gang_waits_with_a_reason_and_runs_once_ungated() -> None:
    c = cluster().node("n", cpu="4", memory="8Gi")
    c.sim.add_podgroup({"metadata": {"name": "j", "namespace": "default"}, "spec": {"minMember": 2, "queue": "default"},
                        "status": {"phase": "Inqueue"}})
    pods = [_gated(f"j-{i}", group="j", cpu="1") for i in range(2)]
    for pod in pods:
        c.sim.add_pod(pod)
    for _ in range(3):
        c.cycle()
    assert c.sim.bound("j") == {}
    condition, decision = c.sim.condition("j"), c.sim.decision("j")
    assert condition is not None and condition["status"] == "True"
    assert decision is not None and SchedulingGated(2, "example.com/g1") in decision.reasons
    assert any(e.kind == "PodGroup" and e.reason == "Unschedulable" for _, e in c.sim.events)
    for pod in pods:
        c.sim.delete_pod(f"default/{pod['metadata']['name']}")
        ungated = copy.deepcopy(pod)
        del ungated["spec"]["schedulingGates"]
        c.sim.add_pod(ungated)
    c.cycle()
    assert sorted(c.sim.bound("j")) == ["j-0", "j-1"]


def test_a_gated_pod_without_requests_is_not_backfilled() -> None:
    c = cluster().node("n")
    c.sim.add_pod(_gated("be", cpu=None, memory=None))
    c.cycles(2)
    assert c.sim.pods["default/be"].manifest["spec"].get("nodeName") is None


def test_gated_tasks_do_not_make_up_a_gang() -> None:
    """Two of three pods gated, minMember 2: the one ungated pod alone is too few, so nothing binds."""
    c = cluster().node("n", cpu="4")
    c.sim.add_podgroup({"metadata": {"name": "j", "namespace": "default"}, "spec": {"minMember": 2, "queue": "default"},
                        "status": {"phase": "Inqueue"}})
    c.sim.add_pod(pod_object("j-0", group="j"))
    for i in (1, 2):
        c.sim.add_pod(_gated(f"j-{i}", group="j"))
    c.cycles(2)
    assert c.sim.bound("j") == {}
    decision = c.sim.decision("j")
    assert decision is not None
    assert decision.reasons[:2] == (GangNotReady(3, 3, 0, 2), SchedulingGated(2, "example.com/g1"))


def test_gated_pods_reserve_nothing_at_enqueue() -> None:
    """Volcano's e2e "Scheduling gated task will not consume inqueue resources": a job admitted for the whole
    cluster whose pods are all gated leaves room for two half-cluster jobs (DeductSchGatedResources)."""
    c = cluster().node("n", cpu="4", memory="16Gi")
    c.sim.add_podgroup({"metadata": {"name": "gated", "namespace": "default"},
                        "spec": {"minMember": 4, "queue": "default", "minResources": {"cpu": "4"}},
                        "status": {"phase": "Inqueue"}})
    for i in range(4):
        c.sim.add_pod(_gated(f"gated-{i}", group="gated", cpu="1"))
    for name in ("job1", "job2"):
        c.job(name, replicas=2, cpu="1", min_resources={"cpu": "2"})
    c.cycles(3)
    assert (len(c.sim.bound("job1")), len(c.sim.bound("job2")), len(c.sim.bound("gated"))) == (2, 2, 0)

