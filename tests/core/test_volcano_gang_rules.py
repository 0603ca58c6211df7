"""Volcano's gang rules on Volcano Jobs, as its webhook and controller shape them (issue 16's cases).

Each case is a Volcano Job expanded by `scheduler.jobs` (so every task's minAvailable defaults to its replicas,
as Volcano's mutating webhook does) and run on the in-memory cluster with the same scheduling code as
production. The expected outcomes are Volcano's, read from pkg/scheduler/api/job_info.go,
pkg/scheduler/plugins/gang/gang.go, pkg/scheduler/actions/allocate/allocate.go and its e2e suite
test/e2e/schedulingbase ("Schedule Multiple Jobs").
"""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.jobs.expand import podgroup_for, pods_for
from scheduler.testing import ClusterBuilder, cluster, conf_from_tiers

PREEMPT = conf_from_tiers(("priority", "gang", "conformance"),
                          ("overcommit", "drf", "predicates", "proportion", "nodeorder", "binpack"),
                          actions="enqueue, allocate, preempt, backfill")


def requests(**amounts: str) -> dict[str, Any]:
    return {"requests": dict(amounts)} if amounts else {}


def vcjob(
    c: ClusterBuilder, name: str, min_available: int, tasks: list[tuple[str, int, dict[str, Any]]], *,
    priority_class: str | None = None, queue: str = "default", task_min: dict[str, int] | None = None,
) -> str:
    """Submit a batch.volcano.sh Job (tasks: name, replicas, container resources) as the controller would."""
    spec: dict[str, Any] = {
        "minAvailable": min_available, "schedulerName": "volcano", "queue": queue,
        "tasks": [
            {"name": task, "replicas": replicas, "template": {"spec": {"containers": [
                {"name": "c", "image": "busybox", "resources": resources}]}}}
            for task, replicas, resources in tasks
        ],
    }
    if priority_class:
        spec["priorityClassName"] = priority_class
    for task in spec["tasks"]:
        if task_min and task["name"] in task_min:
            task["minAvailable"] = task_min[task["name"]]
    job = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
           "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"}, "spec": spec}
    podgroup = podgroup_for(job, {"low": 10, "high": 1000})
    group = c.sim.add_podgroup(podgroup)
    for pod in pods_for(job):
        c.sim.add_pod(pod)
    return group.split("/", 1)[1]


def test_an_elastic_job_starts_with_min_available_on_one_node() -> None:
    """minAvailable 6 of 8 replicas, no task minAvailable (the webhook makes it 8): Volcano waives the task
    minimum because 6 is below it, and starts the job with the 6 GPUs there are."""
    c = cluster().node("n1", gpu=6)
    group = vcjob(c, "elastic", 6, [("worker", 8, requests(**{"nvidia.com/gpu": "1"}))])
    c.cycles(2)
    assert len(c.sim.bound(group)) == 6


def test_an_elastic_job_starts_with_min_available_across_six_nodes() -> None:
    c = cluster().nodes("n", 6, gpu=1)
    group = vcjob(c, "elastic", 6, [("worker", 8, requests(**{"nvidia.com/gpu": "1"}))])
    c.cycles(2)
    assert len(c.sim.bound(group)) == 6 and c.sim.partially_bound_gangs() == []


def test_a_gang_of_pods_that_ask_for_nothing_starts() -> None:
    """BestEffort pods: Volcano counts a pending BestEffort task as ready, and backfill binds them."""
    c = cluster().node("n1", cpu="4")
    group = vcjob(c, "noreq", 2, [("worker", 2, {})])
    c.cycles(2)
    assert len(c.sim.bound(group)) == 2


def test_a_gang_with_besteffort_and_gpu_tasks_starts_whole() -> None:
    c = cluster().node("n1", gpu=2)
    group = vcjob(c, "mixed", 3, [("launcher", 1, {}), ("worker", 2, requests(**{"nvidia.com/gpu": "1"}))])
    c.cycles(2)
    assert len(c.sim.bound(group)) == 3


def test_a_multi_task_job_is_preempted_down_to_its_min_available() -> None:
    """7 workers + 1 keeper at minAvailable 1 fill 8 GPUs; a high-priority gang of 4 in the same queue takes 4
    of them (Volcano's gang plugin counts only the job's minAvailable for victims)."""
    c = cluster().priority_class("low", 10).priority_class("high", 1000).node("n1", gpu=8)
    low = vcjob(c, "low", 1, [("worker", 7, requests(**{"nvidia.com/gpu": "1"})),
                              ("keeper", 1, requests(**{"nvidia.com/gpu": "1"}))], priority_class="low")
    conf = PREEMPT
    c.cycles(2, conf)
    assert len(c.sim.bound(low)) == 8
    high = vcjob(c, "high", 4, [("worker", 4, requests(**{"nvidia.com/gpu": "1"}))], priority_class="high")
    c.cycles(4, conf)
    assert len(c.sim.evicted) == 4
    assert len(c.sim.bound(high)) == 4 and len(c.sim.bound(low)) == 4
    assert c.sim.partially_bound_gangs() == []


def test_several_jobs_sharing_a_cluster_each_reach_their_minimum_first() -> None:
    """Volcano's e2e "Schedule Multiple Jobs": three jobs of replicas = cluster size (16 one-cpu slots on 4 x 4
    cpu nodes) and minAvailable 2 each reach 2 running pods: allocate returns a job to its queue once it is
    ready, and job order puts jobs that are not yet ready first."""
    c = cluster().nodes("n", 4, cpu="4", memory="16Gi")
    groups = [vcjob(c, f"mj-{i}", 2, [("task", 16, requests(cpu="1"))]) for i in range(3)]
    c.cycles(2)
    bound = [len(c.sim.bound(g)) for g in groups]
    assert all(n >= 2 for n in bound) and sum(bound) == 16, bound


def test_podgroup_phase_follows_pods_on_nodes() -> None:
    """Volcano's getPodGroupPhase: Inqueue while binding, Running once minMember pods are on nodes, and Unknown
    when a running gang has lost a member below minMember: the gang plugin marks every gang that is not ready
    Unschedulable at session close, and running pods with that condition make the phase Unknown (pkg/scheduler/
    framework/session.go; Volcano's jobseq spec "Transform from running to unknown after a member is gone")."""
    c = cluster().node("n1", gpu=2).job("g", replicas=2, min_available=2, gpu=1)
    c.cycle()
    assert c.sim.podgroup("g")["status"]["phase"] == "Inqueue"
    c.cycle()
    assert c.sim.podgroup("g")["status"]["phase"] == "Running"
    c.sim.delete_pod("default/g-1")
    c.cycle()
    assert c.sim.podgroup("g")["status"]["phase"] == "Unknown"


def test_a_job_held_at_enqueue_gets_volcanos_unschedulable_event() -> None:
    """Volcano's suites ("Statement") wait for a PodGroup event with reason Unschedulable on a job that the full
    cluster keeps Pending (pkg/scheduler/cache/cache.go, RecordJobStatusEvent)."""
    c = cluster().nodes("n", 4, cpu="4", memory="16Gi")
    first = vcjob(c, "st-1", 16, [("task", 16, requests(cpu="1"))])
    c.cycles(2)
    assert len(c.sim.bound(first)) == 16
    second = vcjob(c, "st-2", 16, [("task", 16, requests(cpu="1"))])
    c.cycles(2)
    assert c.sim.podgroup(second)["status"]["phase"] == "Pending"
    reasons = {e.reason for _, e in c.sim.events if e.key == f"default/{second}" and e.type == "Warning"}
    assert "Unschedulable" in reasons
    assert c.sim.evicted == []


WITH_PLACER = conf_from_tiers(("priority", "gang", "conformance"),
                              ("drf", "predicates", "proportion", "nodeorder", "binpack", "network-topology-aware"))


@pytest.mark.parametrize("conf", [None, WITH_PLACER], ids=["pod by pod", "through the gang placer"])
def test_the_tasks_of_a_job_interleave_by_index_so_each_role_gets_its_minimum(conf: object) -> None:
    """The differential's seed 71: a queue capped at 4Gi and a job of t0 x2 (2Gi) and t1 x2 (1Gi), each task
    with minimum 1. Tasks go by their index first (Volcano's CompareTask): t0-0, t1-0 make the gang ready
    (3Gi), then t1-1 fits (4Gi) and t0-1 does not: Volcano's t0:1, t1:2. By name (t0, t0, t1, t1) both t0 pods
    took the 4Gi and the job never became ready. The gang placer (which Volcano's CI conf enables as
    network-topology-aware) groups identical tasks; its placement is replayed in the same task order."""
    c = cluster().nodes("n", 2, cpu="8", memory="16Gi").queue("q", capability={"cpu": "10", "memory": "4Gi"})
    group = vcjob(c, "j", 2, [("t0", 2, requests(cpu="2", memory="2Gi")), ("t1", 2, requests(cpu="2", memory="1Gi"))],
                  queue="q")
    for task in ("t0", "t1"):
        c.sim.podgroups[f"default/{group}"].manifest["spec"]["minTaskMember"][task] = 1
    c.cycles(3, conf)  # type: ignore[arg-type]
    bound = sorted(c.sim.bound(group))
    assert [name.rsplit("-", 2)[1] for name in bound] == ["t0", "t1", "t1"], bound


def test_pending_pods_of_a_podgroup_not_yet_admitted_count_in_their_queues_share() -> None:
    """Volcano's proportion counts every pending pod in its queue's request, whatever its PodGroup's phase
    (pkg/scheduler/plugins/proportion/proportion.go): a bare PodGroup held at enqueue still halves the other
    queue's deserved share (differential seed 18)."""
    from scheduler.testing import pod_object

    c = cluster().node("n1", cpu="4", memory="16Gi").queue("qa", weight=1).queue("qb", weight=1)
    c.sim.add_podgroup({"metadata": {"name": "held"},
                        "spec": {"minMember": 4, "queue": "qa", "minResources": {"cpu": "8"}}})
    for i in range(4):
        c.sim.add_pod(pod_object(f"held-{i}", group="held", cpu="1", memory="1Gi"))
    c.job("elastic", queue="qb", replicas=4, min_available=1, cpu="1", memory="1Gi")
    c.cycles(3)
    assert c.sim.podgroup("held")["status"]["phase"] == "Pending"
    assert len(c.sim.bound("elastic")) == 2  # qb deserves half of the 4 cpus


def test_task_minimums_are_placed_before_any_role_takes_extras() -> None:
    """minAvailable 7 = the task minimums (t0 4 of 4 at 2 cpu, t1 1 of 4 and t2 2 of 3 at 1 cpu) on 12 cpus.
    Volcano takes the tasks in task order alone (index within the task: t0-0, t1-0, t2-0, t0-1, ...), so t1's
    and t2's extras take the room t0-3 needed and the gang never starts, although its minimums need 11 cpus
    (differential seeds 58 and 199). volcano-py meets every role's minimum first, then the extras in task
    order: the gang starts with its 7 and one extra in the last cpu (CONFORMANCE.md, differs on purpose)."""
    c = cluster().node("n1", cpu="12")
    group = vcjob(c, "roles", 7, [("t0", 4, requests(cpu="2")), ("t1", 4, requests(cpu="1")),
                                  ("t2", 3, requests(cpu="1"))], task_min={"t0": 4, "t1": 1, "t2": 2})
    c.cycles(2)
    roles = sorted(name.rsplit("-", 1)[0] for name in c.sim.bound(group))
    assert roles == ["roles-t0"] * 4 + ["roles-t1"] * 2 + ["roles-t2"] * 2
