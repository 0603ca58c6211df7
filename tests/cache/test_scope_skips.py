"""A replica's pod watch reads another scheduler's pod bound outside its scope without decoding it
(cache/scope.py `PodScope.skips`, cache/watch.py `_on_line`): on any pod, however its labels, annotations and
nodeSelector are named, a line is skipped only when the decoded pod is one the scope does not keep, never ours
and never one bound in the scope; the watch goes on from the last event it read, skipped or not."""

from __future__ import annotations

import json
import threading
from typing import Any

import orjson
from hypothesis import given, settings, strategies as st

from scheduler.cache.cluster_cache import ClusterCache
from scheduler.cache.scope import PodScope

OURS = "volcano-py"
NODES = ["n0", "n1", "n2", "n3"]
SCOPE = frozenset({"n0", "n1"})
MEMBERS = ["nodeName", "schedulerName", "nodeName", "schedulerName", "namespace", "name", "metadata", "app"]
# values a careless or hostile writer might give: node names in and out of the scope, our name, quotes, escapes
VALUES = st.sampled_from(["n2", "n3", "other", "n0", OURS, "", 'a"b', "a\\b", "\u00e9", "n2\\", '"n2"'])


def _scope() -> PodScope:
    scope = PodScope([OURS])
    scope.nodes = SCOPE
    return scope


@st.composite
def pods(draw: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "x"}]}
    scheduler = draw(st.sampled_from([OURS, "other", None]))
    if scheduler is not None:
        spec["schedulerName"] = scheduler
    node = draw(st.sampled_from([*NODES, "", None]))
    if node is not None:
        spec["nodeName"] = node
    if draw(st.booleans()):
        spec["nodeSelector"] = draw(st.dictionaries(st.sampled_from(MEMBERS), VALUES, max_size=2))
    meta: dict[str, Any] = {"name": "p", "namespace": "ns", "resourceVersion": str(draw(st.integers(1, 10**9)))}
    for field in ("labels", "annotations"):
        if draw(st.booleans()):
            meta[field] = draw(st.dictionaries(st.sampled_from(MEMBERS), VALUES, max_size=3))
    meta = {key: meta[key] for key in draw(st.permutations(sorted(meta)))}  # the name first, or not
    order = draw(st.permutations(["metadata", "spec", "status"]))  # a server may order the members its own way
    parts = {"metadata": meta, "spec": spec, "status": {"phase": "Running" if node else "Pending"}}
    return {key: parts[key] for key in order}


@settings(max_examples=1500, deadline=None)
@given(pods(), st.sampled_from(["ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"]), st.booleans())
def test_a_line_is_skipped_only_when_the_scope_would_not_keep_its_pod(pod: dict[str, Any], kind: str,
                                                                     stored: bool) -> None:
    """`stored`: the store holds the pod (kept before the scope moved, or ours): its delete must be read. A delete
    of a pod the store does not hold changes nothing."""
    scope = _scope()
    line = orjson.dumps({"type": kind, "object": pod}) + b"\n"
    if not scope.skips(line, {"ns/p"} if stored else set()):
        return
    if kind == "DELETED":
        assert not stored
        return
    spec = pod["spec"]
    assert kind in ("ADDED", "MODIFIED")
    assert spec.get("schedulerName", "default-scheduler") != OURS  # ours: always read
    assert spec.get("nodeName") not in SCOPE  # bound in the scope: always read
    assert not scope.keeps(pod)  # what the decoded read would do


def test_a_label_named_like_the_members_never_hides_a_pod_in_the_scope_or_ours() -> None:
    scope = _scope()
    for labels, spec in (({"nodeName": "n2"}, {"nodeName": "n0", "schedulerName": "other"}),
                         ({"schedulerName": "other"}, {"nodeName": "n2", "schedulerName": OURS})):
        for pod in ({"metadata": {"labels": labels, "resourceVersion": "3"}, "spec": spec},
                    {"spec": {"nodeSelector": labels, **spec}, "metadata": {"resourceVersion": "3"}}):
            assert scope.keeps(pod) and not scope.skips(orjson.dumps({"type": "ADDED", "object": pod}), ())


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["n2", "n3", "node-with-a-long-name.example.com"]), st.sampled_from(["other", None]),
       st.sampled_from(["ADDED", "MODIFIED", "DELETED"]), st.dictionaries(st.sampled_from(["app", "team"]), VALUES))
def test_another_schedulers_pod_bound_outside_the_scope_is_skipped(node: str, scheduler: str | None, kind: str,
                                                                    labels: dict[str, str]) -> None:
    """The skip is taken: a pod with one nodeName and one schedulerName, as the apiserver writes a bound pod."""
    scope = _scope()
    pod: dict[str, Any] = {"metadata": {"name": "p", "namespace": "ns", "resourceVersion": "7", "labels": labels},
                           "spec": {"nodeName": node, "schedulerName": scheduler or "default-scheduler"}}
    assert not scope.keeps(pod)
    line = orjson.dumps({"type": kind, "object": pod})
    assert scope.skips(line, ())
    assert scope.skips(line, {"ns/p"}) == (kind != "DELETED")  # a delete of a pod the store holds: decoded
    assert not scope.skips(json.dumps({"type": kind, "object": pod}).encode(), ())  # not compact: decoded


def _line(kind: str, name: str, rv: int, node: str, scheduler: str = "other") -> bytes:
    pod = {"metadata": {"name": name, "namespace": "ns", "resourceVersion": str(rv), "uid": f"u-{name}"},
           "spec": {"schedulerName": scheduler, "nodeName": node,
                    "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]},
           "status": {"phase": "Running"}}
    return orjson.dumps({"type": kind, "object": pod}) + b"\n"


class Lines:
    """A Kube whose pod watch sends the given lines, then fails (`cut`) or ends."""

    def __init__(self, lines: list[bytes], cut: bool) -> None:
        self.lines, self.cut = lines, cut

    def stream_lines(self, path: str, query: Any, read_timeout: float) -> Any:
        yield from self.lines
        if self.cut:
            raise OSError("connection reset")


def _cache(kube: Lines) -> ClusterCache:
    cache = ClusterCache(None, {OURS}, "default")
    cache.stores.pod_scope = _scope()
    cache.watcher.kube = kube  # type: ignore[assignment]
    cache.pods.resource_version = "1"
    return cache


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(NODES), st.sampled_from(["other", OURS]), st.booleans()), min_size=1,
                max_size=12), st.randoms(use_true_random=False), st.booleans())
def test_the_watch_keeps_what_the_scope_keeps_and_goes_on_from_the_last_event_it_read(
        pods: list[tuple[str, str, bool]], rnd: Any, cut: bool) -> None:
    """Pods added, changed, some deleted (in any order after their adds); one of another scheduler's outside the
    scope already stored (kept before the scope moved) and deleted too. The store ends holding exactly the pods the
    scope keeps that were not deleted, the stored one's delete read, and the watch's position is the last line's."""
    lines, rv = [], 10
    for i, (node, scheduler, _) in enumerate(pods):
        for kind in ("ADDED", "MODIFIED"):
            rv += 1
            lines.append(_line(kind, f"p{i}", rv, node, scheduler))
    deletes = [i for i, (_, _, deleted) in enumerate(pods) if deleted]
    rnd.shuffle(deletes)
    for i in [*deletes, -1]:  # p-1: stored before the scope moved, outside it now
        rv += 1
        lines.append(_line("DELETED", f"p{i}", rv, pods[i][0] if i >= 0 else "n3",
                           pods[i][1] if i >= 0 else "other"))
    cache = _cache(Lines(lines, cut))
    cache.pods.objects["ns/p-1"] = orjson.loads(_line("ADDED", "p-1", 9, "n3"))["object"]
    try:
        cache.watcher._watch(cache.pods)
    except OSError:
        assert cut
    scope = cache.stores.pod_scope
    assert scope is not None
    assert cache.pods.resource_version == str(rv)  # the last line's, even one not decoded
    kept = {f"ns/p{i}" for i, (node, scheduler, deleted) in enumerate(pods)
            if (node in SCOPE or scheduler == OURS) and not deleted}
    assert set(cache.pods.objects) == kept
    outside = sum((2 + deleted) for node, scheduler, deleted in pods if node not in SCOPE and scheduler != OURS)
    assert scope.skipped == outside  # every line of theirs skipped but the stored pod's delete


def test_a_skipped_line_that_does_not_decode_leaves_the_position_where_it_was() -> None:
    """A line that looks like a pod outside the scope but is not JSON: skipped, and the watch resumes from the last
    event it could read (the server sends the rest again)."""
    broken = b'{"type":"ADDED","object":{"spec":{"nodeName":"n2","schedulerName":"other"}, oops\n'
    cache = _cache(Lines([_line("ADDED", "a", 10, "n0"), broken], cut=False))
    cache.watcher._watch(cache.pods)
    assert cache.pods.resource_version == "10" and set(cache.pods.objects) == {"ns/a"}


def test_the_watch_stops_between_lines_when_asked() -> None:
    stop = threading.Event()
    cache = _cache(Lines([_line("ADDED", "a", 10, "n2"), _line("ADDED", "b", 11, "n0")], cut=False))
    cache.watcher._stop = stop
    real = cache.watcher._on_line

    def on_line(w: Any, line: bytes) -> bool:
        stop.set()  # asked to stop while the first line is read
        return real(w, line)

    cache.watcher._on_line = on_line  # type: ignore[method-assign]
    cache.watcher._watch(cache.pods)
    assert cache.pods.resource_version == "10" and not cache.pods.objects  # the first, skipped, read; no more
