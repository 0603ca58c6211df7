"""`bench_shards.py --move-nodes`: the simulated apiserver moves a share of each shard's nodes to the next shard as
Volcano's sharding controller would write it, and times each node's handoff from the monitor's record."""

from __future__ import annotations

import math
import random

import orjson
import pytest
from hypothesis import given, settings, strategies as st

from scheduler.cli import bench_module

bench_module("shards")  # puts bench/ on sys.path for the packages below
from shardsim.cluster import Shape, load  # noqa: E402
from shardsim.kinds import all_kinds  # noqa: E402
from shardsim.monitor import Monitor  # noqa: E402
from shardsim.moves import NODESHARDS, cycles_per_node, ended, handoff_report, move_nodes  # noqa: E402
from shardsim.store import Store  # noqa: E402


def desired(store: Store) -> dict[str, list[str]]:
    kind = store.kind(*NODESHARDS)
    return {name: orjson.loads(e.data)["spec"]["nodesDesired"] for name, e in sorted(kind.objects.items())}


@pytest.mark.parametrize(("nodes", "replicas", "fraction"), [(40, 4, 0.1), (37, 3, 0.25), (10, 2, 0.5)])
def test_each_shard_gives_its_share_to_the_next_and_every_node_stays_in_exactly_one(
        nodes: int, replicas: int, fraction: float) -> None:
    store = Store(all_kinds())
    load(store, Shape(nodes, 0, 0, replicas))
    before = desired(store)
    monitor = Monitor(store, clock=lambda: 5.0)
    move = move_nodes(store, fraction, clock=lambda: 5.0)
    after = desired(store)
    names = sorted(before)
    for i, name in enumerate(names):
        nxt = names[(i + 1) % len(names)]
        gone = [n for n in before[name] if n not in after[name]]
        assert len(gone) == math.ceil(fraction * len(before[name]))
        assert all(n in after[nxt] and move["moved"][n] == [name, nxt] for n in gone)
    every = [n for nodes_ in after.values() for n in nodes_]
    assert sorted(every) == sorted(n for nodes_ in before.values() for n in nodes_)  # each node once, none lost
    assert len(every) == len(set(every))
    assert {(m["node"], m["from"], m["to"]) for m in monitor.moves} == {
        (n, a, b) for n, (a, b) in move["moved"].items()}  # the monitor saw each move, by the harness
    assert all(m["by"] == "" for m in monitor.moves)


def test_a_share_out_of_bounds_or_a_single_shard_is_refused() -> None:
    store = Store(all_kinds())
    load(store, Shape(8, 0, 0, 2))
    for bad in (0.0, -0.1, 0.6):
        with pytest.raises(ValueError, match="fraction"):
            move_nodes(store, bad)
    one = Store(all_kinds())
    load(one, Shape(8, 0, 0, 1))
    with pytest.raises(ValueError, match="two NodeShards"):
        move_nodes(one, 0.1)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0.0, 30.0, allow_nan=False), min_size=1, max_size=40), st.integers(0, 10**6))
def test_handoff_times_are_the_first_handoff_to_the_new_shard_after_the_move(delays: list[float], seed: int) -> None:
    rnd = random.Random(seed)
    t0 = 100.0
    moved = {f"n{i}": ["a", "b"] for i in range(len(delays) + 3)}  # the last three are never handed off
    handoffs = []
    for i, d in enumerate(delays):
        node = f"n{i}"
        handoffs += [{"t": t0 - 1.0, "node": node, "to": "b"},  # before the move: not this move's
                     {"t": t0 + d + 0.5, "node": node, "to": "c"},  # to another shard: not the handoff
                     {"t": t0 + d, "node": node, "to": "b"},
                     {"t": t0 + d + 1.0, "node": node, "to": "b"}]  # a later one: the first counts
    handoffs.append({"t": t0 + 1.0, "node": "elsewhere", "to": "b"})  # not moved
    handoffs.sort(key=lambda h: (h["t"], rnd.random()))
    report = handoff_report({"t": t0, "moved": moved}, handoffs, overlaps=0)
    ordered = sorted(delays)
    assert report["moved"] == len(delays) + 3 and report["handed_off"] == len(delays)
    assert report["not_handed_off"] == 3
    assert report["max_s"] == pytest.approx(ordered[-1], abs=1e-3)
    # nearest rank: the smallest delay with at least q of them at or below it
    for q, key in ((0.5, "p50_s"), (0.95, "p95_s")):
        at = report[key]
        assert sum(d <= at + 1e-3 for d in delays) >= q * len(delays)
        assert sum(d < at - 1e-3 for d in delays) < q * len(delays)


def test_no_handoff_reports_none_not_zero() -> None:
    report = handoff_report({"t": 1.0, "moved": {"n1": ["a", "b"]}}, [], overlaps=2)
    assert report == {"moved": 1, "handed_off": 0, "not_handed_off": 1, "p50_s": None, "p95_s": None,
                      "max_s": None, "overlaps": 2, "t": 1.0, "nodes": {"n1": ["a", "b", None, None]}}


def test_the_monitor_records_when_a_shard_stops_using_a_node() -> None:
    store = Store(all_kinds())
    load(store, Shape(6, 0, 0, 2))
    now = [10.0]
    monitor = Monitor(store, clock=lambda: now[0])
    kind = store.kind(*NODESHARDS)
    for names, t in ((["n0", "n1", "n2"], 11.0), (["n0"], 12.0), (["n0"], 13.0)):
        now[0] = t
        doc = orjson.loads(kind.objects["shard-0"].data)
        doc["status"] = {"nodesInUse": names}
        store.update(kind, "", "shard-0", doc, "status")
    assert [(r["t"], r["node"], r["from"]) for r in monitor.releases] == [(12.0, "n1", "shard-0"),
                                                                          (12.0, "n2", "shard-0")]


def test_cycles_ended_are_never_fewer_than_ran() -> None:
    series = [(0.0, 5.0), (1.0, 6.0), (2.0, 6.0), (3.0, 8.0)]
    assert ended(series, 0.0, 1.0) == 1
    assert ended(series, 0.5, 2.5) == 3  # from the sample before (5) to the one after (8)
    assert ended(series, 1.0, 2.0) == 0
    assert ended(series, -1.0, 1.0) is None  # nothing sampled before the start
    assert ended(series, 1.0, 4.0) is None  # nor after the end


def test_each_handoff_counts_the_losers_cycles_to_the_release_and_the_gainers_after() -> None:
    move = {"t": 100.0, "moved": {"n1": ["a", "b"], "n2": ["a", "b"], "n3": ["b", "a"]}}
    releases = [{"t": 101.0, "node": "n1", "from": "a"}, {"t": 101.0, "node": "n2", "from": "a"},
                {"t": 99.0, "node": "n3", "from": "b"}]  # before the move: not this move's release
    handoffs = [{"t": 101.5, "node": "n1", "to": "b"}, {"t": 104.5, "node": "n2", "to": "b"}]
    report = handoff_report(move, handoffs, 0, releases)
    assert report["nodes"] == {"n1": ["a", "b", 1.0, 1.5], "n2": ["a", "b", 1.0, 4.5], "n3": ["b", "a", None, None]}
    series = {"a": [(100.0, 10.0), (101.0, 11.0), (105.0, 12.0)],
              "b": [(100.0, 3.0), (101.0, 3.0), (102.0, 4.0), (103.0, 5.0), (105.0, 6.0)]}
    # n1: a ended 1 by its release; b ended 1 from 101 to the first sample after 101.5 (102)
    # n2: a 1, then b from 101 (3) to the first sample at or after 104.5 (105: 6) = 3
    assert cycles_per_node(report, series) == {"n1": 2, "n2": 4, "n3": None}


@pytest.mark.parametrize("body", [b"not json", b"[1]", b'{"fraction": "x"}', b'{"fraction": 0.9}',
                                  b'{"fraction": NaN}'])
def test_a_bad_move_request_gets_a_reason_and_moves_nothing(body: bytes) -> None:
    from shardsim.main import CALIBRATION, build, read_calibration
    from shardsim.server import Request

    srv, _, _ = build(Shape(8, 0, 0, 2), read_calibration(CALIBRATION), 4, monitor=True)
    before = desired(srv.store)
    answer = srv.extra["move"](Request("POST", "/sim/move", {}, {}, body))
    assert "cannot move nodes" in answer["error"]
    assert desired(srv.store) == before
    assert srv.extra["handoffs"](Request("GET", "/sim/handoffs", {}, {}, b""))["moves"] == []
