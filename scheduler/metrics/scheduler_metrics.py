"""The scheduler's Prometheus objects (`SchedulerMetrics`) and the process-wide instance the scheduling loop and
the cache's binder record into. Layer: metrics.

Every family Volcano's scheduler exports (`pkg/scheduler/metrics/*.go`) is here with Volcano's name, type,
labels and buckets; what Volcano lacks is added in seconds or whole units (see the package's docstring).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable

from prometheus_client import REGISTRY, CollectorRegistry, Counter as PromCounter, Gauge, Histogram

from scheduler.api.resources import GPU, MEMORY, PODS, Resource
from scheduler.api.snapshot import ClusterSnapshot, CycleResult
from scheduler.metrics.client_golang import ExactNameCounter, exponential_buckets_range
from scheduler.metrics.deprecated import WithDeprecatedName
from scheduler.metrics.sample import ERROR, SCHEDULED, UNSCHEDULABLE, CycleSample, JobSample, QueueSample, sample_cycle

log = logging.getLogger("volcano_py.metrics")

# Volcano's bucket layouts (pkg/scheduler/metrics/metrics.go), so a heatmap or quantile reads the same.
SESSION_BUCKETS_MS = exponential_buckets_range(1, 5000, 20)  # e2e_scheduling_latency, open_session_duration
JOB_E2E_BUCKETS_MS = exponential_buckets_range(100, 120000, 30)
PLUGIN_BUCKETS_MS = exponential_buckets_range(0.1, 100, 15)
ACTION_BUCKETS_MS = exponential_buckets_range(1, 2000, 20)
TASK_BUCKETS_MS = exponential_buckets_range(50, 60000, 30)
STAGE_BUCKETS_MS = exponential_buckets_range(0.1, 500, 20)
PENDING_BUCKETS_S = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0, 21600.0, 86400.0)

# Volcano's stages of task_scheduling_latency_milliseconds and scheduling_stage_duration_milliseconds.
STAGE_WATCHED, STAGE_ASSUMED, STAGE_PREBOUND, STAGE_BOUND = "Watched", "Assumed", "PreBound", "Bound"
STAGE_PREBIND, STAGE_BIND = "PreBind", "Bind"


def milli(name: str, units: int) -> float:
    """A scalar resource in Volcano's metric unit (milli-units; volcano-py keeps byte-sized scalars in bytes)."""
    if name.startswith("hugepages-") or name == "ephemeral-storage":
        return float(units) * 1000.0
    return float(units)


def scalar_items(resource: Resource) -> Iterable[tuple[str, int]]:
    return ((name, units) for name, units in resource.scalars if name not in (MEMORY, PODS))



# Volcano's families that volcano-py leaves without series, and why (docs/metrics.md says the same):
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
        # -- volcano-py's: what a cycle costs the process (the e2e latency above is wall-clock: on cores shared with
        # other processes it grows with their load; the CPU a cycle took does not)
        self.cycle_cpu = self._histogram(
            "volcano_py_cycle_cpu_milliseconds",
            "The scheduler process's CPU time, all threads, from a cycle's start to its end, in milliseconds",
            (), SESSION_BUCKETS_MS,
        )
        # -- volcano-py's: the conf file (issue 22: a rejected reload must be visible, not only logged)
        self.conf_stale = self._gauge(
            "volcano_py_scheduler_conf_stale",
            "1 while the scheduler conf file on disk is rejected (or unreadable) and the last good conf is in use", (),
        )
        self.conf_loads = self._exact_counter(
            "volcano_py_scheduler_conf_loads_total", "Scheduler conf files read, by result (loaded, rejected)",
            ("result",),
        )
        # -- volcano-py's: plugins of the conf in use that turn bulk placement off (framework/runtime.py)
        self.bulk_off = self._gauge(
            "volcano_py_bulk_placement_off",
            "1 for each plugin of the conf in use that serves a point without the acceleration bulk placement needs "
            "(a gang's identical pods are then placed one by one)", ("plugin",),
        )
        # -- volcano-py's: faults isolated to one job (issue 31, scheduler/framework/faults.py)
        self.job_errors = self._exact_counter(
            "volcano_py_job_errors_total",
            "Jobs a plugin (or an action) failed on, left out of their cycle while the others went on, by plugin",
            ("plugin",),
        )
        self.failed_cycles = self._gauge(
            "volcano_py_consecutive_failed_cycles",
            "Scheduling cycles in a row that failed as a whole (liveness fails past --max-failed-cycles)", (),
        )
        # -- Volcano's, pkg/scheduler/metrics/job.go
        self.job_share = self._gauge(
            "volcano_job_share", "Dominant share of the cluster one job holds (drf's job share)", ("job_ns", "job_id")
        )
        self.job_retries = self._exact_counter(
            "volcano_job_retry_counts", "Cycles that closed with the gang not ready", ("job_id",)
        )
        # -- volcano-py's own, under volcano_py_ (and, for one release, their old volcano_ names: deprecated.py)
        self.job_status = self._renamed_gauge(
            "volcano_py_job_status_count", "PodGroups by phase after the last cycle", ("status",)
        )
        pending_help = "Seconds from a PodGroup's creation to the cycle that bound its gang"
        self.pending_duration = Histogram(
            "volcano_py_podgroup_pending_duration_seconds", pending_help, buckets=PENDING_BUCKETS_S, registry=None
        )
        WithDeprecatedName(self.pending_duration, "volcano_py_podgroup_pending_duration_seconds", "histogram",
                           pending_help, registry=r)
        self.declared["volcano_py_podgroup_pending_duration_seconds"] = ("histogram", ())
        self.oldest_pending = self._renamed_gauge(
            "volcano_py_queue_oldest_pending_podgroup_seconds",
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
        for kind, text in (("allocated", "allocated to"), ("pending", "requested by the waiting pods of")):
            self.queue_gauges[f"volcano_py_queue_{kind}_gpu"] = self._renamed_gauge(
                f"volcano_py_queue_{kind}_gpu", f"GPUs (nvidia.com/gpu) {text} one queue", q
            )
        self._series: dict[str, set[tuple[str, ...]]] = {}
        self._jobs: dict[str, JobSample] = {}  # uid -> the job's labels, for its series' removal
        self._watched: set[str] = set()  # pending task uids whose Watched latency was observed

    def _histogram(self, name: str, help_text: str, labels: tuple[str, ...], buckets: tuple[float, ...]) -> Histogram:
        self.declared[name] = ("histogram", labels)
        return Histogram(name, help_text, labels, buckets=buckets, registry=self.registry)

    def _gauge(self, name: str, help_text: str, labels: tuple[str, ...]) -> Gauge:
        self.declared[name] = ("gauge", labels)
        return Gauge(name, help_text, labels, registry=self.registry)

    def _renamed_gauge(self, name: str, help_text: str, labels: tuple[str, ...]) -> Gauge:
        """One of volcano-py's own gauges, also exported under its deprecated old name."""
        self.declared[name] = ("gauge", labels)
        gauge = Gauge(name, help_text, labels, registry=None)
        WithDeprecatedName(gauge, name, "gauge", help_text, registry=self.registry)
        return gauge

    def _exact_counter(self, name: str, help_text: str, labels: tuple[str, ...]) -> ExactNameCounter:
        self.declared[name] = ("counter", labels)
        return ExactNameCounter(name, help_text, labels, registry=self.registry)

    def _queue_gauge(self, name: str, help_text: str, labels: tuple[str, ...]) -> None:
        self.queue_gauges[name] = self._gauge(name, help_text, labels)

    # -- writing ------------------------------------------------------------------------------------------
    def record(self, sample: CycleSample) -> None:
        self.e2e.observe(sample.e2e_ms)
        if sample.cpu_ms is not None:
            self.cycle_cpu.observe(sample.cpu_ms)
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
        for plugin, count in sample.job_errors.items():
            self.job_errors.inc(plugin, amount=count)
            self.attempts.labels(ERROR).inc(count)
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
            put("volcano_py_queue_allocated_gpu", qs.allocated.get(GPU) / 1000.0, qs.queue)
            put("volcano_py_queue_pending_gpu", qs.pending.get(GPU) / 1000.0, qs.queue)
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
    result: CycleResult, seconds: float, snapshot: ClusterSnapshot | None = None, *, snapshot_seconds: float = 0.0,
    cpu_seconds: float | None = None,
) -> None:
    """Called by the scheduling loop after every cycle. Never raises: metrics must not stop scheduling."""
    try:
        default().record(sample_cycle(result, seconds, snapshot, snapshot_seconds=snapshot_seconds,
                                      cpu_seconds=cpu_seconds))
    except Exception:
        log.exception("recording cycle metrics failed")


def observe_conf(loaded: bool) -> None:
    """Called by the conf watcher for every conf file it read: loaded (in use now) or rejected (the last good
    one stays in use, and the stale gauge says so until a good file is loaded). Never raises."""
    try:
        metrics = default()
        metrics.conf_stale.set(0 if loaded else 1)
        metrics.conf_loads.inc("loaded" if loaded else "rejected")
    except Exception:
        log.exception("recording conf metrics failed")


def observe_bulk_blockers(plugins: Iterable[str]) -> None:
    """The plugins of the conf just loaded that turn bulk placement off (none: the gauge is cleared). Never
    raises."""
    try:
        gauge = default().bulk_off
        gauge.clear()
        for plugin in plugins:
            gauge.labels(plugin).set(1)
    except Exception:
        log.exception("recording bulk placement metrics failed")


def observe_cycle_error() -> None:
    default().record_error()


def observe_failed_cycles(in_a_row: int) -> None:
    """Whole cycles failed in a row (0 after a good one). Never raises."""
    try:
        default().failed_cycles.set(in_a_row)
    except Exception:
        log.exception("recording the failed-cycle gauge failed")


def observe_bind(bind_seconds: float, since_creation: float | None, prebind_seconds: float | None = None) -> None:
    """Called by the cache's binder for every pod it bound. Never raises."""
    try:
        default().record_bind(bind_seconds, since_creation, prebind_seconds)
    except Exception:
        log.exception("recording bind metrics failed")
