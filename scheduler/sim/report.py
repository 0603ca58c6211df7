"""Layer `sim`: the replay report — a row per job, with why it waited, and the totals that matter for a GPU cluster.

The rows and totals are values (`JobRow`, `Totals`): the text table, `simulate --json` and the HTML report
(`scheduler/report/`) are all made from them. A job that waited or never started carries the last `Status` the
scheduler published for it; the table renders it with `api/messages.py`, the JSON carries it as kind and fields.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from scheduler.api.decision import Status
from scheduler.api.messages import message
from scheduler.sim.replay import Replay


@dataclass(frozen=True, slots=True)
class JobRow:
    name: str
    namespace: str
    kind: str
    queue: str
    arrival: float
    started: float | None
    ended: float | None
    pods: int
    phase: str
    decision: Status | None  # the scheduler's last word on the job while it waited

    @property
    def wait(self) -> float | None:
        return None if self.started is None else self.started - self.arrival

    @property
    def never_started(self) -> bool:
        return self.started is None and self.ended is None

    @property
    def reason(self) -> str:
        """The decision rendered for people ("" when the scheduler published none)."""
        return message(self.decision) if self.decision is not None else ""

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name, "namespace": self.namespace, "kind": self.kind, "queue": self.queue,
            "arrival": self.arrival, "started": self.started, "ended": self.ended, "wait": self.wait,
            "pods": self.pods, "phase": self.phase, "never_started": self.never_started,
            "decision": self.decision.to_json() if self.decision is not None else None,
        }


def job_rows(replay: Replay) -> list[JobRow]:
    return [
        JobRow(
            name=r.item.name,
            namespace=str(r.item.manifest["metadata"].get("namespace") or "default"),
            kind=r.item.kind,
            queue=r.queue,
            arrival=r.item.arrival,
            started=r.started,
            ended=r.ended,
            pods=len(replay.cluster.pods_of(r.key)) or r.pods,
            phase=r.phase,
            decision=r.decision,
        )
        for r in replay.runs
    ]


@dataclass(frozen=True, slots=True)
class Totals:
    jobs: int
    finished: int
    never_started: int
    gpu_held: float  # time-weighted mean share of the cluster's GPUs held by pods
    gpu_utilisation: float  # ... held by gangs that are running (a pod waiting for its siblings does no work)
    mean_wait: float | None
    p95_wait: float | None
    partial_gang_cycles: int
    cycles: int
    makespan: float
    stalled: bool


def _p95(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    index = max(0, min(len(ordered) - 1, -(-95 * len(ordered) // 100) - 1))
    return ordered[index]


def totals(replay: Replay) -> Totals:
    waits = [r.started - r.item.arrival for r in replay.runs if r.started is not None]
    samples = replay.utilisation
    held = busy = 0.0
    for (t0, h0, b0), (t1, _, _) in zip(samples, samples[1:], strict=False):
        held += h0 * (t1 - t0)
        busy += b0 * (t1 - t0)
    span = samples[-1][0] - samples[0][0] if len(samples) > 1 else 0.0
    return Totals(
        jobs=len(replay.runs),
        finished=sum(1 for r in replay.runs if r.ended is not None),
        never_started=sum(1 for r in replay.runs if r.started is None),
        gpu_held=held / span if span else 0.0,
        gpu_utilisation=busy / span if span else 0.0,
        mean_wait=sum(waits) / len(waits) if waits else None,
        p95_wait=_p95(waits),
        partial_gang_cycles=replay.partial_cycles,
        cycles=replay.cycles,
        makespan=replay.end,
        stalled=replay.stalled,
    )


def to_json(replay: Replay) -> dict[str, Any]:
    """`simulate --json` for one replay: the totals, and every job with the scheduler's reasons as data."""
    return {**asdict(totals(replay)), "jobs": [row.to_json() for row in job_rows(replay)]}


def _t(value: float | None) -> str:
    return "-" if value is None else f"{value:g}s"


def render(replay: Replay, title: str) -> str:
    rows = [("JOB", "QUEUE", "ARRIVAL", "WAIT", "START", "END", "PODS", "PHASE", "REASON")]
    for row in job_rows(replay):
        rows.append(
            (
                row.name,
                row.queue,
                _t(row.arrival),
                _t(row.wait),
                _t(row.started),
                _t(row.ended),
                str(row.pods),
                f"{row.phase} (never started)" if row.never_started else row.phase,
                row.reason or "-",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [f"== {title} =="]
    lines += ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    t = totals(replay)
    lines.append("")
    never = f"  ({t.never_started} never started)" if t.never_started else ""
    lines.append(f"jobs finished            {t.finished}/{t.jobs}{never}")
    lines.append(f"GPUs held (mean)         {t.gpu_held:.1%}")
    lines.append(f"GPUs doing work (mean)   {t.gpu_utilisation:.1%}   (held by gangs that are running)")
    lines.append(f"wait mean / p95          {_t(t.mean_wait)} / {_t(t.p95_wait)}")
    lines.append(f"cycles with a partly bound gang  {t.partial_gang_cycles} of {t.cycles}")
    stalled = "  (STALLED: remaining jobs can never start)" if t.stalled else ""
    lines.append(f"simulated time           {t.makespan:g}s{stalled}")
    return "\n".join(lines)


def compare(rows: list[tuple[str, Totals]]) -> str:
    """The totals of several replays of one workload side by side, one column per replay."""
    def pct(v: float) -> str:
        return f"{v:.1%}"

    lines = [
        ("jobs finished", [f"{t.finished}/{t.jobs}" for _, t in rows]),
        ("GPUs held (mean)", [pct(t.gpu_held) for _, t in rows]),
        ("GPUs doing work (mean)", [pct(t.gpu_utilisation) for _, t in rows]),
        ("wait mean", [_t(t.mean_wait) for _, t in rows]),
        ("wait p95", [_t(t.p95_wait) for _, t in rows]),
        ("cycles with a partly bound gang", [str(t.partial_gang_cycles) for _, t in rows]),
        ("simulated time", [f"{t.makespan:g}s" + (" STALLED" if t.stalled else "") for _, t in rows]),
    ]
    header = ("", *[f"[{i + 1}]" for i in range(len(rows))])
    table = [header, *[(label, *cells) for label, cells in lines]]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    out = ["== comparison =="]
    out += [f"[{i + 1}] {title}" for i, (title, _) in enumerate(rows)]
    out += ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in table]
    return "\n".join(out)
