"""volcano-py exports what Volcano's scheduler exports, read from Volcano's own source and dashboards.

1. Every metric family declared in the snapshot's `pkg/scheduler/metrics/*.go` (`promauto.NewXxx[Vec](
   prometheus.XxxOpts{Subsystem: ..., Name: ..., Buckets: ...}, []string{labels})`) is in a scrape of
   volcano-py's registry after a few in-memory cycles, with the same full name, type, label names and, for a
   histogram, the same buckets.
   The same for the controllers' families (`pkg/controllers/metrics`, `pkg/controllers/*/state/metrics.go`).
2. Every `volcano_` metric that a panel of Volcano's Grafana dashboards (in its Helm chart) queries has data
   in that scrape, so no panel is empty.

The snapshot is `../shared/peers/volcano` beside the checkout (as tests/cli/test_volcano_chart.py finds it).
Without it these tests fail and say so; they never skip.
"""

from __future__ import annotations

import json
import math
import re
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import promql_parser
import pytest
from prometheus_client import CollectorRegistry

from scheduler.api.resources import GPU
from scheduler.cycle import run_cycle
from scheduler.metrics import ControllerMetrics, SchedulerMetrics, exposition, sample_cycle
from scheduler.testing import ClusterBuilder, cluster, conf_from_tiers, volcano_snapshot

ROOT = Path(__file__).resolve().parents[1]




VOLCANO = volcano_snapshot()
METRICS_GO = VOLCANO / "pkg" / "scheduler" / "metrics"
CONTROLLERS_GO = VOLCANO / "pkg" / "controllers"
GRAFANA = VOLCANO / "installer" / "helm" / "chart" / "volcano" / "templates" / "grafana.yaml"

# Declared by Volcano, set by nothing in Volcano (so never in its scrape either): volcano-py leaves them out.
# test_volcano_still_never_sets_what_volcano_py_leaves_out fails the day Volcano starts setting one.
NEVER_SET_BY_VOLCANO = {"volcano_namespace_share", "volcano_namespace_weight", "volcano_namespace_weighted_share"}
TYPES = {"Counter": "counter", "Gauge": "gauge", "Histogram": "histogram", "Summary": "summary"}


def snapshot_dir(path: Path) -> Path:
    assert path.exists(), f"{path} is missing: these tests need the Volcano snapshot at {VOLCANO}"
    return path


# ---- Volcano's declarations, from the Go source -----------------------------------------------------------
@dataclass(frozen=True)
class GoFamily:
    name: str  # the full name, as client_golang exports it
    type: str
    labels: frozenset[str]
    buckets: tuple[float, ...] | None
    variable: str  # the Go variable holding it
    source: str


def _balanced(text: str, start: int, open_: str, close: str) -> int:
    """The index just past the bracket closing the one at `start`, skipping Go string literals."""
    depth, i = 0, start
    while i < len(text):
        ch = text[i]
        if ch in "\"`":
            end = text.index(ch, i + 1)
            while ch == '"' and text[end - 1] == "\\":
                end = text.index(ch, end + 1)
            i = end
        elif ch == open_:
            depth += 1
        elif ch == close:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise AssertionError(f"unbalanced {open_} at {start}")


def _go_string_constants(files: list[Path]) -> dict[str, str]:
    return {m[1]: m[2] for f in files for m in re.finditer(r'\b(\w+)\s*=\s*"([^"]*)"', f.read_text())}


def _opts_field(body: str, field: str, constants: dict[str, str]) -> str:
    m = re.search(rf"\b{field}:\s*(\"[^\"]*\"|\w+(?:\.\w+)?)", body)
    if m is None:
        return ""
    value = m[1]
    if value.startswith('"'):
        return value[1:-1]
    key = value.rsplit(".", 1)[-1]
    assert key in constants, f"{field}: constant {value} not found in the metrics package"
    return constants[key]


def _go_buckets(body: str) -> tuple[float, ...] | None:
    m = re.search(r"\bBuckets:\s*prometheus\.(\w+)\(([^)]*)\)", body)
    if m is None:
        assert "Buckets:" not in body, f"a bucket layout this test does not read: {body}"
        return None
    low, high, count = (float(a) for a in m[2].split(","))
    assert m[1] == "ExponentialBucketsRange", f"bucket function {m[1]} not read by this test"
    growth = math.pow(high / low, 1.0 / (count - 1))  # client_golang's ExponentialBucketsRange
    return tuple(low * math.pow(growth, i) for i in range(int(count)))


def _go_files(directory: Path) -> list[Path]:
    return sorted(p for p in snapshot_dir(directory).glob("*.go") if not p.name.endswith("_test.go"))


@cache
def volcano_families() -> dict[str, GoFamily]:
    """The scheduler's: pkg/scheduler/metrics."""
    files = _go_files(METRICS_GO)
    return _read_families(files, _go_string_constants(files))


@cache
def volcano_controller_families() -> dict[str, GoFamily]:
    """The controllers': pkg/controllers/metrics and each controller's state/metrics.go (their Subsystem is
    pkg/controllers/util's VolcanoSubSystemName)."""
    files = _go_files(CONTROLLERS_GO / "metrics") + [
        snapshot_dir(CONTROLLERS_GO / kind / "state" / "metrics.go") for kind in ("job", "jobflow")
    ]
    return _read_families(files, _go_string_constants(files + _go_files(CONTROLLERS_GO / "util")))


def _read_families(files: list[Path], constants: dict[str, str]) -> dict[str, GoFamily]:
    found: dict[str, GoFamily] = {}
    for path in files:
        text = path.read_text()
        for m in re.finditer(r"(\w+)\s*=\s*promauto\.New(Counter|Gauge|Histogram|Summary)(Vec)?\(", text):
            call = text[m.end() - 1 : _balanced(text, m.end() - 1, "(", ")")]
            opts = re.search(r"prometheus\.\w+Opts\{", call)
            assert opts is not None, f"{path.name}: {m[1]} has no prometheus.XxxOpts"
            body = call[opts.end() - 1 : _balanced(call, opts.end() - 1, "{", "}")]
            rest = call[opts.end() - 1 + len(body) :]
            labels = re.search(r"\[\]string\{([^}]*)\}", rest) if m[3] else None
            parts = [_opts_field(body, f, constants) for f in ("Namespace", "Subsystem", "Name")]
            name = "_".join(p for p in parts if p)
            found[name] = GoFamily(
                name=name,
                type=TYPES[m[2]],
                labels=frozenset(re.findall(r'"([^"]*)"', labels[1])) if labels else frozenset(),
                buckets=_go_buckets(body),
                variable=m[1],
                source=path.name,
            )
    return found


# ---- a scrape of volcano-py after a few cycles that exercise queues, gangs and preemption ------------------
CONF = conf_from_tiers(
    ("priority", "gang", "conformance"),
    ("overcommit", "drf", "predicates", "proportion", "nodeorder", "binpack"),
    actions="enqueue, allocate, preempt, reclaim, backfill",
)


def _cycle(c: ClusterBuilder, m: SchedulerMetrics) -> None:
    """One cycle as the scheduler's runner does it (scheduler/cache/runner.py), with the bind observations the
    cache's binder makes for every pod it binds (the in-memory cluster binds without one)."""
    started = time.perf_counter()
    snapshot = c.sim.snapshot()
    snapshot_seconds = time.perf_counter() - started
    result = run_cycle(snapshot, CONF, memo=c.memo)
    c.sim.apply(result)
    for gang in result.binds:
        for task_uid, _ in gang.binds:
            task = snapshot.jobs[gang.job].tasks[task_uid]
            m.record_bind(0.002, snapshot.now - task.creation, prebind_seconds=0.001)
    m.record(sample_cycle(result, time.perf_counter() - started, snapshot, snapshot_seconds=snapshot_seconds))
    c.sim.start_bound_pods()
    c.sim.now += 5.0


@cache
def scrape() -> str:
    registry = CollectorRegistry()
    m = SchedulerMetrics(registry)
    c = cluster()
    c.sim.now = 1_800_000_000.0  # a wall clock: creation times are unix seconds
    c.priority_class("low", 10).priority_class("high", 1000)
    c.node("n1", cpu="16", memory="64Gi", gpu=4).node("n2", cpu="16", memory="64Gi", gpu=4)
    c.queue("team-a", weight=2, capability={"cpu": "12", GPU: 8}, guarantee={"cpu": "2"})
    c.queue("team-b", weight=1)
    c.job("elastic", queue="team-a", replicas=8, min_available=2, gpu=1, cpu="1", priority_class="low")
    c.job("wide", queue="team-b", replicas=2, cpu="24")  # no node has 24 cpus: never fits
    c.sim.now += 30.0  # the jobs waited before the first cycle
    _cycle(c, m)
    _cycle(c, m)
    c.job("urgent", queue="team-a", replicas=2, gpu=1, cpu="1", priority_class="high")  # preempts elastic's extras
    for _ in range(4):
        _cycle(c, m)
    assert c.sim.evicted, "the scenario preempts"
    return exposition(registry).decode()


@dataclass
class ScrapedFamily:
    type: str
    labels: set[str]
    samples: list[tuple[str, dict[str, str], float]]


def parse_exposition(text: str) -> dict[str, ScrapedFamily]:
    families: dict[str, ScrapedFamily] = {}
    current: ScrapedFamily | None = None
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            assert name not in families, f"{name}: two TYPE lines"
            current = families[name] = ScrapedFamily(kind, set(), [])
        elif line and not line.startswith("#"):
            assert current is not None, f"a sample before any TYPE line: {line}"
            m = re.fullmatch(r"(\w+)(?:\{(.*)\})? (\S+)", line)
            assert m is not None, line
            labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m[2] or ""))
            current.samples.append((m[1], labels, float(m[3])))
            current.labels |= set(labels) - {"le"}
    return families


def test_the_go_source_is_read() -> None:
    families = volcano_families()
    assert len(families) >= 40, sorted(families)
    e2e = families["volcano_e2e_scheduling_latency_milliseconds"]
    assert (e2e.type, e2e.buckets is not None and len(e2e.buckets)) == ("histogram", 20)
    assert families["volcano_total_preemption_attempts"].type == "counter"
    assert families["volcano_e2e_job_scheduling_duration"].labels == {"job_name", "queue", "job_namespace"}


@pytest.mark.parametrize("name", sorted(volcano_families().keys() - NEVER_SET_BY_VOLCANO) if METRICS_GO.exists()
                         else ["(the Volcano snapshot is missing)"])
def test_every_family_volcanos_scheduler_exports_is_in_the_scrape_alike(name: str) -> None:
    go = volcano_families()[name]
    scraped = parse_exposition(scrape())
    assert name in scraped, f"{name} ({go.source}) is not exported"
    ours = scraped[name]
    assert ours.type == go.type, f"{name}: {ours.type}, Volcano's is a {go.type}"
    if ours.samples:
        assert ours.labels == go.labels, f"{name}: labels {sorted(ours.labels)}, Volcano's {sorted(go.labels)}"
    else:  # a labelled family with no series yet: its declared labels
        declared = SchedulerMetrics(CollectorRegistry()).declared[name][1]
        assert set(declared) == go.labels, f"{name}: labels {sorted(declared)}, Volcano's {sorted(go.labels)}"
    if go.buckets is not None:
        bounds = sorted({float(labels["le"]) for sample, labels, _ in ours.samples if sample == f"{name}_bucket"})
        assert bounds, f"{name}: no buckets in the scrape"
        assert len(bounds) == len(go.buckets) + 1 and bounds[-1] == math.inf, f"{name}: {bounds}"
        assert all(math.isclose(a, b, rel_tol=1e-12) for a, b in zip(bounds, go.buckets, strict=False)), (
            f"{name}: buckets {bounds[:-1]}, Volcano's {list(go.buckets)}"
        )


@cache
def controller_scrape() -> str:
    """The controllers' families after each call site has recorded once (tests/jobs/test_controller_metrics.py
    drives the controllers themselves)."""
    m = ControllerMetrics(CollectorRegistry())
    m.record_queue("q1", {"inqueue": 1, "running": 2})
    m.record_job_phase("ns/done", "q1", "Completed")
    m.record_job_phase("ns/broken", "q1", "Failed")
    m.record_pod_created(1.5)
    m.record_jobflow_phase("ns", "Succeed")
    m.record_jobflow_phase("ns", "Failed")
    return exposition(m.registry).decode()


def test_the_controllers_go_source_is_read() -> None:
    families = volcano_controller_families()
    assert len(families) >= 9, sorted(families)
    assert families["volcano_queue_pod_group_inqueue_count"].labels == {"queue_name"}
    assert families["volcano_job_completed_phase_count"].type == "counter"


@pytest.mark.parametrize(
    "name", sorted(volcano_controller_families()) if CONTROLLERS_GO.exists()
    else ["(the Volcano snapshot is missing)"])
def test_every_family_volcanos_controllers_export_is_in_the_scrape_alike(name: str) -> None:
    go = volcano_controller_families()[name]
    scraped = parse_exposition(controller_scrape())
    assert name in scraped, f"{name} ({go.source}) is not exported"
    ours = scraped[name]
    assert ours.type == go.type, f"{name}: {ours.type}, Volcano's is a {go.type}"
    assert ours.samples and ours.labels == go.labels, f"{name}: {sorted(ours.labels)}, Volcano's {sorted(go.labels)}"
    if go.buckets is not None:
        bounds = sorted({float(labels["le"]) for sample, labels, _ in ours.samples if sample == f"{name}_bucket"})
        assert len(bounds) == len(go.buckets) + 1, f"{name}: {bounds}"
        assert all(math.isclose(a, b, rel_tol=1e-12) for a, b in zip(bounds, go.buckets, strict=False))


def test_volcano_still_never_sets_what_volcano_py_leaves_out() -> None:
    """The families volcano-py leaves out are written by no Volcano code outside their own package."""
    families = volcano_families()
    package = "\n".join(p.read_text() for p in METRICS_GO.glob("*.go") if not p.name.endswith("_test.go"))
    callers = snapshot_dir(VOLCANO / "pkg")
    for name in NEVER_SET_BY_VOLCANO:
        assert name in families, f"{name} is no longer declared by Volcano: drop it from NEVER_SET_BY_VOLCANO"
        variable = families[name].variable
        setters = {
            m[1] for m in re.finditer(r"\nfunc (\w+)\([^)]*\)[^{]*\{(.*?)\n\}", package, re.S)
            if re.search(rf"\b{variable}\.", m[2])
        }
        assert setters, f"{name}: no function of the metrics package sets {variable}"
        for path in callers.rglob("*.go"):
            if path.parent == METRICS_GO or path.name.endswith("_test.go"):
                continue
            text = path.read_text(errors="replace")
            for setter in setters:
                assert f"metrics.{setter}(" not in text, f"{path} now sets {name} ({setter}): export it"


# ---- Volcano's Grafana dashboards ---------------------------------------------------------------------------
def volcano_dashboards() -> dict[str, dict]:
    text = snapshot_dir(GRAFANA).read_text()
    boards = {m[1]: json.loads(m[2]) for m in re.finditer(r"^  (\S+\.json): \|-\n    (.*)$", text, re.M)}
    assert len(boards) >= 3, f"no dashboards found in {GRAFANA}"
    return boards


def panel_exprs(board: dict) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []

    def visit(panels: list[dict]) -> None:
        for panel in panels:
            for target in panel.get("targets", ()):
                if target.get("expr"):
                    found.append((panel.get("title", ""), target["expr"]))
            visit(panel.get("panels", ()))

    visit(board.get("panels", ()))
    return found


def to_promql(expr: str) -> str:
    """Helm's escaping of Grafana's braces, then Grafana's variables, as Grafana substitutes them."""
    expr = expr.replace("{{`{{", "{{").replace("}}`}}", "}}")
    expr = expr.replace("$__rate_interval", "5m").replace("$__interval", "1m").replace("$__range", "1h")
    return re.sub(r"\$\{?(\w+)(:\w+)?\}?", "x", expr)


def selectors(expr: str) -> list[promql_parser.VectorSelector]:
    found: list[promql_parser.VectorSelector] = []

    def visit(node: object) -> None:
        if isinstance(node, promql_parser.VectorSelector) and node.name:
            found.append(node)

    promql_parser.walk(promql_parser.parse(expr), pre_visit=visit)
    return found


def dashboard_series() -> dict[str, set[tuple[str, str]]]:
    """Each volcano_ metric the panels select -> its label matchers with a fixed value ((label, value)),
    the ones the scrape must have a series for. kube-state-metrics' series (kube_*) are not the scheduler's."""
    series: dict[str, set[tuple[str, str]]] = {}
    for board in volcano_dashboards().values():
        for _, expr in panel_exprs(board):
            for selector in selectors(to_promql(expr)):
                if not selector.name.startswith("volcano_"):
                    continue
                fixed = {
                    (m.name, m.value) for m in selector.matchers.matchers
                    if m.op == promql_parser.MatchOp.Equal and m.name != "__name__" and m.value != "x"
                }
                series.setdefault(selector.name, set()).update(fixed)
    return series


def test_every_volcano_metric_of_volcanos_dashboards_has_data() -> None:
    wanted = dashboard_series()
    assert len(wanted) >= 20, sorted(wanted)
    samples = [s for family in parse_exposition(scrape()).values() for s in family.samples]
    empty = []
    for name, matchers in sorted(wanted.items()):
        rows = [labels for sample, labels, _ in samples if sample == name]
        if not rows or not all(any(labels.get(k) == v for labels in rows) for k, v in matchers):
            empty.append(f"{name}{dict(matchers) or ''}")
    assert not empty, f"{len(empty)} of {len(wanted)} dashboard series have no data: {empty}"
    values = {sample: value for sample, labels, value in samples if not labels}
    assert values["volcano_total_preemption_attempts"] > 0, "the preemption panel's rate() is not flat"
