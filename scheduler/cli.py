"""`volcano-py`: the command line (simulate, conf check; the scheduler and controllers come later).

User errors (a bad file, a bad field) print one line naming the file and field and exit 2; never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from scheduler.api.resources import QuantityError
from scheduler.cycle import builtin_default_conf, load_conf
from scheduler.framework.conf import ConfError, SchedulerConf, describe_conf
from scheduler.sim.naive import per_pod_cycle
from scheduler.sim.replay import replay
from scheduler.sim.report import render, totals
from scheduler.sim.workload import InputError, load_cluster, load_workload

USER_ERRORS = (InputError, ConfError, QuantityError)


def _conf(path: str | None) -> SchedulerConf:
    return load_conf(path) if path else builtin_default_conf()


def cmd_simulate(args: argparse.Namespace) -> int:
    conf = _conf(args.conf)
    spec = load_cluster(args.cluster)
    workload = load_workload(args.workload)
    for warning in conf.skipped:
        print(f"warning: {warning}", file=sys.stderr)
    outcome = replay(spec, workload, conf, period=args.period, horizon=args.horizon)
    reports = [("volcano-py (gang scheduling)", outcome)]
    if args.compare_per_pod:
        baseline = replay(spec, workload, scheduler=per_pod_cycle, period=args.period, horizon=args.horizon)
        reports.append(("per-pod baseline (no gangs, like kube-scheduler)", baseline))
    if args.json:
        print(json.dumps({title: totals(r).__repr__() for title, r in reports}, indent=2))
        return 0
    print("\n\n".join(render(r, title) for title, r in reports))
    return 1 if totals(outcome).partial_gang_cycles else 0


def cmd_conf_check(args: argparse.Namespace) -> int:
    conf = _conf(args.file)
    print(describe_conf(conf))
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="volcano-py", description="A gang-scheduling batch scheduler for Kubernetes.")
    sub = p.add_subparsers(dest="command", required=True)
    sim = sub.add_parser("simulate", help="replay a workload on an in-memory cluster")
    sim.add_argument("cluster", help="cluster YAML (nodes, node pools, queues, priorityClasses)")
    sim.add_argument("workload", help="workload YAML (Volcano Jobs / PodGroups with arrival and duration)")
    sim.add_argument("--conf", help="volcano-scheduler.conf to use (default: the built-in default)")
    sim.add_argument("--period", type=float, default=1.0, help="schedule period in seconds (default 1)")
    sim.add_argument("--horizon", type=float, default=None, help="stop the replay at this simulated time")
    sim.add_argument("--compare-per-pod", action="store_true", help="also replay with a per-pod scheduler")
    sim.add_argument("--json", action="store_true", help="print the totals as JSON")
    sim.set_defaults(func=cmd_simulate)
    conf = sub.add_parser("conf", help="scheduler configuration tools")
    conf_sub = conf.add_subparsers(dest="conf_command", required=True)
    check = conf_sub.add_parser("check", help="print what a volcano-scheduler.conf would use, skip and reject")
    check.add_argument("file", nargs="?", help="the conf file (default: show the built-in default)")
    check.set_defaults(func=cmd_conf_check)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return int(args.func(args))
    except USER_ERRORS as exc:
        print(f"volcano-py: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
