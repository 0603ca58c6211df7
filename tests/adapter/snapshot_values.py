"""Snapshots and cycle results as plain nested values, to compare two adapters' output with `==`."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from typing import Any

from scheduler.api.job import TaskInfo
from scheduler.api.snapshot import ClusterSnapshot, CycleResult

# The cache reads a pod of another scheduler only as far as node accounting and victim selection need
# (cache/parse.py `_foreign_task`): its placement constraints, annotations and index are not read.
FOREIGN_UNREAD = ("constraints", "annotations", "index")
# Bookkeeping of jobs and nodes, not what they are: whether a session changed one since it was built and the
# journal its builder gave it (read by the incremental snapshot), and a job's allocated() as last summed.
BOOKKEEPING = ("touched", "held", "journal", "moves")


def value(obj: Any) -> Any:
    """Dataclasses (slotted, compared by identity) as plain nested values."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: value(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, Mapping):
        return {str(k.value if isinstance(k, enum.Enum) else k): value(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [value(v) for v in obj]
    if isinstance(obj, frozenset | set):
        return sorted(map(repr, obj))
    return obj


def task_value(task: TaskInfo, ours: set[str]) -> Any:
    v = value(task)
    if task.key not in ours:
        for name in FOREIGN_UNREAD:
            v.pop(name)
    return v


def snapshot_value(snapshot: ClusterSnapshot) -> dict[str, Any]:
    ours = {uid for job in snapshot.jobs.values() for uid in job.tasks}
    jobs = {}
    for uid, job in snapshot.jobs.items():
        v = value(dataclasses.replace(job, tasks={}, by_status={}))
        for name in BOOKKEEPING:
            v.pop(name)
        v["tasks"] = {t: task_value(task, ours) for t, task in job.tasks.items()}
        v["by_status"] = {s.value: list(ts) for s, ts in job.by_status.items()}  # in order: placements follow it
        jobs[uid] = v
    nodes = {}
    for name, node in snapshot.nodes.items():
        v = value(dataclasses.replace(node, tasks={}))
        v.pop("touched")
        v.pop("journal")
        v["tasks"] = {t: task_value(task, ours) for t, task in node.tasks.items()}
        nodes[name] = v
    return {"now": snapshot.now, "jobs": jobs, "nodes": nodes, "queues": value(snapshot.queues),
            "hypernodes": value(snapshot.hypernodes)}


def result_value(result: CycleResult) -> dict[str, Any]:
    return value(dataclasses.replace(result, timings={}))


def structured(snapshot: ClusterSnapshot) -> dict[str, Any]:
    v = snapshot_value(snapshot)
    v["node order"] = list(snapshot.nodes)
    v["job order"] = list(snapshot.jobs)
    v["task order"] = {k: list(j.tasks) for k, j in snapshot.jobs.items()}
    v["node task order"] = {k: list(n.tasks) for k, n in snapshot.nodes.items()}
    v["orphans"] = snapshot.orphans
    return v


def first_difference(a: Any, b: Any, path: str = "") -> str:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in [*a, *(k for k in b if k not in a)]:
            if a.get(key) != b.get(key):
                return first_difference(a.get(key), b.get(key), f"{path}/{key}")
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            if x != y:
                return first_difference(x, y, f"{path}[{i}]")
    return f"{path}: incremental {a!r} != cold {b!r}"
