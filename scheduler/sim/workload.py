"""Layer `sim`: reading simulator input (cluster and workload YAML), with errors that name file and field.

Cluster file:
    nodes:                      # a node, or a pool of `count` identical nodes named <name>-<i>
    - {name: gpu, count: 2, cpu: 64, memory: 512Gi, gpu: 8, labels: {...}, taints: [...]}
    queues:                     # Queue manifests, or the short form {name, weight, capability, guarantee, state}
    - {name: team-a, weight: 2}
    priorityClasses: {high: 1000}
    hyperNodes:                 # topology.volcano.sh HyperNode manifests, as a user would apply them
    - {metadata: {name: rack-1}, spec: {tier: 1, members: [{type: Node, selector: {regexMatch: {pattern: "^gpu-"}}}]}}
    podDisruptionBudgets:       # policy/v1 PodDisruptionBudgets (the pdb plugin); an integer spec.minAvailable has
    - {metadata: {name: db}, spec: {minAvailable: 2, selector: {matchLabels: {app: db}}}}  # its status computed
    resourceSlices:             # resource.k8s.io/v1 DRA objects, as a driver and a user would apply them (with
    - {metadata: {name: gpus}, spec: {driver: gpu.example.com, nodeName: gpu, ...}}  # predicates'
    deviceClasses: [...]        # predicate.DynamicResourceAllocationEnable, pods' claims count; sim/devices.py);
    resourceClaims: [...]       # a slice whose nodeName names a node pool is copied for each of its nodes
    resourceClaimTemplates: [...]

Workload file: either `jobs:` (a list), or a YAML stream of manifests. Each item is a Volcano Job
(`batch.volcano.sh/v1alpha1`), a PodGroup or a Queue exactly as a user would apply it, plus two simulator
keys beside `spec`: `arrival` (seconds, default 0) and `duration` (seconds the job runs once its gang is up).
A ResourceQuota (core/v1) may be listed too, for the resourcequota plugin (its status as `sim/quotas.py` says).

Jobs, PodGroups and Queues are checked against their CRDs' schemas, as the apiserver checks them: a wrong type
or value is an error (`InputError`, naming the field); a field the schema does not name is a warning
(`Workload.warnings`, `ClusterSpec.warnings`), as the apiserver warns and prunes, and the run goes on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml

from scheduler.api.resources import QuantityError, Resource
from scheduler.durations import DurationError, format_duration, parse_seconds
from scheduler.jobs import flow
from scheduler.jobs.schema import JOB_CRD, PODGROUP_CRD, QUEUE_CRD, schema_problems, unknown_fields
from scheduler.jobs.validate import validate_job
from scheduler.sim import workload_kinds as kinds
from scheduler.sim.devices import DRA_KEYS, dra_objects
from scheduler.sim.errors import InputError
from scheduler.sim.items import Controlled, WorkItem
from scheduler.sim.objects import node_object
from scheduler.sim.pdbs import pdb_problem
from scheduler.sim.quotas import quota_problem

T = TypeVar("T")

JOB_API = "batch.volcano.sh/v1alpha1"
SCHED_API = "scheduling.volcano.sh/v1beta1"


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    nodes: tuple[dict[str, Any], ...]
    queues: tuple[dict[str, Any], ...]
    priority_classes: Mapping[str, int]
    hypernodes: tuple[dict[str, Any], ...] = ()
    warnings: tuple[str, ...] = ()  # unknown fields, each a line naming file and field
    pdbs: tuple[dict[str, Any], ...] = ()  # PodDisruptionBudget manifests
    dra: tuple[dict[str, Any], ...] = ()  # ResourceSlices, DeviceClasses, ResourceClaims, ResourceClaimTemplates


@dataclass(frozen=True, slots=True)
class Workload:
    items: tuple[WorkItem, ...]
    queues: tuple[dict[str, Any], ...] = field(default=())
    warnings: tuple[str, ...] = ()  # unknown fields, each a line naming file and field
    controlled: tuple[Controlled, ...] = ()  # CronJobs, JobFlows, JobTemplates: their controllers make Jobs
    resource_quotas: tuple[dict[str, Any], ...] = ()  # ResourceQuota manifests (core/v1; sim/quotas.py)


def _read_yaml(path: str | Path, *, stream: bool) -> list[Any]:
    source = str(path)
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise InputError(source, "", f"cannot read the file ({exc.strerror})") from None
    try:
        docs = list(yaml.safe_load_all(text)) if stream else [yaml.safe_load(text)]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else ""
        raise InputError(source, where, f"not valid YAML ({getattr(exc, 'problem', exc)})") from None
    return [d for d in docs if d is not None]


def _mapping(value: Any, source: str, where: str, expected: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise InputError(source, where, f"expected {expected}, got {type(value).__name__}")
    return value


def _number(value: Any, source: str, where: str, *, minimum: float = 0.0) -> float:
    """A time in seconds: a number, or a Go duration (`90s`, `1h30m`), the grammar of every duration volcano-py
    reads (scheduler/durations.py)."""
    seconds = None
    if isinstance(value, str):
        try:
            seconds = parse_seconds(value)
        except DurationError:
            seconds = None
    elif isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    if seconds is None or seconds != seconds or seconds < minimum or seconds == float("inf"):
        raise InputError(source, where, f"expected a duration >= {format_duration(minimum)} (e.g. 90s, 1h30m, "
                                        f"or a number of seconds), got {value!r}")
    return seconds


# ---- cluster ---------------------------------------------------------------------------------------------


def _first_repeat(names: Sequence[T]) -> T | None:
    """The first name seen twice, in one pass (`names.count` per name took 2 s on 10,000 nodes)."""
    seen: set[T] = set()
    for name in names:
        if name in seen:
            return name
        seen.add(name)
    return None


def load_cluster(path: str | Path) -> ClusterSpec:
    source = str(path)
    docs = _read_yaml(path, stream=False)
    root = _mapping(docs[0] if docs else None, source, "", "a mapping with `nodes:`")
    unknown = set(root) - {"nodes", "queues", "priorityClasses", "hyperNodes", "podDisruptionBudgets", *DRA_KEYS}
    if unknown:
        raise InputError(
            source, sorted(unknown)[0],
            "unknown key (expected nodes, queues, priorityClasses, hyperNodes, podDisruptionBudgets, "
            + ", ".join(DRA_KEYS) + ")",
        )
    raw_nodes = root.get("nodes")
    if not isinstance(raw_nodes, list) or not raw_nodes:
        raise InputError(source, "nodes", "expected a non-empty list of nodes or node pools")
    nodes: list[dict[str, Any]] = []
    pools: dict[str, list[str]] = {}  # a pool of `count` nodes: its nodes' names, for the slices that name it
    for i, raw in enumerate(raw_nodes):
        made = _node_pool(_mapping(raw, source, f"nodes[{i}]", "a node"), source, f"nodes[{i}]")
        nodes.extend(made)
        if raw.get("count", 1) != 1:
            pools[str(raw["name"])] = [n["metadata"]["name"] for n in made]
    names = [n["metadata"]["name"] for n in nodes]
    duplicate = _first_repeat(names)
    if duplicate:
        raise InputError(source, "nodes", f"node name {duplicate!r} is used twice")
    warnings: list[str] = []
    raw_queues = root.get("queues") or []
    if not isinstance(raw_queues, list):
        raise InputError(source, "queues", "expected a list of queues")
    queues = tuple(
        _queue(_mapping(q, source, f"queues[{i}]", "a queue"), source, f"queues[{i}]", warnings)
        for i, q in enumerate(raw_queues)
    )
    classes = root.get("priorityClasses") or {}
    _mapping(classes, source, "priorityClasses", "a map of name to integer value")
    for name, value in classes.items():
        if isinstance(value, bool) or not isinstance(value, int):
            raise InputError(source, f"priorityClasses.{name}", f"expected an integer, got {value!r}")
    raw_hypernodes = root.get("hyperNodes") or []
    if not isinstance(raw_hypernodes, list):
        raise InputError(source, "hyperNodes", "expected a list of HyperNode manifests")
    hypernodes = tuple(
        dict(_mapping(h, source, f"hyperNodes[{i}]", "a HyperNode manifest")) for i, h in enumerate(raw_hypernodes)
    )
    raw_pdbs = root.get("podDisruptionBudgets") or []
    if not isinstance(raw_pdbs, list):
        raise InputError(source, "podDisruptionBudgets", "expected a list of PodDisruptionBudget manifests")
    pdbs = tuple(
        dict(_mapping(p, source, f"podDisruptionBudgets[{i}]", "a PodDisruptionBudget manifest"))
        for i, p in enumerate(raw_pdbs)
    )
    for i, pdb in enumerate(pdbs):
        meta = pdb.get("metadata")
        meta = {"namespace": "default", **(meta if isinstance(meta, Mapping) else {})}
        problem = pdb_problem({**pdb, "metadata": meta})
        if problem:
            raise InputError(source, f"podDisruptionBudgets[{i}]", problem)
    dra = tuple(obj for key, kind in DRA_KEYS.items() for i, raw in enumerate(_list(root, key, source))
                for obj in dra_objects(_mapping(raw, source, f"{key}[{i}]", f"a {kind} manifest"), kind, pools,
                                       source, f"{key}[{i}]"))
    return ClusterSpec(tuple(nodes), queues, dict(classes), hypernodes, tuple(warnings), pdbs, dra)


def _list(root: Mapping[str, Any], key: str, source: str) -> list[Any]:
    value = root.get(key) or []
    if not isinstance(value, list):
        raise InputError(source, key, "expected a list of manifests")
    return value


_NODE_KEYS = {"name", "count", "cpu", "memory", "gpu", "pods", "labels", "taints", "resources", "unschedulable"}


def _node_pool(raw: Mapping[str, Any], source: str, where: str) -> list[dict[str, Any]]:
    unknown = set(raw) - _NODE_KEYS
    if unknown:
        raise InputError(source, f"{where}.{sorted(unknown)[0]}", f"unknown key (expected one of {sorted(_NODE_KEYS)})")
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise InputError(source, f"{where}.name", "expected a node name")
    count = raw.get("count", 1)
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise InputError(source, f"{where}.count", f"expected a whole number >= 1, got {count!r}")
    labels = dict(_mapping(raw.get("labels") or {}, source, f"{where}.labels", "a map of labels"))
    taints = raw.get("taints") or []
    if not isinstance(taints, list):
        raise InputError(source, f"{where}.taints", "expected a list of {key, value, effect}")
    extra = dict(_mapping(raw.get("resources") or {}, source, f"{where}.resources", "a resource map"))
    kwargs = {
        "cpu": str(raw.get("cpu", "64")),
        "memory": str(raw.get("memory", "512Gi")),
        "gpu": raw.get("gpu", 0),
        "pods": raw.get("pods", 110),
        "labels": labels,
        "taints": taints,
        "unschedulable": bool(raw.get("unschedulable", False)),
        "extra": extra,
    }
    out = []
    for i in range(count):
        node = node_object(name if count == 1 else f"{name}-{i}", **kwargs)
        try:
            Resource.from_quantities(node["status"]["allocatable"], field="allocatable")
        except QuantityError as exc:
            raise InputError(source, where, str(exc)) from None
        out.append(node)
    return out


_SHORT_QUEUE_KEYS = ("weight", "capability", "deserved", "reclaimable", "priority", "parent")


def _queue(raw: Mapping[str, Any], source: str, where: str, warnings: list[str]) -> dict[str, Any]:
    """A Queue manifest, or the short form `{name, weight, ...}` made into one; checked against the Queue CRD."""
    short = "metadata" not in raw
    if short:
        name = raw.get("name")
        if not isinstance(name, str) or not name:
            raise InputError(source, f"{where}.name", "expected a queue name")
        spec = {k: v for k, v in raw.items() if k in _SHORT_QUEUE_KEYS}
        if "guarantee" in raw:
            spec["guarantee"] = {"resource": raw["guarantee"]}
        manifest: dict[str, Any] = {"apiVersion": SCHED_API, "kind": "Queue", "metadata": {"name": name},
                                    "spec": spec}
        if "state" in raw:
            manifest["status"] = {"state": raw["state"]}
        unknown = sorted(set(raw) - {"name", "guarantee", "state", *_SHORT_QUEUE_KEYS})
        warnings.extend(f"{source}: {where} ({name}): {key}: unknown field (ignored)" for key in unknown)
    else:
        manifest = dict(raw)
        manifest.setdefault("apiVersion", SCHED_API)
        manifest.setdefault("kind", "Queue")
        meta = manifest.get("metadata")
        name = meta.get("name") if isinstance(meta, Mapping) else None
        if not isinstance(name, str) or not name:
            raise InputError(source, f"{where}.metadata.name", "expected a queue name")
    label = f"{where} ({name})"
    wrong = schema_problems(manifest, QUEUE_CRD)
    if wrong:
        problems = [_short_path(p.path, short) + f": {p.problem}" for p in wrong]
        raise InputError(source, label, "; ".join(problems), tuple(p.path for p in wrong))
    if not short:
        warnings.extend(f"{source}: {label}: {p.path}: unknown field (ignored)" for p in unknown_fields(manifest,
                                                                                                      QUEUE_CRD))
    spec = manifest.get("spec") or {}
    weight = spec.get("weight", 1)
    if isinstance(weight, bool) or not isinstance(weight, int) or not 1 <= weight <= 65535:
        raise InputError(source, f"{where}.weight", f"expected an integer 1..65535, got {weight!r}")
    for key in ("capability", "deserved"):
        try:
            Resource.from_quantities(spec.get(key), field=f"{where}.spec.{key}")
        except QuantityError as exc:
            raise InputError(source, "", str(exc)) from None
    return manifest


def _short_path(path: str, short: bool) -> str:
    """The field as the user wrote it: `weight` in the short form, not the manifest's `spec.weight`."""
    if short and path.startswith("spec.guarantee.resource"):
        return "guarantee" + path[len("spec.guarantee.resource"):]
    if short and path.startswith("spec."):
        return path[len("spec."):]
    if short and path.startswith("status."):
        return path[len("status."):]
    return path


# ---- workload --------------------------------------------------------------------------------------------


_VALUE_RULES = frozenset({"type", "anyOf", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})


def load_workload(path: str | Path) -> Workload:
    source = str(path)
    docs = _read_yaml(path, stream=True)
    if len(docs) == 1 and isinstance(docs[0], Mapping) and "jobs" in docs[0] and "kind" not in docs[0]:
        raw_items = docs[0]["jobs"]
        if not isinstance(raw_items, list):
            raise InputError(source, "jobs", "expected a list of Volcano Jobs")
        prefix = "jobs"
    else:
        raw_items, prefix = docs, "document"
    workload = workload_from_docs(source, raw_items, prefix)
    if not workload.items and not workload.controlled:
        # An error, not a quiet exit 0: in CI an empty workload is a generator's or a path's mistake, and a replay
        # of nothing would pass every check made on its output.
        raise InputError(source, "", "no jobs to replay: the workload holds no Volcano Job, PodGroup, Deployment, "
                         "StatefulSet, CronJob or JobFlow (a list under `jobs:`, or one manifest per document)")
    return workload


def _expanded(source: str, raw_items: list[Any], prefix: str, warnings: list[str],
              controlled: list[tuple[str, Controlled]]) -> list[tuple[str, dict[str, Any]]]:
    """The items, with Deployments and StatefulSets made into the Jobs the replay runs (`workload_kinds`);
    CronJobs, JobFlows and JobTemplates go to `controlled`."""
    out: list[tuple[str, dict[str, Any]]] = []

    for i, raw in enumerate(raw_items):
        where = f"{prefix}[{i}]"
        doc = dict(_mapping(raw, source, where, "a Volcano Job, PodGroup or Queue manifest"))
        kind = doc.get("kind", "Job")
        label = f"{source}: {where} ({(doc.get('metadata') or {}).get('name')})"

        def number(value: Any, at: str) -> float:
            return _number(value, source, at)

        try:
            if kind in kinds.WORKLOADS:
                job = kinds.from_workload(doc, where, label, warnings)
                out.extend([(where, job)] if job is not None else [])
            elif kind == "CronJob":
                controlled.append((where, kinds.cronjob_item(doc, where, number)))
            elif kind in ("JobFlow", "JobTemplate"):
                controlled.append((where, kinds.flow_item(doc, where, number)))
            else:
                out.append((where, doc))
        except kinds.KindError as exc:
            raise InputError(source, exc.where, exc.problem) from None
    return out


def _check_job(doc: dict[str, Any], source: str, label: str, warnings: list[str], crd: str = JOB_CRD,
               field_prefix: str = "") -> None:
    """What the apiserver refuses (the CRD's types), then what Volcano's admission webhook refuses: one line
    naming each field, before anything runs. A field the CRD does not name is warned about, as the apiserver
    warns (and `kubectl apply --validate=strict` refuses): a misspelt `minAvailabel` must not pass silently.
    (A PodGroup's unknown fields are not warned about: volcano-py reads the seed articles' `minAvailable` for
    `minMember` and their `scheduleTimeoutSeconds`, which are not in Volcano's schema.)"""
    wrong = schema_problems(doc, crd)
    # The webhook's checks need the right types, and would repeat a bad value the schema named (replicas -1)
    webhook = crd == JOB_CRD and not any(p.rule in _VALUE_RULES for p in wrong)
    problems = [f"{field_prefix}{p}" for p in [*map(str, wrong), *(validate_job(doc) if webhook else [])]]
    if problems:
        raise InputError(source, label, "; ".join(problems), tuple(field_prefix + p.path for p in wrong))
    if crd == JOB_CRD:
        warnings.extend(f"{source}: {label}: {field_prefix}{p.path}: unknown field (ignored)"
                        for p in unknown_fields(doc, crd))


def _check_controlled(controlled: list[tuple[str, Controlled]], source: str, warnings: list[str]) -> None:
    """A CronJob's and a JobTemplate's Job checked as a Job is; a JobFlow's entries name templates that exist
    and targets among its entries, with no cycle (what the flow controller would report, refused up front)."""
    templates = {(c.manifest["metadata"]["namespace"], c.name) for _, c in controlled if c.kind == "JobTemplate"}
    for where, item in controlled:
        label = f"{where} ({item.name})"
        if item.kind == "CronJob":
            _check_job(kinds.sample_job(item), source, label, warnings, field_prefix="spec.jobTemplate.")
        elif item.kind == "JobTemplate":
            _check_job(kinds.sample_job(item), source, label, warnings)
        else:
            problems = [p for p in flow.spec_problems(item.manifest) if p.kind != flow.ProblemKind.IGNORED_FIELD]
            namespace = item.manifest["metadata"]["namespace"]
            for step in flow.flow_steps(item.manifest):
                if (namespace, step.name) not in templates:
                    problems.append(flow.Problem(flow.ProblemKind.MISSING_TEMPLATE, f"{step.path}.name",
                                                 (step.name, namespace, flow.job_name(item.manifest, step.name))))
            if problems:
                raise InputError(source, label, "; ".join(p.message() for p in problems),
                                 tuple(p.field for p in problems))
            warnings.extend(f"{source}: {label}: {p.message()}" for p in flow.spec_problems(item.manifest)
                            if p.kind == flow.ProblemKind.IGNORED_FIELD)
    names = [(c.kind, c.manifest["metadata"]["namespace"], c.name) for _, c in controlled]
    duplicate = _first_repeat(names)
    if duplicate:
        raise InputError(source, "", f"{duplicate[0]} {duplicate[1]}/{duplicate[2]} appears twice")


def workload_from_docs(source: str, raw_items: list[Any], prefix: str = "document",
                       warnings: list[str] | None = None) -> Workload:
    """Jobs, PodGroups (with `arrival` and `duration`), Queues, and the objects whose controllers make Jobs,
    checked as `load_workload` checks a file."""
    items: list[WorkItem] = []
    queues: list[dict[str, Any]] = []
    quotas: list[dict[str, Any]] = []
    warnings = list(warnings or ())
    controlled: list[tuple[str, Controlled]] = []
    for where, doc in _expanded(source, raw_items, prefix, warnings, controlled):
        kind = doc.get("kind", "Job")
        if kind == "Queue":
            queues.append(_queue(doc, source, where, warnings))
            continue
        if kind == "ResourceQuota":
            meta = doc.get("metadata")
            if not isinstance(meta, Mapping) or not meta.get("name"):
                raise InputError(source, f"{where}.metadata.name", "expected a name")
            problem = quota_problem({**doc, "metadata": {"namespace": "default", **meta}})
            if problem:
                raise InputError(source, where, problem)
            quotas.append(doc)
            continue
        if kind not in ("Job", "PodGroup"):
            raise InputError(source, f"{where}.kind", f"expected Job, PodGroup, Queue, ResourceQuota, Deployment, "
                             f"StatefulSet, CronJob, JobFlow or JobTemplate, got {kind!r}")
        arrival = _number(doc.pop("arrival", 0), source, f"{where}.arrival")
        duration = _number(doc.pop("duration", 60), source, f"{where}.duration")
        doc.setdefault("apiVersion", JOB_API if kind == "Job" else SCHED_API)
        doc["kind"] = kind
        meta = doc.get("metadata")
        if not isinstance(meta, Mapping) or not meta.get("name"):
            raise InputError(source, f"{where}.metadata.name", "expected a name")
        doc["metadata"] = {"namespace": "default", **meta}
        _check_job(doc, source, f"{where} ({meta['name']})", warnings, JOB_CRD if kind == "Job" else PODGROUP_CRD)
        items.append(WorkItem(doc, arrival, duration))
    _check_controlled(controlled, source, warnings)
    names = [(i.kind, i.manifest["metadata"]["namespace"], i.name) for i in items]
    duplicate = _first_repeat(names)
    if duplicate:
        raise InputError(source, "", f"{duplicate[0]} {duplicate[1]}/{duplicate[2]} appears twice")
    return Workload(tuple(items), tuple(queues), tuple(warnings), tuple(c for _, c in controlled), tuple(quotas))
