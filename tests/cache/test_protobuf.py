"""The protobuf bodies of a Binding and an Event (scheduler/cache/protobuf.py), decoded by an independent decoder:
Google's protobuf runtime, with the messages declared here field by field as k8s.io/api core/v1 and
k8s.io/apimachinery meta/v1 and runtime `generated.proto` (v0.37.2) declare them. The expected values are written
out by hand, not taken from the encoder.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from scheduler.cache import protobuf
from scheduler.cache.kube import Kube

STRING, INT64, INT32, BYTES, MESSAGE = (descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
                                        descriptor_pb2.FieldDescriptorProto.TYPE_INT64,
                                        descriptor_pb2.FieldDescriptorProto.TYPE_INT32,
                                        descriptor_pb2.FieldDescriptorProto.TYPE_BYTES,
                                        descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE)
OPTIONAL = descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL
REPEATED = descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED

# name -> [(field, number, type, message type or None, repeated)], from the upstream generated.proto files
MESSAGES: dict[str, list[tuple[str, int, int, str | None, bool]]] = {
    "TypeMeta": [("apiVersion", 1, STRING, None, False), ("kind", 2, STRING, None, False)],
    "Unknown": [("typeMeta", 1, MESSAGE, "TypeMeta", False), ("raw", 2, BYTES, None, False),
                ("contentEncoding", 3, STRING, None, False), ("contentType", 4, STRING, None, False)],
    "Time": [("seconds", 1, INT64, None, False), ("nanos", 2, INT32, None, False)],
    "StringEntry": [("key", 1, STRING, None, False), ("value", 2, STRING, None, False)],
    "ObjectMeta": [("name", 1, STRING, None, False), ("generateName", 2, STRING, None, False),
                   ("namespace", 3, STRING, None, False), ("selfLink", 4, STRING, None, False),
                   ("uid", 5, STRING, None, False), ("resourceVersion", 6, STRING, None, False),
                   ("generation", 7, INT64, None, False), ("creationTimestamp", 8, MESSAGE, "Time", False),
                   ("labels", 11, MESSAGE, "StringEntry", True), ("annotations", 12, MESSAGE, "StringEntry", True)],
    "ObjectReference": [("kind", 1, STRING, None, False), ("namespace", 2, STRING, None, False),
                        ("name", 3, STRING, None, False), ("uid", 4, STRING, None, False),
                        ("apiVersion", 5, STRING, None, False), ("resourceVersion", 6, STRING, None, False),
                        ("fieldPath", 7, STRING, None, False)],
    "EventSource": [("component", 1, STRING, None, False), ("host", 2, STRING, None, False)],
    "Binding": [("metadata", 1, MESSAGE, "ObjectMeta", False), ("target", 2, MESSAGE, "ObjectReference", False)],
    "Event": [("metadata", 1, MESSAGE, "ObjectMeta", False), ("involvedObject", 2, MESSAGE, "ObjectReference", False),
              ("reason", 3, STRING, None, False), ("message", 4, STRING, None, False),
              ("source", 5, MESSAGE, "EventSource", False), ("firstTimestamp", 6, MESSAGE, "Time", False),
              ("lastTimestamp", 7, MESSAGE, "Time", False), ("count", 8, INT32, None, False),
              ("type", 9, STRING, None, False), ("action", 12, STRING, None, False),
              ("related", 13, MESSAGE, "ObjectReference", False), ("reportingComponent", 14, STRING, None, False),
              ("reportingInstance", 15, STRING, None, False)],
}


def classes() -> dict[str, Any]:
    f = descriptor_pb2.FileDescriptorProto(name="k8s_test.proto", package="k8stest", syntax="proto2")
    for name, fields in MESSAGES.items():
        m = f.message_type.add(name=name)
        for field, number, type_, ref, repeated in fields:
            m.field.add(name=field, number=number, type=type_, label=REPEATED if repeated else OPTIONAL,
                        **({"type_name": f".k8stest.{ref}"} if ref else {}))
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    return {name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"k8stest.{name}")) for name in MESSAGES}


PB = classes()


def unwrap(data: bytes) -> tuple[str, str, bytes]:
    assert data[:4] == b"k8s\x00"
    unknown = PB["Unknown"].FromString(data[4:])
    return unknown.typeMeta.apiVersion, unknown.typeMeta.kind, unknown.raw


def test_a_binding_decodes_to_the_pod_its_uid_the_node_and_the_fence_annotations():
    body = {"apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": "p-0", "namespace": "team-a", "uid": "0f1e-22",
                         "annotations": {"volcano-py.io/bound-by": "replica-1", "volcano-py.io/lease": "ns/lease"}},
            "target": {"apiVersion": "v1", "kind": "Node", "name": "gpu-node-7"}}
    api_version, kind, raw = unwrap(protobuf.encode(body))
    assert (api_version, kind) == ("v1", "Binding")
    b = PB["Binding"].FromString(raw)
    assert (b.metadata.name, b.metadata.namespace, b.metadata.uid) == ("p-0", "team-a", "0f1e-22")
    assert {e.key: e.value for e in b.metadata.annotations} == {"volcano-py.io/bound-by": "replica-1",
                                                                  "volcano-py.io/lease": "ns/lease"}
    assert (b.target.apiVersion, b.target.kind, b.target.name) == ("v1", "Node", "gpu-node-7")
    assert not b.metadata.HasField("generateName") and not b.target.HasField("namespace")


def test_an_event_decodes_field_by_field_with_its_times_as_epoch_seconds():
    body = {"apiVersion": "v1", "kind": "Event",
            "metadata": {"generateName": "p-0.", "namespace": "team-a", "annotations": {"k": "v"}},
            "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": "p-0", "namespace": "team-a",
                               "uid": "0f1e-22"},
            "type": "Normal", "reason": "Scheduled", "message": "Successfully assigned team-a/p-0 to n-1 ✓",
            "source": {"component": "volcano-py"}, "reportingComponent": "volcano-py",
            "reportingInstance": "volcano-py-host-1", "firstTimestamp": "2026-12-04T16:34:05Z",
            "lastTimestamp": "2026-12-04T16:34:06Z", "count": 1}
    api_version, kind, raw = unwrap(protobuf.encode(body))
    assert (api_version, kind) == ("v1", "Event")
    e = PB["Event"].FromString(raw)
    assert (e.metadata.generateName, e.metadata.namespace) == ("p-0.", "team-a")
    assert [(a.key, a.value) for a in e.metadata.annotations] == [("k", "v")]
    ref = e.involvedObject
    assert (ref.apiVersion, ref.kind, ref.name, ref.namespace, ref.uid) == ("v1", "Pod", "p-0", "team-a", "0f1e-22")
    assert (e.type, e.reason, e.message) == ("Normal", "Scheduled", "Successfully assigned team-a/p-0 to n-1 ✓")
    assert (e.source.component, e.reportingComponent, e.reportingInstance) == ("volcano-py", "volcano-py",
                                                                               "volcano-py-host-1")
    # 2026-12-04T16:34:05Z: 20,791 days after 1970-01-01, then 16 h 34 min 5 s
    assert (e.firstTimestamp.seconds, e.lastTimestamp.seconds) == (20791 * 86400 + 59645, 20791 * 86400 + 59646)
    assert e.count == 1 and not e.firstTimestamp.nanos


def test_a_long_message_and_a_large_count_use_multi_byte_lengths_and_varints():
    message = "x" * 300  # a length above 127 takes two varint bytes
    body = {"apiVersion": "v1", "kind": "Event", "metadata": {"generateName": "g.", "namespace": "n"},
            "involvedObject": {"kind": "PodGroup", "name": "g", "namespace": "n",
                               "apiVersion": "scheduling.volcano.sh/v1beta1"},
            "reason": "Unschedulable", "message": message, "type": "Warning", "count": 2_000_000_000}
    e = PB["Event"].FromString(unwrap(protobuf.encode(body))[2])
    assert (e.message, e.count, e.involvedObject.apiVersion) == (message, 2_000_000_000,
                                                                 "scheduling.volcano.sh/v1beta1")


@pytest.mark.parametrize("body", [
    {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}},  # not covered
    {"apiVersion": "v2", "kind": "Binding", "metadata": {"name": "p"}},
    {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p", "finalizers": ["f"]}},  # field not covered
    {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": 7}},
    {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e"}, "firstTimestamp": "yesterday"},
    {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e"}, "count": 1 << 31},
    {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e"}, "count": True},
    {"apiVersion": "v1", "kind": "Event", "metadata": {"annotations": {"k": 1}}},
    {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p\ud800"}},  # a lone surrogate: no UTF-8 form
    {"apiVersion": "v1", "kind": "Event", "metadata": {"annotations": {"k": "\udcff"}}},
    {"apiVersion": "v1", "kind": "Event", "metadata": {"annotations": {"\udcff": "v"}}},
    {"apiVersion": "v1", "kind": "Event", "metadata": {"annotations": {1: "v", "k": "v"}}},  # keys that do not sort
])
def test_anything_not_covered_is_refused_so_the_caller_sends_json(body):
    with pytest.raises(protobuf.UnencodableError):
        protobuf.encode(body)


class Resp:
    def __init__(self, status: int, data: bytes = b"{}"):
        self.status, self.data, self.headers = status, data, {}

    def release_conn(self) -> None:
        pass


def bare_kube(answers: list[int]) -> tuple[Kube, list[tuple[str, bytes]]]:
    """A Kube whose requests go to a list of (Content-Type, payload) instead of a server."""
    kube = Kube.__new__(Kube)
    kube.request_timeout, kube.protobuf_ok = 5.0, True
    from scheduler.cache.clock import ApiClock

    kube.clock = ApiClock(time.time)
    sent: list[tuple[str, bytes]] = []

    def send(method, path, query, body, content_type, seconds, *, stream=False, proto=False):
        ctype, payload = kube._payload(body, content_type, proto)
        sent.append((ctype, payload))
        return Resp(answers.pop(0))

    kube._send = send  # type: ignore[method-assign]
    return kube, sent


BINDING = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p", "namespace": "n"},
           "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"}}


def test_a_server_that_refuses_protobuf_gets_the_same_bind_as_json_and_json_from_then_on():
    kube, sent = bare_kube([415, 201, 201])
    kube.request("POST", "/api/v1/namespaces/n/pods/p/binding", body=BINDING, protobuf=True)
    kube.request("POST", "/api/v1/namespaces/n/pods/p/binding", body=BINDING, protobuf=True)
    assert [c for c, _ in sent] == [protobuf.CONTENT_TYPE, "application/json", "application/json"]
    assert sent[0][1].startswith(b"k8s\x00") and b'"target"' in sent[1][1]
    assert kube.protobuf_ok is False


def test_a_body_the_encoder_does_not_cover_goes_as_json_and_protobuf_stays_on():
    kube, sent = bare_kube([201, 201])
    odd = {**BINDING, "metadata": {"name": "p", "namespace": "n", "finalizers": ["x"]}}
    kube.request("POST", "/api/v1/namespaces/n/pods/p/binding", body=odd, protobuf=True)
    kube.request("POST", "/api/v1/namespaces/n/pods/p/binding", body=BINDING, protobuf=True)
    assert [c for c, _ in sent] == ["application/json", protobuf.CONTENT_TYPE]
    assert kube.protobuf_ok is True


def test_a_body_with_no_utf8_form_fails_the_request_as_a_value_error_not_a_type_error():
    """Neither protobuf nor JSON can carry a lone surrogate: the request fails with a ValueError, which the binder
    and the event sender catch (TRANSPORT_ERRORS), instead of orjson's TypeError ending the event thread."""
    kube, sent = bare_kube([201])
    event = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e", "namespace": "n"},
             "message": "bad \ud800"}
    with pytest.raises(ValueError, match="no JSON form"):
        kube.request("POST", "/api/v1/namespaces/n/events", body=event, protobuf=True)
    assert sent == [] and kube.protobuf_ok is True
