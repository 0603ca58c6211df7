"""Pods of other schedulers in a snapshot (adapter/snapshot.py `account_others`): their node's accounting is what
each pod's request adds up to, however they are grouped, and a session can never change the cache's copy."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.api.phases import TaskStatus
from scheduler.cache.cluster_cache import ClusterCache
from scheduler.cycle import builtin_default_conf, run_cycle
from scheduler.sim.cluster import InMemoryCluster
from scheduler.sim.objects import node_object, pod_object


def cache_with(pods: list[dict[str, Any]], *, incremental: bool = True) -> ClusterCache:
    cache = ClusterCache(None, {"volcano-py"}, "default", incremental=incremental)
    cache.watcher._on_event(cache.nodes, "ADDED", node_object("n1", cpu="64", memory="256Gi"))
    cache.watcher._on_event(cache.podgroups, "ADDED", {
        "metadata": {"name": "g", "namespace": "ns", "resourceVersion": "1"},
        "spec": {"minMember": 1, "queue": "default"}})
    for i, pod in enumerate(pods):
        pod["metadata"]["resourceVersion"] = str(10 + i)
        cache.watcher._on_event(cache.pods, "ADDED", pod)
    return cache


def bound(name: str, cpu: str, *, group: str | None = None, phase: str = "Running") -> dict[str, Any]:
    pod = pod_object(name, namespace="ns", cpu=cpu, memory="1Gi", group=group)
    pod["spec"]["schedulerName"] = "default-scheduler"
    pod["spec"]["nodeName"] = "n1"
    pod["status"] = {"phase": phase}
    return pod


def test_other_schedulers_pods_add_up_on_their_node() -> None:
    pods = [bound(f"a{i}", "2") for i in range(5)] + [bound(f"b{i}", "500m") for i in range(3)]
    pods.append(bound("done", "8", phase="Succeeded"))  # holds nothing
    node = cache_with(pods).snapshot().nodes["n1"]
    assert (node.used.cpu, node.used.memory) == (11500, 8 * 1024**3)
    assert (node.idle.cpu, node.idle.memory) == (64000 - 11500, 256 * 1024**3 - 8 * 1024**3)
    assert set(node.tasks) == {f"ns/{p['metadata']['name']}" for p in pods}
    assert node.tasks["ns/done"].status is TaskStatus.SUCCEEDED


@pytest.mark.parametrize("incremental", [True, False], ids=["incremental snapshot", "cold snapshot"])
def test_a_session_changing_an_other_schedulers_pod_of_our_job_leaves_the_cache_as_it_was(incremental: bool) -> None:
    ours = pod_object("ours", namespace="ns", cpu="1", memory="1Gi", group="g")  # (g is ours: one of its pods is)
    cache = cache_with([bound("mine", "2", group="g"), bound("plain", "2"), ours], incremental=incremental)
    first = cache.snapshot()
    node, victim = first.nodes["n1"], first.nodes["n1"].tasks["ns/mine"]
    node.remove_task(victim)  # what an eviction in a session does to a victim (framework/backend.py mark_releasing)
    first.jobs["ns/g"].set_status(victim, TaskStatus.RELEASING)
    node.add_task(victim)
    again = cache.snapshot().nodes["n1"].tasks
    assert (again["ns/mine"].status, again["ns/plain"].status) == (TaskStatus.RUNNING, TaskStatus.RUNNING)


def test_our_bound_pod_whose_podgroup_is_gone_still_uses_its_node() -> None:
    """Deleting a PodGroup under its running gang (anyone may delete their own) must not free the gang's GPUs
    for another gang while its pods still run: they are charged to their node as any pod with a nodeName, as in
    Volcano's cache (pkg/scheduler/cache/event_handlers.go addTask). Found by tests/chaos/test_mid_bind_faults.py:
    9 GPUs bound on an 8-GPU node."""
    cache = ClusterCache(None, {"volcano-py"}, "default")
    cache.watcher._on_event(cache.nodes, "ADDED", node_object("n1", gpu=8))
    for i in range(4):
        pod = pod_object(f"gone-{i}", namespace="ns", group="gone", gpu=2)
        pod["spec"]["nodeName"] = "n1"
        pod["status"] = {"phase": "Running"}
        pod["metadata"]["resourceVersion"] = str(10 + i)
        cache.watcher._on_event(cache.pods, "ADDED", pod)
    node = cache.snapshot().nodes["n1"]
    assert node.idle.get("nvidia.com/gpu") == 0
    assert {f"ns/gone-{i}" for i in range(4)} <= set(node.tasks)


def test_a_pod_naming_a_podgroup_that_does_not_exist_is_told_so_once_it_has_waited() -> None:
    """A pending pod whose group-name annotation names no PodGroup is not scheduled (Volcano only logs it, at
    V(4)); volcano-py says so on the pod with one Warning event, once it has waited ORPHAN_GRACE (a controller
    makes the PodGroup first, so a pod that waits that long is someone's mistake)."""
    from scheduler.cache.cluster_cache import ORPHAN_GRACE

    now = [1_800_000_000.0]
    cache = ClusterCache(None, {"volcano-py"}, "default", clock=lambda: now[0])
    sent: list[tuple[str, str, str, str]] = []
    cache.events.record = lambda kind, key, type_, reason, message: sent.append((kind, key, reason, message))
    cache.watcher._on_event(cache.nodes, "ADDED", node_object("n1", gpu=8))
    pod = pod_object("lost", namespace="ns", group="nowhere", gpu=1)
    pod["metadata"].update(resourceVersion="5", creationTimestamp="2027-01-15T08:00:00Z")
    cache.watcher._on_event(cache.pods, "ADDED", pod)
    created = cache.snapshot().orphans[0][2]
    now[0] = created + 1.0
    snapshot = cache.snapshot()
    assert [(o[0], o[1]) for o in snapshot.orphans] == [("ns/lost", "nowhere")]
    assert sent == []  # too soon: its PodGroup may be on its way
    now[0] = created + ORPHAN_GRACE
    cache.snapshot()
    ((kind, key, reason, message),) = sent
    assert (kind, key, reason) == ("Pod", "ns/lost", "PodGroupNotFound") and "nowhere" in message


@pytest.mark.parametrize("incremental", [True, False], ids=["incremental snapshot", "cold snapshot"])
def test_a_podgroup_whose_pods_all_name_another_scheduler_is_not_our_job(incremental: bool) -> None:
    """Another scheduler's gang (its pods name that scheduler) is neither placed nor written by us, though its pods
    still use their node; once one of our pods joins it, it is ours again; a PodGroup no pod names is ours."""
    cache = cache_with([bound("theirs-0", "2", group="g"), bound("theirs-1", "2", group="g")],
                       incremental=incremental)
    cache.watcher._on_event(cache.podgroups, "ADDED", {
        "metadata": {"name": "empty", "namespace": "ns", "resourceVersion": "2"},
        "spec": {"minMember": 1, "queue": "default"}})
    first = cache.snapshot()
    assert set(first.jobs) == {"ns/empty"}
    assert first.nodes["n1"].used.cpu == 4000
    ours = pod_object("ours", namespace="ns", cpu="1", memory="1Gi", group="g")
    ours["metadata"]["resourceVersion"] = "50"
    cache.watcher._on_event(cache.pods, "ADDED", ours)
    second = cache.snapshot()
    assert set(second.jobs) == {"ns/g", "ns/empty"}
    assert set(second.jobs["ns/g"].tasks) == {"ns/ours"}
    cache.watcher._on_event(cache.pods, "DELETED", ours)
    assert set(cache.snapshot().jobs) == {"ns/empty"}


def test_a_cycle_writes_no_status_for_another_schedulers_gang() -> None:
    """Two schedulers of different names on one cluster: each writes only its own gangs' PodGroups (Volcano's
    would also write the other's, with none of its pods seen as its own: the status flips between them)."""
    sim = InMemoryCluster()
    sim.add_queue({"metadata": {"name": "default"}, "spec": {"weight": 1}})
    sim.add_node(node_object("n1", cpu="64", memory="256Gi"))
    for group in ("theirs", "ours"):
        sim.add_podgroup({"metadata": {"name": group}, "spec": {"minMember": 2, "queue": "default"},
                          "status": {"phase": "Running" if group == "theirs" else "Pending"}})
    for i in range(2):
        pod = pod_object(f"theirs-{i}", group="theirs", cpu="1", scheduler_name="other-scheduler")
        pod["spec"]["nodeName"] = "n1"
        pod["status"] = {"phase": "Running"}
        sim.add_pod(pod)
        sim.add_pod(pod_object(f"ours-{i}", group="ours", cpu="1"))
    result = run_cycle(sim.snapshot(), builtin_default_conf())
    assert {s.job for s in result.podgroups} == {"default/ours"}
    assert {b.job for b in result.binds} == {"default/ours"}


def test_an_other_schedulers_pod_leaving_keeps_the_others_in_a_cold_snapshots_order() -> None:
    """Other schedulers' pods sit on their node in runs of one request (adapter/snapshot.py); when the first of a
    run leaves, a later run may come first now: the incremental snapshot's node (not taken from its last build
    less the pod, adapter/node_fill.py `less`) has its tasks in the cold snapshot's order."""
    pods = [bound("a", "2"), bound("b", "500m"), bound("c", "2"), bound("d", "500m")]
    caches = [cache_with([dict(p, metadata=dict(p["metadata"])) for p in pods], incremental=flag)
              for flag in (True, False)]
    for cache in caches:
        cache.snapshot()
        cache.watcher._on_event(cache.pods, "DELETED", dict(pods[0], metadata=dict(pods[0]["metadata"],
                                                                                   resourceVersion="99")))
    warm, cold = (list(cache.snapshot().nodes["n1"].tasks) for cache in caches)
    assert cold == ["ns/b", "ns/d", "ns/c"] and warm == cold
