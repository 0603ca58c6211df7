"""HyperNode discovery from node labels, the model (scheduler/controllers/hypernode_model.py, hypernode_conf.py):
seeded random node label sets, applied to an in-memory set of HyperNodes, checked for the properties Volcano's
label discoverer has (pkg/controllers/hypernode/discovery/label/label.go): every labelled node is in exactly one
leaf, tiers nest, a second reconcile writes nothing, relabels and removals converge, hand-written HyperNodes stay.
"""

from __future__ import annotations

import logging
import random
import re
from typing import Any

import pytest

from scheduler.controllers.hypernode_conf import ConfError, ConfigMapRef, LabelTopology, parse
from scheduler.controllers.hypernode_discovery import HyperNodeDiscovery
from scheduler.controllers.hypernode_model import (
    SOURCE,
    SOURCE_KEY,
    HyperNodeView,
    NodeView,
    hypernode_view,
    plan,
    wanted,
)

RACK, SPINE, POD = "example.com/rack", "example.com/spine", "example.com/pod"
TOPOLOGY = LabelTopology("fabric", (RACK, SPINE, POD))  # tier 1 = rack
NAME = re.compile(r"^hypernode-fabric-tier[123]-[bcdfghjklmnpqrstvwxz2456789]{5}$")
HAND = {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
        "metadata": {"name": "hand-written", "labels": {RACK: "r0"}},
        "spec": {"tier": 1, "members": [{"type": "Node", "selector": {"exactMatch": {"name": "n0"}}}]}}


def random_nodes(rng: random.Random, count: int) -> dict[str, dict[str, str]]:
    """Node -> labels, hierarchical (a rack is in one spine, a spine in one pod); some nodes stop early."""
    nodes = {}
    for i in range(count):
        rack = rng.randrange(8)
        spine, pod = rack // 3, rack // 6
        labels = {"kubernetes.io/hostname": f"n{i}", "unrelated": str(rng.randrange(3))}
        depth = rng.choice([0, 1, 2, 3, 3, 3])
        path = [(RACK, f"r{rack}"), (SPINE, f"s{spine}"), (POD, f"p{pod}")]
        labels.update(path[:depth])
        if depth < 3 and rng.random() < 0.3:  # a higher label without the one below: the walk stops anyway
            labels[POD] = f"p{pod}"
        nodes[f"n{i}"] = labels
    return nodes


def apply(store: dict[str, dict[str, Any]], nodes: dict[str, dict[str, str]], rng: random.Random,
          topologies=(TOPOLOGY,)) -> int:
    """One reconcile against `store` (name -> HyperNode); the number of writes it made."""
    existing = [h for h in map(hypernode_view, store.values()) if h is not None]
    want = wanted(topologies, [NodeView(n, labels) for n, labels in nodes.items()], existing, rng)
    writes = plan(want, existing)
    for obj in writes.create + writes.update:
        store[obj["metadata"]["name"]] = obj
    for name in writes.delete:
        del store[name]
    return len(writes.create) + len(writes.update) + len(writes.delete)


def ours(store: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {n: h for n, h in store.items() if (h["metadata"].get("labels") or {}).get(SOURCE_KEY) == SOURCE}


def members(h: dict[str, Any]) -> list[str]:
    return [m["selector"]["exactMatch"]["name"] for m in h["spec"]["members"]]


def nodes_under(store: dict[str, dict[str, Any]], name: str) -> set[str]:
    h = store[name]
    if h["spec"]["tier"] == 1:
        return set(members(h))
    return set().union(*(nodes_under(store, m) for m in members(h)))


def domains(store: dict[str, dict[str, Any]]) -> dict[tuple[int, str], str]:
    """(tier, label value) -> the name of the HyperNode discovery made for it."""
    return {(h["spec"]["tier"], h["metadata"]["labels"][h["spec"]["tierName"]]): n for n, h in ours(store).items()}


def check(store: dict[str, dict[str, Any]], nodes: dict[str, dict[str, str]]) -> None:
    """The properties of the discovered set, against the labels alone."""
    made = ours(store)
    by_domain = domains(store)
    for name, h in made.items():
        assert NAME.match(name), name
        tier, tier_name = h["spec"]["tier"], h["spec"]["tierName"]
        assert tier_name == TOPOLOGY.tiers[tier - 1]
        value = h["metadata"]["labels"][tier_name]
        kind = "Node" if tier == 1 else "HyperNode"
        assert {m["type"] for m in h["spec"]["members"]} == {kind}
        assert members(h) == sorted(members(h)) and members(h)
        if tier > 1:  # tiers nest: an upper tier's members are the HyperNodes of the tier below
            assert all(made[m]["spec"]["tier"] == tier - 1 for m in members(h))
        # the nodes whose labels walk up to here (all labels of tiers 1..tier present), and nothing else below
        walk = TOPOLOGY.tiers[:tier]
        reach = {n for n, labels in nodes.items() if all(k in labels for k in walk) and labels[tier_name] == value}
        assert reach
        if tier == 1:
            assert set(members(h)) == reach
        else:  # members: the HyperNodes of the tier below that such a node is in (as Volcano links them)
            below = TOPOLOGY.tiers[tier - 2]
            assert set(members(h)) == {by_domain[(tier - 1, nodes[n][below])] for n in reach}
    leaves = [h for h in made.values() if h["spec"]["tier"] == 1]
    for node, labels in nodes.items():
        count = sum(node in members(h) for h in leaves)
        assert count == (1 if RACK in labels else 0), node
    for tier in (1, 2):  # each HyperNode has at most one parent
        parents: dict[str, int] = {}
        for h in made.values():
            if h["spec"]["tier"] == tier + 1:
                for m in members(h):
                    parents[m] = parents.get(m, 0) + 1
        assert all(c == 1 for c in parents.values())
    # one HyperNode per (tier, label value)
    keys = [(h["spec"]["tier"], h["metadata"]["labels"][h["spec"]["tierName"]]) for h in made.values()]
    assert len(keys) == len(set(keys))
    assert store.get("hand-written") == HAND  # never touched


@pytest.mark.parametrize("seed", range(40))
def test_random_labels_discover_and_converge(seed: int) -> None:
    rng = random.Random(seed)
    nodes = random_nodes(rng, rng.randrange(0, 30))
    store = {"hand-written": HAND}
    apply(store, nodes, rng)
    check(store, nodes)
    names = set(store)
    assert apply(store, nodes, rng) == 0  # rerun: no writes
    assert set(store) == names
    # relabel some, strip some, delete some, add some: converges to what the new labels describe
    for name in list(nodes):
        roll = rng.random()
        if roll < 0.2:
            del nodes[name]
        elif roll < 0.4:
            nodes[name] = {k: v for k, v in nodes[name].items() if k != RACK}
        elif roll < 0.6:
            rack = rng.randrange(8)
            nodes[name].update({RACK: f"r{rack}", SPINE: f"s{rack // 3}", POD: f"p{rack // 6}"})
    nodes.update({f"new{i}": labels for i, labels in enumerate(random_nodes(rng, 5).values())})
    before = domains(store)
    apply(store, nodes, rng)
    check(store, nodes)
    assert apply(store, nodes, rng) == 0
    after = domains(store)
    assert {d: before[d] for d in before.keys() & after.keys()} == {d: after[d] for d in before.keys() & after.keys()}
    # every label removed: everything discovery made is deleted, the hand-written one stays
    apply(store, {n: {} for n in nodes}, rng)
    assert store == {"hand-written": HAND}


def test_the_standby_keeps_the_names_a_former_leader_created() -> None:
    """A reconcile cut short (some creates made) then run again from scratch with another random source: the
    HyperNodes already made are found again by their label, none is duplicated."""
    rng = random.Random(7)
    nodes = random_nodes(rng, 40)
    first = wanted((TOPOLOGY,), [NodeView(n, labels) for n, labels in nodes.items()], [], random.Random(1))
    writes = plan(first, [])
    store = {o["metadata"]["name"]: o for o in writes.create[: len(writes.create) // 2]}
    store["hand-written"] = HAND
    apply(store, nodes, random.Random(2))
    check(store, nodes)
    assert set(o["metadata"]["name"] for o in writes.create[: len(writes.create) // 2]) <= set(store)


def test_two_topologies_share_a_label_key_and_a_tier_order() -> None:
    """Volcano's label map is keyed by (label key, value): a key two topologies share gives one HyperNode."""
    a = LabelTopology("a", ("x/tor",))
    b = LabelTopology("b", ("x/tor", "x/zone"))
    nodes = [NodeView("n1", {"x/tor": "t1", "x/zone": "z"}), NodeView("n2", {"x/tor": "t1"})]
    want = wanted((a, b), nodes, [], random.Random(0))
    tors = [w for w in want.values() if w.tier_name == "x/tor"]
    assert len(tors) == 1 and tors[0].members == {"n1", "n2"} and tors[0].name.startswith("hypernode-a-tier1-")
    zones = [w for w in want.values() if w.tier_name == "x/zone"]
    assert len(zones) == 1 and zones[0].members == {tors[0].name} and zones[0].name.startswith("hypernode-b-tier2-")


def test_an_existing_label_made_hypernode_keeps_its_name_and_a_foreign_one_is_not_taken_over() -> None:
    mine = HyperNodeView("hypernode-fabric-tier1-zzzzz", {SOURCE_KEY: SOURCE, RACK: "r1"}, {}, {})
    foreign = HyperNodeView("hypernode-fabric-tier1-aaaaa", {RACK: "r1"}, {}, {})  # no source label
    want = wanted((TOPOLOGY,), [NodeView("n1", {RACK: "r1"})], [foreign, mine], random.Random(0))
    assert list(want) == ["hypernode-fabric-tier1-zzzzz"]
    writes = plan(want, [foreign, mine])
    assert [o["metadata"]["name"] for o in writes.update] == ["hypernode-fabric-tier1-zzzzz"]
    assert not writes.create and not writes.delete  # the foreign one, not ours, is neither reused nor deleted


# ---- the conf -------------------------------------------------------------------------------------------------
VOLCANO_EXAMPLE = """\
networkTopologyDiscovery:
  - source: ufm
    enabled: true
    interval: 10m
    config:
      endpoint: https://ufm-server:8080
  - source: roce
    enabled: false
  - source: label
    enabled: true
    config:
      networkTopologyTypes:
        topologyA2:
          - nodeLabel: "volcano.sh/tor"
          - nodeLabel: "kubernetes.io/hostname"
        topologyA3:
          - nodeLabel: "volcano.sh/hypercluster"
          - nodeLabel: "volcano.sh/hypernode"
          - nodeLabel: "kubernetes.io/hostname"
"""


def test_volcanos_example_conf() -> None:
    """pkg/controllers/hypernode/api/example.yaml: the top tier first, the node's own label last and dropped."""
    conf = parse(VOLCANO_EXAMPLE)
    assert conf.label == (LabelTopology("topologyA2", ("volcano.sh/tor",)),
                          LabelTopology("topologyA3", ("volcano.sh/hypernode", "volcano.sh/hypercluster")))
    assert len(conf.notes) == 1 and "'ufm'" in conf.notes[0]  # roce is disabled: not even a note


@pytest.mark.parametrize("text", [
    "networkTopologyDiscovery: {source: label}",
    "networkTopologyDiscovery: [label]",
    "networkTopologyDiscovery: [{source: label, enabled: 'sometimes'}]",
    "networkTopologyDiscovery: [{source: label, enabled: true, config: [1]}]",
    "networkTopologyDiscovery: [{source: label, enabled: true, config: {networkTopologyTypes: [a]}}]",
    "networkTopologyDiscovery: [\n  - source: label\n enabled: true",  # not YAML
    "- just a list",
])
def test_a_malformed_conf_is_refused(text: str) -> None:
    with pytest.raises(ConfError):
        parse(text)


@pytest.mark.parametrize(("labels", "why"), [
    ('[{nodeLabel: a/x}, {nodeLabel: a/x}]', "duplicate"),
    ('[{nodeLabel: "bad key!"}, {nodeLabel: h}]', "not a label key"),
    ('[{label: a/x}]', "no nodeLabel"),
])
def test_a_bad_topology_is_skipped_the_others_kept(labels: str, why: str) -> None:
    conf = parse("networkTopologyDiscovery:\n- source: label\n  enabled: true\n  config:\n"
                 f"    networkTopologyTypes:\n      bad: {labels}\n      good: [{{nodeLabel: a/t}}, {{nodeLabel: h}}]\n"
                 "      a-name-longer-than-20-chars: [{nodeLabel: a/t}, {nodeLabel: h}]\n")
    assert conf.label == (LabelTopology("good", ("a/t",)),)
    assert any(why in note for note in conf.notes)
    assert any("longer than 20" in note for note in conf.notes)


def test_where_the_conf_is_read() -> None:
    assert ConfigMapRef.from_env({}) == ConfigMapRef("volcano-system", "volcano-controller-configmap")
    assert ConfigMapRef.from_env({"KUBE_POD_NAMESPACE": "ns", "HELM_RELEASE_NAME": "vp"}) == \
        ConfigMapRef("ns", "vp-controller-configmap")


class _OneConfigMap:
    """Only what `refresh_conf` calls: the ConfigMap GET."""

    def __init__(self) -> None:
        self.cm: dict[str, Any] | None = None

    def get_or_none(self, path: str) -> dict[str, Any] | None:
        return self.cm

    def put(self, version: str, text: str) -> None:
        self.cm = {"metadata": {"resourceVersion": version}, "data": {"volcano-controller.conf": text}}


def test_a_malformed_conf_keeps_the_last_good_one_with_one_log_line(caplog: pytest.LogCaptureFixture) -> None:
    kube = _OneConfigMap()
    discovery = HyperNodeDiscovery(kube, ConfigMapRef("ns", "cm"))  # type: ignore[arg-type]
    kube.put("1", VOLCANO_EXAMPLE)
    with caplog.at_level(logging.INFO, "volcano_py.controllers.hypernode"):
        discovery.refresh_conf()
        good = discovery.conf
        assert good.label is not None
        kube.put("2", "networkTopologyDiscovery: {oops")
        for _ in range(3):  # polled again and again: one line
            discovery.refresh_conf()
        assert discovery.conf is good
        kube.put("3", VOLCANO_EXAMPLE + "  - source: carrier-pigeon\n    enabled: true\n")
        discovery.refresh_conf()
        discovery.refresh_conf()
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and "keeping the conf read before" in errors[0].getMessage()
    notes = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert sum("'ufm'" in n for n in notes) == 1 and sum("'carrier-pigeon'" in n for n in notes) == 1


def test_a_label_removed_after_a_conf_change_is_still_seen() -> None:
    """The node's labels before the change are the ones it had, even if the conf changed since (a race the e2e
    test met: the tracked labels were dropped with the conf, so a removal looked like no change)."""
    kube = _OneConfigMap()
    discovery = HyperNodeDiscovery(kube, ConfigMapRef("ns", "cm"))  # type: ignore[arg-type]
    node = {"metadata": {"name": "n1", "labels": {"volcano.sh/tor": "t1"}}}
    discovery.on_node("ADDED", node)  # before any conf: kept all the same
    kube.put("1", VOLCANO_EXAMPLE)
    discovery.refresh_conf()
    discovery._dirty.clear()
    discovery.on_node("MODIFIED", node)
    assert not discovery._dirty.is_set()  # the same labels
    discovery.on_node("MODIFIED", {"metadata": {"name": "n1", "labels": {"other": "x"}}})
    assert discovery._dirty.is_set()  # the tor label gone
    discovery._dirty.clear()
    discovery.on_node("MODIFIED", {"metadata": {"name": "n1", "labels": {"other": "y"}}})
    assert not discovery._dirty.is_set()  # a label discovery does not read
    discovery.on_node("DELETED", {"metadata": {"name": "n1", "labels": {"other": "y"}}})
    assert not discovery._dirty.is_set()
