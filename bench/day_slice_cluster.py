"""The slice of `bench_day_slice.py` under Volcano's real scheduler on the test control plane.

The control plane is the e2e one (tests/e2e/controlplane.py: etcd, kube-apiserver, kwok as the kubelets, no
kube-controller-manager, as the differential oracle runs it) and Volcano is started by the differential oracle's
own code (tools/differential/run.py `start_side`, which renders Volcano's chart and starts vc-webhook-manager,
vc-controller-manager and vc-scheduler on Volcano's CRDs as tools/conformance/harness.py does), with the given
conf as the scheduler's conf file and its default schedule period (1 s). All of it under the heavy lock.

Pods finish by this driver's hand: when a Job's whole gang is Running, it annotates the Job's pods
`volcano-py.test/complete: Succeeded` at that time plus the job's compressed duration, and kwok's
`pod-complete-on-request` stage (controlplane.KWOK_STAGES) turns them Succeeded. So a job's work starts when its
whole gang runs, as in the simulator, not when each pod does. The driver polls the namespace's pods every
`poll_every` seconds (0.1 s: 1 s of the day at a compression of 10); the times it records are its polls'.

Order: the jobs running at the slice's start are submitted first and waited for until every one of them runs (the
warm-up). Then vc-scheduler is stopped and the jobs waiting at the start are submitted one per second, by name
(the simulator submits them at once and orders jobs created in the same second by name; Volcano by their random
UIDs); vc-scheduler is started again and the slice's clock starts: its first cycle sees them all, as the
simulator's does. The others are submitted as their compressed arrivals come. The run ends at the slice's end;
the control plane is discarded.
"""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpu_day_slice import Observed, Slice, SliceJob
from gpu_day_workload import QUEUES, DaySpec

ROOT = Path(__file__).resolve().parent.parent
for _extra in ("tools", "tools/conformance", "tests/e2e"):  # as the dev venv's .pth has them (Makefile `venv`)
    if str(ROOT / _extra) not in sys.path:
        sys.path.append(str(ROOT / _extra))

JOB_LABEL = "volcano.sh/job-name"  # Volcano's batch/v1alpha1 labels.go JobNameKey, on every pod of a Job


@dataclass(slots=True)
class Seen:
    job: SliceJob
    submitted: float | None = None  # monotonic
    whole: float | None = None
    due: float | None = None  # when its pods are to complete
    completing: bool = False
    done: float | None = None


def _log(msg: str) -> None:
    print(f"[day-slice {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def run_on_volcano(sl: Slice, conf_text: str, spec: DaySpec, *, lock: str, logs: Path | None = None,
                   poll_every: float = 0.1, warmup_deadline: float = 120.0,
                   log: Callable[[str], None] = _log) -> tuple[list[Observed], dict[str, float]]:
    """The slice's jobs as Volcano ran them (on the slice's clock), and the phases' wall seconds."""
    import harness
    from controlplane import ControlPlane
    from differential.run import Cluster, ensure_default_queue, start_side
    from differential.workloads import NAMESPACE
    from kubernetes import client

    build = harness.VolcanoBuild.locate()
    build.bin("vc-scheduler")  # fail before the lock when Volcano is not built
    phases: dict[str, float] = {}
    with harness.heavy_lock(lock):
        t0 = time.monotonic()
        cp = ControlPlane(controller_manager=False, crds_dir=build.chart / "crd" / "bases", keep_dir=True, log=log)
        side = None
        try:
            cp.start()
            api = cp.api_client()
            core = client.CoreV1Api(api)
            for ns in (harness.VOLCANO_NS, NAMESPACE):
                core.create_namespace({"metadata": {"name": ns}})
            work, conf_dir = cp.dir / "day-slice", cp.dir / "volcano.scheduler"
            work.mkdir()
            conf_dir.mkdir()
            (conf_dir / harness.CI_CONF_KEY).write_text(conf_text)
            side, sched = start_side("volcano", cp, build, work, conf_dir, None)
            c = Cluster(api)
            ensure_default_queue(c)
            _cluster(c, spec)
            phases["setup"] = time.monotonic() - t0
            log(f"Volcano up ({', '.join(side.procs)}) in {phases['setup']:.0f} s; the slice: {len(sl.jobs)} jobs, "
                f"{sl.window:.0f} s")
            observed = _drive(_Driver(c, core, NAMESPACE, sl, side, sched), poll_every, warmup_deadline, phases, log)
        finally:
            if side is not None:
                side.stop()
            cp.stop()
            if logs is not None and (cp.dir / "logs").is_dir():
                shutil.copytree(cp.dir / "logs", logs, dirs_exist_ok=True)
            shutil.rmtree(cp.dir, ignore_errors=True)
        phases["total"] = time.monotonic() - t0
    return observed, phases


def _cluster(c: Any, spec: DaySpec) -> None:
    """The day's queues (weight 1, Open) and nodes (as `gpu_day_workload.cluster_doc`, Ready)."""
    from controlplane import create_gpu_node
    from differential.run import poll

    for q in QUEUES:
        c.create({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": q},
                  "spec": {"weight": 1}})
    poll(lambda: {q["metadata"]["name"] for q in c.queues() if (q.get("status") or {}).get("state") == "Open"}
         >= set(QUEUES), 30, 0.1, "the day's queues Open")
    for i in range(spec.nodes):
        create_gpu_node(c.core, f"gpu-{i}", gpus=spec.gpus_per_node, cpu=str(12 * spec.gpus_per_node),
                        memory=f"{128 * spec.gpus_per_node}Gi")

    def ready(n: dict[str, Any]) -> bool:
        return any(x.get("type") == "Ready" and x.get("status") == "True"
                   for x in (n.get("status") or {}).get("conditions") or [])

    def nodes() -> list[dict[str, Any]]:  # the differential's `Cluster.nodes` lists its own label's nodes only
        return list(c._json(c.core.list_node(label_selector="type=kwok", _preload_content=False))["items"])

    poll(lambda: sum(map(ready, nodes())) == spec.nodes, 60, 0.1, "the nodes Ready")


class _Driver:
    """Submits the slice's jobs, watches their pods, completes each job's pods when its work is done."""

    def __init__(self, c: Any, core: Any, namespace: str, sl: Slice, side: Any, sched: Any) -> None:
        self.c, self.core, self.namespace, self.sl, self.side, self.sched = c, core, namespace, sl, side, sched
        self.seen = {j.name: Seen(j) for j in sl.jobs}

    def submit(self, s: Seen) -> None:
        s.submitted = time.monotonic()
        self.c.create(s.job.manifest)

    def _pods(self) -> dict[str, list[dict[str, Any]]]:
        pods: dict[str, list[dict[str, Any]]] = {}
        for pod in self.c.pods():
            job = (pod["metadata"].get("labels") or {}).get(JOB_LABEL)
            if job in self.seen and not pod["metadata"].get("deletionTimestamp"):
                pods.setdefault(job, []).append(pod)
        return pods

    def observe(self, clock_started: bool) -> None:
        """One poll: gangs that became whole (their work's end scheduled), gangs whose work ended; then, once the
        slice's clock runs, the pods of every job whose work is due are completed."""
        now = time.monotonic()
        pods = self._pods()
        for name, members in pods.items():
            s = self.seen[name]
            up = sum((p.get("status") or {}).get("phase") == "Running" for p in members)
            if s.whole is None and up >= s.job.pods:
                s.whole = now
                if s.job.role != "running":  # the running ones' work is counted from the slice's time 0
                    s.due = now + s.job.duration
            if s.whole is not None and s.done is None and s.completing and up < s.job.pods:
                s.done = now
        if clock_started:
            for s in self.seen.values():
                if s.due is not None and not s.completing and now >= s.due:
                    self._complete(pods.get(s.job.name, []))
                    s.completing = True

    def _complete(self, pods: list[dict[str, Any]]) -> None:
        from controlplane import COMPLETE_ANNOTATION

        for pod in pods:
            self.core.patch_namespaced_pod(pod["metadata"]["name"], self.namespace,
                                           {"metadata": {"annotations": {COMPLETE_ANNOTATION: "Succeeded"}}},
                                           _preload_content=False)

    def check(self) -> None:
        dead = self.side.check_alive()
        if dead:
            raise RuntimeError("; ".join(dead))

    def warm_up(self, poll_every: float, deadline: float) -> float:
        """The jobs running at the slice's start submitted and waited for; returns the slice's time 0."""
        running = self.sl.of_role("running")
        t0 = time.monotonic()
        for job in running:
            self.submit(self.seen[job.name])
        while any(self.seen[j.name].whole is None for j in running):
            self.observe(False)
            self.check()
            if time.monotonic() - t0 > deadline:
                late = [j.name for j in running if self.seen[j.name].whole is None]
                raise RuntimeError(f"the jobs running at the slice's start did not all run in {deadline:.0f} s: "
                                   f"{late}")
            time.sleep(poll_every)  # the poll's interval, not a synchronisation
        return self._gate(poll_every)

    def _gate(self, poll_every: float) -> float:
        """The jobs waiting at the slice's start, submitted with the scheduler stopped, one per second of the
        apiserver's clock in the slice's order (Volcano orders jobs created in the same second by their random
        UIDs; the simulator, which submits them at once, by name); then the scheduler started again, whose first
        cycle sees them all, as the simulator's does. Returns the slice's time 0."""
        from differential.run import poll

        self.sched.stop()
        for job in self.sl.of_role("waiting"):
            self.submit(self.seen[job.name])
            poll(lambda name=job.name: any(o.get("kind") == "Job" and o.get("name") == name
                                           for pg in self.c.podgroups()
                                           for o in pg["metadata"].get("ownerReferences") or []),
                 30, poll_every, f"the PodGroup of {job.name}")
            time.sleep(1.05 - time.time() % 1.0)  # into the next second: the next PodGroup's creation is later
        self.sched.restart("slice")
        start = time.monotonic()
        for job in self.sl.of_role("running"):
            self.seen[job.name].due = start + job.duration
        return start

    def run(self, start: float, poll_every: float, log: Callable[[str], None]) -> None:
        later = [self.seen[j.name] for j in self.sl.of_role("arrives")]  # in the slice's order
        end, next_line = start + self.sl.window, start + 30.0
        while (now := time.monotonic()) < end:
            while later and start + later[0].job.arrival <= now:
                self.submit(later.pop(0))
            self.observe(True)
            self.check()
            if now >= next_line:
                mine = [s for s in self.seen.values() if s.job.role != "running"]
                log(f"{now - start:.0f}/{self.sl.window:.0f} s: {sum(s.submitted is not None for s in mine)} "
                    f"submitted, {sum(s.whole is not None for s in mine)} ran whole")
                next_line += 30.0
            time.sleep(max(0.0, min(poll_every, end - time.monotonic())))  # the poll's interval

    def observed(self, start: float) -> list[Observed]:
        end = start + self.sl.window

        def clock(t: float | None) -> float | None:
            return None if t is None or t > end else t - start

        return [Observed(s.job.name, s.job.gpus, s.job.role, max(0.0, s.submitted - start), clock(s.whole),
                         clock(s.done)) for s in self.seen.values() if s.submitted is not None]


def _drive(driver: _Driver, poll_every: float, warmup_deadline: float, phases: dict[str, float],
           log: Callable[[str], None]) -> list[Observed]:
    sl = driver.sl
    t0 = time.monotonic()
    start = driver.warm_up(poll_every, warmup_deadline)
    phases["warmup"] = start - t0
    log(f"warm-up: {len(sl.of_role('running'))} running jobs up, {len(sl.of_role('waiting'))} waiting submitted, "
        f"the scheduler restarted, in {phases['warmup']:.1f} s; the slice's clock starts")
    driver.run(start, poll_every, log)
    phases["slice"] = time.monotonic() - start
    return driver.observed(start)
