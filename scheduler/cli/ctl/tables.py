"""Layer `ctl`: volcano-py's own tables (`-o wide`: the queue's GPUs, the job's queue and age) and `-o json|yaml`.

vcctl's tables are in the modules of each command (jobs, queues, pods, flows); these are the ones volcano-py had
before them, kept behind `-o wide`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime

import yaml

from scheduler.api.objects import MutableObj

GPU = "nvidia.com/gpu"


def age(created: object, now: float) -> str:
    if not isinstance(created, str) or not created:
        return "<unknown>"
    seconds = int(now - datetime.fromisoformat(created.replace("Z", "+00:00")).timestamp())
    if seconds < 120:
        return f"{max(seconds, 0)}s"
    if seconds < 3 * 3600:
        return f"{seconds // 60}m"
    if seconds < 48 * 3600:
        return f"{seconds // 3600}h"
    return f"{seconds // 86400}d"


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [list(map(str, header)), *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    return "\n".join("   ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells)


def job_row(job: MutableObj, now: float, with_namespace: bool) -> list[object]:
    meta, spec, status = job.get("metadata") or {}, job.get("spec") or {}, job.get("status") or {}
    replicas = sum(int(t.get("replicas", 1)) for t in spec.get("tasks") or ())
    row: list[object] = [
        meta.get("name"),
        (status.get("state") or {}).get("phase") or "Pending",
        status.get("minAvailable", spec.get("minAvailable", "-")),
        replicas,
        status.get("pending", 0),
        status.get("running", 0),
        status.get("succeeded", 0),
        status.get("failed", 0),
        spec.get("queue") or "default",
        age(meta.get("creationTimestamp"), now),
    ]
    return [meta.get("namespace"), *row] if with_namespace else row


JOB_HEADER = ["NAME", "STATUS", "MINAVAILABLE", "REPLICAS", "PENDING", "RUNNING", "SUCCEEDED", "FAILED", "QUEUE", "AGE"]


def job_table(jobs: Sequence[MutableObj], now: float, with_namespace: bool = False) -> str:
    header = ["NAMESPACE", *JOB_HEADER] if with_namespace else JOB_HEADER
    ordered = sorted(jobs, key=lambda j: (j["metadata"].get("namespace", ""), j["metadata"]["name"]))
    return table(header, [job_row(j, now, with_namespace) for j in ordered])


QUEUE_HEADER = [
    "NAME",
    "STATE",
    "PARENT",
    "WEIGHT",
    "INQUEUE",
    "PENDING",
    "RUNNING",
    "GPU-ALLOCATED",
    "GPU-DESERVED",
    "GPU-CAPABILITY",
    "AGE",
]


def queue_row(queue: MutableObj, now: float) -> list[object]:
    meta, spec, status = queue.get("metadata") or {}, queue.get("spec") or {}, queue.get("status") or {}
    return [
        meta.get("name"),
        status.get("state") or spec.get("state") or "Open",
        spec.get("parent") or "-",
        spec.get("weight", 1),
        status.get("inqueue", 0),
        status.get("pending", 0),
        status.get("running", 0),
        (status.get("allocated") or {}).get(GPU, 0),
        (spec.get("deserved") or {}).get(GPU, "-"),
        (spec.get("capability") or {}).get(GPU, "-"),
        age(meta.get("creationTimestamp"), now),
    ]


def queue_table(queues: Sequence[MutableObj], now: float) -> str:
    return table(QUEUE_HEADER, [queue_row(q, now) for q in sorted(queues, key=lambda q: q["metadata"]["name"])])


def dump(objects: Sequence[MutableObj] | MutableObj, output: str) -> str:
    if output == "json":
        return json.dumps(objects, indent=2, sort_keys=False)
    if isinstance(objects, Mapping):
        return str(yaml.safe_dump(dict(objects), sort_keys=False)).rstrip()
    return str(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": list(objects)}, sort_keys=False)).rstrip()
