"""`volcano-py`: the command line (scheduler, controllers, simulate, conf check, explain, job, queue, bench).

How a command ends, whatever it is (`main`): a user error (a bad file, field, flag or conf) is one line naming
what is wrong and exit 2; a failure (no cluster to talk to, a bug) one line and exit 1; a closed output pipe
(`... | head -1`) ends quietly with 141, Ctrl-C with one line and 130 (128 + the signal, as a shell reports a
killed command). Never a traceback, unless `--debug` asks for it.
"""

from __future__ import annotations

import gc
import importlib
import logging
import os
import signal
import ssl
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

# Before anything imports numpy: one OpenBLAS thread. Loading numpy otherwise starts a pool of BLAS threads,
# about 60 ms of a restart here (`import numpy` 105-120 ms -> 51-56 ms on 2 cores), for matrix products our
# arrays never make large enough to share out. A value the user set is kept.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from scheduler.api.resources import QuantityError
from scheduler.cache.client import KubeconfigError, api_client
from scheduler.cache.leader import LeaderConfig
from scheduler.cli.ctl.exits import EXIT_INTERRUPTED, EXIT_PIPE, one_line, quiet_stdout
from scheduler.cli.parser import BENCHES, parser
from scheduler.flags import (
    CONTROLLERS,
    SCHEDULER,
    WEBHOOK,
    CommonOptions,
    ControllerOptions,
    FlagError,
    FlagSet,
    HelpRequested,
    SchedulerOptions,
    WebhookOptions,
    parse_controllers,
    parse_scheduler,
    parse_webhook,
)
from scheduler.framework.conf import ConfError
from scheduler.report.errors import ReportError
from scheduler.sim.errors import InputError

if TYPE_CHECKING:  # the metrics server is imported only by the commands that serve it
    from scheduler.metrics.server import ServingCert


USER_ERRORS = (InputError, ConfError, QuantityError, ReportError)

def _api_client(opts: CommonOptions | WebhookOptions) -> Any:
    return api_client(opts.kubeconfig, master=opts.master, rate_limit=opts.rate_limit)


def _leader_config(opts: CommonOptions, namespace: str) -> LeaderConfig:
    return LeaderConfig(namespace=namespace, name=opts.leader_elect_lease_name,
                        lease_duration=opts.leader_elect_lease_duration,
                        renew_deadline=opts.leader_elect_renew_deadline,
                        retry_period=opts.leader_elect_retry_period)


def _check_leader_durations(opts: CommonOptions) -> None:
    """Bad durations are a user error before anything connects (exit 2)."""
    if opts.leader_elect:
        try:
            _leader_config(opts, opts.lease_namespace)
        except ValueError as exc:
            raise FlagError(str(exc)) from None


MAX_BIND_WORKERS = 256


def _check_bind_workers(opts: SchedulerOptions) -> None:
    if not 1 <= opts.bind_workers <= MAX_BIND_WORKERS:
        raise FlagError(f"--bind-workers: {opts.bind_workers} is not between 1 and {MAX_BIND_WORKERS}")


def _check_active_shards(opts: SchedulerOptions) -> None:
    """--active-shards: a shard count in range, and not with Volcano's sharding flags (both would write the
    NodeShards); the Leases' durations as --leader-elect checks them."""
    from scheduler.api.active_shards import MAX_SHARDS

    if not 0 <= opts.active_shards <= MAX_SHARDS:
        raise FlagError(f"--active-shards: {opts.active_shards} is not between 0 and {MAX_SHARDS}")
    if opts.active_shards > 1 and opts.sharding is not None:
        raise FlagError("--active-shards cannot be used with --scheduler-sharding-mode "
                        f"{opts.scheduler_sharding_mode}: the shards' replicas write their own NodeShards")
    if opts.active_shards > 1:
        try:
            _leader_config(opts, opts.lease_namespace)
        except ValueError as exc:
            raise FlagError(str(exc)) from None


def _metrics_tls(opts: CommonOptions) -> ServingCert | None:
    """The TLS context of --metrics-secure, None without it; a bad combination or file is a user error (exit 2),
    found before anything connects."""
    problem = opts.metrics_tls_problem()
    if problem is not None:
        raise FlagError(problem)
    if not opts.metrics_secure:
        return None
    from scheduler.metrics.server import tls_context

    try:
        return tls_context(opts.metrics_cert_file, opts.metrics_key_file)
    except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError; a name cryptography refuses a ValueError
        raise FlagError(f"--metrics-secure: cannot load {opts.metrics_cert_file or 'a self-signed certificate'}: "
                        f"{exc}") from None


def _serve(opts: CommonOptions, api: Any, tls: ServingCert | None, ready: Callable[[], bool] = lambda: True,
           healthy: Callable[[], bool] = lambda: True) -> None:
    """Serve /metrics and the probes on each address; with --metrics-secure (`tls`) the metrics address serves
    HTTPS and asks the apiserver who may read /metrics (TokenReview, SubjectAccessReview, `metrics/auth.py`)."""
    if not opts.serve_addresses:
        return
    from scheduler import metrics

    auth = None
    if tls is not None:
        from scheduler.cache.kube import Kube
        from scheduler.metrics.auth import MetricsAuth

        reviews = Kube(api, request_timeout=10.0)  # its own connections: a review never waits behind a list
        auth = MetricsAuth(lambda path, body: reviews.request("POST", path, body=body))
    for address, secure in opts.serving:
        if secure:
            metrics.serve(address, ready=ready, healthy=healthy, tls=tls, auth=auth)
        else:  # beside a secure metrics address, Volcano's health address serves the probes alone
            metrics.serve(address, ready=ready, healthy=healthy, metrics=not opts.metrics_secure)


def cmd_scheduler(opts: SchedulerOptions) -> int:
    level = {"trace": logging.DEBUG, "debug": logging.DEBUG, "info": logging.INFO}[opts.level]
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    _log_ignored(opts)
    trace_log = logging.getLogger("volcano_py.trace")
    if opts.disable_default_scheduler_config and not opts.scheduler_conf:
        # Volcano's scheduler.go: no conf file and no fallback to the default is fatal.
        raise FlagError("--disable-default-scheduler-config needs --scheduler-conf")
    _check_leader_durations(opts)
    _check_active_shards(opts)
    _check_bind_workers(opts)
    tls = _metrics_tls(opts)
    # No cyclic collection until the first lists are in (SchedulerLoop.run freezes what they built, then enables
    # it): the imports below make almost no cyclic garbage, and collecting during them cost 20-60 ms a start.
    gc.disable()
    api = kube = None
    early: dict[str, Any] = {}
    try:
        api = _api_client(opts)
        # The pod and node lists start before the framework, the plugins and the cache are imported (a third of
        # a second): the apiserver encodes them meanwhile, and the first cycle comes that much sooner after a
        # restart. They run on the client the cache then uses.
        from scheduler.cache.kube import Kube
        from scheduler.cache.pages import PAGE_SIZE, prefetch, prefetch_ours

        kube = Kube(api, request_timeout=opts.request_timeout)
        early = prefetch(kube, PAGE_SIZE)
        # Our pods too, for the first cycle on a partial view (scheduler/cache/first_view.py).
        ours = prefetch_ours(kube, opts.scheduler_names) if opts.first_cycle_partial_view else []
        return _run_scheduler(opts, api, kube, early, trace_log, tls, ours)
    finally:
        for pages in early.values():
            pages.close()  # a no-op for those the cache read; ends those it never reached (a bad conf, say)
        if kube is not None:
            kube.close()
        if api is not None:
            api.close()
        gc.enable()  # already, unless it ended before the first lists were in


def _run_scheduler(opts: SchedulerOptions, api: Any, kube: Any, early: dict[str, Any],
                   trace_log: logging.Logger, tls: ServingCert | None = None, ours: list[Any] | None = None) -> int:
    from scheduler.cache.cluster_cache import ClusterCache
    from scheduler.cache.events import DEFER as EVENTS_DEFER
    from scheduler.cache.leader import LeaderElector, ensure_namespace
    from scheduler.cache.runner import ConfWatcher, SchedulerLoop
    from scheduler.cycle import load_conf

    conf = ConfWatcher(opts.scheduler_conf)
    if opts.scheduler_conf:
        conf.conf = load_conf(opts.scheduler_conf)  # a bad file at startup is a user error (exit 2)
    names = list(opts.scheduler_names)
    cache = ClusterCache(api, names, opts.default_queue, request_timeout=opts.request_timeout,
                         identity=opts.leader_elect_identity, prefetched=early, kube=kube,
                         queue_allocation_gate=opts.feature_gates.queue_admission, ours_early=ours,
                         sharding=opts.sharding, bind_workers=opts.bind_workers)
    try:
        elector = None
        if opts.active_shards > 1:  # a Lease per shard instead of one for the scheduler (cache/active.py)
            from functools import partial

            from scheduler.cache.active import ActiveShards
            from scheduler.cache.freshen import drop_pods, freshen_pods, freshener
            from scheduler.cache.scope import PodScope

            lease = _leader_config(opts, ensure_namespace(cache.kube, opts.lease_namespace))
            active = ActiveShards(cache.kube, cache.stores, lease, cache.identity, names[0], opts.active_shards,
                                  topology_label=opts.shard_topology_label)
            active.freshen = lambda: freshen_pods(cache.kube, cache.stores, cache.watcher._on_event, cache.clock)
            # Other schedulers' pods kept on the held shards' nodes only (cache/scope.py), those joining listed
            active.scope = cache.stores.pod_scope = PodScope(names, partial(drop_pods, cache.stores,
                                                                            cache.watcher._on_event))
            active.scope.others = active.reads_light  # our pods of other replicas' jobs passed over undecoded
            active.scope.list_jobs = lambda namespace: freshen_pods(
                cache.kube, cache.stores, cache.watcher._on_event, cache.clock, namespace=namespace)
            active.list_pods = freshener(lambda: cache.kube, cache.stores, cache.watcher._on_event, cache.clock,
                                         cache.pool)
            for coordinator in active.coordinators:
                cache.guard_gains(coordinator)
            cache.active = active
        elif opts.leader_elect:
            lease = _leader_config(opts, ensure_namespace(cache.kube, opts.lease_namespace))
            elector = LeaderElector(cache.kube, cache.identity, lease)
        loop = SchedulerLoop(
            cache, conf, period=opts.schedule_period, default_queue=opts.default_queue,
            trace=trace_log.debug if opts.level == "trace" else None,
            elector=elector, partial_gang_timeout=opts.partial_gang_timeout,
            arrival_delay=opts.schedule_on_arrival, pipeline=opts.pipeline_apply,
        )
        if opts.schedule_on_arrival > 0:
            cache.watcher.on_pending = loop.wake
        # /readyz once the caches synced (a standby is ready too); /healthz fails after failed or stuck cycles
        _serve(opts, api, tls, ready=lambda: cache.wait_synced(0), healthy=loop.healthy)
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: loop.stop())  # the cycle in progress finishes, then the loop exits
        logging.getLogger("volcano_py.scheduler").info("volcano-py scheduler for %s starting", ", ".join(names))
        loop.run(sync_timeout=opts.resource_sync_timeout)
    finally:
        cache.stop(flush=EVENTS_DEFER)  # (the loop released the Lease: a standby is not kept waiting)
    return 0


def cmd_controllers(opts: ControllerOptions) -> int:
    import socket

    from scheduler.cache.kube import Kube
    from scheduler.cache.leader import ensure_namespace
    from scheduler.controllers.operator import run
    from scheduler.controllers.sharding import ShardingOptions

    level = {"debug": logging.DEBUG, "info": logging.INFO}[opts.level]
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("kopf", "aiohttp"):  # kopf logs every handler run at INFO
        logging.getLogger(noisy).setLevel(logging.DEBUG if opts.library_debug else logging.WARNING)
    _log_ignored(opts)
    for warning in opts.controllers.warnings():
        logging.getLogger("volcano_py.flags").warning("%s", warning)
    _check_leader_durations(opts)
    tls = _metrics_tls(opts)
    api = _api_client(opts)
    identity = opts.leader_elect_identity or f"{socket.gethostname()}-{os.getpid()}"
    lease = None
    if opts.leader_elect:
        lease = _leader_config(opts, ensure_namespace(Kube(api), opts.lease_namespace))
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    _serve(opts, api, tls)  # /metrics, /healthz, /readyz for the Deployment's probes (a standby is ready too)
    # The Lease is renewed through a client of its own, with its own rate limiter, as kube-controller-manager's
    # leader election has (its "leader-election" client): a renew never queues behind the controllers' throttled
    # writes (--kube-api-qps), which could otherwise cost the Lease mid-reconcile.
    lease_api = _api_client(opts) if lease is not None else None
    try:
        return run(api, scheduler_names=opts.scheduler_names, claim_unnamed=opts.claim_unnamed,
                   lease=lease, identity=identity, stop=stop, workers=opts.workers, lease_api=lease_api,
                   enabled=opts.controllers.volcano_py,
                   sharding=ShardingOptions(opts.sharding_configmap, opts.sharding_configmap_namespace,
                                            opts.scheduler_configs, opts.shard_sync_period,
                                            opts.enable_node_event_trigger))
    finally:
        api.close()
        if lease_api is not None:
            lease_api.close()


def cmd_webhook(opts: WebhookOptions) -> int:
    from scheduler.cache.kube import Kube
    from scheduler.webhook.admission import Checks
    from scheduler.webhook.podcheck import PodDryRun
    from scheduler.webhook.server import WebhookServer, handlers, kube_queues

    logging.basicConfig(level={"debug": logging.DEBUG, "info": logging.INFO}[opts.level],
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    _log_ignored(opts)
    if not opts.tls_cert_file or not opts.tls_private_key_file:
        raise FlagError("--tls-cert-file and --tls-private-key-file are required: the apiserver calls webhooks "
                        "over HTTPS only")
    if opts.max_pods_per_job < 1:
        raise FlagError(f"--max-pods-per-job: {opts.max_pods_per_job} must be at least 1")
    api = _api_client(opts)
    kube = Kube(api)
    checks = Checks(max_pods=opts.max_pods_per_job,
                    pod_templates=PodDryRun(kube) if opts.pod_template_dry_run else None,
                    queue_allocated_pods=opts.enable_queue_allocated_pods_check)
    try:
        routes = handlers(kube_queues(kube), opts.enabled_admission,
                          (opts.scheduler_names or ("volcano-py",))[0], checks,
                          queue_allocation_gate=opts.feature_gates.queue_admission)
    except ValueError as exc:
        raise FlagError(str(exc)) from None
    try:
        server = WebhookServer(opts.listen_address, opts.port, opts.tls_cert_file, opts.tls_private_key_file, routes)
    except (OSError, ssl.SSLError) as exc:
        raise FlagError(f"cannot serve on {opts.listen_address or '*'}:{opts.port} with "
                        f"{opts.tls_cert_file}: {exc}") from None
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    server.start()
    if opts.enable_healthz:
        _serve_webhook_health(opts.healthz_address, server)
    logging.getLogger("volcano_py.webhook").info("volcano-py webhook serving %s on port %d",
                                                 ", ".join(routes), server.port)
    try:
        stop.wait()
    finally:
        server.stop()
        api.close()
    return 0


def _serve_webhook_health(address: str, server: Any) -> Any:
    """--enable-healthz: /healthz (and /readyz, the chart's readiness) 200 only while the admission server
    itself answers a TLS GET /healthz (`webhook/health.py`), not merely while this plain server runs."""
    from scheduler import metrics
    from scheduler.webhook.health import AdmissionHealth

    health = AdmissionHealth(server.thread, server.httpd.server_address)
    return metrics.serve(address, ready=health, healthy=health)


def _log_ignored(opts: CommonOptions | WebhookOptions) -> None:
    log = logging.getLogger("volcano_py.flags")
    for ignored in opts.ignored:
        log.warning("%s", ignored.message())


COMPONENTS: dict[str, tuple[FlagSet, Callable[[Sequence[str]], Any], Callable[[Any], int]]] = {
    "scheduler": (SCHEDULER, parse_scheduler, cmd_scheduler),
    "controllers": (CONTROLLERS, parse_controllers, cmd_controllers),
    "webhook": (WEBHOOK, parse_webhook, cmd_webhook),
}


def run_component(command: str, argv: Sequence[str]) -> int:
    """`volcano-py scheduler|controllers ...`: Go-style flags (scheduler/flags), then the long-running loop."""
    flags, parse, run = COMPONENTS[command]
    try:
        opts = parse(argv)
    except HelpRequested:
        print(flags.usage(), end="")
        return 0
    except FlagError as exc:
        print(f"volcano-py {command}: error: {exc}", file=sys.stderr)
        return 2
    if opts.version:
        print(f"volcano-py {_version()}")
        return 0
    try:
        return run(opts)
    except (*USER_ERRORS, FlagError) as exc:
        print(f"volcano-py: error: {exc}", file=sys.stderr)
        return 2
    except KubeconfigError as exc:
        print(f"volcano-py {command}: error: {exc}", file=sys.stderr)
        return 1


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("volcano-py")
    except PackageNotFoundError:
        return "unknown"


# The benchmarks `volcano-py bench NAME` runs: bench/bench_NAME.py of the clone this package was loaded from.
BENCH_DIR = Path(__file__).resolve().parents[2] / "bench"


def bench_module(name: str) -> ModuleType:
    """bench/bench_NAME.py, imported under its file name so that its worker processes can import it too.

    Benchmarks are not part of the product package (DESIGN section 2): an installed wheel has none, and says so."""
    path = BENCH_DIR / f"bench_{name}.py"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: `volcano-py bench {name}` runs from a clone of volcano-py (bench/ is not "
                                "installed)")
    if str(BENCH_DIR) not in sys.path:
        sys.path.insert(0, str(BENCH_DIR))
    return importlib.import_module(path.stem)


def run_bench(name: str, argv: Sequence[str]) -> int:
    """`volcano-py bench NAME ...`: the benchmark's own command line (`--help` shows it)."""
    try:
        module = bench_module(name)
    except FileNotFoundError as exc:
        print(f"volcano-py: error: {exc}", file=sys.stderr)
        return 2
    return int(module.main(list(argv)))


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    try:
        return _dispatch(argv)
    except BrokenPipeError:
        quiet_stdout()  # whoever read our output has gone (`| head -1`): nothing to say, and no one to say it to
        return EXIT_PIPE
    except KeyboardInterrupt:
        if debug:
            raise
        print("volcano-py: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def _dispatch(argv: list[str]) -> int:
    if argv and argv[0] in COMPONENTS:
        return run_component(argv[0], argv[1:])
    if len(argv) > 1 and argv[0] == "bench" and argv[1] in BENCHES:
        return run_bench(argv[1], argv[2:])
    args = parser().parse_args(argv)
    args.argv = ("volcano-py", *argv)  # the command as given, for what records it (simulate's report header)
    try:
        code = int(args.func(args))
        sys.stdout.flush()  # a closed pipe shows here, inside the handlers, not at exit
        return code
    except (BrokenPipeError, KeyboardInterrupt):
        raise
    except Exception as exc:
        if getattr(args, "debug", False):
            raise
        line, code = one_line(exc, USER_ERRORS)
        print(f"volcano-py: error: {line}", file=sys.stderr)
        return code

