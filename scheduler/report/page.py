"""Layer `report`: `simulate --report DIR` — one self-contained HTML page, its PNGs and CSVs.

The page embeds every plot as a `data:` URI, so the one file can be mailed or attached to a ticket. A small
script marks the page when the browser has decoded every image (`<body data-plots-loaded="true">`, each image's
`data-natural-width`/`-height`), which is what the rendering test reads back from headless Chromium.
"""

from __future__ import annotations

import base64
import html
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from scheduler.report.plots import Plot, ReportError, colours, draw_all, require
from scheduler.report.series import Labelled, write_jobs, write_queues, write_ticks
from scheduler.sim.report import Totals, eviction_rows

PAGE = "index.html"


@dataclass(frozen=True, slots=True)
class Written:
    page: Path
    plots: tuple[Plot, ...]
    tables: tuple[Path, ...]
    seconds: float  # wall time spent on the report (the replays not counted)


def write(directory: Path, runs: Sequence[Labelled], *, subtitle: str = "") -> Written:
    """Write the report of `runs` (one workload's replays, one per conf) into `directory`."""
    require()
    started = time.perf_counter()
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ReportError(f"--report {directory}: cannot make the folder ({exc.strerror})") from None
    plots = tuple(draw_all(runs, directory))
    tables = (write_jobs(directory / "jobs.csv", runs), write_ticks(directory / "ticks.csv", runs),
              write_queues(directory / "queues.csv", runs))
    page = directory / PAGE
    page.write_text(render(runs, plots, subtitle=subtitle))
    return Written(page, plots, tables, time.perf_counter() - started)


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _t(value: float | None) -> str:
    return "-" if value is None else f"{value:g}s"


def _hex(colour: tuple[float, ...]) -> str:
    return "#" + "".join(f"{round(255 * c):02x}" for c in colour[:3])


def _totals_table(runs: Sequence[Labelled]) -> str:
    rows: list[tuple[str, ...]] = []

    def line(label: str, cells: Sequence[str]) -> None:
        rows.append((label, *cells))

    ts: list[Totals] = [run.totals for run in runs]
    line("jobs finished", [f"{t.finished}/{t.jobs}" for t in ts])
    line("never started", [str(t.never_started) for t in ts])
    line("GPUs held (mean)", [f"{t.gpu_held:.1%}" for t in ts])
    line("GPUs doing work (mean)", [f"{t.gpu_utilisation:.1%}" for t in ts])
    line("wait mean", [_t(t.mean_wait) for t in ts])
    line("wait p95", [_t(t.p95_wait) for t in ts])
    line("cycles with a partly bound gang", [f"{t.partial_gang_cycles} of {t.cycles}" for t in ts])
    line("simulated time", [f"{t.makespan:g}s" + (" (stalled)" if t.stalled else "") for t in ts])
    head = "".join(f'<th><span class="swatch" style="background:{_hex(c)}"></span>{_e(run.title)}</th>'
                   for run, c in zip(runs, colours(len(runs)), strict=True))
    body = "".join("<tr>" + f"<th>{_e(r[0])}</th>" + "".join(f"<td>{_e(c)}</td>" for c in r[1:]) + "</tr>"
                   for r in rows)
    return f'<table class="totals"><thead><tr><th></th>{head}</tr></thead><tbody>{body}</tbody></table>'


def _jobs_table(run: Labelled) -> str:
    head = "".join(f"<th>{h}</th>" for h in ("job", "queue", "arrival", "wait", "start", "end", "pods", "phase",
                                             "reason"))
    body = []
    for row in run.rows:
        phase = f"{row.phase} (never started)" if row.never_started else row.phase
        kinds = " ".join(r.kind for r in row.decision.reasons) if row.decision else ""
        body.append(
            f'<tr data-reasons="{_e(kinds)}"><td>{_e(row.name)}</td><td>{_e(row.queue)}</td>'
            f"<td>{_t(row.arrival)}</td><td>{_t(row.wait)}</td><td>{_t(row.started)}</td><td>{_t(row.ended)}</td>"
            f"<td>{row.pods}</td><td>{_e(phase)}</td><td>{_e(row.reason or '-')}</td></tr>"
        )
    return f'<table class="jobs"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def _evictions_table(run: Labelled) -> str:
    """Each eviction of the replay: when, which job lost which tasks on which nodes, to whom, under which action
    and rule, and whether its gang was broken."""
    head = "".join(f"<th>{h}</th>" for h in ("time", "job", "tasks", "nodes", "by", "action", "rule",
                                             "gang broken"))
    body = "".join(
        f'<tr data-broken="{str(e.breaks_gang).lower()}"><td>{_t(e.time)}</td><td>{_e(e.job)}</td>'
        f"<td>{_e(', '.join(e.tasks))}</td><td>{_e(', '.join(e.nodes))}</td><td>{_e(e.by or '-')}</td>"
        f"<td>{_e(e.action or '-')}</td><td>{_e(e.rule)}</td><td>{'yes' if e.breaks_gang else 'no'}</td></tr>"
        for e in eviction_rows(run.replay))
    return f'<table class="evictions"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _figure(plot: Plot) -> str:
    data = base64.b64encode(plot.path.read_bytes()).decode("ascii")
    return (f'<figure id="{_e(plot.name)}"><h2>{_e(plot.title)}</h2>'
            f'<img alt="{_e(plot.title)}" width="{plot.width}" height="{plot.height}" '
            f'src="data:image/png;base64,{data}"><figcaption>{_e(plot.caption)}</figcaption></figure>')


_STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em auto; max-width: 1060px; color: #222; }
table { border-collapse: collapse; margin: 1em 0; } th, td { padding: 2px 10px; text-align: left; }
thead th { border-bottom: 1px solid #999; } tbody tr:nth-child(even) { background: #f4f4f4; }
table.jobs td:last-child { font-size: 12px; max-width: 480px; }
.swatch { display: inline-block; width: 10px; height: 10px; margin-right: 6px; }
figure { margin: 2em 0; } img { max-width: 100%; height: auto; border: 1px solid #ddd; }
figcaption { color: #555; font-size: 13px; } details { margin: 1em 0; }
"""

# Sets what the rendering test reads back: every image decoded, with its natural size.
_SCRIPT = """
window.addEventListener("load", function () {
  var images = Array.prototype.slice.call(document.images);
  images.forEach(function (img) {
    img.dataset.naturalWidth = img.naturalWidth;
    img.dataset.naturalHeight = img.naturalHeight;
  });
  var loaded = images.filter(function (img) { return img.complete && img.naturalWidth > 0; });
  document.body.dataset.images = String(images.length);
  document.body.dataset.plotsLoaded = String(images.length > 0 && loaded.length === images.length);
});
"""


def render(runs: Sequence[Labelled], plots: Sequence[Plot], *, subtitle: str = "") -> str:
    jobs = "".join(f"<details{' open' if len(runs) == 1 else ''}><summary>jobs: {_e(run.title)}</summary>"
                   f"{_jobs_table(run)}</details>" for run in runs)
    evicting = [run for run in runs if run.replay.cluster.eviction_log]
    evictions = "".join(f"<details open><summary>evictions: {_e(run.title)}</summary>{_evictions_table(run)}"
                        "</details>" for run in evicting)
    if evictions:
        evictions = ("<h2>Evictions</h2><p>Which job lost which tasks, to whom, under which action and rule, and "
                     f"whether its gang was broken.</p>{evictions}")
    tables = ", ".join(f'<a href="{name}">{name}</a>' for name in ("jobs.csv", "ticks.csv", "queues.csv"))
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>volcano-py simulation report</title>
<style>{_STYLE}</style></head>
<body data-plots-loaded="pending">
<h1>volcano-py simulation report</h1>
<p>{_e(subtitle)}</p>
{_totals_table(runs)}
{"".join(_figure(p) for p in plots)}
<h2>Jobs</h2>
<p>The reason is the scheduler's last word on a job while it waited. The same rows, and the series behind the
plots, are in {tables} beside this page.</p>
{jobs}
{evictions}
<script>{_SCRIPT}</script>
</body></html>
"""
