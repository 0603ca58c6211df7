"""Every path the chart's webhook configurations route to is answered by the webhook the chart runs: the chart is
rendered with webhook.enabled=true, `volcano-py webhook` is started (on loopback, with a certificate made here)
with the routes the Deployment's arguments enable, and each rule of each webhook entry gets an AdmissionReview
for each of its operations and resources at the entry's path. A path the server does not answer is a 404, and
with `failurePolicy: Fail` nothing that entry covers could be created (issue 31: CronJobs and JobFlows).

helm is the one `make helm-bin` builds; without it this test fails, never skips.
"""

from __future__ import annotations

import json
import ssl
import subprocess
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helm_chart import render

from scheduler.flags import parse_webhook
from scheduler.webhook.admission import Queues
from scheduler.webhook.server import WebhookServer, handlers

QUEUES = {"default": {"metadata": {"name": "default"}, "status": {"state": "Open"}}}
KINDS = {"jobs": "Job", "cronjobs": "CronJob", "jobflows": "JobFlow", "queues": "Queue", "podgroups": "PodGroup",
         "pods": "Pod", "hypernodes": "HyperNode"}


def _job(queue: str) -> dict[str, Any]:
    return {"spec": {"queue": queue, "minAvailable": 1, "tasks": [{"name": "w", "replicas": 1, "template": {
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}]}}


def _jobflow(*flows: tuple[str, list[str]]) -> dict[str, Any]:
    return {"spec": {"flows": [{"name": n, **({"dependsOn": {"targets": t}} if t else {})} for n, t in flows]}}


# For the resources the chart routes today, an object Volcano's webhook admits and one it refuses (so the answer
# shows the path's own checks ran, not a blanket "allowed"); any other resource gets a bare object and must get
# a well-formed answer.
OBJECTS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "jobs": (_job("default"), _job("no-such-queue")),  # admit_job.go: the queue must exist
    "cronjobs": ({"spec": {"schedule": "*/5 * * * *", "jobTemplate": {"spec": {}}}},
                 {"spec": {"schedule": "", "jobTemplate": {"spec": {}}}}),  # admit_cronjob.go: a schedule
    "jobflows": (_jobflow(("a", []), ("b", ["a"])), _jobflow(("a", ["b"]), ("b", ["a"]))),  # a DAG
}


def _self_signed(directory: Path) -> tuple[Path, Path]:
    crt, key = directory / "tls.crt", directory / "tls.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-keyout", str(key), "-out", str(crt), "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    return crt, key


@pytest.fixture(scope="module")
def chart(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], dict[str, Any]]:
    objs = render(tmp_path_factory.mktemp("chart"), {"webhook": {"enabled": True}})
    return {(kind, name): o for (kind, _, name), o in objs.items()}


def _entries(chart: dict[tuple[str, str], dict[str, Any]]) -> list[dict[str, Any]]:
    return [hook for (kind, _), o in sorted(chart.items())
            if kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")
            for hook in o["webhooks"]]


@pytest.fixture(scope="module")
def server(chart: dict[tuple[str, str], dict[str, Any]], tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[tuple[WebhookServer, Path]]:
    """`volcano-py webhook` as the chart's Deployment runs it (its arguments), on a free loopback port."""
    container = chart[("Deployment", "volcano-py-webhook")]["spec"]["template"]["spec"]["containers"][0]
    assert container["args"][0] == "webhook"
    opts = parse_webhook(container["args"][1:])
    assert opts.ignored == ()
    routes = handlers(Queues(QUEUES.get, lambda name: []), opts.enabled_admission, opts.scheduler_names[0])
    crt, key = _self_signed(tmp_path_factory.mktemp("tls"))
    running = WebhookServer("127.0.0.1", 0, str(crt), str(key), routes).start()
    try:
        yield running, crt
    finally:
        running.stop()


def _review(port: int, crt: Path, path: str, request: dict[str, Any]) -> tuple[int, Any]:
    body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})
    call = urllib.request.Request(f"https://127.0.0.1:{port}{path}", body.encode(),
                                  {"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(call, context=ssl.create_default_context(cafile=str(crt)), timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")


def _request(rule: dict[str, Any], resource: str, operation: str, obj: dict[str, Any]) -> dict[str, Any]:
    group, version = rule["apiGroups"][0], rule["apiVersions"][0]
    obj = dict(obj, apiVersion=f"{group}/{version}" if group else version, kind=KINDS.get(resource, resource),
               metadata={"name": "routed", "namespace": "ns"})
    return {"uid": str(uuid.uuid4()), "kind": {"group": group, "version": version, "kind": obj["kind"]},
            "resource": {"group": group, "version": version, "resource": resource}, "operation": operation,
            "name": "routed", "namespace": "ns", "userInfo": {"username": "test"},
            "object": None if operation == "DELETE" else obj,
            "oldObject": obj if operation in ("UPDATE", "DELETE") else None}


def test_the_chart_routes_its_webhooks_to_the_service_the_server_listens_behind(
        chart: dict[tuple[str, str], dict[str, Any]]) -> None:
    container = chart[("Deployment", "volcano-py-webhook")]["spec"]["template"]["spec"]["containers"][0]
    port = parse_webhook(container["args"][1:]).port
    service = chart[("Service", "volcano-py-webhook")]["spec"]["ports"]
    https = {p["name"]: p["containerPort"] for p in container["ports"]}["https"]
    assert https == port
    entries = _entries(chart)
    assert len(entries) >= 3
    for hook in entries:
        svc = hook["clientConfig"]["service"]
        assert (svc["name"], svc["port"]) == ("volcano-py-webhook", 443), hook["name"]
        assert [p["targetPort"] for p in service if p["port"] == 443] == ["https"], hook["name"]


def test_every_path_the_chart_routes_is_answered_with_an_admission_review(
        chart: dict[tuple[str, str], dict[str, Any]], server: tuple[WebhookServer, Path]) -> None:
    running, crt = server
    calls = []
    for hook in _entries(chart):
        path = hook["clientConfig"]["service"]["path"]
        for rule in hook["rules"]:
            for resource in rule["resources"]:
                for operation in rule["operations"]:
                    admitted, refused = OBJECTS.get(resource, ({}, None))
                    cases = [(admitted, True)] + ([(refused, False)] if refused is not None else [])
                    for obj, allowed in cases:
                        request = _request(rule, resource, operation, obj)
                        status, answer = _review(running.port, crt, path, request)
                        where = f"{hook['name']} {operation} {resource} -> {path}"
                        assert status == 200, f"{where}: {status} {answer}"
                        assert (answer["apiVersion"], answer["kind"], answer["response"]["uid"]) == (
                            "admission.k8s.io/v1", "AdmissionReview", request["uid"]), where
                        assert isinstance(answer["response"]["allowed"], bool), where
                        # An update is checked against the old object (admit_job.go validateJobUpdate): the refused
                        # objects are refused on create.
                        if resource in OBJECTS and (operation == "CREATE" or (allowed and operation == "UPDATE")):
                            assert answer["response"]["allowed"] is allowed, f"{where}: {answer['response']}"
                        calls.append((path, resource, operation))
    # The chart's routes at the time of writing; more may be added, none of these may go.
    routed = {(path, resource) for path, resource, _ in calls}
    assert routed >= {("/jobs/validate", "jobs"), ("/cronjobs/validate", "cronjobs"),
                      ("/jobflows/validate", "jobflows")}, routed
