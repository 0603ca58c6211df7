"""Layer `report`: `simulate --report DIR` — one self-contained HTML page, its PNGs and CSVs.

The page answers "why did my job wait?" first: a header (the confs, volcano-py's version, the date, the command
line), then each job of each replay on one time axis with the reason of every stretch of its wait
(`timeline.py`), then the totals (their shares over one window for every replay), the plots and the tables. No
reason sits in a folded element. The page embeds every plot as a `data:` URI, so the one file can be mailed or
attached to a ticket. A small script marks the page when the browser has decoded every image
(`<body data-plots-loaded="true">`, each image's `data-natural-width`/`-height`), which is what the rendering
test reads back from headless Chromium.
"""

from __future__ import annotations

import base64
import datetime as dt
import html
import shlex
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from scheduler.report.errors import ReportError
from scheduler.report.plots import Plot, colours, draw_all, require
from scheduler.report.series import Labelled, write_jobs, write_queues, write_ticks
from scheduler.report.timeline import section
from scheduler.sim.report import Totals, common_window, eviction_rows, mean_text, p95_text, show_time, wait_text

PAGE = "index.html"
JOB_ROWS = 500  # rows of each replay's jobs table on the page; jobs.csv has every one


@dataclass(frozen=True, slots=True)
class Written:
    page: Path
    plots: tuple[Plot, ...]
    tables: tuple[Path, ...]
    seconds: float  # wall time spent on the report (the replays not counted)


@dataclass(frozen=True, slots=True)
class Header:
    """What the report was made from: the confs, volcano-py's version, when, and the command line."""

    confs: tuple[str, ...] = ()
    inputs: str = ""
    command: tuple[str, ...] = ()
    version: str = ""
    date: str = ""


def header(confs: Sequence[str] = (), inputs: str = "", command: Sequence[str] | None = None) -> Header:
    from importlib.metadata import PackageNotFoundError, version

    try:
        ours = version("volcano-py")
    except PackageNotFoundError:  # run from a clone without installing
        ours = "unknown (not installed)"
    argv = tuple(command) if command is not None else ("volcano-py", *sys.argv[1:])
    return Header(tuple(confs), inputs, argv, ours, f"{dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC")


def make_folder(directory: Path) -> None:
    """Make the report's folder (and its parents), or say in one line why not (ReportError)."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ReportError(f"--report {directory}: cannot make the folder ({exc.strerror})") from None


def write(directory: Path, runs: Sequence[Labelled], *, subtitle: str = "",
          confs: Sequence[str] = ("built-in default",), command: Sequence[str] | None = None) -> Written:
    """Write the report of `runs` (one workload's replays, one per conf) into `directory`."""
    require()
    started = time.perf_counter()
    make_folder(directory)
    plots = tuple(draw_all(runs, directory))
    tables = (write_jobs(directory / "jobs.csv", runs), write_ticks(directory / "ticks.csv", runs),
              write_queues(directory / "queues.csv", runs))
    page = directory / PAGE
    page.write_text(render(runs, plots, head=header(confs, subtitle, command)))
    return Written(page, plots, tables, time.perf_counter() - started)


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _hex(colour: tuple[float, ...]) -> str:
    return "#" + "".join(f"{round(255 * c):02x}" for c in colour[:3])


def _totals_table(runs: Sequence[Labelled], swatches: Sequence[str]) -> str:
    rows: list[tuple[str, ...]] = []

    def line(label: str, cells: Sequence[str]) -> None:
        rows.append((label, *cells))

    ts: list[Totals] = common_window([run.totals for run in runs])
    line("jobs finished", [f"{t.finished}/{t.jobs}" for t in ts])
    line("never started", [str(t.never_started) for t in ts])
    what = ts[0].what if ts else "GPUs"
    line(f"{what} held (mean)", [f"{t.gpu_held:.1%}" for t in ts])
    line(f"{what} doing work (mean)", [f"{t.gpu_utilisation:.1%}" for t in ts])
    line("wait mean", [mean_text(t) for t in ts])
    line("wait p95", [p95_text(t) for t in ts])
    line("cycles with a partly bound gang", [f"{t.partial_gang_cycles} of {t.cycles}" for t in ts])
    line("simulated time", [show_time(t.makespan) + (" (stalled)" if t.stalled else "") for t in ts])
    head = "".join(f'<th><span class="swatch" style="background:{c}"></span>{_e(run.title)}</th>'
                   for run, c in zip(runs, swatches, strict=True))
    body = "".join("<tr>" + f"<th>{_e(r[0])}</th>" + "".join(f"<td>{_e(c)}</td>" for c in r[1:]) + "</tr>"
                   for r in rows)
    start, end = ts[0].window if ts else (0.0, 0.0)
    note = (f'<p class="note">The shares are means over the same window for every run, {_e(show_time(start))} to '
            f"{_e(show_time(end))}: a run that stalled keeps holding what it held (it would, for ever).</p>")
    return (f'<h2>Totals</h2>{note}<table class="totals"><thead><tr><th></th>{head}</tr></thead>'
            f"<tbody>{body}</tbody></table>")


def _jobs_table(run: Labelled) -> str:
    head = "".join(f"<th>{h}</th>" for h in ("job", "queue", "arrival", "wait", "start", "end", "pods", "phase",
                                             "reason"))
    body = []
    for row in run.rows[:JOB_ROWS]:
        phase = f"{row.phase} (never started)" if row.never_started else row.phase
        kinds = " ".join(r.kind for r in row.decision.reasons) if row.decision else ""
        body.append(
            f'<tr data-reasons="{_e(kinds)}"><td>{_e(row.name)}</td><td>{_e(row.queue)}</td>'
            f"<td>{show_time(row.arrival)}</td><td>{_e(wait_text(row, run.replay))}</td>"
            f"<td>{show_time(row.started)}</td><td>{show_time(row.ended)}</td>"
            f"<td>{_e(row.bound_text)}</td><td>{_e(phase)}</td><td>{_e(row.reason or '-')}</td></tr>"
        )
    more = (f'<p class="more">{len(run.rows) - JOB_ROWS} more rows in jobs.csv.</p>'
            if len(run.rows) > JOB_ROWS else "")
    return f'<table class="jobs"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>{more}'


def _evictions_table(run: Labelled) -> str:
    """Each eviction of the replay: when, which job lost which tasks on which nodes, to whom, under which action
    and rule, and whether its gang was broken."""
    head = "".join(f"<th>{h}</th>" for h in ("time", "job", "tasks", "nodes", "by", "action", "rule",
                                             "gang broken"))
    body = "".join(
        f'<tr data-broken="{str(e.breaks_gang).lower()}"><td>{show_time(e.time)}</td><td>{_e(e.job)}</td>'
        f"<td>{_e(', '.join(e.tasks))}</td><td>{_e(', '.join(e.nodes))}</td><td>{_e(e.by or '-')}</td>"
        f"<td>{_e(e.action or '-')}</td><td>{_e(e.rule)}</td><td>{'yes' if e.breaks_gang else 'no'}</td></tr>"
        for e in eviction_rows(run.replay))
    return f'<table class="evictions"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _figure(plot: Plot) -> str:
    data = base64.b64encode(plot.path.read_bytes()).decode("ascii")
    return (f'<figure id="{_e(plot.name)}"><h2>{_e(plot.title)}</h2>'
            f'<img alt="{_e(plot.title)}" width="{plot.width}" height="{plot.height}" '
            f'src="data:image/png;base64,{data}"><figcaption>{_e(plot.caption)}</figcaption></figure>')


def _header(h: Header) -> str:
    rows = [("confs" if len(h.confs) > 1 else "conf", ", ".join(h.confs) or "built-in default"),
            ("inputs", h.inputs), ("volcano-py", h.version), ("made", h.date),
            ("command", shlex.join(h.command))]
    cells = "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in rows if v)
    return (f'<header id="report-header"><h1>volcano-py simulation report</h1><dl class="meta">{cells}</dl>'
            "</header>")


_STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 0 auto; padding: 0 16px; max-width: 1060px; color: #222; }
h1 { font-size: 20px; margin: 12px 0 4px; } h2 { font-size: 17px; margin: 18px 0 6px; }
h3 { font-size: 14px; margin: 10px 0 2px; } .sub, .note, .more { color: #555; font-weight: normal; }
.note { font-size: 13px; margin: 2px 0 6px; }
dl.meta { display: grid; grid-template-columns: max-content 1fr; gap: 0 12px; margin: 0 0 6px; font-size: 13px; }
dl.meta dt { color: #555; } dl.meta dd { margin: 0; overflow-wrap: break-word; }
dl.meta dd:last-of-type { font-family: ui-monospace, monospace; font-size: 12px; }
header { border-bottom: 1px solid #ccc; padding-bottom: 4px; }
ol.jobs { list-style: none; padding: 0; margin: 0; }
li.job { padding: 2px 0; border-top: 1px solid #eee; display: grid; grid-template-columns: 40% 60%;
  align-items: center; }
li.job .head { white-space: nowrap; overflow: hidden; text-overflow: ellipsis; padding-right: 8px; }
.story { color: #333; margin-left: 6px; } li.job ul.periods { grid-column: 1 / 3; }
.bar { position: relative; height: 10px; background: #f2f2f2; }
.axis-row { display: grid; grid-template-columns: 40% 60%; } .axis-row .axis { grid-column: 2; }
.seg { position: absolute; top: 0; bottom: 0; } .seg.run { opacity: 0.9; }
.seg.wait { background: repeating-linear-gradient(135deg, #d9a441 0 3px, #f6e2b8 3px 7px); }
.axis { position: relative; height: 14px; font-size: 11px; color: #666; margin-top: 2px; }
.axis span { position: absolute; transform: translateX(-50%); } .axis span:first-child { transform: none; }
.axis span:last-child:not(:first-child) { transform: translateX(-100%); }
ul.periods { margin: 0; padding-left: 18px; } li.wait-reason { margin: 1px 0; }
.when { font-weight: 600; white-space: nowrap; margin-right: 4px; }
.said { display: block; color: #666; font-size: 12px; white-space: nowrap; overflow: hidden;
  text-overflow: ellipsis; }
table { border-collapse: collapse; margin: 0.5em 0; } th, td { padding: 2px 10px; text-align: left; }
thead th { border-bottom: 1px solid #999; } tbody tr:nth-child(even) { background: #f4f4f4; }
table.jobs td:last-child { font-size: 12px; max-width: 480px; }
.swatch { display: inline-block; width: 10px; height: 10px; margin-right: 6px; }
figure { margin: 1.5em 0; } img { max-width: 100%; height: auto; border: 1px solid #ddd; }
figcaption { color: #555; font-size: 13px; }
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


def render(runs: Sequence[Labelled], plots: Sequence[Plot], *, head: Header | None = None) -> str:
    swatches = [_hex(c) for c in colours(len(runs))]
    jobs = "".join(f"<h3>jobs: {_e(run.title)}</h3>{_jobs_table(run)}" for run in runs)
    evicting = [run for run in runs if run.replay.cluster.eviction_log]
    evictions = "".join(f"<h3>evictions: {_e(run.title)}</h3>{_evictions_table(run)}" for run in evicting)
    if evictions:
        evictions = ("<h2>Evictions</h2><p>Which job lost which tasks, to whom, under which action and rule, and "
                     f"whether its gang was broken.</p>{evictions}")
    tables = ", ".join(f'<a href="{name}">{name}</a>' for name in ("jobs.csv", "ticks.csv", "queues.csv"))
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>volcano-py simulation report</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>{_STYLE}</style></head>
<body data-plots-loaded="pending">
{_header(head or header())}
{section(runs, swatches)}
{_totals_table(runs, swatches)}
{"".join(_figure(p) for p in plots)}
<h2>Jobs</h2>
<p>The reason is the scheduler's last word on a job before it first ran, in its own wording. The same rows, and
the series behind the plots, are in {tables} beside this page.</p>
{jobs}
{evictions}
<script>{_SCRIPT}</script>
</body></html>
"""
