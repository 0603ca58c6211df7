"""The controllers' Prometheus objects (`ControllerMetrics`) and the process-wide instance the job and queue
controllers record into. Layer: metrics.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from prometheus_client import REGISTRY, CollectorRegistry, Gauge, Histogram

from scheduler.metrics.client_golang import ExactNameCounter
from scheduler.metrics.scheduler_metrics import TASK_BUCKETS_MS

log = logging.getLogger("volcano_py.metrics")


# Volcano's controllers' families (pkg/controllers/metrics/*.go, pkg/controllers/job/state/metrics.go,
# pkg/controllers/jobflow/state/metrics.go).
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
        flow = ("jobflow_namespace",)
        self.declared["volcano_jobflow_succeed_phase_count"] = ("counter", flow)
        self.jobflow_succeeded = ExactNameCounter(
            "volcano_jobflow_succeed_phase_count", "Times a JobFlow of the namespace reached Succeed", flow, registry=r
        )
        self.declared["volcano_jobflow_failed_phase_count"] = ("counter", flow)
        self.jobflow_failed = ExactNameCounter(
            "volcano_jobflow_failed_phase_count", "Times a JobFlow of the namespace reached Failed", flow, registry=r
        )
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

    def record_jobflow_phase(self, namespace: str, phase: str) -> None:
        """A JobFlow of `namespace` that entered `phase` (Volcano's UpdateJobFlowSucceed / UpdateJobFlowFailed)."""
        if phase == "Succeed":
            self.jobflow_succeeded.inc(namespace)
        elif phase == "Failed":
            self.jobflow_failed.inc(namespace)

    def record_pod_created(self, since_job_creation: float) -> None:
        self.pod_creation.observe(max(0.0, since_job_creation) * 1000.0)


_controllers: ControllerMetrics | None = None
_controllers_lock = threading.Lock()



def controllers() -> ControllerMetrics:
    """The controllers' metrics on the default registry, registered at the first call (the controllers' start)."""
    global _controllers
    with _controllers_lock:
        if _controllers is None:
            _controllers = ControllerMetrics(REGISTRY)
        return _controllers


def observe_controllers(record: Callable[[ControllerMetrics], None]) -> None:
    """Called by the controllers with what to record. Never raises: metrics must not stop a reconcile."""
    try:
        record(controllers())
    except Exception:
        log.exception("recording controller metrics failed")


def observe_pod_created(since_job_creation: float) -> None:
    """Called by the job controller for every pod it created."""
    observe_controllers(lambda m: m.record_pod_created(since_job_creation))

