"""Every Prometheus object of volcano-py, the pure functions that turn a cycle into metric values, and the
HTTP server for `/metrics`, `/healthz` and `/readyz`.

Layer: beside `cache` (it reads `api` values and proportion's resource arithmetic; `cache` and `cli` call it).

Every family Volcano's scheduler exports (`pkg/scheduler/metrics/*.go`) is here with Volcano's name, type,
labels and buckets, so Volcano's dashboards carry over (tests/test_volcano_metrics.py checks against the
source): latencies in milliseconds, cpu in millicores, memory in bytes, and scalar resources (GPUs, ...) in
milli-units as Volcano's `ScalarResources` hold them (8 GPUs = 8000). What Volcano lacks is added in seconds
(`volcano_podgroup_pending_duration_seconds`) or whole units (`volcano_queue_allocated_gpu`,
`volcano_queue_pending_gpu`, the names users search for). Labels are bounded (queue, action, plugin, resource,
result, status, stage) except in Volcano's per-job families, which name the job as Volcano's do and are
removed with it.

Two steps, so the arithmetic is testable without a registry: `sample_cycle()` (pure) turns a `CycleResult`,
its duration and the post-cycle snapshot into a `CycleSample`; `SchedulerMetrics.record()` writes a sample
into the Prometheus objects of one registry. Serve them with `exposition()`, not prometheus_client's
`generate_latest`: two of Volcano's counters have no `_total` (see `ExactNameCounter`).
"""

from __future__ import annotations

import logging
import math
import socket
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, Gauge, Histogram, Metric
from prometheus_client import Counter as PromCounter
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from scheduler.api.job import JobInfo
from scheduler.api.queue import QueueInfo
from scheduler.api.resources import CPU, GPU, MEMORY, PODS, ZERO, Resource
from scheduler.api.snapshot import ClusterSnapshot, CycleResult
from scheduler.api.status import PodGroupPhase, TaskStatus
from scheduler.plugins.shares import cluster_total, dimensions, real_capability, reserved_by_admitted, without_pods

log = logging.getLogger("volcano_py.metrics")


def exponential_buckets_range(low: float, high: float, count: int) -> tuple[float, ...]:
    """client_golang's `prometheus.ExponentialBucketsRange`: `count` buckets from `low` to `high`, each the last
    times a constant factor, computed as Go computes them so that the `le` bounds match Volcano's."""
    growth = math.pow(high / low, 1.0 / (count - 1))
    return tuple(low * math.pow(growth, i) for i in range(count))


# Volcano's bucket layouts (pkg/scheduler/metrics/metrics.go), so a heatmap or quantile reads the same.
SESSION_BUCKETS_MS = exponential_buckets_range(1, 5000, 20)  # e2e_scheduling_latency, open_session_duration
JOB_E2E_BUCKETS_MS = exponential_buckets_range(100, 120000, 30)
PLUGIN_BUCKETS_MS = exponential_buckets_range(0.1, 100, 15)
ACTION_BUCKETS_MS = exponential_buckets_range(1, 2000, 20)
TASK_BUCKETS_MS = exponential_buckets_range(50, 60000, 30)
STAGE_BUCKETS_MS = exponential_buckets_range(0.1, 500, 20)
PENDING_BUCKETS_S = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0, 21600.0, 86400.0)

SCHEDULED, UNSCHEDULABLE, ERROR = "scheduled", "unschedulable", "error"
PHASES = tuple(p.value for p in PodGroupPhase)
ON_SESSION_OPEN, ON_SESSION_CLOSE = "OnSessionOpen", "OnSessionClose"
# Volcano's stages of task_scheduling_latency_milliseconds and scheduling_stage_duration_milliseconds.
STAGE_WATCHED, STAGE_ASSUMED, STAGE_PREBOUND, STAGE_BOUND = "Watched", "Assumed", "PreBound", "Bound"
STAGE_PREBIND, STAGE_BIND = "PreBind", "Bind"
# The eviction reasons the preempt and reclaim actions give their Statement commits, as Volcano's action names.
EVICTING_ACTIONS = {"Preempted": "preempt", "Reclaimed": "reclaim"}
# Keys the cycle writes into `CycleResult.timings` and `.counters` for the metrics here.
OPEN_SESSION_TIMING = "session:open"
EVICTION_TRANSACTIONS = "eviction_transactions:"  # + the eviction reason, one per committed statement


# ---- pure: a cycle -> values ---------------------------------------------------------------------------
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
    jobs: tuple[JobSample, ...] | None = None  # None: no snapshot, the per-job series are left as they are
    now: float = 0.0
    assumed_ms: tuple[float, ...] = ()  # per task bound this cycle: from its creation to now
    pending_tasks: tuple[tuple[str, float], ...] = ()  # (uid, creation) of every task waiting for a node


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
    result: CycleResult, seconds: float, snapshot: ClusterSnapshot | None = None, *, snapshot_seconds: float = 0.0
) -> CycleSample:
    """What one cycle says: its latencies, its gang attempts and, given the snapshot after the cycle (the
    session works on the snapshot's infos, so it holds the cycle's placements), the state of queues and gangs.
    `snapshot_seconds` is how long taking the snapshot took (Volcano's open_session_duration includes it)."""
    bound_jobs = {gang.job: len(gang.binds) for gang in result.binds if gang.binds}
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
        if job.uid in bound_jobs:
            attempts[SCHEDULED] += 1
            if bound_jobs[job.uid] >= job.ready_task_num() and job.creation:
                durations.append(max(0.0, now - job.creation))  # every ready pod was bound now: it started
        elif waiting and job.phase != PodGroupPhase.PENDING:
            attempts[UNSCHEDULABLE] += 1
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
        pending_tasks.extend((task.uid, task.creation) for task in job.with_status(TaskStatus.PENDING))
        job_samples.append(
            JobSample(
                uid=job.uid,
                name=job.name,
                namespace=job.namespace,
                queue=job.queue,
                creation=job.creation,
                bound_tasks=bound_jobs.get(job.uid, 0),
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


def milli(name: str, units: int) -> float:
    """A scalar resource in Volcano's metric unit (milli-units; volcano-py keeps byte-sized scalars in bytes)."""
    if name.startswith("hugepages-") or name == "ephemeral-storage":
        return float(units) * 1000.0
    return float(units)


def scalar_items(resource: Resource) -> Iterable[tuple[str, int]]:
    return ((name, units) for name, units in resource.scalars if name not in (MEMORY, PODS))


# ---- a counter under its exact name ----------------------------------------------------------------------
class _ExactCounterFamily(Metric):
    """A counter family whose samples carry the family's own name, with no `_total` appended."""

    def __init__(self, name: str, documentation: str) -> None:
        Metric.__init__(self, name, documentation, "counter")


class ExactNameCounter:
    """A counter exported under exactly its name, as client_golang exports `volcano_total_preemption_attempts`
    and `volcano_job_retry_counts`. prometheus_client's Counter always appends `_total` to the samples and the
    TYPE line (OpenMetrics requires it), so Volcano's dashboard panel on the bare name would find nothing.
    `exposition()` renders these families as the Go client does; `registry.get_sample_value(name)` reads them."""

    def __init__(self, name: str, documentation: str, labelnames: tuple[str, ...] = (), *,
                 registry: CollectorRegistry) -> None:
        self.name, self.documentation, self.labelnames = name, documentation, labelnames
        self._values: dict[tuple[str, ...], float] = {} if labelnames else {(): 0.0}
        self._lock = threading.Lock()
        registry.register(self)

    def inc(self, *labels: str, amount: float = 1.0) -> None:
        if len(labels) != len(self.labelnames):
            raise ValueError(f"{self.name}: expected labels {self.labelnames}, got {labels}")
        with self._lock:
            self._values[labels] = self._values.get(labels, 0.0) + amount

    def remove(self, *labels: str) -> None:
        with self._lock:
            self._values.pop(labels, None)

    def collect(self) -> Iterable[Metric]:
        family = _ExactCounterFamily(self.name, self.documentation)
        with self._lock:
            for labels, value in self._values.items():
                family.add_sample(self.name, dict(zip(self.labelnames, labels, strict=True)), value)
        return [family]


class _Families:
    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterable[Metric]:
        return self.families


def exposition(registry: CollectorRegistry = REGISTRY) -> bytes:
    """The Prometheus text format (0.0.4) of `registry`, as `generate_latest` writes it, except that an
    `ExactNameCounter` is written as client_golang writes a counter: `# TYPE name counter` and `name value`."""
    parts = []
    for family in registry.collect():
        if isinstance(family, _ExactCounterFamily):
            as_gauge = Metric(family.name, family.documentation, "gauge")
            as_gauge.samples = family.samples
            text = generate_latest(_Families([as_gauge]))
            gauge_line, counter_line = (f"# TYPE {family.name} {kind}\n".encode() for kind in ("gauge", "counter"))
            parts.append(text.replace(gauge_line, counter_line, 1))
        else:
            parts.append(generate_latest(_Families([family])))
    return b"".join(parts)


# ---- the Prometheus objects ----------------------------------------------------------------------------
# Volcano's families that volcano-py leaves without series, and why (README.md, "Metrics", says the same):
#  - volcano_scheduling_stage_duration_milliseconds{stage="Predicate"|"Scoring"}: volcano-py filters and
#    scores a whole gang on arrays at once, so there is no per-task predicate or scoring step to time; its
#    PreBind and Bind stages are observed by the cache when it binds.
#  - volcano_namespace_share, volcano_namespace_weight, volcano_namespace_weighted_share: Volcano declares them
#    but nothing in Volcano sets them (drf's namespace fairness is gone), so Volcano never exports them either;
#    volcano-py does not register them (tests/test_volcano_metrics.py checks that Volcano still never sets them).
# Per-job series (job_name, job_id: Volcano's labels) are removed when the PodGroup leaves the cluster.
PER_JOB_LABELS = frozenset({"job_name", "job_namespace", "job_id", "job_ns", "queue"})


class SchedulerMetrics:
    """All of the scheduler's Prometheus objects, registered on one registry (a fresh one in tests)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        r = registry if registry is not None else REGISTRY
        self.registry = r
        self.declared: dict[str, tuple[str, tuple[str, ...]]] = {}  # family -> (type, label names)
        q, qr = ("queue_name",), ("queue_name", "resource")
        job = ("job_name", "queue", "job_namespace")
        # -- Volcano's, pkg/scheduler/metrics/metrics.go
        self.e2e = self._histogram(
            "volcano_e2e_scheduling_latency_milliseconds",
            "One scheduling cycle end to end (snapshot, actions, binds and status writes), in milliseconds",
            (), SESSION_BUCKETS_MS,
        )
        self.open_session = self._histogram(
            "volcano_open_session_duration_milliseconds",
            "Opening a scheduling session (cache snapshot and plugins' OnSessionOpen), in milliseconds",
            (), SESSION_BUCKETS_MS,
        )
        self.job_e2e = self._histogram(
            "volcano_e2e_job_scheduling_latency_milliseconds",
            "From a PodGroup's creation to a cycle that bound its tasks, once per task bound, in milliseconds",
            (), JOB_E2E_BUCKETS_MS,
        )
        self.job_duration = self._gauge(
            "volcano_e2e_job_scheduling_duration",
            "From a PodGroup's creation to the last cycle that bound one of its tasks, in milliseconds", job,
        )
        self.job_start = self._gauge(
            "volcano_e2e_job_scheduling_start_time", "A PodGroup's creation time, in unix seconds", job
        )
        self.job_last = self._gauge(
            "volcano_e2e_job_scheduling_last_time",
            "When a cycle last bound a task of a PodGroup, in unix seconds", job,
        )
        self.plugin = self._histogram(
            "volcano_plugin_scheduling_latency_milliseconds",
            "Time one plugin took to open or close a session, in milliseconds",
            ("plugin", "OnSession"), PLUGIN_BUCKETS_MS,
        )
        self.action = self._histogram(
            "volcano_action_scheduling_latency_milliseconds",
            "Time one action took in a cycle, in milliseconds", ("action",), ACTION_BUCKETS_MS,
        )
        self.task_latency = self._histogram(
            "volcano_task_scheduling_latency_milliseconds",
            "From a pod's creation to a stage (Watched, Assumed, PreBound, Bound), in milliseconds",
            ("stage",), TASK_BUCKETS_MS,
        )
        self.stage = self._histogram(
            "volcano_scheduling_stage_duration_milliseconds",
            "Time one per-task stage took (PreBind, Bind), in milliseconds", ("stage",), STAGE_BUCKETS_MS,
        )
        self.attempts = PromCounter(
            "volcano_schedule_attempts",
            "Gang scheduling attempts by result: scheduled, unschedulable, error",
            ["result"],
            registry=r,
        )
        self.declared["volcano_schedule_attempts_total"] = ("counter", ("result",))
        for result in (SCHEDULED, UNSCHEDULABLE, ERROR):
            self.attempts.labels(result)  # present at 0 from the start, so rate() works at the first event
        self.victims = self._gauge(
            "volcano_pod_preemption_victims", "Pods evicted (preempted or reclaimed) in the last cycle", ()
        )
        self.preemption_attempts = self._exact_counter(
            "volcano_total_preemption_attempts", "Cycles that evicted pods", ()
        )
        self.eviction_transactions = PromCounter(
            "volcano_eviction_transactions",
            "Committed statements that evicted pods, by action (preempt, reclaim)",
            ["action"],
            registry=r,
        )
        self.declared["volcano_eviction_transactions_total"] = ("counter", ("action",))
        self.unschedule_tasks = self._gauge(
            "volcano_unschedule_task_count",
            "Tasks a gang is short of its minAvailable after the last cycle (0: ready)", ("job_id",),
        )
        self.unschedulable = self._gauge(
            "volcano_unschedule_job_count", "Gangs waiting after the last cycle (not admitted or short of pods)", ()
        )
        # -- Volcano's, pkg/scheduler/metrics/job.go
        self.job_share = self._gauge(
            "volcano_job_share", "Dominant share of the cluster one job holds (drf's job share)", ("job_ns", "job_id")
        )
        self.job_retries = self._exact_counter(
            "volcano_job_retry_counts", "Cycles that closed with the gang not ready", ("job_id",)
        )
        # -- volcano-py's own
        self.job_status = self._gauge(
            "volcano_job_status_count", "PodGroups by phase after the last cycle", ("status",)
        )
        self.pending_duration = Histogram(
            "volcano_podgroup_pending_duration_seconds",
            "Seconds from a PodGroup's creation to the cycle that bound its gang",
            buckets=PENDING_BUCKETS_S,
            registry=r,
        )
        self.declared["volcano_podgroup_pending_duration_seconds"] = ("histogram", ())
        self.oldest_pending = self._gauge(
            "volcano_queue_oldest_pending_podgroup_seconds",
            "How long the oldest waiting gang of a queue has waited, in seconds (0: none waits)", q,
        )
        # -- Volcano's, pkg/scheduler/metrics/queue.go
        self.queue_gauges: dict[str, Gauge] = {}
        for kind, text in (
            ("allocated", "Allocated"), ("request", "Requested (allocated + pending tasks)"),
            ("deserved", "Deserved"), ("capacity", "Capability of"),
            ("real_capacity", "Real capability (capability within the cluster less others' guarantees) of"),
            ("inqueue", "Reserved by admitted jobs' minResources not yet held, of"),
        ):
            self._queue_gauge(f"volcano_queue_{kind}_milli_cpu", f"{text} cpu of one queue, in millicores", q)
            self._queue_gauge(f"volcano_queue_{kind}_memory_bytes", f"{text} memory of one queue, in bytes", q)
            self._queue_gauge(
                f"volcano_queue_{kind}_scalar_resources",
                f"{text} scalar resource of one queue, in milli-units (8 GPUs = 8000)",
                qr,
            )
        self._queue_gauge("volcano_queue_share", "Largest allocated/deserved ratio of one queue", q)
        self._queue_gauge("volcano_queue_weight", "Weight of one queue", q)
        self._queue_gauge(
            "volcano_queue_overused", "1 when a queue has reached its deserved share on every resource", q
        )
        self._queue_gauge("volcano_queue_allocated_gpu", "GPUs (nvidia.com/gpu) allocated to one queue", q)
        self._queue_gauge("volcano_queue_pending_gpu", "GPUs (nvidia.com/gpu) requested by one queue's waiting pods", q)
        self._series: dict[str, set[tuple[str, ...]]] = {}
        self._jobs: dict[str, JobSample] = {}  # uid -> the job's labels, for its series' removal
        self._watched: set[str] = set()  # pending task uids whose Watched latency was observed

    def _histogram(self, name: str, help_text: str, labels: tuple[str, ...], buckets: tuple[float, ...]) -> Histogram:
        self.declared[name] = ("histogram", labels)
        return Histogram(name, help_text, labels, buckets=buckets, registry=self.registry)

    def _gauge(self, name: str, help_text: str, labels: tuple[str, ...]) -> Gauge:
        self.declared[name] = ("gauge", labels)
        return Gauge(name, help_text, labels, registry=self.registry)

    def _exact_counter(self, name: str, help_text: str, labels: tuple[str, ...]) -> ExactNameCounter:
        self.declared[name] = ("counter", labels)
        return ExactNameCounter(name, help_text, labels, registry=self.registry)

    def _queue_gauge(self, name: str, help_text: str, labels: tuple[str, ...]) -> None:
        self.queue_gauges[name] = self._gauge(name, help_text, labels)

    # -- writing ------------------------------------------------------------------------------------------
    def record(self, sample: CycleSample) -> None:
        self.e2e.observe(sample.e2e_ms)
        if sample.open_session_ms is not None:
            self.open_session.observe(sample.open_session_ms)
        for action, ms in sample.action_ms.items():
            self.action.labels(action).observe(ms)
        for (plugin, on_session), ms in sample.plugin_ms.items():
            self.plugin.labels(plugin, on_session).observe(ms)
        for result, count in sample.attempts.items():
            if count:
                self.attempts.labels(result).inc(count)
        self.victims.set(sample.preemption_victims)
        if sample.preemption_victims:
            self.preemption_attempts.inc()
        for action, count in sample.eviction_transactions.items():
            self.eviction_transactions.labels(action).inc(count)
        self.unschedulable.set(sample.unschedulable_jobs)
        for phase, count in sample.podgroup_phases.items():
            self.job_status.labels(phase).set(count)
        for seconds in sample.pending_durations:
            self.pending_duration.observe(seconds)
        for ms in sample.assumed_ms:
            self.task_latency.labels(STAGE_ASSUMED).observe(ms)
        self._record_watched(sample)
        if sample.jobs is not None:
            self._record_jobs(sample.jobs, sample.now)
        self._record_queues(sample.queues)

    def record_error(self) -> None:
        """A cycle that raised: its gangs were not attempted; counted once as an error."""
        self.attempts.labels(ERROR).inc()

    def record_bind(
        self, bind_seconds: float, since_creation: float | None, prebind_seconds: float | None = None
    ) -> None:
        """One pod bound (pkg/scheduler/cache/cache.go observes the same): the Bind stage, the PreBind stage when
        bind annotations were written first, and the pod's latency from creation to PreBound and Bound."""
        self.stage.labels(STAGE_BIND).observe(bind_seconds * 1000.0)
        if prebind_seconds is not None:
            self.stage.labels(STAGE_PREBIND).observe(prebind_seconds * 1000.0)
        if since_creation is not None:
            if prebind_seconds is not None:
                prebound = max(0.0, since_creation - bind_seconds)
                self.task_latency.labels(STAGE_PREBOUND).observe(prebound * 1000.0)
            self.task_latency.labels(STAGE_BOUND).observe(max(0.0, since_creation) * 1000.0)

    def _record_watched(self, sample: CycleSample) -> None:
        """Volcano observes `Watched` when its cache first sees a pending pod; volcano-py, at the first cycle
        whose snapshot holds it (at most one period later)."""
        if sample.jobs is None:
            return
        pending = dict(sample.pending_tasks)
        for uid in pending.keys() - self._watched:
            if pending[uid]:
                self.task_latency.labels(STAGE_WATCHED).observe(max(0.0, sample.now - pending[uid]) * 1000.0)
        self._watched = set(pending)

    def _record_jobs(self, jobs: tuple[JobSample, ...], now: float) -> None:
        seen: dict[str, JobSample] = {}
        for job in jobs:
            before = self._jobs.get(job.uid)
            seen[job.uid] = job
            if job == before and not job.bound_tasks:  # most jobs, most cycles: every value is as written
                if job.unready_tasks is not None and not job.ready:
                    self.job_retries.inc(job.name)
                continue
            if before is not None and (before.name, before.queue, before.namespace) != (
                job.name, job.queue, job.namespace
            ):
                self._remove_job(before)
            labels = (job.name, job.queue, job.namespace)
            if job.creation:
                self.job_start.labels(*labels).set(job.creation)
            if job.bound_tasks:
                elapsed_ms = max(0.0, now - job.creation) * 1000.0 if job.creation else 0.0
                self.job_duration.labels(*labels).set(elapsed_ms)
                self.job_last.labels(*labels).set(now)
                for _ in range(job.bound_tasks):  # Volcano observes once per task it allocates
                    self.job_e2e.observe(elapsed_ms)
            if job.unready_tasks is not None:
                self.unschedule_tasks.labels(job.name).set(job.unready_tasks)
                if not job.ready:
                    self.job_retries.inc(job.name)  # Volcano's RegisterJobRetries: a gang left not ready
            self.job_share.labels(job.namespace, job.name).set(job.share)
        for uid in self._jobs.keys() - seen.keys():
            self._remove_job(self._jobs[uid])
        self._jobs = seen

    def _remove_job(self, job: JobSample) -> None:
        """Volcano's DeleteJobMetrics (pkg/scheduler/metrics/job.go), when the PodGroup leaves the cache."""
        for gauge in (self.job_duration, self.job_start, self.job_last):
            gauge.remove(job.name, job.queue, job.namespace)
        self.unschedule_tasks.remove(job.name)
        self.job_share.remove(job.namespace, job.name)
        self.job_retries.remove(job.name)

    def _record_queues(self, queues: tuple[QueueSample, ...]) -> None:
        seen: dict[str, set[tuple[str, ...]]] = {}

        def put(name: str, value: float, *labels: str) -> None:
            self.queue_gauges[name].labels(*labels).set(value)
            seen.setdefault(name, set()).add(labels)

        for qs in queues:
            self._put_resource(put, "allocated", qs.queue, qs.allocated)
            self._put_resource(put, "request", qs.queue, qs.request)
            self._put_resource(put, "inqueue", qs.queue, qs.inqueue)
            if qs.deserved is not None:
                self._put_resource(put, "deserved", qs.queue, qs.deserved)
            if qs.capability is not None:
                self._put_resource(put, "capacity", qs.queue, qs.capability)
            if qs.real_capability is not None:
                self._put_resource(put, "real_capacity", qs.queue, qs.real_capability)
            if qs.share is not None:
                put("volcano_queue_share", qs.share, qs.queue)
            if qs.overused is not None:
                put("volcano_queue_overused", 1.0 if qs.overused else 0.0, qs.queue)
            if qs.weight is not None:
                put("volcano_queue_weight", qs.weight, qs.queue)
            put("volcano_queue_allocated_gpu", qs.allocated.get(GPU) / 1000.0, qs.queue)
            put("volcano_queue_pending_gpu", qs.pending.get(GPU) / 1000.0, qs.queue)
            self.oldest_pending.labels(qs.queue).set(qs.oldest_pending_seconds)
            seen.setdefault("oldest", set()).add((qs.queue,))
        # A series last cycle had and this one lacks (a deleted queue, a resource no longer held) goes away.
        for name, before in self._series.items():
            gauge = self.oldest_pending if name == "oldest" else self.queue_gauges[name]
            for labels in before - seen.get(name, set()):
                gauge.remove(*labels)
        self._series = seen

    @staticmethod
    def _put_resource(put: Callable[..., None], kind: str, queue: str, resource: Resource) -> None:
        put(f"volcano_queue_{kind}_milli_cpu", float(resource.cpu), queue)
        put(f"volcano_queue_{kind}_memory_bytes", float(resource.memory), queue)
        for name, units in scalar_items(resource):
            put(f"volcano_queue_{kind}_scalar_resources", milli(name, units), queue, name)
        if kind in ("allocated", "request") and resource.get(GPU) == 0:
            put(f"volcano_queue_{kind}_scalar_resources", 0.0, queue, GPU)  # GPU panels show 0, not "no data"


_default: SchedulerMetrics | None = None
_default_lock = threading.Lock()


def default() -> SchedulerMetrics:
    """The process-wide metrics on prometheus_client's default registry (with its process collectors)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = SchedulerMetrics(REGISTRY)
        return _default


def observe_cycle(
    result: CycleResult, seconds: float, snapshot: ClusterSnapshot | None = None, *, snapshot_seconds: float = 0.0
) -> None:
    """Called by the scheduling loop after every cycle. Never raises: metrics must not stop scheduling."""
    try:
        default().record(sample_cycle(result, seconds, snapshot, snapshot_seconds=snapshot_seconds))
    except Exception:  # noqa: BLE001
        log.exception("recording cycle metrics failed")


def observe_cycle_error() -> None:
    default().record_error()


def observe_bind(bind_seconds: float, since_creation: float | None, prebind_seconds: float | None = None) -> None:
    """Called by the cache's binder for every pod it bound. Never raises."""
    try:
        default().record_bind(bind_seconds, since_creation, prebind_seconds)
    except Exception:  # noqa: BLE001
        log.exception("recording bind metrics failed")


# ---- the controllers' -----------------------------------------------------------------------------------
# Volcano's controllers' families (pkg/controllers/metrics/*.go, pkg/controllers/job/state/metrics.go). Volcano's
# jobflow_* counters are left out: volcano-py has no JobFlow controller (README.md, "Metrics").
QUEUE_PODGROUP_PHASES = ("inqueue", "pending", "running", "unknown", "completed")  # status counts of a Queue


class ControllerMetrics:
    """The controllers' Prometheus objects, on one registry (a fresh one in tests)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        r = registry if registry is not None else REGISTRY
        self.registry = r
        self.declared: dict[str, tuple[str, tuple[str, ...]]] = {}
        self.queue_podgroups: dict[str, Gauge] = {}
        for phase in QUEUE_PODGROUP_PHASES:
            name = f"volcano_queue_pod_group_{phase}_count"
            self.declared[name] = ("gauge", ("queue_name",))
            self.queue_podgroups[phase] = Gauge(
                name, f"PodGroups of one queue in phase {phase.capitalize()}", ["queue_name"], registry=r
            )
        job = ("job_name", "queue_name")
        self.declared["volcano_job_completed_phase_count"] = ("counter", job)
        self.completed = ExactNameCounter(
            "volcano_job_completed_phase_count", "Times a Job reached Completed", job, registry=r
        )
        self.declared["volcano_job_failed_phase_count"] = ("counter", job)
        self.failed = ExactNameCounter("volcano_job_failed_phase_count", "Times a Job reached Failed", job, registry=r)
        name = "volcano_controller_job_to_pod_creation_latency_milliseconds"
        self.declared[name] = ("histogram", ())
        self.pod_creation = Histogram(
            name, "From a Job's creation to one of its pods created, in milliseconds", buckets=TASK_BUCKETS_MS,
            registry=r,
        )

    def record_queue(self, queue: str, counts: dict[str, int]) -> None:
        """Volcano's UpdateQueueMetrics: the queue's PodGroup counts, as its status now says."""
        for phase, gauge in self.queue_podgroups.items():
            gauge.labels(queue).set(counts.get(phase, 0))

    def remove_queue(self, queue: str) -> None:
        for gauge in self.queue_podgroups.values():
            gauge.remove(queue)

    def record_job_phase(self, job: str, queue: str, phase: str) -> None:
        """A Job that entered `phase` (Volcano's UpdateJobCompleted / UpdateJobFailed; `job` is namespace/name)."""
        if phase == "Completed":
            self.completed.inc(job, queue)
        elif phase == "Failed":
            self.failed.inc(job, queue)

    def remove_job(self, job: str, queue: str) -> None:
        self.completed.remove(job, queue)
        self.failed.remove(job, queue)

    def record_pod_created(self, since_job_creation: float) -> None:
        self.pod_creation.observe(max(0.0, since_job_creation) * 1000.0)


_controllers: ControllerMetrics | None = None


def controllers() -> ControllerMetrics:
    """The controllers' metrics on the default registry, registered at the first call (the controllers' start)."""
    global _controllers
    with _default_lock:
        if _controllers is None:
            _controllers = ControllerMetrics(REGISTRY)
        return _controllers


def observe_controllers(record: Callable[[ControllerMetrics], None]) -> None:
    """Called by the controllers with what to record. Never raises: metrics must not stop a reconcile."""
    try:
        record(controllers())
    except Exception:  # noqa: BLE001
        log.exception("recording controller metrics failed")


def observe_pod_created(since_job_creation: float) -> None:
    """Called by the job controller for every pod it created."""
    observe_controllers(lambda m: m.record_pod_created(since_job_creation))


# ---- HTTP: /metrics, /healthz, /readyz ------------------------------------------------------------------
def parse_address(address: str) -> tuple[str, int]:
    """`:8080`, `0.0.0.0:8080`, `127.0.0.1:0` or `[::]:8080` -> (host, port)."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"--listen-address: expected [HOST]:PORT such as :8080, got {address!r}")
    return host.strip("[]"), int(port)


class _Server(ThreadingHTTPServer):
    daemon_threads = True


class _Server6(_Server):
    address_family = socket.AF_INET6


class MetricsServer:
    """A small threaded HTTP server. `/readyz` is 200 once `ready()` is true (the caches have synced; with
    leader election a standby is ready too, so it can take over at once), `/healthz` while the process serves."""

    def __init__(
        self,
        address: str,
        *,
        registry: CollectorRegistry | None = None,
        ready: Callable[[], bool] = lambda: True,
        healthy: Callable[[], bool] = lambda: True,
    ) -> None:
        host, port = parse_address(address)
        registry = registry if registry is not None else REGISTRY
        routes: dict[str, Callable[[], tuple[int, str, bytes]]] = {
            "/metrics": lambda: (200, CONTENT_TYPE_LATEST, exposition(registry)),
            "/healthz": lambda: _check(healthy),
            "/livez": lambda: _check(healthy),
            "/readyz": lambda: _check(ready),
        }

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the http.server API
                route = routes.get(self.path.split("?", 1)[0])
                status, content_type, body = route() if route else (404, "text/plain", b"not found\n")
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - probes every few seconds
                return

        server = _Server6 if ":" in host else _Server
        self.httpd = server((host or "0.0.0.0", port), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="metrics-http", daemon=True)

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    def start(self) -> MetricsServer:
        self.thread.start()
        log.info("serving /metrics, /healthz and /readyz on port %d", self.port)
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _check(probe: Callable[[], bool]) -> tuple[int, str, bytes]:
    try:
        ok = bool(probe())
    except Exception:  # noqa: BLE001 - a failing probe is a failed check, not a crashed server
        ok = False
    return (200, "text/plain", b"ok\n") if ok else (503, "text/plain", b"not ready\n")


def serve(address: str, *, ready: Callable[[], bool] = lambda: True) -> MetricsServer:
    """Start serving the default registry on `address` (the CLI's --listen-address)."""
    default()
    return MetricsServer(address, ready=ready).start()
