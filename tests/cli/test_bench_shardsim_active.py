"""The simulated apiserver of `make bench-shards` as volcano-py's N active replicas use it (`bench_shards.py
--active`): Leases shared by the scheduler's own elector, deletes with preconditions, the active cluster (gangs for
`volcano-py` routed by the scheduler's hash, NodeShards `volcano-py-shard-i`), the harness's shard view and its
settle rule, and the watch lag it records."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import orjson
import pytest

from scheduler.cli import bench_module

bench_module("shards")  # puts bench/ on sys.path for the packages below
from shardsim.cluster import Shape, load  # noqa: E402
from shardsim.kinds import all_kinds  # noqa: E402
from shardsim.server import Server, serve  # noqa: E402
from shardsim.store import Store  # noqa: E402
from test_bench_shardsim import call, pod, server  # noqa: E402


def serving(srv: Server) -> tuple[int, Any]:
    """The simulated apiserver on a loopback port in a thread; (port, stop)."""
    loop = asyncio.new_event_loop()
    port: list[int] = []
    ready = threading.Event()
    thread = threading.Thread(target=loop.run_until_complete,
                              args=(serve(srv, "127.0.0.1", 0, lambda p: (port.append(p), ready.set())),),
                              daemon=True)
    thread.start()
    assert ready.wait(10)

    def stop() -> None:
        loop.call_soon_threadsafe(srv.stopping.set)
        thread.join(10)

    return port[0], stop


def test_two_leader_electors_of_the_scheduler_share_a_lease_through_the_simulated_apiserver() -> None:
    from kubernetes import client

    from scheduler.cache.kube import Kube, KubeError
    from scheduler.cache.leader import LEASE_API, LeaderConfig, LeaderElector

    srv = server()
    port, stop = serving(srv)
    try:
        cfg = client.Configuration()
        cfg.host = f"http://127.0.0.1:{port}"
        kube = Kube(client.ApiClient(cfg))
        now = [100.0]
        config = LeaderConfig(namespace="ns", name="l-shard-1", lease_duration=15.0, renew_deadline=10.0,
                              retry_period=2.0)
        a, b = (LeaderElector(kube, who, config, monotonic=lambda: now[0]) for who in ("a", "b"))
        assert a.try_acquire_or_renew() and a.is_leader()  # created (POST)
        assert not b.try_acquire_or_renew() and b.holder == "a"  # read (GET), a live Lease: not taken
        now[0] += 5.0
        assert a.try_acquire_or_renew()  # renewed (PUT naming the resourceVersion it read)
        assert not b.try_acquire_or_renew()  # the record changed: b's clock for it restarts
        now[0] += 16.0  # a stops renewing: b saw no change for longer than the lease duration
        assert b.try_acquire_or_renew() and b.is_leader()
        assert not a.is_leader() and not a.try_acquire_or_renew(acquire=False) and a.holder == "b"
        lease = kube.request("GET", f"{LEASE_API}/namespaces/ns/leases/l-shard-1")
        assert (lease["spec"]["holderIdentity"], lease["spec"]["leaseTransitions"]) == ("b", 1)
        kube.request("POST", f"{LEASE_API}/namespaces/ns/leases", body={
            "metadata": {"name": "l-member-a"}, "spec": {"holderIdentity": "a"}})
        listed = kube.request("GET", f"{LEASE_API}/namespaces/ns/leases", query={"limit": 500})
        assert [i["metadata"]["name"] for i in listed["items"]] == ["l-member-a", "l-shard-1"]
        # A delete names the version it read (DeleteOptions.preconditions): a stale one is a 409, nothing deleted.
        member = f"{LEASE_API}/namespaces/ns/leases/l-member-a"
        read = kube.request("GET", member)["metadata"]["resourceVersion"]
        kube.request("PUT", member, body={"metadata": {"name": "l-member-a", "resourceVersion": read},
                                          "spec": {"holderIdentity": "a", "renewTime": "later"}})
        with pytest.raises(KubeError) as err:
            kube.delete(member, body={"preconditions": {"resourceVersion": read}})
        assert err.value.status == 409
        fresh = kube.request("GET", member)["metadata"]["resourceVersion"]
        assert kube.delete(member, body={"preconditions": {"resourceVersion": fresh}})
        assert kube.get_or_none(member) is None
    finally:
        stop()


def test_the_active_cluster_routes_each_gang_as_the_scheduler_does_and_the_view_counts_its_shards() -> None:
    from shardsim.cluster import shards_view

    from scheduler.api.active_shards import route

    store = Store(all_kinds())
    made, plan = load(store, Shape(nodes=16, running=16, pending=120, replicas=4, max_gang=8, active=True))
    pods = store.kind("v1", "pods")
    gang_pods = [orjson.loads(e.data) for k, e in pods.objects.items() if k.startswith("bench/g")]
    assert len(gang_pods) == 120 and {p["spec"]["schedulerName"] for p in gang_pods} == {"volcano-py"}
    assert {g.shard for g in plan} == {0, 1, 2, 3}
    assert all(g.shard == route(f"bench/{g.name}", 4) for g in plan)
    assert made["pending_by_shard"] == [sum(g.size for g in plan if g.shard == r) for r in range(4)]
    shards = store.kind("shard.volcano.sh/v1alpha1", "nodeshards").objects
    desired = {name: orjson.loads(e.data)["spec"]["nodesDesired"] for name, e in shards.items()}
    assert desired == {f"volcano-py-shard-{r}": [f"n{i}" for i in range(4 * r, 4 * r + 4)] for r in range(4)}
    for r in range(4):  # a shard's GPU gangs take at most half its GPUs (one GPU node of 8 per block of 4)
        assert sum(g.size for g in plan if g.shard == r and g.gpu) <= 4
    leases = store.kind("coordination.k8s.io/v1", "leases")
    store.create(leases, "volcano-py-system", {"metadata": {"name": "s-shard-0"}, "spec": {"holderIdentity": "a"}})
    first = plan[0]
    store.bind("bench", f"{first.name}-0", {"target": {"name": "n0"}})
    doc = shards_view(store, plan, "volcano-py-system")
    assert doc["leases"] == {"s-shard-0": "a"}
    assert doc["nodeshards"]["volcano-py-shard-0"] == {"desired": 4, "in_use": 0}
    assert doc["unbound_by_shard"][str(first.shard)] == made["pending_by_shard"][first.shard] - 1
    assert sum(doc["unbound_by_shard"].values()) == 119


def test_the_active_shards_settle_once_each_replica_holds_one_and_every_node_is_in_use() -> None:
    import shards_active as active
    lease = {f"volcano-py-scheduler-shard-{i}": f"active-{i}" for i in range(2)}
    shards = {f"volcano-py-shard-{i}": {"desired": 4, "in_use": 4} for i in range(2)}
    assert active.settled({"leases": lease, "nodeshards": shards}, 2)
    both = {**lease, "volcano-py-scheduler-shard-1": "active-0"}  # one replica took both: not yet
    assert not active.settled({"leases": both, "nodeshards": shards}, 2)
    moving = {**shards, "volcano-py-shard-1": {"desired": 4, "in_use": 3}}
    assert not active.settled({"leases": lease, "nodeshards": moving}, 2)
    assert active.held_by({"leases": both}, 2) == {"active-0": [0, 1]}


def test_a_watch_read_late_records_how_long_after_the_write_its_events_left() -> None:
    import urllib.request

    srv = server()
    call(srv, "POST", "/api/v1/namespaces/ns/pods", pod("p1"), who="")
    written = srv.store.kind("v1", "pods").log[-1].at
    port, stop = serving(srv)
    try:
        asked = time.monotonic()
        req = urllib.request.Request(f"http://127.0.0.1:{port}/api/v1/pods?watch=1&resourceVersion=1&timeoutSeconds=1",
                                     headers={"Authorization": "Bearer r7"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            assert b'"p1"' in resp.read()
    finally:
        stop()
    lag = srv.acct.stats()["replicas"]["r7"]["watch_lag_max_s"]["pods"]
    assert lag >= asked - written > 0  # written before the watch asked for it, sent after
    assert "" not in srv.acct.replicas  # the harness's own requests are no replica's
