"""`volcano-py simulate`: replay a workload (or the openb trace, or a cluster's dump) with one or more confs and
print, or write as a report, what happened. Kept out of cli.py so the scheduler's start does not import the
simulator, the CRD schemas or matplotlib."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from scheduler.conf_check import action_warnings
from scheduler.cycle import load_conf_or_default
from scheduler.durations import format_duration
from scheduler.framework.conf import SchedulerConf
from scheduler.sim.errors import InputError

if TYPE_CHECKING:
    from scheduler.report.progress import Progress
    from scheduler.sim.replay import Replay, Scheduler
    from scheduler.sim.workload import ClusterSpec, Workload


FIRST_LINE = 0.8  # seconds from the process's start: the first progress line of a long replay comes within 1 s


def simulate(args: argparse.Namespace) -> int:
    from scheduler.report.progress import Progress, process_age

    paths: list[str | None] = [args.conf, *(args.compare or ())]
    names = [path or "built-in default" for path in paths]
    titles = ["volcano-py (gang scheduling)" if len(names) == 1 else f"volcano-py with {name}" for name in names]
    reports = []
    if args.report:  # a folder that cannot be made is said before any work, not after the replays
        from scheduler.report.page import make_folder

        make_folder(Path(args.report))
    # One bar from the start to the end of the first replay: on a large input the first line comes within a
    # second of the process's start (the simulator's import, the inputs and the cluster build included).
    with Progress(f"simulate {titles[0]}", 1, "job", heartbeat=0.25, age=process_age(), delay=FIRST_LINE) as bar:
        bar.stage("loading the simulator")
        # The simulator is imported here, not at the top: the scheduler's start does not pay for it.
        from scheduler.sim.naive import per_pod_cycle
        from scheduler.sim.report import compare, render, to_json, totals

        if args.report:
            from scheduler.report.plots import require

            require()  # a missing matplotlib is said before the replays run, not after
        confs = [(name, load_conf_or_default(path)) for name, path in zip(names, paths, strict=True)]  # all, first
        bar.stage("reading the cluster and the workload")
        spec, workload = _inputs(args)
        for name, conf in confs:
            for warning in (*conf.skipped, *(w.render() for w in action_warnings(conf))):
                print(f"warning: {name}: {warning}", file=sys.stderr)
        for warning in (*spec.warnings, *workload.warnings):
            print(f"warning: {warning}", file=sys.stderr)
        reports.append((titles[0], _replay(titles[0], spec, workload, args, conf=confs[0][1], bar=bar)))
    for title, (_, conf) in zip(titles[1:], confs[1:], strict=True):
        reports.append((title, _replay(title, spec, workload, args, conf=conf)))
    if args.compare_per_pod:
        title = "per-pod baseline (no gangs, like kube-scheduler)"
        reports.append((title, _replay(title, spec, workload, args, scheduler=per_pod_cycle)))
    if args.report:
        _write_report(args, reports)
    if args.json:
        print(json.dumps({title: to_json(r) for title, r in reports}, indent=2))
        return 0
    text = "\n\n".join(render(r, title) for title, r in reports)
    if len(reports) > 1:
        text += "\n\n" + compare([(title, totals(r)) for title, r in reports])
    print(text)
    return 1 if any(totals(r).partial_gang_cycles for _, r in reports[: len(confs)]) else 0


def _inputs(args: argparse.Namespace) -> tuple[ClusterSpec, Workload]:
    """CLUSTER and WORKLOAD, or one day of the openb trace (whose end becomes the horizon, unless one is given)."""
    from scheduler.sim.workload import load_cluster, load_workload

    if args.from_openb:
        if args.cluster or args.workload:
            raise InputError("simulate", "--from-openb", "replaces CLUSTER and WORKLOAD: give one or the other")
        from scheduler.sim.openb import load_openb

        trace = load_openb(Path(args.from_openb[0]), Path(args.from_openb[1]), day=args.openb_day)
        args.horizon = trace.horizon if args.horizon is None else args.horizon
        args.cluster, args.workload = args.from_openb[0], f"{args.from_openb[1]} (day {trace.start / 86400:g})"
        print(f"openb: day {trace.start / 86400:g}: {len(trace.cluster.nodes)} nodes, {len(trace.workload.items)} "
              f"pods ({trace.alive_at_start} already running at its start)", file=sys.stderr)
        return trace.cluster, trace.workload
    if args.from_cluster:
        if args.cluster or args.workload:
            raise InputError("simulate", "--from-cluster", "replaces CLUSTER and WORKLOAD: give one or the other")
        from scheduler.sim.from_cluster import load_cluster_dump

        spec, workload, taken = load_cluster_dump(args.from_cluster)
        args.cluster = args.workload = args.from_cluster
        print(f"from-cluster: {len(spec.nodes)} nodes, {len(workload.items)} jobs, {len(workload.queues)} queues; "
              f"the dump was taken {format_duration(round(taken))} after its first arrival", file=sys.stderr)
        return spec, workload
    if args.openb_day is not None:
        raise InputError("simulate", "--openb-day", "needs --from-openb NODES.csv PODS.csv")
    if not args.cluster or not args.workload:
        raise InputError("simulate", "", "expected CLUSTER and WORKLOAD files (or --from-openb NODES.csv PODS.csv, "
                         "or --from-cluster FILE)")
    return load_cluster(args.cluster), load_workload(args.workload)


def _replay(title: str, spec: ClusterSpec, workload: Workload, args: argparse.Namespace, *,
            conf: SchedulerConf | None = None, scheduler: Scheduler | None = None,
            bar: Progress | None = None) -> Replay:
    """One replay, with a progress bar on a terminal (plain lines every 10 s when stderr is not one): in jobs
    finished, or, when the replay stops at a horizon (a trace's window), in simulated seconds of it. `bar`: one
    already shown (the first replay's, opened before the inputs were read)."""
    from scheduler.report.progress import Progress, duration, process_age
    from scheduler.sim.replay import replay

    by_time = args.horizon is not None
    total, unit = (int(args.horizon), "simulated second") if by_time else (len(workload.items), "job")
    if bar is None:
        with Progress(f"simulate {title}", total, unit, heartbeat=0.25, age=process_age(), delay=FIRST_LINE) as own:
            return _replay(title, spec, workload, args, conf=conf, scheduler=scheduler, bar=own)
    bar.retotal(total, unit)

    def tick(now: float, finished: int, jobs: int) -> None:
        if by_time:
            bar.update(min(total, int(now)), f"{finished}/{jobs} jobs finished")
        else:
            bar.update(finished, f"simulated {duration(now)}")

    return replay(spec, workload, conf, scheduler=scheduler, period=args.period, horizon=args.horizon,
                  progress=tick, stage=bar.stage)


def _write_report(args: argparse.Namespace, reports: list[tuple[str, Replay]]) -> None:
    from scheduler.report.page import write
    from scheduler.report.series import Labelled

    runs = [Labelled(title, r) for title, r in reports]
    written = write(Path(args.report), runs, subtitle=f"cluster {args.cluster}, workload {args.workload}",
                    confs=[args.conf or "built-in default", *(args.compare or ())], command=args.argv)
    print(f"report: {written.page} ({len(written.plots)} plots, {len(written.tables)} CSV files beside it; "
          f"{format_duration(round(written.seconds, 1))})", file=sys.stderr)
