"""Medians, ratios and the markdown table of `make bench-peers` (bench/bench_peers.py's JSON)."""

from __future__ import annotations

import statistics
from collections import defaultdict

NAMES = {"volcano-py": "volcano-py", "volcano": "Volcano vc-scheduler", "kube-scheduler": "kube-scheduler",
         "ceiling": "Go bind loop (ceiling)",
         "limit": "Go bind loop + Scheduled events (each pod, each PodGroup) + each PodGroup Running (limit)"}
ORDER = ("volcano-py", "volcano", "kube-scheduler", "volcano-py-off", "ceiling", "limit")
# Restart to first bind: at most half of Volcano's, at 5,000 x 50,000 and 10,000 x 100,000 (the to-the-limits goal).
RESTART_TARGET = 0.5


def ordered(med: dict[str, dict]) -> list[tuple[str, dict]]:
    """The contenders of a size that have medians, with them, in table order; volcano-py's variants
    (volcano-py-off:SWITCHES) before the ceiling."""
    return [(name, med[name]) for name in sorted(med, key=lambda name: (ORDER.index(name.partition(":")[0]), name))
            if med[name]]
SERVER_KEYS = tuple(f"{w}.{part}" for w in ("server_ms_per_bind", "server_window_ms_per_bind")
                    for part in ("kube-apiserver", "etcd", "total"))
MEDIAN_KEYS = ("binds_per_s", "start_to_first_bind_s", "start_to_last_bind_s", "cpu_s", "cpu_s_per_1000_binds",
               "cpu_window_s_per_1000_binds", "peak_rss_mib", "server_cpu_s_per_1000_binds", *SERVER_KEYS,
               "total_ms_per_bind", "total_window_ms_per_bind", "window_cores", "settled_after_last_bind_s")


def value(run: dict, key: str) -> float | None:
    """`key` of one round; "a.b" reads run["a"]["b"]."""
    v: object = run
    for part in key.split("."):
        v = v.get(part) if isinstance(v, dict) else None
    return v if isinstance(v, (int, float)) else None


def summarise(runs: list[dict]) -> dict[str, dict]:
    """Per contender: the median of each measure over its rounds, the worst partial-gang count, the rounds'
    count and how many of them bound every pod."""
    by: dict[str, list[dict]] = defaultdict(list)
    for r in runs:
        by[r["contender"]].append(r)  # volcano-py-off:SWITCHES, one entry per set of switches
    out: dict[str, dict] = {}
    for name, rs in by.items():
        m: dict = {"rounds": len(rs), "complete_rounds": sum(1 for r in rs if r.get("complete"))}
        for key in MEDIAN_KEYS:
            values = [v for v in (value(r, key) for r in rs) if v is not None]
            if values:
                m[key] = round(statistics.median(values), 3)
        partial = [r["partial_gangs"] for r in rs if r.get("partial_gangs") is not None]
        if partial:
            m["partial_gangs_max"] = max(partial)
        for key in ("scheduled_events", "podgroups_running"):  # the worst round
            counts = [r[key] for r in rs if r.get(key) is not None]
            if counts:
                m[f"{key}_min"] = min(counts)
                m["bound_min"] = min(r["bound"] for r in rs)
        if any(r.get("podgroups") for r in rs):
            m["podgroups"] = max(r.get("podgroups") or 0 for r in rs)
        sent: dict[str, int] = defaultdict(int)
        for r in rs:
            for k, v in (r.get("requests") or {}).items():
                sent[k] += v
        bound = sum(r.get("bound") or 0 for r in rs)
        if sent and bound:
            m["requests_per_1000_binds"] = {k: round(1000 * v / bound, 1) for k, v in
                                            sorted(sent.items(), key=lambda kv: -kv[1]) if 1000 * v / bound >= 1}
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
    for name, m in ordered(med):
        rate = _fmt(m.get("binds_per_s"))
        if "bindloop_own_per_s" in m:
            rate += f" (own clock {_fmt(m['bindloop_own_per_s'])})"
        lines.append(f"| {label(name, m)} | {rate} | {_fmt(m.get('start_to_first_bind_s'))} | "
                     f"{_fmt(m.get('start_to_last_bind_s'))} | {_fmt(m.get('cpu_s_per_1000_binds'), 3)} | "
                     f"{_fmt(m.get('cpu_window_s_per_1000_binds'), 3)} | {_fmt(m.get('peak_rss_mib'), 0)} | "
                     f"{_fmt(m.get('partial_gangs_max'))} | {_fmt(m.get('server_cpu_s_per_1000_binds'), 3)} | "
                     f"{m['complete_rounds']}/{m['rounds']} |")
    py = med.get("volcano-py", {})
    lines += ["", "| volcano-py as a ratio to | binds/s | start to last bind | CPU per bind (whole run) | "
              "CPU per bind (bind window) | peak RSS |", "|---|---|---|---|---|---|"]
    for name in ("volcano", "kube-scheduler", "ceiling"):  # not the limit: its rate is not a yardstick
        m = med.get(name)
        if not m or not py:
            continue
        lines.append(f"| {NAMES[name]} | {_fmt(ratio(py.get('binds_per_s'), m.get('binds_per_s')))} | "
                     f"{_fmt(ratio(py.get('start_to_last_bind_s'), m.get('start_to_last_bind_s')))} | "
                     f"{_fmt(ratio(py.get('cpu_s_per_1000_binds'), m.get('cpu_s_per_1000_binds')))} | "
                     f"{_fmt(ratio(py.get('cpu_window_s_per_1000_binds'), m.get('cpu_window_s_per_1000_binds')))} | "
                     f"{_fmt(ratio(py.get('peak_rss_mib'), m.get('peak_rss_mib')))} |")
    return lines


def label(name: str, m: dict) -> str:
    if name.startswith("volcano-py-off:"):
        return f"volcano-py, off: {name.partition(':')[2]} (information only)"
    return NAMES[name]


def server_table(size: dict) -> list[str]:
    """The apiserver's and etcd's CPU per bind, each contender against the ceiling's, and what users see of
    the binds (every bound pod's `Scheduled` event, every PodGroup Running)."""
    med = size["median"]
    ceil, lim = med.get("ceiling", {}), med.get("limit", {})
    lines = [f"**Server CPU per bind, {size['nodes']:,} nodes x {size['pods']:,} pods** (ms of CPU per bind, "
             "medians; whole run: from the start to the apiserver and etcd quiet after the last bind; bind "
             "window: first to last bind; total: the contender's own CPU + the server's, whole run; limit: the bind "
             "loop with the writes users rely on)", "",
             "| contender | apiserver | etcd | server | x ceiling | x limit | apiserver, bind window | "
             "etcd, bind window | server, bind window | x ceiling | total | x ceiling | cores in the bind window | "
             "bound pods with a Scheduled event (worst round) | PodGroups Running (worst round) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, m in ordered(med):
        ev = f"{m['scheduled_events_min']:,}/{m['bound_min']:,}" if "scheduled_events_min" in m else "-"
        pg = f"{m['podgroups_running_min']:,}/{m['podgroups']:,}" if "podgroups_running_min" in m else "-"
        w, b = "server_ms_per_bind", "server_window_ms_per_bind"
        lines.append(
            f"| {label(name, m)} | {_fmt(m.get(f'{w}.kube-apiserver'), 3)} | {_fmt(m.get(f'{w}.etcd'), 3)} | "
            f"{_fmt(m.get(f'{w}.total'), 3)} | {_fmt(ratio(m.get(f'{w}.total'), ceil.get(f'{w}.total')))} | "
            f"{_fmt(ratio(m.get(f'{w}.total'), lim.get(f'{w}.total')))} | "
            f"{_fmt(m.get(f'{b}.kube-apiserver'), 3)} | {_fmt(m.get(f'{b}.etcd'), 3)} | "
            f"{_fmt(m.get(f'{b}.total'), 3)} | {_fmt(ratio(m.get(f'{b}.total'), ceil.get(f'{b}.total')))} | "
            f"{_fmt(m.get('total_ms_per_bind'), 3)} | "
            f"{_fmt(ratio(m.get('total_ms_per_bind'), ceil.get('total_ms_per_bind')))} | "
            f"{_fmt(m.get('window_cores'))} | {ev} | {pg} |")
    return lines


def requests_lines(size: dict) -> list[str]:
    """The API requests each contender's runs sent per 1,000 binds (apiserver_request_total; the bench's own
    reads of /metrics and of the namespace's pods are in every row)."""
    lines = [f"API requests per 1,000 binds, {size['nodes']:,} x {size['pods']:,} (verb, resource, code; all rounds):",
             ""]
    for name, m in ordered(size["median"]):
        if m.get("requests_per_1000_binds"):
            lines.append(f"- {label(name, m)}: " + ", ".join(f"{k} {v:g}" for k, v in
                                                             m["requests_per_1000_binds"].items()))
    return lines


def rounds_table(size: dict) -> list[str]:
    """Every round, in the order run: binds/s and server CPU per bind (the ceiling varies between rounds)."""
    lines = [f"**Every round, {size['nodes']:,} nodes x {size['pods']:,} pods** (server and total: ms of CPU per "
             "bind)", "", "| round | position | contender | binds/s | server, whole run | server, bind window | "
             "total, whole run | settled after the last bind, s |", "|---|---|---|---|---|---|---|---|"]
    for r in size["runs"]:
        lines.append(f"| {r['round']} | {r['position']} | {label(r['contender'], r)} | {_fmt(r.get('binds_per_s'))} | "
                     f"{_fmt(value(r, 'server_ms_per_bind.total'), 3)} | "
                     f"{_fmt(value(r, 'server_window_ms_per_bind.total'), 3)} | "
                     f"{_fmt(r.get('total_ms_per_bind'), 3)} | {_fmt(r.get('settled_after_last_bind_s'))} |")
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
        lim = med.get("limit", {})
        if size["kind"] == "tp":
            out.append(check(size, "volcano-py binds/s / ceiling", ratio(py.get("binds_per_s"),
                                                                          ceil.get("binds_per_s")), 0.95, True))
            for key, label_ in (("server_ms_per_bind.total", "whole run"),
                                ("server_window_ms_per_bind.total", "bind window")):
                out.append(check(size, f"volcano-py server CPU per bind / ceiling ({label_})",
                                 ratio(py.get(key), ceil.get(key)), 1.1, False))
            # the bound of the line above for a scheduler that keeps every pod's Scheduled event and writes each
            # gang's PodGroup Running, as the issue requires: the bind loop doing just those writes
            out.append(check(size, "volcano-py server CPU per bind / limit (whole run; the bind loop with "
                               "Volcano's Scheduled events and each PodGroup Running)",
                             ratio(py.get("server_ms_per_bind.total"), lim.get("server_ms_per_bind.total")), 1.1,
                             False))
            if (py.get("window_cores") or 0) > 1.9:  # the machine is the bound: the total per bind is the target
                out.append(check(size, "volcano-py total CPU per bind / ceiling (scheduler + server)",
                                 ratio(py.get("total_ms_per_bind"), ceil.get("total_ms_per_bind")), 1.05, False))
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
                             ratio(py.get("start_to_first_bind_s"), vc.get("start_to_first_bind_s")),
                             RESTART_TARGET, False))
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
        if size["kind"] == "tp":
            lines += [*throughput_table(size), "", *server_table(size), "", *requests_lines(size), "",
                      *rounds_table(size), ""]
        else:
            lines += [*restart_table(size), ""]
    lines += ["Targets, as ratios of this run's medians:", "", *targets(report), ""]
    return "\n".join(lines)
