"""The pure step of the metrics: one cycle's result, its duration and the snapshot after it, turned into a
`CycleSample` of plain values, so the arithmetic is testable without a registry. Layer: metrics.

It reads `api` values and the queue-share arithmetic of `plugins/shares.py` (the sums the shares are built from);
`SchedulerMetrics.record()` writes a sample into the Prometheus objects.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from scheduler.api.job import JobInfo
from scheduler.api.phases import PodGroupPhase, TaskStatus
from scheduler.api.queue import QueueInfo
from scheduler.api.resources import CPU, MEMORY, PODS, ZERO, Resource
from scheduler.api.snapshot import ClusterSnapshot, CycleResult
from scheduler.framework.faults import JOB_ERRORS
from scheduler.plugins.shares import cluster_total, dimensions, real_capability, reserved_by_admitted, without_pods

SCHEDULED, UNSCHEDULABLE, ERROR = "scheduled", "unschedulable", "error"
PHASES = tuple(p.value for p in PodGroupPhase)
ON_SESSION_OPEN, ON_SESSION_CLOSE = "OnSessionOpen", "OnSessionClose"
# The eviction reasons the preempt and reclaim actions give their Statement commits, as Volcano's action names.
EVICTING_ACTIONS = {"Preempted": "preempt", "Reclaimed": "reclaim"}
# Keys the cycle writes into `CycleResult.timings` and `.counters` for the metrics here.
OPEN_SESSION_TIMING = "session:open"
EVICTION_TRANSACTIONS = "eviction_transactions:"  # + the eviction reason, one per committed statement


@dataclass(frozen=True, slots=True)
class QueueSample:
    queue: str
    allocated: Resource
    pending: Resource  # requests of the queue's tasks still waiting for a node
    deserved: Resource | None = None
    capability: Resource | None = None
    share: float | None = None
    overused: bool | None = None
    weight: int | None = None
    oldest_pending_seconds: float = 0.0  # how long the queue's oldest waiting gang has waited (0: none waits)
    request: Resource = ZERO  # allocated + what pending tasks ask for (Volcano's proportion `attr.request`)
    inqueue: Resource = ZERO  # what admitted jobs' minResources still reserve (Volcano's `attr.inqueue`)
    real_capability: Resource | None = None  # min(capability, cluster total - others' guarantees)


@dataclass(frozen=True, slots=True)
class JobSample:
    """One PodGroup's per-job values (Volcano labels these with the job's name, so they leave with the job)."""

    uid: str
    name: str
    namespace: str
    queue: str
    creation: float  # unix seconds
    bound_tasks: int = 0  # tasks bound this cycle
    unready_tasks: int | None = None  # minAvailable short by (0 when ready); None: no tasks, or finished
    ready: bool = True
    share: float = 0.0  # dominant share of the cluster (drf's job share)


@dataclass(frozen=True, slots=True)
class CycleSample:
    e2e_ms: float
    action_ms: dict[str, float] = field(default_factory=dict)
    plugin_ms: dict[tuple[str, str], float] = field(default_factory=dict)  # (plugin, OnSession) -> ms
    attempts: dict[str, int] = field(default_factory=dict)  # result -> gangs
    preemption_victims: int = 0
    unschedulable_jobs: int = 0
    queues: tuple[QueueSample, ...] = ()
    podgroup_phases: dict[str, int] = field(default_factory=dict)  # phase -> PodGroups
    pending_durations: tuple[float, ...] = ()  # seconds each gang started this cycle had waited
    open_session_ms: float | None = None  # snapshot + session open (plugins' OnSessionOpen)
    eviction_transactions: dict[str, int] = field(default_factory=dict)  # action -> committed statements
    job_errors: dict[str, int] = field(default_factory=dict)  # plugin -> jobs it failed on this cycle
    jobs: tuple[JobSample, ...] | None = None  # None: no snapshot, the per-job series are left as they are
    now: float = 0.0
    assumed_ms: tuple[float, ...] = ()  # per task bound this cycle: from its creation to now
    pending_tasks: tuple[tuple[str, float], ...] = ()  # (uid, creation) of every task waiting for a node
    cpu_ms: float | None = None  # the process's CPU (all its threads) from the cycle's start to its end


def _timings(result: CycleResult, prefix: str) -> dict[str, float]:
    return {key[len(prefix) :]: seconds * 1000.0 for key, seconds in result.timings.items() if key.startswith(prefix)}


def _plugin_timings(result: CycleResult) -> dict[tuple[str, str], float]:
    """`plugin:<name>:OnSessionOpen` -> (name, OnSessionOpen); a bare `plugin:<name>` counts as its open."""
    timings: dict[tuple[str, str], float] = {}
    for key, ms in _timings(result, "plugin:").items():
        name, _, stage = key.rpartition(":")
        if stage not in (ON_SESSION_OPEN, ON_SESSION_CLOSE):
            name, stage = key, ON_SESSION_OPEN
        timings[(name, stage)] = timings.get((name, stage), 0.0) + ms
    return timings


def _waiting(job: JobInfo) -> bool:
    """A gang that wants more pods placed and is short of its minimum (or not admitted yet)."""
    if job.phase == PodGroupPhase.COMPLETED:
        return False
    pending = job.count(TaskStatus.PENDING)
    if job.phase == PodGroupPhase.PENDING:
        return True
    return pending > 0 and not job.is_ready()


def _pending_request(job: JobInfo, request: Resource) -> Resource:
    """`request` (what the job's pending tasks ask for), or its minResources while its pods may not exist."""
    if request.is_zero() and job.phase == PodGroupPhase.PENDING and job.min_resources is not None:
        return job.min_resources  # its pods may not exist yet (the job controller waits for admission)
    return request


# The statuses `JobInfo.allocated()` sums: a job with none of them holds nothing (most waiting jobs).
_HOLDING = (TaskStatus.ALLOCATED, TaskStatus.BINDING, TaskStatus.BOUND, TaskStatus.RUNNING)


def _dominant_share(held: Resource, total_units: dict[str, int]) -> float:
    """drf's job share (Volcano's plugins/drf/drf.go calculateShare): the largest held/total over the cluster's
    resources; in floats, as Volcano exports it (drf's own ordering uses exact fractions)."""
    if held.is_zero():
        return 0.0
    return max((held.get(name) / units for name, units in total_units.items()), default=0.0)


def _unready_tasks(job: JobInfo) -> int | None:
    """Volcano's gang OnSessionClose (plugins/gang/gang.go): minAvailable less the tasks placed, for a gang that
    is not ready; 0 for one that is; nothing for a job without tasks or one that has finished."""
    if not job.tasks or job.phase == PodGroupPhase.COMPLETED:
        return None
    if job.is_ready():
        return 0
    return max(0, job.min_available - job.ready_task_num() - job.pending_best_effort_num())


def _real_capability(queue: QueueInfo, total: Resource, guarantees: Resource) -> Resource:
    limit, _ = real_capability(queue, total, guarantees)
    scalars = {name: units for name, units in limit.items() if name not in (CPU, MEMORY, PODS)}
    return Resource.of(cpu=limit.get(CPU, 0), memory=limit.get(MEMORY, 0), scalars=scalars)


def sample_cycle(
    result: CycleResult, seconds: float, snapshot: ClusterSnapshot | None = None, *, snapshot_seconds: float = 0.0,
    cpu_seconds: float | None = None,
) -> CycleSample:
    """What one cycle says: its latencies, its gang attempts and, given the snapshot after the cycle (the
    session works on the snapshot's infos, so it holds the cycle's placements), the state of queues and gangs.
    `snapshot_seconds` is how long taking the snapshot took (Volcano's open_session_duration includes it);
    `cpu_seconds` the process's CPU time over the cycle (None: not measured)."""
    bound_jobs = {gang.job: len(gang.binds) for gang in result.binds if gang.binds}
    deferred = frozenset(result.deferred)
    attempts: Counter[str] = Counter()
    phases: Counter[str] = Counter()
    durations: list[float] = []
    unschedulable = 0
    pending: dict[str, Resource] = {}
    request: dict[str, Resource] = {}
    inqueue: dict[str, Resource] = {}
    oldest: dict[str, float] = {}
    jobs = snapshot.jobs.values() if snapshot is not None else ()
    now = snapshot.now if snapshot is not None else 0.0
    total = cluster_total(snapshot.nodes.values()) if snapshot is not None else ZERO
    total_units = dimensions(total)
    job_samples: list[JobSample] = []
    pending_tasks: list[tuple[str, float]] = []
    for job in jobs:
        phases[job.phase.value] += 1
        waiting = _waiting(job)
        if job.key in bound_jobs:
            attempts[SCHEDULED] += 1
            if bound_jobs[job.key] >= job.ready_task_num() and job.creation:
                durations.append(max(0.0, now - job.creation))  # every ready pod was bound now: it started
        elif waiting and job.phase != PodGroupPhase.PENDING and job.key not in deferred:
            attempts[UNSCHEDULABLE] += 1  # (a job allocate's budget left untried was not attempted)
        if waiting:
            unschedulable += 1
            if job.creation:
                oldest[job.queue] = max(oldest.get(job.queue, 0.0), now - job.creation)
        held = without_pods(job.allocated()) if job.count(*_HOLDING) else ZERO
        if job.phase != PodGroupPhase.COMPLETED:
            asked = job.pending_request() if job.count(TaskStatus.PENDING) else ZERO
            pending[job.queue] = pending.get(job.queue, ZERO) + _pending_request(job, asked)
            request[job.queue] = request.get(job.queue, ZERO) + held + without_pods(asked)
            if job.min_resources is not None:
                inqueue[job.queue] = inqueue.get(job.queue, ZERO) + reserved_by_admitted(job)
        pending_tasks.extend((task.key, task.creation) for task in job.with_status(TaskStatus.PENDING))
        job_samples.append(
            JobSample(
                uid=job.key,
                name=job.name,
                namespace=job.namespace,
                queue=job.queue,
                creation=job.creation,
                bound_tasks=bound_jobs.get(job.key, 0),
                unready_tasks=_unready_tasks(job),
                ready=job.is_ready(),
                share=_dominant_share(held, total_units),
            )
        )
    if snapshot is None:
        attempts[SCHEDULED] += len(bound_jobs)
    queue_info = snapshot.queues if snapshot is not None else {}
    guarantees = Resource.total(without_pods(q.guarantee) for q in queue_info.values())
    queues = []
    for status in result.queues:
        info = queue_info.get(status.queue)
        queues.append(
            QueueSample(
                queue=status.queue,
                allocated=status.allocated,
                pending=pending.get(status.queue, ZERO),
                deserved=status.deserved,
                capability=info.capability if info is not None else None,
                share=status.share,
                overused=status.overused,
                weight=info.weight if info is not None else None,
                oldest_pending_seconds=max(0.0, oldest.get(status.queue, 0.0)),
                request=request.get(status.queue, ZERO),
                inqueue=inqueue.get(status.queue, ZERO),
                real_capability=_real_capability(info, total, guarantees) if info is not None else None,
            )
        )
    return CycleSample(
        e2e_ms=seconds * 1000.0,
        cpu_ms=cpu_seconds * 1000.0 if cpu_seconds is not None else None,
        action_ms=_timings(result, "action:"),
        plugin_ms=_plugin_timings(result),
        attempts=dict(attempts),
        preemption_victims=len(result.evictions),
        unschedulable_jobs=unschedulable,
        queues=tuple(queues),
        podgroup_phases={phase: phases.get(phase, 0) for phase in PHASES},
        pending_durations=tuple(durations),
        open_session_ms=_open_session_ms(result, snapshot_seconds),
        eviction_transactions=_eviction_transactions(result),
        job_errors={k.removeprefix(JOB_ERRORS): v for k, v in result.counters.items() if k.startswith(JOB_ERRORS)},
        jobs=tuple(job_samples) if snapshot is not None else None,
        now=now,
        assumed_ms=_assumed_ms(result, snapshot),
        pending_tasks=tuple(pending_tasks),
    )


def _open_session_ms(result: CycleResult, snapshot_seconds: float) -> float | None:
    opened = result.timings.get(OPEN_SESSION_TIMING)
    return None if opened is None else (snapshot_seconds + opened) * 1000.0


def _eviction_transactions(result: CycleResult) -> dict[str, int]:
    found: dict[str, int] = {}
    for key, count in result.counters.items():
        if not key.startswith(EVICTION_TRANSACTIONS):
            continue
        action = EVICTING_ACTIONS.get(key.removeprefix(EVICTION_TRANSACTIONS))
        if action is not None:  # Volcano counts preempt, reclaim, gangpreempt and gangreclaim only
            found[action] = found.get(action, 0) + count
    return found


def _assumed_ms(result: CycleResult, snapshot: ClusterSnapshot | None) -> tuple[float, ...]:
    """Volcano observes `Assumed` when a statement commits a task (framework/statement.go): from the pod's
    creation to the cycle that bound it."""
    if snapshot is None:
        return ()
    latencies = []
    for gang in result.binds:
        job = snapshot.jobs.get(gang.job)
        for task_uid, _ in gang.binds:
            task = job.tasks.get(task_uid) if job is not None else None
            if task is not None and task.creation:
                latencies.append(max(0.0, snapshot.now - task.creation) * 1000.0)
    return tuple(latencies)
