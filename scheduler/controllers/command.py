"""Layer `controllers`: bus.volcano.sh Commands (what `vcctl job suspend/resume` and `vcctl queue operate`
create). A Command is carried out once and then deleted; a Command about a Job that is not ours is left for
the controller that owns that Job.
"""

from __future__ import annotations

import logging
import threading

from scheduler.api.objects import MutableObj
from scheduler.controllers.client import Api
from scheduler.controllers.job import JobController
from scheduler.controllers.queue import QueueController
from scheduler.jobs import JobEvent
from scheduler.jobs.bus import PolicyAction, PolicyEvent

log = logging.getLogger("volcano_py.controllers.command")

JOB_ACTIONS = frozenset({PolicyAction.ABORT_JOB, PolicyAction.RESUME_JOB, PolicyAction.RESTART_JOB,
                         PolicyAction.TERMINATE_JOB, PolicyAction.COMPLETE_JOB, PolicyAction.SYNC_JOB})
QUEUE_REQUESTS = {PolicyAction.OPEN_QUEUE: "Open", PolicyAction.CLOSE_QUEUE: "Close", PolicyAction.SYNC_QUEUE: None}


class CommandController:
    def __init__(self, api: Api, jobs: JobController, queues: QueueController):
        self.api, self.jobs, self.queues = api, jobs, queues
        self._done: set[str] = set()
        self._lock = threading.Lock()

    def on_command(self, kind: str | None, command: MutableObj) -> None:
        if kind == "DELETED":
            return
        meta = command.get("metadata") or {}
        uid = str(meta.get("uid"))
        with self._lock:
            if uid in self._done:
                return
        namespace, name = str(meta.get("namespace")), str(meta.get("name"))
        target = command.get("target") or {}
        action = str(command.get("action") or "")
        if not self._execute(namespace, action, str(target.get("kind")), str(target.get("name"))):
            return
        with self._lock:
            self._done.add(uid)
        self.api.delete_command(namespace, name)

    def _execute(self, namespace: str, action: str, kind: str, target: str) -> bool:
        """Carry the command out; False leaves it in place (another controller's job)."""
        if kind == "Job" and action in JOB_ACTIONS:
            job = self.api.job(namespace, target)
            if job is not None and not self.jobs.claims(job):
                return False
            if job is not None:
                log.info("command %s on job %s/%s", action, namespace, target)
                command = JobEvent(PolicyEvent.COMMAND_ISSUED, action=PolicyAction(action))
                self.jobs.reconcile(namespace, target, command)
            return True
        if kind == "Queue" and action in QUEUE_REQUESTS:
            log.info("command %s on queue %s", action, target)
            self.queues.sync(target, QUEUE_REQUESTS[PolicyAction(action)])
            return True
        log.warning("command %s on %s %s/%s is not supported: deleted", action, kind, namespace, target)
        return True
