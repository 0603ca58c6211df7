"""`make differential`: seeded random workloads, once under Volcano and once under volcano-py, outcomes compared.

Per side, one control plane for the whole run (tests/e2e/controlplane.py: etcd, kube-apiserver and kwok as the
kubelets; no kube-controller-manager, so nodes carry no not-ready taint and this runner deletes what a garbage
collector would) and that side's scheduler and controllers started once, as tools/conformance/harness.py starts
them (Volcano: vc-webhook-manager, vc-controller-manager, vc-scheduler on Volcano's CRDs; volcano-py: its scheduler
and controllers as scheduler name ``volcano`` on crds/), with Volcano's CI conf. Then for each workload seed:

1. PriorityClasses and queues (until Open), nodes created unschedulable (the gate) and Ready;
2. the gangs of wave 0 submitted; settled under the gate (PodGroups enqueued, Jobs' pods created); then, with the
   scheduler stopped, the nodes made schedulable and the scheduler started again: its first cycle sees every pod
   and every open node (opening them while it runs lets a cycle see some nodes open and not others);
3. settled: no pod binding or phase, PodGroup phase or Job phase change for ``--quiet`` seconds (deadline
   ``--deadline``); then wave 1 (at most one late gang) submitted and settled the same way;
4. the outcome recorded (outcome.py), everything deleted and waited for.

Both sides run at the same time, each in its own process on its own control plane (the whole run holds the heavy
lock): about 7.5 s per workload for both sides on 2 cores, where one side after the other would take the sum. Both
schedulers run with ``--schedule-period 0.5s`` (Volcano's CI conf sets no period; the default, 1 s, doubles the
settle time) and settled means 2 s (four periods) without change. Records land in
``<cache>/volcano-py/differential/<run>/<side>/<seed>.json``; the comparison in ``<run>/report.md`` and,
for a full run, in CONFORMANCE.md between the differential markers.

    python -m differential.run --workloads 200 --seed 1          (from tools/, as the Makefile runs it)
    python -m differential.run --rerun 17                        one workload again, both sides
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import urllib3

from . import gated, partitions, preemption, preemption_report, report, workloads
from .outcome import outcome
from .preemption_outcome import EvictionLog
from .workloads import NAMESPACE, ZONE_LABEL, Gang, Workload

TOOLS = Path(__file__).resolve().parents[1]
REPO = TOOLS.parent


SIDES = ("volcano", "volcano-py")
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "volcano-py"
RESULTS = Path(os.environ.get("VOLCANO_PY_DIFFERENTIAL_RESULTS") or CACHE / "differential")
CI_CONF = "installer/helm/chart/volcano/config/volcano-scheduler-ci.conf"
# The families: `random` (workloads.py, Volcano's CI conf) and `preemption` (preemption.py, issue 32: Volcano's
# gang-eviction conf, evictions and broken gangs compared too) and `partitions` (partitions.py, issue 34: Jobs with a
# partitionPolicy on HyperNodes, Volcano's CI conf; the partition rules checked on both sides) and `gated` (gated.py:
# pods opting in to queue admission by scheduling gates, SchedulingGatesQueueAdmission on in both sides).
FAMILIES = ("random", "preemption", "partitions", "gated")


def generate(seed: int, family: str = "random") -> Workload:
    if family == "partitions":
        return partitions.generate(seed)
    if family == "gated":
        return gated.generate(seed)
    return preemption.generate(seed) if family == "preemption" else workloads.generate(seed)


# Tracebacks of a failure the run survives, on stderr beside the log lines (logging's last-resort handler).
logger = logging.getLogger("volcano_py.tools")


def log(msg: str) -> None:
    print(f"[differential {dt.datetime.now():%H:%M:%S}] {msg}", file=sys.stderr, flush=True)


# ---- the cluster side -------------------------------------------------------------------------------------------
class Cluster:
    """Thin raw-JSON access to the objects a workload creates (the generated client's models are slow to build)."""

    def __init__(self, api):
        from kubernetes import client

        self.api = api
        self.core = client.CoreV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.sched = client.SchedulingV1Api(api)

    def _json(self, resp) -> dict:
        return json.loads(resp.data)

    def pods(self) -> list[dict]:
        return self._json(self.core.list_namespaced_pod(NAMESPACE, _preload_content=False))["items"]

    def custom_list(self, group: str, version: str, plural: str, namespaced: bool = True) -> list[dict]:
        if namespaced:
            r = self.custom.list_namespaced_custom_object(group, version, NAMESPACE, plural)
        else:
            r = self.custom.list_cluster_custom_object(group, version, plural)
        return r["items"]

    def podgroups(self) -> list[dict]:
        return self.custom_list("scheduling.volcano.sh", "v1beta1", "podgroups")

    def jobs(self) -> list[dict]:
        return self.custom_list("batch.volcano.sh", "v1alpha1", "jobs")

    def queues(self) -> list[dict]:
        return self.custom_list("scheduling.volcano.sh", "v1beta1", "queues", namespaced=False)

    def nodes(self) -> list[dict]:
        return self._json(self.core.list_node(label_selector=ZONE_LABEL, _preload_content=False))["items"]

    def hypernodes(self) -> list[dict]:
        return self.custom_list(*preemption.HYPERNODE_API, namespaced=False)

    def create(self, m: dict) -> None:
        kind = m["kind"]
        if kind == "Pod":
            self.core.create_namespaced_pod(NAMESPACE, m, _preload_content=False)
        elif kind == "Node":
            self.core.create_node(m, _preload_content=False)
        elif kind == "PriorityClass":
            self.sched.create_priority_class(m, _preload_content=False)
        elif kind == "Queue":
            self.custom.create_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", m)
        elif kind == "PodGroup":
            self.custom.create_namespaced_custom_object("scheduling.volcano.sh", "v1beta1", NAMESPACE, "podgroups", m)
        elif kind == "Job":
            self.custom.create_namespaced_custom_object("batch.volcano.sh", "v1alpha1", NAMESPACE, "jobs", m)
        elif kind == "HyperNode":
            self.custom.create_cluster_custom_object(*preemption.HYPERNODE_API, m)
        else:
            raise ValueError(kind)


def poll(predicate, timeout: float, interval: float = 0.2, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while True:
        v = predicate()
        if v:
            return v
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)  # polling interval, not a synchronisation


def signature(c: Cluster) -> tuple:
    """What settling watches: bindings and phases of pods, PodGroup and Job phases."""
    pods = tuple(
        sorted(
            (
                p["metadata"]["name"],
                p["spec"].get("nodeName") or "",
                (p.get("status") or {}).get("phase") or "",
                bool(p["metadata"].get("deletionTimestamp")),
            )
            for p in c.pods()
        )
    )
    pgs = tuple(
        sorted((g["metadata"]["name"], (g.get("status") or {}).get("phase") or "") for g in c.podgroups())
    )
    jobs = tuple(
        sorted(
            (j["metadata"]["name"], ((j.get("status") or {}).get("state") or {}).get("phase") or "") for j in c.jobs()
        )
    )
    return pods, pgs, jobs


def settle(c: Cluster, quiet: float, deadline: float, interval: float = 0.25) -> tuple[bool, float]:
    """Poll the signature until it stays unchanged for ``quiet`` seconds. Returns (settled, seconds taken)."""
    t0 = time.monotonic()
    last, since = signature(c), time.monotonic()
    while True:
        time.sleep(interval)  # polling interval of the condition below
        now_sig = signature(c)
        now = time.monotonic()
        if now_sig != last:
            last, since = now_sig, now
        elif now - since >= quiet:
            return True, now - t0
        if now - t0 > deadline:
            return False, now - t0


def podgroup_gangs(c: Cluster, wl: Workload) -> set[str]:
    """The gangs of the workload whose PodGroup exists (a Job's is made by the job controller)."""
    out = set()
    for pg in c.podgroups():
        meta = pg["metadata"]
        owners = [o["name"] for o in meta.get("ownerReferences") or [] if o.get("kind") == "Job"]
        out.add(f"job/{owners[0]}" if owners else f"podgroup/{meta['name']}")
    return out & {g.key for g in wl.gangs}


def submit(c: Cluster, gangs: list[Gang]) -> None:
    for g in gangs:
        for m in g.manifests:
            c.create(m)


def set_schedulable(c: Cluster, wl: Workload, schedulable: bool) -> None:
    for n in wl.nodes:
        c.core.patch_node(n["metadata"]["name"], {"spec": {"unschedulable": not schedulable}}, _preload_content=False)


def cleanup(c: Cluster, wl: Workload, timeout: float = 60) -> None:
    from kubernetes.client.rest import ApiException

    def quietly(fn, *a, **kw):
        try:
            fn(*a, **kw)
        except ApiException as e:
            if e.status != 404:
                raise

    # Jobs first, so no controller makes their pods again; then what a garbage collector would delete.
    quietly(c.custom.delete_collection_namespaced_custom_object, "batch.volcano.sh", "v1alpha1", NAMESPACE, "jobs")

    def emptied() -> bool:
        left = c.jobs(), c.podgroups(), c.pods()
        if left[1]:
            quietly(c.custom.delete_collection_namespaced_custom_object, "scheduling.volcano.sh", "v1beta1",
                    NAMESPACE, "podgroups")
        if left[2]:
            quietly(c.core.delete_collection_namespaced_pod, NAMESPACE, grace_period_seconds=0,
                    _preload_content=False)
        return not any(left)

    poll(emptied, timeout, 0.25, "jobs, podgroups and pods deleted")
    for h in getattr(wl, "hypernodes", []):
        quietly(c.custom.delete_cluster_custom_object, *preemption.HYPERNODE_API, h["metadata"]["name"])
    for n in wl.nodes:
        quietly(c.core.delete_node, n["metadata"]["name"], _preload_content=False)
    for q in wl.queue_names:
        quietly(c.custom.delete_cluster_custom_object, "scheduling.volcano.sh", "v1beta1", "queues", q)
    for p in wl.priority_classes:
        quietly(c.sched.delete_priority_class, p["metadata"]["name"], _preload_content=False)
    names = set(wl.queue_names)

    def gone() -> bool:
        queues = [q for q in c.queues() if q["metadata"]["name"] in names]
        for q in queues:  # a queue's deletion can be refused while the scheduler still counts pods in it
            quietly(c.custom.delete_cluster_custom_object, "scheduling.volcano.sh", "v1beta1", "queues",
                    q["metadata"]["name"])
        hyper = {h["metadata"]["name"] for h in getattr(wl, "hypernodes", [])}
        left = hyper and {h["metadata"]["name"] for h in c.hypernodes()} & hyper
        return not c.nodes() and not queues and not left

    poll(gone, timeout, 0.25, "nodes, queues and hypernodes deleted")


class PodWatch:
    """The namespace's pod events, in order, fed to an EvictionLog from a thread (a pod the scheduler evicts with
    a zero grace period is gone within milliseconds: only a watch sees its DisruptionTarget condition)."""

    def __init__(self, c: Cluster, evictions: EvictionLog):
        self.c, self.evictions = c, evictions
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.error: str | None = None
        self._list()
        self.thread = threading.Thread(target=self._run, name="pod-watch", daemon=True)
        self.thread.start()

    def _list(self) -> None:
        pods = self.c._json(self.c.core.list_namespaced_pod(NAMESPACE, _preload_content=False))
        self.rv = pods["metadata"]["resourceVersion"]
        with self.lock:
            self.evictions.seed(pods["items"])

    def _run(self) -> None:
        from kubernetes import watch
        from kubernetes.client.rest import ApiException

        while not self.stopping.is_set():
            w = watch.Watch()
            try:
                for ev in w.stream(self.c.core.list_namespaced_pod, NAMESPACE, resource_version=self.rv,
                                   timeout_seconds=1, allow_watch_bookmarks=True, deserialize=False):
                    obj = ev.get("object") or {}
                    self.rv = (obj.get("metadata") or {}).get("resourceVersion") or self.rv
                    if ev.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                        with self.lock:
                            self.evictions.feed(ev["type"], obj)
            except ApiException as e:
                if e.status == 410:  # expired: list again (evictions are counted once per UID)
                    self._list()
                    continue
                self.error = f"pod watch: {e.status} {e.reason}"
                return
            except (urllib3.exceptions.HTTPError, OSError, ValueError) as e:  # recorded with the workload
                self.error = f"pod watch: {type(e).__name__}: {e}"
                return

    def stop(self) -> dict:
        self.stopping.set()
        self.thread.join(timeout=10)
        with self.lock:
            out = self.evictions.result()
        if self.error:
            out["watch_error"] = self.error
        return out


def bound_per_task(c: Cluster, wl: Workload) -> dict[str, dict[str, int]]:
    """Live bound pods per gang and task (the state wave 1 meets)."""
    from .outcome import gang_of_pod, is_bound
    from .preemption_outcome import task_of_pod

    out: dict[str, dict[str, int]] = {}
    for pod in c.pods():
        gang = gang_of_pod(pod, wl)
        if gang and is_bound(pod):
            task = task_of_pod(pod, gang.split("/", 1)[1])
            out.setdefault(gang, {}).setdefault(task, 0)
            out[gang][task] += 1
    return out


def run_workload(c: Cluster, wl: Workload, quiet: float, deadline: float, gate: str, sched: Scheduler) -> dict:
    t0 = time.monotonic()
    phases: dict[str, float] = {}
    for pc in wl.priority_classes:
        c.create(pc)
    for q in wl.queues:
        c.create(q)
    names = set(wl.queue_names)
    poll(
        lambda: sum((q.get("status") or {}).get("state") == "Open" for q in c.queues()
                    if q["metadata"]["name"] in names) == len(names),
        30, 0.1, "queues Open",
    )
    for n in wl.nodes:
        c.create({**n, "spec": {**n["spec"], "unschedulable": gate != "none"}})
    def ready(n: dict) -> bool:
        return any(x.get("type") == "Ready" and x.get("status") == "True"
                   for x in (n.get("status") or {}).get("conditions") or [])

    poll(lambda: sum(map(ready, c.nodes())) == len(wl.nodes), 30, 0.1, "nodes Ready")
    hypernodes = getattr(wl, "hypernodes", [])
    for h in hypernodes:
        c.create(h)
    if hypernodes:
        wanted = {h["metadata"]["name"] for h in hypernodes}
        poll(lambda: wanted <= {h["metadata"]["name"] for h in c.hypernodes()}, 30, 0.1, "hypernodes")
    watcher = PodWatch(c, EvictionLog(wl)) if isinstance(wl, preemption.PreemptionWorkload) else None
    before: dict = {}
    phases["setup"] = time.monotonic() - t0
    settled = True
    waves = wl.waves()
    for i, gangs in enumerate(waves):
        if not gangs:
            continue
        if i > 0 and watcher is not None and not before:
            before = bound_per_task(c, wl)
        if i == 0 and gate == "restart":
            # Enqueue and allocate each see the whole wave at once: the scheduler is down while the gangs are
            # submitted (until every PodGroup exists, Jobs' made by the controllers), runs under the gate until the
            # PodGroups are enqueued and the Jobs' pods made, and is down again while the nodes open one patch at a
            # time. Otherwise arrival order and a cycle between two node patches decide, differently per run.
            sched.stop()
            submit(c, gangs)
            wanted = {g.key for g in gangs}
            poll(lambda w=wanted: w <= podgroup_gangs(c, wl), 30, 0.1, "the wave's PodGroups")
            phases["restart"] = sched.restart(f"{wl.seed}-gated")
            ok, s = settle(c, quiet, deadline)
            phases["gated"] = s
            settled &= ok
            sched.stop()
            set_schedulable(c, wl, True)
            phases["restart"] += sched.restart(f"{wl.seed}")
        else:
            submit(c, gangs)
            if i == 0 and gate == "patch":
                ok, s = settle(c, quiet, deadline)
                phases["gated"] = s
                settled &= ok
                set_schedulable(c, wl, True)
        ok, s = settle(c, quiet, deadline)
        phases[f"wave{i}"] = s
        settled &= ok
    pods, pgs, jobs = c.pods(), c.podgroups(), c.jobs()
    queues = {q["metadata"]["name"]: q.get("status") or {} for q in c.queues() if q["metadata"]["name"] in names}
    result = outcome(wl, pods, pgs, jobs)
    if watcher is not None:
        result.update(watcher.stop())
        result["before"] = before
    t1 = time.monotonic()
    cleanup(c, wl)
    phases["cleanup"] = time.monotonic() - t1
    return {
        "seed": wl.seed,
        "settled": settled,
        "seconds": round(time.monotonic() - t0, 2),
        "phases": {k: round(v, 2) for k, v in phases.items()},
        "outcome": result,
        "observed": {
            "pods": sorted(
                [p["metadata"]["name"], p["spec"].get("nodeName"), (p.get("status") or {}).get("phase")] for p in pods
            ),
            "gates": {p["metadata"]["name"]: [g.get("name") for g in p["spec"]["schedulingGates"]]
                      for p in pods if p["spec"].get("schedulingGates")},
            "podgroups": {
                g["metadata"]["name"]: {
                    "phase": (g.get("status") or {}).get("phase"),
                    "running": (g.get("status") or {}).get("running"),
                    "minMember": g["spec"].get("minMember"),
                    "minResources": g["spec"].get("minResources"),
                    "conditions": [
                        {k: x.get(k) for k in ("type", "status", "reason", "message")}
                        for x in (g.get("status") or {}).get("conditions") or []
                    ],
                }
                for g in pgs
            },
            "queue_status": queues,
        },
    }


class Scheduler:
    """The side's scheduler process, which the gate stops and starts again (same command line, a log per start)."""

    def __init__(self, cp, side, name: str, argv: list[str], health_url: str):
        self.cp, self.side, self.name, self.argv, self.health_url = cp, side, name, argv, health_url
        self.starts = 0

    def stop(self) -> None:
        self.side.procs[self.name].stop()

    def restart(self, tag: str) -> float:
        """Stop (if running) and start again; returns once healthy, with the seconds it took."""
        import harness
        from controlplane import _Proc

        t0 = time.monotonic()
        self.stop()
        self.starts += 1
        self.side.procs[self.name] = _Proc(self.name, self.argv, self.cp.logs / f"{self.name}.{tag}.log")
        harness.wait_healthy(self.cp, self.side, self.name, self.health_url)
        return time.monotonic() - t0


def start_side(side: str, cp, build, work: Path, conf_dir: Path, period: float | None):
    """harness.start_volcano / start_volcano_py; then the scheduler is started again by this runner, with the same
    command line plus ``--schedule-period`` when a period is asked for, so the gate can restart it."""
    import harness

    docs = harness.render_chart(build, str(REPO / ".bin" / "helm"), work, admission=True)
    if side == "volcano":
        s = harness.start_volcano(cp, build, docs, work, conf_dir)
        name, health = "vc-scheduler", "--healthz-address="
        flag = f"--schedule-period={int(period * 1000)}ms" if period else None
    else:
        s = harness.start_volcano_py(cp, work, conf_dir, docs)
        name, health = "volcano-py-scheduler", "--listen-address="
        flag = f"--schedule-period={period}" if period else None
    argv = s.procs[name].argv + ([flag] if flag else [])
    addr = next(a.split("=", 1)[1] for a in argv if a.startswith(health))
    sched = Scheduler(cp, s, name, argv, f"http://{addr}/healthz")
    sched.restart("start")
    return s, sched


def ensure_default_queue(c: Cluster) -> None:
    """Volcano's scheduler creates queue ``default`` (weight 1, reclaimable) at start; make sure both sides have it."""
    from kubernetes.client.rest import ApiException

    def present() -> bool:
        return any(q["metadata"]["name"] == "default" and (q.get("status") or {}).get("state") == "Open"
                   for q in c.queues())

    try:
        poll(present, 10, 0.2, "queue default")
        return
    except TimeoutError:
        pass
    try:
        c.create({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "default"},
                  "spec": {"weight": 1, "reclaimable": True}})
    except ApiException as e:
        if e.status != 409:
            raise
    poll(present, 30, 0.2, "queue default Open")


def run_side(side: str, seeds: list[int], out: Path, quiet: float, deadline: float, gate: str,
             period: float | None, family: str = "random") -> int:
    import harness
    from controlplane import ControlPlane
    from kubernetes import client

    out.mkdir(parents=True, exist_ok=True)
    build = harness.VolcanoBuild.locate()
    crds = build.chart / "crd" / "bases" if side == "volcano" else REPO / "crds"
    cp = ControlPlane(controller_manager=False, crds_dir=crds, keep_dir=True, log=log)
    s = None
    failures = 0
    try:
        cp.start()
        api = cp.api_client()
        core = client.CoreV1Api(api)
        core.create_namespace({"metadata": {"name": harness.VOLCANO_NS}})
        core.create_namespace({"metadata": {"name": NAMESPACE}})
        work = cp.dir / "differential"
        work.mkdir()
        conf_dir = cp.dir / "volcano.scheduler"
        conf_dir.mkdir()
        if family == "preemption":
            (conf_dir / harness.CI_CONF_KEY).write_text(preemption.GANG_EVICTION_CONF)
        else:
            shutil.copy(build.src / CI_CONF if (build.src / CI_CONF).exists() else Path(
                "/work/shared/peers/volcano") / CI_CONF, conf_dir / harness.CI_CONF_KEY)
        t_side = time.monotonic()
        s, sched = start_side(side, cp, build, work, conf_dir, period)
        if family == "gated":
            gated.turn_on_feature_gate(cp, s, sched)
        c = Cluster(api)
        ensure_default_queue(c)
        log(f"{side}: {', '.join(s.procs)} up on {cp.server}; {len(seeds)} workloads")
        for i, seed in enumerate(seeds):
            dead = s.check_alive()
            if dead:
                raise RuntimeError("; ".join(dead))
            wl = generate(seed, family)
            try:
                rec = run_workload(c, wl, quiet, deadline, gate, sched)
            except Exception as exc:  # one workload's failure is recorded, the run goes on
                failures += 1
                rec = {"seed": seed, "error": f"{type(exc).__name__}: {exc}"}
                logger.warning("%s: seed %s failed", side, seed, exc_info=True)
                try:
                    if not s.procs[sched.name].alive():  # the gate had it stopped
                        sched.restart(f"{seed}-recover")
                    cleanup(c, wl)
                except Exception:  # the next workload's own checks say whether the cluster is usable
                    logger.warning("%s: seed %s: cleanup failed too", side, seed, exc_info=True)
            rec["side"] = side
            (out / f"{seed}.json").write_text(json.dumps(rec, indent=1, sort_keys=True))
            if "error" not in rec:
                log(f"{side}: [{i + 1}/{len(seeds)}] seed {seed}: {rec['seconds']:.1f}s {rec['phases']}"
                    + ("" if rec["settled"] else " (NOT settled)"))
        for old in out.glob("_side-*.json"):  # an earlier run of these seeds: its time is not this run's
            lo, _, hi = old.stem.removeprefix("_side-").partition("-")
            if lo.isdigit() and hi.isdigit() and int(lo) <= seeds[-1] and seeds[0] <= int(hi):
                old.unlink()
        (out / f"_side-{seeds[0]}-{seeds[-1]}.json").write_text(json.dumps(
            {"side": side, "family": family, "workloads": len(seeds), "seconds": round(time.monotonic() - t_side, 1)}))
    finally:
        if s:
            s.stop()
        cp.stop()
        if (cp.dir / "logs").is_dir():
            shutil.copytree(cp.dir / "logs", out / "logs", dirs_exist_ok=True)
        shutil.rmtree(cp.dir, ignore_errors=True)
    return failures


def load_side(run_dir: Path, side: str, seeds: list[int]) -> dict[int, dict]:
    return report.load(run_dir, side, seeds)


def run_children(args, sides: list[str], run_name: str, seeds: list[int], rerun: bool | None = None) -> list[int]:
    """One process per side (both at once unless --sequential), each on its own control plane."""
    base = [sys.executable, "-m", "differential.run", "--child", "--run", run_name,
            "--quiet", str(args.quiet), "--deadline", str(args.deadline),
            f"--schedule-period={args.schedule_period}"]
    base += [f"--rerun={x}" for x in seeds] if (rerun or args.rerun) else [
        f"--seed={args.seed}", f"--workloads={args.workloads}"]
    base.append(f"--gate={args.gate}")
    base.append(f"--family={args.family}")
    env = dict(os.environ, PYTHONPATH=str(TOOLS) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    procs = []
    for side in sides:
        procs.append(subprocess.Popen([*base, "--only-side", side], env=env, cwd=str(REPO)))
        if args.sequential:
            procs[-1].wait()
    return [pr.wait() for pr in procs]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--family", choices=FAMILIES, default="random",
                   help="random: workloads.py under Volcano's CI conf; preemption: preemption.py under Volcano's "
                        "gang-eviction conf (issue 32); partitions: partitions.py; gated: gated.py (scheduling "
                        "gates, SchedulingGatesQueueAdmission on in both sides)")
    p.add_argument("--workloads", type=int, default=200)
    p.add_argument("--seed", type=int, default=1, help="first workload seed (seeds are SEED .. SEED+N-1)")
    p.add_argument("--rerun", type=int, action="append", help="only this workload seed (repeatable)")
    p.add_argument("--only-side", choices=SIDES, action="append", help="run only this side (repeatable)")
    p.add_argument("--run", default=None, help="run directory name (default: derived from the seeds)")
    p.add_argument("--quiet", type=float, default=2.0, help="seconds without change that count as settled")
    p.add_argument("--deadline", type=float, default=None,
                   help="settle deadline per wave, seconds (default 60; 30 for the preemption family, where a "
                        "workload that does not settle is evicting in a loop)")
    p.add_argument("--schedule-period", type=float, default=0.5,
                   help="both schedulers' --schedule-period in seconds (0: their default, 1s); the CI conf sets none")
    p.add_argument("--gate", choices=("restart", "patch", "none"), default="restart",
                   help="wave 0 under unschedulable nodes, then the nodes opened with the scheduler stopped "
                        "(restart, the default), or while it runs (patch); none: nodes schedulable from the start")
    p.add_argument("--sequential", action="store_true", help="one side after the other instead of both at once")
    p.add_argument("--lock", default=os.environ.get("HEAVY_LOCK", "/tmp/volcano-py-heavy.lock"),
                   help="the heavy lock, held for the whole run ('' for none)")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--report-only", action="store_true", help="only compare the records of --run")
    p.add_argument("--confirm", type=int, default=1,
                   help="rerun the workloads that differed this many times (<run>/confirm-<k>/), to tell a stable "
                        "difference from a timing-sensitive one")
    p.add_argument("--conformance-md", default=str(REPO / "CONFORMANCE.md"))
    p.add_argument("--command", default="make differential", help="the command the report names")
    args = p.parse_args(argv)
    if args.family == "preemption" and args.command == "make differential":
        args.command = "make differential FAMILY=preemption"
    if args.deadline is None:
        args.deadline = 30.0 if args.family == "preemption" else 60.0

    seeds = args.rerun or list(range(args.seed, args.seed + args.workloads))
    run_name = args.run or (f"rerun-{'-'.join(map(str, seeds))}" if args.rerun else f"seed{args.seed}-n{len(seeds)}")
    if args.family != "random" and not args.run:
        run_name = f"{args.family}-{run_name}"
    run_dir = RESULTS / run_name
    sides = args.only_side or list(SIDES)

    if args.child:
        (side,) = sides
        return 1 if run_side(side, seeds, run_dir / side, args.quiet, args.deadline, args.gate,
                             args.schedule_period, args.family) else 0

    if not args.report_only:
        import harness

        if "volcano" in sides:
            harness.VolcanoBuild.locate().bin("vc-scheduler")  # fail early, before taking the lock
        with harness.heavy_lock(args.lock):
            t0 = time.monotonic()
            rcs = run_children(args, sides, run_name, seeds)
            log(f"sides {sides} done in {time.monotonic() - t0:.0f}s (exit {rcs})")
            if set(sides) == set(SIDES):
                for k in range(1, args.confirm + 1):
                    if args.family == "preemption":
                        diffs = preemption_report.differences(run_dir, seeds)
                    else:
                        _, diffs, _, _ = report.summarize(load_side(run_dir, "volcano", seeds),
                                                          load_side(run_dir, "volcano-py", seeds), seeds)
                    differing = sorted({d.seed for d in diffs})
                    if not differing:
                        break
                    log(f"confirm {k}/{args.confirm}: rerunning {len(differing)} differing workloads")
                    run_children(args, sides, f"{run_name}/confirm-{k}", differing, rerun=True)
    if set(sides) != set(SIDES) and not args.report_only:
        return 0
    if args.family in ("partitions", "gated"):  # their report only: CONFORMANCE.md's lines are written by hand
        text = (partitions if args.family == "partitions" else gated).build(run_dir, seeds, args.command)
        (run_dir / "report.md").write_text(text)
        print(text)
        return 0
    if args.family == "preemption":
        text, md = preemption_report.build(run_dir, seeds, command=args.command)
        (run_dir / "report.md").write_text(text)
        print(text)
        if not args.rerun and Path(args.conformance_md).exists():
            preemption_report.rewrite_section(Path(args.conformance_md), md)
        return 0
    text, md = report.build(run_dir, seeds, command=args.command)
    (run_dir / "report.md").write_text(text)
    print(text)
    if not args.rerun and Path(args.conformance_md).exists():
        report.rewrite_section(Path(args.conformance_md), md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
