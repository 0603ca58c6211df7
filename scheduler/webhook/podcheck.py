"""Layer `webhook`: a Job's pod templates tried on the apiserver itself, by a server-side dry run.

Kubernetes refuses some pods a Job's schema cannot foresee: a fractional `nvidia.com/gpu`, an extended resource
whose request differs from its limit, a template its PodSecurity level forbids. Volcano's webhook runs
Kubernetes' pod validation on each task's template (pkg/webhooks/admission/jobs/validate/admit_job.go,
validateTaskTemplate, which calls k8s' ValidatePodTemplate); volcano-py asks the apiserver itself: one
`POST .../pods?dryRun=All` per task, with the pod the controller would create for replica 0 (so admission
plugins and webhooks see it too), nothing persisted. The refusal is Kubernetes' own message, prefixed with the
task's field.

Only a lasting refusal refuses the Job: 400 (not decodable as a Pod), 422 (Invalid) and a 403 from PodSecurity.
Anything else (a timeout, the apiserver down, a quota exceeded now, the webhook's own RBAC) lets the Job through:
the controller's FailedCreate event and condition tell it then. Each such failure is logged once per kind, not
per Job. All the dry runs of one review share one deadline, well inside the apiserver's webhook timeout.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import urllib3

from scheduler.cache.kube import Kube, KubeError
from scheduler.jobs.expand import normalize_job, pod_for

log = logging.getLogger("volcano_py.webhook")

DRY_RUN_BUDGET = 4.0  # seconds for all the dry runs of one review (the chart's webhook timeout is 10 s)
REFUSING_STATUSES = frozenset({400, 422})
POD_SECURITY = "violates PodSecurity"
MAX_MESSAGE = 2048  # Kubernetes' message is quoted whole, up to this


def kubernetes_message(exc: KubeError) -> str:
    """The `message` of the apiserver's Status, else its body as text, bounded."""
    text = exc.body.decode("utf-8", "replace")
    try:
        status = json.loads(exc.body)
        if isinstance(status, Mapping) and isinstance(status.get("message"), str):
            text = status["message"]
    except ValueError:
        pass
    return text if len(text) <= MAX_MESSAGE else text[:MAX_MESSAGE] + "..."


def refuses(exc: KubeError) -> bool:
    """Is this answer a lasting refusal of the pod itself (not of the moment, nor of the webhook)?"""
    return exc.status in REFUSING_STATUSES or (exc.status == 403 and POD_SECURITY in kubernetes_message(exc))


def template_pods(job: Mapping[str, Any]) -> list[tuple[int, str, dict[str, Any]]]:
    """(task index, task name, pod) for each task: the pod the controller creates for its replica 0, under a
    generated name (a dry run must not collide with a pod that exists) and owned by nothing."""
    normalized = normalize_job(job)
    out = []
    for index, task in enumerate(normalized["spec"]["tasks"]):
        pod = pod_for(normalized, index, 0)
        meta = pod["metadata"]
        meta["generateName"] = f"{str(meta.pop('name'))[:50]}-"
        meta.pop("ownerReferences", None)
        meta["namespace"] = str((job.get("metadata") or {}).get("namespace") or "default")
        out.append((index, str(task["name"]), pod))
    return out


class PodDryRun:
    """The `Checks.pod_templates` of `volcano-py webhook`: dry-run creates on the apiserver behind `kube`."""

    def __init__(self, kube: Kube, budget: float = DRY_RUN_BUDGET, clock: Any = time.monotonic) -> None:
        self.kube, self.budget, self.clock = kube, budget, clock
        self._logged: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, job: Mapping[str, Any]) -> list[str]:
        try:
            pods = template_pods(job)
        except Exception as exc:  # a template we cannot build is the controller's to report
            log.debug("building a Job's pods failed", exc_info=True)
            self._once("build", "cannot build a pod from a Job's template to dry-run it (%s: %s); not checked",
                       type(exc).__name__, exc)
            return []
        deadline = self.clock() + self.budget
        problems = []
        for index, task, pod in pods:
            left = deadline - self.clock()
            if left <= 0:
                self._once("budget", "pod template dry runs took longer than %.1f s; the rest were not checked",
                           self.budget)
                break
            path = f"/api/v1/namespaces/{quote(pod['metadata']['namespace'], safe='')}/pods"
            try:
                self.kube.request("POST", path, query={"dryRun": "All"}, body=pod, timeout=left)
            except KubeError as exc:
                if refuses(exc):
                    problems.append(f"spec.tasks[{index}].template: task {task!r}: Kubernetes refuses its pods: "
                                    f"{kubernetes_message(exc)}")
                else:
                    self._once(f"status-{exc.status}", "pod template dry run answered %d (%s); not refusing Jobs "
                               "for it", exc.status, kubernetes_message(exc))
            except (OSError, urllib3.exceptions.HTTPError) as exc:
                self._once(type(exc).__name__, "pod template dry run failed (%s: %s); not refusing Jobs for it",
                           type(exc).__name__, exc)
        return problems

    def _once(self, kind: str, message: str, *args: object) -> None:
        with self._lock:
            first = kind not in self._logged
            self._logged.add(kind)
        log.log(logging.WARNING if first else logging.DEBUG, message, *args)
