"""`make bench-shards`' figures and their Markdown (bench/bench_shards.py): per phase, the virtual decisions/s
with wall-clock and real CPU beside them, per replica the cycle p95, RSS and CPU, and the checks."""

from __future__ import annotations

import re
from typing import Any

from shards_active import kill_line


def p95_from_histogram(text: str, metric: str) -> float | None:
    """The 95th percentile's bucket bound (le) of a Prometheus histogram `metric` in the exposition `text`
    (the smallest bound whose cumulative count reaches 95% of the total); None without observations."""
    buckets: list[tuple[float, float]] = []
    count = 0.0
    for line in text.splitlines():
        if line.startswith(f"{metric}_bucket{{"):
            labels, _, value = line.rpartition(" ")
            le = labels.split('le="', 1)[1].split('"', 1)[0]
            buckets.append((float("inf") if le == "+Inf" else float(le), float(value)))
        elif line.startswith(f"{metric}_count"):
            count = float(line.rpartition(" ")[2])
    if count <= 0:
        return None
    for le, cumulative in sorted(buckets):
        if cumulative >= 0.95 * count:
            return le
    return None


def sample_value(text: str, name: str) -> float | None:
    """The value of the first sample named `name` (no labels) in the exposition `text`; None if absent."""
    prefix = name + " "
    return next((float(line[len(prefix):]) for line in text.splitlines() if line.startswith(prefix)), None)


def window_rate(stats: dict[str, Any]) -> float | None:
    """Decisions per virtual second from the first accepted bind to the last (the start-up lists left out): the
    binds after the first, over the span from the earliest replica clock at its first bind to the latest at its
    last (or the server's charge over its cores, if later)."""
    reps = [r for r in stats["replicas"].values() if r.get("first_bind") and r.get("last_bind")]
    if not reps or stats["binds"] < 2:
        return None
    start = min(r["first_bind"]["virtual_s"] for r in reps)
    end = max(max(r["last_bind"]["virtual_s"] for r in reps),
              max(r["last_bind"]["server_total_s"] for r in reps) / stats["cores"])
    return (stats["binds"] - 1) / (end - start) if end > start else None


def phase_row(phase: dict[str, Any]) -> str:
    s, c, w = phase["stats"], phase["check"], phase["wall"]
    window = s.get("decisions_per_virtual_s_from_arrival") or window_rate(s)
    return (f"| {phase['replicas']} | {phase['shape']['nodes']:,} | {phase['shape']['running']:,} | "
            f"{phase['made']['pending']:,} | {s['binds']:,} | **{s['decisions_per_virtual_s']:,.0f}** | "
            f"{'-' if window is None else f'{window:,.0f}'} | "
            f"{s['virtual_s']:.2f} ({s['bound_by']}) | {w['to_last_bind_s']:.1f} | "
            f"{s['binds'] / w['to_last_bind_s'] if w['to_last_bind_s'] else 0:,.0f} | "
            f"{phase['cpu']['replicas_s']:.1f} + {phase['cpu']['server_s']:.1f} | {s['server_load']:.2f} | "
            f"{c['over_committed_nodes']} | {c['pods_bound_twice']} | {c['partial_gangs']} |")


def replica_rows(phase: dict[str, Any]) -> list[str]:
    rows = []
    for r in phase["per_replica"]:
        p95, cpu = (_bucket(r.get(k)) for k in ("cycle_p95_ms", "cycle_cpu_p95_ms"))
        name = f"{r['name']} (SIGKILLed; CPU, RSS at the kill)" if r.get("killed") else r["name"]
        binding = (f"{r['binding_cycles']}: {r['binding_cycle_cpu_p95_s']:.2f} / {r['binding_cycle_cpu_max_s']:.2f}"
                   if r.get("binding_cycles") else "-")
        rows.append(f"| {phase['replicas']} | {name} | {r['binds']:,} | {r['virtual_last_bind_s']:.2f} | "
                    f"{r['decisions_per_virtual_s']:,.0f} | {r['cpu_s']:.1f} | {r['server_charged_s']:.2f} | "
                    f"{p95} | {cpu} | {r['cycles']} | {binding} | {r['rss_peak_mib']:,.0f} |")
    return rows


_CYCLE_CPU = re.compile(r"cycle \d+: .*; bound (\d+) pods .*, cpu (\d+\.\d+)s\)")


def binding_cycles(log: str) -> dict[str, Any]:
    """The cycles that bound pods, from a replica's log lines (scheduler/cache/runner.py): how many, and the
    process CPU of each as p95 (nearest rank) and max, in seconds: exact, where the histogram gives a bucket."""
    cpus = sorted(float(m.group(2)) for m in _CYCLE_CPU.finditer(log) if int(m.group(1)))
    if not cpus:
        return {"binding_cycles": 0}
    return {"binding_cycles": len(cpus), "binding_cycle_cpu_p95_s": cpus[max(0, -(-95 * len(cpus) // 100) - 1)],
            "binding_cycle_cpu_max_s": cpus[-1]}


def _bucket(p95: float | None) -> str:
    """A p95 read from a histogram: the upper bound of its bucket."""
    return "-" if p95 is None else "> 5,000 (the last bucket)" if p95 == float("inf") else f"<= {p95:,.0f}"


def markdown(run: dict[str, Any]) -> str:
    lines = [f"Run {run['started']}, commit {run['commit']}, {run['cpus']} CPUs, {run['seconds']:.0f} s in all.",
             f"Load before: `{run['load_before']}`; after: `{run['load_after']}`.",
             f"Command: `{run['command']}`.",
             f"Simulated apiserver: {run['cores']} cores; costs from `{run['calibration']}` "
             f"(source: {run['calibration_source']}).", "",
             "| replicas | nodes | running pods | pending pods | binds accepted | decisions/s (virtual, start to "
             "last bind) | decisions/s (virtual, from the gangs' arrival, else first to last bind) | "
             "virtual s (bound by) |"
             " wall s to last bind | binds/s (wall) | real CPU s (replicas + server) | "
             "server load (virtual) | over-committed nodes | pods bound twice | partial gangs |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    lines += [phase_row(p) for p in run["phases"]]
    lines += ["", "Per replica (virtual: the replica's CPU + its requests' server cost / cores, at its last bind; "
              "cycle p95: the e2e scheduling latency histogram's bucket, wall-clock, so inflated when replicas "
              "share the machine's cores; cycle CPU p95: `volcano_py_cycle_cpu_milliseconds`' bucket, the "
              "process's CPU over a cycle, all threads, i.e. the cycle's length in the replica's virtual time but "
              "for its requests' server cost; cycles that bound pods: their count, and the process CPU of each, "
              "p95 / max, exact, from the replica's log):", "",
              "| replicas | replica | binds | virtual s at last bind | decisions/s (virtual) | CPU s | "
              "server s charged | cycle p95, ms (wall) | cycle CPU p95, ms | cycles | cycles that bound: CPU p95 / "
              "max, s | peak RSS, MiB |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for p in run["phases"]:
        lines += replica_rows(p)
    lines += ["", "Requests per replica (first replica of each phase; kind and status: count):", ""]
    for p in run["phases"]:
        if p["per_replica"]:
            r = p["per_replica"][0]
            lines.append(f"- {p['replicas']} replicas, {r['name']}: " + ", ".join(
                f"{k} {v:,}" for k, v in list(r["requests"].items())[:10]))
    lines += ["", "PodGroups of gangs bound whole whose status.phase is not Running at the end (information; "
              "each replica writes the status of every PodGroup, its own gangs' or not): " + "; ".join(
                  f"{p['replicas']} replicas: {p['check'].get('bound_gangs_not_running', '-')} of "
                  f"{p['check'].get('gangs_bound', '-')}" for p in run["phases"])]
    lines += ["", "Phases ended: " + "; ".join(
        f"{p['replicas']} replicas: {p.get('stopped', '?')}, the processes' RSS summed peaked at "
        f"{p.get('peak_rss_sum_mib', 0):,} MiB (sampled each second)" for p in run["phases"])]
    active = [p for p in run["phases"] if p.get("mode") == "active"]
    if active:
        def holders(phase: dict[str, Any]) -> str:
            leases = sorted((k, v) for k, v in phase["shards_at_end"]["leases"].items() if "-shard-" in k)
            return ", ".join(f"shard {k.rsplit('-', 1)[1]} {v or '(free)'}" for k, v in leases) or "none"

        lines += ["", "Mode: volcano-py's N active replicas (`--active-shards N`, each its own "
                  "--leader-elect-identity, one scheduler name; the one-replica phase is the plain scheduler on the "
                  "same cluster). Shards' Lease holders at the end: " + "; ".join(
                      f"{p['replicas']} replicas: {holders(p)}" for p in active)]
        lines += [kill_line(p["kill"]) for p in active if p.get("kill")]
    for p in run["phases"]:
        if p.get("bind_cap"):
            c = p["bind_cap"]
            lines += ["", f"Bind cap at {p['replicas']} replicas: the simulated apiserver took at most {c['cap']:,.0f} "
                      f"binds per wall second (a bind beyond waits its turn); the replicas bound "
                      f"{c['binds_per_wall_s']:,.1f} per wall second from the first bind to the last, "
                      f"{100 * c['share_of_cap']:.1f}% of the cap "
                      f"(target 95%: {'met' if c['met'] else 'NOT met'})"]
        if p.get("moves"):
            lines += ["", f"Nodes moved between shards at {p['replicas']} replicas (as Volcano's sharding controller "
                      f"would, binds in flight): {p['moves']['summary']}"]
    openb = [p for p in run["phases"] if p.get("gpus")]
    if openb:
        one = next((p["gpus"]["allocated"] for p in openb if p["replicas"] == 1), None)
        lines += ["", f"openb ({openb[0]['made'].get('openb')}, seed {openb[0]['made'].get('seed')}, pods drawn to "
                  f"130% of {openb[0]['gpus']['gpus']:,.0f} GPUs): GPUs allocated " + "; ".join(
                      f"{p['replicas']} replicas {p['gpus']['allocated']:,.1f} ({100 * p['gpus']['share']:.2f}%)"
                      + (f", {p['gpus']['allocated'] / one:.4f} of one replica's" if one and p["replicas"] > 1
                         else "") for p in openb)]
    lines += queue_lines(run["phases"])
    lines += ["", "Longest watch lag per replica, pods (seconds from a write to its event leaving the server once the "
              "replica's socket drained; a lower bound on how far behind it read): " + "; ".join(
                  f"{p['replicas']} replicas: " + ", ".join(
                      f"{r['name']} {r.get('watch_lag_max_s', {}).get('pods', 0):.1f}" for r in p["per_replica"])
                  for p in run["phases"])]
    lines += ["", "Server process: " + "; ".join(
        f"{p['replicas']} replicas: cluster generated in {p['server']['load_s']:.1f} s, "
        f"peak RSS {p['server']['rss_peak_mib']:,.0f} MiB" for p in run["phases"])]
    return "\n".join(lines) + "\n"


QUEUE_TOLERANCE = 0.02  # issue 40: each queue's allocation within 2% of the single-replica result


def queue_shares(phase: dict[str, Any]) -> dict[str, float]:
    """Each queue's share of the gang pods' CPUs bound at the end of a phase (`--queues`: q0, q1, ...)."""
    by = {q: v for q, v in (phase["check"].get("bound_cpu_by_queue") or {}).items() if q.startswith("q")}
    total = sum(by.values())
    return {q: v / total for q, v in sorted(by.items())} if total else {}


def queue_comparison(phases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per queue, its allocation (bound CPUs) with N replicas against one replica's in the same run: the share of
    the bound total each holds, and the allocation's relative difference (`met`: within QUEUE_TOLERANCE)."""
    one = next((p for p in phases if p["replicas"] == 1), None)
    if one is None:
        return []
    base = one["check"].get("bound_cpu_by_queue") or {}
    out = []
    for p in phases:
        if p["replicas"] == 1:
            continue
        got, shares, base_shares = p["check"].get("bound_cpu_by_queue") or {}, queue_shares(p), queue_shares(one)
        for q in sorted(k for k in base if k.startswith("q")):
            diff = (got.get(q, 0.0) - base[q]) / base[q] if base[q] else None
            out.append({"replicas": p["replicas"], "queue": q, "one_cpus": base[q], "cpus": got.get(q, 0.0),
                        "one_share": base_shares.get(q), "share": shares.get(q), "difference": diff,
                        "met": diff is not None and abs(diff) <= QUEUE_TOLERANCE})
    return out


def window_comparison(phases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """With `--turnover`: per window (the allocation read before each turnover step, the k-th of one phase against
    the k-th of the other) and per queue, N replicas' allocation against one replica's."""
    one = next((p for p in phases if p["replicas"] == 1 and p.get("turnover")), None)
    if one is None:
        return []
    out = []
    for p in phases:
        if p["replicas"] == 1 or not p.get("turnover"):
            continue
        for k, (a, b) in enumerate(zip(one["turnover"]["windows"], p["turnover"]["windows"], strict=False)):
            for q in sorted(x for x in a["allocation"] if x.startswith("q")):
                base, got = a["allocation"][q], b["allocation"].get(q, 0.0)
                diff = (got - base) / base if base else None
                out.append({"replicas": p["replicas"], "window": k + 1, "at_s": (a["at_s"], b["at_s"]), "queue": q,
                            "one_cpus": base, "cpus": got, "difference": diff,
                            "met": diff is not None and abs(diff) <= QUEUE_TOLERANCE})
    return out


def queue_lines(phases: list[dict[str, Any]]) -> list[str]:
    rows = queue_comparison(phases)
    if not rows:
        return window_lines(phases)
    lines = ["", "Queues (`--queues`): each queue's gang pods' CPUs bound at the end, N replicas against one "
             f"(target: within {100 * QUEUE_TOLERANCE:g}% of one replica's):", "",
             "| replicas | queue | one replica: CPUs (share) | N replicas: CPUs (share) | difference | within 2% |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        diff = "-" if r["difference"] is None else f"{100 * r['difference']:+.2f}%"
        lines.append(f"| {r['replicas']} | {r['queue']} | {r['one_cpus']:,.0f} ({100 * (r['one_share'] or 0):.2f}%) "
                     f"| {r['cpus']:,.0f} ({100 * (r['share'] or 0):.2f}%) | {diff} | "
                     f"{'met' if r['met'] else '**NOT met**'} |")
    return lines + window_lines(phases)


def window_lines(phases: list[dict[str, Any]]) -> list[str]:
    rows = window_comparison(phases)
    if not rows:
        return []
    queues = sorted({r["queue"] for r in rows})
    lines = ["", "Queues window by window (`--turnover`: each window ends as the next turnover step begins; CPUs "
             "bound per queue, one replica / N replicas, and the difference; target: every window within "
             f"{100 * QUEUE_TOLERANCE:g}%):", "",
             "| replicas | window | at, s (one / N) | " + " | ".join(queues) + " | all within 2% |",
             "|---|---|---|" + "---|" * len(queues) + "---|"]
    keyed = {(r["replicas"], r["window"], r["queue"]): r for r in rows}
    for replicas, window in sorted({(r["replicas"], r["window"]) for r in rows}):
        cells, ok = [], True
        for q in queues:
            r = keyed.get((replicas, window, q))
            if r is None:
                cells.append("-")
                continue
            ok = ok and r["met"]
            diff = "-" if r["difference"] is None else f"{100 * r['difference']:+.2f}%"
            cells.append(f"{r['one_cpus']:,.0f} / {r['cpus']:,.0f} ({diff})")
        at = next(r["at_s"] for r in rows if r["replicas"] == replicas and r["window"] == window)
        lines.append(f"| {replicas} | {window} | {at[0]:g} / {at[1]:g} | " + " | ".join(cells)
                     + f" | {'met' if ok else '**NOT met**'} |")
    met = sum(1 for r in rows if r["met"])
    lines += ["", f"Windows x queues within {100 * QUEUE_TOLERANCE:g}%: {met} of {len(rows)}; largest difference "
              + ", ".join(f"{q} {100 * max(abs(r['difference'] or 0) for r in rows if r['queue'] == q):.2f}%"
                          for q in queues) + "."]
    return lines
