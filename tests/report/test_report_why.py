"""The report answers "why did my job wait?" first (issue 38): a header saying what it was made from, then every
job of every replay with the reason of each stretch of its wait in plain words, visible in the first screen after
the header at laptop and desktop sizes in headless Chromium, never folded away; per-pod jobs say how far their
gang got; the totals compare over one window; the plots keep legends off the data and share their axes.

Chromium is Debian's (`make chromium`); a missing browser fails the test rather than skipping it.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from html.parser import HTMLParser
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest

from scheduler.cli import main
from scheduler.cycle import builtin_default_conf
from scheduler.report import plots
from scheduler.report.series import Labelled
from scheduler.sim.naive import per_pod_cycle
from scheduler.sim.replay import replay
from scheduler.sim.report import job_rows
from scheduler.sim.workload import load_cluster, load_workload

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "sim"
CLUSTER, GANGS = EXAMPLES / "gpu-cluster.yaml", EXAMPLES / "two-gangs.yaml"
CHROMIUM = os.environ.get("VOLCANO_PY_CHROMIUM", "/usr/bin/chromium")
GANG_RUN, PER_POD_RUN = "volcano-py (gang scheduling)", "per-pod baseline (no gangs, like kube-scheduler)"
VIEWPORTS = [(1366, 768), (1920, 1080)]


@dataclass
class Why(HTMLParser):
    """What the page says: its header's fields, each run's jobs and their reasons, and any folded element."""

    header: dict[str, str] = field(default_factory=dict)
    reasons: dict[tuple[str, str], list[dict[str, str]]] = field(default_factory=dict)  # (run, job) -> reasons
    stories: dict[tuple[str, str], str] = field(default_factory=dict)
    totals: list[list[str]] = field(default_factory=list)
    details: int = 0
    _at: list[str] = field(default_factory=list)  # what the text being read belongs to
    _run: str = ""
    _job: str = ""
    _kinds: str = ""
    _dt: str = ""
    _text: str = ""

    def __post_init__(self) -> None:
        super().__init__()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        cls = a.get("class", "")
        if tag == "details":
            self.details += 1
        elif tag == "div" and cls == "run":
            self._run = a["data-run"]
        elif tag == "li" and cls == "job":
            self._job = a["data-job"]
        elif tag in ("dt", "dd") or (tag == "li" and cls == "wait-reason") or (tag == "span" and cls == "story"):
            self._at.append(cls or tag)
            self._kinds, self._text = a.get("data-kinds", ""), ""
        elif tag == "table" and cls == "totals":
            self._at.append("totals")
        elif tag == "tr" and self._at[-1:] == ["totals"]:
            self.totals.append([])

    def handle_data(self, data: str) -> None:
        self._text += data
        if self._at[-1:] == ["totals"] and self.totals and data.strip():
            self.totals[-1].append(data.strip())

    def handle_endtag(self, tag: str) -> None:
        if not self._at:
            return
        what = self._at[-1]
        if tag == "dt" and what == "dt":
            self._dt = self._text.strip()
        elif tag == "dd" and what == "dd":
            self.header[self._dt] = self._text.strip()
        elif tag == "li" and what == "wait-reason":
            self.reasons.setdefault((self._run, self._job), []).append({"kinds": self._kinds, "text": self._text})
        elif tag == "span" and what == "story":
            self.stories[(self._run, self._job)] = self._text.strip()
        elif tag == "table" and what == "totals":
            pass
        else:
            return
        self._at.pop()


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("why")
    assert main(["simulate", str(CLUSTER), str(GANGS), "--compare-per-pod", "--report", str(directory)]) == 0
    return directory / "index.html"


@pytest.fixture(scope="module")
def why(page: Path) -> Why:
    parsed = Why()
    parsed.feed(page.read_text())
    return parsed


def _waiting() -> dict[str, set[str]]:
    """Per run, the jobs that were held up, from the replays themselves: never started, or waited past the first
    cycles (more than 5 simulated seconds)."""
    out = {}
    for title, kwargs in ((GANG_RUN, {"conf": builtin_default_conf()}), (PER_POD_RUN, {"scheduler": per_pod_cycle})):
        rows = job_rows(replay(load_cluster(CLUSTER), load_workload(GANGS), **kwargs))  # type: ignore[arg-type]
        out[title] = {r.name for r in rows if r.started is None or (r.wait or 0) > 5}
    return out


def test_the_header_says_what_the_report_was_made_from(why: Why) -> None:
    assert why.header["conf"] == "built-in default"
    assert why.header["volcano-py"] == version("volcano-py")
    assert why.header["made"].startswith(f"{dt.datetime.now(dt.UTC):%Y-%m-%d}")
    command = why.header["command"]
    assert command.startswith("volcano-py simulate ") and str(GANGS) in command and "--compare-per-pod" in command


def test_every_waiting_job_has_its_reason_in_plain_words_and_nothing_is_folded(why: Why) -> None:
    assert why.details == 0
    waiting = _waiting()
    assert waiting[GANG_RUN] == {"llama-b"} and waiting[PER_POD_RUN] == {"llama-a", "llama-b", "notebook"}
    for run, jobs in waiting.items():
        for job in jobs:
            reasons = why.reasons.get((run, job))
            assert reasons and all(r["text"].strip() for r in reasons), (run, job)
    # The default conf is Volcano's, overcommit first in tier 2: the cluster's 12 GPUs x 1.2 = 14.4 hold llama-a's
    # 8 and not llama-b's 8 more.
    held = why.reasons[(GANG_RUN, "llama-b")]
    assert [r["kinds"] for r in held] == ["OvercommitLimit"]
    assert "fully booked" in held[0]["text"] and "16 GPUs of the 14.4 GPUs" in held[0]["text"]


def test_per_pod_jobs_say_how_far_their_gang_got(why: Why) -> None:
    assert why.stories[(PER_POD_RUN, "llama-a")] == "never started: 6/8 bound, 8 needed"
    gang = [r for r in why.reasons[(PER_POD_RUN, "llama-a")] if "GangNotReady" in r["kinds"]]
    assert gang and "6 of the 8 pods it needs together were bound" in gang[0]["text"]


def test_the_totals_compare_the_runs_over_one_window(why: Why) -> None:
    held = next(row for row in why.totals if row[0] == "GPUs held (mean)")
    gang, per_pod = (float(cell.rstrip("%")) for cell in held[1:])
    assert per_pod > 99.0  # over the gang run's 20 minutes, not its own 31 s (96.8%)
    assert gang < per_pod


# ---- the plots -------------------------------------------------------------------------------------------


def _figures(monkeypatch: pytest.MonkeyPatch, runs: list[Labelled], tmp: Path) -> dict[str, Any]:
    drawn: dict[str, Any] = {}

    def keep(fig: Any, path: Path) -> Path:
        fig.canvas.draw()
        drawn[path.stem] = fig
        return path

    monkeypatch.setattr(plots, "_save", keep)
    plots.draw_all(runs, tmp)
    return drawn


def test_legends_sit_outside_the_data_and_queue_panels_share_their_axes(monkeypatch: pytest.MonkeyPatch,
                                                                         tmp_path: Path) -> None:
    cluster, workload = load_cluster(EXAMPLES / "teams-cluster.yaml"), load_workload(EXAMPLES / "teams-workload.yaml")
    runs = [Labelled("gang", replay(cluster, workload, builtin_default_conf())),
            Labelled("per-pod", replay(cluster, workload, scheduler=per_pod_cycle))]
    figures = _figures(monkeypatch, runs, tmp_path)
    assert set(figures) == {"utilisation", "queue_shares", "waits", "gantt"}
    for name, fig in figures.items():
        renderer = fig.canvas.get_renderer()
        assert all(ax.get_legend() is None for ax in fig.axes), name  # no legend drawn inside a plot
        assert len(fig.legends) == 1, name
        box = fig.legends[0].get_window_extent(renderer)
        for ax in fig.axes:
            assert not box.overlaps(ax.get_window_extent(renderer)), name
    for name in ("queue_shares", "waits"):
        axes = figures[name].axes
        assert len(axes) > 1, name  # the teams example has several queues
        assert all(axes[0].get_shared_x_axes().joined(axes[0], ax) for ax in axes[1:]), name
        assert len({ax.get_xlim() for ax in axes}) == 1, name
    ends = {figures[name].axes[0].get_xlim() for name in ("utilisation", "gantt")}
    assert len(ends) == 1  # the time plots run over the same window


# ---- headless Chromium -----------------------------------------------------------------------------------

# Added to a copy of the page by the test alone: measures, once laid out, where each reason sits.
_MEASURE = """<script>
window.addEventListener("load", function () {
  var header = document.getElementById("report-header").getBoundingClientRect();
  var top = header.bottom + window.scrollY, found = [];
  document.querySelectorAll("div.run").forEach(function (run) {
    run.querySelectorAll("li.job").forEach(function (job) {
      job.querySelectorAll(".wait-reason").forEach(function (r) {
        var box = r.getBoundingClientRect(), style = getComputedStyle(r);
        found.push({run: run.dataset.run, job: job.dataset.job, top: box.top + window.scrollY,
                    bottom: box.bottom + window.scrollY, width: box.width, height: box.height,
                    shown: style.visibility === "visible" && style.display !== "none" && r.checkVisibility(),
                    folded: r.closest("details") !== null, text: r.innerText});
      });
    });
  });
  document.body.dataset.measured = JSON.stringify({top: top, width: window.innerWidth,
                                                   height: window.innerHeight, reasons: found});
});
</script>"""


def _chromium(*args: str, profile: Path) -> str:
    assert shutil.which(CHROMIUM), f"{CHROMIUM} is missing: `make chromium` installs Debian's chromium"
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--hide-scrollbars", f"--user-data-dir={profile}"]
    return subprocess.run([CHROMIUM, *flags, *args], capture_output=True, text=True, timeout=120,
                          check=True).stdout


class Measured(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.value: dict[str, Any] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "body":
            self.value = json.loads(dict(attrs).get("data-measured") or "{}")


@pytest.mark.parametrize(("width", "height"), VIEWPORTS, ids=[f"{w}x{h}" for w, h in VIEWPORTS])
def test_each_waiting_jobs_reason_is_in_the_first_screen_after_the_header(page: Path, tmp_path: Path, width: int,
                                                                          height: int) -> None:
    measured_page = tmp_path / "index.html"
    measured_page.write_text(page.read_text().replace("</body>", _MEASURE + "</body>"))
    dom = _chromium(f"--window-size={width},{height}", "--dump-dom", measured_page.as_uri(),
                    profile=tmp_path / "profile")
    parser = Measured()
    parser.feed(dom)
    m = parser.value
    # The window's size; its viewport is smaller by the browser's own bars (625 px high in a 768 px window), as
    # on a laptop's screen: the reasons must fit that.
    assert m["width"] == width and height - 200 <= m["height"] <= height
    screen = (m["top"], m["top"] + m["height"])
    placed = {(r["run"], r["job"]) for r in m["reasons"]}
    for run, jobs in _waiting().items():
        for job in jobs:
            assert (run, job) in placed, (run, job)
    for r in m["reasons"]:
        where = (r["run"], r["job"], round(r["top"]), round(r["bottom"]), screen)
        assert r["shown"] and not r["folded"] and r["width"] > 0 and r["height"] > 0 and r["text"].strip(), where
        assert screen[0] <= r["top"] and r["bottom"] <= screen[1], where
    # A screenshot of that screen, for a person to look at (the test keeps it beside its page).
    shot = tmp_path / f"why-{width}x{height}.png"
    _chromium(f"--window-size={width},{height}", f"--screenshot={shot}", page.as_uri(), profile=tmp_path / "shot")
    assert shot.stat().st_size > 20_000
