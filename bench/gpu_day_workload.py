"""A seeded day of GPU training jobs for `bench_gpu_day.py`, shaped after a published trace study.

Source: Myeongjae Jeon, Shivaram Venkataraman, Amar Phanishayee, Junjie Qian, Wencong Xiao, Fan Yang,
"Analysis of Large-Scale Multi-Tenant GPU Clusters for DNN Training Workloads", USENIX ATC 2019 (Microsoft's
Philly clusters). The trace itself (github.com/msr-fiddle/philly-traces) cannot be fetched here, so the
parameters below are our reading of the paper's published distributions, written from memory and approximate,
not fitted to the trace:

- Job sizes (the paper's breakdown of jobs by GPU count, 1 / 2-4 / 5-8 / >8 GPUs, used throughout its Section 3,
  e.g. the queueing-delay and run-time CDFs by job size): most jobs ask for one GPU, jobs of up to 8 GPUs stay in
  one server, larger jobs are a small share of jobs but a large share of GPU time. Within the classes we take
  2 / 4 / 8 GPUs at 35 / 35 / 30% and 16 / 32 / 64 GPUs at 70 / 25 / 5%.
- Run times (the paper's CDF of job run times by GPU count): heavy-tailed over minutes to days, larger jobs
  running longer. We take log-normal run times per class with medians of 15 min (1 GPU), 30 min (2-8) and
  30 min (16-64), sigma 1.0 (natural log), cut to [2 min, 8 h] so a job fits in the simulated day. The large
  jobs are shorter than the paper's (whose >8-GPU jobs run longest) because we over-sample them (below): with
  the paper's run times 60 jobs of 16-64 GPUs alone would ask for more GPU-hours than the day has.
- Arrivals: the paper's clusters see a diurnal submission pattern (more in working hours); we use a rate that
  rises from 0.5x at 04:00 to 1.5x at 16:00 (a cosine).

What is ours, not the paper's: the class counts are stratified (each class gets `per_class` jobs, at least 50 each
by default, instead of Philly's mix where >8-GPU jobs are a few percent), so every class is measured; the
queues (equal weights): `heavy` submits 3x the jobs of `team-b` and `team-c`, `night` submits as many as they do
but 80% of them in a burst between 00:00 and 06:00; the small jobs (1 and 2-8 GPUs) are marked movable
(`volcano-py.io/movable`, read only by the consolidate action); every job writes a checkpoint every
`checkpoint_every` seconds (an annotation the metrics read for "lost since the last checkpoint"; the simulator
itself assumes no checkpoint: a broken gang runs its whole duration again); every Job has
`ttlSecondsAfterFinished` so the replay deletes it after it finished.

A pod per 8 GPUs for the 16-64 class (one pod per server, minAvailable = pods: a rigid gang); one pod of all its
GPUs for the 1 and 2-8 classes (as Philly places a job of up to 8 GPUs in one server).
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

DAY = 24 * 3600.0
CLASSES = ("1", "2-8", "16-64")
SIZES: dict[str, dict[int, float]] = {"1": {1: 1.0}, "2-8": {2: 0.35, 4: 0.35, 8: 0.3},
                                      "16-64": {16: 0.7, 32: 0.25, 64: 0.05}}
MEDIAN_S = {"1": 15 * 60.0, "2-8": 30 * 60.0, "16-64": 30 * 60.0}
SIGMA = 1.0
SHORTEST, LONGEST = 120.0, 8 * 3600.0
QUEUES = {"heavy": 3.0, "team-b": 1.0, "team-c": 1.0, "night": 1.0}  # relative number of jobs submitted
NIGHT_BURST = (0.0, 6 * 3600.0, 0.8)  # night: this share of its jobs arrive in [start, end)
MOVABLE = "volcano-py.io/movable"
CHECKPOINT_EVERY = "bench.volcano-py.io/checkpoint-every"  # seconds, read by the metrics only
TTL = 600


def class_of(gpus: int) -> str:
    """The gang-size class of a job of `gpus` GPUs: "1", "2-8", "16-64" (others: "other")."""
    if gpus == 1:
        return "1"
    if 2 <= gpus <= 8:
        return "2-8"
    if 16 <= gpus <= 64:
        return "16-64"
    return "other"


@dataclass(frozen=True, slots=True)
class DaySpec:
    nodes: int = 10
    gpus_per_node: int = 8
    per_class: tuple[int, int, int] = (150, 100, 60)  # jobs in class 1, 2-8, 16-64
    seed: int = 35
    checkpoint_every: int = 1800
    day: float = DAY


def cluster_doc(spec: DaySpec) -> dict[str, Any]:
    return {"nodes": [{"name": "gpu", "count": spec.nodes, "cpu": 12 * spec.gpus_per_node,
                       "memory": f"{128 * spec.gpus_per_node}Gi", "gpu": spec.gpus_per_node}],
            "queues": [{"name": q, "weight": 1} for q in QUEUES]}


def _diurnal(t: float) -> float:
    """Relative submission rate at time of day `t` (s): 0.5 at 04:00, 1.5 at 16:00."""
    return 1.0 - 0.5 * math.cos(2 * math.pi * (t - 4 * 3600) / DAY)


def _arrival(rng: random.Random, queue: str, day: float) -> float:
    if queue == "night" and rng.random() < NIGHT_BURST[2]:
        start, end, _ = NIGHT_BURST
        return rng.uniform(start * day / DAY, end * day / DAY)
    while True:  # rejection sampling of the diurnal rate over the day
        t = rng.uniform(0.0, day)
        if rng.random() * 1.5 <= _diurnal(t * DAY / day):
            return t


def _duration(rng: random.Random, cls: str) -> int:
    value = math.exp(rng.gauss(math.log(MEDIAN_S[cls]), SIGMA))
    return round(min(LONGEST, max(SHORTEST, value)))


def job_doc(name: str, queue: str, gpus: int, arrival: float, duration: int, checkpoint_every: int) -> dict[str, Any]:
    per_pod = 8 if gpus > 8 else gpus
    pods = gpus // per_pod
    resources = {"nvidia.com/gpu": per_pod, "cpu": 8 * per_pod, "memory": f"{64 * per_pod}Gi"}
    annotations = {CHECKPOINT_EVERY: str(checkpoint_every)}
    if gpus <= 8:
        annotations[MOVABLE] = "true"
    return {
        "arrival": round(arrival), "duration": duration, "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"minAvailable": pods, "schedulerName": "volcano-py", "queue": queue, "ttlSecondsAfterFinished": TTL,
                 "tasks": [{"name": "worker", "replicas": pods, "template": {"spec": {"containers": [
                     {"name": "worker", "image": "train",
                      "resources": {"requests": resources, "limits": resources}}]}}}]},
    }


def workload_docs(spec: DaySpec) -> list[dict[str, Any]]:
    """The day's Jobs, sorted by arrival; the same `spec` gives the same jobs."""
    rng = random.Random(spec.seed)
    queues, weights = list(QUEUES), list(QUEUES.values())
    drafts = []
    most = spec.nodes * spec.gpus_per_node
    for cls, count in zip(CLASSES, spec.per_class, strict=True):
        sizes = {gpus: weight for gpus, weight in SIZES[cls].items() if gpus <= most}  # what the cluster can hold
        for _ in range(count):
            queue = rng.choices(queues, weights)[0]
            gpus = rng.choices(list(sizes), list(sizes.values()))[0]
            drafts.append((_arrival(rng, queue, spec.day), queue, gpus, _duration(rng, cls)))
    drafts.sort()
    return [job_doc(f"{queue}-{i:04d}-g{gpus}", queue, gpus, arrival, duration, spec.checkpoint_every)
            for i, (arrival, queue, gpus, duration) in enumerate(drafts)]


def offered_load(docs: list[dict[str, Any]], gpus: int, day: float = DAY) -> float:
    """GPU-seconds the jobs ask for over what the cluster has in a day."""
    asked = sum(gpus_of(d) * d["duration"] for d in docs)
    return float(asked) / (gpus * day)


def gpus_of(doc: Mapping[str, Any]) -> int:
    """The GPUs a Job (a workload document, or the manifest the replay keeps of it) asks for over its tasks."""
    total = 0
    for task in doc["spec"]["tasks"]:
        limits = (task["template"]["spec"]["containers"][0].get("resources") or {}).get("limits") or {}
        total += int(task["replicas"]) * int(limits.get("nvidia.com/gpu", 0))
    return total
