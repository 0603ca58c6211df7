"""`simulate --report DIR` writes a page people open: one self-contained HTML file whose plots headless Chromium
loads, the PNGs at their stated size, and the per-job rows and per-tick series as CSV (issue 21).

Chromium is Debian's (`make chromium`, which `make unit` depends on, installs it); a missing browser fails the
test rather than skipping it.
"""

from __future__ import annotations

import csv
import os
import shutil
import struct
import subprocess
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml

from scheduler.cli import main
from scheduler.report.plots import HEIGHT, WIDTH

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "sim"
CHROMIUM = os.environ.get("VOLCANO_PY_CHROMIUM", "/usr/bin/chromium")
PLOTS = ("utilisation", "queue_shares", "waits", "gantt")

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_size(data: bytes) -> tuple[int, int]:
    """(width, height) from a PNG's IHDR chunk; raises if the bytes are not a PNG."""
    assert data[:8] == PNG_SIGNATURE and data[12:16] == b"IHDR", "not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    return int(width), int(height)


def png_file_size(path: Path) -> tuple[int, int]:
    return png_size(path.read_bytes())


@dataclass
class Page(HTMLParser):
    body: dict[str, str | None] = field(default_factory=dict)
    images: list[dict[str, str | None]] = field(default_factory=list)
    job_rows: list[dict[str, str | None]] = field(default_factory=list)

    def __post_init__(self) -> None:
        super().__init__()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "body":
            self.body = dict(attrs)
        elif tag == "img":
            self.images.append(dict(attrs))
        elif tag == "tr" and any(name == "data-reasons" for name, _ in attrs):
            self.job_rows.append(dict(attrs))


def parse(text: str) -> Page:
    page = Page()
    page.feed(text)
    return page


@dataclass(frozen=True, slots=True)
class Case:
    name: str
    args: tuple[str, ...]
    runs: tuple[str, ...]  # the replays the report overlays
    jobs: int


CASES = [
    Case("the demo, with the per-pod baseline beside volcano-py",
         (str(EXAMPLES / "gpu-cluster.yaml"), str(EXAMPLES / "two-gangs.yaml"), "--compare-per-pod"),
         ("volcano-py (gang scheduling)", "per-pod baseline (no gangs, like kube-scheduler)"), 3),
    Case("the teams example, proportion against capacity",
         (str(EXAMPLES / "teams-cluster.yaml"), str(EXAMPLES / "teams-workload.yaml"),
          "--conf", str(EXAMPLES / "proportion.conf"), "--compare", str(EXAMPLES / "capacity.conf")),
         (f"volcano-py with {EXAMPLES / 'proportion.conf'}", f"volcano-py with {EXAMPLES / 'capacity.conf'}"), 4),
]


@pytest.fixture(scope="module", params=CASES, ids=[c.name for c in CASES])
def report(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Case, Path]:
    case: Case = request.param
    directory = tmp_path_factory.mktemp("report")
    main(["simulate", *case.args, "--report", str(directory)])
    return case, directory


def test_the_plots_are_pngs_of_the_stated_size(report: tuple[Case, Path]) -> None:
    _, directory = report
    assert {name: png_file_size(directory / f"{name}.png") for name in PLOTS} == dict.fromkeys(PLOTS, (WIDTH, HEIGHT))


def test_the_page_embeds_every_plot_so_it_stands_alone(report: tuple[Case, Path]) -> None:
    import base64

    _, directory = report
    page = parse((directory / "index.html").read_text())
    embedded = [img["src"] or "" for img in page.images]
    assert all(src.startswith("data:image/png;base64,") for src in embedded) and len(embedded) == len(PLOTS)
    decoded = [base64.b64decode(src.split(",", 1)[1]) for src in embedded]
    assert decoded == [(directory / f"{name}.png").read_bytes() for name in PLOTS]


def test_the_csvs_hold_a_row_per_job_and_run_and_a_series_per_tick(report: tuple[Case, Path]) -> None:
    case, directory = report
    with (directory / "jobs.csv").open() as f:
        jobs = list(csv.DictReader(f))
    assert sorted({row["run"] for row in jobs}) == sorted(case.runs)
    assert len(jobs) == case.jobs * len(case.runs)
    with (directory / "ticks.csv").open() as f:
        ticks = list(csv.DictReader(f))
    assert {row["run"] for row in ticks} == set(case.runs)
    assert all(0.0 <= float(row["busy"]) <= float(row["held"]) <= 1.0 for row in ticks)
    with (directory / "queues.csv").open() as f:
        assert {row["run"] for row in csv.DictReader(f)} == set(case.runs)


def _chromium(*args: str, profile: Path) -> subprocess.CompletedProcess[str]:
    assert shutil.which(CHROMIUM), f"{CHROMIUM} is missing: `make chromium` installs Debian's chromium"
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={profile}"]
    return subprocess.run([CHROMIUM, *flags, *args], capture_output=True, text=True, timeout=120, check=True)


def test_chromium_loads_every_plot(report: tuple[Case, Path], tmp_path: Path) -> None:
    _, directory = report
    url = (directory / "index.html").as_uri()
    dom = parse(_chromium("--dump-dom", url, profile=tmp_path / "profile-dom").stdout)
    assert dom.body.get("data-plots-loaded") == "true" and dom.body.get("data-images") == str(len(PLOTS))
    sizes = [(int(img["data-natural-width"] or 0), int(img["data-natural-height"] or 0)) for img in dom.images]
    assert sizes == [(WIDTH, HEIGHT)] * len(PLOTS)


def test_chromium_takes_a_screenshot_of_the_page(report: tuple[Case, Path], tmp_path: Path) -> None:
    _, directory = report
    shot = tmp_path / "page.png"
    _chromium(f"--screenshot={shot}", "--window-size=1100,2400", "--hide-scrollbars",
              (directory / "index.html").as_uri(), profile=tmp_path / "profile-shot")
    assert png_file_size(shot) == (1100, 2400)
    assert shot.stat().st_size > 50_000  # the plots are drawn into it, not a blank page (a blank one is ~10 kB)


def test_a_cluster_without_gpus_is_reported_in_cpu(tmp_path: Path) -> None:
    (tmp_path / "cluster.yaml").write_text("nodes:\n- {name: cpu, count: 2, cpu: 8}\n")
    container = {"name": "c", "image": "x", "resources": {"requests": {"cpu": "6"}}}
    job = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "etl"}, "duration": 30,
           "spec": {"minAvailable": 2, "tasks": [{"name": "w", "replicas": 2,
                                                   "template": {"spec": {"containers": [container]}}}]}}
    (tmp_path / "workload.yaml").write_text(yaml.safe_dump({"jobs": [job]}))
    assert main(["simulate", str(tmp_path / "cluster.yaml"), str(tmp_path / "workload.yaml"),
                 "--report", str(tmp_path / "report")]) == 0
    with (tmp_path / "report" / "ticks.csv").open() as f:
        ticks = list(csv.DictReader(f))
    assert {row["resource"] for row in ticks} == {"cpu"}
    assert max(float(row["busy"]) for row in ticks) == 0.75  # 12 of the 16 cores, while the gang runs
    assert {name: png_file_size(tmp_path / "report" / f"{name}.png") for name in PLOTS} == dict.fromkeys(
        PLOTS, (WIDTH, HEIGHT))
