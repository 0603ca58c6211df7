"""Every flag of each component: Volcano's (honoured, or accepted with a warning naming it) and volcano-py's
own. Layer: flags.
"""

from __future__ import annotations

from scheduler.api.shard import MODES, NONE
from scheduler.controllers.sharding_conf import (
    CONFIGMAP_NAME,
    CONFIGMAP_NAMESPACE,
    DEFAULT_SCHEDULER_CONFIGS,
    DEFAULT_SYNC_PERIOD,
)
from scheduler.flags.controller_gates import DEFAULT_CONTROLLERS
from scheduler.flags.syntax import Flag, FlagSet, Kind

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
        # volcano-py's own (Volcano serves its metrics over plain HTTP); not Volcano's --tls-cert-file, which
        # serves Volcano's health address and which volcano-py accepts without effect.
        Flag("metrics-secure", Kind.BOOL, "serve --listen-address over HTTPS, /metrics only to a bearer token that "
             "Kubernetes authenticates (TokenReview) and authorizes for get on /metrics (SubjectAccessReview), as "
             "controller-runtime's secure metrics; the probes stay open, and --healthz-address serves them alone",
             dest="metrics_secure", default=False),
        Flag("metrics-cert-file", Kind.STRING, "the certificate --metrics-secure serves (PEM, with its chain; "
             "default: a self-signed one made at start)", dest="metrics_cert_file"),
        Flag("metrics-key-file", Kind.STRING, "the key of --metrics-cert-file", dest="metrics_key_file"),
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
        *_klog_flags(),
    )


_FEATURE_GATES_HELP = ("Volcano's feature gates, Name=bool,Other=bool (repeatable); volcano-py acts on "
                       "SchedulingGatesQueueAdmission (default false): {what}; a gate nobody has is an error")


SCHEDULER = FlagSet("scheduler", (
    *_common_flags(names_help="schedule pods with this schedulerName (repeatable; default volcano-py; "
                   "Volcano's is volcano)", qps=2000.0, burst=2000, listen=":8080",
                   lease_name="volcano-py-scheduler", leader_elect=False),
    Flag("scheduler-conf", Kind.STRING, "volcano-scheduler.conf, re-read when it changes", dest="scheduler_conf"),
    Flag("disable-default-scheduler-config", Kind.BOOL, "refuse to start without --scheduler-conf",
         dest="disable_default_scheduler_config", default=False),
    Flag("schedule-period", Kind.DURATION, "cycle period", dest="schedule_period", default=1.0),
    Flag("schedule-on-arrival", Kind.DURATION, "also start a cycle this long after a pending pod arrives, before "
         "the period ends (0: every period only, as Volcano)", dest="schedule_on_arrival", default=0.0),
    Flag("pipeline-apply", Kind.BOOL, "start the next cycle once a cycle's binds are sent; waiting for them and "
         "the status writes go on behind it (a cycle that evicts still waits; docs/scheduler.md)",
         dest="pipeline_apply", default=False),
    Flag("bind-workers", Kind.INT, "binds (and evictions, PodGroup writes) sent at once, 1 to 256; more keeps a "
         "busy apiserver's binds of a large cycle in flight together, as kube-scheduler's one goroutine per bind",
         dest="bind_workers", default=16),
    Flag("default-queue", Kind.STRING, "queue of PodGroups that name none", dest="default_queue", default="default"),
    Flag("resource-sync-timeout", Kind.DURATION, "wait this long for the first lists before scheduling (0: do not "
         "wait)", dest="resource_sync_timeout", default=60.0),
    Flag("log-level", Kind.STRING, "info, debug or trace (trace also logs every node rejection)", dest="log_level",
         choices=("info", "debug", "trace")),
    Flag("first-cycle-partial-view", Kind.BOOL, "after a start, run one cycle (enqueue, allocate, backfill; binds "
         "only) on our pods and a few nodes listed whole, before the full pod list is in (docs/scheduler.md)",
         dest="first_cycle_partial_view", default=True),
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
    Flag("feature-gates", Kind.STRINGS, _FEATURE_GATES_HELP.format(
        what="a pending pod annotated scheduling.volcano.sh/queue-allocation-gate=true loses that scheduling gate "
        "once its queue has room"), dest="feature_gates", default=()),
    Flag("gate-removal-worker-num", Kind.INT, no_effect="gates are removed by the cycle's write-back workers, "
         "which also bind"),
    # Volcano's help and defaults (cmd/scheduler/app/options/options.go); a mode other than the three, which Volcano
    # takes as none, is refused here.
    Flag("scheduler-sharding-mode", Kind.STRING, "The node sharding mode for scheduling, none(default)|hard|soft "
         "mode is supported (hard: only the nodes of the NodeShard named --scheduler-sharding-name; soft: those "
         "first, then the others)", dest="scheduler_sharding_mode", default=NONE, choices=MODES),
    Flag("scheduler-sharding-name", Kind.STRING, "The name of shard used for this scheduler (the NodeShard it keeps "
         "to and whose status it writes)", dest="scheduler_sharding_name", default="volcano"),
    # volcano-py's own (docs/scale-out.md, "N active replicas"); 0 or 1 is one active replica, as before.
    Flag("active-shards", Kind.INT, "run N shards, each scheduled by whichever replica holds its Lease "
         "<leader-elect-lease-name>-shard-<i> (every replica of the Deployment is active on its shards; a survivor "
         "takes a lost replica's shards); nodes are split by topology into NodeShards <scheduler-name>-shard-<i>, "
         "jobs by their PodGroup's scheduling.volcano-py.io/shard annotation or a hash of its name (0 or 1: one "
         "active replica)", dest="active_shards", default=0),
    Flag("shard-topology-label", Kind.STRING, "with --active-shards, on a cluster without HyperNodes: the node "
         "label (a rack or zone) whose nodes stay in one shard (empty: nodes are split one by one)",
         dest="shard_topology_label", default=""),
), description="Run the gang scheduler against a Kubernetes cluster: every period it reads the cluster's pods, "
   "PodGroups, Queues and nodes, runs the actions and plugins of the volcano-scheduler.conf, and binds the pods of "
   "each gang all at once or not at all. It schedules pods whose schedulerName it claims (--scheduler-name). It "
   "takes the flags of Volcano's vc-scheduler, so a Volcano Deployment's args run unchanged.")

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
    Flag("worker-threads-for-cronjob", Kind.INT, no_effect="CronJobs are synced by one due-time thread and the "
         "shared handler pool"),
    Flag("max-requeue-num", Kind.INT, no_effect="a failed sync is retried with backoff (0.5 s doubling to 30 "
         "s) until it succeeds, without a requeue limit"),
    Flag("inherit-owner-annotations", Kind.BOOL, harmless=(True,),
         no_effect="pod groups always inherit their owner's volcano.sh/ annotations"),
    Flag("feature-gates", Kind.STRING, no_effect="the controllers act on no feature gate"),
    Flag("controllers", Kind.LIST, "Volcano's controller gates: '*' for all, 'name' or '+name' on, '-name' off, "
         "the first entry naming a controller decides (e.g. *,-hyperNode-controller); volcano-py can turn off "
         "hyperNode-controller, cronjob-controller, pg-controller and jobflow-controller with "
         "jobtemplate-controller, and turn on sharding-controller (off by default, as in Volcano)",
         dest="controllers", default=DEFAULT_CONTROLLERS),
    # The sharding controller's (pkg/controllers/sharding/config.go AddFlags), read when --controllers turns it on.
    Flag("scheduler-configs", Kind.LIST, "Deprecated: use a sharding ConfigMap (--sharding-configmap) instead. "
         "Format: name:type:min_util:max_util:prefer_warmup:min_nodes:max_nodes. Used only when no valid sharding "
         "ConfigMap is available.", dest="scheduler_configs",
         default=DEFAULT_SCHEDULER_CONFIGS),
    Flag("sharding-configmap", Kind.STRING, "Name of the ConfigMap that contains sharding configuration (key: "
         "sharding.yaml). When set, ConfigMap-based config takes precedence over --scheduler-configs flags and the "
         "controller watches the ConfigMap for live updates.", dest="sharding_configmap",
         default=CONFIGMAP_NAME),
    Flag("sharding-configmap-namespace", Kind.STRING, "Namespace of the sharding configuration ConfigMap.",
         dest="sharding_configmap_namespace", default=CONFIGMAP_NAMESPACE),
    Flag("shard-sync-period", Kind.DURATION, "Period for shard synchronization", dest="shard_sync_period",
         default=DEFAULT_SYNC_PERIOD),
    Flag("enable-node-event-trigger", Kind.BOOL, "Enable node event trigger for shard updates",
         dest="enable_node_event_trigger", default=True),
), description="Run the controllers of Volcano's CRDs: Jobs (their pods and PodGroups), Queues, Commands, "
   "CronJobs and JobFlows, for the Jobs whose schedulerName they claim. Takes the flags of Volcano's "
   "vc-controller-manager.")


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
    Flag("enabled-admission", Kind.LIST, "the admission paths to serve, from Volcano's webhook manager's (a path "
         "volcano-py does not check answers allowed; docs/webhook.md lists what each checks)",
         dest="enabled_admission", default=tuple(DEFAULT_ENABLED_ADMISSION.split(","))),
    Flag("enable-healthz", Kind.BOOL, "also serve /healthz on --healthz-address", dest="enable_healthz",
         default=False),
    Flag("healthz-address", Kind.STRING, "where --enable-healthz serves /healthz", dest="healthz_address",
         default=":11251"),
    Flag("log-level", Kind.STRING, "info or debug", dest="log_level", choices=("info", "debug")),
    Flag("version", Kind.BOOL, "print the version and exit", dest="version", default=False),
    Flag("scheduler-name", Kind.STRINGS, "/jobs/mutate gives a Job that names no scheduler the first of these",
         dest="scheduler_names", default=("volcano-py",)),
    Flag("feature-gates", Kind.STRINGS, _FEATURE_GATES_HELP.format(
        what="/pods/mutate gives a pod annotated scheduling.volcano.sh/queue-allocation-gate=true that "
        "scheduling gate"), dest="feature_gates", default=()),
    Flag("ca-cert-file", Kind.STRING, no_effect=_CHART_INSTALLS),
    Flag("webhook-namespace", Kind.STRING, no_effect=_CHART_INSTALLS),
    Flag("webhook-service-name", Kind.STRING, no_effect=_CHART_INSTALLS),
    Flag("webhook-url", Kind.STRING, no_effect=_CHART_INSTALLS),
    Flag("admission-conf", Kind.STRING, no_effect="volcano-py's webhook has no admission configuration"),
    Flag("graceful-shutdown-time", Kind.DURATION, no_effect="the server stops at once on SIGTERM"),
    Flag("enable-queue-allocated-pods-check", Kind.BOOL, "/queues/validate also refuses deleting a queue whose "
         "status.allocated counts pods", dest="enable_queue_allocated_pods_check", default=False),
    Flag("max-pods-per-job", Kind.INT, "/jobs/validate refuses a Job with more pods than this, on create and update "
         "(Kubernetes' Indexed Job limit; the CRD's ceiling too)", dest="max_pods_per_job", default=100_000),
    Flag("pod-template-dry-run", Kind.BOOL, "/jobs/validate tries each task's pod with a server-side dry-run create "
         "and refuses a Job whose pods Kubernetes refuses", dest="pod_template_dry_run", default=True,
         negatable=True),
    Flag("max-queue-depth", Kind.INT, no_effect="queue depth is not checked by volcano-py's webhook"),
    Flag("enable-root-queue-protection", Kind.BOOL, harmless=(True,),
         no_effect="queue changes are not checked by volcano-py's webhook"),
    *_klog_flags(),
), description="Serve the admission webhook that checks and defaults Volcano Jobs, Queues, PodGroups and pods "
   "before the apiserver stores them (HTTPS only; the chart installs the webhook configurations). Takes the flags "
   "of Volcano's vc-webhook-manager.")
