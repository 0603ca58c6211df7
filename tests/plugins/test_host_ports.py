"""Host ports, as kube-scheduler's NodePorts filter (which Volcano's predicates run) checks them: two pods asking
for the same host port never share a node, in one cycle or across cycles, whoever scheduled the first; different
ports, protocols or host IPs do not clash (Volcano's e2e "Predicates E2E Test Hostport")."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.api.pod import host_ports_conflict
from scheduler.api.reasons import NODE_PORTS, NodesUnavailable
from scheduler.sim.objects import pod_object
from scheduler.testing import cluster


def _with_port(pod: dict[str, Any], port: int, protocol: str | None = None, ip: str | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"containerPort": 80, "hostPort": port}
    if protocol:
        entry["protocol"] = protocol
    if ip:
        entry["hostIP"] = ip
    pod["spec"]["containers"][0]["ports"] = [entry]
    return pod


def test_pods_asking_for_one_host_port_spread_over_nodes_and_the_rest_wait() -> None:
    c = cluster().nodes("n", 2, cpu="8")
    c.sim.add_podgroup({"metadata": {"name": "web", "namespace": "default"}, "spec": {"minMember": 1},
                        "status": {"phase": "Inqueue"}})
    for i in range(3):
        c.sim.add_pod(_with_port(pod_object(f"web-{i}", group="web"), 28080))
    c.cycles(2)
    bound = c.sim.bound("web")
    assert sorted(bound.values()) == ["n0", "n1"]  # one per node; the third has no node with the port free


def test_the_node_a_port_is_taken_on_is_named_as_kube_scheduler_names_it() -> None:
    c = cluster().node("n", cpu="8")
    c.sim.add_podgroup({"metadata": {"name": "web", "namespace": "default"}, "spec": {"minMember": 2},
                        "status": {"phase": "Inqueue"}})
    for i in range(2):
        c.sim.add_pod(_with_port(pod_object(f"web-{i}", group="web"), 28080))
    c.cycles(2)
    decision = c.sim.decision("web")
    assert c.sim.bound("web") == {}
    assert decision is not None
    unavailable = next(r for r in decision.reasons if isinstance(r, NodesUnavailable))
    assert [(f.filter.filter, f.nodes) for f in unavailable.counts] == [(NODE_PORTS, 1)]


def test_a_port_held_by_another_schedulers_pod_is_taken() -> None:
    c = cluster().node("n", cpu="8")
    other = _with_port(pod_object("dns", scheduler_name="default-scheduler"), 53, "UDP")
    other["spec"]["nodeName"] = "n"
    other["status"] = {"phase": "Running"}
    c.sim.add_pod(other)
    c.sim.add_podgroup({"metadata": {"name": "j", "namespace": "default"}, "spec": {"minMember": 1},
                        "status": {"phase": "Inqueue"}})
    c.sim.add_pod(_with_port(pod_object("j-0", group="j"), 53, "UDP"))
    c.cycles(2)
    assert c.sim.bound("j") == {}


@pytest.mark.parametrize(("a", "b", "clash"), [
    (("TCP", "", 80), ("TCP", "", 80), True),
    (("TCP", "", 80), ("UDP", "", 80), False),
    (("TCP", "10.0.0.1", 80), ("TCP", "10.0.0.2", 80), False),
    (("TCP", "10.0.0.1", 80), ("TCP", "0.0.0.0", 80), True),
    (("TCP", "10.0.0.1", 80), ("TCP", "10.0.0.1", 80), True),
    (("TCP", "", 80), ("TCP", "", 81), False),
])
def test_which_host_ports_clash(a: tuple[str, str, int], b: tuple[str, str, int], clash: bool) -> None:
    assert host_ports_conflict((a,), (b,)) is clash


def test_the_cache_reads_host_ports_of_every_pod_it_parses() -> None:
    """The cache parses another scheduler's pods cheaply and a repeated request shape without the containers;
    both keep the host ports (else our pods would land on a port a kube-scheduler pod holds)."""
    import threading

    from scheduler.cache.parse import ParseCache

    parse = ParseCache(frozenset({"volcano-py"}), threading.Lock(), lambda *_: None)
    foreign = _with_port(pod_object("dns", scheduler_name="default-scheduler"), 53, "UDP")
    first, second = (_with_port(pod_object(f"web-{i}"), 8080) for i in range(2))  # same request shape
    for i, pod in enumerate((foreign, first, second)):
        pod["metadata"]["resourceVersion"] = str(i + 1)
    tasks = [parse.task(p, {}) for p in (foreign, first, second)]
    assert [t.constraints.host_ports if t else None for t in tasks] == [
        (("UDP", "", 53),), (("TCP", "", 8080),), (("TCP", "", 8080),)]
