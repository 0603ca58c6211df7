"""What the Kubernetes cache holds per object (tracemalloc): N other schedulers' pods fed through the watch path
(decoded from list pages, stored, parsed), then the incremental snapshot built from them; and a realistic GPU node
(40 images, five conditions with messages, nodeInfo) decoded whole and as the store keeps it (cache/slim.py).

    .venv/bin/python bench/bench_cache_memory.py [--pods 50000]

The pods are the bench-shards' running pods (one container, 2 CPUs, 8 GiB, one PodScheduled condition), one node
per 10 pods.
"""

from __future__ import annotations

import argparse
import gc
import json
import tracemalloc
from typing import Any

from bench.bench_gc_cycles import node, pod
from scheduler.cache.cluster_cache import ClusterCache
from scheduler.cache.kube import loads
from scheduler.cache.slim import Slimmer


def gpu_node(i: int) -> dict[str, Any]:
    labels = {f"label-{k}.example.com/key": f"value-{k}" for k in range(12)}
    labels.update({"kubernetes.io/hostname": f"n{i}", "topology.kubernetes.io/zone": "z1",
                   "nvidia.com/gpu.product": "H100"})
    res = {"cpu": "96", "memory": "1056Gi", "pods": "110", "ephemeral-storage": "3Ti", "nvidia.com/gpu": "8",
           "hugepages-1Gi": "0", "hugepages-2Mi": "0", "rdma/ib": "8"}
    conditions = [{"type": t, "status": s, "lastHeartbeatTime": "2026-12-05T10:00:00Z",
                   "lastTransitionTime": "2026-11-05T10:00:00Z", "reason": "Kubelet" + t,
                   "message": f"kubelet has no {t.lower()} problem"}
                  for t, s in (("MemoryPressure", "False"), ("DiskPressure", "False"), ("PIDPressure", "False"),
                               ("Ready", "True"), ("NetworkUnavailable", "False"))]
    images = [{"names": [f"registry.example.com/team/image-{k}@sha256:{'a' * 64}",
                         f"registry.example.com/team/image-{k}:v1.{k}"], "sizeBytes": 1_000_000_000 + k}
              for k in range(40)]
    return {"kind": "Node", "apiVersion": "v1", "metadata": {
        "name": f"n{i}", "uid": f"uid-{i:08d}", "resourceVersion": str(i + 100),
        "creationTimestamp": "2026-11-05T10:00:00Z", "labels": labels,
        "annotations": {"node.alpha.kubernetes.io/ttl": "0",
                        "csi.volume.kubernetes.io/nodeid": json.dumps({"ebs.csi.aws.com": f"i-{i:017d}"})}},
        "spec": {"podCIDR": f"10.{i % 250}.0.0/24", "providerID": f"aws:///us-east-1a/i-{i:017d}"},
        "status": {"capacity": res, "allocatable": dict(res), "conditions": conditions,
                   "addresses": [{"type": "InternalIP", "address": "10.0.0.1"},
                                 {"type": "Hostname", "address": f"n{i}"}],
                   "nodeInfo": {"machineID": "a" * 32, "systemUUID": "b" * 36, "kernelVersion": "6.8.0",
                                "osImage": "Ubuntu 24.04", "containerRuntimeVersion": "containerd://1.7",
                                "kubeletVersion": "v1.34.0", "operatingSystem": "linux", "architecture": "amd64"},
                   "images": images}}


def traced() -> int:
    gc.collect()
    return tracemalloc.get_traced_memory()[0]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pods", type=int, default=50_000)
    args = p.parse_args()
    n, nodes = args.pods, max(1, args.pods // 10)
    tracemalloc.start()
    cache = ClusterCache(None, {"volcano-py"}, "default", clock=lambda: 1.8e9)
    for i in range(nodes):
        cache.watcher._on_event(cache.nodes, "ADDED", node(i))
    before = traced()
    for start in range(0, n, 1000):
        page = json.dumps({"items": [pod(j, nodes) for j in range(start, min(n, start + 1000))]}).encode()
        for obj in loads(page)["items"]:
            cache.watcher._on_event(cache.pods, "ADDED", obj)
    stored = traced()
    snapshot = cache.snapshot()
    built = traced()
    print(f"other schedulers' pods: stored and parsed {(stored - before) / n:,.0f} B a pod; "
          f"the snapshot's records {(built - stored) / n:,.0f} B a pod ({len(snapshot.nodes):,} nodes)")
    raw = [json.dumps(gpu_node(i)).encode() for i in range(2000)]
    slimmer = Slimmer(frozenset({"volcano-py"}))
    for label, keep in (("whole", lambda o: o), ("as stored", slimmer.node)):
        start_at = traced()
        kept = [keep(loads(r)) for r in raw]
        print(f"a GPU node ({sum(map(len, raw)) / len(raw):,.0f} bytes of JSON), {label}: "
              f"{(traced() - start_at) / len(kept):,.0f} B")
        del kept


if __name__ == "__main__":
    main()
