"""What a pod watch event of another scheduler's pod bound outside a replica's scope costs the replica
(`--active-shards`, scheduler/cache/scope.py `PodScope.skips`): decoded and then dropped (`Watcher._on_event` after
`loads`, as before the skip) against passed over as bytes (`Watcher._on_line`), per event, for added, modified
and deleted pods, on the bench's small pod (bench/shardsim/cluster.py) and on a pod shaped as kube-apiserver sends
one (managedFields, volumes, status: ~4.3 KB). CPU time, best of the rounds.

    .venv/bin/python bench/bench_watch_skip.py [--events 20000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import orjson
from shardsim.cluster import pod_doc

from scheduler.cache.kube import loads
from scheduler.cache.parse import ParseCache
from scheduler.cache.scope import PodScope
from scheduler.cache.store import Stores
from scheduler.cache.watch import Watcher

NOW = "2026-12-06T10:00:00Z"
FIELD = {".": {}, "f:lastProbeTime": {}, "f:lastTransitionTime": {}, "f:status": {}, "f:type": {}}


def bench_pod(i: int, node: str) -> dict[str, Any]:
    made = pod_doc(f"o-{i}", "other-scheduler", {"cpu": "1", "memory": "1Gi"}, node=node)
    made["metadata"].update(namespace="bench", uid=str(uuid.uuid4()), resourceVersion=str(100000 + i),
                            creationTimestamp=NOW)
    return made


def kube_pod(i: int, node: str) -> dict[str, Any]:
    """A training worker as kube-apiserver returns it once kube-scheduler bound it and its kubelet runs it."""
    container = {
        "name": "main", "image": "registry.example.com/team-a/train:2026.12", "command": ["python", "train.py"],
        "args": ["--epochs", "90"], "env": [{"name": "WORLD_SIZE", "value": "8"}, {"name": "RANK", "value": "0"},
                                            {"name": "MASTER_ADDR", "value": f"train-{i}-master-0"}],
        "resources": {"limits": {"nvidia.com/gpu": "8"},
                      "requests": {"cpu": "32", "memory": "256Gi", "nvidia.com/gpu": "8"}},
        "volumeMounts": [{"name": "kube-api-access", "readOnly": True,
                          "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent"}
    managed = [
        {"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1", "time": NOW,
         "fieldsType": "FieldsV1", "fieldsV1": {
             "f:metadata": {"f:generateName": {}, "f:labels": {".": {}, "f:app": {}, "f:job-name": {}},
                            "f:ownerReferences": {".": {}, 'k:{"uid":"x"}': {}}},
             "f:spec": {"f:containers": {'k:{"name":"main"}': {
                 ".": {}, "f:image": {}, "f:imagePullPolicy": {}, "f:name": {},
                 "f:resources": {".": {}, "f:limits": {".": {}, "f:nvidia.com/gpu": {}},
                                 "f:requests": {".": {}, "f:cpu": {}, "f:memory": {}, "f:nvidia.com/gpu": {}}},
                 "f:terminationMessagePath": {}, "f:terminationMessagePolicy": {}}},
                 "f:dnsPolicy": {}, "f:enableServiceLinks": {}, "f:restartPolicy": {}, "f:schedulerName": {},
                 "f:securityContext": {}, "f:terminationGracePeriodSeconds": {}}}},
        {"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": NOW, "fieldsType": "FieldsV1",
         "subresource": "status", "fieldsV1": {"f:status": {
             "f:conditions": {f'k:{{"type":"{t}"}}': FIELD for t in ("ContainersReady", "Initialized", "Ready")},
             "f:containerStatuses": {}, "f:hostIP": {}, "f:phase": {}, "f:podIP": {},
             "f:podIPs": {".": {}, 'k:{"ip":"10.0.0.2"}': {".": {}, "f:ip": {}}}, "f:startTime": {}}}}]
    volume = {"name": "kube-api-access", "projected": {"defaultMode": 420, "sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace",
                                    "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}]}}
    return {"kind": "Pod", "apiVersion": "v1", "metadata": {
        "name": f"train-{i}-worker-0", "generateName": f"train-{i}-worker-", "namespace": "team-a",
        "uid": str(uuid.uuid4()), "resourceVersion": str(100000 + i), "creationTimestamp": NOW,
        "labels": {"app": "train", "job-name": f"train-{i}", "training.kubeflow.org/replica-type": "worker"},
        "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": f"train-{i}", "uid": str(uuid.uuid4()),
                             "controller": True, "blockOwnerDeletion": True}],
        "managedFields": managed},
        "spec": {"volumes": [volume], "containers": [container], "restartPolicy": "Never",
                 "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst", "serviceAccountName": "default",
                 "nodeName": node, "securityContext": {}, "schedulerName": "default-scheduler",
                 "tolerations": [{"key": f"node.kubernetes.io/{k}", "operator": "Exists", "effect": "NoExecute",
                                  "tolerationSeconds": 300} for k in ("not-ready", "unreachable")],
                 "priority": 0, "enableServiceLinks": True, "preemptionPolicy": "PreemptLowerPriority"},
        "status": {"phase": "Running", "hostIP": "10.0.0.1", "podIP": "10.0.0.2", "podIPs": [{"ip": "10.0.0.2"}],
                   "startTime": NOW, "qosClass": "Burstable",
                   "conditions": [{"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": NOW}
                                  for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")],
                   "containerStatuses": [{"name": "main", "state": {"running": {"startedAt": NOW}}, "lastState": {},
                                          "ready": True, "restartCount": 0, "image": container["image"],
                                          "imageID": "", "started": True}]}}


def per_event(make: Callable[[int, str], dict[str, Any]], kind: str, events: int, rounds: int) -> tuple[int, float,
                                                                                                          float]:
    """Bytes a line, then us an event decoded and dropped, and passed over (best of `rounds`)."""
    stores = Stores()
    names = frozenset({"volcano-py"})
    scope = PodScope(names)
    scope.nodes = frozenset(f"node-{i}" for i in range(12500))  # a replica of 8 at 100,000 nodes
    stores.pod_scope = scope
    watcher = Watcher(None, stores, ParseCache(names, stores.lock, lambda *a: None),  # type: ignore[arg-type]
                      threading.Event(), watch_timeout=300, page_size=500)
    lines = [orjson.dumps({"type": kind, "object": make(i, f"node-{20000 + i}")}) + b"\n" for i in range(events)]
    decoded, skipped = [], []
    for _ in range(rounds):
        start = time.process_time()
        for line in lines:
            event = loads(line)
            watcher._on_event(stores.pods, event["type"], event["object"])
        decoded.append(time.process_time() - start)
        before, start = scope.skipped, time.process_time()
        for line in lines:
            watcher._on_line(stores.pods, line)
        skipped.append(time.process_time() - start)
        assert scope.skipped - before == events and not stores.pods.objects
    return len(lines[0]), min(decoded) / events * 1e6, min(skipped) / events * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print("| pod | event | bytes | decoded, us | passed over, us | ratio |\n|---|---|---|---|---|---|")
    for label, make in (("bench", bench_pod), ("kube-apiserver-shaped", kube_pod)):
        for kind in ("ADDED", "MODIFIED", "DELETED"):
            size, decoded, skipped = per_event(make, kind, args.events, args.rounds)
            print(f"| {label} | {kind} | {size:,} | {decoded:.2f} | {skipped:.2f} | {decoded / skipped:.1f}x |")


if __name__ == "__main__":
    main()
