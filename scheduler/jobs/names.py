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
    """The PodGroup name: the job name.

    Volcano >= 1.8 names it `<job>-<uid>`; volcano-py keeps the job name so `kubectl get pg <job>` works. Pods
    carry this same name in `scheduling.k8s.io/group-name`, so the choice lives here only.
    """
    return job_name(job)


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
