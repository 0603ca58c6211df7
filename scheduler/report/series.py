"""Layer `report`: the replays of one workload as rows and series, and as CSV files.

A report shows one or more replays of the same workload (the first conf, each `--compare` conf, the per-pod
baseline), each a `Labelled` replay. Times are simulated seconds; shares are fractions of the cluster's
`Replay.resource` (its GPUs, or cpu on a cluster without GPUs).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from scheduler.sim.replay import Replay
from scheduler.sim.report import JobRow, Totals, job_rows, totals


@dataclass(frozen=True, slots=True)
class Labelled:
    title: str
    replay: Replay

    @property
    def rows(self) -> list[JobRow]:
        return job_rows(self.replay)

    @property
    def totals(self) -> Totals:
        return totals(self.replay)


def queues(runs: Sequence[Labelled]) -> list[str]:
    """Every queue a job went to or the cluster has, in the order first seen."""
    seen: dict[str, None] = {}
    for run in runs:
        for tick in run.replay.ticks[:1]:
            seen.update((q, None) for q, _, _ in tick.queues)
        seen.update((row.queue, None) for row in run.rows)
    return list(seen)


def busy_queues(runs: Sequence[Labelled]) -> list[str]:
    """The queues that held something or had a job at some point (an idle `default` queue is left out)."""
    used = {row.queue for run in runs for row in run.rows}
    used |= {q for run in runs for tick in run.replay.ticks for q, held, _ in tick.queues if held}
    return [q for q in queues(runs) if q in used]


def waits_by_queue(run: Labelled) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for row in run.rows:
        if row.wait is not None:
            out.setdefault(row.queue, []).append(row.wait)
    return out


def end_time(runs: Sequence[Labelled]) -> float:
    return max((run.replay.end for run in runs), default=0.0)


# ---- CSV ---------------------------------------------------------------------------------------------------

JOB_COLUMNS = ("run", "job", "namespace", "kind", "queue", "arrival", "started", "ended", "wait", "pods", "phase",
               "code", "plugin", "reason_kinds", "reason", "reasons_json")
TICK_COLUMNS = ("run", "time", "resource", "held", "busy")
QUEUE_COLUMNS = ("run", "time", "queue", "resource", "held", "deserved")


def _cell(value: float | None) -> str:
    return "" if value is None else f"{value:g}"


def _write_csv(path: Path, header: Sequence[str], rows: Iterable[Sequence[object]]) -> Path:
    with path.open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(header)
        out.writerows(rows)
    return path


def write_jobs(path: Path, runs: Sequence[Labelled]) -> Path:
    def rows() -> Iterator[Sequence[object]]:
        for run in runs:
            for row in run.rows:
                d = row.decision
                yield (
                    run.title, row.name, row.namespace, row.kind, row.queue, _cell(row.arrival), _cell(row.started),
                    _cell(row.ended), _cell(row.wait), row.pods, row.phase,
                    d.code.value if d else "", d.plugin if d else "",
                    " ".join(r.kind for r in d.reasons) if d else "", row.reason,
                    json.dumps([r.to_json() for r in d.reasons], separators=(",", ":")) if d else "",
                )

    return _write_csv(path, JOB_COLUMNS, rows())


def write_ticks(path: Path, runs: Sequence[Labelled]) -> Path:
    return _write_csv(path, TICK_COLUMNS, (
        (run.title, _cell(tick.time), run.replay.resource, f"{tick.held:.6g}", f"{tick.busy:.6g}")
        for run in runs for tick in run.replay.ticks))


def write_queues(path: Path, runs: Sequence[Labelled]) -> Path:
    return _write_csv(path, QUEUE_COLUMNS, (
        (run.title, _cell(tick.time), queue, run.replay.resource, f"{held:.6g}",
         "" if deserved is None else f"{deserved:.6g}")
        for run in runs for tick in run.replay.ticks for queue, held, deserved in tick.queues))
