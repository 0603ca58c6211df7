"""Where volcano-py's restart to first bind goes: N nodes and P bound pods, one pending gang, the scheduler started R
times (`--pyspy`: under py-spy, `--volcano`: Volcano too); logs and profiles in the printed workdir.

    .venv/bin/python bench/probe_restart.py [--nodes 2000 --pods 20000 --rounds 3 --pyspy]
"""

import argparse
import os
import signal
import sys
import tempfile
from pathlib import Path

from bench_live import BindWatch, create_namespace, pod_body, raw_client
from bench_peers import cleanup, make_nodes, pod_lines
from controlplane import ControlPlane
from peers_procs import argv_for, bindloop_binary, load, start, volcano_scheduler_binary

REPO = Path(__file__).resolve().parents[1]

ap = argparse.ArgumentParser()
ap.add_argument("--nodes", type=int, default=2000)
ap.add_argument("--pods", type=int, default=20000)
ap.add_argument("--rounds", type=int, default=3)
ap.add_argument("--pyspy", action="store_true")
ap.add_argument("--volcano", action="store_true")
a = ap.parse_args()
bl = bindloop_binary()
wd = Path(tempfile.mkdtemp(prefix="probe-"))
cp = ControlPlane(
    controller_manager=False, kwok=False, fast=True, apiserver_args=("--delete-collection-workers=16",)
).start()
try:
    kube = raw_client(str(cp.kubeconfig), 16)
    from bench_peers import open_queues

    open_queues(kube)
    make_nodes(kube, bl, str(cp.kubeconfig), wd, a.nodes, 8)
    create_namespace(kube, "existing")
    per = -(-a.pods // a.nodes)
    load(
        bl,
        str(cp.kubeconfig),
        [
            {
                "path": "/api/v1/namespaces/existing/pods",
                "body": pod_body(f"e-{i}", node=f"peer-{i // per}", scheduler="default-scheduler", gpus=0),
            }
            for i in range(a.pods)
        ],
        wd,
        "existing",
    )
    contenders = ["volcano-py"] + (["volcano"] if a.volcano else [])
    vbin = volcano_scheduler_binary() if a.volcano else None
    for r in range(a.rounds):
        for c in contenders:
            ns = f"r{r}-{c}"
            create_namespace(kube, ns)
            groups, plain = pod_lines(ns, c, 8, 8)
            load(bl, str(cp.kubeconfig), groups, wd, "pg")
            load(bl, str(cp.kubeconfig), plain, wd, "pods")
            watch = BindWatch(kube, ns)
            argv = argv_for(c, cp, wd, bindloop=bl, volcano=vbin, namespace=ns, workers=64, http2=False)
            if c == "volcano-py":
                argv = argv + ["--log-level", "debug"]
            prefix = None
            if a.pyspy and c == "volcano-py":
                prefix = [
                    str(Path(sys.executable).with_name("py-spy")),
                    "record",
                    "--threads",
                    "--idle",
                    "--format",
                    "raw",
                    "--rate",
                    "200",
                    "-o",
                    str(wd / f"{ns}.pyspy"),
                    "--",
                ]
            proc = start(c, argv, wd / f"{ns}.log", prefix)
            ok = watch.wait(8, 120)
            t = sorted(watch.bound.values())
            print(f"{ns}: first {t[0] - proc.started:.2f}s last {t[-1] - proc.started:.2f}s", flush=True)
            if prefix:
                from peers_procs import target_pid

                pid = target_pid(proc, True)
                os.kill(pid, signal.SIGTERM)
                proc.proc.wait(60)
            proc.stop()
            watch.close()
            cleanup(kube, ns)
    print("workdir", wd)
finally:
    cp.stop()
