"""The PersistentVolumeClaims of a Job's `spec.volumes`. Layer: jobs (pure: plain dicts in, plain dicts out).

As Volcano's job controller makes them (pkg/controllers/job/job_controller_actions.go `createJobIOIfNotExist` and
`createPVC`, while the job is not yet initiated, before its PodGroup): a volume with a `volumeClaim` and no
`volumeClaimName` gets a claim named `<job>-pvc-<12 random characters of [0-9a-z]>` (helpers.go `GenPVCName`),
created from the `volumeClaim` spec with the Job as its controller owner, and that name is written into the Job's
`spec.volumes[i].volumeClaimName`; a volume that names a claim must find it, and the job stays Pending until it
exists. Every claim is recorded in `status.controlledResources` as `volume-pvc-<name>: <name>`. The controller
deletes no claim: the garbage collector removes the created ones with their Job (Volcano: "DO NOT delete
input/output until job is deleted"). The pods mount the claims (`expand._mount_job_volumes`).
"""

from __future__ import annotations

import copy
import secrets
from collections.abc import Callable, Mapping
from typing import Any

from scheduler.jobs.names import job_name, job_namespace, owner_references

Manifest = dict[str, Any]

CONTROLLED_PREFIX = "volume-pvc-"
_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"  # helpers.go GenRandomStr


def random_suffix(length: int = 12) -> str:
    return "".join(secrets.choice(_ALPHABET) for _ in range(length))


def generated_claim_name(job: Mapping[str, Any], suffix: Callable[[], str] = random_suffix) -> str:
    """`<job>-pvc-<suffix>` (helpers.go persistentVolumeClaimFmt)."""
    return f"{job_name(job)}-pvc-{suffix()}"


def claims_to_create(job: Mapping[str, Any]) -> list[int]:
    """Indexes of the volumes whose claim the controller makes: a `volumeClaim` and no name yet."""
    volumes = (job.get("spec") or {}).get("volumes") or []
    return [i for i, v in enumerate(volumes) if not v.get("volumeClaimName") and v.get("volumeClaim") is not None]


def named_claims(job: Mapping[str, Any]) -> list[str]:
    """The claims the volumes name, in order, without repeats."""
    volumes = (job.get("spec") or {}).get("volumes") or []
    return list(dict.fromkeys(str(v["volumeClaimName"]) for v in volumes if v.get("volumeClaimName")))


def claim_manifest(job: Mapping[str, Any], index: int, name: str) -> Manifest:
    """The PersistentVolumeClaim of volume `index`: its `volumeClaim` as the spec, owned by the Job."""
    volume = job["spec"]["volumes"][index]
    meta: Manifest = {"name": name, "namespace": job_namespace(job)}
    refs = owner_references(job)
    if refs:
        meta["ownerReferences"] = refs
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": meta,
        "spec": copy.deepcopy(dict(volume["volumeClaim"])),
    }


def controlled_resources(job: Mapping[str, Any]) -> dict[str, str]:
    """The Job's `status.controlledResources` with an entry for every claim its volumes name."""
    current = dict(((job.get("status") or {}).get("controlledResources")) or {})
    current.update({f"{CONTROLLED_PREFIX}{name}": name for name in named_claims(job)})
    return current


def without_generated_names(job: Mapping[str, Any]) -> Manifest:
    """The Job as it was admitted: a `volumeClaimName` beside a `volumeClaim` is the controller's (the webhook lets
    it fill one on update, admit_job.go), so validation does not hold it against the user."""
    out = copy.deepcopy(dict(job))
    for volume in (out.get("spec") or {}).get("volumes") or []:
        if volume.get("volumeClaim") is not None:
            volume.pop("volumeClaimName", None)
    return out


def initiated(job: Mapping[str, Any]) -> bool:
    """Past Pending (job_controller_actions.go `isInitiated`): the claims are made only before that."""
    return (((job.get("status") or {}).get("state") or {}).get("phase") or "Pending") != "Pending"
