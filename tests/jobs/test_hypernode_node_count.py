"""HyperNode `status.nodeCount` (scheduler/controllers/hypernode_count.py, written by the discovery worker), as
Volcano's hypernode controller keeps it (pkg/controllers/hypernode/hypernode_handler.go syncHyperNodeStatus and
its TestSyncHyperNodeStatus cases; pkg/util/hypernode/member_selector.go GetMembers): the distinct names the
members' selectors give, written for every HyperNode, only when it differs from the status."""

from __future__ import annotations

import random
from typing import Any

import pytest

from scheduler.cache.kube import KubeError
from scheduler.controllers.hypernode_conf import ConfigMapRef
from scheduler.controllers.hypernode_count import counted
from scheduler.controllers.hypernode_discovery import HYPERNODES, HyperNodeDiscovery

# Volcano's getNodes() in hypernode_handler_test.go
VOLCANO_NODES = {"node1": {"zone": "east"}, "node2": {}, "node3": {}, "node4": {"zone": "west"}, "master": {}}


def exact(name: str, kind: str = "Node") -> dict[str, Any]:
    return {"type": kind, "selector": {"exactMatch": {"name": name}}}


def regex(pattern: str, kind: str = "Node") -> dict[str, Any]:
    return {"type": kind, "selector": {"regexMatch": {"pattern": pattern}}}


def label(selector: dict[str, Any] | None, kind: str = "Node") -> dict[str, Any]:
    return {"type": kind, "selector": {"labelMatch": selector or {}}}


def hypernode(name: str, members: list[dict[str, Any]], status: int | None = None, tier: int = 1) -> dict[str, Any]:
    obj: dict[str, Any] = {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
                           "metadata": {"name": name}, "spec": {"tier": tier, "members": members}}
    if status is not None:
        obj["status"] = {"nodeCount": status}
    return obj


@pytest.mark.parametrize(("members", "nodes", "expected"), [
    ([exact("node1"), exact("node2"), exact("node3")], {}, 3),  # "Normal case": exact names count, nodes or not
    ([exact("master"), label({"matchLabels": {"zone": "east"}}), regex("node[1-3]")], VOLCANO_NODES, 4),
    ([exact("master"), label(None), regex("node[2-4]", "HyperNode")], VOLCANO_NODES, 4),  # "Nil Label"
], ids=["exact", "exact-label-regex", "exact-nil-label-regex"])
def test_volcanos_cases(members: list[dict[str, Any]], nodes: dict[str, dict[str, str]], expected: int) -> None:
    h = counted(hypernode("h", members))
    assert h is not None and h.count(nodes) == expected


def test_selectors_that_give_nothing() -> None:
    nodes = {"a1": {"zone": "x"}, "a2": {}}
    assert counted(hypernode("h", [{"type": "Node", "selector": {"exactMatch": {"name": ""}}}]))\
        .count(nodes) == 0  # type: ignore[union-attr]
    assert counted(hypernode("h", [regex("a(")])).count(nodes) == 0  # type: ignore[union-attr]
    bad_op = label({"matchExpressions": [{"key": "zone", "operator": "Gt", "values": ["1"]}]})
    assert counted(hypernode("h", [bad_op, exact("z")])).count(nodes) == 1  # type: ignore[union-attr]
    assert counted(hypernode("h", [regex("1")])).count(nodes) == 1  # type: ignore[union-attr]  # unanchored: a1
    exists = label({"matchExpressions": [{"key": "zone", "operator": "Exists"}]})
    assert counted(hypernode("h", [exists])).count(nodes) == 1  # type: ignore[union-attr]
    assert counted({"spec": {"members": "nope"}}) is None


def test_a_tier_two_hypernode_counts_its_member_hypernodes_names() -> None:
    h = counted(hypernode("spine", [exact("rack-a", "HyperNode"), exact("rack-b", "HyperNode")], tier=2))
    assert h is not None and h.count({"n1": {}, "n2": {}, "n3": {}}) == 2


class _Kube:
    """What the discovery worker calls: the ConfigMap GET (none here) and the status PATCHes, applied to `store`."""

    def __init__(self, store: dict[str, dict[str, Any]]) -> None:
        self.store, self.fail_next = store, 0
        self.patches: list[tuple[str, int]] = []

    def get_or_none(self, path: str) -> None:
        return None

    def request(self, method: str, path: str, *, body: Any = None, content_type: str | None = None,
                **_: Any) -> dict[str, Any]:
        assert method == "PATCH" and path.startswith(HYPERNODES + "/") and path.endswith("/status")
        assert content_type == "application/merge-patch+json"
        if self.fail_next:
            self.fail_next -= 1
            raise KubeError(500, method, path, b"boom")
        name = path[len(HYPERNODES) + 1:-len("/status")]
        if name not in self.store:
            raise KubeError(404, method, path, b"")
        self.store[name] = {**self.store[name], "status": dict(body["status"])}
        self.patches.append((name, body["status"]["nodeCount"]))
        return self.store[name]


def random_world(rng: random.Random) -> tuple[dict[str, dict[str, str]], dict[str, dict[str, Any]]]:
    nodes = {f"n{i}": {"zone": rng.choice("abc")} for i in range(rng.randint(0, 12))}
    store = {}
    for h in range(rng.randint(1, 6)):
        members: list[dict[str, Any]] = []
        for _ in range(rng.randint(0, 4)):
            kind = rng.choice(("exact", "regex", "label"))
            if kind == "exact":
                members.append(exact(f"n{rng.randrange(15)}"))
            elif kind == "regex":
                members.append(regex(f"^n{rng.randrange(10)}"))
            else:
                members.append(label({"matchLabels": {"zone": rng.choice("abc")}}))
        store[f"h{h}"] = hypernode(f"h{h}", members, status=rng.choice((None, 0, 1, 2)))
    return nodes, store


def selected(h: dict[str, Any], nodes: dict[str, dict[str, str]]) -> set[str]:
    """The names the test's own three selector shapes give."""
    names: set[str] = set()
    for m in h["spec"]["members"]:
        sel = m["selector"]
        if "exactMatch" in sel:
            names.add(sel["exactMatch"]["name"])
        elif "regexMatch" in sel:
            prefix = sel["regexMatch"]["pattern"][1:]
            names |= {n for n in nodes if n.startswith(prefix)}
        else:
            names |= {n for n, labels in nodes.items() if labels["zone"] == sel["labelMatch"]["matchLabels"]["zone"]}
    return names


@pytest.mark.parametrize("seed", range(25))
def test_counts_are_written_once_only_where_they_differ_and_follow_relabels(seed: int) -> None:
    rng = random.Random(seed)
    nodes, store = random_world(rng)
    kube = _Kube(store)
    worker = HyperNodeDiscovery(kube, ConfigMapRef("ns", "cm"))  # type: ignore[arg-type]
    for name, labels in nodes.items():
        worker.on_node("ADDED", {"metadata": {"name": name, "labels": labels}})
    before = {name: (h.get("status") or {}).get("nodeCount") for name, h in store.items()}
    for h in list(store.values()):
        worker.on_hypernode("ADDED", h)
    worker.write_counts()
    want = {name: len(selected(h, nodes)) for name, h in store.items()}
    assert {name: h["status"]["nodeCount"] for name, h in store.items()} == want
    assert {name for name, _ in kube.patches} == {n for n in store if before[n] != want[n]}
    # The writes come back as MODIFIED events: nothing more to write.
    kube.patches.clear()
    for h in list(store.values()):
        worker.on_hypernode("MODIFIED", h)
    worker.write_counts()
    assert kube.patches == []
    # Relabel a node (or add one): the label- and regex-selected HyperNodes follow.
    name = rng.choice(sorted(nodes)) if nodes and rng.random() < 0.7 else "n9"
    kind = "MODIFIED" if name in nodes else "ADDED"
    nodes[name] = {"zone": rng.choice("abc")}
    worker.on_node(kind, {"metadata": {"name": name, "labels": nodes[name]}})
    worker.write_counts()
    assert {n: h["status"]["nodeCount"] for n, h in store.items()} == \
        {n: len(selected(h, nodes)) for n, h in store.items()}
    # Delete a node: the HyperNodes that selected it by pattern or label count one less.
    gone = rng.choice(sorted(nodes))
    worker.on_node("DELETED", {"metadata": {"name": gone, "labels": nodes.pop(gone)}})
    worker.write_counts()
    assert {n: h["status"]["nodeCount"] for n, h in store.items()} == \
        {n: len(selected(h, nodes)) for n, h in store.items()}


def test_a_node_event_makes_due_only_the_hypernodes_whose_selectors_it_moves() -> None:
    """A node event costs a match per selector: a HyperNode is recounted (over every node) only when one of its
    selectors takes the node in or lets it go, not on every node event of the cluster."""
    store = {"gpus": hypernode("gpus", [regex("^gpu-"), label({"matchLabels": {"zone": "a"}})], status=0)}
    worker = HyperNodeDiscovery(_Kube(store), ConfigMapRef("ns", "cm"))  # type: ignore[arg-type]
    worker.on_hypernode("ADDED", store["gpus"])
    worker.write_counts()
    assert not worker.counts.pending
    steps = [("ADDED", "cpu-1", {"zone": "b"}, False), ("ADDED", "gpu-1", {"zone": "b"}, True),
             ("MODIFIED", "gpu-1", {"zone": "c"}, False),  # still matched by its name, never by its zone
             ("MODIFIED", "cpu-1", {"zone": "a"}, True), ("MODIFIED", "cpu-1", {"zone": "a", "x": "y"}, False),
             ("DELETED", "gpu-1", {"zone": "c"}, True)]
    for kind, name, labels, due in steps:
        worker.on_node(kind, {"metadata": {"name": name, "labels": labels}})
        assert worker.counts.pending is due, (kind, name, labels)
        worker.write_counts()
    assert store["gpus"]["status"] == {"nodeCount": 1}  # cpu-1, by its zone


def test_a_failed_write_is_tried_again_and_a_deleted_hypernode_is_skipped() -> None:
    store = {"a": hypernode("a", [exact("x")]), "b": hypernode("b", [exact("x"), exact("y")])}
    kube = _Kube(store)
    worker = HyperNodeDiscovery(kube, ConfigMapRef("ns", "cm"))  # type: ignore[arg-type]
    for h in list(store.values()):
        worker.on_hypernode("ADDED", h)
    kube.fail_next = 1
    with pytest.raises(KubeError):
        worker.write_counts()
    assert kube.patches == [] and worker.counts.pending
    del store["a"]  # gone before the retry (its DELETED event not seen yet): skipped
    assert worker.write_counts() == 1 and kube.patches == [("b", 2)]


def test_a_status_write_and_a_spec_change_recount() -> None:
    store = {"h": hypernode("h", [exact("x")], status=1)}
    kube = _Kube(store)
    worker = HyperNodeDiscovery(kube, ConfigMapRef("ns", "cm"))  # type: ignore[arg-type]
    worker.on_hypernode("ADDED", store["h"])
    assert worker.write_counts() == 0  # already right: not written
    store["h"] = hypernode("h", [exact("x"), exact("y"), exact("z")], status=1)
    worker.on_hypernode("MODIFIED", store["h"])
    assert worker.write_counts() == 1 and store["h"]["status"] == {"nodeCount": 3}
