"""`bench_shards.py --bind-cap`: the simulated apiserver takes at most N binds per wall second, a bind beyond it
waiting its turn (as kube-apiserver's priority and fairness queues it), and the harness reads the replicas' rate
against the cap."""

from __future__ import annotations

import asyncio
import http.client
import time

import orjson
import pytest

from scheduler.cli import bench_module

bench_module("shards")  # puts bench/ on sys.path for the packages below
from bench_shards import capped  # noqa: E402
from shardsim.accounting import Accounting  # noqa: E402
from shardsim.kinds import all_kinds  # noqa: E402
from shardsim.server import Server  # noqa: E402
from shardsim.store import Store  # noqa: E402
from test_bench_shardsim import COSTS, call, pod  # noqa: E402
from test_bench_shardsim_active import serving  # noqa: E402


def test_turns_are_one_over_the_cap_apart_in_arrival_order() -> None:
    srv = Server(Store(all_kinds()), Accounting(COSTS, 4, cpu_of=lambda pid: 0.0), bind_cap=100.0)
    done: list[tuple[int, float]] = []

    async def one(i: int) -> None:
        await srv._bind_turn()
        done.append((i, time.monotonic()))

    async def all_of_them() -> float:
        start = time.monotonic()
        await asyncio.gather(*(one(i) for i in range(10)))
        return start

    start = asyncio.run(all_of_them())
    assert [i for i, _ in done] == list(range(10))
    for k, (_, t) in enumerate(done):
        assert t >= start + k / 100.0 - 1e-3  # never sooner than its slot


def test_binds_sent_one_after_another_are_held_to_the_cap_and_all_accepted() -> None:
    store = Store(all_kinds())
    srv = Server(store, Accounting(COSTS, 4, cpu_of=lambda pid: 0.0), bind_cap=10.0)
    call(srv, "POST", "/api/v1/namespaces", {"metadata": {"name": "ns"}}, who="")
    for i in range(6):
        call(srv, "POST", "/api/v1/namespaces/ns/pods", pod(f"p{i}"))
    port, stop = serving(srv)
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        start = time.monotonic()
        for i in range(6):
            body = orjson.dumps({"metadata": {"name": f"p{i}"}, "target": {"kind": "Node", "name": "n1"}})
            conn.request("POST", f"/api/v1/namespaces/ns/pods/p{i}/binding", body,
                         {"Content-Type": "application/json", "Authorization": "Bearer r0"})
            resp = conn.getresponse()
            assert resp.status == 201
            resp.read()
        elapsed = time.monotonic() - start
        conn.close()
    finally:
        stop()
    assert elapsed >= 5 / 10.0 - 1e-3  # the first at once, each next one 0.1 s after the one before
    assert store.binds == {f"ns/p{i}": 1 for i in range(6)}


def test_the_rate_is_read_from_the_first_bind_to_the_last_over_every_replica() -> None:
    stats = {"binds": 1001, "replicas": {
        "a": {"first_bind": {"wall_s": 10.0}, "last_bind": {"wall_s": 20.0}},
        "b": {"first_bind": {"wall_s": 11.0}, "last_bind": {"wall_s": 21.0}},
        "c": {"first_bind": None, "last_bind": None}}}  # a replica that bound nothing
    out = capped(stats, 100.0)
    assert out["binds_per_wall_s"] == pytest.approx(1000 / 11.0, abs=0.05)
    assert out["share_of_cap"] == round(1000 / 11.0 / 100.0, 4)
    assert out["met"] is False  # 90.9% of the cap
    assert capped({"binds": 1001, "replicas": stats["replicas"]}, 95.0)["met"] is True  # 95.7%


@pytest.mark.parametrize("bad", ["-5", "nan", "inf"])
def test_a_cap_that_is_no_rate_is_refused_naming_the_flag(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    from bench_shards import main

    with pytest.raises(SystemExit):
        main(["--bind-cap", bad, "--results", "/nonexistent"])
    assert "--bind-cap" in capsys.readouterr().err


def test_a_metric_sample_is_read_by_its_exact_name() -> None:
    from shards_report import sample_value

    text = "# HELP x\nx_count 12.0\nx_count_total 99\nx_sum 3.5\n"
    assert sample_value(text, "x_count") == 12.0
    assert sample_value(text, "x_sum") == 3.5
    assert sample_value(text, "y_count") is None
