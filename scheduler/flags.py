"""The command lines of `volcano-py scheduler` and `volcano-py controllers`, in Go's flag syntax.

A platform team swaps Volcano's image for volcano-py's and keeps the Deployment's `args`, so both commands
take every flag of Volcano's vc-scheduler and vc-controller-manager (their `cmd/*/app/options/options.go`, the
leader-election flags of component-base, klog's logging flags, `--feature-gates`) besides volcano-py's own.
A flag is either honoured (it sets an option below) or accepted with one warning that names it and says why
it has no effect. A flag nobody has is an error naming it and the closest known one.

The syntax is pflag's, which Volcano's binaries parse with (and Go's `flag`, which klog's flags come from):
`--name=value`, `--name value`, `-name=value`, `-v=3`, `-v3`; a boolean is `--name` or `--name=true|false`
(never `--name false`); `_` and `-` are the same in names (component-base's WordSepNormalizeFunc); `--` ends
the flags. Arguments that are not flags are ignored with a warning, as Volcano ignores them: Volcano's own
chart passes a literal `2>&1`.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum

from scheduler.durations import DurationError, format_duration, parse_seconds


class FlagError(Exception):
    """A command line that cannot be parsed; the message names the flag (and the closest known one)."""

    def __init__(self, message: str, *, flag: str | None = None, suggestion: str | None = None) -> None:
        super().__init__(message)
        self.flag = flag
        self.suggestion = suggestion


class HelpRequested(Exception):  # noqa: N818 - not an error: `-h` / `--help`
    """`-h` or `--help`: print `usage()` and exit 0, as Go's flag package does."""


class Kind(Enum):
    BOOL = "bool"
    STRING = "string"
    INT = "int"
    FLOAT = "float"
    DURATION = "duration"
    STRINGS = "stringArray"  # repeatable, one item per occurrence (pflag's StringArray: --scheduler-name)
    LIST = "strings"  # repeatable and comma separated (pflag's StringSlice: --node-selector)


@dataclass(frozen=True, slots=True)
class Flag:
    name: str
    kind: Kind
    help: str = ""
    dest: str | None = None  # the option it sets; None: accepted with a warning
    default: object = None
    aliases: tuple[str, ...] = ()
    no_effect: str = ""  # why it has no effect in volcano-py (the warning's reason)
    harmless: tuple[object, ...] = ()  # values that ask for what volcano-py does anyway: no warning
    negatable: bool = False  # also `--no-NAME`, volcano-py's own spelling of `--NAME=false`
    choices: tuple[str, ...] = ()

    @property
    def honoured(self) -> bool:
        return self.dest is not None


@dataclass(frozen=True, slots=True)
class Ignored:
    """An argument accepted without effect: a flag volcano-py has no use for, or a stray positional argument."""

    arg: str  # the flag's name (`node-worker-threads`) or the argument as given (`2>&1`)
    reason: str
    positional: bool = False

    def message(self) -> str:
        if self.positional:
            return f"argument {self.arg!r} is not a flag and has no effect ({self.reason})"
        return f"--{self.arg} has no effect in volcano-py: {self.reason}"


@dataclass(frozen=True, slots=True)
class Parsed:
    values: Mapping[str, object]  # every option, given or default
    given: frozenset[str]  # the options set on the command line
    ignored: tuple[Ignored, ...]


@dataclass(frozen=True, slots=True)
class FlagSet:
    command: str
    flags: tuple[Flag, ...]
    _index: dict[str, Flag] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        index: dict[str, Flag] = {}
        for flag in self.flags:
            for name in (flag.name, *flag.aliases):
                if name in index:
                    raise ValueError(f"flag --{name} is declared twice")
                index[name] = flag
        object.__setattr__(self, "_index", index)

    def lookup(self, name: str) -> Flag | None:
        return self._index.get(normalize(name))

    def parse(self, argv: Sequence[str]) -> Parsed:
        values: dict[str, object] = {f.dest: _copy(f.default) for f in self.flags if f.dest is not None}
        given: set[str] = set()
        ignored: list[Ignored] = []
        args = list(argv)
        i = 0
        while i < len(args):
            arg, i = args[i], i + 1
            if arg == "--":
                ignored += [_positional(a) for a in args[i:]]
                break
            if not arg.startswith("-") or arg == "-":
                ignored.append(_positional(arg))
                continue
            body = arg[2:] if arg.startswith("--") else arg[1:]
            if not body or body[0] in "-=":
                raise FlagError(f"bad flag syntax: {arg}")
            name, has_value, text = body.partition("=")
            flag, value = self._resolve(arg, normalize(name), bool(has_value), text)
            if flag.kind is not Kind.BOOL and value is None:
                if i >= len(args):
                    raise FlagError(f"flag needs an argument: --{flag.name}", flag=flag.name)
                value, i = args[i], i + 1
            converted = _convert(flag, value)
            if flag.dest is not None:
                _store(values, given, flag, converted)
            elif converted not in flag.harmless and all(w.arg != flag.name for w in ignored):
                ignored.append(Ignored(flag.name, flag.no_effect))  # once, however often it is given
        return Parsed(values, frozenset(given), tuple(ignored))

    def _resolve(self, arg: str, name: str, has_value: bool, text: str) -> tuple[Flag, str | None]:
        """The flag `arg` names, and its inline value (None: none given; booleans then mean true)."""
        if name in ("h", "help"):
            raise HelpRequested
        flag = self._index.get(name)
        if flag is not None:
            return flag, text if has_value else None
        if name.startswith("no-"):
            negated = self._index.get(name[3:])
            if negated is not None and negated.negatable:
                if has_value:
                    raise FlagError(f"flag --{name} takes no value: {arg}", flag=name)
                return negated, "false"
        short = self._index.get(name[:1])
        if short is not None and len(name[:1]) == 1 and name[1:].isdigit() and not has_value:
            return short, name[1:]  # pflag's shorthand with the value attached: -v3
        raise self._unknown(arg, name)

    def _unknown(self, arg: str, name: str) -> FlagError:
        close = difflib.get_close_matches(name, list(self._index), n=1, cutoff=0.6)
        hint = f" (did you mean --{close[0]}?)" if close else ""
        return FlagError(f"unknown flag: {arg.partition('=')[0]}{hint}", flag=name,
                         suggestion=close[0] if close else None)

    def usage(self) -> str:
        lines = [f"Usage of volcano-py {self.command}:"]
        for flag in sorted(self.flags, key=lambda f: (not f.honoured, f.name)):  # what works first
            spellings = (flag.name, *flag.aliases, *((f"no-{flag.name}",) if flag.negatable else ()))
            names = ", ".join(f"--{n}" for n in spellings)
            kind = "" if flag.kind is Kind.BOOL else f" {flag.kind.value}"
            text = flag.help if flag.honoured else f"no effect in volcano-py: {flag.no_effect}"
            default = _show_default(flag)
            lines.append(f"  {names}{kind}\n        {text}{default}")
        return "\n".join(lines) + "\n"


def normalize(name: str) -> str:
    return name.replace("_", "-")


def parse_bool(text: str) -> bool:
    """Go's strconv.ParseBool."""
    if text in ("1", "t", "T", "true", "TRUE", "True"):
        return True
    if text in ("0", "f", "F", "false", "FALSE", "False"):
        return False
    raise ValueError(f"invalid boolean {text!r}")


def _convert(flag: Flag, value: str | None) -> object:
    try:
        match flag.kind:
            case Kind.BOOL:
                return True if value is None else parse_bool(value)
            case Kind.INT:
                return int(str(value), 0) if str(value).lower().startswith(("0x", "0o", "0b")) else int(str(value))
            case Kind.FLOAT:
                return float(str(value))
            case Kind.DURATION:
                return parse_seconds(str(value))
            case Kind.LIST:
                return tuple(v.strip() for v in str(value).split(",") if v.strip())
            case _:
                text = str(value)
                if flag.choices and text not in flag.choices:
                    raise ValueError(f"must be one of {', '.join(flag.choices)}")
                return text
    except (ValueError, DurationError) as exc:
        raise FlagError(f"invalid argument {value!r} for --{flag.name}: {exc}", flag=flag.name) from None


def _store(values: dict[str, object], given: set[str], flag: Flag, value: object) -> None:
    assert flag.dest is not None
    first = flag.dest not in given  # pflag: the first occurrence replaces the default, later ones append
    given.add(flag.dest)
    if flag.kind in (Kind.STRINGS, Kind.LIST):
        items = value if isinstance(value, tuple) else (value,)
        before = () if first else values[flag.dest]
        assert isinstance(before, tuple)
        values[flag.dest] = (*before, *items)
    else:
        values[flag.dest] = value


def _copy(default: object) -> object:
    return tuple(default) if isinstance(default, list) else default


def _positional(arg: str) -> Ignored:
    return Ignored(arg, "Volcano's components ignore it too", positional=True)


def _show_default(flag: Flag) -> str:
    if flag.default in (None, False, "", ()):
        return ""
    if flag.kind is Kind.DURATION and isinstance(flag.default, int | float):
        return f" (default {format_duration(float(flag.default))})"
    if isinstance(flag.default, tuple):
        return f" (default [{','.join(map(str, flag.default))}])"
    return f" (default {flag.default})"


# ---------------------------------------------------------------------------------------------- the tables
# Volcano's flags: cmd/scheduler/app/options/options.go, cmd/controller-manager/app/options/options.go,
# pkg/controllers/sharding (its FlagProvider), both cmd/*/main.go (klog.InitFlags, --log-flush-frequency,
# --feature-gates, component-base's BindLeaderElectionFlags with pkg/util's LeaderElectionDefault).

_PLAIN_HTTP = "volcano-py serves /healthz and /metrics over plain HTTP"
_STDERR = "volcano-py writes every log line to stderr at once"


def _klog_flags() -> tuple[Flag, ...]:
    return (
        Flag("v", Kind.INT, "log verbosity, as klog's: 4 debug, 5 and more trace (--log-level wins)", dest="verbosity",
             default=None),
        Flag("logtostderr", Kind.BOOL, harmless=(True,), no_effect=_STDERR),
        Flag("alsologtostderr", Kind.BOOL, harmless=(True,), no_effect=_STDERR),
        Flag("alsologtostderrthreshold", Kind.STRING, no_effect=_STDERR),
        Flag("stderrthreshold", Kind.STRING, no_effect=_STDERR),
        Flag("legacy-stderr-threshold-behavior", Kind.BOOL, no_effect=_STDERR),
        Flag("add-dir-header", Kind.BOOL, harmless=(False,), no_effect=_STDERR),
        Flag("one-output", Kind.BOOL, no_effect=_STDERR),
        Flag("skip-headers", Kind.BOOL, harmless=(False,), no_effect=_STDERR),
        Flag("skip-log-headers", Kind.BOOL, harmless=(False,), no_effect=_STDERR),
        Flag("log-dir", Kind.STRING, no_effect=_STDERR),
        Flag("log-file", Kind.STRING, no_effect=_STDERR),
        Flag("log-file-max-size", Kind.INT, no_effect=_STDERR),
        Flag("log-backtrace-at", Kind.STRING, no_effect=_STDERR),
        Flag("vmodule", Kind.STRING, no_effect="volcano-py has one verbosity for all its modules"),
        Flag("log-flush-frequency", Kind.DURATION, no_effect=_STDERR),
    )


def _common_flags(*, names_help: str, qps: float, burst: int, listen: str, lease_name: str,
                  leader_elect: bool) -> tuple[Flag, ...]:
    return (
        Flag("kubeconfig", Kind.STRING, "kubeconfig file (default: in-cluster config, else $KUBECONFIG)",
             dest="kubeconfig"),
        Flag("master", Kind.STRING, "the apiserver's address (overrides the kubeconfig's)", dest="master"),
        Flag("scheduler-name", Kind.STRINGS, names_help, dest="scheduler_names", default=("volcano-py",)),
        Flag("kube-api-qps", Kind.FLOAT, f"requests per second to the apiserver, client-go's token bucket (default: "
             f"unlimited; {qps:g} if only --kube-api-burst is given; < 0 unlimited)", dest="kube_api_qps"),
        Flag("kube-api-burst", Kind.INT, f"requests at once above --kube-api-qps (default {burst} when a limit is "
             "set)", dest="kube_api_burst"),
        Flag("listen-address", Kind.STRING, "serve /metrics, /healthz and /readyz on [HOST]:PORT; given alone it "
             f"turns metrics on (with --enable-metrics alone: {listen})", dest="listen_address"),
        Flag("enable-metrics", Kind.BOOL, f"serve /metrics on --listen-address (default {listen})",
             dest="enable_metrics"),
        Flag("healthz-address", Kind.STRING, "where --enable-healthz serves /healthz", dest="healthz_address",
             default=":11251"),
        Flag("enable-healthz", Kind.BOOL, "serve /healthz (and /readyz) on --healthz-address", dest="enable_healthz",
             default=False),
        Flag("leader-elect", Kind.BOOL, "act only while holding the coordination.k8s.io Lease (run 2+ replicas)",
             dest="leader_elect", default=leader_elect, negatable=True),
        Flag("leader-elect-namespace", Kind.STRING, "namespace of the Lease (created if missing)",
             dest="leader_elect_namespace", default="volcano-py-system",
             aliases=("leader-elect-resource-namespace",)),
        Flag("lock-object-namespace", Kind.STRING, "deprecated spelling of --leader-elect-resource-namespace, which "
             "it overrides (as in Volcano)", dest="lock_object_namespace", default=""),
        Flag("leader-elect-lease-name", Kind.STRING, "name of the Lease", dest="leader_elect_lease_name",
             default=lease_name, aliases=("leader-elect-resource-name",)),
        Flag("leader-elect-identity", Kind.STRING, "this replica's holderIdentity (default <hostname>-<pid>)",
             dest="leader_elect_identity"),
        Flag("leader-elect-lease-duration", Kind.DURATION, "how long a standby waits after the last renew it saw",
             dest="leader_elect_lease_duration", default=15.0),
        Flag("leader-elect-renew-deadline", Kind.DURATION, "the leader stops acting if it has not renewed for this "
             "long", dest="leader_elect_renew_deadline", default=10.0),
        Flag("leader-elect-retry-period", Kind.DURATION, "how often to renew or try to acquire",
             dest="leader_elect_retry_period", default=2.0),
        # Volcano's server.go builds a Lease lock whatever this says; so does volcano-py.
        Flag("leader-elect-resource-lock", Kind.STRING, harmless=("leases",),
             no_effect="the lock is always a coordination.k8s.io Lease"),
        Flag("version", Kind.BOOL, "print the version and exit", dest="version", default=False),
        Flag("ca-cert-file", Kind.STRING, no_effect=_PLAIN_HTTP),
        Flag("tls-cert-file", Kind.STRING, no_effect=_PLAIN_HTTP),
        Flag("tls-private-key-file", Kind.STRING, no_effect=_PLAIN_HTTP),
        Flag("feature-gates", Kind.STRING, no_effect="volcano-py has no feature gates"),
        *_klog_flags(),
    )


SCHEDULER = FlagSet("scheduler", (
    *_common_flags(names_help="schedule pods with this schedulerName (repeatable; default volcano-py; "
                   "Volcano's is volcano)", qps=2000.0, burst=2000, listen=":8080",
                   lease_name="volcano-py-scheduler", leader_elect=False),
    Flag("scheduler-conf", Kind.STRING, "volcano-scheduler.conf, re-read when it changes", dest="scheduler_conf"),
    Flag("disable-default-scheduler-config", Kind.BOOL, "refuse to start without --scheduler-conf",
         dest="disable_default_scheduler_config", default=False),
    Flag("schedule-period", Kind.DURATION, "cycle period", dest="schedule_period", default=1.0),
    Flag("default-queue", Kind.STRING, "queue of PodGroups that name none", dest="default_queue", default="default"),
    Flag("resource-sync-timeout", Kind.DURATION, "wait this long for the first lists before scheduling (0: do not "
         "wait)", dest="resource_sync_timeout", default=60.0),
    Flag("log-level", Kind.STRING, "info, debug or trace (trace also logs every node rejection)", dest="log_level",
         choices=("info", "debug", "trace")),
    Flag("partial-gang-timeout", Kind.DURATION, "give up a gang left partly bound this long: evict its "
         "controller-owned pods", dest="partial_gang_timeout", default=60.0),
    Flag("request-timeout", Kind.DURATION, "timeout of one API request", dest="request_timeout", default=30.0),
    Flag("priority-class", Kind.BOOL, harmless=(True,), no_effect="PriorityClasses always order and preempt"),
    Flag("percentage-nodes-to-find", Kind.INT, harmless=(100,),
         no_effect="every node is considered for every task"),
    Flag("minimum-feasible-nodes", Kind.INT, no_effect="every node is considered for every task"),
    Flag("minimum-percentage-nodes-to-find", Kind.INT, no_effect="every node is considered for every task"),
    Flag("node-worker-threads", Kind.INT, no_effect="nodes come from one watch; there is no node worker pool"),
    Flag("resync-period", Kind.DURATION, no_effect="watches never resync; every change arrives as an event"),
    Flag("plugins-dir", Kind.STRING, no_effect="plugins are Python modules listed in scheduler/plugins"),
    Flag("csi-storage", Kind.BOOL, no_effect="volcano-py does not watch CSIDriver or CSIStorageCapacity"),
    Flag("ignored-provisioners", Kind.LIST, no_effect="volcano-py does not count PVC requests"),
    Flag("enable-pprof", Kind.BOOL, harmless=(False,), no_effect="there is no Go profiler in Python"),
    Flag("cache-dumper", Kind.BOOL, no_effect="use `volcano-py explain` to see the scheduler's view"),
    Flag("cache-dump-dir", Kind.STRING, no_effect="use `volcano-py explain` to see the scheduler's view"),
    Flag("node-selector", Kind.LIST, no_effect="volcano-py schedules onto every node"),
    Flag("gate-removal-worker-num", Kind.INT, no_effect="volcano-py does not remove scheduling gates"),
    Flag("scheduler-sharding-mode", Kind.STRING, harmless=("none",), no_effect="volcano-py does not shard nodes"),
    Flag("scheduler-sharding-name", Kind.STRING, no_effect="volcano-py does not shard nodes"),
))

_SHARDING = "volcano-py has no sharding controller"

CONTROLLERS = FlagSet("controllers", (
    *_common_flags(names_help="act on Jobs and pods with this schedulerName (repeatable; default volcano-py; "
                   "Volcano's is volcano)", qps=50.0, burst=100, listen=":8081",
                   lease_name="volcano-py-controllers", leader_elect=True),
    Flag("claim-unnamed", Kind.BOOL, "also act on Jobs that name no scheduler", dest="claim_unnamed", default=False),
    Flag("log-level", Kind.STRING, "info or debug (debug also logs kopf's own debug lines)", dest="log_level",
         choices=("info", "debug")),
    # volcano-py's job, pod group and queue controllers share one pool of handler threads (kopf's executor):
    # Volcano's per-controller worker counts add up to its size.
    Flag("worker-threads", Kind.INT, "job handler threads (added to the shared pool)", dest="worker_threads"),
    Flag("worker-threads-for-podgroup", Kind.INT, "pod group handler threads (added to the shared pool)",
         dest="worker_threads_for_podgroup"),
    Flag("worker-threads-for-queue", Kind.INT, "queue handler threads (added to the shared pool)",
         dest="worker_threads_for_queue"),
    Flag("worker-threads-for-gc", Kind.INT, "finished-job clean-up threads (added to the shared pool)",
         dest="worker_threads_for_gc"),
    Flag("worker-threads-for-cronjob", Kind.INT, no_effect="volcano-py has no CronJob controller"),
    Flag("max-requeue-num", Kind.INT, no_effect="kopf retries handlers itself, without a requeue limit"),
    Flag("inherit-owner-annotations", Kind.BOOL, harmless=(True,),
         no_effect="pod groups always inherit their owner's volcano.sh/ annotations"),
    Flag("controllers", Kind.LIST, no_effect="volcano-py always runs its job, queue, pod group and command "
         "controllers"),
    Flag("scheduler-configs", Kind.LIST, no_effect=_SHARDING),
    Flag("sharding-configmap", Kind.STRING, no_effect=_SHARDING),
    Flag("sharding-configmap-namespace", Kind.STRING, no_effect=_SHARDING),
    Flag("shard-sync-period", Kind.DURATION, no_effect=_SHARDING),
    Flag("enable-node-event-trigger", Kind.BOOL, no_effect=_SHARDING),
))


# The paths Volcano's webhook manager enables by default (cmd/webhook-manager/app/options/options.go).
DEFAULT_ENABLED_ADMISSION = ("/jobs/mutate,/jobs/validate,/pods/mutate,/queues/mutate,/queues/validate,"
                             "/podgroups/mutate,/podgroups/validate,/jobflows/validate,/hypernodes/validate,"
                             "/cronjobs/validate")
_CHART_INSTALLS = "the chart installs the webhook configurations; the server does not write them"

WEBHOOK = FlagSet("webhook", (
    Flag("kubeconfig", Kind.STRING, "kubeconfig file (default: in-cluster config, else $KUBECONFIG)",
         dest="kubeconfig"),
    Flag("master", Kind.STRING, "the apiserver's address (overrides the kubeconfig's)", dest="master"),
    Flag("kube-api-qps", Kind.FLOAT, "requests per second to the apiserver (default: unlimited)",
         dest="kube_api_qps"),
    Flag("kube-api-burst", Kind.INT, "requests at once above --kube-api-qps", dest="kube_api_burst"),
    Flag("tls-cert-file", Kind.STRING, "the serving certificate (PEM; with its chain)", dest="tls_cert_file"),
    Flag("tls-private-key-file", Kind.STRING, "the key of --tls-cert-file", dest="tls_private_key_file"),
    Flag("listen-address", Kind.STRING, "the address to serve admission on (default: all)", dest="listen_address",
         default=""),
    Flag("port", Kind.INT, "the port to serve admission on", dest="port", default=8443),
    Flag("enabled-admission", Kind.LIST, "the admission paths to serve (Volcano's; /jobs/validate checks, the "
         "others answer allowed)", dest="enabled_admission", default=tuple(DEFAULT_ENABLED_ADMISSION.split(","))),
    Flag("enable-healthz", Kind.BOOL, "also serve /healthz on --healthz-address", dest="enable_healthz",
         default=False),
    Flag("healthz-address", Kind.STRING, "where --enable-healthz serves /healthz", dest="healthz_address",
         default=":11251"),
    Flag("log-level", Kind.STRING, "info or debug", dest="log_level", choices=("info", "debug")),
    Flag("version", Kind.BOOL, "print the version and exit", dest="version", default=False),
    Flag("scheduler-name", Kind.STRINGS, "/jobs/mutate gives a Job that names no scheduler the first of these",
         dest="scheduler_names", default=("volcano-py",)),
    Flag("feature-gates", Kind.STRING, no_effect="volcano-py has no feature gates"),
    Flag("ca-cert-file", Kind.STRING, no_effect=_CHART_INSTALLS),
    Flag("webhook-namespace", Kind.STRING, no_effect=_CHART_INSTALLS),
    Flag("webhook-service-name", Kind.STRING, no_effect=_CHART_INSTALLS),
    Flag("webhook-url", Kind.STRING, no_effect=_CHART_INSTALLS),
    Flag("admission-conf", Kind.STRING, no_effect="volcano-py's webhook has no admission configuration"),
    Flag("graceful-shutdown-time", Kind.DURATION, no_effect="the server stops at once on SIGTERM"),
    Flag("enable-queue-allocated-pods-check", Kind.BOOL, harmless=(False,),
         no_effect="queue deletion is not checked by volcano-py's webhook"),
    Flag("max-queue-depth", Kind.INT, no_effect="queue depth is not checked by volcano-py's webhook"),
    Flag("enable-root-queue-protection", Kind.BOOL, harmless=(True,),
         no_effect="queue changes are not checked by volcano-py's webhook"),
    *_klog_flags(),
))

# ---------------------------------------------------------------------------------------------- the options
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
        metrics_on = self.enable_metrics if self.enable_metrics is not None else self.listen_address is not None
        addresses = [self.listen_address or self._DEFAULT_LISTEN] if metrics_on else []
        if self.enable_healthz and self.healthz_address not in addresses:
            addresses.append(self.healthz_address)
        return tuple(addresses)

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
    default_queue: str
    resource_sync_timeout: float
    partial_gang_timeout: float
    request_timeout: float

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


def parse_scheduler(argv: Sequence[str]) -> SchedulerOptions:
    parsed = SCHEDULER.parse(argv)
    return SchedulerOptions(**parsed.values, ignored=parsed.ignored)  # type: ignore[arg-type]


def parse_controllers(argv: Sequence[str]) -> ControllerOptions:
    parsed = CONTROLLERS.parse(argv)
    return ControllerOptions(**parsed.values, ignored=parsed.ignored)  # type: ignore[arg-type]


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
    ignored: tuple[Ignored, ...] = ()

    @property
    def level(self) -> str:
        return info_or_debug(self.log_level, self.verbosity)

    @property
    def rate_limit(self) -> tuple[float, int] | None:
        return client_rate_limit(self.kube_api_qps, self.kube_api_burst, 50.0, 100)


def parse_webhook(argv: Sequence[str]) -> WebhookOptions:
    parsed = WEBHOOK.parse(argv)
    return WebhookOptions(**parsed.values, ignored=parsed.ignored)  # type: ignore[arg-type]
