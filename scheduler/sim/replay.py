"""Layer `sim`: replay a workload on the in-memory cluster with a simulated clock.

Each tick: the CronJob and JobFlow controllers make the Jobs that are due (`controllers.py`); jobs arrive; the job
controller (the same pure `scheduler.jobs` logic the real controllers run)
creates PodGroups, and pods once their PodGroup is admitted; kubelets start bound pods; a job's pods finish
`duration` seconds after its whole gang is running; then one scheduling cycle runs, followed, as in the
scheduler's loop, by the partial-gang policy on the simulated clock. When a tick changes
nothing, the clock jumps to the next arrival or completion, so a day-long trace replays in seconds.

Evictions are carried out as Kubernetes does (`InMemoryCluster.graceful`): a victim keeps its node through its
queue's notice and its grace period. Once it is gone, the job controller hears of it as Volcano's does
(pkg/controllers/job/job_controller_handler.go deletePod: a `PodEvicted` event, whose default action, with no
`policies` naming it, is SyncJob: the pod is recreated, `restart_delay` seconds later (default 0: at once);
`RestartJob` and the others as the Job says). A gang
that falls below its minimum stops working: once whole again it runs its whole `duration` again (the replay
assumes no checkpoint), so an evicted job ends later.

Each tick records what the report plots (`Tick`): GPUs held and GPUs held by running gangs, and per queue the
share of the cluster it holds beside the share it deserves. Each waiting job keeps the last `Status` the
scheduler published for it, so a job that waited or never started says why.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from scheduler.adapter.partial import PartialGangPolicy
from scheduler.adapter.snapshot import AdapterRules
from scheduler.api.convert import group_of
from scheduler.api.decision import Status
from scheduler.api.resources import CPU, GPU
from scheduler.api.snapshot import ClusterSnapshot, CycleResult
from scheduler.cycle import run_cycle
from scheduler.durations import format_duration
from scheduler.framework.conf import SchedulerConf
from scheduler.framework.memo import CycleMemo
from scheduler.jobs.expand import normalize_job, podgroup_for
from scheduler.jobs.lifecycle import decide, desired_pods, ttl_seconds
from scheduler.jobs.policies import pod_event
from scheduler.jobs.state import FINISHED, JobEvent, JobStatus, pod_view
from scheduler.sim.cluster import InMemoryCluster, SimPod
from scheduler.sim.controllers import DELETED, Controller, controllers_of
from scheduler.sim.items import WorkItem
from scheduler.sim.workload import ClusterSpec, Workload

Scheduler = Callable[[ClusterSnapshot], CycleResult]


@dataclass(slots=True)
class JobRun:
    item: WorkItem
    key: str  # namespace/name of its PodGroup
    min_available: int
    pods: int = 0
    status: JobStatus = field(default_factory=JobStatus)
    submitted: bool = False
    started: float | None = None  # the whole gang (minAvailable pods) first ran
    running_since: float | None = None  # ... runs now, since (None: not whole now)
    interrupted: int = 0  # times the gang fell below its minimum while running (evictions)
    # Each later wait: (the gang broke, it ran whole again; None: it did not by the end)
    rewaits: list[tuple[float, float | None]] = field(default_factory=list)
    done: bool = False  # the gang ran its whole duration: a pod of it that runs later finishes at once
    ended: float | None = None
    phase: str = "Waiting"
    decision: Status | None = None  # the last Status the scheduler published while the job waited
    # Every change of what the scheduler said while the job was not running whole: (since, Status). A new entry
    # when the reasons' kinds change; the same kinds with new numbers update the last entry in place.
    said: list[tuple[float, Status]] = field(default_factory=list)
    bound: int = 0  # pods holding a node at the replay's end (not finished, not gone)
    # Each time the gang broke while it ran whole: (when, seconds it had run whole since it last became whole);
    # that work is lost (the replay assumes no checkpoint)
    lost: list[tuple[float, float]] = field(default_factory=list)
    ttl: float | None = None  # a Volcano Job's spec.ttlSecondsAfterFinished
    collected: float | None = None  # when the finished Job was deleted past its ttlSecondsAfterFinished
    normalized: dict[str, Any] | None = None  # a Volcano Job as its webhook defaults it, made once (`job`)

    def job(self) -> dict[str, Any]:
        """The Volcano Job, defaulted (`normalize_job`) once: its controller syncs it every cycle."""
        if self.normalized is None:
            self.normalized = normalize_job(self.item.manifest)
        return self.normalized

    def hear(self, now: float, status: Status) -> None:
        """What the scheduler said of the job this cycle, while it waited (before it first ran, or again after its
        gang was broken: `decision` keeps the word before it first ran)."""
        if self.started is None:
            self.decision = status
        kinds = [r.kind for r in status.reasons]
        if self.said and [r.kind for r in self.said[-1][1].reasons] == kinds:
            self.said[-1] = (self.said[-1][0], status)
        else:
            self.said.append((now, status))

    @property
    def queue(self) -> str:
        return str((self.item.manifest.get("spec") or {}).get("queue") or "default")


@dataclass(frozen=True, slots=True)
class Tick:
    """One cycle's shares of the cluster's `Replay.resource`, for the report."""

    time: float
    held: float  # held by bound pods that have not finished
    busy: float  # ... of gangs that run (a pod waiting for its siblings does no work)
    queues: tuple[tuple[str, float, float | None], ...]  # (queue, share held, deserved share or None)


@dataclass(slots=True)
class Replay:
    cluster: InMemoryCluster
    runs: list[JobRun]
    utilisation: list[tuple[float, float, float]]  # (time, share of GPUs held, share in gangs that run) per tick
    partial_cycles: int
    cycles: int
    end: float
    stalled: bool
    ticks: list[Tick] = field(default_factory=list)
    resource: str = GPU  # what the shares are of: GPUs, or cpu on a cluster without GPUs


Stage = Callable[[str], None]  # what the replay is doing now, for the progress line (cluster build, pods, cycle N)
STAGE_EVERY = 1000  # nodes added, or pods created, between two stage calls


def _quiet(_: str) -> None:
    pass


def build_cluster(spec: ClusterSpec, workload: Workload, stage: Stage = _quiet) -> InMemoryCluster:
    cluster = InMemoryCluster(graceful=True)
    for name, value in spec.priority_classes.items():
        cluster.add_priority_class(name, value)
    nodes = len(spec.nodes)
    for i, node in enumerate(spec.nodes):
        if not i % STAGE_EVERY:
            stage(f"building the cluster: {i}/{nodes} nodes")
        cluster.add_node(node)
    for hypernode in spec.hypernodes:
        cluster.add_hypernode(hypernode)
    for pdb in spec.pdbs:
        cluster.add_pdb(pdb)
    for obj in spec.dra:  # before the pods: a pod's claims from templates are made when it is added
        cluster.add_dra(obj)
    for queue in (*spec.queues, *workload.queues):
        cluster.add_queue(queue)
    for quota in workload.resource_quotas:
        cluster.add_resource_quota(quota)
    if "default" not in cluster.queues:
        cluster.add_queue({"metadata": {"name": "default"}, "spec": {"weight": 1}})
    return cluster


def volcano_py(cluster: InMemoryCluster, conf: SchedulerConf, partial_gangs: PartialGangPolicy) -> Scheduler:
    """What the scheduler's loop runs every period (cache/runner.py): a cycle, then the partial-gang policy."""
    memo = CycleMemo()

    def cycle(snapshot: ClusterSnapshot) -> CycleResult:
        result = run_cycle(snapshot, conf, memo=memo)
        partial_gangs.apply(snapshot, result, cluster)
        return result

    return cycle


def _run_for(item: WorkItem) -> JobRun:
    meta = item.manifest["metadata"]
    key = f"{meta['namespace']}/{meta['name']}"
    if item.kind == "Job":
        job = normalize_job(item.manifest)
        pods = sum(int(t["replicas"]) for t in job["spec"]["tasks"])
        ttl = ttl_seconds(job)  # past int32 (no Job Volcano could read): not collected, as the controller does
        return JobRun(item, key, int(job["spec"]["minAvailable"]), pods, ttl=None if ttl is None else float(ttl))
    spec = item.manifest.get("spec") or {}
    return JobRun(item, key, int(spec.get("minMember", spec.get("minAvailable", 1))), 0)


class JobDriver:
    """The job controller and kubelets of the simulated cluster."""

    def __init__(self, cluster: InMemoryCluster, stage: Stage = _quiet, restart_delay: float = 0.0) -> None:
        self.cluster = cluster
        self.stage = stage
        self.restart_delay = restart_delay
        self.not_before: dict[tuple[str, str], float] = {}  # (job, pod name) -> when its controller recreates it

    def submit(self, run: JobRun) -> None:
        manifest = run.item.manifest
        if run.item.kind == "Job":
            self.cluster.add_podgroup(podgroup_for(normalize_job(manifest), self.cluster.priority_classes))
        else:
            self.cluster.add_podgroup(manifest)
        run.submitted = True
        run.phase = "Pending"

    def gone(self, run: JobRun, pod: SimPod, now: float) -> bool:
        """An evicted pod of the run is gone: Volcano's job controller raises PodEvicted for it (the Job's
        `policies` pick the action; none: SyncJob, which recreates it)."""
        if run.item.kind != "Job" or run.status.phase in FINISHED:
            return False
        if self.restart_delay > 0:
            self.not_before[(run.key, pod.task.name)] = now + self.restart_delay
        views = [pod_view(p.manifest) for p in self.cluster.pods_of(run.key)]
        return self.sync(run, now, pod_event(run.job(), pod_view(pod.manifest), None, views))

    def sync(self, run: JobRun, now: float, event: JobEvent | None = None) -> bool:
        """Carry out the lifecycle's decision for a Volcano Job; True if anything changed."""
        if run.item.kind != "Job" or run.status.phase in FINISHED:
            return False
        job = run.job()
        pods = self.cluster.pods_of(run.key)
        pg_phase = self.cluster.podgroup(run.key).get("status", {}).get("phase")
        decision = decide(job, run.status, [pod_view(p.manifest) for p in pods], pg_phase, event or JobEvent())
        changed = False
        existing = {p.task.name for p in pods}
        wanted = set(decision.pods_to_create())
        created = 0
        for pod in desired_pods(job, pg_phase, existing):
            if self.not_before and self.not_before.get((run.key, pod["metadata"]["name"]), now) > now:
                continue  # an evicted pod: its controller recreates it after the restart delay
            self.not_before.pop((run.key, pod["metadata"]["name"]), None)
            if pod["metadata"]["name"] in wanted:
                if not created % STAGE_EVERY and len(wanted) > STAGE_EVERY:
                    self.stage(f"creating the pods of {run.key}: {created}/{len(wanted)}")
                self.cluster.add_pod(pod, owned=True)  # made just now by desired_pods, for the cluster alone
                created += 1
                changed = True
        for name in decision.pods_to_delete():
            self.cluster.delete_pod(f"{run.key.split('/')[0]}/{name}")
            changed = True
        if decision.phase != run.status.phase:
            changed = True
        run.status = JobStatus(decision.phase, decision.retry_count, decision.version)
        run.phase = str(decision.phase)
        if decision.phase in FINISHED and run.ended is None:
            run.ended = now
            self._forget_restarts(run)
        return changed

    def _forget_restarts(self, run: JobRun) -> None:
        """An ended job's controller recreates nothing: its pending restarts go (no wake-up for them)."""
        if self.not_before:
            for key in [k for k in self.not_before if k[0] == run.key]:
                del self.not_before[key]

    def progress(self, run: JobRun, now: float) -> bool:
        """Note when the gang is up; finish its pods `duration` after that."""
        pods = self.cluster.pods_of(run.key)
        # A pod on its way out (deleted, in its grace period) does no work; one under notice still does.
        running = [p for p in pods if p.manifest["status"]["phase"] == "Running" and p.gone_at is None]
        if run.done:  # an elastic job's extras, bound after its work was done: nothing left to do
            for pod in running:
                self.cluster.finish_pod(pod.task.key)
            return bool(running)
        whole = bool(running) and len(running) >= run.min_available
        if run.running_since is not None and not whole:
            run.lost.append((now, now - run.running_since))
            run.running_since = None  # the gang was broken: its work is lost
            run.interrupted += 1
            run.rewaits.append((now, None))
            return True
        if run.running_since is None and whole:
            run.running_since = now
            if run.started is None:
                run.started = now
            elif run.rewaits and run.rewaits[-1][1] is None:
                run.rewaits[-1] = (run.rewaits[-1][0], now)
            if run.item.kind != "Job":
                run.phase = "Running"
        since = run.running_since
        if since is not None and now >= since + run.item.duration and running:
            run.done = True  # its pods leaving now is the work ending, not the gang breaking
            for pod in running:
                self.cluster.finish_pod(pod.task.key)
            if run.item.kind != "Job":
                run.ended, run.phase = now, "Completed"
            return True
        return False

    def delete(self, run: JobRun, now: float) -> bool:
        """A controller deleted the Job (CronJob's Replace, a JobFlow's retain policy): its PodGroup and pods go.
        A finished Job's deletion changes nothing the replay shows; it keeps its phase."""
        if run.ended is not None:
            return False
        self.cluster.delete_podgroup(run.key)
        run.ended, run.phase = now, DELETED
        self._forget_restarts(run)
        return True

    def collect(self, run: JobRun, now: float) -> None:
        """The TTL controller (Volcano's pkg/controllers/garbagecollector/garbagecollector.go): a finished Job
        past its `ttlSecondsAfterFinished` is deleted, its PodGroup and pods with it, so a long replay's snapshots
        do not carry every finished pod. At the first tick at or after the deadline (it wakes no tick of its own:
        a finished Job's deletion changes no scheduling decision)."""
        if run.ttl is None or run.ended is None or run.collected is not None or run.phase == DELETED:
            return
        if run.item.kind == "Job" and now >= run.ended + run.ttl:
            self.cluster.delete_podgroup(run.key)
            run.collected = now

    def next_restart(self, now: float) -> float | None:
        """When the next evicted pod is recreated (None: none waits)."""
        return min((t for t in self.not_before.values() if t > now), default=None)

    def next_finish(self, run: JobRun) -> float | None:
        if run.running_since is None or run.ended is not None:
            return None
        return run.running_since + run.item.duration


def _report_resource(cluster: InMemoryCluster) -> str:
    return GPU if cluster.total_gpus() else CPU


def _deserved(cluster: InMemoryCluster, result: CycleResult, resource: str) -> dict[str, int]:
    """What each queue deserves: the share proportion computed this cycle, else the queue's `spec.deserved`
    (capacity's), else nothing."""
    out = {name: q.deserved.get(resource) for name, q in cluster.queues.items() if q.deserved is not None}
    out.update({q.queue: q.deserved.get(resource) for q in result.queues if q.deserved is not None})
    return out


def _tick(cluster: InMemoryCluster, active: list[JobRun], result: CycleResult, resource: str, total: int) -> Tick:
    held: dict[str, int] = dict.fromkeys(cluster.queues, 0)
    busy = 0
    for run in active:
        used = cluster.used(resource, run.key)
        held[run.queue] = held.get(run.queue, 0) + used
        if run.running_since is not None:
            busy += used
    deserved = _deserved(cluster, result, resource)
    queues = tuple((q, units / total, deserved[q] / total if q in deserved else None) for q, units in held.items())
    return Tick(cluster.now, cluster.used(resource) / total, busy / total, queues)


def _before_cycle(cluster: InMemoryCluster, driver: JobDriver, controllers: list[Controller], runs: list[JobRun],
                  by_key: dict[str, JobRun], now: float) -> bool:
    """What happens at `now` before the scheduler's cycle: the controllers act, evicted pods go, jobs that arrived
    are submitted, running ones progress. Whether anything changed."""
    changed = False
    for controller in controllers:  # the CronJob and JobFlow controllers, before the Job controller
        created, doomed = controller.step(now, by_key)
        for key in doomed:
            changed |= driver.delete(by_key[key], now)
        for item in created:
            runs.append(new := _run_for(item))
            by_key[new.key] = new
            changed = True
    for pod in cluster.reap():  # evicted pods whose notice and grace period ran out
        gone_from = by_key.get(group_of(pod.manifest))
        changed = True
        if gone_from is not None and gone_from.ended is None:
            driver.gone(gone_from, pod, now)
    for run in runs:
        if not run.submitted and run.item.arrival <= now:
            driver.submit(run)
            changed = True
    for run in runs:
        if run.submitted and run.ended is None:
            changed |= driver.progress(run, now)
            changed |= driver.sync(run, now)
        elif run.ttl is not None:
            driver.collect(run, now)
    return changed | bool(cluster.start_bound_pods())


def replay(
    spec: ClusterSpec,
    workload: Workload,
    conf: SchedulerConf | None = None,
    *,
    scheduler: Scheduler | None = None,
    period: float = 1.0,
    horizon: float | None = None,
    partial_gangs: PartialGangPolicy | None = None,
    progress: Callable[[float, int, int], None] | None = None,
    stage: Stage = _quiet,
    restart_delay: float = 0.0,
    observe: Callable[[ClusterSnapshot], None] | None = None,
    incremental: bool = True,
) -> Replay:
    """Replay `workload`; `scheduler` defaults to volcano-py's cycle with `conf`, followed by `partial_gangs`
    (the scheduler's default timeout unless given) as the scheduler's loop runs it. `progress(now, finished, jobs)`
    is called after every cycle; `stage(text)` as the replay goes from one step to the next (the cluster build,
    the pods a job controller creates, each cycle), so a long step says what it is. `restart_delay`: seconds
    between an evicted pod being gone and its controller recreating it. `observe(snapshot)` sees what each cycle
    was given (analysis tools such as bench/gpu_day_why.py; it must not change it). `incremental`: each cycle's
    snapshot is built from the last one and what changed, as the scheduler's cache builds it (a day of 200 jobs:
    a third of the time of building it afresh); off, afresh every cycle (the tests that check the two agree)."""
    cluster = build_cluster(spec, workload, stage)
    if incremental:
        cluster.changes.start(AdapterRules(cluster.scheduler_names, cluster.default_queue))
    if scheduler is None:
        assert conf is not None
        scheduler = volcano_py(cluster, conf, partial_gangs or PartialGangPolicy())
    driver = JobDriver(cluster, stage, restart_delay)
    runs = sorted((_run_for(i) for i in workload.items), key=lambda r: (r.item.arrival, r.key))
    controllers = controllers_of(workload)
    last_arrival = max([r.item.arrival for r in runs] + [c.horizon() for c in controllers], default=0.0)
    durations = sum(r.item.duration for r in runs) + sum(c.duration for c in workload.controlled)
    limit = horizon if horizon is not None else last_arrival + 10 * durations + 3600
    by_key = {r.key: r for r in runs}
    total_gpu = cluster.total_gpus() or 1
    resource = _report_resource(cluster)
    total_of_resource = sum(n.allocatable.get(resource) for n in cluster.nodes.values()) or 1  # nodes stay put
    utilisation: list[tuple[float, float, float]] = []
    ticks: list[Tick] = []
    partial = cycles = 0
    now, stalled = 0.0, False
    while True:
        cluster.now = now
        changed = _before_cycle(cluster, driver, controllers, runs, by_key, now)
        stage(f"cycle {cycles + 1} at {format_duration(now)}: scheduling")
        snapshot = cluster.snapshot()
        if observe is not None:
            observe(snapshot)
        result = scheduler(snapshot)
        stage(f"cycle {cycles + 1} at {format_duration(now)}: binding {len(result.binds)} gangs")
        phases_before = {k: pg.manifest["status"].get("phase") for k, pg in cluster.podgroups.items()}
        cluster.apply(result)
        for status in result.podgroups:
            waiting = by_key.get(status.job)
            if waiting is not None and status.decision is not None and waiting.running_since is None:
                waiting.hear(now, status.decision)
        cycles += 1
        partial += bool(cluster.partially_bound_gangs())
        changed |= bool(result.binds or result.evictions) or any(
            s.phase.value != phases_before.get(s.job) for s in result.podgroups
        )
        for run in runs:
            if run.submitted and run.ended is None:
                changed |= driver.sync(run, now)
        active = [r for r in runs if r.submitted and r.ended is None]
        tick = _tick(cluster, active, result, resource, total_of_resource)
        ticks.append(tick)
        if resource == GPU:  # the same shares: counted once
            utilisation.append((now, tick.held, tick.busy))
        else:
            busy = sum(cluster.used_gpus(r.key) for r in active if r.running_since is not None)
            utilisation.append((now, cluster.used_gpus() / total_gpu, busy / total_gpu))
        if progress is not None:
            progress(now, sum(1 for r in runs if r.ended is not None), len(runs))
        wakes = [t for c in controllers if (t := c.wake(by_key, now)) is not None]
        if not active and all(r.submitted for r in runs) and not wakes:
            break
        upcoming = [r.item.arrival for r in runs if not r.submitted] + wakes
        upcoming += [t for r in runs if (t := driver.next_finish(r)) is not None]
        upcoming += [t for t in (cluster.next_reap(), driver.next_restart(now)) if t is not None]
        upcoming += [t for t in (result.look_again,) if t is not None and t > now]  # a minimum runtime ends
        if changed:
            now += period
        elif upcoming:
            now = max(now + period, min(upcoming))
        else:
            # Nothing will ever change. Stalled if a job is stuck waiting; jobs without a duration that run
            # for ever are not stuck.
            stalled = any(r.started is None for r in runs)
            break
        if now > limit:
            stalled = any(r.started is None for r in runs)
            break
    for run in runs:
        run.bound = sum(1 for p in cluster.pods_of(run.key) if p.gone_at is None and p.manifest["spec"].get(
            "nodeName") and p.manifest["status"]["phase"] in ("Pending", "Running"))
    return Replay(cluster, runs, utilisation, partial, cycles, now, stalled, ticks, resource)
