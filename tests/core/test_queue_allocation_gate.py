"""Volcano's queue admission by scheduling gates (feature gate SchedulingGatesQueueAdmission): a pod opted in with
the annotation `scheduling.volcano.sh/queue-allocation-gate: "true"` carries the gate of that name until its queue
passes Allocatable; the scheduler then removes it (never while another gate remains), capacity keeps the room of
an ungated pod still pending, and a pod gated by that gate alone counts as inqueue while other gates do not
(pkg/scheduler/actions/allocate/allocate.go, plugins/capacity/capacity.go, api/job_info.go)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from scheduler.api.fields import QUEUE_ALLOCATION_GATE
from scheduler.api.job import JobInfo, TaskInfo
from scheduler.api.phases import PodGroupPhase, TaskStatus
from scheduler.api.resources import Resource
from scheduler.plugins.shares import reserved_by_admitted
from scheduler.sim.objects import pod_object
from scheduler.testing import ClusterBuilder, cluster, conf_from_tiers

CAPACITY = conf_from_tiers(["priority", "gang"], ["predicates", "capacity"])
PROPORTION = conf_from_tiers(["priority", "gang"], ["predicates", "proportion"])
OTHER = "example.com/other"


def gated_pod(name: str, *, gates: tuple[str, ...] = (QUEUE_ALLOCATION_GATE,), opt_in: bool = True,
              **kwargs: Any) -> dict[str, Any]:
    pod = pod_object(name, **kwargs)
    if gates:
        pod["spec"]["schedulingGates"] = [{"name": g} for g in gates]
    if opt_in:
        pod["metadata"]["annotations"][QUEUE_ALLOCATION_GATE] = "true"
    return pod


def gated_job(c: ClusterBuilder, name: str, replicas: int, *, queue: str = "q", min_member: int = 1,
              **pod_kwargs: Any) -> None:
    c.sim.add_podgroup({"metadata": {"name": name, "namespace": "default"},
                        "spec": {"minMember": min_member, "queue": queue}, "status": {"phase": "Inqueue"}})
    for i in range(replicas):
        c.sim.add_pod(gated_pod(f"{name}-{i}", group=name, **pod_kwargs))


def gates_of(c: ClusterBuilder, pod: str) -> list[str]:
    return [g["name"] for g in c.sim.pods[f"default/{pod}"].manifest["spec"].get("schedulingGates") or ()]


def small_cluster(*, gate: bool = True, cpu_cap: str = "2") -> ClusterBuilder:
    c = cluster().node("n", cpu="8", memory="32Gi").queue("q", capability={"cpu": cpu_cap}, deserved={"cpu": cpu_cap})
    c.sim.queue_allocation_gate = gate
    return c


def test_gates_go_as_far_as_the_queue_has_room_then_the_pods_run() -> None:
    """capacity: queue capability 2 CPUs, four opted-in 1-CPU pods: two lose their gate (each one that passes
    reserves its room for the next check); they bind the cycle after; the other two keep theirs."""
    c = small_cluster()
    gated_job(c, "j", 4, cpu="1")
    first = c.cycle(CAPACITY)
    assert sorted(first.ungate) == ["default/j-0", "default/j-1"]
    assert first.binds == []  # a pod that loses its gate is not placed in the same cycle
    c.cycles(2, CAPACITY)
    assert sorted(c.sim.bound("j")) == ["j-0", "j-1"]
    assert gates_of(c, "j-2") == gates_of(c, "j-3") == [QUEUE_ALLOCATION_GATE]


def test_proportion_reserves_nothing_so_each_gate_is_checked_alone() -> None:
    """proportion has no reservation (Volcano keeps it in capacity alone): each gated pod is checked against what
    the queue holds, so all four lose their gate while the queue is empty; its capability then binds two."""
    c = small_cluster()
    gated_job(c, "j", 4, cpu="1")
    assert len(c.cycle(PROPORTION).ungate) == 4
    c.cycles(2, PROPORTION)
    assert len(c.sim.bound("j")) == 2


def test_without_the_feature_gate_no_gate_is_removed() -> None:
    c = small_cluster(gate=False)
    gated_job(c, "j", 2, cpu="1")
    results = c.cycles(3, CAPACITY)
    assert [r.ungate for r in results] == [[], [], []]
    assert c.sim.bound("j") == {}


@pytest.mark.parametrize("gates", [(QUEUE_ALLOCATION_GATE, OTHER), (OTHER, QUEUE_ALLOCATION_GATE)])
def test_the_gate_stays_while_another_gate_remains(gates) -> None:
    c = small_cluster()
    gated_job(c, "j", 1, cpu="1", gates=gates)
    assert [r.ungate for r in c.cycles(3, CAPACITY)] == [[], [], []]
    assert gates_of(c, "j-0") == list(gates)


def test_a_pod_that_did_not_opt_in_keeps_the_gate() -> None:
    c = small_cluster()
    gated_job(c, "j", 1, cpu="1", opt_in=False)
    assert [r.ungate for r in c.cycles(2, CAPACITY)] == [[], []]


def test_no_gate_goes_while_the_queue_is_full_and_the_job_says_why() -> None:
    c = small_cluster()
    c.job("busy", queue="q", replicas=2, cpu="1")
    c.cycle(CAPACITY)
    assert len(c.sim.bound("busy")) == 2
    gated_job(c, "j", 1, cpu="1")
    assert [r.ungate for r in c.cycles(2, CAPACITY)] == [[], []]
    decision = c.sim.decision("j")
    assert decision is not None and any("capability" in type(r).__name__.lower() or getattr(r, "queue", "") == "q"
                                        for r in decision.reasons)


def test_an_ungated_pod_still_pending_keeps_its_room_in_a_capacity_queue() -> None:
    """An opted-in pod that passed (no gate left) but fits no node yet holds its 2 CPUs of the queue's 2: a plain
    1-CPU pod of the same queue waits. Without the feature gate nothing is held and the plain pod runs."""
    for gate, bound in ((True, 0), (False, 1)):
        c = small_cluster(gate=gate)
        gated_job(c, "held", 1, cpu="2", gates=(), node_selector={"zone": "nowhere"})
        c.job("plain", queue="q", replicas=1, cpu="1")
        c.cycles(2, CAPACITY)
        assert len(c.sim.bound("plain")) == bound, f"feature gate {gate}"


def test_a_rolled_back_opted_in_task_keeps_its_room() -> None:
    """A gang of two ungated opted-in pods on a node that holds one: the allocation is discarded, and the room
    both passed Allocatable for stays reserved, so a plain pod of the queue does not take it."""
    c = cluster().node("n", cpu="1", memory="32Gi").node("m", cpu="1", memory="32Gi", labels={"pool": "x"})
    c.queue("q", capability={"cpu": "3"}, deserved={"cpu": "3"})
    c.sim.queue_allocation_gate = True
    gated_job(c, "gang", 2, min_member=2, cpu="1", gates=(), node_selector={"kubernetes.io/hostname": "n"})
    c.job("plain", queue="q", replicas=1, cpu="2")
    c.cycles(2, CAPACITY)
    assert c.sim.bound("gang") == {} and c.sim.bound("plain") == {}


# ---- inqueue ---------------------------------------------------------------------------------------------


def _job(tasks: list[TaskInfo], minimum: int) -> JobInfo:
    job = JobInfo("default/j", "j", "default", "q", min_resources=Resource.of(minimum * 1000, 0),
                  phase=PodGroupPhase.INQUEUE)
    for task in tasks:
        job.add_task(task)
    return job


@pytest.mark.parametrize("seed", range(40))
def test_only_other_gates_take_a_pod_out_of_inqueue(seed: int) -> None:
    """Over seeded jobs: what an admitted job still reserves is its minResources less what it holds less the
    pending pods held by another gate; a pod held by the queue-allocation gate alone is counted."""
    rng = random.Random(seed)
    tasks, held, other_gated = [], 0, 0
    for i in range(rng.randint(1, 8)):
        cpu = rng.randint(1, 4)
        status = rng.choice([TaskStatus.PENDING, TaskStatus.PENDING, TaskStatus.RUNNING])
        gates = rng.choice([(), (QUEUE_ALLOCATION_GATE,), (OTHER,), (QUEUE_ALLOCATION_GATE, OTHER)])
        if status is not TaskStatus.PENDING:
            gates = ()
        task = TaskInfo(f"default/t{i}", f"t{i}", "default", "default/j", Resource.of(cpu * 1000, 0), status=status,
                        node_name="n" if status is TaskStatus.RUNNING else "", gated=gates[0] if gates else "",
                        only_queue_gate=gates == (QUEUE_ALLOCATION_GATE,))
        tasks.append(task)
        held += cpu if status is TaskStatus.RUNNING else 0
        other_gated += cpu if gates and gates != (QUEUE_ALLOCATION_GATE,) else 0
    minimum = rng.randint(1, 20)
    assert reserved_by_admitted(_job(tasks, minimum)).cpu == max(0, minimum - held - other_gated) * 1000


# ---- properties over seeded workloads ------------------------------------------------------------------


def _workload(seed: int, c: ClusterBuilder) -> None:
    rng = random.Random(seed)
    for q in range(2):
        cap = rng.randint(2, 6)
        c.queue(f"q{q}", capability={"cpu": str(cap)}, deserved={"cpu": str(cap)})
    for j in range(rng.randint(2, 6)):
        queue, replicas = f"q{rng.randrange(2)}", rng.randint(1, 4)
        c.sim.add_podgroup({"metadata": {"name": f"j{j}", "namespace": "default"},
                            "spec": {"minMember": rng.randint(1, replicas), "queue": queue},
                            "status": {"phase": "Inqueue"}})
        for i in range(replicas):
            gates = rng.choice([(QUEUE_ALLOCATION_GATE,), (QUEUE_ALLOCATION_GATE,), (QUEUE_ALLOCATION_GATE, OTHER),
                                (OTHER, QUEUE_ALLOCATION_GATE), (OTHER,), ()])
            # a pod created opted in but without the gate never went through the check: none here
            c.sim.add_pod(gated_pod(f"j{j}-{i}", group=f"j{j}", cpu=str(rng.randint(1, 2)), gates=gates,
                                    opt_in=bool(gates) and rng.random() < 0.8))


@pytest.mark.parametrize("seed", range(25))
def test_a_gate_goes_only_when_alone_opted_in_and_within_the_queue(seed: int) -> None:
    """Every pod a cycle ungates had the queue-allocation gate as its only gate and opted in; a pod with another
    gate keeps all its gates; and in each capacity queue, what its pods hold plus what its ungated pending opted-in
    pods reserve never passes its capability."""
    c = cluster().nodes("n", 3, cpu="4", memory="32Gi")
    c.sim.queue_allocation_gate = True
    _workload(seed, c)
    others = {k: list(p.manifest["spec"].get("schedulingGates") or ()) for k, p in c.sim.pods.items()
              if any(g["name"] == OTHER for g in p.manifest["spec"].get("schedulingGates") or ())}
    for _ in range(4):
        snapshot = c.sim.snapshot()
        tasks = {t.key: t for job in snapshot.jobs.values() for t in job.tasks.values()}
        result = c.cycle(CAPACITY)
        for uid in result.ungate:
            assert tasks[uid].only_queue_gate and tasks[uid].queue_gate_opt_in, uid
        after = c.sim.snapshot()
        for name, queue in after.queues.items():
            if queue.capability is None:
                continue
            used = sum(t.resreq.cpu for job in after.jobs.values() if job.queue == name for t in job.tasks.values()
                       if t.node_name or (t.status is TaskStatus.PENDING and not t.gated and t.queue_gate_opt_in))
            assert used <= queue.capability.cpu, (seed, name)
    for key, gates in others.items():
        assert c.sim.pods[key].manifest["spec"]["schedulingGates"] == gates


def test_a_gated_pod_no_node_can_hold_keeps_its_gate_when_the_queue_is_full() -> None:
    """capacity lets an ungated task no node could hold past a full queue (so its gang's condition names the short
    resource); never a gated one: its gate would go while its queue has no room for it."""
    c = cluster().node("n", cpu="1", memory="32Gi").queue("q", capability={"cpu": "2"}, deserved={"cpu": "2"})
    c.sim.queue_allocation_gate = True
    gated_job(c, "j", 1, cpu="3")
    assert [r.ungate for r in c.cycles(2, CAPACITY)] == [[], []]
