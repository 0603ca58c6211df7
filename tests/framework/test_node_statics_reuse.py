"""The memo reads a node's statics (labels, taints, schedulability, resource names) again only when they changed:
an unchanged node gives the very tuple of last time, and any change still invalidates the memo's answers."""

from __future__ import annotations

from dataclasses import replace

from scheduler.api.pod import Taint
from scheduler.framework.memo import node_statics
from scheduler.sim.cluster import InMemoryCluster
from scheduler.sim.objects import node_object


def nodes() -> list:
    sim = InMemoryCluster()
    for i in range(3):
        sim.add_node(node_object(f"n{i}", gpu=8, labels={"zone": f"z{i}"}))
    return [n.clone_empty() for n in sim.nodes.values()]


def test_an_unchanged_node_gives_the_same_tuple_and_the_same_statics_as_read_afresh() -> None:
    known: dict = {}
    first = nodes()
    once = node_statics(first, known)
    again = node_statics([n.clone_empty() for n in first], known)  # a new snapshot of the same nodes
    assert once == node_statics(first) and again == once
    assert all(a is b for a, b in zip(once, again, strict=True))


def test_each_kind_of_change_is_seen() -> None:
    known: dict = {}
    base = nodes()
    before = node_statics(base, known)
    changes = [
        replace(base[0], labels={"zone": "other"}),
        replace(base[0], taints=(Taint("k", "v", "NoSchedule"),)),
        replace(base[0], unschedulable=True),
        replace(base[0], ready=False),
    ]
    for changed in changes:
        now = node_statics([changed, *base[1:]], known)
        assert now != before and now == node_statics([changed, *base[1:]])
        assert node_statics(base, known) == before


def test_with_the_last_call_kept_a_node_at_its_place_is_passed_over_and_any_other_is_read() -> None:
    """`last` (the memo's): the very NodeInfo at the same place gives its statics without a look; a changed node
    (a new object), a node at another place and a different number of nodes are read as without `last`."""
    known: dict = {}
    last: list = []
    base = nodes()
    before = node_statics(base, known, last)
    assert last[0] == base and node_statics(base, known, last) == before
    changed = replace(base[1], taints=(Taint("k", "v", "NoSchedule"),))
    now = node_statics([base[0], changed, base[2]], known, last)
    assert now == node_statics([base[0], changed, base[2]]) != before
    swapped = [base[2], base[1], base[0]]
    assert node_statics(swapped, known, last) == node_statics(swapped)
    assert node_statics(base[:2], known, last) == node_statics(base[:2])
