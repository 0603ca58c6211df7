"""What the scheduler writes per bind, on a real kube-apiserver: the Binding and the `Scheduled` Event go as
protobuf (scheduler/cache/protobuf.py) and the apiserver reads them as sent; every bound pod gets its own
`Scheduled` event and its PodGroup its status, as with Volcano (docs/events-and-conditions.md).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from controlplane import wait_for
from inprocess import running_scheduler
from test_scheduler import GROUP, gang_pod, pg_status, podgroup

from scheduler.cache import protobuf
from scheduler.cache.kube import Kube

TIMEOUT = 60


@pytest.fixture
def scheduler(control_plane):
    with running_scheduler(control_plane) as running:
        yield running


def events_of(core_v1, namespace: str) -> list[dict]:
    return json.loads(core_v1.list_namespaced_event(namespace, _preload_content=False).data)["items"]


def pods_of(core_v1, namespace: str) -> dict[str, dict]:
    items = json.loads(core_v1.list_namespaced_pod(namespace, _preload_content=False).data)["items"]
    return {p["metadata"]["name"]: p for p in items}


def test_a_protobuf_binding_and_event_are_read_back_by_the_apiserver_as_sent(control_plane, core_v1, namespace,
                                                                             node_set):
    node = node_set(gpus=0)
    core_v1.create_namespaced_pod(namespace, {"metadata": {"name": "p"}, "spec": {
        "schedulerName": "nobody", "containers": [{"name": "c", "image": "busybox"}]}})
    uid = pods_of(core_v1, namespace)["p"]["metadata"]["uid"]
    kube = Kube(control_plane.api_client())
    content_types: list[str] = []  # what each body went as (the apiserver's answer alone would not tell)
    payload = kube._payload

    def recorded(*args: Any) -> tuple[str, bytes]:
        content_type, data = payload(*args)
        content_types.append(content_type)
        return content_type, data

    kube._payload = recorded  # type: ignore[method-assign]
    kube.request("POST", f"/api/v1/namespaces/{namespace}/pods/p/binding", protobuf=True, body={
        "apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p", "namespace": namespace, "uid": uid},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node}})
    assert pods_of(core_v1, namespace)["p"]["spec"]["nodeName"] == node
    sent = {"apiVersion": "v1", "kind": "Event",
            "metadata": {"generateName": "p.", "namespace": namespace, "annotations": {"volcano-py.io/x": "y"}},
            "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": "p", "namespace": namespace, "uid": uid},
            "type": "Normal", "reason": "Scheduled", "message": f"Successfully assigned {namespace}/p to {node}",
            "source": {"component": "volcano-py"}, "reportingComponent": "volcano-py", "reportingInstance": "i-1",
            "firstTimestamp": "2026-12-04T16:34:05Z", "lastTimestamp": "2026-12-04T16:34:06Z", "count": 3}
    created = kube.request("POST", f"/api/v1/namespaces/{namespace}/events", body=sent, protobuf=True)
    assert kube.protobuf_ok, "the apiserver refused the protobuf body (415)"
    assert content_types == [protobuf.CONTENT_TYPE, protobuf.CONTENT_TYPE], "not sent as protobuf"
    [stored] = [e for e in events_of(core_v1, namespace) if e["metadata"]["name"] == created["metadata"]["name"]]
    assert stored["metadata"]["name"].startswith("p.")
    assert stored["metadata"]["annotations"] == {"volcano-py.io/x": "y"}
    for key in ("involvedObject", "type", "reason", "message", "source", "reportingComponent", "reportingInstance",
                "firstTimestamp", "lastTimestamp", "count"):
        assert stored[key] == sent[key], key


def test_every_bound_pod_has_its_own_scheduled_event_and_the_podgroup_its_status(scheduler, core_v1, custom,
                                                                                 namespace, node_set):
    node_set(gpus=0)
    size = 6
    custom.create_namespaced_custom_object(GROUP, "v1beta1", namespace, "podgroups", podgroup("g", size))
    for i in range(size):
        core_v1.create_namespaced_pod(namespace, gang_pod(f"g-{i}", "g", node_set.tag))
    pods = wait_for(lambda: (ps := pods_of(core_v1, namespace)) and all(p["spec"].get("nodeName") for p in ps.values())
                    and len(ps) == size and ps, TIMEOUT, what="the gang bound")
    want = {(p["metadata"]["uid"], f"Successfully assigned {namespace}/{name} to {p['spec']['nodeName']}")
            for name, p in pods.items()}

    def scheduled() -> list[tuple[str, str]]:
        return [(e["involvedObject"].get("uid"), e["message"]) for e in events_of(core_v1, namespace)
                if e["reason"] == "Scheduled" and e["involvedObject"]["kind"] == "Pod"]

    wait_for(lambda: set(scheduled()) == want, TIMEOUT, what="a Scheduled event for every bound pod")
    assert sorted(scheduled()) == sorted(want), "a pod got more than one Scheduled event"
    wait_for(lambda: pg_status(custom, namespace, "g").get("phase") == "Running", TIMEOUT, what="PodGroup Running")
    conditions = {c["type"]: c["status"] for c in pg_status(custom, namespace, "g").get("conditions") or ()}
    assert conditions.get("Scheduled") == "True"
    wait_for(lambda: any(e["reason"] == "Scheduled" and e["involvedObject"]["kind"] == "PodGroup"
                         for e in events_of(core_v1, namespace)), TIMEOUT, what="the PodGroup's Scheduled event")
    assert scheduler.cache.kube.protobuf_ok, "the scheduler fell back to JSON bodies"
