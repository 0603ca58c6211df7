"""A node another shard lets this one have is used once its pods are current (cache/shards.py
`ShardCoordinator._checked`, cache/freshen.py `freshen_nodes`): the pod watch is a stream of its own and may not have
delivered the other scheduler's last binds on that node when the NodeShard watch delivers the status that lets it go.
Through the cache, with a stand-in apiserver that answers NodeShard status writes and field-selected pod lists."""

from __future__ import annotations

import copy
from typing import Any

from scheduler.api.shard import HARD
from scheduler.cache.cluster_cache import ClusterCache
from scheduler.cache.freshen import NODE_LISTS_MAX, freshener
from scheduler.cache.kube import KubeError
from scheduler.sim.objects import node_object, pod_object

NODESHARDS = "/apis/shard.volcano.sh/v1alpha1/nodeshards"


class Apiserver:
    """NodeShard status PUTs (a new resourceVersion each) and pod lists by `spec.nodeName`, from `pods` (the pods as
    the apiserver has them now); `down`: pod lists fail."""

    def __init__(self) -> None:
        self.pods: list[dict[str, Any]] = []
        self.down = False
        self.rv = 1000
        self.listed: list[str] = []  # the field selectors asked, in order
        self.full_lists = 0

    def request(self, method: str, path: str, *, query: Any = None, body: Any = None, **_: Any) -> Any:
        if method == "PUT" and path.startswith(NODESHARDS):
            self.rv += 1
            return {**body, "metadata": {**body["metadata"], "resourceVersion": str(self.rv)}}
        assert method == "GET" and path == "/api/v1/pods", (method, path)
        if self.down:
            raise KubeError(503, method, path, b"{}")
        selector = (query or {}).get("fieldSelector")
        if selector is None:
            self.full_lists += 1
            return {"items": copy.deepcopy(self.pods), "metadata": {"resourceVersion": str(self.rv)}}
        self.listed.append(selector)
        node = selector.removeprefix("spec.nodeName=")
        return {"items": [copy.deepcopy(p) for p in self.pods if p["spec"].get("nodeName") == node]}


def shard(name: str, desired: list[str], in_use: list[str], rv: str) -> dict[str, Any]:
    return {"apiVersion": "shard.volcano.sh/v1alpha1", "kind": "NodeShard",
            "metadata": {"name": name, "resourceVersion": rv}, "spec": {"nodesDesired": desired},
            "status": {"nodesInUse": in_use}}


def hog(node: str, rv: str = "590") -> dict[str, Any]:
    """A pod another scheduler bound on `node`, that this replica's pod watch has not delivered yet."""
    pod = pod_object("hog", namespace="ns", cpu="6", memory="1Gi", scheduler_name="volcano-py")
    pod["metadata"].update(resourceVersion=rv, uid="uid-hog")
    pod["spec"]["nodeName"] = node
    return pod


def sharded_cache(api: Apiserver, watch_at: str = "100") -> ClusterCache:
    """Our shard desires n1 and n2 and uses n1; the other shard still uses n2. The pod watch is at `watch_at`."""
    cache = ClusterCache(None, {"volcano-py"}, "default", sharding=(HARD, "ours"))
    cache.kube = api  # type: ignore[assignment]
    for name in ("n1", "n2"):
        cache.watcher._on_event(cache.nodes, "ADDED", node_object(name, cpu="8", memory="32Gi"))
    cache.stores.pods.resource_version = watch_at
    watched = cache.stores.node_shards
    watched.objects.update({"ours": shard("ours", ["n1", "n2"], ["n1"], "400"),
                            "other": shard("other", [], ["n2"], "500")})
    watched.synced.set()
    return cache


def let_go(cache: ClusterCache, rv: str = "600") -> None:
    """The other shard's status lets n2 go, and our own write of n1 is in the view."""
    cache.stores.node_shards.objects["other"] = shard("other", [], [], rv)


def step(cache: ClusterCache) -> frozenset[str]:
    """One snapshot (its step between sessions): the nodes its session may use. Then our status write comes back
    through the watch."""
    assert cache.shards is not None
    shard_view = cache.snapshot().shard
    assert shard_view is not None
    ours = cache.stores.node_shards.objects["ours"]
    written = cache.shards.ledger._written
    if written is not None:
        cache.stores.node_shards.objects["ours"] = {
            **ours, "metadata": {**ours["metadata"], "resourceVersion": str(written[0])},
            "status": {"nodesInUse": sorted(written[1])}}
    return shard_view.nodes


def test_a_node_let_go_is_used_with_the_pods_the_other_scheduler_bound_on_it_that_the_watch_had_not_shown() -> None:
    api = Apiserver()
    woken: list[int] = []
    cache = sharded_cache(api)
    assert cache.shards is not None
    cache.shards.wake = lambda: woken.append(1)
    assert step(cache) == {"n1"}  # the first step: as the first lists show (no list)
    assert api.listed == []
    api.pods.append(hog("n2"))  # bound by the other scheduler, then n2 let go: the NodeShard watch shows that first
    let_go(cache)
    # this session's copy of the pods was read before the step: n2 waits for the next session, its pods listed
    assert step(cache) == {"n1"}
    assert api.listed == ["spec.nodeName=n2"] and woken == [1]
    assert "ns/hog" in cache.pods.objects and cache.stores.assumed["ns/hog"][0] == "n2"
    assert step(cache) == {"n1", "n2"}
    snapshot = cache.snapshot()
    assert snapshot.shard is not None and "n2" in snapshot.shard.nodes
    assert snapshot.nodes["n2"].idle.cpu == 2000  # 8 CPUs less the hog's 6: not counted free
    assert len(api.listed) == 1 and woken == [1]  # listed once


def test_without_the_list_the_node_would_look_free() -> None:
    """What the check prevents: the same handoff with no freshen (Volcano's rule) counts n2 empty."""
    api = Apiserver()
    cache = sharded_cache(api)
    assert cache.shards is not None
    cache.shards.freshen = None
    step(cache)
    api.pods.append(hog("n2"))
    let_go(cache)
    snapshot = cache.snapshot()
    assert snapshot.shard is not None and snapshot.shard.nodes == {"n1", "n2"}
    assert snapshot.nodes["n2"].idle.cpu == 8000


def test_a_node_whose_pods_cannot_be_listed_waits_for_the_next_step() -> None:
    api = Apiserver()
    cache = sharded_cache(api)
    step(cache)
    api.pods.append(hog("n2"))
    let_go(cache)
    woken: list[int] = []
    assert cache.shards is not None
    cache.shards.wake = lambda: woken.append(1)
    api.down = True
    assert step(cache) == {"n1"}  # published as ours, not used yet
    assert "ns/hog" not in cache.pods.objects
    assert step(cache) == {"n1"}  # listed again, at the next step
    assert woken == []  # a list refused starts no session at once: the next comes at its period
    api.down = False
    assert step(cache) == {"n1"} and "ns/hog" in cache.pods.objects
    assert step(cache) == {"n1", "n2"}
    assert api.listed == ["spec.nodeName=n2"]  # the failed lists raised before recording


def test_a_pod_watch_past_the_status_that_let_the_node_go_needs_no_list() -> None:
    api = Apiserver()
    cache = sharded_cache(api, watch_at="700")  # it has delivered everything up to 700, after the status at 600
    step(cache)
    let_go(cache, rv="600")
    assert step(cache) == {"n1", "n2"}  # the session's copy was read at 700
    assert api.listed == []


def test_a_copy_read_before_the_status_that_let_the_node_go_is_not_enough() -> None:
    api = Apiserver()
    cache = sharded_cache(api, watch_at="550")
    step(cache)
    let_go(cache, rv="600")
    assert step(cache) == {"n1"} and api.listed == ["spec.nodeName=n2"]


def test_a_list_of_every_pod_past_the_status_needs_no_list_of_the_node_either() -> None:
    """A takeover's list of every pod (cache/freshen.py `freshen_pods`) leaves the pods as current as it was read,
    whatever the pod watch's own position."""
    api = Apiserver()
    cache = sharded_cache(api)
    step(cache)
    api.rv = 700
    freshen = freshener(lambda: api, cache.stores, cache.watcher._on_event, cache.clock,  # type: ignore[arg-type,return-value]
                        cache.pool)
    assert freshen([f"m{i}" for i in range(NODE_LISTS_MAX + 1)]) and cache.stores.pods_listed_at == 700
    let_go(cache, rv="600")
    assert step(cache) == {"n1", "n2"}
    assert api.listed == []


def test_resource_versions_that_are_not_numbers_are_listed() -> None:
    api = Apiserver()
    cache = sharded_cache(api, watch_at="zzz")
    step(cache)
    let_go(cache, rv="abc")
    assert step(cache) == {"n1"} and api.listed == ["spec.nodeName=n2"]
    assert step(cache) == {"n1", "n2"}


def test_a_node_no_other_shard_was_seen_holding_is_used_as_volcano_uses_it() -> None:
    """The documented limit: a node let go of before this process saw it held (here, before the first step) is
    used as the first lists show it, with no list (as before, and as Volcano does); one seen held is listed."""
    api = Apiserver()
    cache = sharded_cache(api)
    let_go(cache)
    assert step(cache) == {"n1", "n2"}
    assert api.listed == []


def test_a_shard_taken_again_uses_its_first_nodes_as_the_list_of_every_pod_left_them() -> None:
    api = Apiserver()
    cache = sharded_cache(api)
    assert cache.shards is not None
    step(cache)  # the other shard is seen holding n2
    cache.shards.restart()
    assert step(cache) == {"n1"}  # its stored nodes: no list
    assert api.listed == []
    let_go(cache)
    assert step(cache) == {"n1"} and api.listed == ["spec.nodeName=n2"]  # a gain after it is checked
    assert step(cache) == {"n1", "n2"}


def test_many_nodes_gained_at_once_are_made_current_by_one_list_of_every_pod() -> None:
    api = Apiserver()
    cache = sharded_cache(api)
    freshen = freshener(lambda: api, cache.stores, cache.watcher._on_event, cache.clock,  # type: ignore[arg-type,return-value]
                        cache.pool)
    api.pods.append(hog("n2"))
    assert freshen([f"m{i}" for i in range(NODE_LISTS_MAX + 1)])
    assert (api.full_lists, api.listed) == (1, [])
    assert "ns/hog" in cache.pods.objects
    assert freshen(["n2", "m1"]) and api.listed == ["spec.nodeName=n2", "spec.nodeName=m1"]


def test_a_fault_while_listing_leaves_the_node_to_be_checked_again() -> None:
    """A page the apiserver should never send (its items not a list) raises out of the list: the step keeps the
    last session's nodes, and the next step checks the gained node again rather than taking it unchecked."""
    api = Apiserver()
    cache = sharded_cache(api)
    step(cache)
    api.pods.append(hog("n2"))
    let_go(cache)
    real = api.request
    api.request = lambda method, path, **kw: {"items": 5} if method == "GET" else real(method, path, **kw)  # type: ignore[method-assign]
    assert step(cache) == {"n1"}
    api.request = real  # type: ignore[method-assign]
    assert step(cache) == {"n1"} and "ns/hog" in cache.pods.objects
    assert step(cache) == {"n1", "n2"}
