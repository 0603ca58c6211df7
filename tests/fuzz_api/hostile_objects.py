"""What the API-level fuzz (test_fuzz_api.py) creates: hostile Pods, PodGroups, Volcano Jobs and Queues, each a
valid base object with 1 to 5 fields changed at once, and the raw JSON they are sent as.

The values are the issue's list (NaN, +-Inf, 1e999, -1, 2^63, '', non-ASCII digits, a long string, wrong types),
the odd annotations named there, and tests/fuzz/strategies.py's quantity-shaped text and JSON values. A value
that is not JSON (NaN, Infinity, the literal 1e999) is written into the request body as such: the apiserver
refuses it, or not, as it would from any client.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st
from strategies import json_values, quantity_text, set_path

GPU = "nvidia.com/gpu"
GROUP_NAME = "scheduling.k8s.io/group-name"
PREEMPTABLE = "volcano.sh/preemptable"
FALLBACK = "volcano-py.io/fallback-min-available"
NODE_SET = "volcano-py.test/node-set"
SCHEDULER = "volcano-py"

# The hostile pods' PodGroup: the first PodGroup of a batch has this name, so a batch with both ties them.
HOSTILE_GROUP = "h-podgroup-0"


@dataclass(frozen=True)
class Raw:
    """A literal written into the JSON body as is: `1e999`, which no JSON library writes."""

    text: str

    def __repr__(self) -> str:
        return f"Raw({self.text!r})"


def encode(obj: Any) -> bytes:
    """The request body: JSON, except NaN and +-Infinity written as Python writes them and each `Raw` as its
    text; none of them is valid JSON, which is the point."""
    raws: list[str] = []

    def mark(value: Any) -> Any:
        if isinstance(value, Raw):
            raws.append(value.text)
            return f"\x00raw{len(raws) - 1}\x00"
        if isinstance(value, dict):
            return {k: mark(v) for k, v in value.items()}
        if isinstance(value, list):
            return [mark(v) for v in value]
        return value

    text = json.dumps(mark(obj), allow_nan=True, ensure_ascii=False)
    for i, raw in enumerate(raws):
        text = text.replace(json.dumps(f"\x00raw{i}\x00"), raw)
    return text.encode()


def describe(value: Any) -> Any:
    """A value as the report shows it: long strings shortened, non-JSON numbers named."""
    if isinstance(value, str) and len(value) > 60:
        return f"<{len(value)} chars: {value[:12]!r}...>"
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, Raw):
        return f"raw {value.text}"
    if isinstance(value, dict):
        return {k: describe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [describe(v) for v in value]
    return value


# ---- the base objects: each valid, and schedulable on the hostile nodes only --------------------------------
def _container() -> dict:
    return {"name": "main", "image": "busybox",
            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {GPU: "1"}}}


def pod(name: str, hostile_set: str) -> dict:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "annotations": {GROUP_NAME: HOSTILE_GROUP}, "labels": {"app": "hostile"}},
        "spec": {"schedulerName": SCHEDULER, "nodeSelector": {NODE_SET: hostile_set},
                 "terminationGracePeriodSeconds": 0, "containers": [_container()]},
    }


def podgroup(name: str, hostile_set: str) -> dict:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "annotations": {}},
            "spec": {"minMember": 1, "queue": "default"}}


def job(name: str, hostile_set: str) -> dict:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": name, "annotations": {}},
        "spec": {"schedulerName": SCHEDULER, "minAvailable": 1, "queue": "default", "maxRetry": 3,
                 "tasks": [{"name": "worker", "replicas": 1, "template": {
                     "metadata": {"annotations": {}},
                     "spec": {"nodeSelector": {NODE_SET: hostile_set}, "terminationGracePeriodSeconds": 0,
                              "containers": [_container()]}}}]},
    }


def queue(name: str, hostile_set: str) -> dict:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": name},
            "spec": {"weight": 1, "reclaimable": True}}


BASES = {"Pod": pod, "PodGroup": podgroup, "Job": job, "Queue": queue}

# ---- the field paths each kind's mutations choose from -----------------------------------------------------
ANNOTATIONS = [GROUP_NAME, PREEMPTABLE, FALLBACK, "volcano.sh/task-spec", "scheduling.volcano.sh/group-min-member",
               "scheduling.volcano.sh/queue-name", "volcano.sh/gpu-index", "volcano.sh/preemptable-rank"]
_C0 = ("spec", "containers", 0)
POD_PATHS: list[tuple[Any, ...]] = [
    (*_C0, "resources", "requests", GPU), (*_C0, "resources", "limits", GPU), (*_C0, "resources", "requests", "cpu"),
    (*_C0, "resources", "requests", "memory"), (*_C0, "resources", "requests"), (*_C0, "resources", "limits"),
    (*_C0, "resources"), (*_C0, "image"), ("spec", "initContainers"), ("spec", "overhead"),
    ("spec", "nodeSelector"), ("spec", "nodeSelector", "extra"), ("spec", "affinity"), ("spec", "tolerations"),
    ("spec", "priority"), ("spec", "priorityClassName"), ("spec", "schedulerName"),
    ("spec", "topologySpreadConstraints"), ("spec", "terminationGracePeriodSeconds"), ("spec", "hostname"),
    ("spec", "activeDeadlineSeconds"), ("metadata", "labels"), ("metadata", "labels", "app"),
    ("metadata", "annotations"), ("metadata", "ownerReferences"), ("metadata", "finalizers"),
    *(("metadata", "annotations", a) for a in ANNOTATIONS),
]
PODGROUP_PATHS: list[tuple[Any, ...]] = [
    ("spec", "minMember"), ("spec", "minResources"), ("spec", "minResources", "cpu"), ("spec", "minResources", GPU),
    ("spec", "minTaskMember"), ("spec", "minTaskMember", "worker"), ("spec", "queue"), ("spec", "priorityClassName"),
    ("spec", "networkTopology"), ("spec", "networkTopology", "highestTierAllowed"), ("spec", "networkTopology", "mode"),
    ("spec", "scheduleTimeoutSeconds"), ("spec", "subGroupPolicy"), ("spec",), ("status",), ("status", "phase"),
    ("metadata", "labels"), ("metadata", "annotations"), *(("metadata", "annotations", a) for a in ANNOTATIONS),
]
_T0 = ("spec", "tasks", 0)
_TC0 = (*_T0, "template", "spec", "containers", 0)
JOB_PATHS: list[tuple[Any, ...]] = [
    ("spec", "minAvailable"), ("spec", "minSuccess"), ("spec", "queue"), ("spec", "maxRetry"),
    ("spec", "ttlSecondsAfterFinished"), ("spec", "priorityClassName"), ("spec", "schedulerName"),
    ("spec", "policies"), ("spec", "plugins"), ("spec", "plugins", "svc"), ("spec", "plugins", "ssh"),
    ("spec", "networkTopology"), ("spec", "runningEstimate"), ("spec", "volumes"), ("spec", "tasks"),
    (*_T0, "replicas"), (*_T0, "minAvailable"), (*_T0, "name"), (*_T0, "policies"), (*_T0, "dependsOn"),
    (*_T0, "maxRetry"), (*_T0, "template"), (*_T0, "template", "spec"), (*_TC0, "resources", "limits", GPU),
    (*_TC0, "resources", "requests", GPU), (*_TC0, "resources", "requests", "cpu"), (*_TC0, "image"),
    (*_T0, "template", "spec", "nodeSelector"), (*_T0, "template", "spec", "priority"),
    (*_T0, "template", "metadata", "annotations", PREEMPTABLE), ("metadata", "annotations"),
    *(("metadata", "annotations", a) for a in ANNOTATIONS),
]
QUEUE_PATHS: list[tuple[Any, ...]] = [
    ("spec", "weight"), ("spec", "capability"), ("spec", "capability", GPU), ("spec", "capability", "cpu"),
    ("spec", "guarantee"), ("spec", "guarantee", "resource"), ("spec", "guarantee", "resource", GPU),
    ("spec", "deserved"), ("spec", "deserved", "cpu"), ("spec", "reclaimable"), ("spec", "priority"),
    ("spec", "parent"), ("spec", "state"), ("spec", "affinity"), ("spec",), ("status",), ("status", "state"),
    ("metadata", "annotations"), ("metadata", "labels"), ("metadata", "annotations", "volcano.sh/hierarchy"),
    ("metadata", "annotations", "volcano.sh/hierarchy-weights"), ("metadata", "annotations", FALLBACK),
    ("metadata", "labels", "volcano.sh/queue"),
]
PATHS = {"Pod": POD_PATHS, "PodGroup": PODGROUP_PATHS, "Job": JOB_PATHS, "Queue": QUEUE_PATHS}

# The named cases: each a field and the value a reviewer tried.
NAMED: dict[str, list[tuple[tuple[Any, ...], Any]]] = {
    "Pod": [
        (("metadata", "annotations", PREEMPTABLE), "f"), (("metadata", "annotations", PREEMPTABLE), "0"),
        (("metadata", "annotations", PREEMPTABLE), ""), (("metadata", "annotations", GROUP_NAME), "nowhere"),
        ((*_C0, "resources", "limits", GPU), "0.5"), ((*_C0, "resources", "requests", GPU), "2"),
        (("metadata", "annotations", FALLBACK), "1e999"),
    ],
    "PodGroup": [
        (("metadata", "annotations", FALLBACK), "1e999"), (("spec", "scheduleTimeoutSeconds"), 1),
        (("spec", "minMember"), 2147483647), (("spec", "minResources", GPU), "0.5"),
        (("spec", "queue"), "nowhere"),
    ],
    "Job": [
        ((*_T0, "replicas"), 2147483647), ((*_T0, "replicas"), 100001), ((*_TC0, "resources", "limits", GPU), "0.5"),
        ((*_TC0, "resources", "requests", GPU), "2"), (("spec", "queue"), "nowhere"),
        (("metadata", "annotations", FALLBACK), "1e999"),
        ((*_T0, "template", "metadata", "annotations", PREEMPTABLE), "f"),
    ],
    "Queue": [
        (("spec", "weight"), 2**63), (("spec", "capability", GPU), "1e999"), (("spec", "weight"), -1),
        (("spec", "parent"), "nowhere"), (("spec", "guarantee", "resource", GPU), "-1"),
        (("spec", "weight"), 65535), (("spec", "capability", "cpu"), "-1"), (("spec", "deserved", GPU), "0.5"),
        (("spec", "priority"), 2147483647), (("spec", "capability", GPU), "9223372036854775807"),
        (("metadata", "annotations", "volcano.sh/hierarchy"), "root/nowhere/" + "x" * 300),
    ],
}

NON_ASCII_DIGITS = ["١٢٣", "３", "٣", "۵", "߁", "১০", "²"]
SPECIAL: list[Any] = [
    math.nan, math.inf, -math.inf, Raw("1e999"), Raw("-1e999"), Raw("1e-999"), -1, 2**63, -(2**63) - 1, 2**64,
    2147483648, "", "NaN", "+Inf", "-Inf", "Infinity", "1e999", "-1", "9223372036854775808", "0.5", "1e-999",
    "0x10", "1_000", *NON_ASCII_DIGITS, True, False, None, {}, [], {"a": [1]}, [None], "f", "0", "t", "TRUE",
    "yes", " 1", "1 ", "\u00a0", "a" * 254, "UPPER", "x/y", "../../etc",
]
LONG_SIZES = [300, 70_000, 1_100_000]  # the apiserver caps a request at ~3 MiB; etcd an object at ~1.5 MiB

hostile_values = st.one_of(
    st.sampled_from(SPECIAL),
    st.builds(lambda n, c: c * n, st.sampled_from(LONG_SIZES), st.sampled_from(["x", "9", "é"])),
    quantity_text,
    json_values,
)


@dataclass
class Hostile:
    kind: str
    name: str
    mutations: list[tuple[tuple[Any, ...], Any]]
    body: dict = field(default_factory=dict)

    def paths(self) -> set[str]:
        return {".".join(map(str, p)) for p, _ in self.mutations}

    def reproducer(self) -> str:
        """The object as sent (long strings shortened), for a report."""
        return json.dumps(describe(self.body), default=repr, ensure_ascii=False)


def build(kind: str, name: str, hostile_set: str, mutations: list[tuple[tuple[Any, ...], Any]]) -> Hostile:
    body = BASES[kind](name, hostile_set)
    for path, value in mutations:
        body = set_path(body, path, value)
    body.setdefault("metadata", {})["name"] = name  # a mutation of metadata never renames the object
    if not isinstance(body["metadata"], dict):
        body["metadata"] = {"name": name}
    body["metadata"]["name"] = name
    body["apiVersion"], body["kind"] = BASES[kind](name, hostile_set)["apiVersion"], kind
    return Hostile(kind, name, mutations, body)


@st.composite
def mutations(draw: Any, kind: str) -> list[tuple[tuple[Any, ...], Any]]:
    """1 to 5 fields of one object, each a named case (1 in 4), an annotation or label given a hostile string (1 in
    4: the apiserver takes any string there, so these reach the scheduler), or any path of the kind's table with
    any hostile value (mostly refused by the apiserver for Pods, whose fields it validates)."""
    count = draw(st.integers(1, 5))
    in_maps = [p for p in PATHS[kind] if p[-2:-1] in (("annotations",), ("labels",))]
    out = []
    for _ in range(count):
        choice = draw(st.integers(0, 3))
        if choice == 0:
            out.append(draw(st.sampled_from(NAMED[kind])))
            continue
        path = draw(st.sampled_from(in_maps if choice == 1 and in_maps else PATHS[kind]))
        value = draw(hostile_values)
        if path[-2:-1] in (("annotations",), ("labels",)) and not isinstance(value, str) and draw(st.integers(0, 3)):
            # mostly a string there: the apiserver takes nothing else
            value = value.text if isinstance(value, Raw) else json.dumps(value, default=str)
        out.append((path, value))
    return out


@st.composite
def batches(draw: Any) -> list[tuple[str, list[tuple[tuple[Any, ...], Any]]]]:
    """One example: one hostile object of each kind (the PodGroup first: the pods name it), and up to 2 more."""
    kinds = ["Queue", "PodGroup", "Pod", "Job"]
    kinds += draw(st.lists(st.sampled_from(["Pod", "PodGroup", "Job", "Queue"]), max_size=2))
    return [(kind, draw(mutations(kind))) for kind in kinds]
