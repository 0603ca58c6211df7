"""The cache's side of the NodeShard contract (`cache/shards.py`) against a recording client: the status PUT to the
status subresource with the resourceVersion read, a refused write leaving the session on what is stored, no write
from a standby, and one log line for a missing or unreadable NodeShard."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest

from scheduler.api.shard import HARD
from scheduler.cache.kube import KubeError
from scheduler.cache.shards import ShardCoordinator, node_shards_watched


class Recorder:
    """Answers PUTs of NodeShard status: with a new resourceVersion, or with the status given (409)."""

    def __init__(self, refuse: int | None = None) -> None:
        self.refuse = refuse
        self.sent: list[tuple[str, str, Any]] = []
        self.gets: list[tuple[str, Any]] = []

    def request(self, method: str, path: str, *, body: Any = None, query: Any = None, **_: Any) -> Any:
        if method == "GET":  # the pods of nodes the shard gains (cache/shards.py `_checked`): none here
            self.gets.append((path, query))
            return {"items": [], "metadata": {"resourceVersion": "1"}}
        self.sent.append((method, path, body))
        if self.refuse:
            raise KubeError(self.refuse, method, path, b'{"message": "conflict"}')
        return {**body, "metadata": {**body["metadata"], "resourceVersion": "99"}}


def coordinator(kube: Recorder, objects: dict[str, Any], may_write: bool = True) -> ShardCoordinator:
    watched = node_shards_watched()
    watched.objects.update(objects)
    watched.synced.set()
    return ShardCoordinator(kube, watched, threading.Lock(), HARD, "ours",  # type: ignore[arg-type]
                            lambda: may_write)


def obj(name: str, desired: list[str], in_use: list[str] | None = None, rv: str = "5") -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": rv}, "spec": {"nodesDesired": desired},
            "status": {"nodesInUse": in_use} if in_use is not None else {}}


def test_the_status_is_put_with_the_resource_version_and_the_session_gets_the_nodes() -> None:
    kube = Recorder()
    c = coordinator(kube, {"ours": obj("ours", ["a", "b", "c"]), "other": obj("other", ["d"], ["c"], rv="3")})
    view = c.between_sessions()
    assert view.nodes == {"a", "b"} and view.hard
    ((method, path, body),) = kube.sent
    assert (method, path) == ("PUT", "/apis/shard.volcano.sh/v1alpha1/nodeshards/ours/status")
    assert body["metadata"]["resourceVersion"] == "5"
    assert body["status"] == {"nodesInUse": ["a", "b"], "nodesToRemove": [], "nodesToAdd": ["c"]}
    # until the watch shows the write (resourceVersion 99), nothing more is sent
    assert c.between_sessions().nodes == {"a", "b"} and len(kube.sent) == 1


def test_a_refused_write_leaves_the_session_on_what_is_stored() -> None:
    kube = Recorder(refuse=409)
    c = coordinator(kube, {"ours": obj("ours", ["a", "b"], ["a"])})
    assert c.between_sessions().nodes == {"a"}  # b is not stored in nodesInUse yet: not used


def test_a_standby_writes_nothing_and_uses_only_what_is_stored() -> None:
    kube = Recorder()
    c = coordinator(kube, {"ours": obj("ours", ["a", "b"], ["b"])}, may_write=False)
    assert c.between_sessions().nodes == {"b"} and kube.sent == []


def test_a_missing_or_unreadable_shard_is_said_once(caplog: pytest.LogCaptureFixture) -> None:
    kube = Recorder()
    c = coordinator(kube, {"ours": {"metadata": {"name": "ours", "resourceVersion": "1"},
                                    "spec": {"nodesDesired": "a,b"}}})
    with caplog.at_level(logging.WARNING, logger="volcano_py.shards"):
        for _ in range(3):
            assert c.between_sessions().nodes == frozenset()
    said = [r.getMessage() for r in caplog.records]
    assert len([m for m in said if "spec.nodesDesired" in m]) == 1
    assert len([m for m in said if "there is no NodeShard ours" in m]) == 1
    assert kube.sent == []


def test_before_the_nodeshards_are_listed_no_shard_is_said_missing(caplog: pytest.LogCaptureFixture) -> None:
    c = coordinator(Recorder(), {})
    c.watched.synced.clear()  # the first cycle on a partial view can run before the NodeShard list is in
    with caplog.at_level(logging.WARNING, logger="volcano_py.shards"):
        assert c.between_sessions().nodes == frozenset()
        assert caplog.records == []
        c.watched.synced.set()  # listed, and there is none
        assert c.between_sessions().nodes == frozenset()
    assert ["there is no NodeShard ours" in r.getMessage() for r in caplog.records] == [True]


def test_the_cache_watches_nodeshards_only_with_sharding_on_and_its_snapshot_carries_the_shard() -> None:
    from scheduler.api.snapshot import CycleResult
    from scheduler.cache.cluster_cache import ClusterCache

    off = ClusterCache(None)
    assert off.shards is None and off.stores.node_shards is None
    assert "NodeShard" not in {w.kind for w in off.stores.watched}
    assert off.snapshot().shard is None
    on = ClusterCache(None, sharding=(HARD, "ours"))
    assert "NodeShard" in {w.kind for w in on.stores.watched}
    kube = Recorder()
    on.kube = kube  # type: ignore[assignment]
    assert on.stores.node_shards is not None
    on.stores.node_shards.objects["ours"] = obj("ours", ["a"])
    snapshot = on.snapshot()
    assert snapshot.shard is not None and snapshot.shard.nodes == {"a"} and snapshot.shard.hard
    assert kube.gets == []  # a node no other shard was seen holding: used as Volcano uses it
    assert [(m, p) for m, p, _ in kube.sent] == [("PUT", "/apis/shard.volcano.sh/v1alpha1/nodeshards/ours/status")]
    on.stores.node_shards.objects["ours"] = obj("ours", [], ["a"], rv="100")  # the node moved away
    on.apply(CycleResult())  # the session's apply: no bind names the node, so it is let go as the binds are sent
    assert len(kube.sent) >= 2 and all(body["status"]["nodesInUse"] == [] for _, _, body in kube.sent[1:])


class Broken(Recorder):
    """A client whose PUT fails with what no caller expects (a bug below, not an apiserver answer)."""

    def request(self, method: str, path: str, *, body: Any = None, **_: Any) -> Any:
        super().request(method, path, body=body)
        raise RuntimeError("boom")


def test_a_bug_in_the_step_costs_no_cycle_and_the_session_keeps_the_last_nodes(
        caplog: pytest.LogCaptureFixture) -> None:
    kube = Recorder()
    c = coordinator(kube, {"ours": obj("ours", ["a", "b"], ["a", "b"])})
    assert c.between_sessions().nodes == {"a", "b"} and kube.sent == []  # the stored status says so already
    c.kube = Broken()  # type: ignore[assignment]
    c.watched.objects["ours"] = obj("ours", ["a", "b", "c"], ["a", "b"], rv="6")  # c added: a write is due
    with caplog.at_level(logging.WARNING, logger="volcano_py.shards"):
        for _ in range(3):
            assert c.between_sessions().nodes == {"a", "b"}
    assert len([r for r in caplog.records if "the step between sessions failed" in r.getMessage()]) == 1


def test_an_object_with_unreadable_metadata_is_passed_over() -> None:
    kube = Recorder()
    c = coordinator(kube, {"ours": obj("ours", ["a"], ["a"]), "odd": {"metadata": ["x"], "spec": {}}})
    assert c.view().keys() == {"ours"} and c.between_sessions().nodes == {"a"}
