"""Layer `actions`: which running jobs `consolidate` may move — an opt-in mark, read once per job and bounded.

A job may be moved (all its pods evicted and placed again elsewhere; its controller must recreate them, as a
Volcano Job's, a Kubeflow job's or a Deployment's does) only if it says so:

- `volcano-py.io/movable: "true"` on its PodGroup (an annotation), or on every one of its pods (an annotation or a
  label); or, KAI-Scheduler's spelling, `kai.scheduler/preemptibility: "Preemptible"` in the same places
  (KAI's consolidation moves the jobs it calls preemptible);
- and nothing says otherwise: `volcano-py.io/movable: "false"`, `kai.scheduler/preemptibility` of any other value
  (`Non-Preemptible`, `Semi-Preemptible`), Volcano's `volcano.sh/preemptable: "false"` on a pod or the PodGroup, a
  pod of the system namespace or a system priority. A job with sub-groups or a network topology is not moved (its
  placement has rules a move could break).

Values are compared without case and surrounding spaces, at most 64 characters; anything else is not a mark: the
job is not moved, with one log line per job and value.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from scheduler.api.job import JobInfo, TaskInfo
from scheduler.framework.victims import is_critical

log = logging.getLogger("volcano_py.actions.consolidate")

MOVABLE = "volcano-py.io/movable"
KAI_PREEMPTIBILITY = "kai.scheduler/preemptibility"
MAX_VALUE = 64
_YES = {MOVABLE: "true", KAI_PREEMPTIBILITY: "preemptible"}
_NO = {MOVABLE: {"false"}, KAI_PREEMPTIBILITY: {"non-preemptible", "semi-preemptible"}}
_logged: set[tuple[str, str]] = set()
_LOGGED_MAX = 10_000


def _mark(job: JobInfo, where: Mapping[str, str] | None) -> bool | None:
    """True: opted in; False: opted out (or unreadable); None: no mark here."""
    found: bool | None = None
    for key in (MOVABLE, KAI_PREEMPTIBILITY):
        raw = where.get(key) if where else None
        if raw is None:
            continue
        value = raw.strip().lower() if isinstance(raw, str) and len(raw) <= MAX_VALUE else None
        if value == _YES[key]:
            found = True if found is None else found
        elif value is not None and value in _NO[key]:
            return False
        else:
            _log_once(job, key, raw)
            return False
    return found


def _log_once(job: JobInfo, key: str, raw: object) -> None:
    shown = str(raw)[:MAX_VALUE]
    if (job.key, shown) in _logged or len(_logged) >= _LOGGED_MAX:
        return
    _logged.add((job.key, shown))
    log.warning("job %s: %s=%r is not a mark consolidate reads (true/false, Preemptible/Non-Preemptible); the job "
                "is not moved", job.key, key, shown)


def _pod_mark(job: JobInfo, task: TaskInfo) -> bool | None:
    marks = [_mark(job, task.annotations), _mark(job, task.labels)]
    if False in marks:
        return False
    return True if True in marks else None


def movable(job: JobInfo, tasks: list[TaskInfo]) -> bool:
    """Whether `job`, whose pods on nodes are `tasks`, may be moved (the module doc)."""
    if not tasks or job.extra.get("preemptable") is False:
        return False
    annotations = job.extra.get("annotations")
    group = _mark(job, annotations if isinstance(annotations, Mapping) else None)
    if group is False:
        return False
    pods = [_pod_mark(job, t) for t in tasks]
    if False in pods or any(not t.preemptable or is_critical(t) for t in tasks):
        return False
    return group is True or all(p is True for p in pods)
