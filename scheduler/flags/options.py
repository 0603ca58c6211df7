"""The parsed command line of each component, as a frozen value with the rules that combine its flags
(Volcano's defaults, klog's verbosity, client-go's rate limits). Layer: flags.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from scheduler.flags.components import CONTROLLERS, SCHEDULER, WEBHOOK
from scheduler.flags.controller_gates import ControllerGates, parse_controller_gates
from scheduler.flags.gates import FeatureGates, parse_feature_gates
from scheduler.flags.syntax import Ignored, Parsed


def client_rate_limit(qps: float | None, burst: int | None, default_qps: float,
                      default_burst: int) -> tuple[float, int] | None:
    """(qps, burst) of the client-side token bucket, None for none: client-go's rest.Config rules (0 means its
    defaults 5 and 10; a negative qps no limit), the component's Volcano default for the one not given."""
    if qps is None and burst is None:
        return None
    qps = default_qps if qps is None else qps
    burst = default_burst if burst is None else burst
    qps, burst = (qps or 5.0), (burst or 10)
    return (qps, burst) if qps > 0 else None


def info_or_debug(log_level: str | None, verbosity: int | None) -> str:
    """--log-level, else klog's -v (4 and more is debug)."""
    if log_level is not None:
        return log_level
    return "debug" if (verbosity or 0) >= 4 else "info"


@dataclass(frozen=True, slots=True, kw_only=True)
class CommonOptions:
    kubeconfig: str | None
    master: str | None
    scheduler_names: tuple[str, ...]
    kube_api_qps: float | None
    kube_api_burst: int | None
    listen_address: str | None
    enable_metrics: bool | None
    healthz_address: str
    enable_healthz: bool
    metrics_secure: bool
    metrics_cert_file: str | None
    metrics_key_file: str | None
    leader_elect: bool
    leader_elect_namespace: str
    lock_object_namespace: str
    leader_elect_lease_name: str
    leader_elect_identity: str | None
    leader_elect_lease_duration: float
    leader_elect_renew_deadline: float
    leader_elect_retry_period: float
    version: bool
    verbosity: int | None
    log_level: str | None
    ignored: tuple[Ignored, ...] = ()

    _DEFAULT_LISTEN = ":8080"
    _DEFAULT_QPS = 2000.0
    _DEFAULT_BURST = 2000

    @property
    def lease_namespace(self) -> str:
        # Volcano's server.go: a non-empty --lock-object-namespace overrides the resource namespace.
        return self.lock_object_namespace or self.leader_elect_namespace

    @property
    def serve_addresses(self) -> tuple[str, ...]:
        """Where to serve /metrics, /healthz and /readyz (every address serves all three).

        volcano-py's `--listen-address` alone serves; Volcano's `--enable-metrics` serves on its default
        address; `--enable-metrics=false` serves no metrics address; `--enable-healthz` adds Volcano's
        health address (cmd/*/app/server.go)."""
        addresses = [self.metrics_address] if self.metrics_address is not None else []
        if self.enable_healthz and self.healthz_address not in addresses:
            addresses.append(self.healthz_address)
        return tuple(addresses)

    @property
    def metrics_address(self) -> str | None:
        """The address that serves /metrics, None for none."""
        metrics_on = self.enable_metrics if self.enable_metrics is not None else self.listen_address is not None
        return (self.listen_address or self._DEFAULT_LISTEN) if metrics_on else None

    @property
    def serving(self) -> tuple[tuple[str, bool], ...]:
        """(address, secure) for each of `serve_addresses`. With --metrics-secure the metrics address serves
        HTTPS and guards /metrics; any other address (Volcano's health address) serves the probes alone, in plain
        HTTP, never an unguarded /metrics."""
        return tuple((a, self.metrics_secure and a == self.metrics_address) for a in self.serve_addresses)

    def metrics_tls_problem(self) -> str | None:
        """Why the --metrics-* flags do not go together, None when they do."""
        if (self.metrics_cert_file is None) != (self.metrics_key_file is None):
            return "--metrics-cert-file and --metrics-key-file go together"
        if self.metrics_cert_file is not None and not self.metrics_secure:
            return "--metrics-cert-file needs --metrics-secure"
        if self.metrics_secure and not any(secure for _, secure in self.serving):
            return "--metrics-secure needs a metrics address (--listen-address or --enable-metrics)"
        return None

    @property
    def rate_limit(self) -> tuple[float, int] | None:
        """(qps, burst) of the client-side token bucket, None for none: client-go's rest.Config rules (0 means
        its defaults 5 and 10; a negative qps no limit), the component's Volcano defaults for the one not given."""
        return client_rate_limit(self.kube_api_qps, self.kube_api_burst, self._DEFAULT_QPS, self._DEFAULT_BURST)


@dataclass(frozen=True, slots=True, kw_only=True)
class SchedulerOptions(CommonOptions):
    scheduler_conf: str | None
    disable_default_scheduler_config: bool
    schedule_period: float
    schedule_on_arrival: float
    pipeline_apply: bool
    default_queue: str
    resource_sync_timeout: float
    first_cycle_partial_view: bool
    partial_gang_timeout: float
    request_timeout: float
    feature_gates: FeatureGates
    scheduler_sharding_mode: str = "none"
    scheduler_sharding_name: str = "volcano"
    active_shards: int = 0
    bind_workers: int = 16
    shard_topology_label: str = ""

    @property
    def sharding(self) -> tuple[str, str] | None:
        """(mode, NodeShard name) with sharding on; None with --scheduler-sharding-mode none."""
        if self.scheduler_sharding_mode == "none":
            return None
        return self.scheduler_sharding_mode, self.scheduler_sharding_name

    @property
    def level(self) -> str:
        """info, debug or trace: --log-level, else klog's -v (4 is debug, 5 and more trace)."""
        if self.log_level is not None:
            return self.log_level
        v = self.verbosity or 0
        return "trace" if v >= 5 else "debug" if v >= 4 else "info"


@dataclass(frozen=True, slots=True, kw_only=True)
class ControllerOptions(CommonOptions):
    claim_unnamed: bool
    worker_threads: int | None
    worker_threads_for_podgroup: int | None
    worker_threads_for_queue: int | None
    worker_threads_for_gc: int | None
    controllers: ControllerGates = ControllerGates()
    scheduler_configs: tuple[str, ...] = ()
    sharding_configmap: str = "volcano-sharding-configmap"
    sharding_configmap_namespace: str = "volcano-system"
    shard_sync_period: float = 60.0
    enable_node_event_trigger: bool = True

    _DEFAULT_LISTEN = ":8081"
    _DEFAULT_QPS = 50.0
    _DEFAULT_BURST = 100
    DEFAULT_WORKERS = 16
    # Volcano's defaults for a count not given (controller-manager options.go)
    _VOLCANO_WORKERS = {"worker_threads": 3, "worker_threads_for_podgroup": 5, "worker_threads_for_queue": 5,
                        "worker_threads_for_gc": 1}

    @property
    def level(self) -> str:
        return info_or_debug(self.log_level, self.verbosity)

    @property
    def library_debug(self) -> bool:
        """kopf's and aiohttp's own debug lines: with --log-level=debug, or from -v=6 (client-go logs its
        requests from 6 on)."""
        return self.log_level == "debug" or (self.verbosity or 0) >= 6

    @property
    def workers(self) -> int:
        """Handler threads: the sum of Volcano's per-controller counts when any is given, else 16."""
        counts = {name: getattr(self, name) for name in self._VOLCANO_WORKERS}
        if all(count is None for count in counts.values()):
            return self.DEFAULT_WORKERS
        return max(1, sum(self._VOLCANO_WORKERS[n] if c is None else c for n, c in counts.items()))


def _with_gates(parsed: Parsed) -> tuple[dict[str, object], tuple[Ignored, ...]]:
    """The values with `--feature-gates` parsed into `FeatureGates` (FlagError for a value Volcano refuses), and
    the warnings with one per gate volcano-py does not act on."""
    given = parsed.values["feature_gates"]
    assert isinstance(given, tuple)
    gates = parse_feature_gates(given)
    return {**parsed.values, "feature_gates": gates}, (*parsed.ignored, *gates.ignored())


def parse_scheduler(argv: Sequence[str]) -> SchedulerOptions:
    values, ignored = _with_gates(SCHEDULER.parse(argv))
    return SchedulerOptions(**values, ignored=ignored)  # type: ignore[arg-type]


def parse_controllers(argv: Sequence[str]) -> ControllerOptions:
    parsed = CONTROLLERS.parse(argv)
    given = parsed.values["controllers"]
    assert isinstance(given, tuple)
    values = {**parsed.values, "controllers": parse_controller_gates(given)}
    return ControllerOptions(**values, ignored=parsed.ignored)  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True, kw_only=True)
class WebhookOptions:
    kubeconfig: str | None
    master: str | None
    kube_api_qps: float | None
    kube_api_burst: int | None
    tls_cert_file: str | None
    tls_private_key_file: str | None
    listen_address: str
    port: int
    enabled_admission: tuple[str, ...]
    scheduler_names: tuple[str, ...]
    enable_healthz: bool
    healthz_address: str
    log_level: str | None
    version: bool
    verbosity: int | None
    enable_queue_allocated_pods_check: bool
    max_pods_per_job: int
    pod_template_dry_run: bool
    feature_gates: FeatureGates
    ignored: tuple[Ignored, ...] = ()

    @property
    def level(self) -> str:
        return info_or_debug(self.log_level, self.verbosity)

    @property
    def rate_limit(self) -> tuple[float, int] | None:
        return client_rate_limit(self.kube_api_qps, self.kube_api_burst, 50.0, 100)


def parse_webhook(argv: Sequence[str]) -> WebhookOptions:
    values, ignored = _with_gates(WEBHOOK.parse(argv))
    return WebhookOptions(**values, ignored=ignored)  # type: ignore[arg-type]
