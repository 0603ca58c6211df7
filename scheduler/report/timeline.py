"""Layer `report`: the report's first section — why each job waited, per replay, as HTML.

Every job is a row: its name, what became of it ("waited 10m7s, then ran 10m0s", "never started: 6/8 bound,
8 needed"), a bar on a time axis shared by every replay of the report (waiting hatched, running
solid), and each period of its wait with its reason in plain words, the scheduler's own sentence under it. Jobs
that waited come first, longest first; nothing is folded away (issue 38: the reasons sat in collapsed tables at
the bottom of the page).
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from scheduler.report.plain import QUICK, periods, story
from scheduler.report.series import Labelled, end_time
from scheduler.sim.report import JobRow, show_time

SHOWN = 12  # jobs per replay in this section; the jobs table below, and jobs.csv, have every one


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def waited(row: JobRow) -> bool:
    """The job was held up: it never started, the scheduler gave a reason, room was made for it, or its gang was
    broken later."""
    return (row.started is None and row.ended is None) or bool(row.said) or row.room is not None or bool(row.rewaits)


def _order(rows: Sequence[JobRow], end: float) -> list[JobRow]:
    def key(row: JobRow) -> tuple[int, float, str]:
        wait = row.wait if row.wait is not None else end - row.arrival + 1e9
        return (0 if waited(row) else 1, -wait, row.name)

    return sorted(rows, key=key)


def _pct(t: float, end: float) -> str:
    return f"{100 * max(0.0, min(t, end)) / end:.3f}%" if end > 0 else "0%"


def _bar(row: JobRow, end: float, colour: str) -> str:
    """The job on the shared axis: its wait pale, its run solid."""
    segments = []
    until = row.started if row.started is not None else (row.ended if row.ended is not None else end)
    if until > row.arrival:
        segments.append(f'<span class="seg wait" style="left:{_pct(row.arrival, end)};'
                        f'width:calc({_pct(until, end)} - {_pct(row.arrival, end)})" '
                        f'title="waiting {show_time(row.arrival)} to {show_time(until)}"></span>')
    if row.started is not None:
        stop = row.ended if row.ended is not None else end
        segments.append(f'<span class="seg run" style="left:{_pct(row.started, end)};'
                        f'width:calc({_pct(stop, end)} - {_pct(row.started, end)});background:{colour}" '
                        f'title="running {show_time(row.started)} to {show_time(stop)}"></span>')
        for broke, again in row.rewaits:  # a later wait, drawn over the run: its gang broken by evictions
            until_again = again if again is not None else stop
            segments.append(f'<span class="seg wait" style="left:{_pct(broke, end)};'
                            f'width:calc({_pct(until_again, end)} - {_pct(broke, end)})" '
                            f'title="waiting again {show_time(broke)} to {show_time(until_again)}"></span>')
    return f'<div class="bar" aria-hidden="true">{"".join(segments)}</div>'


_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 3 * 3600, 6 * 3600, 12 * 3600, 86400)


def ticks(end: float, most: int = 6) -> list[float]:
    """Round times from 0 to `end`, at most `most` of them (`0s 5m0s 10m0s 15m0s 20m0s`)."""
    if end <= 0:
        return [0.0]
    step = float(next((s for s in _STEPS if end / s <= most - 1), 0))
    if not step:
        step = 86400 * -(-end // (86400 * (most - 1)))
    return [float(i * step) for i in range(int(end // step) + 1)]


def _axis(end: float) -> str:
    marks = "".join(f'<span style="left:{_pct(t, end)}">{_e(show_time(t))}</span>' for t in ticks(end))
    return f'<div class="axis-row" aria-hidden="true"><div class="axis">{marks}</div></div>'


def _job(row: JobRow, end: float, stalled: bool, colour: str) -> str:
    held_up = waited(row)
    items = []
    for p in periods(row, end):
        if p.why == QUICK and not held_up:
            continue
        said = f'<span class="said" title="{_e(p.said)}">scheduler: {_e(p.said)}</span>' if p.said else ""
        when = (f"{show_time(p.start)} to {show_time(p.end)}" if p.end is not None
                else f"from {show_time(p.start)}")
        items.append(f'<li class="wait-reason" data-job="{_e(row.name)}" data-kinds="{_e(p.kinds)}">'
                     f'<span class="when">{_e(when)}</span> {_e(p.why)}{said}</li>')
    reasons = f'<ul class="periods">{"".join(items)}</ul>' if items else ""
    return (f'<li class="job" data-job="{_e(row.name)}" data-waited="{str(held_up).lower()}">'
            f'<div class="head"><b>{_e(row.name)}</b> <span class="story">{_e(story(row, end, stalled))}</span>'
            f'</div>{_bar(row, end, colour)}{reasons}</li>')


def section(runs: Sequence[Labelled], colours: Sequence[str]) -> str:
    """`<section id="why">`: every replay's jobs, waiting ones first, on one time axis."""
    end = end_time(runs)
    parts = []
    for run, colour in zip(runs, colours, strict=True):
        rows = _order(run.rows, end)
        held = sum(1 for r in rows if waited(r))
        shown = rows[:SHOWN]
        more = len(rows) - len(shown)
        tail = (f'<p class="more">{more} more jobs ({max(0, held - len(shown))} of them held up): the jobs table '
                "below and jobs.csv have every one.</p>") if more else ""
        summary = f"{held} of {len(rows)} jobs held up" if held else f"none of the {len(rows)} jobs was held up"
        parts.append(f'<div class="run" data-run="{_e(run.title)}"><h3><span class="swatch" '
                     f'style="background:{colour}"></span>{_e(run.title)} <span class="sub">{_e(summary)}</span>'
                     f"</h3>{_axis(end)}"
                     f'<ol class="jobs">{"".join(_job(r, end, run.replay.stalled, colour) for r in shown)}</ol>'
                     f"{tail}</div>")
    return ('<section id="why"><h2>Why jobs waited</h2>'
            f'<p class="note">Each job on one time axis (0 to {_e(show_time(end))}, the same for every run): '
            "waiting hatched, running solid; under it, each stretch of its wait and why.</p>"
            f'{"".join(parts)}</section>')
