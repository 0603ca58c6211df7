"""The live cache reads a node again only when its resourceVersion changed, and hands each snapshot fresh empty
copies: what one cycle adds to a node never reaches the next, and a deleted node is forgotten."""

from __future__ import annotations

import threading

from scheduler.api.job import TaskInfo
from scheduler.api.resources import Resource
from scheduler.cache.parse import ParseCache


def node(name: str, rv: str, cpu: str = "8") -> dict:
    return {"metadata": {"name": name, "resourceVersion": rv},
            "status": {"allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "110"}}}


def parser() -> ParseCache:
    return ParseCache(frozenset({"volcano-py"}), threading.Lock(), lambda *_: None)


def test_an_unchanged_node_is_not_read_again_and_each_snapshot_gets_its_own_copy(monkeypatch) -> None:
    import scheduler.cache.parse as parse

    reads: list[str] = []
    real = parse.node_from_object
    monkeypatch.setattr(parse, "node_from_object",
                        lambda obj, sink=None: reads.append(obj["metadata"]["name"]) or real(obj, sink))
    cache = parser()
    (first,) = cache.nodes([node("a", "1")])
    first.add_task(TaskInfo("u1", "p", "ns", "j", Resource.from_quantities({"cpu": "2"}), node_name="a"))
    (second,) = cache.nodes([node("a", "1")])
    assert reads == ["a"]
    assert second is not first and second.tasks == {} and second.idle == second.allocatable
    (changed,) = cache.nodes([node("a", "2", cpu="4")])
    assert reads == ["a", "a"] and changed.allocatable == Resource.from_quantities({"cpu": "4", "memory": "16Gi",
                                                                                     "pods": "110"})


def test_a_deleted_node_is_forgotten() -> None:
    cache = parser()
    cache.nodes([node("a", "1"), node("b", "1")])
    assert [n.name for n in cache.nodes([node("b", "1")])] == ["b"]
    assert set(cache._nodes) == {"b"}
