"""Layer `controllers`: the JobFlow and JobTemplate controllers (`flow.volcano.sh/v1alpha1`).

Every event about a JobFlow, a JobTemplate it names or a Job it controls ends in `JobFlowController.reconcile`,
which reads the flow, its templates and its Jobs fresh from the apiserver, asks `scheduler.jobs.flow.plan` what
to do and does it: create the Jobs whose targets completed, delete them once a `jobRetainPolicy: delete` flow
succeeded, write the status. Creating is idempotent by name, so a restarted controller or a repeated event
makes no second Job. A problem with the flow (a missing template, an unknown target, a cycle, a field Volcano
does not act on) is a Warning Event on the JobFlow naming the field, told once per controller run while it
lasts; the rest of the flow goes on. kopf lists every object again when a watch restarts (each minute), so a
call that failed is retried then.

A JobFlow is served by volcano-py's controllers unless one of the JobTemplates it names exists and is for
another scheduler (the claim rule of Jobs), so a flow meant for Volcano's controllers is not run by ours too
(Volcano's jobflow controller takes every JobFlow, whatever its templates name).

`JobTemplateController` keeps a template's `status.jobDependsOnList`: the Jobs made from it, when one is added.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from scheduler import metrics
from scheduler.api.objects import MutableObj
from scheduler.api.timestamps import rfc3339
from scheduler.cache.kube import KubeError
from scheduler.controllers.client import Api
from scheduler.jobs import flow
from scheduler.jobs.flow import FlowPlan, FlowStep, Problem, ProblemKind
from scheduler.jobs.flow_status import FlowPhase

log = logging.getLogger("volcano_py.controllers.jobflow")

RETRIED = frozenset({408, 409, 429})  # a refusal worth retrying rather than reporting as the flow's problem


def refusal(exc: KubeError) -> str:
    """The apiserver's message of a refused request (it names the field of an invalid object)."""
    try:
        return " ".join(str(json.loads(exc.body).get("message") or exc.status).split())
    except (ValueError, AttributeError):
        return exc.body.decode("utf-8", "replace") or str(exc.status)


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace")), str(meta.get("name"))


class JobTemplateController:
    def __init__(self, api: Api, claims: Callable[[Mapping[str, Any]], bool]):
        self.api, self.claims = api, claims

    def sync(self, namespace: str, name: str) -> dict[str, Any] | None:
        template = self.api.jobtemplate(namespace, name)
        if template is None or not self.claims(template):
            return None
        jobs = self.api.jobs_with_labels(namespace, {flow.CREATED_BY_JOB_TEMPLATE: flow.object_string(namespace, name)})
        status = flow.template_status(template, (str(j["metadata"]["name"]) for j in jobs))
        if status is not None:
            self.api.replace_jobtemplate_status(namespace, name, status)
        return status


class JobFlowController:
    def __init__(
        self, api: Api, claims: Callable[[Mapping[str, Any]], bool], *, clock: Callable[[], float] = time.time
    ):
        """`claims`: whether a Job (or a JobTemplate, whose spec is a Job's) is for our schedulers."""
        self.api, self.claims, self.clock = api, claims, clock
        self.templates = JobTemplateController(api, claims)
        self._guard = threading.Lock()
        self._locks: dict[tuple[str, str], threading.Lock] = {}
        self._told: dict[str, set[Problem]] = {}  # flow uid -> the problems its Events told
        self._naming: dict[tuple[str, str], set[str]] = {}  # (namespace, template) -> flows that name it

    # ---- events ------------------------------------------------------------------------------------------
    def on_jobflow(self, kind: str | None, jobflow: MutableObj) -> None:
        namespace, name = _key(jobflow)
        if kind == "DELETED":
            with self._guard:
                self._told.pop(str(jobflow["metadata"].get("uid")), None)
                self._locks.pop((namespace, name), None)
                for (in_namespace, _), flows in self._naming.items():
                    if in_namespace == namespace:
                        flows.discard(name)
            return
        self._safely(namespace, name)

    def on_jobtemplate(self, kind: str | None, template: MutableObj) -> None:
        if kind == "DELETED":
            return
        namespace, name = _key(template)
        self._quietly(f"jobtemplate {namespace}/{name}", lambda: self.templates.sync(namespace, name))
        with self._guard:
            waiting = sorted(self._naming.get((namespace, name), ()))
        for flow_name in waiting:  # a template that was missing: the flows naming it can go on
            self._safely(namespace, flow_name)

    def on_job(self, kind: str | None, job: MutableObj) -> None:
        namespace, _ = _key(job)
        owner = flow.flow_owner(job)
        if owner is not None:
            self._safely(namespace, owner)
        made_from = flow.template_of(job)
        if made_from is not None and kind in (None, "ADDED"):  # Volcano's addJob: on a Job added only
            self._quietly(f"jobtemplate {made_from[0]}/{made_from[1]}", lambda: self.templates.sync(*made_from))

    # ---- reconcile -----------------------------------------------------------------------------------------
    def _lock(self, key: tuple[str, str]) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(key, threading.Lock())

    def _safely(self, namespace: str, name: str) -> None:
        self._quietly(f"jobflow {namespace}/{name}", lambda: self.reconcile(namespace, name))

    @staticmethod
    def _quietly(what: str, call: Callable[[], object]) -> None:
        """An API failure is one log line: the next event, or kopf's next listing, tries again."""
        try:
            call()
        except KubeError as exc:
            log.warning("%s: %s (retried on the next change)", what, exc)

    def reconcile(self, namespace: str, name: str) -> FlowPlan | None:
        with self._lock((namespace, name)):
            return self._reconcile(namespace, name)

    def _reconcile(self, namespace: str, name: str) -> FlowPlan | None:
        jobflow = self.api.jobflow(namespace, name)
        if jobflow is None or (jobflow.get("metadata") or {}).get("deletionTimestamp"):
            return None
        names = flow.template_names(jobflow)
        with self._guard:
            for template in names:
                self._naming.setdefault((namespace, template), set()).add(name)
        templates = {t: self.api.jobtemplate(namespace, t) for t in names}
        if not all(self.claims(t) for t in templates.values() if t is not None):
            return None
        uid = str(jobflow["metadata"]["uid"])
        label = {flow.CREATED_BY_JOB_FLOW: flow.object_string(namespace, name)}
        jobs = [j for j in self.api.jobs_with_labels(namespace, label) if flow.controlled_by(j, uid)]
        plan = flow.plan(jobflow, templates, jobs, self.clock())
        problems = list(plan.problems)
        for manifest in plan.create:
            problem = self._create(jobflow, manifest, plan.steps[manifest["metadata"]["name"]])
            if problem is not None:
                problems.append(problem)
        for job in plan.delete:
            log.info(
                "jobflow %s/%s succeeded: deleting job %s (jobRetainPolicy delete)",
                namespace,
                name,
                job["metadata"]["name"],
            )
            self.api.delete_job(namespace, str(job["metadata"]["name"]), str(job["metadata"]["uid"]))
        if plan.status is not None:
            self.api.replace_jobflow_status(namespace, name, plan.status)
            self._entered(jobflow, plan.entered)
        self._tell(jobflow, problems)
        return plan

    def _create(self, jobflow: MutableObj, manifest: dict[str, Any], step: FlowStep) -> Problem | None:
        job = str(manifest["metadata"]["name"])
        try:
            created = self.api.create(manifest)
        except KubeError as exc:
            if exc.status in RETRIED or exc.status >= 500:
                raise
            return Problem(ProblemKind.REFUSED, step.path, (job, refusal(exc)))
        if created is None:  # it exists, and not among the Jobs this flow controls
            return Problem(ProblemKind.NAME_TAKEN, f"{step.path}.name", (job,))
        namespace, name = _key(jobflow)
        log.info("jobflow %s/%s: created job %s", namespace, name, job)
        self.api.event(self._involved(jobflow), "Normal", "Created", f"created job {job}", rfc3339(self.clock()))
        return None

    def _entered(self, jobflow: MutableObj, phase: FlowPhase | None) -> None:
        namespace, name = _key(jobflow)
        if phase is None:
            return
        log.info("jobflow %s/%s: %s", namespace, name, phase)
        if phase in (FlowPhase.SUCCEED, FlowPhase.FAILED):  # Volcano's UpdateJobFlowSucceed / UpdateJobFlowFailed
            metrics.observe_controllers(lambda m: m.record_jobflow_phase(namespace, str(phase)))

    def _tell(self, jobflow: MutableObj, problems: list[Problem]) -> None:
        """A Warning Event for each problem not told yet; one that went away is told again if it comes back."""
        uid = str(jobflow["metadata"]["uid"])
        current = set(problems)
        with self._guard:
            new = [p for p in problems if p not in self._told.get(uid, set())]
            self._told[uid] = current
        namespace, name = _key(jobflow)
        for problem in dict.fromkeys(new):
            log.warning("jobflow %s/%s: %s", namespace, name, problem.message())
            self.api.event(
                self._involved(jobflow), "Warning", str(problem.kind), problem.message(), rfc3339(self.clock())
            )

    @staticmethod
    def _involved(jobflow: MutableObj) -> dict[str, Any]:
        return {**jobflow, "apiVersion": flow.FLOW_API_VERSION, "kind": flow.JOBFLOW_KIND}
