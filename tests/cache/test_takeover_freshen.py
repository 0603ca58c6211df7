"""Before a replica schedules a shard it has just taken (`--active-shards`), its cache's pods are made as current
as the apiserver's (cache/freshen.py): one list of every pod, and each pod the cache holds older or not at all put
in as the watch would (bound ones assumed on their nodes), each it holds that is gone dropped; and the shard joins
the first session read after that (cache/active.py `prepare`)."""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest
from test_active_shards_cache import Clock, Server, replica

from scheduler.api.job import JobInfo
from scheduler.api.snapshot import ClusterSnapshot
from scheduler.cache.cluster_cache import ClusterCache
from scheduler.cache.freshen import freshen_pods
from scheduler.cache.kube import KubeError
from scheduler.sim.objects import node_object, pod_object


class Apiserver:
    """The pods as the apiserver has them now: one list of every pod, in pages of two (the continue tokens), read at
    resourceVersion `at` (by default after every change the tests make)."""

    def __init__(self, pods: dict[str, dict[str, Any]], *, down: bool = False, odd: list[Any] | None = None,
                 at: Any = "1000000") -> None:
        self.pods, self.down, self.odd, self.pages, self.at = pods, down, odd or [], 0, at

    def request(self, method: str, path: str, *, query: Any = None, **_: Any) -> Any:
        if self.down:
            raise KubeError(503, method, path, b"{}")
        assert method == "GET" and path == "/api/v1/pods" and "fieldSelector" not in query
        items = [copy.deepcopy(p) for p in self.pods.values()] + self.odd
        at = int(query.get("continue") or 0)
        self.pages += 1
        more = at + 2 < len(items)
        return {"items": items[at:at + 2], "metadata": {"continue": str(at + 2) if more else "",
                                                          "resourceVersion": self.at}}


def cache_with(pods: list[dict[str, Any]]) -> ClusterCache:
    cache = ClusterCache(None, {"volcano-py"}, "default")
    cache.watcher._on_event(cache.nodes, "ADDED", node_object("n1", cpu="8", memory="32Gi"))
    for i, pod in enumerate(pods):
        pod["metadata"].setdefault("resourceVersion", str(10 + i))
        pod["metadata"].setdefault("uid", f"uid-{pod['metadata']['name']}")
        cache.watcher._on_event(cache.pods, "ADDED", copy.deepcopy(pod))
    return cache


def _pod(name: str, cpu: str = "1", rv: int = 10, node: str = "", scheduler: str = "volcano-py") -> dict[str, Any]:
    pod = pod_object(name, namespace="ns", cpu=cpu, memory="1Gi", scheduler_name=scheduler)
    pod["metadata"]["resourceVersion"], pod["metadata"]["uid"] = str(rv), f"uid-{name}"
    if node:
        pod["spec"]["nodeName"] = node
    return pod


def test_pods_bound_while_the_watch_was_behind_are_on_their_nodes_before_the_shard_is_scheduled() -> None:
    """The seed-3077 case: besides pods the cache holds pending that were bound meanwhile, a pod the cache never saw
    (created and bound while this replica's watch stood still) fills its node in the next snapshot."""
    pods = {f"ns/{n}": _pod(n, cpu="2") for n in ("bound", "gone", "waits")}
    cache = cache_with(copy.deepcopy(list(pods.values())))
    now = copy.deepcopy(pods)  # the apiserver now
    now["ns/bound"]["spec"]["nodeName"], now["ns/bound"]["metadata"]["resourceVersion"] = "n1", "99"
    del now["ns/gone"]
    now["ns/unseen"] = _pod("unseen", cpu="4", rv=120, node="n1", scheduler="other")  # another scheduler's, too
    before = cache.snapshot().nodes["n1"].idle.cpu
    assert freshen_pods(Apiserver(now), cache.stores, cache.watcher._on_event, cache.clock)  # type: ignore[arg-type]
    assert {k: o["spec"].get("nodeName") for k, o in cache.pods.objects.items()} == {
        "ns/bound": "n1", "ns/waits": None, "ns/unseen": "n1"}
    snapshot = cache.snapshot()
    assert snapshot.nodes["n1"].idle.cpu == before - 6000  # both bound pods' room taken
    # a watch event older than the list (the pod pending, before its bind) arrives late: it stays on its node
    older = copy.deepcopy(pods["ns/bound"])
    older["metadata"]["resourceVersion"] = "50"
    cache.watcher._on_event(cache.pods, "MODIFIED", older)
    assert "ns/bound" in cache.snapshot().nodes["n1"].tasks


def test_an_apiserver_that_cannot_be_read_leaves_the_cache_and_says_not_yet() -> None:
    cache = cache_with([_pod("p")])
    before = copy.deepcopy(cache.pods.objects)
    assert not freshen_pods(Apiserver({}, down=True), cache.stores,  # type: ignore[arg-type]
                            cache.watcher._on_event, cache.clock)
    assert cache.pods.objects == before


def test_a_shard_just_taken_joins_the_first_session_whose_snapshot_was_read_after_the_cache_was_made_current(
) -> None:
    server, clock = Server(), Clock()
    a = replica(server, clock, "a", shards=1)
    a.watched.synced.set()
    a.plan.step = lambda *_: None  # type: ignore[method-assign]
    answers = [False, True]
    a.freshen = lambda: answers.pop(0)
    a.round()
    assert a.held() == {0}
    jobs = {"ns/j": JobInfo("ns/j", "j", "ns", "default")}
    # a snapshot read with no `prepare` before it (the shard was taken while it was read): not this session
    assert a.restrict(ClusterSnapshot({}, dict(jobs), {})).jobs == {}
    a.prepare()  # the apiserver could not be read: not yet
    assert a.restrict(ClusterSnapshot({}, dict(jobs), {})).jobs == {}
    a.prepare()  # read now, before this cycle's snapshot: the shard joins this very session
    assert set(a.restrict(ClusterSnapshot({}, dict(jobs), {})).jobs) == {"ns/j"}
    a.prepare()
    assert set(a.restrict(ClusterSnapshot({}, dict(jobs), {})).jobs) == {"ns/j"}
    assert answers == []  # asked once per take-over, not every cycle


def test_the_cache_prepares_the_taken_shard_before_it_reads_the_stores() -> None:
    """`ClusterCache.snapshot` asks `prepare` first: what `freshen` puts into the stores is in that snapshot."""
    pod = pod_object("p", namespace="ns", cpu="4", memory="1Gi")
    cache = cache_with([pod])
    bound = copy.deepcopy(pod)
    bound["spec"]["nodeName"], bound["metadata"]["resourceVersion"] = "n1", "99"
    server, clock = Server(), Clock()
    a = replica(server, clock, "a", shards=1)
    a.plan.step = lambda *_: None  # type: ignore[method-assign]
    a.freshen = lambda: freshen_pods(Apiserver({"ns/p": bound}), cache.stores,  # type: ignore[arg-type]
                                     cache.watcher._on_event, cache.clock)
    a.round()
    cache.active = a
    snapshot = cache.snapshot()
    assert "ns/p" in snapshot.nodes["n1"].tasks  # bound by the dead replica, read in the takeover's own session


def test_hostile_list_items_neither_raise_nor_count() -> None:
    cache = cache_with([_pod("p")])
    server = Apiserver({"ns/p": _pod("p")}, odd=["not a pod", {"metadata": []}, 7])
    assert freshen_pods(server, cache.stores, cache.watcher._on_event, cache.clock)  # type: ignore[arg-type]
    assert set(cache.pods.objects) == {"ns/p"}


@pytest.mark.parametrize("seed", range(20))
def test_after_a_freshen_the_cache_holds_the_apiservers_pods_whatever_it_missed(seed: int) -> None:
    """Random histories: the cache saw some pods at some resourceVersion and missed later changes (binds,
    deletions, new pods, other schedulers'); after one freshen it holds exactly the apiserver's pods at their
    resourceVersions, and every bound pod is on its node in the snapshot."""
    rnd = random.Random(seed)
    nodes = ["n1"]
    seen = {f"ns/p{i}": _pod(f"p{i}", rv=10 + i) for i in range(rnd.randint(0, 12))}
    cache = cache_with(copy.deepcopy(list(seen.values())))
    now: dict[str, dict[str, Any]] = {}
    for key, pod in seen.items():
        fate = rnd.choice(["same", "bound", "gone", "changed"])
        if fate == "gone":
            continue
        pod = copy.deepcopy(pod)
        if fate in ("bound", "changed"):
            pod["metadata"]["resourceVersion"] = str(100 + rnd.randint(0, 50))
            pod["spec"]["nodeName"] = rnd.choice(nodes) if fate == "bound" else ""
        now[key] = pod
    for i in range(rnd.randint(0, 6)):  # created while the watch stood still
        pod = _pod(f"new{i}", rv=200 + i, node=rnd.choice(["", "n1"]),
                   scheduler=rnd.choice(["volcano-py", "other"]))
        now[f"ns/new{i}"] = pod
    assert freshen_pods(Apiserver(now), cache.stores, cache.watcher._on_event, cache.clock)  # type: ignore[arg-type]
    def state(pods: dict[str, Any]) -> dict[str, tuple[str, str]]:
        return {k: (o["metadata"]["resourceVersion"], o["spec"].get("nodeName") or "") for k, o in pods.items()}

    assert state(cache.pods.objects) == state(now)
    on_node = set(cache.snapshot().nodes["n1"].tasks)
    assert on_node == {k for k, o in now.items() if o["spec"].get("nodeName") == "n1"}


def test_a_fault_making_the_pods_current_costs_the_shard_taken_one_cycle_and_nothing_else() -> None:
    """`freshen` raising (a bug, a hostile answer) is "not yet": the shard held already is scheduled this cycle,
    the shard just taken waits, and no exception reaches the cycle."""
    server, clock = Server(), Clock()
    a = replica(server, clock, "a", shards=2)
    a.plan.step = lambda *_: None  # type: ignore[method-assign]
    a.freshen = lambda: True
    a.round()
    assert a.held() == {0, 1}
    a.prepare()
    a._checked = {0: a.electors[0].terms}  # shard 1 as if just taken
    faults = [RuntimeError("boom")]

    def freshen() -> bool:
        if faults:
            raise faults.pop()
        return True

    a.freshen = freshen
    a.prepare()  # must not raise
    assert a._checked.keys() == {0}
    a.prepare()
    assert a._checked.keys() == {0, 1}


@pytest.mark.parametrize("at", ["50", None, "not a number", ["7"]])
def test_a_pod_the_watch_showed_after_the_list_was_read_is_not_dropped_as_gone(at: Any) -> None:
    """The list is read, then a pod is created and the watch puts it in the cache before the cache is compared with
    the list: it is newer than the list, not gone (dropping it lost it for good: the watch does not show it again,
    and its gang never bound; the active-shard e2e tests timed out on it now and then). A list whose resourceVersion
    cannot be read drops nothing."""
    cache = cache_with([_pod("old", rv=10), _pod("new", rv=60)])
    assert freshen_pods(Apiserver({}, at=at), cache.stores, cache.watcher._on_event,  # type: ignore[arg-type]
                        cache.clock)
    assert sorted(cache.pods.objects) == (["ns/new"] if at == "50" else ["ns/new", "ns/old"])


def test_a_shard_lost_and_taken_again_while_the_loop_did_not_look_is_made_current_again() -> None:
    """The chaos seed-13010 case: a replica stopped past its Lease (SIGSTOP), another took its shard, bound on its
    nodes and gave it back; on waking, the replica's round took the shard again before its loop prepared a session,
    so no look ever saw the shard lost, it did not count as just taken, and a session ran on the cache its stopped
    watch had left behind (six nodes over-committed). A shard taken again is a new term: it is made current again
    before any session schedules it, and its handoff starts afresh from the NodeShard."""
    from test_active_shards_cache import holders

    server, clock = Server(), Clock()
    a = replica(server, clock, "a", shards=1)
    a.plan.step = lambda *_: None  # type: ignore[method-assign]
    answers = [True, False, True]
    a.freshen = lambda: answers.pop(0)
    jobs = {"ns/j": JobInfo("ns/j", "j", "ns", "default")}
    a.round()
    a.prepare()
    assert set(a.restrict(ClusterSnapshot({}, dict(jobs), {})).jobs) == {"ns/j"}
    restarts = []
    a.coordinators[0].restart = lambda: restarts.append(clock.now)  # type: ignore[method-assign]
    b = replica(server, clock, "b", shards=1)
    b.round()  # b sees a's Lease; a is then stopped: its Lease lapses on b's clock, b takes the shard...
    clock.now += 5.0
    b.round()
    assert holders(server, 1) == ["b"]
    b.electors[0]._release()  # ... and gives it back, and is gone
    server.objects.pop("/apis/coordination.k8s.io/v1/namespaces/ns/leases/sched-member-b")
    clock.now += 5.0
    a.round()  # a wakes: its round takes the shard again before its loop looks
    assert holders(server, 1) == ["a"] and a.held() == {0}
    a.prepare()  # the cache cannot be made current yet: the shard waits
    assert a.restrict(ClusterSnapshot({}, dict(jobs), {})).jobs == {}
    a.prepare()
    assert set(a.restrict(ClusterSnapshot({}, dict(jobs), {})).jobs) == {"ns/j"}
    assert answers == [] and len(restarts) == 1
