"""The Volcano Job lifecycle as a pure state machine. Layer: jobs (no Kubernetes client, no clock).

`decide(job, status, pods, podgroup_phase, event)` answers: given this job, its status, its pods, its
PodGroup phase and what just happened, what is the new status and what must be created or deleted?
The answer is a frozen `Decision`; the simulator and the kopf controller both carry it out.

Steps, as Volcano's job controller takes them:
  1. pick the action (`policies.select_action`): an explicit action (command), else task policies, then job
     policies, else SyncJob;
  2. run the current phase's handler for that action: kill (delete pods, keeping finished ones when soft)
     and move to a transitional phase, or sync (create missing pods once the PodGroup left Pending);
  3. recount the pods and let the phase's rule move the job on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from scheduler.api.field_parsers import INT32
from scheduler.api.timestamps import parse_datetime
from scheduler.jobs.bus import PolicyAction
from scheduler.jobs.expand import depends_on, expected_pod_names, normalize_job, pod_for
from scheduler.jobs.policies import select_action
from scheduler.jobs.state import FINISHED, Counts, Decision, Deferred, JobEvent, JobStatus, Op, OpKind, Phase, PodView

SOFT_RETAIN = frozenset({"Succeeded", "Failed"})  # a soft kill keeps finished pods for their logs


# ---------------------------------------------------------------------------------------------- decide


@dataclass(frozen=True, slots=True)
class _Ctx:
    job: Mapping[str, Any]
    status: JobStatus
    pods: tuple[PodView, ...]
    podgroup_phase: str | None
    event: JobEvent
    action: PolicyAction


def decide(
    job: Mapping[str, Any],
    status: JobStatus | None,
    pods: Sequence[PodView],
    podgroup_phase: str | None,
    event: JobEvent,
) -> Decision:
    job = normalize_job(job)
    status = status or JobStatus.of(job)
    action, timeout = select_action(job, status, event)
    if timeout and event.action is None and action is not PolicyAction.SYNC_JOB:
        return replace(_sync(_Ctx(job, status, tuple(pods), podgroup_phase, event, PolicyAction.SYNC_JOB), _keep),
                       deferred=Deferred(action, timeout, event.event, event.pod))
    ctx = _Ctx(job, status, tuple(pods), podgroup_phase, event, action)
    return _HANDLERS.get(status.phase, _pending)(ctx)


# A phase rule sees the recounted pods and returns the next phase (or the same one).
Rule = Callable[[_Ctx, Counts, Mapping[str, Mapping[str, int]]], Phase]


def _keep(ctx: _Ctx, counts: Counts, tasks: Mapping[str, Mapping[str, int]]) -> Phase:
    return ctx.status.phase


def _to(phase: Phase) -> Rule:
    return lambda ctx, counts, tasks: phase


def _pending(ctx: _Ctx) -> Decision:
    return _kill_transitions(ctx) or _sync(ctx, _pending_rule)


def _running(ctx: _Ctx) -> Decision:
    return _kill_transitions(ctx) or _sync(ctx, _running_rule)


def _kill_transitions(ctx: _Ctx) -> Decision | None:
    """The kill actions Pending and Running share."""
    match ctx.action:
        case PolicyAction.RESTART_JOB:
            return _kill(ctx, _to(Phase.RESTARTING), soft=False, retry=1)
        case PolicyAction.RESTART_TASK | PolicyAction.RESTART_POD:
            return _kill(ctx, _to(Phase.RESTARTING), soft=False, retry=1, target=_target(ctx))
        case PolicyAction.ABORT_JOB:
            return _kill(ctx, _to(Phase.ABORTING), soft=True)
        case PolicyAction.TERMINATE_JOB:
            return _kill(ctx, _to(Phase.TERMINATING), soft=True)
        case PolicyAction.COMPLETE_JOB:
            return _kill(ctx, _to(Phase.COMPLETING), soft=True)
    return None


def _target(ctx: _Ctx) -> frozenset[str]:
    if ctx.action is PolicyAction.RESTART_POD and ctx.event.pod:
        return frozenset({ctx.event.pod})
    return frozenset(p.name for p in ctx.pods if p.task == ctx.event.task)


def _restarting(ctx: _Ctx) -> Decision:
    # Pods were killed on entering Restarting; here we wait for them to go, then start over (or give up).
    return _kill(ctx, _restarting_rule, soft=False, target=frozenset(), bump=False)


def _aborting(ctx: _Ctx) -> Decision:
    if ctx.action is PolicyAction.RESUME_JOB:
        return _kill(ctx, _to(Phase.RESTARTING), soft=True, retry=1)
    return _kill(ctx, _when_quiet(Phase.ABORTED), soft=True, bump=False)


def _aborted(ctx: _Ctx) -> Decision:
    if ctx.action is PolicyAction.RESUME_JOB:
        return _kill(ctx, _to(Phase.RESTARTING), soft=True, retry=1)
    return _kill(ctx, _keep, soft=True, bump=False)


def _completing(ctx: _Ctx) -> Decision:
    return _kill(ctx, _when_quiet(Phase.COMPLETED), soft=True, bump=False)


def _terminating(ctx: _Ctx) -> Decision:
    return _kill(ctx, _when_quiet(Phase.TERMINATED), soft=True, bump=False)


def _finished(ctx: _Ctx) -> Decision:
    return _kill(ctx, _keep, soft=True, bump=False)


_HANDLERS: dict[Phase, Callable[[_Ctx], Decision]] = {
    Phase.PENDING: _pending,
    Phase.RUNNING: _running,
    Phase.RESTARTING: _restarting,
    Phase.ABORTING: _aborting,
    Phase.ABORTED: _aborted,
    Phase.COMPLETING: _completing,
    Phase.TERMINATING: _terminating,
    Phase.COMPLETED: _finished,
    Phase.TERMINATED: _finished,
    Phase.FAILED: _finished,
}


# ---------------------------------------------------------------------------------------------- rules


def _pending_rule(ctx: _Ctx, c: Counts, tasks: Mapping[str, Mapping[str, int]]) -> Phase:
    if min_available(ctx.job) <= c.running + c.succeeded + c.failed:
        return Phase.RUNNING
    return Phase.PENDING


def _running_rule(ctx: _Ctx, c: Counts, tasks: Mapping[str, Mapping[str, int]]) -> Phase:
    spec = ctx.job["spec"]
    replicas = sum(int(t["replicas"]) for t in spec["tasks"])
    if replicas == 0:
        return Phase.RUNNING  # scaled to zero: keep the phase
    min_success = spec.get("minSuccess")
    if min_success is not None and c.succeeded >= int(min_success):
        return Phase.COMPLETED
    if c.succeeded + c.failed != replicas:
        return Phase.RUNNING
    task_minimums = sum(int(t["minAvailable"]) for t in spec["tasks"])
    if min_available(ctx.job) >= task_minimums:
        for task in spec["tasks"]:
            if tasks.get(task["name"], {}).get("Succeeded", 0) < int(task["minAvailable"]):
                return Phase.FAILED
    if min_success is not None and c.succeeded < int(min_success):
        return Phase.FAILED
    return Phase.COMPLETED if c.succeeded >= min_available(ctx.job) else Phase.FAILED


def _restarting_rule(ctx: _Ctx, c: Counts, tasks: Mapping[str, Mapping[str, int]]) -> Phase:
    if ctx.status.retry_count >= int(ctx.job["spec"]["maxRetry"]):
        return Phase.FAILED
    replicas = sum(int(t["replicas"]) for t in ctx.job["spec"]["tasks"])
    if replicas - c.terminating >= min_available(ctx.job):
        return Phase.PENDING
    return Phase.RESTARTING


def _when_quiet(phase: Phase) -> Rule:
    def rule(ctx: _Ctx, c: Counts, tasks: Mapping[str, Mapping[str, int]]) -> Phase:
        return phase if c.alive == 0 else ctx.status.phase

    return rule


def min_available(job: Mapping[str, Any]) -> int:
    return int(job["spec"]["minAvailable"])


# ---------------------------------------------------------------------------------------------- kill / sync


def _kill(
    ctx: _Ctx,
    rule: Rule,
    *,
    soft: bool,
    retry: int = 0,
    target: frozenset[str] | None = None,
    bump: bool = True,
) -> Decision:
    """Delete the job's pods (only `target` when given); a soft kill, or the last retry, keeps finished pods.

    `bump` counts a new run of the job: Volcano bumps `status.version` on every kill; volcano-py bumps it
    only when an action starts a kill, so a finished job's resyncs do not churn its status.
    """
    last_retry = ctx.status.retry_count >= int(ctx.job["spec"]["maxRetry"]) - 1
    retain = SOFT_RETAIN if (soft or last_retry) else frozenset()
    tally, deleted = _Tally(), []
    for pod in ctx.pods:
        if pod.deleting:
            tally.add(pod.task, "Terminating")
        elif pod.phase not in retain and (target is None or pod.name in target):
            deleted.append(pod.name)
            tally.add(pod.task, "Terminating")
        else:
            tally.add(pod.task, pod.phase)
    status = replace(ctx.status, retry_count=ctx.status.retry_count + retry,
                     version=ctx.status.version + (1 if bump else 0))
    counts, tasks = tally.counts(), tally.tasks()
    phase = rule(replace(ctx, status=status), counts, tasks)
    ops = [Op(OpKind.DELETE_PODS, tuple(deleted), reason=str(ctx.action))] if deleted else []
    if bump and target is None:
        ops.append(Op(OpKind.DELETE_PODGROUP, reason=str(ctx.action)))  # recreated when the job runs again
    return _decision(ctx, status, phase, counts, tasks, ops)


def _sync(ctx: _Ctx, rule: Rule) -> Decision:
    """Create missing pods once the PodGroup left Pending (a task with dependsOn once the tasks it waits for
    run); delete pods beyond the replica counts."""
    tally = _Tally()
    ops: list[Op] = [Op(OpKind.ENSURE_PODGROUP)]
    by_name = {p.name: p for p in ctx.pods}
    if podgroup_admitted(ctx.podgroup_phase):
        expected = expected_pod_names(ctx.job)
        waiting = waiting_tasks(ctx.job, ctx.pods)
        absent = [n for n in expected if n not in by_name]
        missing = tuple(n for n in absent if _task_of(ctx.job, n) not in waiting)
        held_back = {_task_of(ctx.job, n) for n in absent}
        waiting = {task: why for task, why in waiting.items() if task in held_back}
        named = set(expected)  # once, not per pod: a 100,000-replica job made this quadratic
        extra = tuple(p.name for p in ctx.pods if p.name not in named and not p.deleting)
        for name in missing:
            tally.add(_task_of(ctx.job, name), "Pending")
        if missing:
            ops.append(Op(OpKind.CREATE_PODS, missing))
        if extra:
            ops.append(Op(OpKind.DELETE_PODS, extra, reason="ScaleDown"))
    else:
        extra, waiting = (), {}
    for pod in ctx.pods:
        tally.add(pod.task, "Terminating" if pod.deleting or pod.name in extra else pod.phase)
    counts, tasks = tally.counts(), tally.tasks()
    return replace(_decision(ctx, ctx.status, rule(ctx, counts, tasks), counts, tasks, ops), waiting=waiting)


def waiting_tasks(job: Mapping[str, Any], pods: Sequence[PodView]) -> dict[str, str]:
    """Tasks whose pods may not be created yet, each with why: the tasks named in its `dependsOn` are not ready.

    A task is ready when at least its minAvailable pods are Running with every container ready, or have
    Succeeded (Volcano's job controller counts Running-and-ready pods; a dependency that already finished
    its work does not hold the next task back here). With `iteration: any` one ready task of several is
    enough; otherwise all must be. Once created, a task's pods stay: the order is about starting.
    """
    if not any(depends_on(task) for task in job["spec"]["tasks"]):
        return {}  # the usual job: no pass over its pods
    ready: dict[str, int] = {}
    for pod in pods:
        if not pod.deleting and ((pod.phase == "Running" and pod.ready) or pod.phase == "Succeeded"):
            ready[pod.task] = ready.get(pod.task, 0) + 1
    minimum = {str(t["name"]): int(t["minAvailable"]) for t in job["spec"]["tasks"]}
    out: dict[str, str] = {}
    for task in job["spec"]["tasks"]:
        deps = depends_on(task)
        if not deps:
            continue
        short = [d for d in deps if ready.get(d, 0) < minimum.get(d, 0)]
        any_of = len(deps) > 1 and (task.get("dependsOn") or {}).get("iteration") == "any"
        if (any_of and len(short) == len(deps)) or (not any_of and short):
            detail = ", ".join(f"{d} {ready.get(d, 0)}/{minimum.get(d, 0)} ready" for d in short)
            out[str(task["name"])] = ("waits for any of " if any_of else "waits for ") + detail
    return out


def _task_of(job: Mapping[str, Any], name: str) -> str:
    prefix = job["metadata"]["name"] + "-"
    return name[len(prefix):].rsplit("-", 1)[0]


def _decision(ctx: _Ctx, status: JobStatus, phase: Phase, counts: Counts,
              tasks: Mapping[str, Mapping[str, int]], ops: list[Op]) -> Decision:
    return Decision(phase=phase, retry_count=status.retry_count, version=status.version, action=ctx.action,
                    counts=counts, min_available=min_available(ctx.job), ops=tuple(ops), task_counts=tasks)


class _Tally:
    """Counts pods by phase, overall and per task."""

    def __init__(self) -> None:
        self._tasks: dict[str, dict[str, int]] = {}

    def add(self, task: str, phase: str) -> None:
        phases = self._tasks.setdefault(task, {})
        phases[phase] = phases.get(phase, 0) + 1

    def counts(self) -> Counts:
        total: dict[str, int] = {}
        for phases in self._tasks.values():
            for phase, n in phases.items():
                total[phase] = total.get(phase, 0) + n
        return Counts(pending=total.get("Pending", 0), running=total.get("Running", 0),
                      succeeded=total.get("Succeeded", 0), failed=total.get("Failed", 0),
                      terminating=total.get("Terminating", 0),
                      unknown=sum(n for p, n in total.items() if p not in _COUNTED))

    def tasks(self) -> dict[str, dict[str, int]]:
        return {t: {p: n for p, n in phases.items() if p != "Terminating"} for t, phases in self._tasks.items()}


_COUNTED = frozenset({"Pending", "Running", "Succeeded", "Failed", "Terminating"})


# ---------------------------------------------------------------------------------------------- helpers


def podgroup_admitted(podgroup_phase: str | None) -> bool:
    """Pods are created only once the scheduler has moved the PodGroup out of Pending."""
    return bool(podgroup_phase) and podgroup_phase != "Pending"


def desired_pods(
    job: Mapping[str, Any],
    podgroup_phase: str | None,
    existing_pod_names: Sequence[str] | set[str],
    *,
    podgroup: str | None = None,
) -> list[dict[str, Any]]:
    """Pod manifests to create now: none while the PodGroup is Pending, else every missing replica.

    `podgroup` is the name of the PodGroup found for the job; the pods join it (see `pod_for`)."""
    if not podgroup_admitted(podgroup_phase):
        return []
    job = normalize_job(job)
    existing = set(existing_pod_names)
    return [
        pod_for(job, t, i, podgroup=podgroup)
        for t, task in enumerate(job["spec"]["tasks"])
        for i in range(int(task["replicas"]))
        if f"{job['metadata']['name']}-{task['name']}-{i}" not in existing
    ]


def ttl_seconds(job: Mapping[str, Any]) -> int | None:
    """The job's `ttlSecondsAfterFinished`: an int32 >= 0 (Volcano's `*int32`), else None (no TTL). The webhook
    refuses a negative one; anything else unreadable (a string, a float, past int32) is read as none, never as
    an exception in the controller's reconcile or the replay."""
    ttl = (job.get("spec") or {}).get("ttlSecondsAfterFinished")
    return ttl if type(ttl) is int and 0 <= ttl <= INT32 else None


def expired(job: Mapping[str, Any], now: datetime, finished_at: datetime | None = None) -> bool:
    """Whether a finished job has outlived `ttlSecondsAfterFinished` (finish time: given, or the status's)."""
    ttl = ttl_seconds(job)
    if ttl is None:
        return False
    status = JobStatus.of(job)
    if finished_at is None:
        if status.phase not in FINISHED:
            return False
        finished_at = parse_datetime(((job.get("status") or {}).get("state") or {}).get("lastTransitionTime"))
        if finished_at is None:  # missing or unreadable: never counted as expired
            return False
    try:
        return now >= finished_at + timedelta(seconds=ttl)
    except OverflowError:  # a finish time near year 9999 plus a long TTL: past any clock
        return False
