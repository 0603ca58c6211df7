"""With `--active-shards`, a replica keeps another scheduler's pod only when it is bound to a node of the shards it
holds (cache/scope.py): such pods are dropped from the stores, the list of every pod and the node lists, and a node
joining the scope is placed on only once a list taken after it joined has put its pods in. The stores then hold,
for every node a session may place on, exactly the pods a replica keeping every pod holds."""

from __future__ import annotations

import copy
import random
from functools import partial
from typing import Any

import orjson
import pytest
from hypothesis import given, settings, strategies as st
from test_active_shards_cache import Clock, Server, replica
from test_takeover_freshen import Apiserver, _pod

from scheduler.api.job import JobInfo
from scheduler.api.node import NodeInfo
from scheduler.api.resources import Resource
from scheduler.api.snapshot import ClusterSnapshot
from scheduler.cache.cluster_cache import ClusterCache
from scheduler.cache.freshen import drop_pods, freshen_pods, freshener
from scheduler.cache.kube import KubeError
from scheduler.cache.scope import PodScope
from scheduler.sim.objects import node_object

NODES = [f"n{i}" for i in range(6)]


def test_a_pod_is_kept_when_ours_bound_in_the_scope_or_unreadable() -> None:
    scope = PodScope(["volcano-py"])
    scope.nodes = frozenset({"n0"})
    assert scope.keeps(_pod("ours", node="n5"))  # every replica's pods: gangs, routes and queue totals read them
    assert scope.keeps(_pod("ours-waits"))
    assert not scope.keeps(_pod("waits", scheduler="other"))  # another scheduler's, pending: on no node, no room
    assert scope.keeps(_pod("here", node="n0", scheduler="other"))
    assert not scope.keeps(_pod("there", node="n5", scheduler="other"))
    default = _pod("default", node="n5")
    del default["spec"]["schedulerName"]  # kube-scheduler's
    assert not scope.keeps(default)
    specs: list[object] = [None, [], "x", {"nodeName": 7, "schedulerName": "other"}]
    for spec in specs:  # left to the parser to name
        assert scope.keeps({"metadata": {"name": "odd", "namespace": "ns"}, "spec": spec})
    assert not scope.keeps(_pod("odd-scheduler", node="n5", scheduler=["x"]))  # type: ignore[arg-type]


def test_nodes_joining_are_unlisted_until_a_list_taken_after_they_joined_succeeds() -> None:
    scope = PodScope(["volcano-py"])
    asked: list[list[str]] = []
    answers = [False, True]

    def list_pods(names: Any) -> bool:
        asked.append(list(names))
        assert scope.nodes >= set(names)  # the scope is set before the list: the watch keeps their pods from then
        return answers.pop(0)

    scope.step(frozenset({"n0", "n1"}), list_pods)  # the list fails: both stay unlisted
    assert scope.unlisted == {"n0", "n1"} and asked == [["n0", "n1"]]
    scope.step(frozenset({"n1", "n2"}), list_pods)  # n0 left; n1 and n2 listed now
    assert scope.nodes == {"n1", "n2"} and scope.unlisted == set() and asked[-1] == ["n1", "n2"]
    scope.step(frozenset({"n1", "n2", "n3"}), None)  # a shard taken: every pod listed next
    assert scope.unlisted == {"n3"}
    scope.step(scope.nodes, None, listed_all=True)
    assert scope.unlisted == set()


def _cache(scope: PodScope | None) -> ClusterCache:
    cache = ClusterCache(None, {"volcano-py"}, "default")
    cache.stores.pod_scope = scope
    for name in NODES:
        cache.watcher._on_event(cache.nodes, "ADDED", node_object(name, cpu="64", memory="256Gi"))
    return cache


class NodeLists(Apiserver):
    """The apiserver's pods, listed whole (pages of two) or by `spec.nodeName`."""

    def __init__(self, pods: dict[str, dict[str, Any]], at: int) -> None:
        super().__init__(pods, at=str(at))
        self.fail = False

    def request(self, method: str, path: str, *, query: Any = None, **kw: Any) -> Any:
        if self.fail:
            raise KubeError(503, method, path, b"{}")
        selector = (query or {}).get("fieldSelector")
        if selector is None:
            return super().request(method, path, query=query, **kw)
        node = selector.removeprefix("spec.nodeName=")
        return {"items": [copy.deepcopy(p) for p in self.pods.values() if p["spec"].get("nodeName") == node],
                "metadata": {"resourceVersion": self.at}}


class Pool:
    """The pool freshen_nodes submits its lists to, run in line."""

    def submit(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        class Done:
            def __init__(self, value: Any = None, error: BaseException | None = None) -> None:
                self.value, self.error = value, error

            def result(self) -> Any:
                if self.error is not None:
                    raise self.error
                return self.value
        try:
            return Done(fn(*args, **kwargs))
        except KubeError as exc:
            return Done(error=exc)


def _on(cache: ClusterCache, node: str) -> dict[str, str]:
    return {k: o["metadata"]["resourceVersion"] for k, o in cache.pods.objects.items()
            if (o.get("spec") or {}).get("nodeName") == node}


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_every_node_a_session_may_place_on_holds_the_pods_a_replica_keeping_every_pod_holds(seed: int) -> None:
    """Random days: pods of ours and of another scheduler created, bound and deleted, the scope moving, node lists
    failing now and then, a shard taken (every pod listed). After every step, on every node in the scope and
    listed, the scoped cache (reading each event as the watch's line, some skipped undecoded: `PodScope.skips`) holds
    exactly the pods (and versions) the keep-everything cache holds, and the same room
    free in its snapshot; our pods are all kept; of another scheduler's, only those bound in the scope (not pending)."""
    rng = random.Random(seed)
    scope = PodScope(["volcano-py"])
    scoped, whole = _cache(scope), _cache(None)
    scope.drop = partial(drop_pods, scoped.stores, scoped.watcher._on_event)
    truth: dict[str, dict[str, Any]] = {}
    version = 100

    def event(kind: str, pod: dict[str, Any]) -> None:  # the scoped cache reads the line the watch reads
        scoped.watcher._on_line(scoped.pods, orjson.dumps({"type": kind, "object": pod}) + b"\n")
        whole.watcher._on_event(whole.pods, kind, copy.deepcopy(pod))

    for step in range(60):
        version += 1
        roll = rng.random()
        if roll < 0.35 or not truth:  # a pod created, pending or already bound (another scheduler's, say)
            name = f"p{step}"
            pod = _pod(name, cpu=str(rng.randint(1, 4)), rv=version,
                       node=rng.choice(["", *NODES]), scheduler=rng.choice(["volcano-py", "other", "other"]))
            truth[f"ns/{name}"] = pod
            event("ADDED", pod)
        elif roll < 0.6:  # a pending pod bound, or a bound one changed
            key = rng.choice(sorted(truth))
            pod = copy.deepcopy(truth[key])
            pod["spec"]["nodeName"] = pod["spec"].get("nodeName") or rng.choice(NODES)
            pod["metadata"]["resourceVersion"] = str(version)
            truth[key] = pod
            event("MODIFIED", pod)
        elif roll < 0.75:
            key = rng.choice(sorted(truth))
            event("DELETED", truth.pop(key))
        else:  # the held shards' nodes change; their pods listed as the loop does (or every pod, a shard taken)
            api = NodeLists(truth, version)
            api.fail = rng.random() < 0.2
            wanted = frozenset(rng.sample(NODES, rng.randint(0, len(NODES))))
            if rng.random() < 0.2:
                scope.step(wanted, None)
                if not api.fail and freshen_pods(api, scoped.stores, scoped.watcher._on_event,  # type: ignore[arg-type]
                                                 scoped.clock):
                    scope.step(scope.nodes, None, listed_all=True)
            else:
                scope.step(wanted, freshener(lambda api=api: api, scoped.stores,  # type: ignore[misc]
                                             scoped.watcher._on_event, scoped.clock, Pool()))  # type: ignore[arg-type]
        usable = scope.nodes - scope.unlisted
        free_scoped, free_whole = scoped.snapshot().nodes, whole.snapshot().nodes
        for node in usable:
            assert _on(scoped, node) == _on(whole, node), (seed, step, node)
            assert free_scoped[node].idle == free_whole[node].idle, (seed, step, node)
        for key, obj in whole.pods.objects.items():
            spec = obj["spec"]
            if spec.get("schedulerName") == "volcano-py":
                assert scoped.pods.objects.get(key, {}).get("metadata", {}).get("resourceVersion") == \
                    obj["metadata"]["resourceVersion"], (seed, step, key)
        for key, obj in scoped.pods.objects.items():  # of another scheduler's pods, only those bound in the scope
            assert key in scoped.parser.parsed or not obj["spec"].get("nodeName"), (seed, key)
            node = obj["spec"].get("nodeName")
            assert node in scope.nodes or obj["spec"].get("schedulerName") == "volcano-py", (seed, key)


def test_the_pod_list_keeps_only_what_the_scope_keeps() -> None:
    scope = PodScope(["volcano-py"])
    scope.nodes = frozenset({"n0"})
    cache = _cache(scope)
    pods = [_pod("ours", node="n1"), _pod("here", node="n0", scheduler="other"),
            _pod("there", node="n1", scheduler="other"), _pod("waits", scheduler="other")]
    cache.watcher._pages = lambda path: iter([{"items": copy.deepcopy(pods),  # type: ignore[method-assign]
                                               "metadata": {"resourceVersion": "9"}}])
    cache.watcher._list(cache.pods)
    assert set(cache.pods.objects) == {"ns/ours", "ns/here"} and scope.dropped == 2
    # the pod moves out of the scope (the scope narrowed): its copy goes as if deleted, parsed copy too
    scope.nodes = frozenset()
    moved = copy.deepcopy(pods[1])
    moved["metadata"]["resourceVersion"] = "20"
    cache.watcher._on_event(cache.pods, "MODIFIED", moved)
    assert "ns/here" not in cache.pods.objects and "ns/here" not in cache.parser.parsed


@pytest.mark.parametrize("listed", [False, True])
def test_a_session_places_on_no_node_of_its_shard_whose_pods_are_unlisted(listed: bool) -> None:
    server, clock = Server(), Clock()
    a = replica(server, clock, "a", shards=1)
    a.round()
    assert a.held() == {0}
    obj: dict[str, Any] = {"metadata": {"name": "volcano-py-shard-0", "resourceVersion": "1"},
                           "spec": {"nodesDesired": ["n0", "n1"]}, "status": {"nodesInUse": ["n0", "n1"]}}
    a.watched.objects["volcano-py-shard-0"] = obj
    a.watched.synced.set()
    a.plan.step = lambda *_: None  # type: ignore[method-assign]
    a.scope = PodScope(["volcano-py"])
    a.list_pods = lambda names: listed
    a.freshen = lambda: True
    a.prepare()  # the shard taken: every pod listed (freshen), so n0 and n1 are listed
    assert a.scope.nodes == {"n0", "n1"} and a.scope.unlisted == set()
    obj["spec"]["nodesDesired"] = obj["status"]["nodesInUse"] = ["n0", "n1", "n2"]  # n2 joins: listed by `list_pods`
    obj["metadata"]["resourceVersion"] = "2"
    a.prepare()
    nodes = {n: NodeInfo(n, Resource.of(cpu=8000)) for n in ("n0", "n1", "n2")}
    view = a.restrict(ClusterSnapshot(nodes, {"ns/j": JobInfo("ns/j", "j", "ns", "default")}, {}))
    assert view.shard is not None
    assert view.shard.nodes == ({"n0", "n1", "n2"} if listed else {"n0", "n1"})


def test_a_pod_whose_node_name_is_not_a_string_never_fails_the_scope_step() -> None:
    """A stored pod written carelessly (its nodeName a list, a number): the nodes leaving the scope are dropped
    without a fault, and that pod is kept (the parser names its field)."""
    scope = PodScope(["volcano-py"])
    cache = _cache(scope)
    scope.drop = partial(drop_pods, cache.stores, cache.watcher._on_event)
    scope.nodes = frozenset({"n0", "n1"})
    for name, node in (("list", ["n0"]), ("number", 7), ("dict", {"n": 1}), ("fine", "n0")):
        pod = _pod(name, scheduler="other")
        pod["spec"]["nodeName"] = node
        cache.pods.objects[f"ns/{name}"] = pod
    scope.step(frozenset({"n1"}), None)
    assert set(cache.pods.objects) == {"ns/list", "ns/number", "ns/dict"}
    assert scope.keeps([]) and scope.keeps("x")  # type: ignore[arg-type]
