"""The simulated apiserver of `make bench-shards` (bench/shardsim/) keeps the semantics Kubernetes documents for
what the scheduler sends: optimistic concurrency on resourceVersion, label and field selectors, paged lists as one
snapshot, watches from a resourceVersion (410 when too old), a pod bound once. Tests of the tool, through its HTTP
dispatch; the live run is `make bench-shards`."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import orjson
import pytest

from scheduler.cli import bench_module

bench_module("shards")  # puts bench/ on sys.path for the package below
from shardsim import store as store_mod  # noqa: E402
from shardsim.accounting import Accounting  # noqa: E402
from shardsim.cluster import Shape, check, load  # noqa: E402
from shardsim.kinds import all_kinds  # noqa: E402
from shardsim.selectors import SelectorError, parse_fields, parse_labels, parse_selector  # noqa: E402
from shardsim.server import Request, Server, serve  # noqa: E402
from shardsim.store import Store  # noqa: E402

COSTS = {"bind": 1.0, "event": 0.5, "write": 1.0, "get": 0.1, "list_page": 1.0, "list_item": 0.01, "watch": 0.1,
         "watch_event": 0.01, "error": 0.0}


def server() -> Server:
    s = Store(all_kinds())
    srv = Server(s, Accounting(COSTS, 4, cpu_of=lambda pid: 0.0))
    call(srv, "POST", "/api/v1/namespaces", {"metadata": {"name": "ns"}}, who="")
    return srv


def call(srv: Server, method: str, path: str, body: Any = None, ctype: str = "application/json",
         who: str = "r0") -> tuple[int, Any]:
    target, _, qs = path.partition("?")
    query = dict(p.split("=", 1) for p in qs.split("&") if p) if qs else {}
    data = orjson.dumps(body) if body is not None else b""
    status, out = srv.dispatch(Request(method, target, query, {"content-type": ctype,
                                                                "authorization": f"Bearer {who}"}, data))
    return status, orjson.loads(out)


def pod(name: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"app": "a", "tier": name[-1]}},
            "spec": {"schedulerName": "s", "containers": [], **spec}}


def test_an_update_naming_an_old_resource_version_is_a_conflict() -> None:
    srv = server()
    _, lease = call(srv, "POST", "/apis/coordination.k8s.io/v1/namespaces/ns/leases",
                    {"metadata": {"name": "l"}, "spec": {"holderIdentity": "a"}})
    old = lease["metadata"]["resourceVersion"]
    lease["spec"]["holderIdentity"] = "b"
    status, taken = call(srv, "PUT", "/apis/coordination.k8s.io/v1/namespaces/ns/leases/l", lease)
    assert status == 200 and int(taken["metadata"]["resourceVersion"]) > int(old)
    lease["spec"]["holderIdentity"] = "c"  # still carries `old`
    status, refused = call(srv, "PUT", "/apis/coordination.k8s.io/v1/namespaces/ns/leases/l", lease)
    assert (status, refused["reason"]) == (409, "Conflict")
    _, now = call(srv, "GET", "/apis/coordination.k8s.io/v1/namespaces/ns/leases/l")
    assert now["spec"]["holderIdentity"] == "b"
    del lease["metadata"]["resourceVersion"]  # an update must name one
    assert call(srv, "PUT", "/apis/coordination.k8s.io/v1/namespaces/ns/leases/l", lease)[0] == 422


def test_a_merge_patch_with_a_stale_resource_version_conflicts_and_without_one_applies() -> None:
    srv = server()
    _, p = call(srv, "POST", "/api/v1/namespaces/ns/pods", pod("p1"))
    rv = p["metadata"]["resourceVersion"]
    assert call(srv, "PATCH", "/api/v1/namespaces/ns/pods/p1", {"metadata": {"annotations": {"x": "1"}}},
                "application/merge-patch+json")[0] == 200
    status, _ = call(srv, "PATCH", "/api/v1/namespaces/ns/pods/p1",
                     {"metadata": {"resourceVersion": rv, "annotations": {"x": "2"}}}, "application/merge-patch+json")
    assert status == 409
    _, now = call(srv, "GET", "/api/v1/namespaces/ns/pods/p1")
    assert now["metadata"]["annotations"] == {"x": "1"}


def test_status_subresource_writes_only_the_status_and_the_object_write_keeps_it() -> None:
    srv = server()
    call(srv, "POST", "/api/v1/namespaces/ns/pods", pod("p1"))
    cond = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
    status, out = call(srv, "PATCH", "/api/v1/namespaces/ns/pods/p1/status",
                       {"status": {"conditions": [cond]}, "spec": {"schedulerName": "other"}},
                       "application/strategic-merge-patch+json")
    assert status == 200 and out["status"]["conditions"] == [cond] and out["spec"]["schedulerName"] == "s"
    _, out = call(srv, "PATCH", "/api/v1/namespaces/ns/pods/p1", {"status": {"phase": "Running"}},
                  "application/merge-patch+json")
    assert "phase" not in out["status"]
    # conditions merge by type (the strategic merge key)
    _, out = call(srv, "PATCH", "/api/v1/namespaces/ns/pods/p1/status",
                  {"status": {"conditions": [{"type": "Ready", "status": "False"}]}},
                  "application/strategic-merge-patch+json")
    assert [c["type"] for c in out["status"]["conditions"]] == ["PodScheduled", "Ready"]


def test_a_pod_is_bound_once_and_the_second_binding_is_a_conflict() -> None:
    srv = server()
    call(srv, "POST", "/api/v1/namespaces/ns/pods", pod("p1"))
    binding = {"metadata": {"name": "p1"}, "target": {"kind": "Node", "name": "n1"}}
    assert call(srv, "POST", "/api/v1/namespaces/ns/pods/p1/binding", binding)[0] == 201
    status, out = call(srv, "POST", "/api/v1/namespaces/ns/pods/p1/binding",
                       {**binding, "target": {"kind": "Node", "name": "n2"}}, who="r1")
    assert status == 409 and "already assigned" in out["message"]
    _, now = call(srv, "GET", "/api/v1/namespaces/ns/pods/p1")
    assert now["spec"]["nodeName"] == "n1"
    assert call(srv, "POST", "/api/v1/namespaces/ns/pods/gone/binding", {"target": {"name": "n1"}})[0] == 404
    assert srv.store.binds == {"ns/p1": 1}
    assert srv.acct.replicas["r0"].binds == 1 and srv.acct.replicas["r1"].binds == 0


def test_a_binding_with_another_uid_is_refused() -> None:
    srv = server()
    call(srv, "POST", "/api/v1/namespaces/ns/pods", pod("p1"))
    status, _ = call(srv, "POST", "/api/v1/namespaces/ns/pods/p1/binding",
                     {"metadata": {"name": "p1", "uid": "not-it"}, "target": {"name": "n1"}})
    assert status == 409


def test_field_and_label_selectors_as_kubernetes_defines_them() -> None:
    srv = server()
    call(srv, "POST", "/api/v1/namespaces/ns/pods", pod("p1", nodeName="n1"))
    call(srv, "POST", "/api/v1/namespaces/ns/pods", pod("p2"))
    call(srv, "POST", "/api/v1/namespaces/ns/pods", {**pod("p3"), "spec": {"schedulerName": "t"}})

    def names(query: str) -> list[str]:
        status, out = call(srv, "GET", f"/api/v1/pods?{query}")
        assert status == 200, out
        return [i["metadata"]["name"] for i in out["items"]]

    assert names("fieldSelector=spec.nodeName=") == ["p2", "p3"]
    assert names("fieldSelector=spec.nodeName!=") == ["p1"]
    assert names("fieldSelector=spec.schedulerName==s,spec.nodeName=") == ["p2"]
    assert names("fieldSelector=metadata.name=p3") == ["p3"]
    assert names("labelSelector=tier in (1,3)") == ["p1", "p3"]
    assert names("labelSelector=tier notin (1,3)") == ["p2"]
    assert names("labelSelector=!missing,app") == ["p1", "p2", "p3"]
    assert names("labelSelector=tier!=2") == ["p1", "p3"]
    assert call(srv, "GET", "/api/v1/pods?fieldSelector=spec.containers=x")[0] == 400  # not a selectable field
    assert call(srv, "GET", "/api/v1/nodes?fieldSelector=spec.schedulerName=s")[0] == 400  # not one of a node's


def test_selector_parsing_refuses_what_the_apiserver_refuses() -> None:
    with pytest.raises(SelectorError):
        parse_labels("a in ()")
    with pytest.raises(SelectorError):
        parse_labels("bad key!=x y")
    with pytest.raises(SelectorError):
        parse_fields("spec.nodeName", "pods")  # no operator
    assert parse_fields(r"metadata.name=a\,b", "pods")[0].value == "a,b"
    sel = parse_selector("x>3", "", "pods")
    assert sel.matches({"x": "4"}, {}) and not sel.matches({"x": "3"}, {}) and not sel.matches({}, {})


def test_a_paged_list_is_one_snapshot_and_an_unknown_token_is_gone() -> None:
    srv = server()
    for i in range(5):
        call(srv, "POST", "/api/v1/namespaces/ns/pods", pod(f"p{i}"))
    _, first = call(srv, "GET", "/api/v1/pods?limit=2")
    token, rv = first["metadata"]["continue"], first["metadata"]["resourceVersion"]
    call(srv, "POST", "/api/v1/namespaces/ns/pods", pod("p9"))  # after the snapshot
    call(srv, "DELETE", "/api/v1/namespaces/ns/pods/p4")
    names = [i["metadata"]["name"] for i in first["items"]]
    while token:
        _, page = call(srv, "GET", f"/api/v1/pods?limit=2&continue={token}")
        assert page["metadata"]["resourceVersion"] == rv
        names += [i["metadata"]["name"] for i in page["items"]]
        token = page["metadata"].get("continue")
    assert names == ["p0", "p1", "p2", "p3", "p4"]
    assert call(srv, "GET", "/api/v1/pods?limit=2&continue=OTk5OjI=")[0] == 410


def test_a_watch_from_a_resource_version_sees_every_later_change_and_selection_moves() -> None:
    srv = server()
    store = srv.store
    call(srv, "POST", "/api/v1/namespaces/ns/pods", pod("p1"))
    _, listed = call(srv, "GET", "/api/v1/pods")
    pods = store.kind("v1", "pods")
    unbound = parse_selector("", "spec.nodeName=", "pods")
    at_all = store.watch_start(pods, listed["metadata"]["resourceVersion"])
    at_sel = at_all
    call(srv, "POST", "/api/v1/namespaces/ns/pods", pod("p2"))
    call(srv, "POST", "/api/v1/namespaces/ns/pods/p1/binding", {"target": {"name": "n1"}})
    lines, at_all = store.watch_read(pods, at_all, parse_selector("", "", "pods"))
    seen = [(e["type"], e["object"]["metadata"]["name"]) for e in map(orjson.loads, lines)]
    assert seen == [("ADDED", "p2"), ("MODIFIED", "p1")]
    lines, _ = store.watch_read(pods, at_sel, unbound)  # p1 left the selection when it was bound
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in map(orjson.loads, lines)] == [
        ("ADDED", "p2"), ("DELETED", "p1")]
    assert store.watch_read(pods, at_all, unbound)[0] == []


def test_a_watch_from_a_position_no_longer_kept_is_gone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_mod, "LOG_KEEP", 2)
    srv = server()
    _, first = call(srv, "POST", "/api/v1/namespaces/ns/pods", pod("p0"))
    for i in range(1, 8):
        call(srv, "POST", "/api/v1/namespaces/ns/pods", pod(f"p{i}"))
    pods = srv.store.kind("v1", "pods")
    with pytest.raises(store_mod.ApiError) as err:
        srv.store.watch_start(pods, first["metadata"]["resourceVersion"])
    assert err.value.code == 410


def test_creation_refuses_a_missing_namespace_a_duplicate_and_protobuf() -> None:
    srv = server()
    assert call(srv, "POST", "/api/v1/namespaces/none/pods", pod("p1"))[0] == 404
    assert call(srv, "POST", "/api/v1/namespaces/ns/pods", pod("p1"))[0] == 201
    assert call(srv, "POST", "/api/v1/namespaces/ns/pods", pod("p1"))[1]["reason"] == "AlreadyExists"
    assert call(srv, "POST", "/api/v1/namespaces/ns/events", {"metadata": {"name": "e"}},
                ctype="application/vnd.kubernetes.protobuf")[0] == 415


def test_a_json_patch_test_that_fails_is_refused_whole() -> None:
    srv = server()
    _, p = call(srv, "POST", "/api/v1/namespaces/ns/pods", {**pod("p1"), "spec": {"schedulingGates": [{"name": "g"}]}})
    ops = [{"op": "test", "path": "/metadata/uid", "value": "other"}, {"op": "remove", "path": "/spec/schedulingGates"}]
    assert call(srv, "PATCH", "/api/v1/namespaces/ns/pods/p1", ops, "application/json-patch+json")[0] == 422
    ops[0]["value"] = p["metadata"]["uid"]
    status, out = call(srv, "PATCH", "/api/v1/namespaces/ns/pods/p1", ops, "application/json-patch+json")
    assert status == 200 and "schedulingGates" not in out["spec"]


def test_requests_are_charged_their_calibrated_cost_to_the_replica_that_sent_them() -> None:
    srv = server()
    call(srv, "POST", "/api/v1/namespaces/ns/pods", pod("p1"), who="")  # the harness: no replica
    call(srv, "POST", "/api/v1/namespaces/ns/pods/p1/binding", {"target": {"name": "n1"}}, who="r0")
    call(srv, "POST", "/api/v1/namespaces/ns/events", {"metadata": {"name": "e"}}, who="r0")
    call(srv, "GET", "/api/v1/pods?limit=10", who="r1")
    assert srv.acct.replicas["r0"].charged_ms == pytest.approx(COSTS["bind"] + COSTS["event"])
    assert srv.acct.replicas["r1"].charged_ms == pytest.approx(COSTS["list_page"] + COSTS["list_item"])
    assert srv.store.kind("v1", "events").objects == {}  # counted, not kept


def test_the_generated_cluster_passes_the_checks_and_a_double_booking_is_counted() -> None:
    store = Store(all_kinds())
    made, _ = load(store, Shape(nodes=8, running=16, pending=40, replicas=2, max_gang=8))
    assert made["pending"] == 40
    assert check(store)["over_committed_nodes"] == 0
    pods = store.kind("v1", "pods")
    gang = sorted(k for k in pods.objects if k.startswith("bench/g0-"))
    store.bind("bench", gang[0].split("/")[1], {"target": {"name": "n0"}})
    result = check(store)
    assert result["partial_gangs"] == (1 if len(gang) > 1 else 0)
    for i in range(70):  # 70 pods of 4 GiB on one node of 256 GiB (16 GiB in use already): over
        name = f"x{i}"
        store.create(pods, "bench", {"metadata": {"name": name}, "spec": {"containers": [
            {"name": "m", "resources": {"requests": {"memory": "4Gi"}}}]}})
        store.bind("bench", name, {"target": {"name": "n1"}})
    assert check(store)["over_committed_nodes"] == 1


def test_the_scheduler_s_own_client_lists_pages_and_watches_over_http() -> None:
    from scheduler.cache.kube import Kube
    from scheduler.cache.pages import Pages

    srv = server()
    for i in range(25):
        call(srv, "POST", "/api/v1/namespaces/ns/pods", pod(f"p{i}"))
    loop = asyncio.new_event_loop()
    port: list[int] = []
    ready = threading.Event()
    thread = threading.Thread(target=loop.run_until_complete,
                              args=(serve(srv, "127.0.0.1", 0, lambda p: (port.append(p), ready.set())),),
                              daemon=True)
    thread.start()
    assert ready.wait(10)
    from kubernetes import client

    cfg = client.Configuration()
    cfg.host = f"http://127.0.0.1:{port[0]}"
    kube = Kube(client.ApiClient(cfg))
    pages = list(Pages(kube, "/api/v1/pods", 10).start())
    assert [len(p["items"]) for p in pages] == [10, 10, 5]
    rv = pages[0]["metadata"]["resourceVersion"]
    call(srv, "POST", "/api/v1/namespaces/ns/pods/p3/binding", {"target": {"name": "n1"}})
    events = kube.stream("/api/v1/pods", {"watch": "1", "resourceVersion": rv, "timeoutSeconds": 1}, 5)
    assert [(e["type"], e["object"]["spec"].get("nodeName")) for e in events] == [("MODIFIED", "n1")]
    gone = list(kube.stream("/api/v1/pods", {"watch": "1", "resourceVersion": "0", "timeoutSeconds": 0}, 5))
    assert len(gone) == 25 and {e["type"] for e in gone} == {"ADDED"}
    loop.call_soon_threadsafe(srv.stopping.set)
    thread.join(10)


def test_a_watch_delay_holds_each_event_back_that_long() -> None:
    srv = server()
    store = srv.store
    pods = store.kind("v1", "pods")
    at = store.watch_start(pods, str(store.rv))
    call(srv, "POST", "/api/v1/namespaces/ns/pods", pod("p1"))
    written = pods.log[-1].at
    everything = parse_selector("", "", "pods")
    lines, next_at = store.watch_read(pods, at, everything, delay=0.5, now=written + 0.4)
    assert (lines, next_at) == ([], at)
    lines, _ = store.watch_read(pods, at, everything, delay=0.5, now=written + 0.5)
    assert [orjson.loads(x)["object"]["metadata"]["name"] for x in lines] == ["p1"]


def test_the_checked_in_calibration_names_a_bench_peers_run_that_is_in_the_results() -> None:
    from pathlib import Path

    from shardsim.main import CALIBRATION, read_calibration

    doc = read_calibration(CALIBRATION)
    run = doc["source_run"].split()[0]  # bench/results/peers-DATE
    root = Path(__file__).resolve().parents[2]
    assert (root / f"{run}.md").is_file() and (root / f"{run}.json").is_file()


def test_the_cycle_p95_is_the_first_bucket_holding_95_percent() -> None:
    report = bench_module("shards").p95_from_histogram
    m = "volcano_e2e_scheduling_latency_milliseconds"
    text = "\n".join([f'{m}_bucket{{le="10"}} 50', f'{m}_bucket{{le="100"}} 94', f'{m}_bucket{{le="1000"}} 100',
                      f'{m}_bucket{{le="+Inf"}} 100', f"{m}_sum 5000", f"{m}_count 100"])
    assert report(text, m) == 1000.0
    assert report(text.replace(" 94", " 95"), m) == 100.0
    assert report("", m) is None


def test_virtual_time_is_the_replica_cpu_plus_its_server_cost_over_the_cores_and_the_server_bounds_the_run() -> None:
    cpu = {1: 2.0, 2: 1.0}
    acct = Accounting({**COSTS, "bind": 1000.0}, 2, cpu_of=lambda pid: cpu[pid], wall=lambda: 0.0)
    acct.register("a", 1)
    acct.register("b", 2)
    for _ in range(3):
        acct.charge("a", "bind", 0, 201)
        acct.bound("a", "ns/p")
    acct.charge("b", "bind", 0, 201)
    acct.bound("b", "ns/q")
    stats = acct.stats()
    assert stats["replicas"]["a"]["last_bind"]["virtual_s"] == pytest.approx(2.0 + 3.0 / 2)
    assert stats["replicas"]["b"]["last_bind"]["virtual_s"] == pytest.approx(1.0 + 1.0 / 2)
    assert (stats["virtual_s"], stats["bound_by"]) == (pytest.approx(3.5), "replicas")
    assert stats["decisions_per_virtual_s"] == pytest.approx(4 / 3.5, abs=0.1)
    for _ in range(20):  # the server's own work (no replica) grows past what the replicas' clocks show
        acct.charge("", "bind", 0, 201)
    acct.charge("b", "bind", 0, 201)
    acct.bound("b", "ns/r")
    stats = acct.stats()
    assert (stats["virtual_s"], stats["bound_by"]) == (pytest.approx((3 + 1 + 20 + 1) / 2), "server")


def test_an_indexed_field_selector_answers_as_the_scan_does_through_binds_and_deletes() -> None:
    srv = server()
    for i in range(6):
        call(srv, "POST", "/api/v1/namespaces/ns/pods", pod(f"p{i}", **({"nodeName": "n1"} if i % 3 == 0 else {})))
    call(srv, "POST", "/api/v1/namespaces/ns/pods/p1/binding", {"target": {"name": "n1"}})
    call(srv, "DELETE", "/api/v1/namespaces/ns/pods/p3")

    def names(query: str) -> list[str]:
        return [i["metadata"]["name"] for i in call(srv, "GET", f"/api/v1/pods?{query}")[1]["items"]]

    assert names("fieldSelector=spec.nodeName=n1") == ["p0", "p1"]
    assert names("fieldSelector=spec.nodeName=") == ["p2", "p4", "p5"]
    assert names("fieldSelector=spec.nodeName=n1,metadata.name!=p0") == ["p1"]
    assert names("fieldSelector=spec.schedulerName=s&limit=2") == ["p0", "p1"]


def test_a_gang_bound_whole_whose_podgroup_is_not_running_is_counted() -> None:
    store = Store(all_kinds())
    load(store, Shape(nodes=4, running=0, pending=1, replicas=1, max_gang=1))
    store.bind("bench", "g0-0", {"target": {"name": "n0"}})
    assert check(store)["bound_gangs_not_running"] == 1
    groups = store.kind("scheduling.volcano.sh/v1beta1", "podgroups")
    store.patch(groups, "bench", "g0", "application/merge-patch+json", {"status": {"phase": "Running"}})
    assert check(store)["bound_gangs_not_running"] == 0


def test_gangs_made_later_arrive_through_the_watch_and_the_virtual_clock_restarts_there() -> None:
    from shardsim.cluster import create_gangs

    store = Store(all_kinds())
    made, plan = load(store, Shape(nodes=4, running=4, pending=10, replicas=1, max_gang=4), gangs_later=True)
    pods = store.kind("v1", "pods")
    assert made["pending"] == 10 and len(pods.objects) == 4
    at = store.watch_start(pods, str(store.rv))
    cpu = {7: 5.0}
    acct = Accounting(COSTS, 2, cpu_of=lambda pid: cpu[pid])
    acct.register("shard-0", 7)
    acct.arrive()
    assert create_gangs(store, plan) == 10
    lines, _ = store.watch_read(pods, at, parse_selector("", "", "pods"))
    assert len(lines) == 10
    cpu[7] = 6.0
    acct.charge("shard-0", "bind", 0, 201)
    acct.bound("shard-0", "bench/g0-0")
    stats = acct.stats()
    assert stats["virtual_from_arrival_s"] == pytest.approx(1.0 + COSTS["bind"] / 1000 / 2)



def test_queues_of_given_weights_hold_the_gangs_and_the_check_counts_each_queues_bound_cpus() -> None:
    """`--queues 1,2,4`: queues q0-q2 with those weights, every pending gang in one of them, and the end's check
    says how many CPUs of each queue's gang pods are bound (issue 40's queue row is judged on it)."""
    store = Store(all_kinds())
    _, plan = load(store, Shape(nodes=8, running=0, pending=60, replicas=2, max_gang=4, queues=(1, 2, 4)))
    queues = {name: orjson.loads(e.data)["spec"]["weight"] for name, e in
              store.kind("scheduling.volcano.sh/v1beta1", "queues").objects.items()}
    assert {q: w for q, w in queues.items() if q.startswith("q")} == {"q0": 1, "q1": 2, "q2": 4}
    groups = store.kind("scheduling.volcano.sh/v1beta1", "podgroups").objects
    assert {orjson.loads(groups[f"bench/{g.name}"].data)["spec"]["queue"] for g in plan} == {"q0", "q1", "q2"}
    bound = {"q0": 0.0, "q1": 0.0, "q2": 0.0}
    for gang in plan[:5]:  # each pod asks for 1 CPU
        for m in range(gang.size):
            store.bind("bench", f"{gang.name}-{m}", {"target": {"name": "n0" if m % 2 else "n1"}})
        bound[gang.queue] += gang.size
    assert check(store)["bound_cpu_by_queue"] == {"q0": bound["q0"], "q1": bound["q1"], "q2": bound["q2"]}


def test_the_queue_comparison_holds_each_queue_to_two_percent_of_one_replicas_allocation() -> None:
    from shards_report import queue_comparison

    def phase(replicas: int, by: dict[str, float]) -> dict[str, Any]:
        return {"replicas": replicas, "check": {"bound_cpu_by_queue": {"default": 0.0, **by}}}

    rows = queue_comparison([phase(1, {"q0": 1000.0, "q1": 2000.0}), phase(4, {"q0": 1019.0, "q1": 1950.0})])
    assert [(r["queue"], r["met"]) for r in rows] == [("q0", True), ("q1", False)]  # +1.9%, -2.5%
    assert rows[0]["one_share"] == pytest.approx(1000 / 3000) and rows[1]["share"] == pytest.approx(1950 / 2969)


def test_a_turnover_step_reads_each_queues_allocation_then_replaces_gangs_bound_whole_in_their_queue() -> None:
    """`--turnover`: the step answers each queue's bound CPUs as they were, then ends that share of the gangs bound
    whole (pods and PodGroup gone) and makes as many new gangs of the same sizes and queues, unbound."""
    from shardsim.turnover import Turnover

    store = Store(all_kinds())
    _, plan = load(store, Shape(nodes=8, running=0, pending=40, replicas=2, max_gang=4, queues=(1, 3), seed=3))
    for gang in plan[:4]:
        for m in range(gang.size):
            store.bind("bench", f"{gang.name}-{m}", {"target": {"name": "n0"}})
    turnover = Turnover(store, plan, replicas=2, active=True, seed=1)
    before = {q: float(sum(g.size for g in plan[:4] if g.queue == q)) for q in {g.queue for g in plan}}
    answer = turnover.step(0.5)  # half of the four gangs bound whole
    assert answer["allocation"] == dict(sorted(before.items())) and answer["ended"] == 2
    groups = store.kind("scheduling.volcano.sh/v1beta1", "podgroups").objects
    gone = [g for g in plan[:4] if f"bench/{g.name}" not in groups]
    assert len(gone) == 2
    assert all(f"bench/{g.name}-0" not in store.kind("v1", "pods").objects for g in gone)
    new = [g for g in turnover.gangs if g.name.startswith("t")]
    assert sorted((g.size, g.queue) for g in new) == sorted((g.size, g.queue) for g in gone)
    assert all(orjson.loads(groups[f"bench/{g.name}"].data)["spec"]["queue"] == g.queue for g in new)
    after = turnover.allocation()
    assert sum(after.values()) == sum(before.values()) - sum(g.size for g in gone)


def test_the_window_comparison_pairs_the_kth_window_of_each_phase() -> None:
    from shards_report import window_comparison

    def phase(replicas: int, windows: list[dict[str, float]]) -> dict[str, Any]:
        return {"replicas": replicas, "turnover": {"windows": [{"at_s": 10.0 * (k + 1), "allocation": w}
                                                               for k, w in enumerate(windows)]}}

    rows = window_comparison([phase(1, [{"q0": 100.0, "q1": 300.0}, {"q0": 100.0, "q1": 300.0}]),
                              phase(4, [{"q0": 101.0, "q1": 300.0}, {"q0": 95.0, "q1": 305.0}])])
    assert [(r["window"], r["queue"], r["met"]) for r in rows] == [
        (1, "q0", True), (1, "q1", True), (2, "q0", False), (2, "q1", True)]


def test_the_report_shows_the_end_and_every_window_of_the_queue_comparison() -> None:
    from shards_report import queue_lines

    def phase(replicas: int, windows: list[dict[str, float]]) -> dict[str, Any]:
        return {"replicas": replicas, "check": {"bound_cpu_by_queue": windows[-1]},
                "turnover": {"windows": [{"at_s": 10.0, "allocation": w} for w in windows]}}

    text = "\n".join(queue_lines([phase(1, [{"q0": 100.0}]), phase(4, [{"q0": 99.0}])]))
    assert "| 4 | q0 | 100 (100.00%) | 99 (100.00%) | -1.00% | met |" in text
    assert "| 4 | 1 | 10 / 10 | 100 / 99 (-1.00%) | met |" in text


def test_a_phase_waits_out_idle_binds_only_while_pods_are_left_to_bind() -> None:
    """The phase's stop rule: no bind for --idle seconds ends a phase only while pods are left to bind (a turnover
    phase passes `unbound` False, its cluster full by design: `waits_below` is 0 there, a call site not tested
    here), --timeout always, --start-timeout before the first bind."""
    import argparse

    from bench_shards import waited_out

    args = argparse.Namespace(idle=60.0, start_timeout=900.0, timeout=1800.0)
    assert waited_out(args, 100.0, 61.0, 500, unbound=True) == "no bind for --idle seconds"
    assert waited_out(args, 100.0, 61.0, 500, unbound=False) is None
    assert waited_out(args, 1801.0, 61.0, 500, unbound=False) == "--timeout"
    assert waited_out(args, 100.0, 901.0, 0, unbound=True) == "no bind within --start-timeout seconds"
