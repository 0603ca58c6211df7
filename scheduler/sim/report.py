"""Layer `sim`: the replay report — a row per job, with why it waited, and the totals that matter for a GPU cluster.

The rows and totals are values (`JobRow`, `EvictionRow`, `Totals`): the text table, `simulate --json` and the
HTML report (`scheduler/report/`) are all made from them. A job that waited or never started carries the last
`Status` the scheduler published for it; the table renders it with `api/messages.py`, the JSON carries it as kind
and fields. Each eviction is a row too: which job lost which tasks, to whom, under which action and rule.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from scheduler.api.decision import Status
from scheduler.api.messages import message
from scheduler.durations import format_duration
from scheduler.sim.cluster import EvictionRecord
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
    room: tuple[float, str, int] | None = None  # (first time, action, pods) of evictions made for it before it ran
    interrupted: int = 0  # times its gang was broken by evictions while it ran
    bound: int = 0  # pods holding a node at the replay's end
    min_available: int = 0
    said: tuple[tuple[float, Status], ...] = ()  # (since, what the scheduler said) while it was not running whole
    rewaits: tuple[tuple[float, float | None], ...] = ()  # later waits: (its gang broke, it ran whole again)

    @property
    def wait(self) -> float | None:
        return None if self.started is None else self.started - self.arrival

    @property
    def never_started(self) -> bool:
        return self.started is None and self.ended is None

    @property
    def reason(self) -> str:
        """The decision rendered for people ("" when the scheduler published none); for a job room was made for,
        that it then waited for its victims to go (their notice and grace period)."""
        said = message(self.decision) if self.decision is not None else ""
        if self.room is None:
            return said
        at, action, pods = self.room
        return f"{action} evicted {pods} pods for it at {show_time(at)}; it waited for them to go" + (
            f" (before: {said})" if said else "")

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name, "namespace": self.namespace, "kind": self.kind, "queue": self.queue,
            "arrival": self.arrival, "started": self.started, "ended": self.ended, "wait": self.wait,
            "pods": self.pods, "phase": self.phase, "never_started": self.never_started,
            "decision": self.decision.to_json() if self.decision is not None else None,
            "room_made": {"time": self.room[0], "action": self.room[1], "pods": self.room[2]} if self.room else None,
            "interrupted": self.interrupted, "bound_at_end": self.bound, "min_available": self.min_available,
            "said": [{"since": at, "decision": status.to_json(), "message": message(status)}
                     for at, status in self.said],
            "rewaits": [{"broken": start, "running_again": end} for start, end in self.rewaits],
        }

    @property
    def bound_text(self) -> str:
        """`8`; `6/8 bound` for a job that never started (how far its gang got)."""
        return f"{self.bound}/{self.pods} bound" if self.never_started else str(self.pods)


def _room(replay: Replay) -> dict[str, tuple[float, str, int]]:
    """Per job: the first evictions made for it (time, action, pods at that time)."""
    out: dict[str, tuple[float, str, int]] = {}
    for e in replay.cluster.eviction_log:
        if e.cause is None or e.cause.by == e.job:
            continue
        at, action, pods = out.get(e.cause.by, (e.time, e.cause.action, 0))
        if at == e.time:
            out[e.cause.by] = (at, action, pods + 1)
    return out


def job_rows(replay: Replay) -> list[JobRow]:
    room = _room(replay)
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
            room=room[r.key] if r.key in room and (r.started is None or r.started >= room[r.key][0]) else None,
            interrupted=r.interrupted,
            bound=r.bound,
            min_available=r.min_available,
            said=tuple(r.said),
            rewaits=tuple(r.rewaits),
        )
        for r in replay.runs
    ]


@dataclass(frozen=True, slots=True)
class EvictionRow:
    """The pods one job lost at one time for one cause: to whom (`by`, the job room was made for), under which
    action and rule, and whether its gang was broken."""

    time: float
    job: str
    tasks: tuple[str, ...]  # pod names
    nodes: tuple[str, ...]
    by: str
    action: str
    rule: str
    breaks_gang: bool
    notice: float
    grace: float

    def to_json(self) -> dict[str, Any]:
        return {"time": self.time, "job": self.job, "tasks": list(self.tasks), "nodes": list(self.nodes),
                "by": self.by, "action": self.action, "rule": self.rule, "breaks_gang": self.breaks_gang,
                "notice": self.notice, "grace": self.grace}


def eviction_rows(replay: Replay) -> list[EvictionRow]:
    """The cluster's eviction log, one row per (time, victim job, cause)."""
    groups: dict[tuple[Any, ...], list[EvictionRecord]] = {}
    for e in replay.cluster.eviction_log:
        c = e.cause
        key = (e.time, e.job, c.by if c else "", c.action if c else "", c.rule if c else e.reason,
               c.breaks_gang if c else False, e.notice, e.grace)
        groups.setdefault(key, []).append(e)
    return [
        EvictionRow(time, job, tuple(e.task.split("/", 1)[-1] for e in records),
                    tuple(dict.fromkeys(e.node for e in records)), by, action, rule, broken, notice, grace)
        for (time, job, by, action, rule, broken, notice, grace), records in groups.items()
    ]


@dataclass(frozen=True, slots=True)
class Totals:
    jobs: int
    finished: int
    never_started: int
    gpu_held: float  # time-weighted mean share of the cluster's `resource` (its GPUs) held by pods
    gpu_utilisation: float  # ... held by gangs that are running (a pod waiting for its siblings does no work)
    mean_wait: float | None
    p95_wait: float | None
    partial_gang_cycles: int
    cycles: int
    makespan: float
    stalled: bool
    # The span the shares are means over, and the last shares: `over(until)` stretches the span to a common end, so
    # two replays of one workload compare over the same window (a stalled replay keeps holding what it held).
    window: tuple[float, float] = (0.0, 0.0)
    last: tuple[float, float] = (0.0, 0.0)  # (held, doing work) at the last sample
    resource: str = "nvidia.com/gpu"  # what the shares are of: GPUs, or cpu on a cluster without GPUs

    @property
    def what(self) -> str:
        return "GPUs" if self.resource.endswith("gpu") else self.resource

    def over(self, until: float) -> Totals:
        start, end = self.window
        if until <= end or until <= start:
            return self
        span, extra = end - start, until - end
        held = (self.gpu_held * span + self.last[0] * extra) / (until - start)
        busy = (self.gpu_utilisation * span + self.last[1] * extra) / (until - start)
        return replace(self, gpu_held=held, gpu_utilisation=busy, window=(start, until))


def _p95(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    index = max(0, min(len(ordered) - 1, -(-95 * len(ordered) // 100) - 1))
    return ordered[index]


def totals(replay: Replay) -> Totals:
    waits = [r.started - r.item.arrival for r in replay.runs if r.started is not None]
    # The shares of the replay's resource (the GPUs; cpu on a cluster without GPUs, where GPU shares are all 0)
    samples = [(t.time, t.held, t.busy) for t in replay.ticks] if replay.ticks else replay.utilisation
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
        window=(samples[0][0], samples[-1][0]) if samples else (0.0, 0.0),
        last=(samples[-1][1], samples[-1][2]) if samples else (0.0, 0.0),
        resource=replay.resource if replay.ticks else "nvidia.com/gpu",
    )


def common_window(rows: Sequence[Totals]) -> list[Totals]:
    """The totals of replays shown side by side, their shares over one window: to the latest end among them."""
    until = max((t.window[1] for t in rows), default=0.0)
    return [t.over(until) for t in rows]


def to_json(replay: Replay) -> dict[str, Any]:
    """`simulate --json` for one replay: the totals, and every job with the scheduler's reasons as data."""
    return {**asdict(totals(replay)), "jobs": [row.to_json() for row in job_rows(replay)],
            "evictions": [row.to_json() for row in eviction_rows(replay)]}


NEVER = 1e9  # simulated seconds (31 years): a wait this long, or infinite, is printed as `never`
REASON_WIDTH = 72  # characters of the REASON column in the text table; the whole reason is in --json and --report


def show_time(value: float | None) -> str:
    """A simulated time or wait as durations are printed everywhere (`10m7s`, `3s`, `250ms`); `-` for none,
    `never` for an infinite one; a mean's fraction of a second is not shown past ten seconds."""
    if value is None:
        return "-"
    if not math.isfinite(value) or abs(value) >= NEVER:
        return "never"
    return format_duration(round(value) if abs(value) >= 10 else value)


def wait_text(row: JobRow, replay: Replay) -> str:
    """The job's wait; for one that never started, `never` if the replay stalled (it never could), else how long
    it had waited when the replay stopped (`> 2h0m0s`: a horizon cut it short)."""
    if row.wait is not None:
        return show_time(row.wait)
    if row.ended is not None:
        return "-"  # deleted before it ran
    return "never" if replay.stalled else f"> {show_time(replay.end - row.arrival)}"


def clip(text: str, width: int = REASON_WIDTH) -> str:
    return text if len(text) <= width else text[: width - 1].rstrip() + "…"


def render(replay: Replay, title: str) -> str:
    rows = [("JOB", "QUEUE", "ARRIVAL", "WAIT", "START", "END", "PODS", "PHASE", "REASON")]
    clipped = False
    for row in job_rows(replay):
        reason = row.reason or "-"
        clipped |= len(reason) > REASON_WIDTH
        rows.append(
            (
                row.name,
                row.queue,
                show_time(row.arrival),
                wait_text(row, replay),
                show_time(row.started),
                show_time(row.ended),
                row.bound_text,
                f"{row.phase} (never started)" if row.never_started else row.phase,
                clip(reason),
            )
        )
    lines = [f"== {title} ==", *_table(rows)]
    if clipped:
        lines.append(f"(REASON cut at {REASON_WIDTH} characters: --json and the --report page have each in full)")
    evictions = eviction_rows(replay)
    if evictions:
        lines += ["", "evictions:", *_table([
            ("TIME", "JOB", "TASKS", "NODES", "BY", "ACTION", "RULE", "GANG BROKEN"),
            *[(show_time(e.time), e.job, _tasks(e.tasks), ",".join(e.nodes), e.by or "-", e.action or "-", e.rule,
               "yes" if e.breaks_gang else "no") for e in evictions]])]
    t = totals(replay)
    lines.append("")
    never = f"  ({t.never_started} never started)" if t.never_started else ""
    lines.append(f"jobs finished            {t.finished}/{t.jobs}{never}")
    lines.append(f"{t.what + ' held (mean)':<25}{t.gpu_held:.1%}")
    lines.append(f"{t.what + ' doing work (mean)':<25}{t.gpu_utilisation:.1%}   (held by gangs that are running)")
    lines.append(f"wait mean / p95          {mean_text(t)} / {p95_text(t)}")
    lines.append(f"cycles with a partly bound gang  {t.partial_gang_cycles} of {t.cycles}")
    stalled = "  (STALLED: remaining jobs can never start)" if t.stalled else ""
    lines.append(f"simulated time           {show_time(t.makespan)}{stalled}")
    return "\n".join(lines)


def mean_text(t: Totals) -> str:
    return "none started" if t.mean_wait is None and t.jobs else show_time(t.mean_wait)


def p95_text(t: Totals) -> str:
    """The 95th percentile wait, counting the jobs that never started: `never` when more than 5% never did."""
    if t.jobs and t.never_started * 20 > t.jobs:
        return "never"
    return show_time(t.p95_wait)


def _tasks(tasks: tuple[str, ...]) -> str:
    return ",".join(tasks) if len(tasks) <= 3 else f"{len(tasks)} pods: {tasks[0]} .. {tasks[-1]}"


def _table(rows: Sequence[tuple[str, ...]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]


def compare(rows: list[tuple[str, Totals]]) -> str:
    """The totals of several replays of one workload side by side, one column per replay; the shares over one
    window (to the latest end among them), so a replay that stalled early does not read as better."""
    def pct(v: float) -> str:
        return f"{v:.1%}"

    same = common_window([t for _, t in rows])
    lines = [
        ("jobs finished", [f"{t.finished}/{t.jobs}" for t in same]),
        (f"{same[0].what if same else 'GPUs'} held (mean)", [pct(t.gpu_held) for t in same]),
        (f"{same[0].what if same else 'GPUs'} doing work (mean)", [pct(t.gpu_utilisation) for t in same]),
        ("wait mean", [mean_text(t) for t in same]),
        ("wait p95", [p95_text(t) for t in same]),
        ("cycles with a partly bound gang", [str(t.partial_gang_cycles) for t in same]),
        ("simulated time", [show_time(t.makespan) + (" STALLED" if t.stalled else "") for t in same]),
    ]
    header = ("", *[f"[{i + 1}]" for i in range(len(rows))])
    table = [header, *[(label, *cells) for label, cells in lines]]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    out = ["== comparison =="]
    out += [f"[{i + 1}] {title}" for i, (title, _) in enumerate(rows)]
    if same:
        start, end = same[0].window
        out.append(f"(shares of the {same[0].what}: means over the same window, {show_time(start)} to "
                   f"{show_time(end)}; a stalled replay keeps holding what it held)")
    out += ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in table]
    return "\n".join(out)
