#!/usr/bin/env python3
"""`make bench-peers` (issue 20): volcano-py against Volcano's scheduler and kube-scheduler, with the apiserver's
bind ceiling (a Go client-go loop, tools/k8s/bindloop) as the yardstick, all in one run.

One control plane per size (etcd + kube-apiserver, no kube-controller-manager, no kwok: nodes are created Ready
and nothing else writes to the cluster). Per round the contenders run one after another, in an order rotated
every round, each on the same nodes and the same pods, created fresh before it starts and deleted after it stops:

throughput  N nodes, P one-GPU pods (gangs of G with a PodGroup each for volcano-py and Volcano; plain pods for
            kube-scheduler, which has no gangs here; plain pods bound by the ceiling), all created before the
            process starts. Measured from process start: first and last bind (as a watch in this process sees
            them), binds/s from first to last, scheduler CPU seconds (utime+stime, /proc) per 1,000 binds over the
            whole run and over the bind window, peak RSS (VmHWM), gangs left partly bound when it stopped.
restart     N nodes and P existing pods already bound (through spec.nodeName), one pending gang of G (one plain
            pod for kube-scheduler): seconds from process start to the first bind and to the whole gang bound.
churn       N nodes; pods arriving and completing, nodes coming and going and a second scheduler binding, at 50%
            and 120% of kube-scheduler's sustained binds/s (`--size churn:NODESxSECONDS`; bench/peers_churn.py).

Server CPU per bind (throughput sizes, every contender, the ceiling included): the apiserver's and etcd's CPU
(/proc) per bind, over the whole run (from the process's start until the server has been quiet for 2 s after the
last bind, so the events and PodGroup writes a scheduler sends after its binds count) and over the bind window;
the contender's own CPU + the server's per bind; each as a ratio to the ceiling's. Then, read once the server is
quiet: the API requests the run sent (apiserver_request_total), how many bound pods have a `Scheduled` event and
how many PodGroups are Running. `--py-off events` adds volcano-py with its events switched off
(bench/py_variant.py), as information: never a target.

    .venv/bin/python bench/bench_peers.py                       # the full run (all five sizes, 3 rounds)
    .venv/bin/python bench/bench_peers.py --size tp:300x2000 --rounds 1 --only volcano-py --only ceiling
    .venv/bin/python bench/bench_peers.py --size tp:300x2000 --only volcano-py --only ceiling --py-off events

Results: bench/results/peers-<date>.json and a markdown table (bench/bench_peers_report.py) on stdout and in
bench/results/peers-<date>.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_live import BindWatch, create_namespace, node_body, pod_body, podgroup_body, raw_client
from bench_peers_report import markdown, summarise
from controlplane import ControlPlane, wait_for
from peers_procs import (
    CEILING,
    CEILINGS,
    GANG_SCHEDULERS,
    PY_OFF,
    REPO,
    SCHEDULER_NAME,
    SCHEDULERS,
    argv_for,
    bindloop_binary,
    cpu_seconds,
    load,
    peak_rss_mib,
    start,
    target_pid,
    volcano_scheduler_binary,
)

from scheduler.cache.kube import Kube

PG_API = "/apis/scheduling.volcano.sh/v1beta1"
DEFAULT_SIZES = ("tp:300x2000", "tp:1000x10000", "restart:2000x20000", "restart:5000x50000", "restart:10000x100000")
SIZE_FORMS = "tp:NODESxPODS, restart:NODESxPODS or churn:NODESxSECONDS (bench/peers_churn.py)"
WARMUP_S = 5  # churn: the arrival window must be longer than peers_churn's warm-up


def parse_size(text: str) -> tuple[str, int, int]:
    try:
        kind, dims = text.split(":")
        nodes, pods = (int(x) for x in dims.split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"size {text!r}: want {SIZE_FORMS}") from None
    if kind not in ("tp", "restart", "churn") or nodes <= 0 or pods < 0 or (kind == "churn" and pods <= WARMUP_S):
        raise argparse.ArgumentTypeError(f"size {text!r}: want {SIZE_FORMS}")
    return kind, nodes, pods


def open_queues(kube: Kube) -> None:
    """The root and default queues, Open. Both schedulers create them if missing, but their state is written by
    the queue controllers, which are not running here, and Volcano's proportion plugin only admits jobs of an
    Open queue (pkg/scheduler/plugins/proportion/proportion.go); so the bench opens them itself."""
    for name, reclaimable in (("root", False), ("default", True)):
        kube.request("POST", f"{PG_API}/queues", body={
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": name},
            "spec": {"weight": 1, "reclaimable": reclaimable}})
        kube.request("PATCH", f"{PG_API}/queues/{name}/status", body={"status": {"state": "Open"}},
                     content_type="application/merge-patch+json")


def make_nodes(kube: Kube, bindloop: str, kubeconfig: str, workdir: Path, nodes: int, gpus: int) -> None:
    lines = []
    for i in range(nodes):
        body = node_body(f"peer-{i}", gpus, ready=True)
        body["metadata"]["labels"]["bench"] = "peers"
        lines.append({"path": "/api/v1/nodes", "body": body})
    load(bindloop, kubeconfig, lines, workdir, "nodes")
    wait_for(lambda: node_count(kube) >= nodes, 120, interval=0.5, what="nodes listed")


def node_count(kube: Kube) -> int:
    return len(kube.request("GET", "/api/v1/nodes", query={"labelSelector": "bench=peers"}).get("items") or [])


def pod_lines(ns: str, contender: str, pods: int, gang: int) -> tuple[list[dict], list[dict]]:
    """(PodGroups, pods) for one contender: gangs of `gang` for the gang schedulers, plain pods otherwise."""
    name = SCHEDULER_NAME[contender]
    path = f"/api/v1/namespaces/{ns}/pods"
    if contender not in GANG_SCHEDULERS:
        return [], [{"path": path, "body": pod_body(f"p{i // gang}-{i % gang}", scheduler=name)} for i in range(pods)]
    groups = [{"path": f"{PG_API}/namespaces/{ns}/podgroups", "body": podgroup_body(f"p{g}", gang)}
              for g in range(-(-pods // gang))]
    return groups, [{"path": path, "body": pod_body(f"p{i // gang}-{i % gang}", group=f"p{i // gang}", scheduler=name)}
                    for i in range(pods)]


def cleanup(kube: Kube, ns: str) -> None:
    """Delete the run's pods at once (no kubelet here to finish a graceful delete) and its PodGroups."""
    kube.request("DELETE", f"/api/v1/namespaces/{ns}/pods", query={"gracePeriodSeconds": "0"}, timeout=300)
    kube.request("DELETE", f"{PG_API}/namespaces/{ns}/podgroups", timeout=300)
    wait_for(lambda: not kube.request("GET", f"/api/v1/namespaces/{ns}/pods", query={"limit": "1"}).get("items"),
             300, interval=0.2, what=f"pods of {ns} gone")


SERVER = ("kube-apiserver", "etcd")
QUIET_CORES = 0.1  # quiet: the apiserver and etcd together under this over QUIET_WINDOW_S, QUIET_WINDOWS times in a
QUIET_WINDOW_S = 1.0  # row (a scheduler still sending events keeps them above it, unless the machine starves
QUIET_WINDOWS = 2  # them: the count of bound pods with a Scheduled event in the results would show it)


def server_cpu(server: dict[str, int]) -> dict[str, float]:
    return {name: cpu_seconds(pid) for name, pid in server.items()}


def settle(server: dict[str, int], deadline_s: float = 120.0) -> tuple[float, dict[str, float]]:
    """Wait until the apiserver and etcd are quiet, or `deadline_s`: (seconds from now to the start of the
    quiet, their CPU seconds then). Read from /proc only: nothing of the bench talks to the server meanwhile."""
    t0 = time.monotonic()
    samples = [(t0, server_cpu(server))]
    while True:
        time.sleep(QUIET_WINDOW_S)  # a sampling interval of /proc, not a wait for an event
        samples.append((time.monotonic(), server_cpu(server)))
        recent = samples[-QUIET_WINDOWS - 1:]
        quiet = len(recent) == QUIET_WINDOWS + 1 and all(
            sum(b[1].values()) - sum(a[1].values()) < QUIET_CORES * (b[0] - a[0])
            for a, b in zip(recent, recent[1:], strict=False))
        if quiet or samples[-1][0] - t0 > deadline_s:
            start = recent[0] if quiet else samples[-1]
            return round(start[0] - t0, 2), start[1]


def server_per_bind(s0: dict[str, float], s_first: dict[str, float], s_last: dict[str, float],
                    s_end: dict[str, float], n: int) -> dict[str, dict[str, float]]:
    """The apiserver's, etcd's and their total CPU ms per bind: over the whole run (start to the server quiet
    after the last bind) and over the bind window (first to last bind)."""
    out: dict[str, dict[str, float]] = {}
    for key, a, b, count in (("server_ms_per_bind", s0, s_end, n),
                             ("server_window_ms_per_bind", s_first, s_last, max(n - 1, 1))):
        part = {name: round(1000 * (b[name] - a[name]) / count, 3) for name in a}
        part["total"] = round(sum(1000 * (b[name] - a[name]) / count for name in a), 3)
        out[key] = part
    return out


def request_counts(kube: Kube) -> dict[str, float]:
    """The apiserver's requests so far by "VERB resource[/subresource] code" (apiserver_request_total)."""
    text = kube.request_bytes("GET", "/metrics", timeout=60).decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        labels_text, _, count = line[len("apiserver_request_total{"):].rpartition("} ")
        labels = {k: v.strip('"') for k, v in (part.split("=", 1) for part in labels_text.split('",') if "=" in part)}
        sub = labels.get("subresource")
        key = f"{labels.get('verb')} {labels.get('resource')}{'/' + sub if sub else ''} {labels.get('code')}"
        out[key] = out.get(key, 0.0) + float(count)
    return out


def requests_since(before: dict[str, float], after: dict[str, float]) -> dict[str, int]:
    """The requests the run sent (the bench's own metrics reads included), most first."""
    diff = {k: int(v - before.get(k, 0.0)) for k, v in after.items() if v - before.get(k, 0.0) >= 1}
    return dict(sorted(diff.items(), key=lambda kv: -kv[1]))


def what_users_see(kube: Kube, ns: str, contender: str, bound: set[str], gang: int) -> dict:
    """After the run: how many bound pods have a `Scheduled` event, and how many PodGroups reached Running (the
    gang schedulers). Read once the server was quiet, so not counted in any CPU figure."""
    if contender == CEILING:
        return {}
    events = kube.request("GET", f"/api/v1/namespaces/{ns}/events", query={"fieldSelector": "reason=Scheduled"},
                          timeout=120).get("items") or []
    named = {(e.get("involvedObject") or {}).get("name") for e in events}
    out: dict = {"scheduled_events": len(named & bound), "event_objects": len(events)}
    if contender in GANG_SCHEDULERS:
        groups = kube.request("GET", f"{PG_API}/namespaces/{ns}/podgroups", timeout=120).get("items") or []
        out["podgroups"] = len(groups)
        out["podgroups_running"] = sum(1 for g in groups if (g.get("status") or {}).get("phase") == "Running")
    return out


def partial_gangs(bound: dict[str, float], pods: int, gang: int) -> int:
    counts: dict[str, int] = {}
    for name in bound:
        group = name.rsplit("-", 1)[0]
        counts[group] = counts.get(group, 0) + 1
    sizes = {f"p{g}": min(gang, pods - g * gang) for g in range(-(-pods // gang))}
    return sum(1 for g, n in counts.items() if 0 < n < sizes.get(g, gang))


def run_one(ctx: argparse.Namespace, contender: str, kind: str, pods: int, tag: str, profile: Path | None) -> dict:
    """Create the pods, start the contender, measure until every pod is bound (or the timeout), stop, clean up."""
    kube, cp = ctx.kube, ctx.cp
    run_name, _, off = contender.partition(":")  # volcano-py-off:SWITCHES is volcano-py with SWITCHES off
    ns = f"{tag}-{contender}".replace(":", "-").replace(",", "-")
    create_namespace(kube, ns)
    groups, plain = pod_lines(ns, run_name, pods, ctx.gang)
    if groups:
        load(ctx.bindloop, str(cp.kubeconfig), groups, ctx.workdir, f"{contender} podgroups")
    load(ctx.bindloop, str(cp.kubeconfig), plain, ctx.workdir, f"{contender} pods")
    watch = BindWatch(kube, ns)
    server = {n: cp.procs[n].popen.pid for n in SERVER}
    requests0 = request_counts(kube)
    s0 = server_cpu(server)
    argv = argv_for(run_name, cp, ctx.workdir, bindloop=ctx.bindloop, volcano=ctx.volcano, namespace=ns,
                    workers=ctx.ceiling_workers, http2=ctx.ceiling_http2, py_off=off)
    prefix = None
    if profile and contender == "volcano-py":
        # --gil: only samples of the thread holding the GIL, so the shares are of the Python CPU time, not of
        # threads waiting on the apiserver; --nonblocking: do not pause the process at each sample
        prefix = [str(Path(sys.executable).with_name("py-spy")), "record", "--threads", "--gil", "--nonblocking",
                  "--format", "raw", "--rate", "100", "-o", str(profile), "--"]
    c = start(contender, argv, ctx.workdir / f"{ns}.log", prefix)
    pid = target_pid(c, prefix is not None)
    res: dict = {"contender": contender, "namespace": ns, "pods": len(plain)}
    if off:
        res["off"] = off
    try:
        if not watch.wait(1, ctx.timeout):
            raise SystemExit(f"{contender}: nothing bound in {ctx.timeout:.0f}s; log tail: {c.tail()}")
        cpu_first, s_first = cpu_seconds(pid), server_cpu(server)
        complete = watch.wait(len(plain), ctx.timeout)
        cpu_last, s_last, rss = cpu_seconds(pid), server_cpu(server), peak_rss_mib(pid)
        res["server_cpu_s"] = round(sum(s_last.values()) - sum(s0.values()), 2)
        if contender in CEILINGS:
            cpu_end = c.cpu_at_exit(60)
            cpu_last = cpu_first = cpu_end if cpu_end is not None else 0.0
        # The writes a scheduler sends after its last bind (events, PodGroup status) belong to its binds: the
        # whole run ends when the server has gone quiet, before anything of the bench's reads the results.
        settled_after, s_end = settle(server)
        cpu_end = cpu_seconds(pid) if contender not in CEILINGS else cpu_last
    finally:
        if prefix and pid != c.pid and c.alive():  # py-spy writes its profile once the process it records exits
            os.kill(pid, signal.SIGTERM)
            c.proc.wait(60)
        rc = c.stop()
        watch.close()
    times = sorted(watch.bound.values())
    first, last, n = times[0], times[-1], len(times)
    res.update({
        "bound": n, "complete": complete,
        "start_to_first_bind_s": round(first - c.started, 3),
        "start_to_last_bind_s": round(last - c.started, 3),
        "binds_per_s": round((n - 1) / (last - first), 1) if n > 1 and last > first else None,
        "partial_gangs": partial_gangs(watch.bound, pods, ctx.gang) if run_name in GANG_SCHEDULERS else None,
    })
    if contender in CEILINGS:
        out = c.log.read_text().strip().splitlines()
        res["bindloop"] = json.loads(out[-1]) if out and out[-1].startswith("{") else {"exit": rc, "log": out[-5:]}
        res["cpu_s"] = round(cpu_last, 2)  # the loop's own CPU (its list included), for the total per bind
    else:
        res.update({"cpu_s": round(cpu_last, 2), "cpu_window_s": round(cpu_last - cpu_first, 2),
                    "cpu_s_per_1000_binds": round(1000 * cpu_last / n, 3),
                    "cpu_window_s_per_1000_binds": round(1000 * (cpu_last - cpu_first) / max(n - 1, 1), 3),
                    "peak_rss_mib": round(rss, 1), "exit": rc})
    if not complete:
        res["log_tail"] = c.tail(8)
    res["server_cpu_s_per_1000_binds"] = round(1000 * res["server_cpu_s"] / n, 3)
    res.update(server_per_bind(s0, s_first, s_last, s_end, n))
    res["settled_after_last_bind_s"] = settled_after
    window = last - first
    sched_window = (cpu_last - cpu_first) if contender not in CEILINGS else 0.0
    # the total per bind: the process's CPU (the bind loop's whole run: it does nothing but bind and write) + the
    # server's
    res["total_ms_per_bind"] = round(1000 * ((cpu_end if contender not in CEILINGS else cpu_last)
                                             + sum(s_end.values()) - sum(s0.values())) / n, 3)
    if contender not in CEILINGS:
        res["total_window_ms_per_bind"] = round(1000 * (sched_window + sum(s_last.values()) - sum(s_first.values()))
                                                / max(n - 1, 1), 3)
        if window > 0:
            res["window_cores"] = round((sched_window + sum(s_last.values()) - sum(s_first.values())) / window, 2)
    res["requests"] = requests_since(requests0, request_counts(kube))
    res.update(what_users_see(kube, ns, run_name, set(watch.bound), ctx.gang))
    print(f"  {tag} {contender}: {n}/{len(plain)} bound, first {res['start_to_first_bind_s']:.2f}s, "
          f"last {res['start_to_last_bind_s']:.2f}s, {res['binds_per_s']} binds/s"
          + (f", CPU {res['cpu_s']}s, RSS {res['peak_rss_mib']:.0f} MiB" if "peak_rss_mib" in res else "")
          + f", server {res['server_ms_per_bind']['total']:.3f} ms/bind (window "
          f"{res['server_window_ms_per_bind']['total']:.3f}), settled {settled_after:.1f}s after"
          + (f", Scheduled events {res['scheduled_events']}/{n}" if "scheduled_events" in res else ""), flush=True)
    t0 = time.monotonic()
    cleanup(kube, ns)
    res["cleanup_s"] = round(time.monotonic() - t0, 1)
    return res


def run_size(ctx: argparse.Namespace, kind: str, nodes: int, pods: int) -> dict:
    print(f"== {kind} {nodes} nodes x {pods} pods", flush=True)
    workdir = Path(tempfile.mkdtemp(prefix=f"bench-peers-{kind}-"))
    cp = ControlPlane(controller_manager=False, kwok=False, fast=True,
                      apiserver_args=("--delete-collection-workers=16",)).start()
    ctx.cp, ctx.workdir = cp, workdir
    t0 = time.monotonic()
    try:
        kube = ctx.kube = raw_client(str(cp.kubeconfig), 16)
        open_queues(kube)
        if kind == "tp":  # room for every pod at about the fill of 2,000 pods on 300 nodes of 8
            gpus = 8 * max(1, -(-pods // int(nodes * 8 * 0.85)))
            make_nodes(kube, ctx.bindloop, str(cp.kubeconfig), workdir, nodes, gpus)
            contenders = [c for c in SCHEDULERS if c in ctx.only] + [f"{PY_OFF}:{v}" for v in ctx.py_off]
            contenders += [c for c in CEILINGS if c in ctx.only]
            measured = pods
        else:
            make_nodes(kube, ctx.bindloop, str(cp.kubeconfig), workdir, nodes, 8)
            create_namespace(kube, "existing")
            per_node = -(-pods // nodes)
            load(ctx.bindloop, str(cp.kubeconfig), [
                {"path": "/api/v1/namespaces/existing/pods",
                 "body": pod_body(f"e-{i}", node=f"peer-{i // per_node}", scheduler="default-scheduler", gpus=0)}
                for i in range(pods)], workdir, "existing bound pods")
            contenders = [c for c in SCHEDULERS if c in ctx.only]
        runs = []
        for r in range(ctx.rounds):
            order = contenders[r % len(contenders):] + contenders[:r % len(contenders)]
            for i, contender in enumerate(order):
                count = measured if kind == "tp" else (ctx.gang if contender in GANG_SCHEDULERS else 1)
                res = run_one(ctx, contender, kind, count, f"r{r}", None)
                res.update({"round": r, "position": i})
                runs.append(res)
        profile = None
        if ctx.profile and kind == "tp" and f"{nodes}x{pods}" == ctx.profile_size and "volcano-py" in contenders:
            profile = ctx.results / f"peers-{ctx.stamp}-volcano-py-{nodes}x{pods}.pyspy.txt"
            prof = run_one(ctx, "volcano-py", kind, measured, "prof", profile)
            prof["profile"] = str(profile.relative_to(REPO))
    finally:
        cp.stop()
    out = {"kind": kind, "nodes": nodes, "pods": pods, "gang": ctx.gang, "rounds": ctx.rounds, "runs": runs,
           "wall_s": round(time.monotonic() - t0, 1)}
    if profile:
        out["profile_run"] = prof
    out["median"] = summarise(runs)
    return out


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def commit() -> str:
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO)
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True,
                           cwd=REPO).stdout.strip()
    return out.stdout.strip() + ("-dirty" if dirty else "")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", dest="sizes", action="append", type=parse_size,
                    help=f"{SIZE_FORMS} (repeatable; default {' '.join(DEFAULT_SIZES)})")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--gang", type=int, default=8)
    ap.add_argument("--only", action="append", choices=(*SCHEDULERS, *CEILINGS),
                    help="run only these contenders (repeatable; default all)")
    ap.add_argument("--py-off", action="append", default=[], metavar="SWITCHES",
                    help=f"also run {PY_OFF}:SWITCHES, volcano-py with these writes off (bench/py_variant.py: "
                         "events, podgroup-status, protobuf; comma-separated; repeatable), information only")
    ap.add_argument("--ceiling-workers", type=int, default=64, help="goroutines of the Go bind loop")
    ap.add_argument("--ceiling-http2", action="store_true",
                    help="the bind loop on one HTTP/2 connection (client-go's default) instead of HTTP/1.1 over many")
    ap.add_argument("--timeout", type=float, default=300, help="seconds a contender may take to bind everything")
    ap.add_argument("--profile", action="store_true",
                    help="one more volcano-py run at --profile-size under py-spy (not counted in the medians)")
    ap.add_argument("--profile-size", default="1000x10000")
    ap.add_argument("--churn-period", type=float, default=1.0,
                    help="churn sizes: volcano-py's --schedule-period in seconds (printed with the results)")
    ap.add_argument("--churn-arrival", type=float, default=0.1,
                    help="churn sizes: volcano-py's --schedule-on-arrival in seconds (0: off; printed)")
    ap.add_argument("--churn-pipeline-apply", action="store_true",
                    help="churn sizes: volcano-py with --pipeline-apply (printed)")
    ap.add_argument("--churn-bind-workers", type=int, default=0,
                    help="churn sizes: volcano-py's --bind-workers (0: its default; printed)")
    ap.add_argument("--churn-rate", type=float, default=0.0,
                    help="churn sizes: take this as kube-scheduler's sustained binds/s instead of measuring it")
    ap.add_argument("--churn-podgroups-for-all", action="store_true",
                    help="churn sizes: every contender's gangs come with a PodGroup, created and deleted with them "
                         "(kube-scheduler ignores it; the apiserver pays for the objects as under Volcano's)")
    ap.add_argument("--churn-load", dest="churn_loads", action="append", type=float, default=[],
                    help="churn sizes: offer only this fraction of the sustained rate (repeat; default 0.5 and 1.2)")
    ap.add_argument("--results", default=str(REPO / "bench" / "results"))
    args = ap.parse_args(argv)
    if args.rounds < 1 or args.gang < 1:
        ap.error("--rounds and --gang must be at least 1")
    args.sizes = args.sizes or [parse_size(s) for s in DEFAULT_SIZES]
    args.only = set(args.only or (*SCHEDULERS, *CEILINGS))
    args.bindloop = bindloop_binary()
    args.volcano = volcano_scheduler_binary() if "volcano" in args.only else ""
    args.results = Path(args.results)
    args.results.mkdir(parents=True, exist_ok=True)
    args.stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%d-%H%M")
    report: dict = {"date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"), "commit": commit(),
                    "command": " ".join([os.path.basename(sys.executable), *sys.argv]), "cpus": os.cpu_count(),
                    "uptime_before": uptime(), "sizes": []}
    t0 = time.monotonic()
    for kind, nodes, pods in args.sizes:
        if kind == "churn":  # its own module and report section (bench/peers_churn.py)
            import peers_churn

            args.churngen = peers_churn.churngen_binary()
            report.setdefault("churn", []).append(peers_churn.run_churn_size(args, nodes, pods))
            continue
        report["sizes"].append(run_size(args, kind, nodes, pods))
    report["uptime_after"] = uptime()
    report["wall_s"] = round(time.monotonic() - t0, 1)
    path = args.results / f"peers-{args.stamp}.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    md = markdown(report)
    if report.get("churn"):
        import peers_churn

        md += "\n".join(line for size in report["churn"] for line in [*peers_churn.markdown(size), ""])
    path.with_suffix(".md").write_text(md)
    print(md)
    print(f"results: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
