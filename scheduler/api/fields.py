"""Layer `api`: every field the scheduler reads from an object, in one table, each with its parser and bounds.

A field is parsed once, at the cache's edge (`cache/parse.py`, through `api/convert.py` and `api/pod.py`), into
the typed fields of the infos; plugins read those, never the raw object. What a user may write in a Pod, a
PodGroup, a Queue, a Node or a HyperNode is hostile until parsed: a number is finite and bounded, a string is
bounded in length, a boolean is one of Go's `strconv.ParseBool` spellings, a duration is Go's, a quantity goes
through the quantity parser (`api/resources.py`, itself bounded). The scheduler reads no batch.volcano.sh Job:
what a Job says to the scheduler (`sla-waiting-time`, the fallback minimum) reaches it on the Job's PodGroup.

A value that does not parse gives a `FieldInvalid` reason (typed, with the field's path) and either

- a safe default (`Field.fallback`): the one that protects others, e.g. a pod whose `volcano.sh/preemptable`
  cannot be read is protected, as in Volcano (pkg/scheduler/api/pod_info.go `GetPodPreemptable`); or
- where no default is safe (`REJECT`: a Node whose allocatable cannot be read, a Queue whose capability is
  garbage, a PodGroup whose minMember is not a count), the object is left out with that reason and everything
  else goes on (`FieldError`, which the cache catches per object).

Readers name the fields they read through `field(kind, path)`, so a reader of a field missing from the table
fails at import; tests/api/test_fields.py records every key a reader touches on a live object and fails on one
the table does not list.
"""

from __future__ import annotations

# The parsers, the reason and `Field` live in api/field_parsers.py; re-exported here, so readers import one module.
from scheduler.api import field_readers as _readers
from scheduler.api.field_parsers import (
    ANNOTATIONS as ANNOTATIONS,
    ANNOTATIONS_MAX as ANNOTATIONS_MAX,
    DURATION_MAX as DURATION_MAX,
    FREE_TEXT as FREE_TEXT,
    GO_BOOL as GO_BOOL,
    INT32 as INT32,
    JSON_BOOL as JSON_BOOL,
    KEY_TEXT as KEY_TEXT,
    LABEL_KEY_MAX as LABEL_KEY_MAX,
    LABEL_VALUE_MAX as LABEL_VALUE_MAX,
    LABELS as LABELS,
    LIST_MAX as LIST_MAX,
    MAP_ITEMS_MAX as MAP_ITEMS_MAX,
    NAME as NAME,
    NAME_MAX as NAME_MAX,
    QUANTITIES as QUANTITIES,
    REJECT as REJECT,
    TEXT_MAX as TEXT_MAX,
    TIME as TIME,
    TIMEOUT_MAX as TIMEOUT_MAX,
    BadValueError as BadValueError,
    Field as Field,
    FieldError as FieldError,
    Parser as Parser,
    bounded_tree as bounded_tree,
    describe as describe,
    dotted as dotted,
    duration as duration,
    enum as enum,
    go_duration as go_duration,
    integer as integer,
    number as number,
    parse_bool as parse_bool,
    register as register,
    registered as registered,
    show as show,
    strings as strings,
    structure as structure,
    text as text,
)
from scheduler.api.min_runtime import (
    MIN_RUNTIME,
    QUEUE_MIN_RUNTIME,
    QUEUE_PREEMPT_MIN_RUNTIME,
    QUEUE_RECLAIM_MIN_RUNTIME,
)
from scheduler.api.reasons import FieldInvalid as FieldInvalid
from scheduler.api.resources import ZERO
from scheduler.api.usage import USAGE_ANNOTATION, USAGE_RECORD

_readers.register_all()  # the structure readers the table names

# Annotation and label keys (the constants live with their readers; repeated here as the table's keys).
GROUP_NAME = "scheduling.k8s.io/group-name"
MIN_MEMBER = "scheduling.volcano.sh/group-min-member"
TASK_SPEC = "volcano.sh/task-spec"
TASK_INDEX = "volcano.sh/task-index"
PREEMPTABLE = "volcano.sh/preemptable"
FALLBACK_MIN = "volcano-py.io/fallback-min-available"
SLA_WAITING = "sla-waiting-time"
GPU_INDEX = "volcano.sh/gpu-index"
GPU_SPEC = "volcano-py.io/gpu-spec"
COOLDOWN = "volcano.sh/cooldown-time"  # the cdp plugin's (volcano.sh/apis scheduling/v1beta1 CooldownTime)
# The HyperNode a job with a network topology was placed in (pkg/scheduler/api/well_known_labels.go
# JobAllocatedHyperNode); plugins/hypernode_score.py keeps it.
ALLOCATED_HYPERNODE = "volcano.sh/job-allocated-hypernode"
EVICTION_NOTICE = "volcano-py.io/eviction-notice"  # on a Queue (api/evictions.py)
POD_EVICTION_NOTICE = "scheduling.volcano-py.io/eviction-notice"  # on a victim given notice (api/evictions.py)
QUEUE_USAGE = USAGE_ANNOTATION  # on a Queue: its decayed usage history, written by the scheduler (api/usage.py)
# On a Queue: its jobs' minimum runtime, for every eviction / inside the queue / by another queue (api/min_runtime.py)
MIN_RUNTIME_KEYS = (QUEUE_MIN_RUNTIME, QUEUE_PREEMPT_MIN_RUNTIME, QUEUE_RECLAIM_MIN_RUNTIME)
# Volcano's queue-allocation gate: the annotation a pod opts in with ("true") and the scheduling gate's name
# (volcano.sh/apis scheduling/v1beta1 labels.go QueueAllocationGateKey).
QUEUE_ALLOCATION_GATE = "scheduling.volcano.sh/queue-allocation-gate"
NOTICE_MAX = 3600.0  # an hour: a checkpoint takes minutes; a longer notice holds the preemptor back too long

_META = ("metadata",)


def _meta_fields(kind: str, *, namespaced: bool, labels: bool, created: bool = True) -> list[Field]:
    out = [
        Field(kind, (*_META, "name"), NAME, REJECT),
        Field(kind, (*_META, "resourceVersion"), text(64), ""),
    ]
    if created:
        out.append(Field(kind, (*_META, "creationTimestamp"), TIME, 0.0, "unknown (0)", 0.0))
    if labels:
        out.append(Field(kind, (*_META, "labels"), LABELS, REJECT, absent={}))
    if namespaced:
        out.append(Field(kind, (*_META, "namespace"), text(63, empty=False), REJECT, absent="default"))
    return out


POD_PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")
PG_PHASES = ("Pending", "Inqueue", "Running", "Unknown", "Completed")
QUEUE_STATES = ("Open", "Closed", "Closing", "Unknown")

FIELDS: tuple[Field, ...] = (
    # ---- Pod (cache/parse.py, convert.task_from_pod, the snapshot builder, the partial-gang policy)
    *_meta_fields("Pod", namespaced=True, labels=True),
    Field("Pod", (*_META, "uid"), KEY_TEXT, ""),
    Field("Pod", (*_META, "deletionTimestamp"), TIME, 1.0, "being deleted"),
    Field("Pod", (*_META, "annotations"), ANNOTATIONS, REJECT, absent={}),
    Field("Pod", (*_META, "annotations", GROUP_NAME), NAME, REJECT),
    Field("Pod", (*_META, "annotations", MIN_MEMBER), integer(1, INT32, text=True), 2,
          "a gang (the pod waits for its PodGroup)"),
    Field("Pod", (*_META, "annotations", TASK_SPEC), KEY_TEXT, "", "no task"),
    Field("Pod", (*_META, "labels", TASK_SPEC), KEY_TEXT, "", "no task"),
    # Volcano: pkg/scheduler/api/pod_info.go GetPodPreemptable; the annotation first, then the label; a value
    # strconv.ParseBool refuses leaves the pod protected.
    Field("Pod", (*_META, "annotations", PREEMPTABLE), GO_BOOL, False, "not preemptable (protected)"),
    Field("Pod", (*_META, "labels", PREEMPTABLE), GO_BOOL, False, "not preemptable (protected)"),
    Field("Pod", (*_META, "annotations", TASK_INDEX), integer(0, INT32, text=True), -1, "no index"),
    Field("Pod", (*_META, "labels", TASK_INDEX), integer(0, INT32, text=True), -1, "no index"),
    Field("Pod", (*_META, "annotations", GPU_INDEX), text(1024), "", "no cards recorded"),
    Field("Pod", (*_META, "annotations", GPU_SPEC), text(1024), "", "any GPU model"),
    # Opted in only with exactly "true", as Volcano compares it (pkg/scheduler/api/helpers.go).
    Field("Pod", (*_META, "annotations", QUEUE_ALLOCATION_GATE), text(LABEL_VALUE_MAX), "", "not opted in"),
    # A victim under notice is releasing (api/pod.py status_of); the evictor reads the deadline (not at the edge:
    # an unreadable one is due now, logged by the evictor).
    Field("Pod", (*_META, "annotations", POD_EVICTION_NOTICE), TIME, 1.0, "notice due now", edge=False),
    Field("Pod", (*_META, "ownerReferences"), registered("owners", list), (),
          "no owner (never evicted to be recreated)", ()),
    Field("Pod", ("spec", "schedulerName"), KEY_TEXT, "", "another scheduler's", "default-scheduler"),
    Field("Pod", ("spec", "nodeName"), KEY_TEXT, REJECT, absent=""),
    # int32, as the API stores it: the system classes (system-node-critical 2,000,001,000) pass the 1e9 that
    # bounds classes users define (pkg/apis/scheduling: HighestUserDefinablePriority, SystemCriticalPriority).
    Field("Pod", ("spec", "priority"), integer(-INT32 - 1, INT32), 0, "priority 0"),
    Field("Pod", ("spec", "priorityClassName"), KEY_TEXT, "", "no priority class", ""),
    # The request: containers' and init containers' resources (and restartPolicy), overhead, pod-level resources.
    Field("Pod", ("spec", "containers"), registered("request", list, walk=False), REJECT, absent=[]),
    Field("Pod", ("spec", "initContainers"), registered("request", list, walk=False), REJECT, absent=[]),
    Field("Pod", ("spec", "containers", "*", "ports"), registered("ports", list), REJECT, absent=()),
    Field("Pod", ("spec", "overhead"), QUANTITIES, REJECT, absent=ZERO),
    Field("Pod", ("spec", "resources"), registered("request", walk=False), REJECT),
    Field("Pod", ("spec", "nodeSelector"), LABELS, REJECT, absent={}),
    Field("Pod", ("spec", "affinity"), registered("affinity"), REJECT),
    Field("Pod", ("spec", "tolerations"), registered("tolerations", list), REJECT, absent=()),
    Field("Pod", ("spec", "topologySpreadConstraints"), registered("spread", list), REJECT, absent=()),
    Field("Pod", ("spec", "schedulingGates"), registered("gates", list), "?", "gated (an unreadable gate)", ""),
    Field("Pod", ("spec", "volumes"), registered("volumes", list), REJECT, absent=()),
    Field("Pod", ("status", "phase"), enum(*POD_PHASES), "Unknown", "Unknown", "Pending"),
    # Read at the edge for a pod with a cooldown (below) or a node (minruntime); for the others, after a cycle.
    Field("Pod", ("status", "conditions"), registered("pod_conditions", list), None, "not known to be bound", None,
          edge=False),
    # The cdp plugin's cooldown: a Go duration, the label before the annotation; a value Go's time.ParseDuration
    # refuses leaves the pod without one, as Volcano (pkg/scheduler/plugins/cdp/cdp.go podCooldownTime).
    Field("Pod", (*_META, "labels", COOLDOWN), go_duration(LABEL_VALUE_MAX), None, "no cooldown (not protected)"),
    Field("Pod", (*_META, "annotations", COOLDOWN), go_duration(256), None, "no cooldown (not protected)"),
    # Kubernetes allows these two only; a value it would refuse reads as Never (the reading that evicts no one).
    Field("Pod", ("spec", "preemptionPolicy"), enum("Never", "PreemptLowerPriority"), "Never",
          "Never (does not preempt)", "PreemptLowerPriority"),
    # ---- PodGroup (convert.job_from_podgroup; gang's timeout, sla's waiting time)
    *_meta_fields("PodGroup", namespaced=True, labels=False),
    Field("PodGroup", (*_META, "annotations"), ANNOTATIONS, REJECT, absent={}),
    Field("PodGroup", (*_META, "annotations", FALLBACK_MIN), integer(1, INT32, text=True), None,
          "no smaller minimum"),
    Field("PodGroup", (*_META, "annotations", SLA_WAITING), duration(DURATION_MAX), None,
          "the sla plugin's waiting time"),
    # Volcano: pkg/scheduler/api/job_info.go extractPreemptable; the annotation first, then the label; a value
    # strconv.ParseBool refuses: not preemptable. Read by gangpreempt/gangreclaim only (utils.go,
    # IsJobPreemptableForGangEviction): absent, the gang's tasks may be victims.
    Field("PodGroup", (*_META, "annotations", PREEMPTABLE), GO_BOOL, False, "not preemptable by gang eviction"),
    Field("PodGroup", (*_META, "labels", PREEMPTABLE), GO_BOOL, False, "not preemptable by gang eviction"),
    Field("PodGroup", (*_META, "annotations", ALLOCATED_HYPERNODE), NAME, None, "no allocated HyperNode"),
    Field("PodGroup", ("spec", "minMember"), integer(0, INT32), REJECT),
    Field("PodGroup", ("spec", "minAvailable"), integer(0, INT32), REJECT, absent=1),
    Field("PodGroup", ("spec", "minResources"), QUANTITIES, REJECT),
    # The same map by exact names, quota keys (`requests.cpu`, `count/pods`) included, for the resourcequota plugin
    # (api/quota.py); a value that is no quantity leaves the job unchecked against quotas, as with no minResources.
    Field("PodGroup", ("spec", "minResources", "*"), registered("quota_amounts"), None,
          "not checked against the namespace's ResourceQuotas"),
    Field("PodGroup", ("spec", "minTaskMember"), registered("task_minimums"), REJECT, absent={}),
    Field("PodGroup", ("spec", "queue"), KEY_TEXT, REJECT, absent=""),
    Field("PodGroup", ("spec", "priorityClassName"), KEY_TEXT, "", "no priority class", ""),
    Field("PodGroup", ("spec", "networkTopology"), registered("topology"), REJECT),
    # Volcano's SubGroupPolicySpec, one entry per partitioned task (api/subgroups.py; its reader registers there)
    Field("PodGroup", ("spec", "subGroupPolicy"), registered("sub_groups", list), REJECT, absent=()),
    Field("PodGroup", ("spec", "scheduleTimeoutSeconds"), number(0, TIMEOUT_MAX), None,
          "no timeout"),  # 0: no timeout
    Field("PodGroup", ("status", "phase"), enum(*PG_PHASES), "Pending", "Pending", "Pending"),
    Field("PodGroup", ("status", "conditions"), registered("conditions", list, walk=False), (), "no conditions", ()),
    Field("PodGroup", ("status", "minMemberOverride"), integer(1, INT32), None, "no override"),
    Field("PodGroup", ("status", "running"), integer(0, INT32), 0, "0", 0),
    Field("PodGroup", ("status", "succeeded"), integer(0, INT32), 0, "0", 0),
    Field("PodGroup", ("status", "failed"), integer(0, INT32), 0, "0", 0),
    # ---- Queue (convert.queue_from_object)
    *_meta_fields("Queue", namespaced=False, labels=False),
    Field("Queue", ("spec", "weight"), integer(0, INT32), 1, "weight 1", 1),
    Field("Queue", ("spec", "capability"), QUANTITIES, REJECT),
    Field("Queue", ("spec", "guarantee", "resource"), QUANTITIES, REJECT, absent=ZERO),
    Field("Queue", ("spec", "deserved"), QUANTITIES, REJECT),
    Field("Queue", ("spec", "state"), enum(*QUEUE_STATES), "Closed", "Closed", "Open"),
    Field("Queue", ("status", "state"), enum(*QUEUE_STATES), "Closed", "Closed"),
    Field("Queue", ("spec", "reclaimable"), JSON_BOOL, False, "not reclaimable", True),
    Field("Queue", ("spec", "priority"), integer(-INT32 - 1, INT32), 0, "priority 0", 0),
    Field("Queue", ("spec", "parent"), KEY_TEXT, REJECT, absent=""),
    Field("Queue", (*_META, "annotations"), ANNOTATIONS, {}, "no annotations read", {}),
    Field("Queue", (*_META, "annotations", EVICTION_NOTICE), duration(NOTICE_MAX), 0.0, "no eviction notice", 0.0),
    Field("Queue", (*_META, "annotations", QUEUE_USAGE), USAGE_RECORD, None, "no usage history (starts from zero)"),
    *(Field("Queue", (*_META, "annotations", key), MIN_RUNTIME, None, "not set (the minruntime plugin's arguments)")
      for key in MIN_RUNTIME_KEYS),
    # ---- Node (convert.node_from_object)
    *_meta_fields("Node", namespaced=False, labels=True, created=False),
    Field("Node", ("status", "allocatable"), QUANTITIES, REJECT),
    Field("Node", ("status", "capacity"), QUANTITIES, REJECT),
    Field("Node", ("status", "conditions"), registered("node_conditions", list), False, "not ready", True),
    Field("Node", ("spec", "taints"), registered("taints", list), REJECT, absent=()),
    Field("Node", ("spec", "unschedulable"), JSON_BOOL, True, "unschedulable", False),
    # ---- PriorityClass (cache/parse.py: the value a pod's or PodGroup's priorityClassName names)
    Field("PriorityClass", (*_META, "name"), NAME, REJECT),
    Field("PriorityClass", (*_META, "resourceVersion"), text(64), ""),
    Field("PriorityClass", ("value",), integer(-INT32 - 1, INT32), REJECT, absent=0),  # system classes: 2e9+
    # ---- PodDisruptionBudget, policy/v1 (api/disruption.py; the pdb plugin)
    *_meta_fields("PodDisruptionBudget", namespaced=True, labels=False, created=False),
    Field("PodDisruptionBudget", ("spec", "selector"), registered("pdb_selector"), None,
          "matches no pod (as Volcano skips a PDB whose selector it cannot read)"),
    Field("PodDisruptionBudget", ("status", "disruptionsAllowed"), integer(0, INT32), 0, "0 (protects its pods)", 0),
    Field("PodDisruptionBudget", ("status", "disruptedPods"), registered("disrupted_pods"), frozenset(),
          "no pod counted as disrupted already", frozenset()),
    # ---- ResourceQuota, core/v1 (api/quota.py; the resourcequota plugin reads the status, as Volcano's cache)
    *_meta_fields("ResourceQuota", namespaced=True, labels=False, created=False),
    Field("ResourceQuota", ("status", "hard"), registered("quota_amounts"), REJECT, absent={}),
    Field("ResourceQuota", ("status", "used"), registered("quota_amounts"), REJECT, absent={}),
    # ---- HyperNode (convert.hypernode_from_object; solver/topology.py reads what it returns)
    *_meta_fields("HyperNode", namespaced=False, labels=False, created=False),
    Field("HyperNode", ("spec", "tier"), integer(1, 64), REJECT, absent=1),
    Field("HyperNode", ("spec", "members"), registered("members", list), REJECT, absent=()),
    # A tier's name, which a networkTopology's highestTierName refers to (Volcano: api/hyper_node_info.go).
    Field("HyperNode", ("spec", "tierName"), text(LABEL_KEY_MAX), "", "no tier name", ""),
)

_BY_NAME: dict[tuple[str, str], Field] = {(f.kind, f.name): f for f in FIELDS}
if len(_BY_NAME) != len(FIELDS):  # a table bug, at import
    raise AssertionError("a field listed twice")


def field(kind: str, name: str) -> Field:
    """The table's entry; a reader asking for a field the table does not list fails (KeyError) at import."""
    return _BY_NAME[(kind, name)]


def fields_of(kind: str) -> tuple[Field, ...]:
    return tuple(f for f in FIELDS if f.kind == kind)
