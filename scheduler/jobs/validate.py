"""The checks Volcano's Job admission webhook makes, as data. Layer: jobs (pure).

`validate_job` returns one message per problem, each starting with the field path; empty means valid.
Checks that need the cluster (the queue exists and is Open) belong to the controllers.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from scheduler.api.resources import QuantityError, parse_quantity
from scheduler.durations import parse_seconds
from scheduler.jobs import keys
from scheduler.jobs.bus import POLICY_ACTIONS, POLICY_EVENTS, PolicyEvent
from scheduler.jobs.expand import depends_on, first_wave
from scheduler.jobs.partitions import partition_problems
from scheduler.jobs.plugins import IMPLEMENTED, VOLCANO_ONLY
from scheduler.jobs.tier_fields import job_tier_problems

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_MAX_LABEL = 63


def validate_job(job: Mapping[str, Any]) -> list[str]:
    spec = job.get("spec") or {}
    tasks = list(spec.get("tasks") or [])
    errors = _job_scalars(spec)
    if not tasks:
        errors.append("spec.tasks: at least one task is required")
    errors += _task_names(tasks)
    for index, task in enumerate(tasks):
        errors += _task(job, task, index)
    errors += _job_min_available(spec, tasks)
    errors += validate_policies(spec.get("policies") or [], "spec.policies")
    errors += _plugins(spec)
    errors += _volumes(spec.get("volumes") or [])
    errors += _depends_on(tasks)
    errors += job_tier_problems(spec)
    return errors


def _job_scalars(spec: Mapping[str, Any]) -> list[str]:
    errors = []
    for field in ("minAvailable", "maxRetry", "ttlSecondsAfterFinished", "minSuccess"):
        value = spec.get(field)
        if value is not None and int(value) < 0:
            errors.append(f"spec.{field}: {value} must be >= 0")
    return errors


def _replicas(task: Mapping[str, Any]) -> int:
    return int(task.get("replicas", keys.DEFAULT_TASK_REPLICAS))


def _task_names(tasks: list[Mapping[str, Any]]) -> list[str]:
    errors, seen = [], set()
    for index, task in enumerate(tasks):
        name = task.get("name") or f"{keys.DEFAULT_TASK_NAME}{index}"
        if not _DNS1123_LABEL.match(name) or len(name) > _MAX_LABEL:
            errors.append(f"spec.tasks[{index}].name: {name!r} must be a DNS-1123 label")
        if name in seen:
            errors.append(f"spec.tasks[{index}].name: duplicated task name {name!r}")
        seen.add(name)
    return errors


def _task(job: Mapping[str, Any], task: Mapping[str, Any], index: int) -> list[str]:
    path = f"spec.tasks[{index}]"
    replicas = _replicas(task)
    errors = []
    if replicas < 0:
        errors.append(f"{path}.replicas: {replicas} must be >= 0")
    minimum = task.get("minAvailable")
    if minimum is not None and int(minimum) > replicas:
        errors.append(f"{path}.minAvailable: {minimum} must be <= replicas {replicas}")
    if minimum is not None and int(minimum) < 0:
        errors.append(f"{path}.minAvailable: {minimum} must be >= 0")
    pod_spec = (task.get("template") or {}).get("spec") or {}
    if not pod_spec.get("containers"):
        errors.append(f"{path}.template.spec.containers: at least one container is required")
    errors += _container_resources(pod_spec, f"{path}.template.spec")
    errors += _pod_name_length(job, task, index, replicas)
    errors += validate_policies(task.get("policies") or [], f"{path}.policies")
    errors += partition_problems(job, task, index)
    return errors


def _container_resources(pod_spec: Mapping[str, Any], path: str) -> list[str]:
    """Requests and limits are quantities, not negative, and a request is not above its limit: Kubernetes'
    pod validation, which Volcano's webhook runs on each task's template (admit_job.go validateTaskTemplate)."""
    errors = []
    for kind in ("initContainers", "containers"):
        for c, container in enumerate(pod_spec.get(kind) or []):
            resources = container.get("resources") or {}
            amounts: dict[str, dict[str, Any]] = {}
            for part in ("requests", "limits"):
                for name, value in (resources.get(part) or {}).items():
                    where = f"{path}.{kind}[{c}].resources.{part}.{name}"
                    try:
                        amount = parse_quantity(value, field=where)
                    except QuantityError as exc:
                        errors.append(str(exc))
                        continue
                    if amount < 0:
                        errors.append(f"{where}: {value} must be greater than or equal to 0")
                    amounts.setdefault(name, {})[part] = amount
            for name, both in amounts.items():
                if "limits" in both and "requests" in both and both["requests"] > both["limits"]:
                    errors.append(f"{path}.{kind}[{c}].resources.requests.{name}: {both['requests']} must be less "
                                  f"than or equal to the {name} limit {both['limits']}")
    return errors


def _pod_name_length(job: Mapping[str, Any], task: Mapping[str, Any], index: int, replicas: int) -> list[str]:
    name = f"{(job.get('metadata') or {}).get('name', '')}-{task.get('name', '')}-{max(replicas - 1, 0)}"
    if len(name) > _MAX_LABEL:
        return [f"spec.tasks[{index}].name: pod name {name!r} must be no more than {_MAX_LABEL} characters"]
    return []


def _job_min_available(spec: Mapping[str, Any], tasks: list[Mapping[str, Any]]) -> list[str]:
    total = sum(_replicas(t) for t in tasks)
    minimum = spec.get("minAvailable")
    if minimum is not None and int(minimum) > total:
        return [f"spec.minAvailable: {minimum} must be <= total replicas {total}"]
    waiting = [str(t.get("name")) for t in tasks if depends_on(t)]
    first = sum(_replicas(t) for t in first_wave(tasks))
    if minimum and waiting and int(minimum) > first:
        return [
            f"spec.minAvailable: {minimum} must be <= {first}, the replicas of the tasks without dependsOn: the pods "
            f"of {', '.join(waiting)} are created only once those run, so a larger gang could never be scheduled"
        ]
    return []


def validate_policies(policies: list[Mapping[str, Any]], path: str) -> list[str]:
    """Event xor exitCode, known events and actions, no duplicates, `*` alone, exitCode != 0."""
    errors: list[str] = []
    seen_events: set[str] = set()
    seen_codes: set[int] = set()
    for index, policy in enumerate(policies):
        where = f"{path}[{index}]"
        events = policy_events(policy)
        code = policy.get("exitCode")
        if events and code is not None:
            errors.append(f"{where}: must not specify event and exitCode simultaneously")
            continue
        if not events and code is None:
            errors.append(f"{where}: either event or exitCode must be specified")
            continue
        if policy.get("action") not in POLICY_ACTIONS:
            errors.append(f"{where}.action: {policy.get('action')!r} is not one of {sorted(POLICY_ACTIONS)}")
        for event in events:
            if event not in POLICY_EVENTS:
                errors.append(f"{where}.event: {event!r} is not one of {sorted(POLICY_EVENTS)}")
            elif event in seen_events:
                errors.append(f"{where}.event: duplicate event {event!r} across policies")
            seen_events.add(event)
        if code is not None:
            if int(code) == 0:
                errors.append(f"{where}.exitCode: 0 is not a valid error code")
            elif int(code) in seen_codes:
                errors.append(f"{where}.exitCode: duplicate exitCode {code}")
            seen_codes.add(int(code))
        errors += _timeout(policy, where)
    if PolicyEvent.ANY in seen_events and len(seen_events) > 1:
        errors.append(f"{path}: a policy on '*' must be the only event policy")
    return errors


def policy_events(policy: Mapping[str, Any]) -> list[str]:
    """`events` plus `event`, without duplicates, in order."""
    events = list(policy.get("events") or [])
    if policy.get("event"):
        events.append(policy["event"])
    return list(dict.fromkeys(events))


def _timeout(policy: Mapping[str, Any], where: str) -> list[str]:
    if policy.get("timeout") is None:
        return []
    try:
        parse_seconds(policy["timeout"])
    except ValueError:
        return [f"{where}.timeout: {policy['timeout']!r} is not a duration like '30s' or '5m'"]
    return []


def _plugins(spec: Mapping[str, Any]) -> list[str]:
    known = set(IMPLEMENTED) | set(VOLCANO_ONLY)
    return [
        f"spec.plugins.{name}: unknown job plugin (known: {sorted(known)})"
        for name in (spec.get("plugins") or {})
        if name not in known
    ]


def unsupported_plugins(job: Mapping[str, Any]) -> list[str]:
    """Volcano plugins in the job that volcano-py accepts but does not implement (warn about them)."""
    return [name for name in ((job.get("spec") or {}).get("plugins") or {}) if name in VOLCANO_ONLY]


def _volumes(volumes: list[Mapping[str, Any]]) -> list[str]:
    errors, mounts = [], set()
    for index, volume in enumerate(volumes):
        where = f"spec.volumes[{index}]"
        mount = volume.get("mountPath")
        if not mount:
            errors.append(f"{where}.mountPath: required")
        elif mount in mounts:
            errors.append(f"{where}.mountPath: duplicated mountPath {mount!r}")
        mounts.add(mount)
        has_claim, has_name = volume.get("volumeClaim") is not None, bool(volume.get("volumeClaimName"))
        if not has_claim and not has_name:
            errors.append(f"{where}: either volumeClaim or volumeClaimName must be specified")
        if has_claim and has_name:
            errors.append(f"{where}: specify volumeClaimName for an existing PVC or volumeClaim for a new one")
    return errors


def _depends_on(tasks: list[Mapping[str, Any]]) -> list[str]:
    names = [t.get("name") for t in tasks]
    graph: dict[str, list[str]] = {}
    errors = []
    for index, task in enumerate(tasks):
        deps = depends_on(task)
        for dep in deps:
            if dep not in names:
                errors.append(f"spec.tasks[{index}].dependsOn.name: unknown task {dep!r}")
        graph[str(task.get("name"))] = [d for d in deps if d in names]
    if not errors and _has_cycle(graph):
        errors.append("spec.tasks: dependsOn must form a directed acyclic graph")
    return errors


def _has_cycle(graph: Mapping[str, list[str]]) -> bool:
    state: dict[str, int] = {}  # 1 visiting, 2 done

    def visit(node: str) -> bool:
        if state.get(node) == 1:
            return True
        if state.get(node) == 2:
            return False
        state[node] = 1
        cyclic = any(visit(dep) for dep in graph.get(node, []))
        state[node] = 2
        return cyclic

    return any(visit(node) for node in graph)
