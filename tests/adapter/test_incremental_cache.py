"""The Kubernetes cache's incremental snapshot (cache/snapshots.py) equals a cold one after every watch event.

Random events as the watch delivers them (ADDED, MODIFIED with a new resourceVersion, DELETED) for pods of ours
and of other schedulers, nodes and PodGroups, pods deleted and made again under the same name (a new uid), our
own binds not yet seen (assumed), nodes and PodGroups deleted and made again under their names (a new uid, or
none: a hand-made object the apiserver did not write), a relist, and now and then a cycle run on the incremental
snapshot. After each, the incremental snapshot and one built afresh from the same stores are compared as
structured values, orders included.
"""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st
from snapshot_values import first_difference, structured

from scheduler.api.phases import TaskStatus
from scheduler.api.snapshot import ClusterSnapshot
from scheduler.cache.cluster_cache import ClusterCache
from scheduler.cache.store import Journaled
from scheduler.cycle import builtin_default_conf, run_cycle
from scheduler.framework.arrays import NodeArrays
from scheduler.framework.backend import StatementBackEnd
from scheduler.framework.tiers import TierRunner
from scheduler.sim.objects import node_object, pod_object

CONF = builtin_default_conf()


def cold(cache: ClusterCache) -> ClusterSnapshot:
    incremental, cache.incremental = cache.incremental, None
    try:
        return cache.snapshot()
    finally:
        cache.incremental = incremental


class Cluster:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.cache = ClusterCache(None, {"volcano-py"}, "default", clock=lambda: 1_800_000_000.0)
        self.cache.events.record = lambda *_: None  # type: ignore[method-assign]
        self.rv = 0
        self.serial = 0
        self.pending_fix: dict[str, Any] | None = None  # a pod made unreadable, to be read again next step
        self.event("queues", "ADDED", {"metadata": {"name": "default"}, "spec": {"weight": 1}})
        for _ in range(3):
            self.add_node()
        for _ in range(4):
            self.add_gang()

    def event(self, kind: str, type_: str, obj: dict[str, Any], *, uid: bool = True) -> None:
        self.rv += 1
        obj = copy.deepcopy(obj)
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self.serial += 1
        if uid:
            obj["metadata"].setdefault("uid", f"uid-{self.serial}")
        self.cache.watcher._on_event(getattr(self.cache, kind), type_, obj)

    def name(self, prefix: str) -> str:
        self.serial += 1
        return f"{prefix}-{self.serial}"

    def add_node(self) -> None:
        self.event("nodes", "ADDED", node_object(self.name("node"), gpu=self.rng.choice((2, 8)), cpu="16",
                                                 memory="64Gi"))

    def add_gang(self) -> None:
        group, size = self.name("pg"), self.rng.randint(1, 3)
        self.event("podgroups", "ADDED", {"metadata": {"name": group, "namespace": "ns"},
                                          "spec": {"minMember": size, "queue": "default"}})
        for _ in range(size):
            self.event("pods", "ADDED", pod_object(self.name("pod"), namespace="ns", group=group, gpu=1, cpu="1"))

    def current(self, kind: str) -> dict[str, Any]:
        return getattr(self.cache, kind).objects  # type: ignore[no-any-return]

    def step(self) -> str:
        rng = self.rng
        if self.pending_fix is not None:
            fixed, self.pending_fix = self.pending_fix, None
            if fixed["metadata"]["namespace"] + "/" + fixed["metadata"]["name"] in self.current("pods"):
                self.event("pods", "MODIFIED", fixed)
                return "pod~readable"
        op = rng.choice(["gang+", "plain+", "other+", "pod-", "pod~bind", "pod~phase", "pod again", "pod~unreadable",
                         "node+", "node-", "node~", "node again", "pg-", "pg~", "pg again", "no uid again", "assumed",
                         "relist", "priority class", "cycle", "cycle"])
        pods, nodes, groups = (sorted(self.current(k)) for k in ("pods", "nodes", "podgroups"))
        if op == "gang+":
            self.add_gang()
        elif op == "plain+":
            self.event("pods", "ADDED", pod_object(self.name("plain"), namespace="ns", cpu="1"))
        elif op == "other+" and nodes:
            pod = pod_object(self.name("other"), namespace="ns", cpu="2", scheduler_name="default-scheduler")
            pod["spec"]["nodeName"] = rng.choice(nodes)
            pod["status"] = {"phase": "Running"}
            self.event("pods", "ADDED", pod)
        elif op == "pod-" and pods:
            self.event("pods", "DELETED", self.current("pods")[rng.choice(pods)])
        elif op in ("pod~bind", "pod~phase") and pods:
            pod = copy.deepcopy(self.current("pods")[rng.choice(pods)])
            if op == "pod~bind" and nodes:
                pod["spec"]["nodeName"] = rng.choice(nodes)
            else:
                pod["status"] = {"phase": rng.choice(("Pending", "Running", "Succeeded", "Failed"))}
            self.event("pods", "MODIFIED", pod)
        elif op == "pod~unreadable" and pods:  # unreadable for a while, then read again where it always was
            key = rng.choice(pods)
            pod = copy.deepcopy(self.current("pods")[key])
            good = copy.deepcopy(pod)
            pod["spec"]["nodeSelector"] = "not a map"  # no safe default: the pod is left out
            self.event("pods", "MODIFIED", pod)
            self.pending_fix = good
        elif op == "pod again" and pods:  # deleted and made again under its name: a new pod, last in the store
            pod = copy.deepcopy(self.current("pods")[rng.choice(pods)])
            self.event("pods", "DELETED", pod)
            del pod["metadata"]["uid"]
            self.event("pods", "ADDED", pod)
        elif op == "node+":
            self.add_node()
        elif op == "node-" and nodes:
            self.event("nodes", "DELETED", self.current("nodes")[rng.choice(nodes)])
        elif op == "node~" and nodes:
            node = copy.deepcopy(self.current("nodes")[rng.choice(nodes)])
            node["status"]["allocatable"]["cpu"] = rng.choice(("4", "32"))
            self.event("nodes", "MODIFIED", node)
        elif op in ("node again", "pg again", "no uid again") and nodes and groups:  # last in the store now
            kind = ("nodes", "podgroups")[op == "pg again" or (op == "no uid again" and rng.random() < 0.5)]
            obj = copy.deepcopy(self.current(kind)[rng.choice(nodes if kind == "nodes" else groups)])
            self.event(kind, "DELETED", obj)
            obj["metadata"].pop("uid", None)
            self.event(kind, "ADDED", obj, uid=op != "no uid again")
        elif op == "pg-" and groups:
            self.event("podgroups", "DELETED", self.current("podgroups")[rng.choice(groups)])
        elif op == "pg~" and groups:
            group = copy.deepcopy(self.current("podgroups")[rng.choice(groups)])
            group["spec"]["minMember"] = rng.randint(1, 4)
            self.event("podgroups", "MODIFIED", group)
        elif op == "assumed" and pods and nodes:
            self.cache.stores.assumed[rng.choice(pods)] = (rng.choice(nodes), 1_800_000_000.0)
        elif op == "priority class":  # every pod's priority may read otherwise
            self.event("priority_classes", "ADDED", {"metadata": {"name": self.name("pc")}, "value": 5})
        elif op == "relist":  # the watch lists again: a new dict, in the apiserver's order
            store = self.cache.pods
            store.objects = Journaled(sorted(store.objects.items(), key=lambda kv: rng.random()))
        return op


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_the_caches_incremental_snapshot_equals_a_cold_one_after_every_event(seed: int) -> None:
    cluster = Cluster(random.Random(seed))
    cache = cluster.cache
    assert cache.incremental is not None  # the cache's default: from the last snapshot and what changed
    builder = cache.incremental.builder
    ops: list[str] = []
    warm = 0
    for _ in range(40):
        incremental = cache.snapshot()
        warm += builder.rebuilt[0] < len(builder.pods)  # not every pod read again
        a, b = structured(incremental), structured(cold(cache))
        assert a == b, (ops, first_difference(a, b))
        if ops and ops[-1] == "cycle":
            run_cycle(incremental, CONF)  # its changes to the infos must not reach the next snapshot
        ops.append(cluster.step())
    assert warm  # (equal because built from the changes, not because every build was a full one)


def test_a_build_that_fails_half_way_is_followed_by_one_equal_to_a_cold_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fault in the middle of a build (after the changes are taken, before every job is made again) must not
    leave the next snapshots behind the stores: the builder's state is then partly updated."""
    cluster = Cluster(random.Random(7))
    cache = cluster.cache
    cache.snapshot()
    assert cache.incremental is not None
    builder = cache.incremental.builder
    pod = copy.deepcopy(cluster.current("pods")[sorted(cluster.current("pods"))[0]])
    pod["status"] = {"phase": "Running"}
    pod["spec"]["nodeName"] = sorted(cluster.current("nodes"))[0]
    cluster.event("pods", "MODIFIED", pod)

    def fault(key: str) -> None:
        raise RuntimeError(f"fault while making job {key}")

    with monkeypatch.context() as patch:
        patch.setattr(builder, "_build_job", fault)
        with pytest.raises(RuntimeError, match="fault while making job"):
            cache.snapshot()
    a, b = structured(cache.snapshot()), structured(cold(cache))
    assert a == b, first_difference(a, b)


def test_a_placement_that_raises_half_way_leaves_no_trace_in_the_next_snapshot(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A fault between a task's new status and node and its node's accounting (each job's fault is its own: the
    cycle goes on without it, its statement undone): the infos the session was handed were changed and changed
    back, and the next snapshot, built from them and what changed, must still equal a cold one."""
    cluster = Cluster(random.Random(3))
    cache = cluster.cache
    cache.snapshot()
    failed: list[str] = []

    def half_place(self: StatementBackEnd, task: Any, node: Any, status: Any) -> None:
        self._jobs[task.job].set_status(task, status)
        task.node_name = node.name
        failed.append(task.key)
        raise RuntimeError("fault in the middle of a placement")

    def half_end(self: StatementBackEnd, tasks: Any, node: Any) -> None:
        failed.extend(task.key for task in tasks)
        raise RuntimeError("fault in the middle of a placement")

    snapshot = cache.snapshot()
    with monkeypatch.context() as patch:
        patch.setattr(StatementBackEnd, "place", half_place)
        patch.setattr(StatementBackEnd, "end_place", half_end)
        run_cycle(snapshot, CONF)
    changed = [job for job in snapshot.jobs.values() if set(failed) & job.tasks.keys()]
    assert changed  # the fault hit some jobs' placements (their statements undone)
    a, b = structured(cache.snapshot()), structured(cold(cache))
    assert a == b, first_difference(a, b)


def test_a_task_put_on_a_node_without_its_job_knowing_is_made_again() -> None:
    """A session that places a task through its node alone (its job not told: no path of the framework's back end
    does, but a node's `touched` is all the next build needs to see it): the task and its job are made again."""
    cluster = Cluster(random.Random(4))
    cache = cluster.cache
    cache.snapshot()
    snapshot = cache.snapshot()
    task = next(t for job in snapshot.jobs.values() for t in job.tasks.values() if not t.node_name)
    node = snapshot.nodes[sorted(snapshot.nodes)[0]]
    task.node_name = node.name
    node.add_task(task)
    a, b = structured(cache.snapshot()), structured(cold(cache))
    assert a == b, first_difference(a, b)


def test_a_task_a_session_marked_releasing_on_its_node_is_made_again() -> None:
    """A session that evicts a running task marks it Releasing where it is (`StatementBackEnd.mark_releasing`:
    taken off and put back on the same node, so the node's tasks are the same keys): the next build, before the
    eviction shows in the watch, makes it again as read (Running), found by the task journal (`JobInfo.moves`)."""
    cluster = Cluster(random.Random(5))
    cache = cluster.cache
    pod = copy.deepcopy(cluster.current("pods")[sorted(cluster.current("pods"))[0]])
    pod["status"] = {"phase": "Running"}
    pod["spec"]["nodeName"] = sorted(cluster.current("nodes"))[0]
    cluster.event("pods", "MODIFIED", pod)
    cache.snapshot()
    snapshot = cache.snapshot()
    task = next(t for job in snapshot.jobs.values() for t in job.tasks.values() if t.status is TaskStatus.RUNNING)
    back_end = StatementBackEnd(snapshot.jobs, snapshot.nodes, NodeArrays(list(snapshot.nodes.values())),
                                TierRunner())
    back_end.mark_releasing(task)
    assert task.status is TaskStatus.RELEASING and task.key in snapshot.nodes[task.node_name].tasks
    again = cache.snapshot()
    assert again.jobs[task.job].tasks[task.key].status is TaskStatus.RUNNING
    a, b = structured(again), structured(cold(cache))
    assert a == b, first_difference(a, b)
