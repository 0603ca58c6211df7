"""Pure Volcano Job logic: expand a Job into PodGroup + pods + plugin objects, validate it, and run its
lifecycle state machine. Layer: jobs (imports `api` only; never a Kubernetes client)."""

from __future__ import annotations

from scheduler.jobs.bus import PolicyAction, PolicyEvent
from scheduler.jobs.expand import (
    expected_pod_names,
    min_pod_specs,
    min_resources,
    normalize_job,
    plugin_objects,
    pod_for,
    podgroup_for,
    pods_for,
)
from scheduler.jobs.lifecycle import decide, desired_pods, expired
from scheduler.jobs.names import podgroup_lookup_names, podgroup_name
from scheduler.jobs.policies import pod_event
from scheduler.jobs.state import Decision, JobEvent, JobStatus, Op, OpKind, Phase, PodView, pod_view
from scheduler.jobs.validate import unsupported_plugins, validate_job

__all__ = [
    "Decision", "JobEvent", "JobStatus", "Op", "OpKind", "Phase", "PodView", "PolicyAction", "PolicyEvent",
    "decide", "desired_pods", "expected_pod_names", "expired", "min_pod_specs", "min_resources",
    "normalize_job", "plugin_objects", "pod_event", "pod_for", "pod_view", "podgroup_for", "podgroup_lookup_names",
    "podgroup_name", "pods_for", "unsupported_plugins", "validate_job",
]
