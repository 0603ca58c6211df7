"""`volcano-py`: the command line (scheduler, controllers, simulate, conf check, explain, job, queue, bench).

User errors (a bad file, a bad field) print one line naming the file and field and exit 2; never a traceback.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import signal
import sys
from collections.abc import Sequence

from scheduler.api.resources import QuantityError
from scheduler.cycle import builtin_default_conf, load_conf
from scheduler.framework.conf import ConfError, SchedulerConf, describe_conf
from scheduler.sim.naive import per_pod_cycle
from scheduler.sim.replay import replay
from scheduler.sim.report import compare, render, totals
from scheduler.sim.workload import InputError, load_cluster, load_workload

USER_ERRORS = (InputError, ConfError, QuantityError)


def _conf(path: str | None) -> SchedulerConf:
    return load_conf(path) if path else builtin_default_conf()


def cmd_simulate(args: argparse.Namespace) -> int:
    confs = [(args.conf or "built-in default", _conf(args.conf))]
    confs += [(path, _conf(path)) for path in args.compare or ()]  # every conf is read before any replay
    spec = load_cluster(args.cluster)
    workload = load_workload(args.workload)
    for name, conf in confs:
        for warning in conf.skipped:
            print(f"warning: {name}: {warning}", file=sys.stderr)
    reports = []
    for name, conf in confs:
        title = "volcano-py (gang scheduling)" if len(confs) == 1 else f"volcano-py with {name}"
        reports.append((title, replay(spec, workload, conf, period=args.period, horizon=args.horizon)))
    if args.compare_per_pod:
        baseline = replay(spec, workload, scheduler=per_pod_cycle, period=args.period, horizon=args.horizon)
        reports.append(("per-pod baseline (no gangs, like kube-scheduler)", baseline))
    if args.json:
        print(json.dumps({title: dataclasses.asdict(totals(r)) for title, r in reports}, indent=2))
        return 0
    text = "\n\n".join(render(r, title) for title, r in reports)
    if len(reports) > 1:
        text += "\n\n" + compare([(title, totals(r)) for title, r in reports])
    print(text)
    return 1 if any(totals(r).partial_gang_cycles for _, r in reports[: len(confs)]) else 0


def cmd_conf_check(args: argparse.Namespace) -> int:
    conf = _conf(args.file)
    print(describe_conf(conf))
    return 0


def _duration(value: str) -> float:
    """`1s`, `500ms`, `2m` or a plain number of seconds."""
    units = {"ms": 0.001, "s": 1.0, "m": 60.0}
    for suffix in ("ms", "s", "m"):
        if value.endswith(suffix):
            return float(value[: -len(suffix)]) * units[suffix]
    return float(value)


def _api_client(kubeconfig: str | None):  # type: ignore[no-untyped-def]
    from kubernetes import client, config

    cfg = client.Configuration()
    path = kubeconfig or os.environ.get("KUBECONFIG")
    if kubeconfig is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
        config.load_incluster_config(client_configuration=cfg)
    else:
        config.load_kube_config(config_file=path, client_configuration=cfg)
    cfg.connection_pool_maxsize = 64
    return client.ApiClient(cfg)


def cmd_scheduler(args: argparse.Namespace) -> int:
    from scheduler.cache.cluster_cache import ClusterCache
    from scheduler.cache.leader import LeaderConfig, LeaderElector, ensure_namespace
    from scheduler.cache.runner import ConfWatcher, SchedulerLoop

    level = {"trace": logging.DEBUG, "debug": logging.DEBUG, "info": logging.INFO}[args.log_level]
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    trace_log = logging.getLogger("volcano_py.trace")
    conf = ConfWatcher(args.scheduler_conf)
    if args.scheduler_conf:
        conf.conf = load_conf(args.scheduler_conf)  # a bad file at startup is a user error (exit 2)
    api = _api_client(args.kubeconfig)
    names = args.scheduler_name or ["volcano-py"]
    cache = ClusterCache(api, names, args.default_queue, request_timeout=args.request_timeout,
                         identity=args.leader_elect_identity)
    elector = None
    if args.leader_elect:
        try:
            LeaderConfig(lease_duration=args.leader_elect_lease_duration,
                         renew_deadline=args.leader_elect_renew_deadline,
                         retry_period=args.leader_elect_retry_period)
        except ValueError as exc:
            print(f"volcano-py: error: {exc}", file=sys.stderr)
            return 2
        lease = LeaderConfig(
            namespace=ensure_namespace(cache.kube, args.leader_elect_namespace),
            name=args.leader_elect_lease_name,
            lease_duration=args.leader_elect_lease_duration,
            renew_deadline=args.leader_elect_renew_deadline,
            retry_period=args.leader_elect_retry_period,
        )
        elector = LeaderElector(cache.kube, cache.identity, lease)
    loop = SchedulerLoop(
        cache, conf, period=args.schedule_period, default_queue=args.default_queue,
        trace=trace_log.debug if args.log_level == "trace" else None,
        elector=elector, partial_gang_timeout=args.partial_gang_timeout,
    )
    if args.listen_address:  # /metrics, /healthz; /readyz once the caches synced (a standby is ready too)
        from scheduler import metrics

        metrics.serve(args.listen_address, ready=lambda: cache.wait_synced(0))
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: loop.stop())  # the cycle in progress finishes, then the loop exits
    logging.getLogger("volcano_py.scheduler").info("volcano-py scheduler for %s starting", ", ".join(names))
    try:
        loop.run()
    finally:
        cache.stop()
        api.close()
    return 0


def cmd_controllers(args: argparse.Namespace) -> int:
    import socket
    import threading

    from scheduler.cache.kube import Kube
    from scheduler.cache.leader import LeaderConfig, ensure_namespace
    from scheduler.controllers.operator import run

    level = {"debug": logging.DEBUG, "info": logging.INFO}[args.log_level]
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("kopf", "aiohttp"):  # kopf logs every handler run at INFO
        logging.getLogger(noisy).setLevel(logging.DEBUG if level == logging.DEBUG else logging.WARNING)
    api = _api_client(args.kubeconfig)
    identity = args.leader_elect_identity or f"{socket.gethostname()}-{os.getpid()}"
    lease = None
    if args.leader_elect:
        lease = LeaderConfig(namespace=ensure_namespace(Kube(api), args.leader_elect_namespace),
                             name=args.leader_elect_lease_name)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    if args.listen_address:  # /metrics, /healthz, /readyz for the Deployment's probes (a standby is ready too)
        from scheduler import metrics

        metrics.serve(args.listen_address)
    try:
        return run(api, scheduler_names=args.scheduler_name or ["volcano-py"], claim_unnamed=args.claim_unnamed,
                   lease=lease, identity=identity, stop=stop)
    finally:
        api.close()


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="volcano-py", description="A gang-scheduling batch scheduler for Kubernetes.")
    sub = p.add_subparsers(dest="command", required=True)
    sched = sub.add_parser("scheduler", help="run the scheduler against a Kubernetes cluster")
    sched.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster config, else $KUBECONFIG)")
    sched.add_argument("--scheduler-name", action="append", help="schedule pods with this schedulerName "
                       "(repeatable; default volcano-py)")
    sched.add_argument("--scheduler-conf", help="volcano-scheduler.conf, re-read when it changes")
    sched.add_argument("--schedule-period", type=_duration, default=1.0, help="cycle period (default 1s)")
    sched.add_argument("--default-queue", default="default", help="queue of PodGroups that name none")
    sched.add_argument("--log-level", choices=("info", "debug", "trace"), default="info",
                       help="trace also logs every node rejection")
    sched.add_argument("--partial-gang-timeout", type=_duration, default=60.0,
                       help="give up a gang left partly bound this long: evict its controller-owned pods "
                            "(default 60s)")
    sched.add_argument("--request-timeout", type=_duration, default=30.0,
                       help="timeout of one API request (default 30s)")
    sched.add_argument("--listen-address", default=None, help="serve /metrics, /healthz and /readyz on "
                       "[HOST]:PORT, e.g. :8080 (default: not served)")
    sched.add_argument("--leader-elect", action="store_true",
                       help="run cycles only while holding the coordination.k8s.io Lease (run 2+ replicas)")
    sched.add_argument("--leader-elect-namespace", default="volcano-py-system",
                       help="namespace of the Lease (created if missing; default volcano-py-system)")
    sched.add_argument("--leader-elect-lease-name", default="volcano-py-scheduler")
    sched.add_argument("--leader-elect-identity", default=None,
                       help="this replica's holderIdentity (default <hostname>-<pid>)")
    sched.add_argument("--leader-elect-lease-duration", type=_duration, default=15.0,
                       help="how long a standby waits after the last renew it saw (default 15s)")
    sched.add_argument("--leader-elect-renew-deadline", type=_duration, default=10.0,
                       help="the leader stops scheduling if it has not renewed for this long (default 10s)")
    sched.add_argument("--leader-elect-retry-period", type=_duration, default=2.0,
                       help="how often to renew or try to acquire (default 2s)")
    sched.set_defaults(func=cmd_scheduler)
    ctl = sub.add_parser("controllers", help="run the Job, Queue and Command controllers (kopf)")
    ctl.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster config, else $KUBECONFIG)")
    ctl.add_argument("--scheduler-name", action="append", help="act on Jobs with this schedulerName "
                     "(repeatable; default volcano-py)")
    ctl.add_argument("--claim-unnamed", action="store_true", help="also act on Jobs that name no scheduler")
    ctl.add_argument("--leader-elect", action=argparse.BooleanOptionalAction, default=True,
                     help="act only while holding the coordination.k8s.io Lease (default on)")
    ctl.add_argument("--leader-elect-namespace", default="volcano-py-system",
                     help="namespace of the Lease (created if missing; default volcano-py-system)")
    ctl.add_argument("--leader-elect-lease-name", default="volcano-py-controllers")
    ctl.add_argument("--leader-elect-identity", default=None,
                     help="this replica's holderIdentity (default <hostname>-<pid>)")
    ctl.add_argument("--listen-address", default=None, help="serve /metrics, /healthz and /readyz on "
                     "this address, e.g. :8080")
    ctl.add_argument("--log-level", choices=("info", "debug"), default="info")
    ctl.set_defaults(func=cmd_controllers)
    sim = sub.add_parser("simulate", help="replay a workload on an in-memory cluster")
    sim.add_argument("cluster", help="cluster YAML (nodes, node pools, queues, priorityClasses)")
    sim.add_argument("workload", help="workload YAML (Volcano Jobs / PodGroups with arrival and duration)")
    sim.add_argument("--conf", help="volcano-scheduler.conf to use (default: the built-in default)")
    sim.add_argument("--period", type=float, default=1.0, help="schedule period in seconds (default 1)")
    sim.add_argument("--horizon", type=float, default=None, help="stop the replay at this simulated time")
    sim.add_argument("--compare", action="append", metavar="CONF",
                     help="also replay with this volcano-scheduler.conf (or ConfigMap manifest) and compare; "
                     "may be given more than once")
    sim.add_argument("--compare-per-pod", action="store_true", help="also replay with a per-pod scheduler")
    sim.add_argument("--json", action="store_true", help="print the totals as JSON")
    sim.set_defaults(func=cmd_simulate)
    conf = sub.add_parser("conf", help="scheduler configuration tools")
    conf_sub = conf.add_subparsers(dest="conf_command", required=True)
    check = conf_sub.add_parser("check", help="print what a volcano-scheduler.conf would use, skip and reject")
    check.add_argument("file", nargs="?", help="the conf file (default: show the built-in default)")
    check.set_defaults(func=cmd_conf_check)
    bench = sub.add_parser("bench", help="benchmarks")
    bench_sub = bench.add_subparsers(dest="bench_command", required=True)
    packing = bench_sub.add_parser("packing", help="the FGD paper's GPU packing benchmark on the openb trace")
    from scheduler.packing.bench import add_arguments, run_cli

    add_arguments(packing)
    packing.set_defaults(func=run_cli)
    from scheduler.ctl.commands import add_parsers as add_day_two_parsers  # explain, job, queue

    add_day_two_parsers(sub)
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
