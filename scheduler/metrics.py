"""Every Prometheus object of volcano-py, the pure functions that turn a cycle into metric values, and the
HTTP server for `/metrics`, `/healthz` and `/readyz`.

Layer: beside `cache` (it reads `api` values only; `cache.runner` and `cli` call it).

Names are Volcano's (`pkg/scheduler/metrics`) where Volcano has one, so dashboards carry over: latencies in
milliseconds, cpu in millicores, memory in bytes, and scalar resources (GPUs, ...) in milli-units as Volcano's
`ScalarResources` hold them (8 GPUs = 8000). What Volcano lacks is added in seconds
(`volcano_podgroup_pending_duration_seconds`) or whole units (`volcano_queue_allocated_gpu`,
`volcano_queue_pending_gpu`, the names users search for). Labels are bounded: queue, action, plugin, resource,
result, status; never a pod or a job name.

Two steps, so the arithmetic is testable without a registry: `sample_cycle()` (pure) turns a `CycleResult`,
its duration and the post-cycle snapshot into a `CycleSample`; `SchedulerMetrics.record()` writes a sample
into the Prometheus objects of one registry.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, Gauge, Histogram
from prometheus_client import Counter as PromCounter
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from scheduler.api.job import JobInfo
from scheduler.api.resources import GPU, MEMORY, PODS, ZERO, Resource
from scheduler.api.snapshot import ClusterSnapshot, CycleResult
from scheduler.api.status import PodGroupPhase, TaskStatus

log = logging.getLogger("volcano_py.metrics")

# Volcano's latency buckets start at 5 ms and double; 14 of them reach ~41 s, past any sane cycle.
LATENCY_BUCKETS_MS = tuple(5.0 * 2**i for i in range(14))
PENDING_BUCKETS_S = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0, 21600.0, 86400.0)

SCHEDULED, UNSCHEDULABLE, ERROR = "scheduled", "unschedulable", "error"
PHASES = tuple(p.value for p in PodGroupPhase)


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


@dataclass(frozen=True, slots=True)
class CycleSample:
    e2e_ms: float
    action_ms: dict[str, float] = field(default_factory=dict)
    plugin_ms: dict[str, float] = field(default_factory=dict)
    attempts: dict[str, int] = field(default_factory=dict)  # result -> gangs
    preemption_victims: int = 0
    unschedulable_jobs: int = 0
    queues: tuple[QueueSample, ...] = ()
    podgroup_phases: dict[str, int] = field(default_factory=dict)  # phase -> PodGroups
    pending_durations: tuple[float, ...] = ()  # seconds each gang started this cycle had waited


def _timings(result: CycleResult, prefix: str) -> dict[str, float]:
    return {key[len(prefix) :]: seconds * 1000.0 for key, seconds in result.timings.items() if key.startswith(prefix)}


def _waiting(job: JobInfo) -> bool:
    """A gang that wants more pods placed and is short of its minimum (or not admitted yet)."""
    if job.phase == PodGroupPhase.COMPLETED:
        return False
    pending = job.count(TaskStatus.PENDING)
    if job.phase == PodGroupPhase.PENDING:
        return True
    return pending > 0 and not job.is_ready()


def _pending_request(job: JobInfo) -> Resource:
    request = job.pending_request()
    if request.is_zero() and job.phase == PodGroupPhase.PENDING and job.min_resources is not None:
        return job.min_resources  # its pods may not exist yet (the job controller waits for admission)
    return request


def sample_cycle(result: CycleResult, seconds: float, snapshot: ClusterSnapshot | None = None) -> CycleSample:
    """What one cycle says: its latencies, its gang attempts and, given the snapshot after the cycle (the
    session works on the snapshot's infos, so it holds the cycle's placements), the state of queues and gangs."""
    bound_jobs = {gang.job: len(gang.binds) for gang in result.binds if gang.binds}
    attempts: Counter[str] = Counter()
    phases: Counter[str] = Counter()
    durations: list[float] = []
    unschedulable = 0
    pending: dict[str, Resource] = {}
    oldest: dict[str, float] = {}
    jobs = snapshot.jobs.values() if snapshot is not None else ()
    now = snapshot.now if snapshot is not None else 0.0
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
        if job.phase != PodGroupPhase.COMPLETED:
            pending[job.queue] = pending.get(job.queue, ZERO) + _pending_request(job)
    if snapshot is None:
        attempts[SCHEDULED] += len(bound_jobs)
    queue_info = snapshot.queues if snapshot is not None else {}
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
            )
        )
    return CycleSample(
        e2e_ms=seconds * 1000.0,
        action_ms=_timings(result, "action:"),
        plugin_ms=_timings(result, "plugin:"),
        attempts=dict(attempts),
        preemption_victims=len(result.evictions),
        unschedulable_jobs=unschedulable,
        queues=tuple(queues),
        podgroup_phases={phase: phases.get(phase, 0) for phase in PHASES},
        pending_durations=tuple(durations),
    )


def milli(name: str, units: int) -> float:
    """A scalar resource in Volcano's metric unit (milli-units; volcano-py keeps byte-sized scalars in bytes)."""
    if name.startswith("hugepages-") or name == "ephemeral-storage":
        return float(units) * 1000.0
    return float(units)


def scalar_items(resource: Resource) -> Iterable[tuple[str, int]]:
    return ((name, units) for name, units in resource.scalars if name not in (MEMORY, PODS))


# ---- the Prometheus objects ----------------------------------------------------------------------------
class SchedulerMetrics:
    """All of the scheduler's Prometheus objects, registered on one registry (a fresh one in tests)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        r = registry if registry is not None else REGISTRY
        self.registry = r
        q, qr = ["queue_name"], ["queue_name", "resource"]
        self.e2e = Histogram(
            "volcano_e2e_scheduling_latency_milliseconds",
            "One scheduling cycle end to end (snapshot, actions, binds and status writes), in milliseconds",
            buckets=LATENCY_BUCKETS_MS,
            registry=r,
        )
        self.action = Histogram(
            "volcano_action_scheduling_latency_milliseconds",
            "Time one action took in a cycle, in milliseconds",
            ["action"],
            buckets=LATENCY_BUCKETS_MS,
            registry=r,
        )
        self.plugin = Histogram(
            "volcano_plugin_scheduling_latency_milliseconds",
            "Time one plugin took to open and close a session, in milliseconds",
            ["plugin"],
            buckets=LATENCY_BUCKETS_MS,
            registry=r,
        )
        self.attempts = PromCounter(
            "volcano_schedule_attempts",
            "Gang scheduling attempts by result: scheduled, unschedulable, error",
            ["result"],
            registry=r,
        )
        for result in (SCHEDULED, UNSCHEDULABLE, ERROR):
            self.attempts.labels(result)  # present at 0 from the start, so rate() works at the first event
        self.victims = Gauge(
            "volcano_pod_preemption_victims", "Pods evicted (preempted or reclaimed) in the last cycle", registry=r
        )
        self.preemption_attempts = PromCounter(
            "volcano_total_preemption_attempts", "Cycles that evicted pods", registry=r
        )
        self.unschedulable = Gauge(
            "volcano_unschedule_job_count",
            "Gangs waiting after the last cycle (not admitted or short of pods)",
            registry=r,
        )
        self.job_status = Gauge(
            "volcano_job_status_count", "PodGroups by phase after the last cycle", ["status"], registry=r
        )
        self.pending_duration = Histogram(
            "volcano_podgroup_pending_duration_seconds",
            "Seconds from a PodGroup's creation to the cycle that bound its gang",
            buckets=PENDING_BUCKETS_S,
            registry=r,
        )
        self.oldest_pending = Gauge(
            "volcano_queue_oldest_pending_podgroup_seconds",
            "How long the oldest waiting gang of a queue has waited, in seconds (0: none waits)",
            q,
            registry=r,
        )
        self.queue_gauges: dict[str, Gauge] = {}
        for kind, text in (("allocated", "Allocated"), ("deserved", "Deserved"), ("capacity", "Capability of")):
            self._gauge(f"volcano_queue_{kind}_milli_cpu", f"{text} cpu of one queue, in millicores", q)
            self._gauge(f"volcano_queue_{kind}_memory_bytes", f"{text} memory of one queue, in bytes", q)
            self._gauge(
                f"volcano_queue_{kind}_scalar_resources",
                f"{text} scalar resource of one queue, in milli-units (8 GPUs = 8000)",
                qr,
            )
        self._gauge("volcano_queue_share", "Largest allocated/deserved ratio of one queue", q)
        self._gauge("volcano_queue_weight", "Weight of one queue", q)
        self._gauge("volcano_queue_overused", "1 when a queue has reached its deserved share on every resource", q)
        self._gauge("volcano_queue_allocated_gpu", "GPUs (nvidia.com/gpu) allocated to one queue", q)
        self._gauge("volcano_queue_pending_gpu", "GPUs (nvidia.com/gpu) requested by one queue's waiting pods", q)
        self._series: dict[str, set[tuple[str, ...]]] = {}

    def _gauge(self, name: str, help_text: str, labels: list[str]) -> None:
        self.queue_gauges[name] = Gauge(name, help_text, labels, registry=self.registry)

    # -- writing ------------------------------------------------------------------------------------------
    def record(self, sample: CycleSample) -> None:
        self.e2e.observe(sample.e2e_ms)
        for action, ms in sample.action_ms.items():
            self.action.labels(action).observe(ms)
        for plugin, ms in sample.plugin_ms.items():
            self.plugin.labels(plugin).observe(ms)
        for result, count in sample.attempts.items():
            if count:
                self.attempts.labels(result).inc(count)
        self.victims.set(sample.preemption_victims)
        if sample.preemption_victims:
            self.preemption_attempts.inc()
        self.unschedulable.set(sample.unschedulable_jobs)
        for phase, count in sample.podgroup_phases.items():
            self.job_status.labels(phase).set(count)
        for seconds in sample.pending_durations:
            self.pending_duration.observe(seconds)
        self._record_queues(sample.queues)

    def record_error(self) -> None:
        """A cycle that raised: its gangs were not attempted; counted once as an error."""
        self.attempts.labels(ERROR).inc()

    def _record_queues(self, queues: tuple[QueueSample, ...]) -> None:
        seen: dict[str, set[tuple[str, ...]]] = {}

        def put(name: str, value: float, *labels: str) -> None:
            self.queue_gauges[name].labels(*labels).set(value)
            seen.setdefault(name, set()).add(labels)

        for qs in queues:
            self._put_resource(put, "allocated", qs.queue, qs.allocated)
            if qs.deserved is not None:
                self._put_resource(put, "deserved", qs.queue, qs.deserved)
            if qs.capability is not None:
                self._put_resource(put, "capacity", qs.queue, qs.capability)
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
        if kind == "allocated" and resource.get(GPU) == 0:
            put("volcano_queue_allocated_scalar_resources", 0.0, queue, GPU)  # GPU panels show 0, not "no data"


_default: SchedulerMetrics | None = None
_default_lock = threading.Lock()


def default() -> SchedulerMetrics:
    """The process-wide metrics on prometheus_client's default registry (with its process collectors)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = SchedulerMetrics(REGISTRY)
        return _default


def observe_cycle(result: CycleResult, seconds: float, snapshot: ClusterSnapshot | None = None) -> None:
    """Called by the scheduling loop after every cycle. Never raises: metrics must not stop scheduling."""
    try:
        default().record(sample_cycle(result, seconds, snapshot))
    except Exception:  # noqa: BLE001
        log.exception("recording cycle metrics failed")


def observe_cycle_error() -> None:
    default().record_error()


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
            "/metrics": lambda: (200, CONTENT_TYPE_LATEST, generate_latest(registry)),
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
