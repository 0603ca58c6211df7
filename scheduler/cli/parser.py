"""The argparse tree of `volcano-py`'s commands (simulate, conf check, the day-two commands, completion), and
the two commands it runs itself. `scheduler`, `controllers` and `webhook` are listed here for `--help` and
completion; their Go-style flags are parsed by scheduler/flags (`cli.run_component`).

Every parser says what its command is for (`description`, shown by `--help`); one without its own takes its
one-line help, as a sentence (`describe`).
"""

from __future__ import annotations

import argparse
import sys

from scheduler.cli.ctl.completion import SHELLS, script
from scheduler.cli.ctl.exits import OneLineParser
from scheduler.durations import Seconds
from scheduler.flags import CONTROLLERS, SCHEDULER, WEBHOOK

EXIT_WARNINGS = 1  # `conf check --strict` on a conf that loads with warnings (a conf that does not load: 2)
BENCHES = {"packing": "the FGD paper's GPU packing benchmark on the openb trace"}
SIMULATE = ("Replay a workload (Volcano Jobs, PodGroups, Deployments, CronJobs, JobFlows with arrival times and "
            "durations) on an in-memory cluster with volcano-py's scheduler, and print when each job waited, why, "
            "and when it ran; or write an HTML report (--report). No cluster is needed. Compare confs with "
            "--compare, and against a per-pod scheduler with --compare-per-pod.")


def cmd_simulate(args: argparse.Namespace) -> int:
    from scheduler.cli.simulate import simulate  # the simulator, imported only for this command

    return simulate(args)


def cmd_conf_check(args: argparse.Namespace) -> int:
    from scheduler.conf_check import check, render_json, render_text

    checked = check(args.file)
    if args.output == "json":
        sys.stdout.write(render_json(checked))
    else:
        print(render_text(checked))  # a blank line after, as before
    if args.strict and checked.warnings:
        print(f"volcano-py: conf check --strict: {len(checked.warnings)} warning(s)", file=sys.stderr)
        return EXIT_WARNINGS
    return 0



def parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="volcano-py", description="A gang-scheduling batch scheduler for Kubernetes, "
                      "compatible with Volcano's Job, Queue and PodGroup. On a cluster it runs as `scheduler`, "
                      "`controllers` and `webhook`; `simulate` replays a workload without a cluster; `explain` "
                      "says why a job waits; `job`, `queue`, `pod`, `jobflow` and `jobtemplate` are vcctl's "
                      "day-two commands with kubectl's flags. `volcano-py COMMAND --help` says more.")
    sub = p.add_subparsers(dest="command", required=True)
    # Listed for `volcano-py --help`; their Go-style flags are parsed by run_component (scheduler/flags).
    sub.add_parser("scheduler", add_help=False, help="run the scheduler against a Kubernetes cluster "
                   "(takes Volcano's vc-scheduler flags too)", description=SCHEDULER.description)
    sub.add_parser("controllers", add_help=False, help="run the Job, Queue and Command controllers (kopf; takes "
                   "Volcano's vc-controller-manager flags too)", description=CONTROLLERS.description)
    sub.add_parser("webhook", add_help=False, help="serve the admission webhook (takes Volcano's "
                   "vc-webhook-manager flags too)", description=WEBHOOK.description)
    sim = sub.add_parser("simulate", help="replay a workload on an in-memory cluster", description=SIMULATE)
    sim.add_argument("cluster", nargs="?", help="cluster YAML (nodes, node pools, queues, priorityClasses)")
    sim.add_argument("workload", nargs="?", help="workload YAML (Volcano Jobs / PodGroups with arrival and duration)")
    sim.add_argument("--from-openb", nargs=2, metavar=("NODES.csv", "PODS.csv"),
                     help="instead of CLUSTER and WORKLOAD: replay one day of the Alibaba openb trace")
    sim.add_argument("--openb-day", type=int, metavar="N", help="which day of the trace (default: its last whole day)")
    sim.add_argument("--from-cluster", metavar="FILE", help="instead of CLUSTER and WORKLOAD: replay what `kubectl get "
                     "nodes,pods,vcjob,podgroups,queues,priorityclasses -A -o json` printed")
    sim.add_argument("--conf", help="volcano-scheduler.conf to use (default: the built-in default)")
    sim.add_argument("--period", type=Seconds(0, inclusive=False), default=1.0, metavar="DURATION",
                     help="schedule period (a Go duration, 500ms or 1s, or seconds; default 1s)")
    sim.add_argument("--horizon", type=Seconds(0), default=None, metavar="DURATION",
                     help="stop the replay at this simulated time (a Go duration, 10m or 2h, or seconds)")
    sim.add_argument("--compare", action="append", metavar="CONF",
                     help="also replay with this volcano-scheduler.conf (or ConfigMap manifest) and compare; "
                     "may be given more than once")
    sim.add_argument("--compare-per-pod", action="store_true", help="also replay with a per-pod scheduler")
    sim.add_argument("--json", action="store_true", help="print the totals and every job (with the scheduler's "
                     "reasons as data) as JSON")
    sim.add_argument("--report", metavar="DIR", help="write an HTML report with plots, and CSVs, into DIR "
                     "(needs matplotlib: pip install 'volcano-py[report]')")
    sim.add_argument("--debug", action="store_true", help="show the traceback of an error")
    sim.set_defaults(func=cmd_simulate)
    conf = sub.add_parser("conf", help="scheduler configuration tools", description="Tools for "
                          "volcano-scheduler.conf files: `conf check FILE` shows what the scheduler would read.")
    conf_sub = conf.add_subparsers(dest="conf_command", required=True)
    check = conf_sub.add_parser("check", help="print what a volcano-scheduler.conf would use, skip and reject",
                                description="Read a volcano-scheduler.conf (or a ConfigMap manifest holding one) as "
                                "the scheduler would, and print the actions, the plugins of each tier with their "
                                "arguments, and every warning: keys and values the scheduler would ignore, action "
                                "arguments included. Exit 2 if the scheduler would refuse the file; with --strict, "
                                "exit 1 if it has warnings (for CI).")
    check.add_argument("file", nargs="?", help="the conf file (default: show the built-in default)")
    check.add_argument("--strict", action="store_true", help="exit 1 when there is any warning")
    check.add_argument("-o", "--output", choices=("text", "json"), default="text",
                       help="text (default) or json: the conf as read, and the warnings")
    check.add_argument("--debug", action="store_true", help="show the traceback of an error")
    check.set_defaults(func=cmd_conf_check)
    bench = sub.add_parser("bench", help="benchmarks (from a clone: they live in bench/, beside scheduler/)",
                           description="Run a benchmark of bench/ (a clone of volcano-py has them; an installed "
                           "package has none). `volcano-py bench NAME --help` shows its flags.")
    bench_sub = bench.add_subparsers(dest="bench_command", required=True)
    for name, text in BENCHES.items():  # listed for `volcano-py bench --help`; run_bench parses their flags
        bench_sub.add_parser(name, add_help=False, help=text)
    from scheduler.cli.ctl.commands import add_parsers as add_day_two_parsers  # explain, job, queue

    add_day_two_parsers(sub)
    completion = sub.add_parser("completion", help="print a shell completion script (bash or zsh)",
                                description="Print a completion script for bash or zsh; load it with "
                                "`source <(volcano-py completion bash)` (in ~/.bashrc or ~/.zshrc to keep it).")
    completion.add_argument("shell", choices=SHELLS, help="the shell the script is for")
    completion.set_defaults(func=cmd_completion)
    describe(p)
    return p


def cmd_completion(args: argparse.Namespace) -> int:
    flags = {flags.command: [f"--{n}" for f in flags.flags for n in (f.name, *f.aliases)]
             for flags in (SCHEDULER, CONTROLLERS, WEBHOOK)}
    sys.stdout.write(script(args.shell, parser(), flags))
    return 0


def describe(p: argparse.ArgumentParser) -> None:
    """Give every parser under `p` without a description its help line, as a sentence."""
    for action in p._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        helps = {choice.dest: choice.help for choice in action._choices_actions}
        for name, child in action.choices.items():
            text = str(helps.get(name) or "")
            if not child.description and text:
                child.description = f"{text[0].upper()}{text[1:]}."
            describe(child)
