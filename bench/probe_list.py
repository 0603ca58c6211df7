"""How fast the apiserver serves P pods: the paged consistent list against resourceVersion=0 (the watch cache),
the decode included, the collector off.

    .venv/bin/python bench/probe_list.py 2000 20000
"""

import gc
import sys
import tempfile
import time
from pathlib import Path

from bench_live import create_namespace, pod_body, raw_client
from bench_peers import make_nodes
from controlplane import ControlPlane
from peers_procs import bindloop_binary, load

from scheduler.cache.kube import loads

gc.disable()

REPO = Path(__file__).resolve().parents[1]


nodes, pods = int(sys.argv[1]), int(sys.argv[2])
bl = bindloop_binary()
wd = Path(tempfile.mkdtemp(prefix="listprobe-"))
cp = ControlPlane(
    controller_manager=False, kwok=False, fast=True, apiserver_args=("--delete-collection-workers=16",)
).start()
try:
    kube = raw_client(str(cp.kubeconfig), 16)
    make_nodes(kube, bl, str(cp.kubeconfig), wd, nodes, 8)
    create_namespace(kube, "existing")
    per = -(-pods // nodes)
    load(
        bl,
        str(cp.kubeconfig),
        [
            {
                "path": "/api/v1/namespaces/existing/pods",
                "body": pod_body(f"e-{i}", node=f"peer-{i // per}", scheduler="default-scheduler", gpus=0),
            }
            for i in range(pods)
        ],
        wd,
        "existing",
    )

    def paged(extra):
        t = time.perf_counter()
        token = None
        n = 0
        nbytes = 0
        while True:
            q = {"limit": 1000, **extra, **({"continue": token} if token else {})}
            data = kube.request_bytes("GET", "/api/v1/pods", query=q, timeout=120)
            nbytes += len(data)
            page = loads(data)
            n += len(page["items"])
            token = page["metadata"].get("continue")
            if not token:
                break
        return time.perf_counter() - t, n, nbytes

    def whole(extra):
        t = time.perf_counter()
        data = kube.request_bytes("GET", "/api/v1/pods", query=extra, timeout=120)
        fetched = time.perf_counter() - t
        page = loads(data)
        return time.perf_counter() - t, len(page["items"]), len(data), fetched

    for _ in range(3):
        print("paged limit=1000      ", paged({}))
        print("paged limit=1000 rv=0 ", paged({"resourceVersion": "0"}))
        print("whole rv=0            ", whole({"resourceVersion": "0"}))
        print("whole (consistent)    ", whole({}))
finally:
    cp.stop()
