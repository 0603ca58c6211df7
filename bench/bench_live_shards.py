#!/usr/bin/env python3
"""`make bench-live-shards`: two scheduler replicas with `--active-shards 2` against one plain replica (no
sharding, no Lease), on the same control plane in the same run, alternating, on the same nodes and the same work.

One control plane per size, as `make bench-peers` starts it (etcd + kube-apiserver, nodes created Ready, nothing
else writing to the cluster). Per round each contender runs once, the order alternating every round:

- its gangs (P one-GPU pods in gangs of G, a PodGroup each) are created first, in a Queue of their own that is
  `Closed`, so nothing is bound while the replicas start;
- the replicas start (`python -m scheduler.cli scheduler`, its defaults; `shards2` adds `--active-shards 2` and a
  Lease name of the run's own) and the bench waits until they are in their steady state: every PodGroup held with
  its `Unschedulable` condition and, for `shards2`, each replica holding one shard's Lease and each shard's
  NodeShard with its nodes in use, all nodes between them; then until the apiserver and etcd are quiet;
- the Queue is opened (one status patch): from then on everything counts.

Measured per run: binds/s of all replicas together from the first bind to the last (a watch in this process),
release to first and to last bind, the apiserver's and etcd's CPU (/proc) per bind from the release until they
are quiet after the last bind (bench_peers' `server_ms_per_bind`) and over the bind window, the replicas' own CPU
per bind, the binds each replica made (the pods' bound-by annotation) with its first and last, gangs left partly
bound, nodes over-committed (tests/e2e/controlplane.py's check, read after the run), the API requests the run sent.

Targets (printed with the medians): `shards2`'s binds/s >= 0.95 x `single`'s and its server CPU per bind <= 1.05 x.

`--with-pinned` adds `shards2-pinned`, information only: `shards2` with every PodGroup created already annotated
with the shard the hash gives it (`scheduling.volcano-py.io/shard`), so the replicas send no pin at a gang's first
bind (one PodGroup PATCH per gang), the rest the same: what the pin costs.

    .venv/bin/python bench/bench_live_shards.py                              # 300 x 2,000, 3 rounds
    .venv/bin/python bench/bench_live_shards.py --size 300x2000 --size 1000x10000 --rounds 3

Results: bench/results/live-shards-<date>.json, and a markdown table on stdout and in the .md beside it.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench_live import BindWatch, create_namespace, pod_body, raw_client
from bench_peers import (
    PG_API,
    SERVER,
    cleanup,
    commit,
    make_nodes,
    partial_gangs,
    request_counts,
    requests_since,
    server_cpu,
    server_per_bind,
    settle,
    uptime,
)
from controlplane import ControlPlane, assert_no_overcommit, wait_for
from peers_procs import REPO, Contender, bindloop_binary, cpu_seconds, free_port, load, peak_rss_mib, start

from scheduler.api.active_shards import SHARD_ANNOTATION, route
from scheduler.cache.kube import Kube, KubeError

CONTENDERS = ("single", "shards2")
PINNED = "shards2-pinned"  # --with-pinned: information only
SHARDS = 2
NODESHARD_API = "/apis/shard.volcano.sh/v1alpha1/nodeshards"
LEASE_API = "/apis/coordination.k8s.io/v1/namespaces/volcano-py-system/leases"
BOUND_BY = "scheduling.volcano-py.io/bound-by"
TARGET_RATE, TARGET_CPU = 0.95, 1.05


def parse_size(text: str) -> tuple[int, int]:
    try:
        nodes, pods = (int(x) for x in text.split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"size {text!r}: want NODESxPODS") from None
    if nodes <= 0 or pods <= 0:
        raise argparse.ArgumentTypeError(f"size {text!r}: want NODESxPODS")
    return nodes, pods


def make_queue(kube: Kube, name: str, state: str) -> None:
    kube.request("POST", f"{PG_API}/queues", body={
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": name},
        "spec": {"weight": 1, "reclaimable": True}})
    set_queue_state(kube, name, state)


def set_queue_state(kube: Kube, name: str, state: str) -> None:
    kube.request("PATCH", f"{PG_API}/queues/{name}/status", body={"status": {"state": state}},
                 content_type="application/merge-patch+json")


def work(ns: str, queue: str, pods: int, gang: int, pinned: bool = False) -> tuple[list[dict], list[dict]]:
    groups = [{"path": f"{PG_API}/namespaces/{ns}/podgroups",
               "body": {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                        "metadata": {"name": f"p{g}", **({"annotations": {
                            SHARD_ANNOTATION: str(route(f"{ns}/p{g}", SHARDS))}} if pinned else {})},
                        "spec": {"minMember": min(gang, pods - g * gang), "queue": queue}}}
              for g in range(-(-pods // gang))]
    plain = [{"path": f"/api/v1/namespaces/{ns}/pods",
              "body": pod_body(f"p{i // gang}-{i % gang}", group=f"p{i // gang}")} for i in range(pods)]
    return groups, plain


def held_podgroups(kube: Kube, ns: str) -> int:
    """PodGroups with a condition written: the replicas have had a session on them (the Closed queue holds them)."""
    groups = kube.request("GET", f"{PG_API}/namespaces/{ns}/podgroups", timeout=120).get("items") or []
    return sum(1 for g in groups if (g.get("status") or {}).get("conditions"))


def _get(kube: Kube, path: str) -> dict:
    try:
        return kube.request("GET", path)
    except KubeError as exc:
        if exc.status == 404:
            return {}
        raise


def shards_steady(kube: Kube, lease: str, identities: set[str], nodes: int) -> bool:
    """Each replica holds one shard's Lease, and each shard's NodeShard has its desired nodes in use, all the
    nodes between them."""
    holders = [(_get(kube, f"{LEASE_API}/{lease}-shard-{i}").get("spec") or {}).get("holderIdentity")
               for i in range(SHARDS)]
    if set(holders) != identities:
        return False
    in_use: list[set[str]] = []
    for i in range(SHARDS):
        obj = _get(kube, f"{NODESHARD_API}/volcano-py-shard-{i}")
        desired = set((obj.get("spec") or {}).get("nodesDesired") or ())
        used = set((obj.get("status") or {}).get("nodesInUse") or ())
        if not desired or used != desired:
            return False
        in_use.append(used)
    return len(set().union(*in_use)) == nodes == sum(map(len, in_use))


def delete_nodeshards(kube: Kube) -> None:
    """NodeShards of an earlier run: the plan is written afresh by the new holder of shard 0."""
    for i in range(SHARDS):
        try:
            kube.request("DELETE", f"{NODESHARD_API}/volcano-py-shard-{i}")
        except KubeError as exc:
            if exc.status != 404:
                raise


def overcommitted(cp: ControlPlane) -> int:
    api = cp.api_client()
    try:
        assert_no_overcommit(api)
        return 0
    except AssertionError as exc:
        return sum(1 for line in str(exc).splitlines() if line.strip().startswith("node "))
    finally:
        api.close()


def per_replica(kube: Kube, ns: str, bound: dict[str, float], released: float) -> dict[str, dict]:
    """Each replica's binds (the pods' bound-by annotation; "-" without one: the plain replica writes none), with
    its first and last bind after the release, as the watch saw them."""
    pods = kube.request("GET", f"/api/v1/namespaces/{ns}/pods", timeout=120).get("items") or []
    times: dict[str, list[float]] = {}
    for p in pods:
        name = p["metadata"]["name"]
        if p["spec"].get("nodeName") and name in bound:
            who = ((p["metadata"].get("annotations") or {}).get(BOUND_BY)) or "-"
            times.setdefault(who, []).append(bound[name])
    out: dict[str, dict] = {}
    for who, ts in sorted(times.items()):
        first, last = min(ts), max(ts)
        out[who] = {"binds": len(ts), "first_s": round(first - released, 3), "last_s": round(last - released, 3),
                    "binds_per_s": round((len(ts) - 1) / (last - first), 1) if last > first else None}
    return out


def run_one(ctx: argparse.Namespace, contender: str, pods: int, tag: str) -> dict:
    kube, cp = ctx.kube, ctx.cp
    ns = f"{tag}-{contender}"
    create_namespace(kube, ns)
    make_queue(kube, ns, "Closed")
    groups, plain = work(ns, ns, pods, ctx.gang, pinned=contender == PINNED)
    sharded = contender.startswith("shards2")
    load(ctx.bindloop, str(cp.kubeconfig), groups, ctx.workdir, f"{ns} podgroups")
    load(ctx.bindloop, str(cp.kubeconfig), plain, ctx.workdir, f"{ns} pods")
    base = [sys.executable, "-m", "scheduler.cli", "scheduler", f"--kubeconfig={cp.kubeconfig}"]
    lease = f"bench-{ns}"
    identities = [f"{ns}-rep{i}" for i in range(SHARDS)] if sharded else [f"{ns}-single"]
    if sharded:
        delete_nodeshards(kube)
    procs: list[Contender] = []
    res: dict = {"contender": contender, "namespace": ns, "pods": len(plain)}
    server = {n: cp.procs[n].popen.pid for n in SERVER}
    watch = None
    try:
        for ident in identities:
            extra = ["--active-shards", str(SHARDS), "--leader-elect-identity", ident,
                     "--leader-elect-lease-name", lease] if sharded else []
            procs.append(start(ident, [*base, f"--listen-address=127.0.0.1:{free_port()}", *extra],
                               ctx.workdir / f"{ident}.log"))
        t0 = time.monotonic()
        wait_for(lambda: held_podgroups(kube, ns) == len(groups), ctx.timeout, interval=0.5,
                 what=f"{ns}: every PodGroup held by the Closed queue")
        if sharded:
            wait_for(lambda: shards_steady(kube, lease, set(identities), ctx.nodes), ctx.timeout, interval=0.5,
                     what=f"{ns}: one shard Lease per replica, every node in use in one shard")
        res["ready_s"] = round(time.monotonic() - t0, 2)
        res["quiet_before_s"], _ = settle(server)
        watch = BindWatch(kube, ns)
        requests0 = request_counts(kube)
        pids = [p.pid for p in procs]
        s0, c0 = server_cpu(server), [cpu_seconds(p) for p in pids]
        released = time.monotonic()
        set_queue_state(kube, ns, "Open")
        if not watch.wait(1, ctx.timeout):
            raise SystemExit(f"{ns}: nothing bound in {ctx.timeout:.0f}s; log tails: {[p.tail() for p in procs]}")
        s_first, c_first = server_cpu(server), [cpu_seconds(p) for p in pids]
        complete = watch.wait(len(plain), ctx.timeout)
        s_last, c_last = server_cpu(server), [cpu_seconds(p) for p in pids]
        settled_after, s_end = settle(server)
        c_end = [cpu_seconds(p) for p in pids]
        res["peak_rss_mib"] = [round(peak_rss_mib(p), 1) for p in pids]
        res["alive_at_end"] = [p.alive() for p in procs]
    finally:
        res["exit"] = [p.stop() for p in procs]
        if watch is not None:
            watch.close()
    times = sorted(watch.bound.values())
    first, last, n = times[0], times[-1], len(times)
    res.update({
        "bound": n, "complete": complete,
        "release_to_first_bind_s": round(first - released, 3), "release_to_last_bind_s": round(last - released, 3),
        "binds_per_s": round((n - 1) / (last - first), 1) if n > 1 and last > first else None,
        "partial_gangs": partial_gangs(watch.bound, pods, ctx.gang),
        "settled_after_last_bind_s": settled_after,
        "server_cpu_s": round(sum(s_end.values()) - sum(s0.values()), 2),
        "sched_cpu_s": round(sum(c_end) - sum(c0), 2),
        "sched_ms_per_bind": round(1000 * (sum(c_end) - sum(c0)) / n, 3),
        "sched_window_ms_per_bind": round(1000 * (sum(c_last) - sum(c_first)) / max(n - 1, 1), 3),
    })
    res.update(server_per_bind(s0, s_first, s_last, s_end, n))
    res["requests"] = requests_since(requests0, request_counts(kube))
    res["replicas"] = per_replica(kube, ns, watch.bound, released)
    res["overcommitted_nodes"] = overcommitted(cp)
    if not complete:
        res["log_tails"] = [p.tail(8) for p in procs]
    print(f"  {tag} {contender}: {n}/{len(plain)} bound, ready {res['ready_s']:.1f}s, first "
          f"{res['release_to_first_bind_s']:.2f}s, last {res['release_to_last_bind_s']:.2f}s after release, "
          f"{res['binds_per_s']} binds/s, server {res['server_ms_per_bind']['total']:.3f} ms/bind (window "
          f"{res['server_window_ms_per_bind']['total']:.3f}), replicas {res['sched_ms_per_bind']:.3f} ms/bind, "
          f"by replica (binds, first s, last s) {[tuple(v.values())[:3] for v in res['replicas'].values()]}, "
          f"partial {res['partial_gangs']}, over-committed {res['overcommitted_nodes']}", flush=True)
    cleanup(kube, ns)
    kube.request("DELETE", f"{PG_API}/queues/{ns}")
    if sharded:
        delete_nodeshards(kube)
    return res


def medians(runs: list[dict]) -> dict:
    out: dict = {}
    for contender in (*CONTENDERS, PINNED):
        mine = [r for r in runs if r["contender"] == contender]
        if not mine:
            continue

        def med(get, mine=mine) -> float:
            values = [v for v in (get(r) for r in mine) if v is not None]
            return round(statistics.median(values), 3) if values else float("nan")

        out[contender] = {
            "runs": len(mine),
            "binds_per_s": med(lambda r: r["binds_per_s"]),
            "server_ms_per_bind": med(lambda r: r["server_ms_per_bind"]["total"]),
            "server_window_ms_per_bind": med(lambda r: r["server_window_ms_per_bind"]["total"]),
            "sched_ms_per_bind": med(lambda r: r["sched_ms_per_bind"]),
            "release_to_first_bind_s": med(lambda r: r["release_to_first_bind_s"]),
            "release_to_last_bind_s": med(lambda r: r["release_to_last_bind_s"]),
            "incomplete": sum(1 for r in mine if not r["complete"]),
            "partial_gangs": sum(r["partial_gangs"] for r in mine),
            "overcommitted_nodes": sum(r["overcommitted_nodes"] for r in mine),
        }
    if "single" in out and "shards2" in out:
        one, two = out["single"], out["shards2"]
        out["rate_ratio"] = round(two["binds_per_s"] / one["binds_per_s"], 3)
        out["server_cpu_ratio"] = round(two["server_ms_per_bind"] / one["server_ms_per_bind"], 3)
        out["rate_target_met"] = out["rate_ratio"] >= TARGET_RATE
        out["server_cpu_target_met"] = out["server_cpu_ratio"] <= TARGET_CPU
    if "single" in out and PINNED in out:
        one, pinned = out["single"], out[PINNED]
        out["pinned_rate_ratio"] = round(pinned["binds_per_s"] / one["binds_per_s"], 3)
        out["pinned_server_cpu_ratio"] = round(pinned["server_ms_per_bind"] / one["server_ms_per_bind"], 3)
    return out


def run_size(ctx: argparse.Namespace, nodes: int, pods: int) -> dict:
    print(f"== {nodes} nodes x {pods} pods, gangs of {ctx.gang}", flush=True)
    ctx.workdir = Path(tempfile.mkdtemp(prefix="bench-live-shards-"))
    cp = ctx.cp = ControlPlane(controller_manager=False, kwok=False, fast=True,
                               apiserver_args=("--delete-collection-workers=16",)).start()
    ctx.nodes = nodes
    t0 = time.monotonic()
    runs = []
    try:
        kube = ctx.kube = raw_client(str(cp.kubeconfig), 16)
        gpus = 8 * max(1, -(-pods // int(nodes * 8 * 0.85)))  # bench_peers' tp fill: ~83% of the GPUs
        make_nodes(kube, ctx.bindloop, str(cp.kubeconfig), ctx.workdir, nodes, gpus)
        for r in range(ctx.rounds):
            order = ctx.contenders if r % 2 == 0 else tuple(reversed(ctx.contenders))
            for i, contender in enumerate(order):
                res = run_one(ctx, contender, pods, f"r{r}")
                res.update({"round": r, "position": i})
                runs.append(res)
    finally:
        cp.stop()
    return {"nodes": nodes, "pods": pods, "gang": ctx.gang, "gpus_per_node": gpus, "rounds": ctx.rounds,
            "runs": runs, "median": medians(runs), "wall_s": round(time.monotonic() - t0, 1)}


def markdown(report: dict) -> str:
    lines = [f"bench-live-shards {report['date']} commit {report['commit']}; load before: {report['uptime_before']}; "
             f"after: {report['uptime_after']}", "",
             "| size | contender | runs | binds/s (median) | server ms/bind | server ms/bind (window) "
             "| replicas ms/bind | release to last bind s | incomplete | partial gangs | over-committed nodes |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    verdicts = []
    for size in report["sizes"]:
        med = size["median"]
        for c in (*CONTENDERS, PINNED):
            if c in med:
                m = med[c]
                lines.append(f"| {size['nodes']}x{size['pods']} | {c} | {m['runs']} | {m['binds_per_s']:.1f} | "
                             f"{m['server_ms_per_bind']:.3f} | {m['server_window_ms_per_bind']:.3f} | "
                             f"{m['sched_ms_per_bind']:.3f} | {m['release_to_last_bind_s']:.2f} | {m['incomplete']} | "
                             f"{m['partial_gangs']} | {m['overcommitted_nodes']} |")
        if "rate_ratio" in med:
            verdicts.append(
                f"- {size['nodes']}x{size['pods']}: binds/s ratio {med['rate_ratio']:.3f} (target >= {TARGET_RATE}: "
                f"{'met' if med['rate_target_met'] else 'NOT met'}); server CPU per bind ratio "
                f"{med['server_cpu_ratio']:.3f} (target <= {TARGET_CPU}: "
                f"{'met' if med['server_cpu_target_met'] else 'NOT met'})")
        if "pinned_rate_ratio" in med:
            verdicts.append(f"- {size['nodes']}x{size['pods']} {PINNED} (information): binds/s ratio "
                            f"{med['pinned_rate_ratio']:.3f}, server CPU per bind ratio "
                            f"{med['pinned_server_cpu_ratio']:.3f}")
    return "\n".join([*lines, "", *verdicts, ""])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", dest="sizes", action="append", type=parse_size, help="NODESxPODS (default 300x2000)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--gang", type=int, default=8)
    ap.add_argument("--timeout", type=float, default=300, help="seconds for readiness, and for every pod bound")
    ap.add_argument("--with-pinned", action="store_true",
                    help=f"also run {PINNED}: the PodGroups created pinned, no pin written (information only)")
    ap.add_argument("--results", default=str(REPO / "bench" / "results"))
    args = ap.parse_args(argv)
    if args.rounds < 1 or args.gang < 1:
        ap.error("--rounds and --gang must be at least 1")
    args.sizes = args.sizes or [(300, 2000)]
    args.contenders = (*CONTENDERS, PINNED) if args.with_pinned else CONTENDERS
    args.bindloop = bindloop_binary()
    results = Path(args.results)
    results.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%d-%H%M")
    report: dict = {"date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"), "commit": commit(),
                    "command": " ".join([os.path.basename(sys.executable), *sys.argv]), "cpus": os.cpu_count(),
                    "uptime_before": uptime(), "sizes": []}
    t0 = time.monotonic()
    for nodes, pods in args.sizes:
        report["sizes"].append(run_size(args, nodes, pods))
    report["uptime_after"] = uptime()
    report["wall_s"] = round(time.monotonic() - t0, 1)
    path = results / f"live-shards-{stamp}.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    md = markdown(report)
    path.with_suffix(".md").write_text(md)
    print(md)
    print(f"results: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
