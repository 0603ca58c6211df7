"""Layer `sim`: the Alibaba openb GPU trace as simulator input (`simulate --from-openb NODES.csv PODS.csv`).

The trace (Weng et al., ATC 2023; `../shared/traces/openb/README.md`) lists nodes (`sn,cpu_milli,memory_mib,
gpu,model`) and pods (`name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,
deletion_time,scheduled_time`, in seconds). A replay covers one window of it, by default one day:

- every node becomes a simulated node, labelled `MODEL_LABEL` with its GPU model;
- every pod alive in the window becomes a Volcano Job of one pod in queue `default` (the trace has no gangs):
  it arrives at its creation time (a pod created before the window and still alive arrives at the window's
  start) and runs, once bound, for as long as it ran in the trace (deletion less scheduled time; for a pod the
  trace never scheduled, deletion less creation, how long it was wanted), counted from the window's start for a
  pod already running then;
- a pod sharing a GPU (`num_gpu` 1, `gpu_milli` < 1000) asks for that fraction of one, in volcano-py's
  milli-units (`nvidia.com/gpu: 460m`): the default conf counts GPUs as a node total, not card by card;
- `gpu_spec` (`V100M16|V100M32`) becomes a required node affinity on `MODEL_LABEL`.

The replay stops at the window's end (`OpenbInput.horizon`).
"""

from __future__ import annotations

import csv
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scheduler.sim.errors import InputError
from scheduler.sim.items import WorkItem
from scheduler.sim.objects import node_object
from scheduler.sim.workload import JOB_API, ClusterSpec, Workload

DAY = 86400.0
MODEL_LABEL = "nvidia.com/gpu.product"  # the label NVIDIA's GPU feature discovery sets
NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "creation_time", "deletion_time")


@dataclass(frozen=True, slots=True)
class OpenbInput:
    cluster: ClusterSpec
    workload: Workload
    start: float  # the window, in the trace's seconds
    horizon: float  # its length: the replay stops there
    alive_at_start: int  # pods created before the window and still alive at its start


def _rows(path: Path, columns: tuple[str, ...]) -> Iterator[tuple[int, dict[str, str]]]:
    source = str(path)
    try:
        f = path.open(newline="")
    except OSError as exc:
        raise InputError(source, "", f"cannot read the file ({exc.strerror})") from None
    with f:
        reader = csv.DictReader(f)
        missing = [c for c in columns if c not in (reader.fieldnames or ())]
        if missing:
            raise InputError(source, "header", f"missing column{'s' * (len(missing) > 1)} {', '.join(missing)} "
                             f"(an openb {'node' if 'sn' in columns else 'pod'} list has {', '.join(columns)}, ...)")
        yield from enumerate(reader, start=2)


def _int(row: Mapping[str, str], column: str, source: str, line: int, *, default: int | None = None) -> int:
    text = (row.get(column) or "").strip()
    if not text and default is not None:
        return default
    try:
        value = int(text)
    except ValueError:
        raise InputError(source, f"line {line}, {column}", f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise InputError(source, f"line {line}, {column}", f"expected a number >= 0, got {value}")
    return value


def load_nodes(path: Path) -> ClusterSpec:
    source = str(path)
    nodes = []
    for line, row in _rows(path, NODE_COLUMNS):
        gpus = _int(row, "gpu", source, line)
        labels = {MODEL_LABEL: row["model"]} if row.get("model") else {}
        nodes.append(node_object(row["sn"], cpu=f"{_int(row, 'cpu_milli', source, line)}m",
                                 memory=f"{_int(row, 'memory_mib', source, line)}Mi", gpu=gpus, labels=labels))
    if not nodes:
        raise InputError(source, "", "no nodes")
    return ClusterSpec(tuple(nodes), (), {})


def _job(row: Mapping[str, str], source: str, line: int) -> dict[str, Any]:
    gpus, milli = _int(row, "num_gpu", source, line), _int(row, "gpu_milli", source, line, default=0)
    limits: dict[str, str] = {"cpu": f"{_int(row, 'cpu_milli', source, line)}m",
                              "memory": f"{_int(row, 'memory_mib', source, line)}Mi"}
    if gpus == 1 and 0 < milli < 1000:
        limits["nvidia.com/gpu"] = f"{milli}m"
    elif gpus:
        limits["nvidia.com/gpu"] = str(gpus)
    spec: dict[str, Any] = {"schedulerName": "volcano-py",
                            "containers": [{"name": "main", "image": "openb", "resources": {"limits": limits}}]}
    models = [m for m in (row.get("gpu_spec") or "").split("|") if m]
    if models:
        term = {"matchExpressions": [{"key": MODEL_LABEL, "operator": "In", "values": models}]}
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                                             {"nodeSelectorTerms": [term]}}}
    return {"apiVersion": JOB_API, "kind": "Job", "metadata": {"name": row["name"], "namespace": "default"},
            "spec": {"schedulerName": "volcano-py", "queue": "default", "minAvailable": 1,
                     "tasks": [{"name": "main", "replicas": 1, "template": {"spec": spec}}]}}


def last_whole_day(path: Path) -> int:
    """The last day of the trace that it covers whole (the one before the day of its last creation)."""
    source = str(path)
    last = max((_int(row, "creation_time", source, line) for line, row in _rows(path, POD_COLUMNS)), default=0)
    return max(0, int(last // DAY) - 1)


def load_pods(path: Path, start: float, span: float = DAY) -> tuple[Workload, int]:
    """The pods alive in [start, start + span) as one-pod Jobs; and how many were already alive at `start`."""
    source, end = str(path), start + span
    items, alive = [], 0
    for line, row in _rows(path, POD_COLUMNS):
        created = _int(row, "creation_time", source, line)
        deleted = _int(row, "deletion_time", source, line, default=2**62)
        scheduled_text = (row.get("scheduled_time") or "").strip()
        scheduled = _int(row, "scheduled_time", source, line) if scheduled_text else None
        if created >= end or deleted <= start:
            continue
        if created < start:
            alive += 1
            began = scheduled if scheduled is not None and scheduled >= start else start
            arrival, duration = 0.0, float(deleted - max(began, start))
        else:
            arrival = float(created - start)
            duration = float(deleted - (scheduled if scheduled is not None else created))
        items.append(WorkItem(_job(row, source, line), arrival, max(1.0, duration)))
    if not items:
        raise InputError(source, "", f"no pod is alive between {start:g}s and {end:g}s of the trace")
    return Workload(tuple(items)), alive


def load_openb(nodes: Path, pods: Path, *, day: int | None = None, span: float = DAY) -> OpenbInput:
    """One window of the trace: day `day` (default: the last whole day), `span` seconds long."""
    first = float((last_whole_day(pods) if day is None else day) * DAY)
    workload, alive = load_pods(pods, first, span)
    return OpenbInput(load_nodes(nodes), workload, first, span, alive)
