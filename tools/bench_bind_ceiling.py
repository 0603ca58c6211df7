#!/usr/bin/env python3
"""Bind ceiling: how many pods/s a bare Python client can create and bind on the local control plane.

This is the ceiling every live-cluster throughput target of volcano-py is judged against: a scheduler written
with the same client cannot bind faster than a loop that does nothing but bind.

Modes (each in a fresh namespace, N pods, 1 container each, requests cpu/memory/gpu):
  model-serial   official `kubernetes` client, V1Pod/V1Binding models, responses deserialized, 1 thread
  model-threads  same, T threads (thread pool, connection pool of T)
  raw-serial     official client with dict bodies and _preload_content=False (no model (de)serialization)
  raw-threads    same, T threads
Each mode reports: create rate (pods/s), bind rate (pods/s, pods/binding subresource), and the combined
create+bind rate. kwok and kube-controller-manager run as in the e2e tests (kwok moves every bound pod to
Running, which is load on the same API server, as kubelets are on a real cluster).

    .venv/bin/python tools/bench_bind_ceiling.py --pods 1000 --threads 8
    .venv/bin/python tools/bench_bind_ceiling.py --kubeconfig ~/.kube/config   # against an existing cluster
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from controlplane import ControlPlane, create_gpu_node, node_is_ready, wait_for
from kubernetes import client, config

MODES = ("model-serial", "model-threads", "raw-serial", "raw-threads")


def pod_dict(name):
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "bench"}},
        "spec": {
            "schedulerName": "volcano-py-bench",
            "containers": [
                {
                    "name": "main",
                    "image": "registry.invalid/train:latest",
                    "resources": {
                        "requests": {"cpu": "100m", "memory": "128Mi"},
                        "limits": {"nvidia.com/gpu": "1"},
                    },
                }
            ],
        },
    }


def pod_model(name):
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, labels={"app": "bench"}),
        spec=client.V1PodSpec(
            scheduler_name="volcano-py-bench",
            containers=[
                client.V1Container(
                    name="main",
                    image="registry.invalid/train:latest",
                    resources=client.V1ResourceRequirements(
                        requests={"cpu": "100m", "memory": "128Mi"}, limits={"nvidia.com/gpu": "1"}
                    ),
                )
            ],
        ),
    )


def run_mode(api, mode, ns, n, threads, nodes, wait_running=True):
    core = client.CoreV1Api(api)
    raw = mode.startswith("raw")
    workers = threads if mode.endswith("threads") else 1
    names = [f"p-{i}" for i in range(n)]

    def create(name):
        if raw:
            r = core.create_namespaced_pod(ns, pod_dict(name), _preload_content=False)
            _ = r.data  # the body must be read (not parsed) before the connection is reused
            r.release_conn()
        else:
            core.create_namespaced_pod(ns, pod_model(name))

    def bind(i_name):
        i, name = i_name
        node = nodes[i % len(nodes)]
        if raw:
            body = {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": name, "namespace": ns},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node},
            }
            r = core.create_namespaced_pod_binding(name, ns, body, _preload_content=False)
            _ = r.data
            r.release_conn()
        else:
            body = client.V1Binding(
                metadata=client.V1ObjectMeta(name=name, namespace=ns),
                target=client.V1ObjectReference(api_version="v1", kind="Node", name=node),
            )
            # The generated client cannot deserialize the returned Status into V1Binding (it raises on the
            # missing "target"); the model path still pays for building and serializing the request models.
            r = core.create_namespaced_pod_binding(name, ns, body, _preload_content=False)
            _ = r.data  # read the body like a normal call would
            r.release_conn()

    def run(fn, items):
        t0 = time.perf_counter()
        if workers == 1:
            for it in items:
                fn(it)
        else:
            with ThreadPoolExecutor(workers) as ex:
                for _ in ex.map(fn, items):
                    pass
        return time.perf_counter() - t0

    t_create = run(create, names)
    t_bind = run(bind, list(enumerate(names)))
    t_running = None
    if wait_running:  # let kwok finish (all pods Running) so that the next mode starts on a quiet server

        def running():
            r = core.list_namespaced_pod(ns, field_selector="status.phase=Running", _preload_content=False)
            return len(json.loads(r.data)["items"]) == n

        t0 = time.perf_counter()
        wait_for(running, 600, interval=0.2, what="all bound pods Running")
        t_running = time.perf_counter() - t0
    return {
        "mode": mode,
        "pods": n,
        "threads": workers,
        "create_per_s": n / t_create,
        "bind_per_s": n / t_bind,
        "create_and_bind_per_s": n / (t_create + t_bind),
        "create_s": t_create,
        "bind_s": t_bind,
        "all_running_after_bind_s": t_running,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pods", type=int, default=1000)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--nodes", type=int, default=8)
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--kubeconfig", help="use an existing cluster instead of starting a control plane")
    ap.add_argument("--fast", action="store_true", help="start the apiserver without APF/inflight limits")
    ap.add_argument("--no-kwok", action="store_true", help="start the control plane without kwok")
    ap.add_argument("--json", help="also write the results as JSON to this file")
    args = ap.parse_args(argv)

    cp = None
    if args.kubeconfig:
        kubeconfig = args.kubeconfig
    else:
        cp = ControlPlane(fast=args.fast, kwok=not args.no_kwok)
        cp.start()
        kubeconfig = str(cp.kubeconfig)
    try:
        cfg = client.Configuration()
        config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
        cfg.connection_pool_maxsize = max(args.threads, 4)
        api = client.ApiClient(cfg)
        core = client.CoreV1Api(api)
        run_id = uuid.uuid4().hex[:6]
        nodes = [f"bench-{run_id}-{i}" for i in range(args.nodes)]
        for nd in nodes:
            create_gpu_node(core, nd, gpus=100000, cpu="100000", memory="100000Gi", pods="100000")
        kwok_running = cp is None or cp.with_kwok
        if kwok_running:
            for nd in nodes:
                wait_for(lambda nd=nd: node_is_ready(core, nd), 60, what=f"{nd} Ready")
        results, namespaces = [], []
        for mode in args.modes.split(","):
            ns = f"bench-{mode}-{run_id}"
            core.create_namespace({"metadata": {"name": ns}})
            r = run_mode(api, mode, ns, args.pods, args.threads, nodes, wait_running=kwok_running)
            results.append(r)
            print(
                f"{mode:14s} threads={r['threads']:<2d} pods={r['pods']}: create {r['create_per_s']:7.1f}/s  "
                f"bind {r['bind_per_s']:7.1f}/s  create+bind {r['create_and_bind_per_s']:7.1f} pods/s"
                + (
                    f"  (all Running {r['all_running_after_bind_s']:.1f}s after the last bind)"
                    if kwok_running
                    else ""
                ),
                flush=True,
            )
            namespaces.append(ns)
        for ns in namespaces:
            core.delete_namespace(ns)
        for nd in nodes:
            core.delete_node(nd)
        if args.json:
            meta = {
                "command": " ".join([os.path.basename(sys.executable), *sys.argv]),
                "cpus": os.cpu_count(),
                "python": platform.python_version(),
                "kubernetes_client": client.__version__ if hasattr(client, "__version__") else None,
            }
            Path(args.json).write_text(json.dumps({"meta": meta, "results": results}, indent=2))
    finally:
        if cp:
            cp.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
