"""The first cycle on a partial view (scheduler/cache/first_view.py) on a real control plane: a scheduler that
starts with a full queue and an open one binds the open queue's gang from its partial view, before the full pod
list, and leaves the full queue's job pending through that cycle and every cycle after it; the gang it bound gets its
`Scheduled` condition and PodGroup event from the next, full-view cycle."""

from __future__ import annotations

from controlplane import assert_no_overcommit, wait_for
from inprocess import running_scheduler
from test_scheduler import GROUP, TIMEOUT, bound_pods, gang_pod, pg_status, unschedulable

from scheduler.cache.first_view import FirstView, Skip


def podgroup(name: str, queue: str, min_member: int) -> dict:
    return {"apiVersion": f"{GROUP}/v1beta1", "kind": "PodGroup", "metadata": {"name": name},
            "spec": {"minMember": min_member, "queue": queue}}


def test_a_restart_under_a_full_queue_binds_the_open_queue_first_and_never_the_full_one(
        control_plane, core_v1, custom, namespace, node_set, queues):
    first, _ = node_set(gpus=4), node_set(gpus=4)
    tag = node_set.tag
    full = queues("full", capability={"nvidia.com/gpu": 2})
    open_ = queues("open")
    for name, queue, size in (("holder", full, 2), ("waits", full, 1), ("fits", open_, 2)):
        custom.create_namespaced_custom_object(GROUP, "v1beta1", namespace, "podgroups", podgroup(name, queue, size))
    for i in range(2):  # the full queue's running job, bound before this scheduler starts (as by a previous one)
        pod = gang_pod(f"holder-{i}", "holder", tag, gpus=1)
        pod["spec"]["nodeName"] = first
        core_v1.create_namespaced_pod(namespace, pod)
    core_v1.create_namespaced_pod(namespace, gang_pod("waits-0", "waits", tag, gpus=1))
    for i in range(2):
        core_v1.create_namespaced_pod(namespace, gang_pod(f"fits-{i}", "fits", tag, gpus=1))

    with running_scheduler(control_plane, first_view=True) as running:
        wait_for(lambda: {"fits-0", "fits-1"} <= set(bound_pods(core_v1, namespace)), TIMEOUT,
                 what="the open queue's gang bound")
        # the binds land on the apiserver before the first view's apply returns and records its result: wait for
        # that too (it stays None if that cycle failed, and the wait says so)
        wait_for(lambda: running.loop.first_view_result is not None or running.loop.first_view is None, TIMEOUT,
                 what="the first view's cycle recorded")
        view, result = running.loop.first_view, running.loop.first_view_result
        assert isinstance(view, FirstView), view
        assert view.nodes < view.of_nodes or view.of_nodes <= 16  # a part of the cluster, or all of a small one
        assert result is not None
        first_binds = {task for gang in result.binds for task, _ in gang.binds}
        assert first_binds == {f"{namespace}/fits-0", f"{namespace}/fits-1"}  # the gang came from the first view
        assert not running.results or all(  # and no full cycle bound it again
            f"{namespace}/fits-0" not in {t for g in r.binds for t, _ in g.binds} for r in running.results)
        # the first view wrote only the binds and the pods' events; a full-view cycle marks the gang Scheduled
        # and sends its PodGroup event, as for a gang it bound itself
        wait_for(lambda: any(c.get("type") == "Scheduled" and c.get("status") == "True"
                             for c in pg_status(custom, namespace, "fits").get("conditions") or ()), TIMEOUT,
                 what="the first view's gang marked Scheduled by a full-view cycle")
        wait_for(lambda: any((e.involved_object.kind, e.involved_object.name, e.reason) == ("PodGroup", "fits",
                                                                                            "Scheduled")
                             for e in core_v1.list_namespaced_event(namespace).items), TIMEOUT,
                 what="the first view's gang's PodGroup Scheduled event")
        # held for its queue; a cycle that also finds a node not Ready (kwok's heartbeat late on a loaded machine)
        # may say that first, so wait for the queue's reason rather than take the first message
        wait_for(lambda: (c := unschedulable(custom, namespace, "waits")) and (
            "capability" in c["message"] or "queue" in c["message"]), TIMEOUT,
                 what="the full queue's job held for its queue by a full-view cycle")
        cycles = len(running.results)
        wait_for(lambda: len(running.results) >= cycles + 3, TIMEOUT, what="three more full cycles")
        assert "waits-0" not in bound_pods(core_v1, namespace)
    assert_no_overcommit(core_v1)


def test_nothing_of_ours_pending_skips_the_first_view(control_plane, core_v1, namespace, node_set):
    """A start with no pending pod of ours waits for the full view, as before (no partial cycle at all)."""
    node_set(gpus=1)
    with running_scheduler(control_plane, first_view=True, scheduler_names=(f"nobody-{namespace}",)) as running:
        wait_for(lambda: running.loop.first_view is not None, TIMEOUT, what="the first view decided")
        assert isinstance(running.loop.first_view, Skip)
        assert running.loop.first_view.why == "nothing of ours is pending"
        assert running.loop.first_view_result is None
