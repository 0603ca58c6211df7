#!/usr/bin/env python3
"""The scheduler process against the local control plane (tests/e2e/controlplane.py): two measurements.

throughput  N kwok nodes, P pods in gangs of G (one PodGroup each), all created before the scheduler starts;
            pods bound per second from the first bind to the last, as a watch in this process sees them. With
            --ceiling, the same number of pods is first bound by a bare raw-client loop (T threads, no
            scheduling: the bind ceiling of tools/bench_bind_ceiling.py) on the same nodes, for the ratio.
startup     N nodes and P existing pods (created already bound to nodes through spec.nodeName, by another
            scheduler, so they are `existing` load the scheduler must list and account for), plus one pending
            gang of G; time from starting the scheduler process to the gang's first bind.

    .venv/bin/python bench/bench_live.py throughput --nodes 200 --pods 2000 --gang 8 --ceiling
    .venv/bin/python bench/bench_live.py startup --nodes 5000 --pods 50000 --gang 8

Objects are created with the scheduler's own raw JSON client (scheduler/cache/kube.py) from a thread pool.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from controlplane import ControlPlane, wait_for
from kubernetes import client, config

from scheduler.cache.kube import TRANSPORT_ERRORS, Kube, KubeError

REPO = Path(__file__).resolve().parents[1]



GPU = "nvidia.com/gpu"
PG_API = "/apis/scheduling.volcano.sh/v1beta1"


def cpu_seconds(pid: int | None) -> float:
    """user + system CPU seconds a process has used so far (Linux /proc)."""
    if not pid:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class CpuMeter:
    """CPU seconds of some processes between two points, per process name."""

    def __init__(self, pids: dict[str, int | None]):
        self.pids = pids
        self.start = {n: cpu_seconds(p) for n, p in pids.items()}

    def used(self) -> dict[str, float]:
        return {n: round(cpu_seconds(p) - self.start[n], 2) for n, p in self.pids.items()}


def raw_client(kubeconfig: str, pool: int) -> Kube:
    cfg = client.Configuration()
    config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
    cfg.connection_pool_maxsize = pool
    return Kube(client.ApiClient(cfg), request_timeout=60)


def run_all(fn: Callable[[object], None], items: Iterable[object], threads: int, what: str) -> float:
    items = list(items)
    started = time.perf_counter()
    done = 0
    with ThreadPoolExecutor(threads) as ex:
        for _ in ex.map(fn, items):
            done += 1
            if done % 5000 == 0:
                print(f"  {what}: {done}/{len(items)} ({done / (time.perf_counter() - started):.0f}/s)",
                      flush=True)
    took = time.perf_counter() - started
    print(f"  {what}: {len(items)} in {took:.1f}s ({len(items) / took:.0f}/s)", flush=True)
    return took


def node_body(name: str, gpus: int, ready: bool) -> dict:
    res = {"cpu": "128", "memory": "1024Gi", "pods": "250", GPU: str(gpus)}
    status: dict = {"capacity": res, "allocatable": dict(res)}
    if ready:
        status["conditions"] = [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                 "message": "bench", "lastHeartbeatTime": None, "lastTransitionTime": None}]
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "type": "kwok"},
                     "annotations": {"kwok.x-k8s.io/node": "fake"}},
        "spec": {},
        "status": status,
    }


def pod_body(name: str, *, group: str | None = None, node: str | None = None, scheduler: str = "volcano-py",
             gpus: int = 1) -> dict:
    resources: dict = {"requests": {"cpu": "500m", "memory": "1Gi"}}
    if gpus:
        resources["limits"] = {GPU: str(gpus)}
    spec: dict = {"schedulerName": scheduler,
                  "containers": [{"name": "main", "image": "registry.invalid/train:latest",
                                  "resources": resources}]}
    if node:
        spec["nodeName"] = node
    meta: dict = {"name": name, "labels": {"app": "bench"}}
    if group:
        meta["annotations"] = {"scheduling.k8s.io/group-name": group}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def podgroup_body(name: str, size: int) -> dict:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {"name": name},
            "spec": {"minMember": size, "queue": "default"}}


def create_nodes(kube: Kube, names: list[str], gpus: int, ready: bool, threads: int) -> None:
    def make(name: object) -> None:
        kube.request("POST", "/api/v1/nodes", body=node_body(str(name), gpus, ready))

    run_all(make, names, threads, "nodes")


def create_namespace(kube: Kube, name: str) -> None:
    kube.request("POST", "/api/v1/namespaces", body={"apiVersion": "v1", "kind": "Namespace",
                                                     "metadata": {"name": name}})


def create_gangs(kube: Kube, ns: str, gangs: int, size: int, threads: int, prefix: str = "g") -> list[str]:
    groups = [f"{prefix}{i}" for i in range(gangs)]

    def make_group(g: object) -> None:
        kube.request("POST", f"{PG_API}/namespaces/{ns}/podgroups", body=podgroup_body(str(g), size))

    run_all(make_group, groups, threads, "podgroups")
    pods = [(g, f"{g}-{j}") for g in groups for j in range(size)]

    def make_pod(item: object) -> None:
        g, name = item  # type: ignore[misc]
        kube.request("POST", f"/api/v1/namespaces/{ns}/pods", body=pod_body(name, group=g))

    run_all(make_pod, pods, threads, "gang pods")
    return [name for _, name in pods]


class BindWatch:
    """Watches a namespace's pods and records when each one was first seen bound."""

    def __init__(self, kube: Kube, ns: str):
        self.kube, self.ns = kube, ns
        self.bound: dict[str, float] = {}
        self.lock = threading.Condition()
        self.stop = False
        listed = kube.request("GET", f"/api/v1/namespaces/{ns}/pods")
        for p in listed.get("items") or ():
            if p["spec"].get("nodeName"):
                self.bound[p["metadata"]["name"]] = time.monotonic()
        self.rv = listed["metadata"]["resourceVersion"]
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop:
            try:
                for ev in self.kube.stream(f"/api/v1/namespaces/{self.ns}/pods",
                                           {"watch": "1", "resourceVersion": self.rv,
                                            "allowWatchBookmarks": "true", "timeoutSeconds": 60}, 90):
                    obj = ev.get("object") or {}
                    self.rv = obj.get("metadata", {}).get("resourceVersion", self.rv)
                    if ev.get("type") in ("ADDED", "MODIFIED") and obj.get("spec", {}).get("nodeName"):
                        name = obj["metadata"]["name"]
                        with self.lock:
                            self.bound.setdefault(name, time.monotonic())
                            self.lock.notify_all()
                    if self.stop:
                        return
            except TRANSPORT_ERRORS as exc:
                if not self.stop:
                    print(f"  watch restarted: {exc}", flush=True)

    def wait(self, count: int, timeout: float) -> bool:
        with self.lock:
            return self.lock.wait_for(lambda: len(self.bound) >= count, timeout)

    def close(self) -> None:
        self.stop = True
        self.kube.close_streams()


def start_scheduler(kubeconfig: str, log_path: Path, *extra: str) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "scheduler.cli", "scheduler", "--kubeconfig", kubeconfig,
           "--schedule-period", "200ms", *extra]
    with open(log_path, "wb") as log:  # the child keeps its own descriptor of the file
        return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=REPO)


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def ceiling(kube: Kube, ns: str, nodes: list[str], pods: int, threads: int, pids: dict) -> tuple[float, dict]:
    """Bare binds: pre-created pods, bound round-robin by `threads` threads; (pods/s, CPU seconds used)."""
    names = [f"c-{i}" for i in range(pods)]
    run_all(lambda n: kube.request("POST", f"/api/v1/namespaces/{ns}/pods",
                                   body=pod_body(str(n), scheduler="nobody")), names, threads, "ceiling pods")

    def bind(item: object) -> None:
        i, name = item  # type: ignore[misc]
        kube.request("POST", f"/api/v1/namespaces/{ns}/pods/{name}/binding", body={
            "apiVersion": "v1", "kind": "Binding", "metadata": {"name": name, "namespace": ns},
            "target": {"apiVersion": "v1", "kind": "Node", "name": nodes[i % len(nodes)]}})

    meter = CpuMeter({**pids, "client": os.getpid()})
    took = run_all(bind, list(enumerate(names)), threads, "ceiling binds")
    return pods / took, meter.used()


def all_nodes_schedulable(kube: Kube, count: int) -> bool:
    nodes = kube.request("GET", "/api/v1/nodes").get("items") or []
    ok = [n for n in nodes if not (n.get("spec") or {}).get("taints")
          and any(c.get("type") == "Ready" and c.get("status") == "True"
                  for c in (n.get("status") or {}).get("conditions") or ())]
    return len(ok) >= count


def throughput(args: argparse.Namespace, kubeconfig: str, kube: Kube, workdir: Path) -> dict:
    """`--rounds` rounds, each the ceiling then the scheduler, so both see the same machine load."""
    run = uuid.uuid4().hex[:6]
    nodes = [f"tp-{run}-{i}" for i in range(args.nodes)]
    # room for every round's ceiling pods and gangs
    gpus_per_node = max(8, -(-2 * args.pods * args.rounds // args.nodes))
    create_nodes(kube, nodes, gpus_per_node, ready=False, threads=args.threads)
    wait_for(lambda: all_nodes_schedulable(kube, args.nodes), 300, interval=1.0, what="nodes Ready, untainted")
    rounds = [throughput_round(args, kubeconfig, kube, workdir, nodes, f"{run}-{r}") for r in range(args.rounds)]
    summary: dict = {"nodes": args.nodes, "pods": args.pods, "gang": args.gang, "rounds": rounds}
    for key in ("binds_per_s", "ceiling_binds_per_s", "ratio_to_ceiling", "start_to_first_bind_s",
                "end_to_end_per_s"):
        values = sorted(r[key] for r in rounds if key in r)
        if values:
            summary[f"median_{key}"] = values[len(values) // 2]
    return summary


def throughput_round(args: argparse.Namespace, kubeconfig: str, kube: Kube, workdir: Path, nodes: list[str],
                     run: str) -> dict:
    result: dict = {}
    if args.ceiling:
        ns = f"ceiling-{run}"
        create_namespace(kube, ns)
        result["ceiling_binds_per_s"], result["ceiling_cpu_s"] = ceiling(
            kube, ns, nodes, args.pods, args.ceiling_threads, args.pids)
        result["ceiling_threads"] = args.ceiling_threads
        print(f"  bare-client bind ceiling ({args.ceiling_threads} threads): "
              f"{result['ceiling_binds_per_s']:.0f} pods/s", flush=True)
        wait_for(lambda: settled(kube, ns, args.pods), 300, interval=0.5, what="ceiling pods Running")
    ns = f"tp-{run}"
    create_namespace(kube, ns)
    names = create_gangs(kube, ns, args.pods // args.gang, args.gang, args.threads)
    watch = BindWatch(kube, ns)
    log_path = workdir / f"scheduler-throughput-{run}.log"
    started = time.monotonic()
    proc = start_scheduler(kubeconfig, log_path, *args.scheduler_args)
    try:
        watch.wait(1, args.timeout)
        meter = CpuMeter({**args.pids, "scheduler": proc.pid})
        if not watch.wait(len(names), args.timeout):
            raise SystemExit(f"only {len(watch.bound)}/{len(names)} bound; log: {log_path}")
        result["bind_window_cpu_s"] = meter.used()
    finally:
        stop(proc)
        watch.close()
    times = sorted(watch.bound.values())
    first, last = times[0], times[-1]
    result.update({
        "start_to_first_bind_s": first - started,
        "first_to_last_bind_s": last - first,
        "binds_per_s": len(times) / max(last - first, 1e-9),
        "end_to_end_per_s": len(times) / (last - started),
    })
    if "ceiling_binds_per_s" in result:
        result["ratio_to_ceiling"] = result["binds_per_s"] / result["ceiling_binds_per_s"]
    result["scheduler_log_tail"] = log_path.read_text(errors="replace").splitlines()[-3:]
    print(f"  round {run}: scheduler {result['binds_per_s']:.0f} binds/s"
          + (f", ceiling {result['ceiling_binds_per_s']:.0f}/s, ratio {result['ratio_to_ceiling']:.2f}"
             if "ceiling_binds_per_s" in result else ""), flush=True)
    return result


def settled(kube: Kube, ns: str, count: int) -> bool:
    pods = kube.request("GET", f"/api/v1/namespaces/{ns}/pods").get("items") or []
    return sum(1 for p in pods if (p.get("status") or {}).get("phase") == "Running") >= count


def startup(args: argparse.Namespace, kubeconfig: str, kube: Kube, workdir: Path) -> dict:
    run = uuid.uuid4().hex[:6]
    nodes = [f"st-{run}-{i}" for i in range(args.nodes)]
    create_nodes(kube, nodes, 8, ready=True, threads=args.threads)
    ns_existing = f"existing-{run}"
    create_namespace(kube, ns_existing)
    per_node = -(-args.pods // args.nodes)

    def make_existing(i: object) -> None:
        n = int(i)  # type: ignore[call-overload]
        body = pod_body(f"e-{n}", node=nodes[n // per_node], scheduler="default-scheduler", gpus=0)
        try:
            kube.request("POST", f"/api/v1/namespaces/{ns_existing}/pods", body=body)
        except KubeError as exc:
            if exc.status != 409:
                raise

    run_all(make_existing, range(args.pods), args.threads, "existing bound pods")
    ns = f"st-{run}"
    create_namespace(kube, ns)
    names = create_gangs(kube, ns, 1, args.gang, args.threads, prefix="new")
    watch = BindWatch(kube, ns)
    log_path = workdir / "scheduler-startup.log"
    started = time.monotonic()
    proc = start_scheduler(kubeconfig, log_path, *args.scheduler_args)
    try:
        if not watch.wait(1, args.timeout):
            raise SystemExit(f"nothing bound; log: {log_path}")
        first = min(watch.bound.values())
        watch.wait(len(names), args.timeout)
    finally:
        stop(proc)
        watch.close()
    return {
        "nodes": args.nodes, "existing_pods": args.pods, "gang": args.gang,
        "start_to_first_bind_s": first - started,
        "start_to_gang_bound_s": max(watch.bound.values()) - started,
        "scheduler_log": log_path.read_text(errors="replace").splitlines()[-8:],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=("throughput", "startup"))
    ap.add_argument("--nodes", type=int, default=200)
    ap.add_argument("--pods", type=int, default=2000)
    ap.add_argument("--gang", type=int, default=8)
    ap.add_argument("--threads", type=int, default=16, help="client threads creating the objects")
    ap.add_argument("--ceiling", action="store_true", help="throughput: measure the bare bind ceiling first")
    ap.add_argument("--ceiling-threads", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=1, help="throughput: ceiling + scheduler rounds (median)")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--kubeconfig", help="an existing cluster instead of a fresh local control plane")
    ap.add_argument("--json", help="write the result as JSON to this file")
    ap.add_argument("--scheduler-arg", dest="scheduler_args", action="append", default=[],
                    help="extra argument for the scheduler process (repeatable)")
    args = ap.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="bench-live-"))
    cp = None
    if args.kubeconfig:
        kubeconfig = args.kubeconfig
    elif args.mode == "throughput":  # as the e2e tests and the ceiling tool: kwok and kcm running
        cp = ControlPlane().start()
        kubeconfig = str(cp.kubeconfig)
    else:  # 5,000 nodes: no kwok heartbeats; nodes are created Ready
        cp = ControlPlane(controller_manager=False, kwok=False, fast=True).start()
        kubeconfig = str(cp.kubeconfig)
    args.pids = {}
    if cp:
        args.pids = {name: p.popen.pid for name, p in cp.procs.items() if name in ("kube-apiserver", "etcd", "kwok")}
    try:
        kube = raw_client(kubeconfig, max(args.threads, args.ceiling_threads) + 4)
        result = (throughput if args.mode == "throughput" else startup)(args, kubeconfig, kube, workdir)
        result["command"] = " ".join([os.path.basename(sys.executable), *sys.argv])
        result["cpus"] = os.cpu_count()
        print(json.dumps(result, indent=2))
        if args.json:
            Path(args.json).write_text(json.dumps(result, indent=2))
    finally:
        if cp:
            cp.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
