"""The measures of `bench_gpu_day.py`, as plain functions of a replay's outcome (so a test can check them on
numbers worked out by hand).

- Queueing delay: a job's first start of its whole gang minus its arrival; a job that never started counts with
  the replay's end as its start (a lower bound) and is also counted apart. p50 / p95 are nearest-rank
  percentiles, per gang-size class; a class with fewer than `MIN_CLASS_JOBS` jobs is "not measured".
- GPU-hours doing work: GPUs held by gangs that run (the simulator's "doing work"), integrated over the day.
- Lost GPU-hours: each time a running gang breaks, its GPUs x the time it had run whole since it last became
  whole (the simulator assumes no checkpoint: that work is run again), and, if the job says it checkpoints every
  `c` seconds, its GPUs x (that time mod `c`): what a job that checkpoints would have lost.
- Fairness: per hour of the day, each queue's demand (GPU-hours its jobs that had arrived and not ended asked
  for during the hour) and what it held (GPU-hours); the max-min fair shares of the hour's capacity by water
  filling over the demands (equal weights); Jain's index (sum x)^2 / (n sum x^2) over x = held / fair share of the
  queues with demand, for each hour where at least two queues have demand. Reported: the mean over those hours.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpu_day_workload import CHECKPOINT_EVERY, CLASSES, class_of, gpus_of

MIN_CLASS_JOBS = 50
HOUR = 3600.0
EPSILON = 1e-9  # GPU-hours: less than this is no demand


@dataclass(frozen=True, slots=True)
class JobOutcome:
    name: str
    queue: str
    gpus: int
    arrival: float
    started: float | None  # its whole gang first ran (None: never)
    until: float  # it stopped asking: its end, or the replay's end
    lost: tuple[tuple[float, float], ...] = ()  # (when its gang broke, seconds it had run whole)
    checkpoint_every: float | None = None


@dataclass(frozen=True, slots=True)
class ClassWaits:
    cls: str
    jobs: int
    p50: float | None  # seconds; None: not measured (fewer than MIN_CLASS_JOBS jobs)
    p95: float | None
    never_started: int

    @property
    def measured(self) -> bool:
        return self.p50 is not None


def outcomes(replay: Any) -> list[JobOutcome]:
    """The jobs of a `scheduler.sim.replay.Replay`."""
    out = []
    for run in replay.runs:
        manifest = run.item.manifest
        every = ((manifest.get("metadata") or {}).get("annotations") or {}).get(CHECKPOINT_EVERY)
        out.append(JobOutcome(run.item.name, run.queue, gpus_of(manifest), run.item.arrival, run.started,
                              run.ended if run.ended is not None else replay.end, tuple(run.lost),
                              float(every) if every else None))
    return out


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty sequence."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def waits_by_class(jobs: Iterable[JobOutcome], end: float) -> dict[str, ClassWaits]:
    waits: dict[str, list[float]] = {c: [] for c in CLASSES}
    never: dict[str, int] = dict.fromkeys(CLASSES, 0)
    for job in jobs:
        cls = class_of(job.gpus)
        if cls not in waits:
            continue
        waits[cls].append((job.started if job.started is not None else end) - job.arrival)
        never[cls] += job.started is None
    out = {}
    for cls, values in waits.items():
        measured = len(values) >= MIN_CLASS_JOBS
        out[cls] = ClassWaits(cls, len(values), percentile(values, 50) if measured else None,
                              percentile(values, 95) if measured else None, never[cls])
    return out


def lost_gpu_hours(jobs: Iterable[JobOutcome]) -> tuple[float, float]:
    """(lost since the gang's start, lost since its last checkpoint) in GPU-hours; without a checkpoint interval
    the two are the same."""
    since_start = since_checkpoint = 0.0
    for job in jobs:
        for _, seconds in job.lost:
            since_start += job.gpus * seconds
            every = job.checkpoint_every
            since_checkpoint += job.gpus * (seconds % every if every else seconds)
    return since_start / HOUR, since_checkpoint / HOUR


def step_integral(samples: Sequence[tuple[float, float]], start: float, end: float) -> float:
    """The integral over [start, end) of a step function given as (time, value) samples sorted by time, each value
    holding until the next sample (0 before the first)."""
    total = 0.0
    for i, (t, value) in enumerate(samples):
        t_next = samples[i + 1][0] if i + 1 < len(samples) else math.inf
        lo, hi = max(t, start), min(t_next, end)
        if hi > lo:
            total += value * (hi - lo)
    return total


def hourly(samples: Sequence[tuple[float, float]], hours: int) -> list[float]:
    """The step function's integral over each hour, in value-hours."""
    return [step_integral(samples, h * HOUR, (h + 1) * HOUR) / HOUR for h in range(hours)]


def hourly_demand(jobs: Iterable[JobOutcome], queues: Iterable[str], hours: int) -> dict[str, list[float]]:
    """GPU-hours each queue's present jobs (arrived, not ended) asked for in each hour."""
    out = {q: [0.0] * hours for q in queues}
    for job in jobs:
        row = out.setdefault(job.queue, [0.0] * hours)
        for h in range(hours):
            lo, hi = max(job.arrival, h * HOUR), min(job.until, (h + 1) * HOUR)
            if hi > lo:
                row[h] += job.gpus * (hi - lo) / HOUR
    return out


def max_min_fair(demands: Mapping[str, float], capacity: float) -> dict[str, float]:
    """Water filling with equal weights: each queue gets min(demand, level), the level such that the shares sum
    to min(capacity, total demand)."""
    fair = dict.fromkeys(demands, 0.0)
    left, open_ = capacity, sorted((d, q) for q, d in demands.items() if d > EPSILON)
    while open_:
        level = left / len(open_)
        demand, queue = open_[0]
        if demand > level:
            for _, q in open_:
                fair[q] = level
            break
        fair[queue] = demand
        left -= demand
        open_.pop(0)
    return fair


def jain(values: Sequence[float]) -> float:
    """Jain's fairness index: 1 when all are equal, 1/n when one has everything."""
    square = sum(v * v for v in values)
    return sum(values) ** 2 / (len(values) * square) if square > 0 else 1.0


def hourly_fairness(held: Mapping[str, Sequence[float]], demand: Mapping[str, Sequence[float]],
                    capacity: float, hours: int) -> list[tuple[int, float]]:
    """(hour, Jain's index of held / max-min fair share) for each hour where at least two queues have demand."""
    out = []
    for h in range(hours):
        demands = {q: d[h] for q, d in demand.items() if d[h] > EPSILON}
        if len(demands) < 2:
            continue
        fair = max_min_fair(demands, capacity)
        out.append((h, jain([held.get(q, [0.0] * hours)[h] / fair[q] for q in demands])))
    return out


def held_samples(replay: Any) -> dict[str, list[tuple[float, float]]]:
    """Per queue, (time, GPUs held) at every tick of a replay."""
    total = replay.cluster.total_gpus() / 1000  # milli-GPUs
    out: dict[str, list[tuple[float, float]]] = {}
    for tick in replay.ticks:
        for queue, share, _ in tick.queues:
            out.setdefault(queue, []).append((tick.time, share * total))
    return out


def busy_gpu_hours(replay: Any, until: float) -> float:
    """GPU-hours held by gangs that run, over [0, until)."""
    total = replay.cluster.total_gpus() / 1000  # milli-GPUs
    return step_integral([(t, busy * total) for t, _, busy in replay.utilisation], 0.0, until) / HOUR


def evictions_by_hour(replay: Any, hours: int) -> list[int]:
    """Pods evicted in each hour (the last bucket takes every later one)."""
    out = [0] * hours
    for record in replay.cluster.eviction_log:
        out[min(hours - 1, int(record.time // HOUR))] += 1
    return out
