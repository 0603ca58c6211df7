"""A bind the apiserver accepted stays assumed on its node until the pod watch shows the pod bound or gone, or a
list shows it bound, however long that takes (cache/store.py `expire_assumed`): never forgotten for its age, as
kube-scheduler's assumed pods are never forgotten (kubernetes#106361). With a 60 s expiry, pod watches more than
a minute behind saw bound pods pending again and their room free, and 11 nodes were over-committed (`make
bench-shards --churn` at 100,000 nodes)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from test_takeover_freshen import _pod

from scheduler.cache.cluster_cache import ClusterCache
from scheduler.sim.objects import node_object


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _cache() -> tuple[ClusterCache, Clock]:
    clock = Clock()
    cache = ClusterCache(None, {"volcano-py"}, "default")
    cache.clock = clock
    cache.watcher._on_event(cache.nodes, "ADDED", node_object("n1", cpu="8", memory="32Gi"))
    cache.watcher._on_event(cache.pods, "ADDED", _pod("p", cpu="6", rv=10))
    return cache, clock


def _on_n1(cache: ClusterCache) -> set[str]:
    return set(cache.snapshot().nodes["n1"].tasks)


@pytest.mark.parametrize("hours", [0.02, 1, 48])
def test_an_accepted_bind_the_watch_has_not_shown_stays_on_its_node_however_long(hours: float) -> None:
    cache, clock = _cache()
    cache.binder.assume([("ns/p", "n1")], clock())
    assert _on_n1(cache) == {"ns/p"}
    clock.now += hours * 3600  # the watch far behind: still the pod's room, not free room
    assert _on_n1(cache) == {"ns/p"} and cache.snapshot().nodes["n1"].idle.cpu == 2000
    late = _pod("p", cpu="6", rv=11)  # an older state of the pod (a label, say), still pending: still assumed
    cache.watcher._on_event(cache.pods, "MODIFIED", late)
    assert _on_n1(cache) == {"ns/p"}


@pytest.mark.parametrize("how", ["bound event", "deleted", "listed bound"])
def test_the_assumption_ends_when_the_watch_or_a_list_shows_the_pod_bound_or_gone(how: str) -> None:
    cache, clock = _cache()
    cache.binder.assume([("ns/p", "n1")], clock())
    bound = _pod("p", cpu="6", rv=20, node="n1")
    if how == "bound event":
        cache.watcher._on_event(cache.pods, "MODIFIED", copy.deepcopy(bound))
    elif how == "deleted":
        cache.watcher._on_event(cache.pods, "DELETED", copy.deepcopy(bound))
    else:
        _relist(cache, [bound])
    cache.snapshot()
    assert "ns/p" not in cache.stores.assumed
    assert _on_n1(cache) == (set() if how == "deleted" else {"ns/p"})


def test_a_list_that_shows_the_pod_still_pending_keeps_the_assumption() -> None:
    """The bind landed after the list was taken: the watch, restarted from the list, will show it."""
    cache, clock = _cache()
    cache.binder.assume([("ns/p", "n1")], clock())
    _relist(cache, [_pod("p", cpu="6", rv=15)])
    assert cache.stores.assumed["ns/p"][0] == "n1" and _on_n1(cache) == {"ns/p"}


def _relist(cache: ClusterCache, pods: list[dict[str, Any]]) -> None:
    page = {"items": copy.deepcopy(pods), "metadata": {"resourceVersion": "30"}}
    cache.watcher._pages = lambda path: iter([page])  # type: ignore[method-assign]
    cache.stores.priority_classes.synced.set()  # (the pod list waits for the priority classes' first)
    cache.watcher._list(cache.pods)
