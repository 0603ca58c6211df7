"""Layer `controllers`: the Job controller's PersistentVolumeClaims — those a Job's `spec.volumes` describe, created
or found before its PodGroup, while the job is not yet initiated (the rules: `scheduler.jobs.volumes`).

In Volcano's order (pkg/controllers/job/job_controller_actions.go `createJobIOIfNotExist`): a generated name not
taken yet, the claim created with it, then the name written into the Job's spec (with the resourceVersion the Job
was read at, so a concurrent edit is not overwritten). A claim that cannot be made or found yet keeps the job
Pending without a PodGroup, with a `PVCError` event as Volcano's, and is tried again after `RETRY_SECONDS` (Volcano
requeues the job; nothing here watches claims).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from scheduler.api.objects import MutableObj
from scheduler.api.timestamps import rfc3339
from scheduler.cache.kube import KubeError
from scheduler.controllers.client import Api
from scheduler.jobs import keys
from scheduler.jobs.volumes import (
    claim_manifest,
    claims_to_create,
    controlled_resources,
    generated_claim_name,
    named_claims,
    random_suffix,
)

log = logging.getLogger("volcano_py.controllers.job")

RETRY_SECONDS = 10.0
PVC_ERROR = "PVCError"  # Volcano's event reason (apis batch.PVCError)


class JobClaims:
    def __init__(
        self,
        api: Api,
        arm: Callable[[str, str, float, Callable[[], Any]], None],
        clock: Callable[[], float],
        suffix: Callable[[], str] = random_suffix,
    ) -> None:
        self.api = api
        self.arm = arm  # Timers.arm
        self.clock = clock
        self.suffix = suffix
        self._found: dict[str, set[str]] = {}  # job uid -> claims known to exist (not asked for again)
        self._told: dict[str, str] = {}  # job uid -> the last PVCError event's message

    def ensure(self, job: MutableObj) -> str | None:
        """Create the claims the job's volumes describe and check that the named ones exist; on success the job's
        spec names every claim and its status records them (None), else why the job waits."""
        meta = job["metadata"]
        namespace, uid = str(meta["namespace"]), str(meta["uid"])
        found = self._found.setdefault(uid, set())
        try:
            names = {index: self._create(job, index) for index in claims_to_create(job)}
            if names:
                updated = self.api.set_volume_claim_names(
                    namespace, str(meta["name"]), names, str(meta.get("resourceVersion") or "")
                )
                job["metadata"], job["spec"] = updated["metadata"], updated["spec"]
                found.update(names.values())
            for name in named_claims(job):
                if name not in found and self.api.pvc(namespace, name) is None:
                    return f"pvc {name} is not found, the job will be in the Pending state until the PVC is created"
                found.add(name)
        except (KubeError, ClaimTakenError) as exc:
            return str(exc)
        job.setdefault("status", {})["controlledResources"] = controlled_resources(job)
        self._told.pop(uid, None)
        return None

    def _create(self, job: MutableObj, index: int) -> str:
        namespace = str(job["metadata"]["namespace"])
        while True:  # a name no claim has (job_controller_actions.go: "Ensure never have duplicated generated names")
            name = generated_claim_name(job, self.suffix)
            if self.api.pvc(namespace, name) is None:
                break
        if self.api.create_pvc(claim_manifest(job, index, name)) is None:
            raise ClaimTakenError(f"pvc {name} was created meanwhile by someone else")
        log.info("job %s/%s: created PersistentVolumeClaim %s", namespace, job["metadata"]["name"], name)
        return name

    def wait(self, job: MutableObj, why: str, retry: Callable[[], Any]) -> None:
        """The job waits for its claims: an event (once per reason) and another try later."""
        meta = job["metadata"]
        uid = str(meta["uid"])
        if self._told.get(uid) != why:
            self._told[uid] = why
            log.info("job %s/%s waits for its claims: %s", meta["namespace"], meta["name"], why)
            self.api.event(
                {**job, "apiVersion": keys.JOB_API_VERSION, "kind": keys.JOB_KIND},
                "Warning",
                PVC_ERROR,
                f"Failed to create PVC, err: {why}",
                rfc3339(self.clock()),
            )
        self.arm(f"{meta['namespace']}/{meta['name']}", "claims", RETRY_SECONDS, retry)

    def forget(self, uid: str) -> None:
        """The job is gone."""
        self._found.pop(uid, None)
        self._told.pop(uid, None)


class ClaimTakenError(Exception):
    """A generated name was taken between the look and the create: the next try picks another."""
