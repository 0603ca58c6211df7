"""During an apply, a shard lets go of the nodes leaving it that none of the apply's binds or evictions names as soon
as its binds are sent (cache/shards.py `ShardCoordinator.release`, api/shard.py `ShardLedger.release`), not after
they return; a leaving node a bind names leaves only after that bind returned. Through the cache's apply, with a
stand-in apiserver whose bind is held until the test lets it answer."""

from __future__ import annotations

import copy
import threading
from typing import Any

from scheduler.api.shard import HARD
from scheduler.api.snapshot import CycleResult, Eviction, GangBind
from scheduler.cache.cluster_cache import ClusterCache
from scheduler.sim.objects import node_object, pod_object

NODESHARDS = "/apis/shard.volcano.sh/v1alpha1/nodeshards"
WAIT = 30.0  # a bound on each wait for the other thread (a hang fails the test, it never sleeps)


class Apiserver:
    """NodeShard status PUTs (recorded with whether the bind had returned yet); the bind answers once `answer` is
    set; an eviction answers at once."""

    def __init__(self) -> None:
        self.deliver: Any = None  # the NodeShard watch, delivering each status write at once
        self.rv = 1000
        self.answer = threading.Event()
        self.bind_sent = threading.Event()
        self.put = threading.Event()
        self.bound = False
        self.statuses: list[tuple[list[str], bool]] = []  # (nodesInUse, whether the bind had returned)
        self.lock = threading.Lock()
        self.request_timeout = 5.0

    def close_streams(self) -> None:
        pass

    def close(self) -> None:
        pass

    def request(self, method: str, path: str, *, body: Any = None, **_: Any) -> Any:
        if method == "PUT" and path.startswith(NODESHARDS):
            with self.lock:
                self.rv += 1
                self.statuses.append((body["status"]["nodesInUse"], self.bound))
                stored = {**body, "metadata": {**body["metadata"], "resourceVersion": str(self.rv)}}
            if self.deliver is not None:
                self.deliver(copy.deepcopy(stored))
            self.put.set()
            return stored
        if path.endswith("/binding"):
            self.bind_sent.set()
            assert self.answer.wait(WAIT)
            with self.lock:
                self.bound = True
            return {}
        return {}


def shard(desired: list[str], in_use: list[str], rv: str) -> dict[str, Any]:
    return {"apiVersion": "shard.volcano.sh/v1alpha1", "kind": "NodeShard",
            "metadata": {"name": "ours", "resourceVersion": rv}, "spec": {"nodesDesired": desired},
            "status": {"nodesInUse": in_use}}


def cache_with_leaving_nodes(api: Apiserver) -> ClusterCache:
    """Our shard uses n1, n2, n3; then the controller keeps n1 only: n2 and n3 leave while a session applies."""
    cache = ClusterCache(None, {"volcano-py"}, "default", sharding=(HARD, "ours"))
    cache.kube = api  # type: ignore[assignment]
    for name in ("n1", "n2", "n3"):
        cache.watcher._on_event(cache.nodes, "ADDED", node_object(name, cpu="8", memory="32Gi"))
    pod = pod_object("p", namespace="ns", cpu="1", scheduler_name="volcano-py")
    pod["metadata"].update(resourceVersion="90", uid="uid-p")
    cache.watcher._on_event(cache.pods, "ADDED", pod)
    watched = cache.stores.node_shards
    watched.objects["ours"] = shard(["n1", "n2", "n3"], ["n1", "n2", "n3"], "400")
    watched.synced.set()
    snapshot = cache.snapshot()  # the session's view, its step taken
    assert snapshot.shard is not None and snapshot.shard.nodes == {"n1", "n2", "n3"}
    watched.objects["ours"] = shard(["n1"], ["n1", "n2", "n3"], "401")
    api.deliver = lambda obj: watched.objects.__setitem__("ours", obj)
    return cache


def apply_holding_the_bind(cache: ClusterCache, api: Apiserver, result: CycleResult) -> list[tuple[list[str], bool]]:
    """Apply `result` on another thread; once its bind is sent and a status written, what was written while the
    bind was still out; then the bind answers and the apply ends."""
    done = threading.Event()

    def run() -> None:
        try:
            cache.apply(result)
        finally:
            done.set()

    thread = threading.Thread(target=run)
    thread.start()
    try:
        assert api.bind_sent.wait(WAIT) and api.put.wait(WAIT)
        with api.lock:
            return copy.deepcopy(api.statuses)
    finally:
        api.answer.set()
        assert done.wait(WAIT)
        thread.join(WAIT)


def test_leaving_nodes_no_write_names_are_let_go_while_the_binds_are_out() -> None:
    api = Apiserver()
    cache = cache_with_leaving_nodes(api)
    try:
        # the session binds p to n2 (leaving) and evicts nothing: n3 goes at once, n2 once the bind returned
        result = CycleResult(binds=[GangBind("ns/p", (("ns/p", "n2"),))])
        assert apply_holding_the_bind(cache, api, result) == [(["n1", "n2"], False)]
        assert api.statuses[-1] == (["n1"], True)  # the step after the apply: n2 too, its bind returned
    finally:
        cache.stop(timeout=1.0)


def test_a_leaving_node_an_eviction_names_stays_until_the_apply_ends() -> None:
    api = Apiserver()
    cache = cache_with_leaving_nodes(api)
    try:
        result = CycleResult(binds=[GangBind("ns/p", (("ns/p", "n1"),))],
                             evictions=[Eviction("ns/v", "ns/v", "n3", "preempt")])
        assert apply_holding_the_bind(cache, api, result) == [(["n1", "n3"], False)]
        assert api.statuses[-1] == (["n1"], True)
    finally:
        cache.stop(timeout=1.0)
