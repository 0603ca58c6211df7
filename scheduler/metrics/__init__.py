"""Every Prometheus object of volcano-py, the pure functions that turn a cycle into metric values, and the
HTTP server for `/metrics`, `/healthz` and `/readyz`.

Layer: metrics, below `cache`, `controllers` and `cli`, which call it; it reads `api` values and proportion's
resource arithmetic.

Every family Volcano's scheduler exports (`pkg/scheduler/metrics/*.go`) is here with Volcano's name, type,
labels and buckets, so Volcano's dashboards carry over (tests/test_volcano_metrics.py checks against the
source): latencies in milliseconds, cpu in millicores, memory in bytes, and scalar resources (GPUs, ...) in
milli-units as Volcano's `ScalarResources` hold them (8 GPUs = 8000). What Volcano lacks is volcano-py's own,
named `volcano_py_...` (a `volcano_` name is always Volcano's family), in seconds
(`volcano_py_podgroup_pending_duration_seconds`) or whole units (`volcano_py_queue_allocated_gpu`,
`volcano_py_queue_pending_gpu`); five of them keep their old `volcano_` names for one release, deprecated
(`deprecated.py`). Labels are bounded (queue, action, plugin, resource,
result, status, stage) except in Volcano's per-job families, which name the job as Volcano's do and are
removed with it.

Two steps, so the arithmetic is testable without a registry: `sample_cycle()` (pure, `sample.py`) turns a
`CycleResult`, its duration and the post-cycle snapshot into a `CycleSample`; `SchedulerMetrics.record()`
(`scheduler_metrics.py`) writes a sample into the Prometheus objects of one registry. The controllers' families
are `ControllerMetrics` (`controller_metrics.py`). Serve them with `exposition()` (`client_golang.py`), not
prometheus_client's `generate_latest`: two of Volcano's counters have no `_total` (see `ExactNameCounter`).
"""

from __future__ import annotations

from scheduler.metrics.client_golang import ExactNameCounter, exponential_buckets_range, exposition
from scheduler.metrics.controller_metrics import (
    ControllerMetrics,
    controllers,
    observe_controllers,
    observe_pod_created,
)
from scheduler.metrics.deprecated import DEPRECATED_NAMES
from scheduler.metrics.sample import CycleSample, JobSample, QueueSample, sample_cycle
from scheduler.metrics.scheduler_metrics import (
    PER_JOB_LABELS,
    SchedulerMetrics,
    default,
    observe_bind,
    observe_bulk_blockers,
    observe_conf,
    observe_cycle,
    observe_cycle_error,
    observe_failed_cycles,
)
from scheduler.metrics.server import MetricsServer, parse_address, serve

__all__ = [
    "DEPRECATED_NAMES", "PER_JOB_LABELS", "ControllerMetrics", "CycleSample", "ExactNameCounter", "JobSample",
    "MetricsServer", "QueueSample", "SchedulerMetrics", "controllers", "default", "exponential_buckets_range",
    "exposition", "observe_bind", "observe_bulk_blockers", "observe_conf", "observe_controllers", "observe_cycle",
    "observe_cycle_error", "observe_failed_cycles", "observe_pod_created", "parse_address", "sample_cycle", "serve",
]
