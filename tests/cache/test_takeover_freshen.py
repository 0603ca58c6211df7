"""Before a replica schedules a shard it has just taken (`--active-shards`), its cache's pending pods of ours are
made as current as the apiserver's (cache/freshen.py): a pod the cache still holds pending but the apiserver no
longer lists as pending (the dead replica bound it; this replica's watch is behind) is read again and put into the
cache bound, or dropped if gone; and the shard joins the first session read after that (cache/active.py
`prepare`)."""

from __future__ import annotations

import copy
import random
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from test_active_shards_cache import Clock, Server, replica

from scheduler.api.job import JobInfo
from scheduler.api.snapshot import ClusterSnapshot
from scheduler.cache.cluster_cache import ClusterCache
from scheduler.cache.freshen import freshen_pending
from scheduler.cache.kube import KubeError
from scheduler.sim.objects import node_object, pod_object


class Apiserver:
    """The pods as the apiserver has them now: a list of the pending ones (by `spec.nodeName=`) and GETs."""

    def __init__(self, pods: dict[str, dict[str, Any]], *, down: bool = False) -> None:
        self.pods, self.down, self.gets = pods, down, []

    def request(self, method: str, path: str, *, query: Any = None, **_: Any) -> Any:
        if self.down:
            raise KubeError(503, method, path, b"{}")
        assert method == "GET" and path == "/api/v1/pods" and query["fieldSelector"] == "spec.nodeName="
        return {"items": [copy.deepcopy(p) for p in self.pods.values() if not p["spec"].get("nodeName")],
                "metadata": {}}

    def get_or_none(self, path: str) -> Any:
        self.gets.append(path)
        key = "/".join(path.split("/")[4:7:2])  # /api/v1/namespaces/<ns>/pods/<name>
        pod = self.pods.get(key)
        return copy.deepcopy(pod) if pod is not None else None


def cache_with(pods: list[dict[str, Any]]) -> ClusterCache:
    cache = ClusterCache(None, {"volcano-py"}, "default")
    cache.watcher._on_event(cache.nodes, "ADDED", node_object("n1", cpu="8", memory="32Gi"))
    for i, pod in enumerate(pods):
        pod["metadata"]["resourceVersion"] = str(10 + i)
        cache.watcher._on_event(cache.pods, "ADDED", copy.deepcopy(pod))
    return cache


def test_pods_the_dead_replica_bound_are_read_again_before_the_shard_is_scheduled() -> None:
    pods = {f"ns/{n}": pod_object(n, namespace="ns", cpu="4", memory="1Gi") for n in ("bound", "gone", "waits",
                                                                                        "assumed")}
    cache = cache_with(list(pods.values()))
    cache.stores.assumed["ns/assumed"] = ("n1", cache.clock())  # our own bind in flight: not read again
    now = copy.deepcopy(pods)  # the apiserver now: one bound by the dead replica, one deleted, one still pending
    now["ns/bound"]["spec"]["nodeName"] = "n1"
    now["ns/bound"]["metadata"]["resourceVersion"] = "99"
    now["ns/assumed"]["spec"]["nodeName"] = "n1"
    del now["ns/gone"]
    server = Apiserver(now)
    before = cache.snapshot().nodes["n1"].idle.cpu
    assert freshen_pending(server, cache.stores, cache.scheduler_names, cache.watcher._on_event, cache.clock)  # type: ignore[arg-type]
    assert sorted(server.gets) == ["/api/v1/namespaces/ns/pods/bound", "/api/v1/namespaces/ns/pods/gone"]
    assert cache.pods.objects["ns/bound"]["spec"]["nodeName"] == "n1" and "ns/gone" not in cache.pods.objects
    snapshot = cache.snapshot()
    assert "ns/bound" in snapshot.nodes["n1"].tasks and snapshot.nodes["n1"].idle.cpu == before - 4000
    assert "ns/waits" not in snapshot.nodes["n1"].tasks
    # a watch event older than the read (the pod pending, a condition patched before its bind) arrives late: the
    # pod stays bound on its node until the watch shows it bound
    older = copy.deepcopy(pods["ns/bound"])
    older["metadata"]["resourceVersion"] = "50"
    cache.watcher._on_event(cache.pods, "MODIFIED", older)
    assert "ns/bound" in cache.snapshot().nodes["n1"].tasks


def test_an_apiserver_that_cannot_be_read_leaves_the_cache_and_says_not_yet() -> None:
    pods = [pod_object("p", namespace="ns", cpu="1", memory="1Gi")]
    cache = cache_with(pods)
    before = copy.deepcopy(cache.pods.objects)
    assert not freshen_pending(Apiserver({}, down=True), cache.stores, cache.scheduler_names,  # type: ignore[arg-type]
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
    a.freshen = lambda: freshen_pending(Apiserver({"ns/p": bound}), cache.stores, cache.scheduler_names,  # type: ignore[arg-type]
                                        cache.watcher._on_event, cache.clock)
    a.round()
    cache.active = a
    snapshot = cache.snapshot()
    assert "ns/p" in snapshot.nodes["n1"].tasks  # bound by the dead replica, read in the takeover's own session


def test_hostile_pods_and_answers_neither_raise_nor_count_as_ours() -> None:
    cache = cache_with([pod_object("p", namespace="ns", cpu="1", memory="1Gi")])
    with cache.stores.lock:  # objects no watch would have parsed: a spec that is a list, a name that is a map
        cache.pods.objects["ns/odd"] = {"metadata": {"name": "odd", "namespace": "ns"}, "spec": ["x"]}
        cache.pods.objects["ns/odder"] = {"metadata": {"name": "odder", "namespace": "ns"},
                                          "spec": {"schedulerName": {"a": 1}}}

    class Odd(Apiserver):
        def request(self, method: str, path: str, **_: Any) -> Any:
            return {"items": ["not a pod", {"metadata": []}], "metadata": ["no"]}

    server = Odd({"ns/p": cache.pods.objects["ns/p"]})
    assert freshen_pending(server, cache.stores, cache.scheduler_names, cache.watcher._on_event, cache.clock)  # type: ignore[arg-type]
    assert server.gets == ["/api/v1/namespaces/ns/pods/p"]  # only our pending pod the list did not name


@pytest.mark.parametrize("seed", range(5))
def test_pods_read_again_on_a_pool_end_as_read_one_by_one(seed: int) -> None:
    """Thousands of pods may be behind a survivor's watch: they are read on the API calls' pool, with the same
    outcome as read in turn (each bound one bound and assumed where it is, each gone one dropped), and one read
    that fails makes the whole answer 'not yet'."""
    rnd = random.Random(seed)
    names = [f"p{i}" for i in range(60)]
    pods = {f"ns/{n}": pod_object(n, namespace="ns", cpu="1", memory="1Gi") for n in names}
    now = copy.deepcopy(pods)
    for key in rnd.sample(sorted(now), 40):
        if rnd.random() < 0.3:
            del now[key]
        else:
            now[key]["spec"]["nodeName"] = "n1"
            now[key]["metadata"]["resourceVersion"] = "999"
    outcomes = []
    for pool in (None, ThreadPoolExecutor(8)):
        cache = cache_with(copy.deepcopy(list(pods.values())))
        assert freshen_pending(Apiserver(now), cache.stores, cache.scheduler_names,  # type: ignore[arg-type]
                               cache.watcher._on_event, cache.clock, pool=pool)
        outcomes.append(({k: o["spec"].get("nodeName") for k, o in cache.pods.objects.items()},
                         sorted(cache.stores.assumed)))
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][0] == {k: o["spec"].get("nodeName") for k, o in now.items()}

    class Flaky(Apiserver):
        def get_or_none(self, path: str) -> Any:
            if path.endswith("/p7"):
                raise KubeError(503, "GET", path, b"{}")
            return super().get_or_none(path)

    gone = dict(now)
    gone.pop("ns/p7", None)
    gone["ns/p7"] = copy.deepcopy(pods["ns/p7"]) | {"spec": {**pods["ns/p7"]["spec"], "nodeName": "n1"}}
    cache = cache_with(copy.deepcopy(list(pods.values())))
    assert not freshen_pending(Flaky(gone), cache.stores, cache.scheduler_names,  # type: ignore[arg-type]
                               cache.watcher._on_event, cache.clock, pool=ThreadPoolExecutor(8))
