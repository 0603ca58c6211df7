"""Layer `controllers`: kopf wiring, settings and the run loop of `volcano-py controllers`.

Only raw watch-event handlers (`kopf.on.event`) are registered: they keep no state in the objects, so kopf
writes no annotations, progress or finalizers to Jobs, pods or anything else. The persistence settings still
point at the Job's own status/annotations (never at pods) in case a change-tracking handler is added later.
Two replicas never both act: a replica runs the handlers only while it holds a coordination.k8s.io Lease,
and exits if it loses it (its Deployment restarts it as a standby).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, cast

import kopf

from scheduler import metrics
from scheduler.cache.kube import Kube
from scheduler.cache.leader import LeaderConfig, LeaderElector
from scheduler.controllers.client import Api
from scheduler.controllers.command import CommandController
from scheduler.controllers.cronjob import CronJobController
from scheduler.controllers.hypernode_conf import ConfigMapRef
from scheduler.controllers.hypernode_discovery import HyperNodeDiscovery
from scheduler.controllers.job import JobController
from scheduler.controllers.jobflow import JobFlowController
from scheduler.controllers.owner_gangs import OwnerGangController, installed
from scheduler.controllers.podgroup import PodGroupController
from scheduler.controllers.queue import QueueController
from scheduler.controllers.sharding import ShardingController, ShardingOptions
from scheduler.jobs import keys

log = logging.getLogger("volcano_py.controllers")

PREFIX = "controllers.volcano-py.io"

# Volcano's names of the controllers volcano-py can turn off (`--controllers`, flags/controller_gates.py); the
# job, queue and gc controllers always run. `run(enabled=...)` takes the set that is on.
HYPERNODE, CRONJOB, PODGROUP = "hyperNode-controller", "cronjob-controller", "pg-controller"
JOBFLOW, JOBTEMPLATE = "jobflow-controller", "jobtemplate-controller"
OPTIONAL = frozenset({HYPERNODE, CRONJOB, PODGROUP, JOBFLOW, JOBTEMPLATE})
SHARDING = "sharding-controller"  # off unless named (Volcano's default `*,-sharding-controller`)


@dataclass(slots=True)
class Controllers:
    jobs: JobController
    queues: QueueController
    commands: CommandController
    podgroups: PodGroupController
    cronjobs: CronJobController
    flows: JobFlowController
    hypernodes: HyperNodeDiscovery
    owner_gangs: OwnerGangController | None = None
    # JobSets, LeaderWorkerSets, PyTorchJobs: watched where their CRDs are installed (`run` asks at start)
    watch_owners: tuple[bool, bool, bool] = (False, False, False)


def build(api: Api, scheduler_names: Iterable[str], claim_unnamed: bool,
          clock: Callable[[], float] = time.time) -> Controllers:
    """`clock`: the CronJob controller's (the e2e tests move it instead of waiting for the minute)."""
    scheduler_names = tuple(dict.fromkeys(scheduler_names))  # in order: the first is the default for a Job
    jobs = JobController(api, scheduler_names, claim_unnamed=claim_unnamed)
    queues = QueueController(api)
    owners = OwnerGangController(api, scheduler_names)
    podgroups = PodGroupController(api, scheduler_names, owner_claims=owners.claims)
    return Controllers(jobs, queues, CommandController(api, jobs, queues), podgroups,
                       CronJobController(api, jobs.claims, clock=clock),  # a CronJob is ours when its Jobs are
                       JobFlowController(api, jobs.claims),
                       HyperNodeDiscovery(api.kube, ConfigMapRef.from_env(os.environ)), owners)


def configure(settings: kopf.OperatorSettings, *, workers: int = 16) -> None:
    settings.persistence.progress_storage = kopf.StatusProgressStorage(field=f"status.{PREFIX}")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=PREFIX, key="last-handled-configuration"
    )
    settings.persistence.finalizer = f"{PREFIX}/finalizer"
    settings.watching.server_timeout = 60  # the apiserver ends each watch after this; kopf re-watches
    settings.watching.client_timeout = 90  # never wait forever on a silent connection
    settings.watching.connect_timeout = 10
    settings.networking.request_timeout = 30
    settings.scanning.disabled = True  # the resources are fixed: no CRD/namespace scanning, no extra RBAC
    settings.posting.level = logging.WARNING  # no k8s Events for routine handler runs
    settings.peering.standalone = True  # exclusion comes from the Lease, not from kopf peering
    settings.execution.max_workers = workers


def _body(event: kopf.RawEvent) -> dict[str, Any]:
    """The object of a watch event, as the controllers read it (a plain dict decoded from JSON)."""
    return cast(dict[str, Any], event["object"])


def registry_for(controllers: Controllers, connection: Callable[[], kopf.ConnectionInfo],
                 enabled: frozenset[str] = OPTIONAL) -> kopf.OperatorRegistry:
    """The handlers of the controllers that are on (`enabled`: Volcano's names, of OPTIONAL; the job, queue and
    command handlers always)."""
    registry = kopf.OperatorRegistry()

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        # Read again at each login: kopf logs in again when the apiserver answers 401, and by then a rotated
        # token has been read into the client's configuration (cache/client.py).
        return connection()

    @kopf.on.event("batch.volcano.sh", "v1alpha1", "jobs", registry=registry)
    def job_event(event: kopf.RawEvent, **_: Any) -> None:
        controllers.jobs.on_job(event.get("type"), _body(event))

    if CRONJOB in enabled:
        _cronjob_handlers(registry, controllers.cronjobs)

    @kopf.on.event("v1", "pods", labels={keys.JOB_NAME: kopf.PRESENT}, registry=registry)
    def pod_event(event: kopf.RawEvent, **_: Any) -> None:
        controllers.jobs.on_pod(event.get("type"), _body(event))

    plain_podgroups = PODGROUP in enabled
    if plain_podgroups:
        _plain_podgroup_handlers(registry, controllers.podgroups)

    @kopf.on.event("scheduling.volcano.sh", "v1beta1", "podgroups", registry=registry)
    def podgroup_event(event: kopf.RawEvent, **_: Any) -> None:
        if plain_podgroups:
            controllers.podgroups.on_podgroup(event.get("type"), _body(event))
        controllers.queues.on_podgroup(event.get("type"), _body(event))
        controllers.jobs.on_podgroup(event.get("type"), _body(event))

    @kopf.on.event("scheduling.volcano.sh", "v1beta1", "queues", registry=registry)
    def queue_event(event: kopf.RawEvent, **_: Any) -> None:
        controllers.queues.on_queue(event.get("type"), _body(event))

    @kopf.on.event("bus.volcano.sh", "v1alpha1", "commands", registry=registry)
    def command_event(event: kopf.RawEvent, **_: Any) -> None:
        controllers.commands.on_command(event.get("type"), _body(event))

    if JOBFLOW in enabled or JOBTEMPLATE in enabled:  # one controller keeps both in volcano-py
        _jobflow_handlers(registry, controllers.flows)
    if HYPERNODE in enabled:
        _discovery_handlers(registry, controllers.hypernodes)
    if plain_podgroups:  # the automatic gangs of JobSets, LWSs and PyTorchJobs are the pg controller's part too
        _owner_gang_handlers(registry, controllers)
    return registry


def _cronjob_handlers(registry: kopf.OperatorRegistry, cronjobs: CronJobController) -> None:
    # A second handler on Jobs, so that one controller's failure never keeps the event from the other.
    @kopf.on.event("batch.volcano.sh", "v1alpha1", "jobs", registry=registry)
    def cronjob_job_event(event: kopf.RawEvent, **_: Any) -> None:
        cronjobs.on_job(event.get("type"), _body(event))

    @kopf.on.event("batch.volcano.sh", "v1alpha1", "cronjobs", registry=registry)
    def cronjob_event(event: kopf.RawEvent, **_: Any) -> None:
        cronjobs.on_cronjob(event.get("type"), _body(event))


def _plain_podgroup_handlers(registry: kopf.OperatorRegistry, podgroups: PodGroupController) -> None:
    @kopf.on.event("v1", "pods", labels={keys.JOB_NAME: kopf.ABSENT}, registry=registry)
    def plain_pod_event(event: kopf.RawEvent, **_: Any) -> None:
        podgroups.on_pod(event.get("type"), _body(event))

    # A plain pods' PodGroup follows its workload (Volcano's pg controller watches these two too).
    @kopf.on.event("apps", "v1", "replicasets", registry=registry)
    def replicaset_event(event: kopf.RawEvent, **_: Any) -> None:
        podgroups.on_workload(event.get("type"), _body(event))

    @kopf.on.event("apps", "v1", "statefulsets", registry=registry)
    def statefulset_event(event: kopf.RawEvent, **_: Any) -> None:
        podgroups.on_workload(event.get("type"), _body(event), statefulset=True)


def _jobflow_handlers(registry: kopf.OperatorRegistry, flows: JobFlowController) -> None:
    # The JobFlow controller's own handler on Jobs: a failure of one controller never keeps the event from the other.
    @kopf.on.event("batch.volcano.sh", "v1alpha1", "jobs", registry=registry)
    def jobflow_job_event(event: kopf.RawEvent, **_: Any) -> None:
        flows.on_job(event.get("type"), _body(event))

    @kopf.on.event("flow.volcano.sh", "v1alpha1", "jobflows", registry=registry)
    def jobflow_event(event: kopf.RawEvent, **_: Any) -> None:
        flows.on_jobflow(event.get("type"), _body(event))

    @kopf.on.event("flow.volcano.sh", "v1alpha1", "jobtemplates", registry=registry)
    def jobtemplate_event(event: kopf.RawEvent, **_: Any) -> None:
        flows.on_jobtemplate(event.get("type"), _body(event))


def _owner_gang_handlers(registry: kopf.OperatorRegistry, controllers: Controllers) -> None:
    """JobSets', LeaderWorkerSets' and PyTorchJobs' gangs (owner_gangs.py), each watched only if its CRD was
    installed."""
    owners = controllers.owner_gangs
    if owners is None:
        return
    jobsets, lwss, pytorchjobs = controllers.watch_owners
    if jobsets:
        @kopf.on.event("jobset.x-k8s.io", "v1alpha2", "jobsets", registry=registry)
        def jobset_event(event: kopf.RawEvent, **_: Any) -> None:
            owners.on_jobset(event.get("type"), _body(event))

    if lwss:
        @kopf.on.event("leaderworkerset.x-k8s.io", "v1", "leaderworkersets", registry=registry)
        def lws_event(event: kopf.RawEvent, **_: Any) -> None:
            owners.on_lws(event.get("type"), _body(event))

    if pytorchjobs:
        @kopf.on.event("kubeflow.org", "v1", "pytorchjobs", registry=registry)
        def pytorchjob_event(event: kopf.RawEvent, **_: Any) -> None:
            owners.on_pytorchjob(event.get("type"), _body(event))

    log.info("owner gangs: JobSets %s, LeaderWorkerSets %s, PyTorchJobs %s",
             *("watched" if on else "not installed" for on in (jobsets, lwss, pytorchjobs)))


def _discovery_handlers(registry: kopf.OperatorRegistry, discovery: HyperNodeDiscovery) -> None:
    """HyperNode discovery from node labels (hypernode_discovery.py): it reacts to topology-label changes only."""

    @kopf.on.event("v1", "nodes", registry=registry)
    def node_event(event: kopf.RawEvent, **_: Any) -> None:
        discovery.on_node(event.get("type"), _body(event))

    @kopf.on.event("topology.volcano.sh", "v1alpha1", "hypernodes", registry=registry)
    def hypernode_event(event: kopf.RawEvent, **_: Any) -> None:
        discovery.on_hypernode(event.get("type"), _body(event))


def connection_info(api_client: Any) -> kopf.ConnectionInfo:
    """kopf's credentials from the same kubernetes client configuration the rest of volcano-py uses."""
    cfg = api_client.configuration
    header = cfg.get_api_key_with_prefix("BearerToken") or cfg.get_api_key_with_prefix("authorization")
    parts = header.split(" ", 1) if header else []
    scheme, token = (parts[0], parts[1]) if len(parts) == 2 else (None, parts[0] if parts else None)
    return kopf.ConnectionInfo(
        server=cfg.host,
        ca_path=cfg.ssl_ca_cert,
        insecure=not cfg.verify_ssl,
        scheme=scheme,
        token=token,
        certificate_path=cfg.cert_file,
        private_key_path=cfg.key_file,
    )


async def _operate(registry: kopf.OperatorRegistry, settings: kopf.OperatorSettings, stop: threading.Event) -> None:
    """kopf until `stop` is set (by a signal, or by losing the Lease). The bridge polls, so no executor thread is
    left blocked on `stop.wait()`.

    kopf takes SIGTERM and SIGINT over when it starts; stopped by its own signal handler, it then waits 5 s for
    its task waiting on our stop flag, which nothing sets (kopf 1.45 `stop_flag_checker` leaves that task
    running and `run_tasks` gives such "hung" tasks 5 s): every stop of the controllers took 5.5 s. Once kopf is
    ready (its handlers installed), the signals are ours again and set the stop flag: kopf stops as on a lost
    Lease, at once."""
    stopping, ready = asyncio.Event(), asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_signal() -> None:
        stop.set()
        stopping.set()

    def take_signals() -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # signals reach the main thread's loop only, as kopf's own handlers
        try:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, on_signal)
        except (ValueError, RuntimeError, NotImplementedError) as exc:  # the bridge lives on (it carries a lost Lease)
            log.warning("controllers: SIGTERM stays kopf's (%s): a stop takes 5 s longer", exc)
            return
        log.debug("controllers ready: SIGTERM and SIGINT stop them at once")

    async def bridge() -> None:
        while not stop.is_set() and not ready.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(ready.wait(), 0.2)
        if ready.is_set():
            take_signals()
        while not stop.is_set():
            await asyncio.sleep(0.2)
        stopping.set()

    watcher = asyncio.create_task(bridge())
    try:
        await kopf.operator(registry=registry, settings=settings, clusterwide=True, standalone=True,
                            stop_flag=stopping, ready_flag=ready)
    finally:
        stop.set()
        watcher.cancel()


def run(
    api_client: Any,
    *,
    scheduler_names: Iterable[str],
    claim_unnamed: bool,
    lease: LeaderConfig | None,
    identity: str,
    stop: threading.Event,
    request_timeout: float = 30.0,
    workers: int = 16,
    controllers: Controllers | None = None,
    enabled: frozenset[str] = OPTIONAL,
    sharding: ShardingOptions | None = None,
    lease_api: Any | None = None,
) -> int:
    """Run until `stop` is set (0), or until the Lease is lost (1). `workers`: kopf's handler threads;
    `controllers`: ones built already (the e2e tests build them with a clock they move); `enabled`: the optional
    controllers that are on (`--controllers`)."""
    kube = Kube(api_client, request_timeout=request_timeout)
    metrics.controllers()  # Volcano's controller families, on /metrics from the start
    if controllers is None:
        controllers = build(Api(kube), scheduler_names, claim_unnamed)
    lost, leaving = threading.Event(), threading.Event()
    elector = None
    if lease is not None:
        def on_change(leading: bool) -> None:
            if not leading and not leaving.is_set():
                lost.set()
                stop.set()

        # `lease_api`: a client of the Lease's own (its own rate limiter), else the controllers' one
        lease_kube = Kube(lease_api, request_timeout=request_timeout) if lease_api is not None else kube
        elector = LeaderElector(lease_kube, identity, lease, on_change=on_change).start()
        log.info("waiting to acquire Lease %s/%s as %s", lease.namespace, lease.name, identity)
        while not stop.is_set() and not elector.wait_leader(1.0):
            pass
        if stop.is_set():
            leaving.set()
            elector.stop()
            return 0
    settings = kopf.OperatorSettings()
    configure(settings, workers=workers)
    controllers.watch_owners = installed(Api(kube))  # owner gangs only where their CRDs are installed
    registry = registry_for(controllers, lambda: connection_info(api_client), enabled)
    log.info("volcano-py controllers for %s starting%s; off: %s", ", ".join(sorted(scheduler_names)),
             " (also jobs that name no scheduler)" if claim_unnamed else "",
             ", ".join(sorted(OPTIONAL - enabled)) or "none")
    if CRONJOB in enabled:
        controllers.cronjobs.start()  # the CronJobs' due times: served only while this replica leads
    if HYPERNODE in enabled:
        controllers.hypernodes.start()  # HyperNode discovery and nodeCount: only the Lease holder writes
    shards = ShardingController(kube, sharding or ShardingOptions()) if SHARDING in enabled else None
    if shards is not None:
        shards.start()  # NodeShards' nodesDesired: only the Lease holder writes
    try:
        asyncio.run(_operate(registry, settings, stop))
    finally:
        controllers.cronjobs.stop()
        controllers.hypernodes.stop()
        if shards is not None:
            shards.stop()
        controllers.jobs.timers.cancel_all()
        leaving.set()
        if elector is not None:
            elector.stop(release=not lost.is_set())
    if lost.is_set():
        log.error("lost the Lease: exiting so that only the new leader acts")
        return 1
    log.info("controllers stopped")
    return 0
