"""Medians, ratios and the markdown table of `make bench-peers` (bench/bench_peers.py's JSON)."""

from __future__ import annotations

import statistics
from collections import defaultdict

NAMES = {"volcano-py": "volcano-py", "volcano": "Volcano vc-scheduler", "kube-scheduler": "kube-scheduler",
         "ceiling": "Go bind loop (ceiling)"}
MEDIAN_KEYS = ("binds_per_s", "start_to_first_bind_s", "start_to_last_bind_s", "cpu_s", "cpu_s_per_1000_binds",
               "cpu_window_s_per_1000_binds", "peak_rss_mib", "server_cpu_s_per_1000_binds")


def summarise(runs: list[dict]) -> dict[str, dict]:
    """Per contender: the median of each measure over its rounds, the worst partial-gang count, the rounds'
    count and how many of them bound every pod."""
    by: dict[str, list[dict]] = defaultdict(list)
    for r in runs:
        by[r["contender"]].append(r)
    out: dict[str, dict] = {}
    for name, rs in by.items():
        m: dict = {"rounds": len(rs), "complete_rounds": sum(1 for r in rs if r.get("complete"))}
        for key in MEDIAN_KEYS:
            values = [r[key] for r in rs if r.get(key) is not None]
            if values:
                m[key] = round(statistics.median(values), 3)
        partial = [r["partial_gangs"] for r in rs if r.get("partial_gangs") is not None]
        if partial:
            m["partial_gangs_max"] = max(partial)
        own = [r["bindloop"]["per_s"] for r in rs if isinstance(r.get("bindloop"), dict) and "per_s" in r["bindloop"]]
        if own:
            m["bindloop_own_per_s"] = round(statistics.median(own), 1)
        out[name] = m
    return out


def ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 2) if a is not None and b else None


def _fmt(v: object, digits: int = 2) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:,.{digits}f}" if abs(v) < 100 else f"{v:,.0f}"
    return f"{v:,}" if isinstance(v, int) else str(v)


def throughput_table(size: dict) -> list[str]:
    med = size["median"]
    lines = [f"**Throughput, {size['nodes']:,} nodes x {size['pods']:,} pods** (gangs of {size['gang']}; medians "
             f"of {size['rounds']} rounds; the size took {size['wall_s']:.0f} s)", "",
             "| contender | binds/s (first to last) | start to first bind, s | start to last bind, s | CPU s per "
             "1,000 binds (whole run) | CPU s per 1,000 binds (bind window) | peak RSS, MiB | partial gangs (max) | "
             "apiserver+etcd CPU s per 1,000 binds | rounds complete |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for name in ("volcano-py", "volcano", "kube-scheduler", "ceiling"):
        m = med.get(name)
        if not m:
            continue
        rate = _fmt(m.get("binds_per_s"))
        if "bindloop_own_per_s" in m:
            rate += f" (own clock {_fmt(m['bindloop_own_per_s'])})"
        lines.append(f"| {NAMES[name]} | {rate} | {_fmt(m.get('start_to_first_bind_s'))} | "
                     f"{_fmt(m.get('start_to_last_bind_s'))} | {_fmt(m.get('cpu_s_per_1000_binds'), 3)} | "
                     f"{_fmt(m.get('cpu_window_s_per_1000_binds'), 3)} | {_fmt(m.get('peak_rss_mib'), 0)} | "
                     f"{_fmt(m.get('partial_gangs_max'))} | {_fmt(m.get('server_cpu_s_per_1000_binds'), 3)} | "
                     f"{m['complete_rounds']}/{m['rounds']} |")
    py = med.get("volcano-py", {})
    lines += ["", "| volcano-py as a ratio to | binds/s | start to last bind | CPU per bind (whole run) | "
              "CPU per bind (bind window) | peak RSS |", "|---|---|---|---|---|---|"]
    for name in ("volcano", "kube-scheduler", "ceiling"):
        m = med.get(name)
        if not m or not py:
            continue
        lines.append(f"| {NAMES[name]} | {_fmt(ratio(py.get('binds_per_s'), m.get('binds_per_s')))} | "
                     f"{_fmt(ratio(py.get('start_to_last_bind_s'), m.get('start_to_last_bind_s')))} | "
                     f"{_fmt(ratio(py.get('cpu_s_per_1000_binds'), m.get('cpu_s_per_1000_binds')))} | "
                     f"{_fmt(ratio(py.get('cpu_window_s_per_1000_binds'), m.get('cpu_window_s_per_1000_binds')))} | "
                     f"{_fmt(ratio(py.get('peak_rss_mib'), m.get('peak_rss_mib')))} |")
    return lines


def restart_table(size: dict) -> list[str]:
    med = size["median"]
    lines = [f"**Restart, {size['nodes']:,} nodes x {size['pods']:,} existing pods + one pending gang of "
             f"{size['gang']}** (kube-scheduler: one pending plain pod; medians of {size['rounds']} rounds; the size "
             f"took {size['wall_s']:.0f} s)", "",
             "| contender | start to first bind, s | start to last bind, s | CPU s to last bind | peak RSS, MiB | "
             "rounds complete |", "|---|---|---|---|---|---|"]
    for name in ("volcano-py", "volcano", "kube-scheduler"):
        m = med.get(name)
        if m:
            lines.append(f"| {NAMES[name]} | {_fmt(m.get('start_to_first_bind_s'))} | "
                         f"{_fmt(m.get('start_to_last_bind_s'))} | {_fmt(m.get('cpu_s'))} | "
                         f"{_fmt(m.get('peak_rss_mib'), 0)} | {m['complete_rounds']}/{m['rounds']} |")
    py = med.get("volcano-py", {})
    for name in ("volcano", "kube-scheduler"):
        if name in med and py:
            lines.append(f"\nvolcano-py / {NAMES[name]}, start to first bind: "
                         f"{_fmt(ratio(py.get('start_to_first_bind_s'), med[name].get('start_to_first_bind_s')))}; "
                         f"peak RSS: {_fmt(ratio(py.get('peak_rss_mib'), med[name].get('peak_rss_mib')))}")
    return lines


def check(size: dict, what: str, value: float | None, bound: float, at_least: bool) -> dict:
    met = None if value is None else (value >= bound if at_least else value <= bound)
    return {"size": f"{size['nodes']:,} x {size['pods']:,}", "kind": size["kind"], "what": what, "value": value,
            "bound": bound, "at_least": at_least, "met": met}


def target_checks(report: dict) -> list[dict]:
    """Issue 20's targets, each the ratio from this run's medians, its bound and whether it is met (None: one
    side of the ratio was not measured)."""
    out = []
    for size in report["sizes"]:
        med = size["median"]
        py, vc, ceil = med.get("volcano-py", {}), med.get("volcano", {}), med.get("ceiling", {})
        if size["kind"] == "tp":
            out.append(check(size, "volcano-py binds/s / ceiling", ratio(py.get("binds_per_s"),
                                                                          ceil.get("binds_per_s")), 0.9, True))
            if size["pods"] >= 10000:
                out.append(check(size, "volcano-py binds/s / Volcano", ratio(py.get("binds_per_s"),
                                                                              vc.get("binds_per_s")), 2.0, True))
            for key, label in (("cpu_s_per_1000_binds", "whole run"), ("cpu_window_s_per_1000_binds", "bind window")):
                out.append(check(size, f"scheduler CPU per bind / Volcano ({label})",
                                 ratio(py.get(key), vc.get(key)), 0.3, False))
            partial = [m["partial_gangs_max"] for m in (py, vc) if m.get("partial_gangs_max") is not None]
            out.append(check(size, "partial gangs", float(max(partial)) if partial else None, 0.0, False))
        else:
            out.append(check(size, "volcano-py start to first bind / Volcano",
                             ratio(py.get("start_to_first_bind_s"), vc.get("start_to_first_bind_s")), 0.7, False))
    return out


def targets(report: dict) -> list[str]:
    lines = []
    for c in target_checks(report):
        verdict = "not measured" if c["met"] is None else f"{c['value']:.2f}, {'met' if c['met'] else 'NOT met'}"
        kind = " (restart)" if c["kind"] == "restart" else ""
        lines.append(f"- {c['size']}{kind}: {c['what']} {'>=' if c['at_least'] else '<='} {c['bound']:g}: "
                     f"**{verdict}**")
    return lines


def markdown(report: dict) -> str:
    lines = [f"Run {report['date']}, commit {report['commit']}, {report['cpus']} CPUs, "
             f"{report['wall_s']:.0f} s in all.",
             f"Load before: `{report['uptime_before']}`; after: `{report.get('uptime_after', '?')}`.",
             f"Command: `{report['command']}`.", ""]
    for size in report["sizes"]:
        lines += (throughput_table(size) if size["kind"] == "tp" else restart_table(size)) + [""]
    lines += ["Targets (issue 20), as ratios of this run's medians:", "", *targets(report), ""]
    return "\n".join(lines)
