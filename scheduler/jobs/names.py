"""Names and references every object of a Job derives from the Job. Layer: jobs (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.jobs import keys


def job_namespace(job: Mapping[str, Any]) -> str:
    return str(job.get("metadata", {}).get("namespace") or keys.DEFAULT_NAMESPACE)


def job_name(job: Mapping[str, Any]) -> str:
    return str(job["metadata"]["name"])


def podgroup_name(job: Mapping[str, Any]) -> str:
    """The name of the PodGroup the job controller creates: `<job>-<job uid>`.

    Volcano names it so (pkg/controllers/job/job_controller_actions.go, generateRelatedPodGroupName) and its
    e2e suites look it up by that name. A job with no uid yet (a manifest never created: the simulator, a dry
    run) cannot carry one, so it keeps the job name: the legacy name, which the lookup also accepts.
    """
    uid = job.get("metadata", {}).get("uid")
    return f"{job_name(job)}-{uid}" if uid else legacy_podgroup_name(job)


def legacy_podgroup_name(job: Mapping[str, Any]) -> str:
    """The name PodGroups had before Volcano 1.5 (and in volcano-py before issue 16): the job name."""
    return job_name(job)


def podgroup_lookup_names(job: Mapping[str, Any]) -> tuple[str, ...]:
    """The names to look the job's PodGroup up by, in order: `<job>-<uid>`, then the legacy `<job>`.

    Volcano's getPodGroupByJob (pkg/controllers/job/job_controller_actions.go) falls back to the job name
    when `<job>-<uid>` is not found, so a PodGroup made by an older controller keeps serving its job.
    """
    return tuple(dict.fromkeys((podgroup_name(job), legacy_podgroup_name(job))))


def pod_name(job: Mapping[str, Any], task_name: str, replica_index: int) -> str:
    return f"{job_name(job)}-{task_name}-{replica_index}"


def owner_references(job: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A controller reference to the job, or none while the job has no uid (not yet created)."""
    uid = job.get("metadata", {}).get("uid")
    if not uid:
        return []
    return [
        {
            "apiVersion": keys.JOB_API_VERSION,
            "kind": keys.JOB_KIND,
            "name": job_name(job),
            "uid": uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
