"""The chaos bench's own logic (bench/shards_chaos*.py, bench/shardsim/monitor.py, chaos.py): the simulated
apiserver's bind fence, the invariants its monitor checks at every write, the seeded plans and the verdicts that
decide whether a run counts. Tests of the tool, through the store and the HTTP dispatch; the runs are
`make bench-shards-chaos`."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from scheduler.cli import bench_module

bench_module("shards")  # puts bench/ on sys.path for the modules below
from shards_chaos_plan import plan_run, verdict  # noqa: E402
from shards_chaos_report import table  # noqa: E402
from shardsim.chaos import Chaos, build, load_chaos  # noqa: E402
from shardsim.kinds import all_kinds  # noqa: E402
from shardsim.server import Request  # noqa: E402
from shardsim.store import ApiError, Store  # noqa: E402

COSTS = {"bind": 1.0, "event": 0.5, "write": 1.0, "get": 0.1, "list_page": 1.0, "list_item": 0.01, "watch": 0.1,
         "watch_event": 0.01, "error": 0.0}
LEASES = "/apis/coordination.k8s.io/v1/namespaces/volcano-py-system/leases"
SHARDS = "/apis/shard.volcano.sh/v1alpha1/nodeshards"


def call(srv: Any, method: str, path: str, body: Any = None, who: str = "r0") -> tuple[int, Any]:
    status, out = srv.dispatch(Request(method, path, {}, {"content-type": "application/json",
                                                            "authorization": f"Bearer {who}"},
                                       orjson.dumps(body) if body is not None else b""))
    return status, orjson.loads(out)


def cluster(nodes: int = 6) -> tuple[Any, Chaos]:
    return build(nodes, 2, {"costs_ms": COSTS}, 4)


def binding(pod: str, node: str, lease: str = "", sender: str = "") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": pod}
    if lease:
        meta["annotations"] = {"scheduling.volcano-py.io/lease": lease, "scheduling.volcano-py.io/bound-by": sender}
    return {"metadata": meta, "target": {"name": node}}


def test_the_bind_fence_refuses_a_bind_under_a_lease_its_sender_does_not_hold() -> None:
    srv, chaos = cluster()
    call(srv, "POST", LEASES, {"metadata": {"name": "volcano-py-scheduler-shard-0"}, "spec": {"holderIdentity": "b"}})
    chaos.gang({"name": "g", "size": 3, "cpu": 1})
    fence = "volcano-py-system/volcano-py-scheduler-shard-0"
    status, refused = call(srv, "POST", "/api/v1/namespaces/bench/pods/g-0/binding", binding("g-0", "c0", fence, "a"),
                           who="a")
    assert (status, refused["reason"]) == (403, "Forbidden")
    assert [f for _, f in chaos.store.fence_refused] == [{"pod": "g-0", "lease": fence, "sender": "a", "holder": "b"}]
    # the holder's bind passes; so does one naming a Lease that does not exist, and one without the annotations
    assert call(srv, "POST", "/api/v1/namespaces/bench/pods/g-0/binding", binding("g-0", "c0", fence, "b"))[0] == 201
    assert call(srv, "POST", "/api/v1/namespaces/bench/pods/g-1/binding",
                binding("g-1", "c0", "volcano-py-system/none", "a"))[0] == 201
    assert call(srv, "POST", "/api/v1/namespaces/bench/pods/g-2/binding", binding("g-2", "c0"))[0] == 201
    assert [w for _, w in chaos.monitor.binds] == ["r0", "r0", "r0"]


def test_a_node_written_into_a_second_shard_s_nodes_in_use_is_caught_at_that_write() -> None:
    srv, chaos = cluster()
    _, s0 = call(srv, "GET", f"{SHARDS}/volcano-py-shard-0")
    _, s1 = call(srv, "GET", f"{SHARDS}/volcano-py-shard-1")
    s0["status"] = {"nodesInUse": ["c0", "c1"]}
    assert call(srv, "PUT", f"{SHARDS}/volcano-py-shard-0/status", s0, who="a")[0] == 200
    s1["status"] = {"nodesInUse": ["c1", "c3"]}  # c1 still in shard 0's
    assert call(srv, "PUT", f"{SHARDS}/volcano-py-shard-1/status", s1, who="b")[0] == 200
    mon = chaos.monitor.report()
    assert mon["overlaps"] == 1
    assert mon["overlap_examples"][0]["nodes"] == {"c1": ["volcano-py-shard-1", "volcano-py-shard-0"]}
    assert mon["overlap_examples"][0]["by"] == "b"
    # shard 0 lets c1 go, then shard 1 writes again: no new overlap, and the handoff of c1 is recorded
    _, s0 = call(srv, "GET", f"{SHARDS}/volcano-py-shard-0")
    s0["status"] = {"nodesInUse": ["c0"]}
    call(srv, "PUT", f"{SHARDS}/volcano-py-shard-0/status", s0, who="a")
    _, s1 = call(srv, "GET", f"{SHARDS}/volcano-py-shard-1")
    call(srv, "PUT", f"{SHARDS}/volcano-py-shard-1/status", s1, who="b")
    assert chaos.monitor.overlaps == 1
    assert [(h["node"], h["from"], h["to"]) for h in chaos.monitor.handoffs] == [
        ("c1", "volcano-py-shard-0", "volcano-py-shard-1")]


def test_a_node_moved_between_nodes_desired_is_a_move() -> None:
    srv, chaos = cluster(6)  # shard 0: c0-c2, shard 1: c3-c5
    _, s0 = call(srv, "GET", f"{SHARDS}/volcano-py-shard-0")
    s0["spec"]["nodesDesired"] = ["c0", "c1"]
    call(srv, "PUT", f"{SHARDS}/volcano-py-shard-0", s0, who="a")
    _, s1 = call(srv, "GET", f"{SHARDS}/volcano-py-shard-1")
    s1["spec"]["nodesDesired"] = ["c2", "c3", "c4", "c5"]
    call(srv, "PUT", f"{SHARDS}/volcano-py-shard-1", s1, who="a")
    assert [(m["node"], m["from"], m["to"]) for m in chaos.monitor.moves] == [
        ("c2", "volcano-py-shard-0", "volcano-py-shard-1")]


def test_an_over_commit_is_caught_at_the_bind_even_if_a_deletion_hides_it_later() -> None:
    srv, chaos = cluster()
    chaos.gang({"name": "g", "size": 3, "cpu": 4})  # 12 CPUs: two fit an 8-CPU node
    for m in range(3):
        assert call(srv, "POST", f"/api/v1/namespaces/bench/pods/g-{m}/binding", binding(f"g-{m}", "c0"))[0] == 201
    assert chaos.monitor.over_commits == 1 and chaos.monitor.report()["over_committed_now"] == ["c0"]
    chaos.finish({"n": 1})  # the gang is whole: ended, its room given back
    rep = chaos.report()
    assert rep["monitor"]["over_committed_now"] == [] and rep["monitor"]["over_committed_ever"] == ["c0"]
    assert rep["monitor"]["over_commit_examples"][0]["pod"] == "bench/g-2"


def test_a_partial_gang_is_reported_and_deleting_nodes_ends_their_gangs_whole_first() -> None:
    srv, chaos = cluster()
    chaos.gang({"name": "g", "size": 2, "cpu": 1})
    chaos.gang({"name": "h", "size": 2, "cpu": 1})
    call(srv, "POST", "/api/v1/namespaces/bench/pods/g-0/binding", binding("g-0", "c0"))
    call(srv, "POST", "/api/v1/namespaces/bench/pods/h-0/binding", binding("h-0", "c4"))
    assert chaos.report()["gangs"]["partial"] == ["g", "h"]
    done = chaos.change_nodes({"delete": ["c0"], "add": ["a0"]})
    assert done == {"deleted": ["c0"], "added": ["a0"], "gangs_ended": ["g"]}
    rep = chaos.report()
    assert rep["gangs"]["partial"] == ["h"] and rep["gangs"]["finished"] == 1
    assert "c0" not in chaos.state()["nodes"] and "a0" in chaos.state()["nodes"]


def test_plans_are_seeded_and_each_has_the_three_events_in_their_own_slots() -> None:
    assert plan_run(7) == plan_run(7) and plan_run(7) != plan_run(8)
    for seed in range(50):
        plan = plan_run(seed)
        kinds = sorted(e.kind for e in plan.events)
        assert kinds == ["kill", "move", "stop"]
        times = sorted(e.at_s for e in plan.events)
        assert all(b - a > 0 for a, b in zip(times, times[1:], strict=False)) and times[-1] < plan.arrival_s
        stop = next(e for e in plan.events if e.kind == "stop")
        kill = next(e for e in plan.events if e.kind == "kill")
        assert stop.stop_s > 2.0 and stop.victim != kill.victim
        assert all(1 <= g.size <= 8 for g in plan.gangs) and 24 <= plan.nodes <= 36


def report(binds: list[tuple[float, str]], moves: list[float], changes: list[dict[str, Any]],
           **violations: int) -> dict[str, Any]:
    return {"monitor": {"binds": [[t, w] for t, w in binds], "lease_changes": changes,
                        "moves": [{"t": t, "node": "c1", "from": "s0", "to": "s1"} for t in moves], "handoffs": [],
                        "overlaps": violations.get("overlaps", 0), "over_committed_ever": [],
                        "over_committed_now": []},
            "check": {"pods_bound_twice": 0}, "gangs": {"partial": []}}


def test_a_run_counts_only_when_each_event_happened_while_binds_were_in_flight() -> None:
    lease = "volcano-py-system/volcano-py-scheduler-shard-2"
    fired = {"kill": {"t": 10.0, "victim": "active-0"},
             "stop": {"t": 20.0, "t_cont": 24.0, "victim": "active-2", "held": [lease]},
             "move": {"t": 30.0}}
    binds = [(9.5, "active-0"), (19.8, "active-2"), (30.6, "active-1")]
    taken = [{"t": 22.1, "lease": lease, "from": "active-2", "to": "active-1"}]
    good = verdict(fired, report(binds, [31.0], taken))
    assert (good["kill"], good["expiry"], good["move"], good["counted"]) == (True, True, True, True)
    # the victim had not bound within the second before: not in flight
    late = verdict(fired, report([(8.0, "active-0"), *binds[1:]], [31.0], taken))
    assert not late["kill"] and not late["counted"]
    # the Lease was taken only after SIGCONT: no expiry while it slept
    woke = verdict(fired, report(binds, [31.0], [{**taken[0], "t": 24.5}]))
    assert woke["stop_in_flight"] and not woke["expiry"] and not woke["counted"]
    # no node moved after the move was made
    still = verdict(fired, report(binds, [29.0], taken))
    assert still["nodes_moved"] == 0 and not still["counted"]
    bad = verdict(fired, report(binds, [31.0], taken, overlaps=2))
    assert bad["violations"]["nodes_in_two_shards"] == 2


def test_the_table_counts_runs_events_and_violations() -> None:
    rows = [{"seed": 1, "counted": True, "kill": True, "stop_in_flight": True, "expiry": True, "move": True,
             "violations": {"nodes_in_two_shards": 0, "over_committed_nodes": 0, "pods_bound_twice": 0,
                            "partial_gangs": 0}, "wall_s": 10.0, "cpu_s": 4.0, "binds": 100},
            {"seed": 2, "counted": False, "kill": True, "violations": {"partial_gangs": 1}, "wall_s": 12.0,
             "cpu_s": 5.0, "binds": 50},
            {"seed": 3, "error": "x", "counted": False, "violations": {}}]
    text = table(rows)
    assert "| runs | 3 (seeds 1..3; 1 the harness could not finish) |" in text
    assert "| runs counted (a kill, an expiry and a move, each while binds were in flight) | 1 |" in text
    assert "| partial gangs (at the end) | 1 |" in text and "| seeds with a violation | 2 |" in text
    assert "| wall | 22 s (11.0 s a run) |" in text


def test_the_chaos_cluster_is_split_in_blocks_between_the_nodeshards() -> None:
    store = Store(all_kinds())
    load_chaos(store, 7, 3)
    shards = store.kind("shard.volcano.sh/v1alpha1", "nodeshards").objects
    desired = {name: orjson.loads(e.data)["spec"]["nodesDesired"] for name, e in shards.items()}
    assert desired == {"volcano-py-shard-0": ["c0", "c1"], "volcano-py-shard-1": ["c2", "c3"],
                       "volcano-py-shard-2": ["c4", "c5", "c6"]}
    with pytest.raises(ApiError) as missing:
        store.bind("bench", "nope", {"target": {"name": "c0"}})
    assert missing.value.code == 404
