"""Layer `controllers`: what keeps a Job from progressing, said on it (issue 31).

Once per distinct cause, as a Warning event and an entry of `status.conditions` carrying a reason and message
(Volcano's conditions carry the phase only; the extra keys are ours): `FailedCreate` when the apiserver refuses
its pods (Volcano's FailedCreatePodReason event, pkg/controllers/job/job_controller_actions.go syncJob), the sync
then retried with backoff (`Retries`); `QueueNotFound` when its queue does not exist (deleted, say) and so none
of its pods are created. A cause said before a restart is read back from the last condition, not said again.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from scheduler.api.objects import MutableObj
from scheduler.api.timestamps import rfc3339
from scheduler.cache.kube import KubeError
from scheduler.controllers.client import Api
from scheduler.jobs import Phase, keys

log = logging.getLogger("volcano_py.controllers.job")

FAILED_CREATE = "FailedCreate"  # Volcano's FailedCreatePodReason (pkg/controllers/job/constant.go)
QUEUE_NOT_FOUND = "QueueNotFound"
MAX_NOTE = 4096  # characters of a condition's message (Kubernetes' own messages are quoted, bounded)
MAX_CONDITIONS = 32  # phase history kept in a Job's status.conditions


def answer_of(exc: Exception) -> str:
    """The apiserver's own message for a refused request (its Status `message`), else the error's text."""
    if isinstance(exc, KubeError):
        text = exc.body.decode("utf-8", "replace")
        try:
            parsed = json.loads(exc.body)
        except ValueError:
            return text
        if isinstance(parsed, Mapping) and isinstance(parsed.get("message"), str):
            return str(parsed["message"])
        return text
    return f"{type(exc).__name__}: {exc}"


class JobNotes:
    def __init__(self, api: Api, clock: Callable[[], float], lock: threading.Lock) -> None:
        self.api = api
        self.clock = clock
        self._lock = lock
        self._said: dict[str, tuple[str, str]] = {}  # job uid -> the (reason, message) last said on it

    def say(self, job: MutableObj, reason: str, message: str) -> None:
        """A condition (the phase, with `reason` and `message`) and a Warning event, once per distinct (reason,
        message), even across restarts (the last condition is read)."""
        meta = job["metadata"]
        uid = str(meta["uid"])
        message = message if len(message) <= MAX_NOTE else message[:MAX_NOTE] + "..."
        status: dict[str, Any] = dict(job.get("status") or {})
        conditions = list(status.get("conditions") or [])
        last = conditions[-1] if conditions and isinstance(conditions[-1], Mapping) else {}
        with self._lock:
            if self._said.get(uid) == (reason, message):
                return
        if (last.get("reason"), last.get("message")) != (reason, message):
            now = rfc3339(self.clock())
            phase = str((status.get("state") or {}).get("phase") or Phase.PENDING)
            conditions.append({"status": phase, "lastTransitionTime": now, "reason": reason, "message": message})
            status["conditions"] = conditions[-MAX_CONDITIONS:]
            log.warning("job %s/%s: %s: %s", meta["namespace"], meta["name"], reason, message)
            if self.api.replace_job_status(meta["namespace"], meta["name"], status) is not None:  # raises: retried
                job["status"] = status
            self.api.event({**job, "apiVersion": keys.JOB_API_VERSION, "kind": keys.JOB_KIND}, "Warning", reason,
                           message, now)
        with self._lock:  # said (now or before a restart): not again until the cause changes
            self._said[uid] = (reason, message)

    def reject(self, job: MutableObj, errors: list[str]) -> None:
        """A job the CRD's rules let through but the lifecycle cannot run (too many pods, a dependsOn cycle):
        Failed with reason InvalidJob naming the fields, once."""
        meta = job["metadata"]
        state = (job.get("status") or {}).get("state") or {}
        if state.get("phase") == Phase.FAILED:
            return
        now = rfc3339(self.clock())
        conditions = [*((job.get("status") or {}).get("conditions") or []),
                      {"status": str(Phase.FAILED), "lastTransitionTime": now}][-MAX_CONDITIONS:]
        status = {**(job.get("status") or {}),
                  "state": {"phase": str(Phase.FAILED), "reason": "InvalidJob", "message": "; ".join(errors),
                            "lastTransitionTime": now},
                  "conditions": conditions}
        log.warning("job %s/%s refused: %s", meta["namespace"], meta["name"], "; ".join(errors))
        self.api.replace_job_status(meta["namespace"], meta["name"], status)
        self.api.event({**job, "apiVersion": keys.JOB_API_VERSION, "kind": keys.JOB_KIND}, "Warning",
                       "InvalidJob", "; ".join(errors), now)

    def forget(self, uid: str, reason: str) -> None:
        """The cause is gone: the same cause later is said again."""
        with self._lock:
            if self._said.get(uid, ("", ""))[0] == reason:
                del self._said[uid]

    def drop(self, uid: str) -> None:
        """The Job is gone."""
        with self._lock:
            self._said.pop(uid, None)
