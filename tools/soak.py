#!/usr/bin/env python3
"""`make soak`: churn on the test control plane for a long time, watching the scheduler's and the controllers'
memory and threads, and the invariants (issue 22).

The control plane of the e2e suite (etcd, kube-apiserver, kube-controller-manager, kwok) with `volcano-py
scheduler` and `volcano-py controllers` as processes. Churn, at a rate a 2-core machine sustains:

- Volcano Jobs arrive every --job-period seconds (1-6 one-GPU pods, minAvailable = replicas); each pod
  Succeeds (kwok) once it has run for the job's duration (10-40 s), and the controllers delete the finished Job
  after its ttlSecondsAfterFinished (its PodGroup and pods go with it);
- every --node-period seconds the oldest node is cordoned, deleted once no pod runs on it, and a new node joins.

Every --sample-period seconds: RSS and thread count of both processes (/proc/<pid>/status). Every
--check-period seconds: no partial gang (a PodGroup with some but fewer than minMember pods bound, none of them
finished or being deleted, at two checks in a row), no node over-committed. At the end: a summary, and exit 1
on a violation, a process that died, RSS that grew after the warm-up by more than --max-rss-growth-mib (median
of the last 5 samples against the median of the first 5 after warm-up), or a median thread count in the second
half of the post-warm-up samples more than 2 above that of the first half.
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from controlplane import (
    COMPLETE_ANNOTATION,
    GPU_RESOURCE,
    ControlPlane,
    assert_no_overcommit,
    create_gpu_node,
    node_is_ready,
    wait_for,
)
from processes import Process

NAMESPACE = "soak"
BATCH = "batch.volcano.sh"
GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
DURATION_LABEL = "volcano-py.soak/duration"
NODE_LABEL = "volcano-py.soak/node"


@dataclass
class Sample:
    t: float
    rss_mib: float
    threads: int


@dataclass
class Stats:
    jobs: int = 0
    pods_completed: int = 0
    nodes_added: int = 0
    nodes_removed: int = 0
    checks: int = 0
    violations: list[str] = field(default_factory=list)
    samples: dict[str, list[Sample]] = field(default_factory=dict)


def proc_status(pid: int) -> tuple[float, int]:
    """(RSS in MiB, threads) of a live process, from /proc."""
    rss, threads = 0.0, 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1]) / 1024
        elif line.startswith("Threads:"):
            threads = int(line.split()[1])
    return rss, threads


def now_utc() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")


class Churn:
    def __init__(self, core_v1, custom, rng: random.Random, gpus: int):
        self.core_v1, self.custom, self.rng, self.gpus = core_v1, custom, rng, gpus
        self.next_job = 0
        self.next_node = 0
        self.cordoned: set[str] = set()

    def add_node(self) -> str:
        name = f"soak-{self.next_node}"
        self.next_node += 1
        create_gpu_node(self.core_v1, name, gpus=self.gpus, cpu="32", labels={NODE_LABEL: "true"})
        return name

    def nodes(self) -> list[str]:
        items = self.core_v1.list_node(label_selector=f"{NODE_LABEL}=true").items
        return [n.metadata.name for n in sorted(items, key=lambda n: int(n.metadata.name.split("-")[1]))]

    def add_job(self) -> None:
        replicas = self.rng.randint(1, 6)
        duration = self.rng.randint(10, 40)
        container = {"name": "main", "image": "busybox", "resources": {
            "requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {GPU_RESOURCE: "1"}}}
        self.custom.create_namespaced_custom_object(BATCH, "v1alpha1", NAMESPACE, "jobs", {
            "apiVersion": f"{BATCH}/v1alpha1", "kind": "Job", "metadata": {"name": f"j{self.next_job}"},
            "spec": {"schedulerName": "volcano-py", "minAvailable": replicas, "ttlSecondsAfterFinished": 10,
                     "tasks": [{"name": "worker", "replicas": replicas, "template": {
                         "metadata": {"labels": {DURATION_LABEL: str(duration)}},
                         "spec": {"terminationGracePeriodSeconds": 0, "containers": [container]}}}]}})
        self.next_job += 1

    def complete_due(self, pods: list[dict]) -> int:
        """Mark every Running pod that has run its job's duration to Succeed (kwok does it)."""
        done = 0
        now = datetime.now(UTC)
        for pod in pods:
            meta, status = pod["metadata"], pod.get("status") or {}
            if status.get("phase") != "Running" or COMPLETE_ANNOTATION in (meta.get("annotations") or {}):
                continue
            started = status.get("startTime")
            duration = int((meta.get("labels") or {}).get(DURATION_LABEL, 0))
            if started and (now - datetime.fromisoformat(started.replace("Z", "+00:00"))).total_seconds() >= duration:
                self.core_v1.patch_namespaced_pod(meta["name"], NAMESPACE,
                                                  {"metadata": {"annotations": {COMPLETE_ANNOTATION: "Succeeded"}}})
                done += 1
        return done

    def cordon_oldest(self) -> None:
        candidates = [n for n in self.nodes() if n not in self.cordoned]
        if len(candidates) > 1:
            self.core_v1.patch_node(candidates[0], {"spec": {"unschedulable": True}})
            self.cordoned.add(candidates[0])

    def retire_drained(self, pods: list[dict], stats: Stats) -> None:
        """Delete each cordoned node on which no pod runs any more, and add a new node in its place."""
        busy = {p["spec"].get("nodeName") for p in pods
                if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")}
        for node in sorted(self.cordoned - busy):
            self.core_v1.delete_node(node)
            self.cordoned.discard(node)
            stats.nodes_removed += 1
            self.add_node()
            stats.nodes_added += 1


class Checker:
    """A partial gang must be seen at two checks in a row (binds of one gang are in flight together)."""

    def __init__(self) -> None:
        self.suspects: dict[str, tuple[str, ...]] = {}

    def check(self, core_v1, custom, pods: list[dict]) -> list[str]:
        problems: list[str] = []
        groups = custom.list_namespaced_custom_object("scheduling.volcano.sh", "v1beta1", NAMESPACE,
                                                      "podgroups")["items"]
        by_group: dict[str, list[dict]] = {}
        for pod in pods:
            group = (pod["metadata"].get("annotations") or {}).get(GROUP_ANNOTATION)
            if group:
                by_group.setdefault(group, []).append(pod)
        suspects: dict[str, tuple[str, ...]] = {}
        for pg in groups:
            name, minimum = pg["metadata"]["name"], int((pg.get("spec") or {}).get("minMember") or 1)
            members = by_group.get(name, [])
            if pg["metadata"].get("deletionTimestamp") or any(
                p["metadata"].get("deletionTimestamp") or (p.get("status") or {}).get("phase") in ("Succeeded",
                                                                                                   "Failed")
                for p in members
            ):
                continue
            bound = tuple(sorted(p["metadata"]["name"] for p in members if p["spec"].get("nodeName")))
            if 0 < len(bound) < minimum:
                suspects[name] = bound
                if self.suspects.get(name) == bound:
                    problems.append(f"partial gang {name}: {len(bound)}/{minimum} bound ({', '.join(bound)})")
        self.suspects = suspects
        try:
            assert_no_overcommit(core_v1)
        except AssertionError as exc:
            problems.append(str(exc))
        return problems


def list_pods(core_v1) -> list[dict]:
    return json.loads(core_v1.list_namespaced_pod(NAMESPACE, _preload_content=False).data)["items"]


def judge(stats: Stats, warmup: float, max_growth: float) -> list[str]:
    """The memory and thread verdicts, one line each (a line starting with FAIL is a violation)."""
    lines = []
    for name, samples in stats.samples.items():
        after = [s for s in samples if s.t >= warmup]
        if len(after) < 10:
            lines.append(f"FAIL {name}: only {len(after)} samples after the warm-up; run longer")
            continue
        base = statistics.median(s.rss_mib for s in after[:5])
        end = statistics.median(s.rss_mib for s in after[-5:])
        half = len(after) // 2
        # Medians: a process's thread count jitters (kopf's and aiohttp's short-lived threads); a leak moves it.
        first = statistics.median(s.threads for s in after[:half])
        second = statistics.median(s.threads for s in after[half:])
        slope = statistics.linear_regression([s.t for s in after], [s.rss_mib for s in after]).slope * 3600
        verdict = "ok" if end - base <= max_growth and second <= first + 2 else "FAIL"
        lines.append(
            f"{verdict} {name}: RSS {base:.1f} -> {end:.1f} MiB after warm-up ({end - base:+.1f}, bound "
            f"{max_growth:g}; trend {slope:+.1f} MiB/h; peak {max(s.rss_mib for s in samples):.1f}); threads "
            f"median {first:g} in the first half, {second:g} in the second (peak {max(s.threads for s in samples)})")
    return lines


def run(args: argparse.Namespace) -> int:
    rng = random.Random(args.seed)
    stats = Stats()
    log_dir = Path(tempfile.mkdtemp(prefix="volcano-py-soak-"))
    cp = ControlPlane()
    print(f"soak {args.duration / 60:g} min from {now_utc()}; control plane in {cp.dir}, logs in {log_dir}",
          flush=True)
    cp.start()
    procs: dict[str, Process] = {}
    try:
        from kubernetes import client

        api = cp.api_client()
        core_v1, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
        core_v1.create_namespace({"metadata": {"name": NAMESPACE}})
        churn = Churn(core_v1, custom, rng, args.gpus)
        for _ in range(args.nodes):
            churn.add_node()
        for node in churn.nodes():
            wait_for(lambda n=node: node_is_ready(core_v1, n), 120, what=f"node {node} Ready")
        procs["scheduler"] = Process(cp, log_dir, "scheduler", "scheduler", "--schedule-period", "500ms")
        procs["controllers"] = Process(cp, log_dir, "controllers", "controllers", "--no-leader-elect")
        stats.samples = {name: [] for name in procs}
        checker = Checker()
        start = time.monotonic()
        due = {"job": 0.0, "node": args.node_period, "sample": 0.0, "check": args.check_period, "report": 60.0}
        while (elapsed := time.monotonic() - start) < args.duration:
            if any(not p.alive() for p in procs.values()):
                dead = [n for n, p in procs.items() if not p.alive()]
                stats.violations.append(f"{', '.join(dead)} died after {elapsed:.0f}s")
                break
            if elapsed >= due["job"]:
                churn.add_job()
                stats.jobs += 1
                due["job"] += args.job_period
            pods = list_pods(core_v1)
            stats.pods_completed += churn.complete_due(pods)
            churn.retire_drained(pods, stats)
            if elapsed >= due["node"]:
                churn.cordon_oldest()
                due["node"] += args.node_period
            if elapsed >= due["sample"]:
                for name, proc in procs.items():
                    rss, threads = proc_status(proc.proc.pid)
                    stats.samples[name].append(Sample(elapsed, rss, threads))
                due["sample"] += args.sample_period
            if elapsed >= due["check"]:
                problems = checker.check(core_v1, custom, pods)
                stats.checks += 1
                stats.violations.extend(f"{elapsed:.0f}s: {p}" for p in problems)
                due["check"] += args.check_period
            if elapsed >= due["report"]:
                last = {n: s[-1] for n, s in stats.samples.items() if s}
                print(f"{elapsed / 60:5.1f} min: {stats.jobs} jobs, {len(pods)} pods, {stats.pods_completed} "
                      f"completed, nodes +{stats.nodes_added}/-{stats.nodes_removed}; " + "; ".join(
                          f"{n} {s.rss_mib:.0f} MiB {s.threads} threads" for n, s in last.items()), flush=True)
                due["report"] += 60.0
            time.sleep(args.tick)  # the churn's pace, not a synchronisation
        api.close()
    finally:
        for proc in procs.values():
            proc.stop()
        cp.stop()
    verdicts = judge(stats, args.warmup, args.max_rss_growth_mib)
    print(f"\nsoak summary ({now_utc()}): {args.duration / 60:g} min, warm-up {args.warmup / 60:g} min; "
          f"{stats.jobs} jobs, {stats.pods_completed} pods run to completion, nodes +{stats.nodes_added}/"
          f"-{stats.nodes_removed}, {stats.checks} invariant checks")
    for line in verdicts:
        print("  " + line)
    for v in stats.violations[:20]:
        print(f"  violation: {v}")
    print(f"  {len(stats.violations)} invariant violations (partial gangs, over-commit, deaths)")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "duration": args.duration, "warmup": args.warmup, "jobs": stats.jobs,
            "pods_completed": stats.pods_completed, "violations": stats.violations, "verdicts": verdicts,
            "samples": {n: [s.__dict__ for s in ss] for n, ss in stats.samples.items()}}, indent=1))
    return 1 if stats.violations or any(v.startswith("FAIL") for v in verdicts) else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=float, default=60.0, help="minutes (default 60)")
    ap.add_argument("--warmup", type=float, default=None, help="minutes (default: a third of the run, at most 10)")
    ap.add_argument("--nodes", type=int, default=8)
    ap.add_argument("--gpus", type=int, default=8, help="GPUs per node")
    ap.add_argument("--job-period", type=float, default=2.0, help="seconds between two new Jobs")
    ap.add_argument("--node-period", type=float, default=60.0, help="seconds between two node retirements")
    ap.add_argument("--sample-period", type=float, default=10.0, help="seconds")
    ap.add_argument("--check-period", type=float, default=5.0, help="seconds")
    ap.add_argument("--max-rss-growth-mib", type=float, default=25.0)
    ap.add_argument("--tick", type=float, default=0.5, help=argparse.SUPPRESS)
    ap.add_argument("--seed", type=int, default=22)
    ap.add_argument("--json", help="also write the samples and verdicts to this file")
    args = ap.parse_args(argv)
    if args.duration <= 0 or args.job_period <= 0 or args.node_period <= 0 or args.nodes < 2:
        ap.error("--duration, --job-period and --node-period must be positive, --nodes at least 2")
    args.warmup = (min(10.0, args.duration / 3) if args.warmup is None else args.warmup) * 60
    args.duration *= 60
    # SIGTERM (a `kill`, make's job control) ends the run as Ctrl-C does: the `finally` blocks stop the scheduler,
    # the controllers and the control plane instead of leaving them running.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
