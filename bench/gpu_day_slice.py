"""One hour of `bench_gpu_day.py`'s day, cut out and time-compressed, and what `bench_day_slice.py` measures of
it on both sides (Volcano's real scheduler on the test control plane, volcano-py's simulator). Pure functions of
the day's workload documents and of what each side observed, so a test checks them on numbers worked out by hand.

The cut (`slice_day`): given when each job of the day first ran whole (the day's replay under Volcano's conf),
the slice `[start, start + length)` holds
- `running`: jobs that arrived before `start`, ran whole at `start` and had work left then. They are submitted
  before the slice's clock starts (the warm-up) and run their remaining work from the slice's time 0;
- `waiting`: jobs that arrived before `start` and had not run by then: submitted at time 0, with their whole
  duration (their wait is measured from time 0, so it is the part of their wait inside the slice);
- `arrives`: jobs that arrive in the slice: submitted at `(arrival - start) / factor`, duration `/ factor`.
Jobs that ended before `start`, or arrive after the slice, are not in it. Times on the slice's clock are
compressed seconds; the measures multiply them back by `factor` (minutes and GPU-hours of the day).

The measures (`measure`): per gang-size class (1, 2-8, 16-64 GPUs), each `waiting` or `arrives` job's wait (the
first time its whole gang ran minus its submission; a job whose gang never ran whole by the slice's end counts
with the end, a lower bound, and is counted apart), p50 / p95 by nearest rank where the class holds at least
`MIN_SLICE_JOBS` jobs; and the GPU-hours held by gangs running whole inside the slice, every role counted.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpu_day_metrics import HOUR, percentile
from gpu_day_workload import CLASSES, class_of, gpus_of

MIN_SLICE_JOBS = 5  # a slice is small: a class's percentiles are given from 5 jobs on
TOLERANCE = 0.10  # the bound: a measure whose sides differ by more is flagged
ROLE = "bench.volcano-py.io/slice-role"  # running / waiting / arrives, on the Job, for whoever reads the cluster
ROLES = ("running", "waiting", "arrives")


@dataclass(frozen=True, slots=True)
class SliceJob:
    name: str
    queue: str
    gpus: int
    pods: int  # the gang: all of them must run (minAvailable)
    role: str  # one of ROLES
    arrival: float  # compressed seconds on the slice's clock (0 for those carried over)
    duration: float  # compressed seconds of work once whole (what is left, for `running`)
    manifest: dict[str, Any]  # the Volcano Job, schedulerName `volcano`, without `arrival` / `duration`

    @property
    def cls(self) -> str:
        return class_of(self.gpus)


@dataclass(frozen=True, slots=True)
class Slice:
    start: float  # seconds into the day
    length: float  # seconds of the day
    factor: float  # the compression: arrivals and durations divided by it
    jobs: tuple[SliceJob, ...]

    @property
    def window(self) -> float:
        """The slice's length on its compressed clock."""
        return self.length / self.factor

    def of_role(self, role: str) -> list[SliceJob]:
        return [j for j in self.jobs if j.role == role]


def slice_day(docs: Iterable[Mapping[str, Any]], started: Mapping[str, float | None], start: float,
              length: float, factor: float) -> Slice:
    """The slice `[start, start + length)` of the day's workload documents (`gpu_day_workload.workload_docs`),
    compressed by `factor`; `started[name]`: when the job first ran whole in the day (None or absent: never)."""
    if factor <= 0 or length <= 0:
        raise ValueError(f"factor and length must be positive, got {factor} and {length}")
    jobs = []
    for doc in docs:
        name = str(doc["metadata"]["name"])
        arrival, duration = float(doc["arrival"]), float(doc["duration"])
        began = started.get(name)
        if start <= arrival < start + length:
            role, at, work = "arrives", (arrival - start) / factor, duration / factor
        elif arrival >= start + length:
            continue
        elif began is None or began > start:
            role, at, work = "waiting", 0.0, duration / factor
        elif began + duration > start:
            role, at, work = "running", 0.0, (began + duration - start) / factor
        else:
            continue  # ended before the slice
        manifest = copy.deepcopy({k: v for k, v in doc.items() if k not in ("arrival", "duration")})
        manifest["spec"]["schedulerName"] = "volcano"
        manifest["metadata"].setdefault("annotations", {})[ROLE] = role
        jobs.append(SliceJob(name, str(manifest["spec"]["queue"]), gpus_of(manifest),
                             int(manifest["spec"]["minAvailable"]), role, at, work, manifest))
    order = {r: i for i, r in enumerate(ROLES)}
    jobs.sort(key=lambda j: (order[j.role], j.arrival, j.name))  # carried over first; ties by name, as the simulator
    return Slice(start, length, factor, tuple(jobs))


def sim_docs(sl: Slice, warmup: float, placed: Mapping[str, float] | None = None) -> list[dict[str, Any]]:
    """The slice as the simulator's workload documents: `running` jobs arrive at 0, everything else `warmup`
    compressed seconds later (the slice's time 0). `placed[name]`: when a `running` job ran whole in a first
    replay; its duration then ends its work exactly `duration` after the slice's time 0, as on the cluster."""
    out = []
    for job in sl.jobs:
        if job.role == "running":
            arrival, duration = 0.0, job.duration + warmup - (placed or {}).get(job.name, 0.0)
        else:
            arrival, duration = warmup + job.arrival, job.duration
        out.append({**copy.deepcopy(job.manifest), "arrival": arrival, "duration": duration})
    return out


@dataclass(frozen=True, slots=True)
class Observed:
    """One job as a side saw it, on the slice's clock (compressed seconds from its time 0)."""

    name: str
    gpus: int
    role: str
    submitted: float
    whole: float | None  # its whole gang first ran (None: not by the slice's end)
    done: float | None  # its gang stopped running, its work done (None: not by the slice's end)


@dataclass(frozen=True, slots=True)
class ClassMeasure:
    cls: str
    jobs: int  # waits measured: `waiting` and `arrives` jobs
    p50: float | None  # minutes of the day; None: fewer than MIN_SLICE_JOBS jobs
    p95: float | None
    never: int  # not whole by the slice's end (counted with the end)
    gpu_hours: float  # GPU-hours of the day held by its gangs running whole inside the slice


def measure(observed: Iterable[Observed], window: float, factor: float) -> dict[str, ClassMeasure]:
    waits: dict[str, list[float]] = {c: [] for c in CLASSES}
    never = dict.fromkeys(CLASSES, 0)
    held = dict.fromkeys(CLASSES, 0.0)
    for job in observed:
        cls = class_of(job.gpus)
        if cls not in waits:
            continue
        if job.role != "running":
            waits[cls].append(((job.whole if job.whole is not None else window) - job.submitted) * factor / 60)
            never[cls] += job.whole is None
        if job.whole is not None:
            lo, hi = max(job.whole, 0.0), min(job.done if job.done is not None else window, window)
            held[cls] += job.gpus * max(0.0, hi - lo) * factor / HOUR
    out = {}
    for cls, values in waits.items():
        enough = len(values) >= MIN_SLICE_JOBS
        out[cls] = ClassMeasure(cls, len(values), percentile(values, 50) if enough else None,
                                percentile(values, 95) if enough else None, never[cls], held[cls])
    return out


@dataclass(frozen=True, slots=True)
class Row:
    what: str
    real: float | None  # Volcano on the control plane
    sim: float | None  # volcano-py's simulator
    relative: float | None  # (sim - real) / real; None: not measured, or real is 0 and sim is not

    @property
    def over(self) -> bool | None:
        """Whether the two differ by more than TOLERANCE (None: not measured on a side)."""
        if self.real is None or self.sim is None:
            return None
        return self.relative is None or abs(self.relative) > TOLERANCE


def relative(real: float | None, sim: float | None) -> float | None:
    if real is None or sim is None:
        return None
    if real == 0:
        return 0.0 if sim == 0 else None
    return (sim - real) / real


def compare(real: Mapping[str, ClassMeasure], sim: Mapping[str, ClassMeasure]) -> list[Row]:
    rows = []
    for cls in CLASSES:
        a, b = real[cls], sim[cls]
        for what, x, y in ((f"{cls} GPU p50 wait (min)", a.p50, b.p50), (f"{cls} GPU p95 wait (min)", a.p95, b.p95),
                           (f"{cls} GPU-h held", a.gpu_hours, b.gpu_hours)):
            rows.append(Row(what, x, y, relative(x, y)))
    total_a, total_b = sum(m.gpu_hours for m in real.values()), sum(m.gpu_hours for m in sim.values())
    rows.append(Row("all GPU-h held", total_a, total_b, relative(total_a, total_b)))
    return rows


def table(rows: Sequence[Row], extra: Sequence[Row] = (), extra_label: str = "") -> str:
    """The comparison as a Markdown table; `extra`, the same measures of a second simulator run (`extra_label`),
    in three more columns."""
    head = "| measure | Volcano (real) | volcano-py simulator | relative difference | over 10% |"
    rule = "|---|---|---|---|---|"
    if extra:
        head += f" {extra_label} | relative difference | over 10% |"
        rule += "---|---|---|"
    lines = [head, rule]
    for i, r in enumerate(rows):
        line = f"| {r.what} | {_v(r.real)} | " + _cells(r)
        if extra:
            line += " " + _cells(extra[i])
        lines.append(line)
    return "\n".join(lines) + "\n"


def _cells(r: Row) -> str:
    rel = ("n/m" if r.real is None or r.sim is None else "inf" if r.relative is None else f"{r.relative:+.1%}")
    over = "n/m" if r.over is None else "yes" if r.over else "no"
    return f"{_v(r.sim)} | {rel} | {over} |"


def _v(x: float | None) -> str:
    return "not measured" if x is None else f"{x:.1f}"
