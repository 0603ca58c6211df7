"""Layer `report`: the report's plots, drawn with matplotlib's Agg backend into PNG files of a fixed size.

Every plot overlays the replays of one workload, one colour per replay (per conf). A plot is `WIDTH` x `HEIGHT`
pixels (no tight bounding box: the page and its test rely on the size). matplotlib is the optional extra
`volcano-py[report]`; `require()` says so in one line when it is missing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scheduler.report.errors import ReportError
from scheduler.report.series import Labelled, busy_queues, end_time, waits_by_queue
from scheduler.sim.replay import Tick

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

WIDTH, HEIGHT, DPI = 1000, 500, 100
INSTALL_HINT = "pip install 'volcano-py[report]'"


class MissingExtraError(ReportError):
    """The report needs matplotlib, which is the optional extra `report`."""


def require() -> None:
    try:
        import matplotlib
    except ImportError:
        raise MissingExtraError(f"--report needs matplotlib, which is not installed: {INSTALL_HINT}") from None
    matplotlib.use("Agg", force=True)


@dataclass(frozen=True, slots=True)
class Plot:
    title: str
    caption: str
    path: Path
    width: int = WIDTH
    height: int = HEIGHT

    @property
    def name(self) -> str:
        return self.path.stem


def colours(n: int) -> list[Any]:
    from matplotlib import colormaps

    palette = colormaps["tab10"]
    return [palette(i % 10) for i in range(n)]


def _figure() -> Figure:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(WIDTH / DPI, HEIGHT / DPI), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _save(fig: Figure, path: Path) -> Path:
    fig.savefig(path, dpi=DPI, format="png")
    return path


def time_scale(seconds: float) -> tuple[float, str]:
    """Divide simulated seconds by the first value to plot them in the second unit."""
    if seconds > 3 * 3600:
        return 3600.0, "hours"
    if seconds > 180:
        return 60.0, "minutes"
    return 1.0, "seconds"


def _what(runs: Sequence[Labelled]) -> str:
    return "GPUs" if runs and runs[0].replay.resource.endswith("gpu") else "cpu"


def _legend(fig: Figure) -> None:
    """One legend for the figure, below its plots: never over the data (issue 38: it hid the curves)."""
    seen: dict[str, Any] = {}
    for ax in fig.axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            seen.setdefault(label, handle)
    if seen:
        fig.legend(list(seen.values()), list(seen), loc="outside lower center", ncols=min(2, len(seen)),
                   fontsize="small", frameon=False)


def utilisation(runs: Sequence[Labelled], path: Path) -> Plot:
    """The share of the cluster's GPUs held by pods (solid) and held by gangs that run (dashed), over time."""
    fig = _figure()
    ax = fig.add_subplot()
    scale, unit = time_scale(end_time(runs))
    for run, colour in zip(runs, colours(len(runs)), strict=True):
        ticks = _ticks(run, end_time(runs))
        times = [t.time / scale for t in ticks]
        ax.step(times, [100 * t.held for t in ticks], where="post", color=colour,
                label=f"{run.title}: held")
        ax.step(times, [100 * t.busy for t in ticks], where="post", color=colour, linestyle="--",
                label=f"{run.title}: doing work")
    what = _what(runs)
    ax.set(xlabel=f"simulated time ({unit})", ylabel=f"% of the cluster's {what}", ylim=(0, 105),
           title=f"{what} allocated (solid) and doing work in running gangs (dashed)")
    ax.set_xlim(0, end_time(runs) / scale)
    ax.grid(alpha=0.3)
    _legend(fig)
    return Plot(f"{what} allocated and doing work",
                f"Share of the cluster's {what} held by bound pods (solid) and by gangs whose whole minimum "
                "runs (dashed): the gap is held by pods waiting for their siblings. A replay that stalled (no job "
                "can ever start) is drawn flat to the right edge.", _save(fig, path))


def _ticks(run: Labelled, end: float) -> list[Tick]:
    """The replay's samples; a stalled replay's last one held to `end`, since nothing would ever change."""
    ticks = run.replay.ticks
    if run.replay.stalled and ticks and ticks[-1].time < end:
        return [*ticks, replace(ticks[-1], time=end)]
    return ticks


def _grid(fig: Figure, n: int) -> list[Axes]:
    """One panel per queue, all on the same axes (shared x and y), so queues compare at a glance."""
    cols = 1 if n == 1 else 2
    rows = -(-n // cols)
    first = fig.add_subplot(rows, cols, 1)
    return [first, *(fig.add_subplot(rows, cols, i + 1, sharex=first, sharey=first) for i in range(1, n))]


def queue_shares(runs: Sequence[Labelled], path: Path) -> Plot:
    """Per queue: the share of the cluster it holds (solid) against the share it deserves (dotted)."""
    fig = _figure()
    names = busy_queues(runs) or ["default"]
    scale, unit = time_scale(end_time(runs))
    for ax, queue in zip(_grid(fig, len(names)), names, strict=True):
        for run, colour in zip(runs, colours(len(runs)), strict=True):
            times, held, deserved = [], [], []
            for tick in _ticks(run, end_time(runs)):
                for q, h, d in tick.queues:
                    if q == queue:
                        times.append(tick.time / scale)
                        held.append(100 * h)
                        deserved.append(float("nan") if d is None else 100 * d)
            if any(d == d for d in deserved):  # not all NaN: the conf computes or declares a deserved share
                ax.step(times, deserved, where="post", color=colour, linestyle=":", linewidth=2.5, alpha=0.6,
                        label=f"{run.title}: deserved")
            ax.step(times, held, where="post", color=colour, label=f"{run.title}: held")
        ax.set_title(f"queue {queue}", fontsize="medium")
        ax.set(ylim=(0, 105), xlim=(0, end_time(runs) / scale), xlabel=f"simulated time ({unit})",
               ylabel="% of cluster")
        ax.grid(alpha=0.3)
    _legend(fig)
    what = _what(runs)
    return Plot(f"Per-queue share of {what}",
                f"Each queue's share of the cluster's {what} (solid) against its deserved share (dotted; proportion "
                "computes it from the weights, capacity reads the queue's spec.deserved).", _save(fig, path))


def waits(runs: Sequence[Labelled], path: Path) -> Plot:
    """Per queue: the distribution of job waits (arrival to the whole gang running), as an empirical CDF."""
    fig = _figure()
    names = [q for q in busy_queues(runs) if any(q in waits_by_queue(run) for run in runs)] or ["default"]
    longest = max((w for run in runs for ws in waits_by_queue(run).values() for w in ws), default=0.0)
    scale, unit = time_scale(longest)
    for ax, queue in zip(_grid(fig, len(names)), names, strict=True):
        for run, colour in zip(runs, colours(len(runs)), strict=True):
            values = sorted(w / scale for w in waits_by_queue(run).get(queue, []))
            jobs = sum(1 for row in run.rows if row.queue == queue)
            if not jobs:
                continue
            steps = [100 * (i + 1) / jobs for i in range(len(values))]  # jobs that never started stay below 100%
            right = values[-1] if values else 0.0
            ax.step([0.0, *values, right], [0.0, *steps, steps[-1] if steps else 0.0], where="post", color=colour,
                    label=f"{run.title} ({len(values)}/{jobs} started)")
        ax.set_title(f"queue {queue}", fontsize="medium")
        ax.set(ylim=(0, 105), xlim=(0, max(longest, 1.0) / scale * 1.02), xlabel=f"wait ({unit})",
               ylabel="% of the queue's jobs")
        ax.grid(alpha=0.3)
    _legend(fig)
    return Plot("Wait time per queue",
                "Share of each queue's jobs that had started within a given wait (from arrival to the whole "
                "minimum running); a curve that stays below 100% has jobs that never started.", _save(fig, path))


def gantt(runs: Sequence[Labelled], path: Path) -> Plot:
    """One row per gang: waiting (pale) from arrival to start, running (solid) from start to end."""
    fig = _figure()
    ax = fig.add_subplot()
    scale, unit = time_scale(end_time(runs))
    names = list(dict.fromkeys(row.name for run in runs for row in run.rows))
    index = {name: i for i, name in enumerate(names)}
    lane = 0.8 / max(1, len(runs))
    for k, (run, colour) in enumerate(zip(runs, colours(len(runs)), strict=True)):
        for alpha, label, bars in ((0.25, "waiting", _waiting(run, end_time(runs))), (0.9, "running", _running(run))):
            if not bars:
                continue
            ys = [index[name] - 0.4 + k * lane for name, _, _ in bars]
            ax.barh(ys, [(end - start) / scale for _, start, end in bars], lane,
                    left=[start / scale for _, start, _ in bars], align="edge", color=colour, alpha=alpha,
                    label=f"{run.title}: {label}")
    ax.set(xlabel=f"simulated time ({unit})", ylim=(len(names) - 0.5, -0.5), title="gangs over time")
    if len(names) <= 40:
        ax.set_yticks(range(len(names)), names, fontsize="small")
    else:
        ax.set_ylabel(f"{len(names)} jobs, in arrival order")
    ax.set_xlim(0, end_time(runs) / scale)
    ax.grid(axis="x", alpha=0.3)
    _legend(fig)
    return Plot("Gangs over time",
                "Each job's wait (pale, from arrival until its whole minimum runs; to the right edge if it never "
                "started) and run (solid).", _save(fig, path))


def _waiting(run: Labelled, end: float) -> list[tuple[str, float, float]]:
    """(job, arrival, start): a job that never started waits to the right edge (a stalled replay stops early, but
    its jobs would wait for ever)."""
    return [(row.name, row.arrival, row.started if row.started is not None else end) for row in run.rows]


def _running(run: Labelled) -> list[tuple[str, float, float]]:
    return [(row.name, row.started, row.ended if row.ended is not None else run.replay.end)
            for row in run.rows if row.started is not None]


PLOTS = (utilisation, queue_shares, waits, gantt)


def draw_all(runs: Sequence[Labelled], directory: Path) -> list[Plot]:
    require()
    return [draw(runs, directory / f"{draw.__name__}.png") for draw in PLOTS]
