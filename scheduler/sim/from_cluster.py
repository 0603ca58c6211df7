"""Layer `sim`: a cluster's objects as simulator input (`simulate --from-cluster FILE`).

FILE is what `kubectl get nodes,pods,vcjob,podgroups,queues,priorityclasses -A -o json` prints (a `List`, JSON or
YAML; several such dumps concatenated as YAML documents work too). The replay asks "what would this conf have done
with what this cluster was given?":

- Nodes, Queues and PriorityClasses are the cluster (a node as it is, labels, taints, allocatable and cordon).
- Every Volcano Job is a workload item as submitted (its status dropped), arriving at its creation time, counted
  from the earliest creation in the dump.
- Pods that belong to a PodGroup but to no Volcano Job (Deployments, StatefulSets, batch Jobs, Kubeflow
  operators) become one Volcano Job per PodGroup with one task per pod (replicas 1, the pod's own spec), its
  `minMember` as `minAvailable`, its queue: so the gang rules apply to them as they did.
- Pods of other schedulers that hold a node when the dump was taken (bound and not finished) arrive first, pinned
  to their node (`kubernetes.io/hostname`), so the capacity they took is taken in the replay too.

How long each runs: from the first of its pods' start to the last of their ends for one that finished (the
containers' `finishedAt`, or a finished Volcano Job's last transition), until the dump for one still running
(the latest time the dump mentions), and `DEFAULT_DURATION` for one that never started (the dump cannot say).
Events the dump does not hold (retries, deletions, pods since garbage-collected) are not replayed; volumes are
not simulated (a Job's `spec.volumes` is dropped); an object the replay cannot read is left out with a warning.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from scheduler.api.timestamps import parse_datetime
from scheduler.sim.errors import InputError
from scheduler.sim.workload import JOB_API, ClusterSpec, Workload, workload_from_docs

DEFAULT_DURATION = 3600.0
GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
JOB_LABEL = "volcano.sh/job-name"
OURS = ("volcano", "volcano-py")
FINISHED_JOB = ("Completed", "Failed", "Terminated", "Aborted")
_CLUSTER_KINDS = {"Node", "Queue", "PriorityClass"}
_KNOWN_KINDS = _CLUSTER_KINDS | {"Pod", "Job", "PodGroup"}


def _time(value: Any) -> float | None:
    parsed = parse_datetime(value)
    return None if parsed is None else parsed.timestamp()


def _items(source: str, docs: Iterable[Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i, doc in enumerate(docs):
        if doc is None:
            continue
        if not isinstance(doc, Mapping):
            raise InputError(source, f"document[{i}]", "expected a kubectl List or objects")
        if doc.get("kind") == "List" or "items" in doc:
            out.extend(dict(item) for item in doc.get("items") or () if isinstance(item, Mapping))
        else:
            out.append(dict(doc))
    return out


def read_dump(path: str | Path) -> list[dict[str, Any]]:
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(source, "", f"cannot read the file: {err}") from None
    try:
        docs: list[Any] = [json.loads(text)]
    except json.JSONDecodeError:
        try:
            docs = list(yaml.safe_load_all(text))
        except yaml.YAMLError as err:
            raise InputError(source, "", f"neither JSON nor YAML: {str(err).splitlines()[0]}") from None
    items = _items(source, docs)
    if not any(item.get("kind") == "Node" for item in items):
        raise InputError(source, "", "no Node in the dump: make it with kubectl get "
                         "nodes,pods,vcjob,podgroups,queues,priorityclasses -A -o json")
    return items


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', 'default')}/{meta.get('name')}"


def _clean_meta(obj: Mapping[str, Any], *, namespaced: bool = True) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    out: dict[str, Any] = {"name": meta["name"]}
    if namespaced:
        out["namespace"] = meta.get("namespace", "default")
    for key in ("labels", "annotations"):
        if meta.get(key):
            out[key] = {k: v for k, v in meta[key].items() if k != "kubectl.kubernetes.io/last-applied-configuration"}
    return out


def _node(node: Mapping[str, Any]) -> dict[str, Any]:
    status = node.get("status") or {}
    allocatable = dict(status.get("allocatable") or status.get("capacity") or {})
    return {"apiVersion": "v1", "kind": "Node", "metadata": _clean_meta(node, namespaced=False),
            "spec": {k: v for k, v in (node.get("spec") or {}).items() if k in ("taints", "unschedulable")},
            "status": {"capacity": dict(status.get("capacity") or allocatable), "allocatable": allocatable,
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def _span(pods: Sequence[Mapping[str, Any]], dumped: float) -> tuple[float | None, float | None]:
    """When the first pod started and when the last one ended (None: still running, or never started)."""
    starts = [t for p in pods if (t := _time((p.get("status") or {}).get("startTime"))) is not None]
    if not starts:
        return None, None
    ends: list[float] = []
    for pod in pods:
        status = pod.get("status") or {}
        if status.get("phase") not in ("Succeeded", "Failed"):
            return min(starts), None
        finished = [_time(((c.get("state") or {}).get("terminated") or {}).get("finishedAt"))
                    for c in status.get("containerStatuses") or ()]
        ends.append(max((f for f in finished if f is not None), default=dumped))
    return min(starts), max(ends)


def _duration(start: float | None, end: float | None, dumped: float) -> float:
    if start is None:
        return DEFAULT_DURATION
    return max(1.0, (end if end is not None else dumped) - start)


def _pod_template(pod: Mapping[str, Any]) -> dict[str, Any]:
    spec = copy.deepcopy(dict(pod.get("spec") or {}))
    for key in ("nodeName", "serviceAccount", "volumes"):  # placement is the replay's; volumes are not simulated
        spec.pop(key, None)
    labels = {k: v for k, v in ((pod.get("metadata") or {}).get("labels") or {}).items()}
    return {"metadata": {"labels": labels}, "spec": spec}


def load_cluster_dump(path: str | Path) -> tuple[ClusterSpec, Workload, float]:
    """The cluster and workload of a dump, and when the dump was taken (seconds after its first arrival)."""
    source = str(path)
    items = read_dump(path)
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for item in items:
        by_kind.setdefault(str(item.get("kind")), []).append(item)
    skipped = sorted(set(by_kind) - _KNOWN_KINDS)
    stamps = [t for item in items for t in _times(item)]
    dumped = max(stamps, default=0.0)
    created = [t for kind in ("Job", "Pod", "PodGroup") for item in by_kind.get(kind, ())
               if (t := _time((item.get("metadata") or {}).get("creationTimestamp"))) is not None]
    origin = min(created, default=dumped)
    nodes = tuple(_node(n) for n in by_kind.get("Node", ()))
    queues = [{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
               "metadata": _clean_meta(q, namespaced=False), "spec": dict(q.get("spec") or {}),
               **({"status": {"state": q["status"]["state"]}} if (q.get("status") or {}).get("state") else {})}
              for q in by_kind.get("Queue", ())]
    classes = {str(c["metadata"]["name"]): int(c.get("value", 0)) for c in by_kind.get("PriorityClass", ())}
    pods = by_kind.get("Pod", [])
    jobs_pods: dict[str, list[dict[str, Any]]] = {}
    group_pods: dict[str, list[dict[str, Any]]] = {}
    others: list[dict[str, Any]] = []
    for pod in pods:
        meta = pod.get("metadata") or {}
        namespace = meta.get("namespace", "default")
        job = (meta.get("labels") or {}).get(JOB_LABEL)
        group = (meta.get("annotations") or {}).get(GROUP_ANNOTATION)
        if job:
            jobs_pods.setdefault(f"{namespace}/{job}", []).append(pod)
        elif group and (pod.get("spec") or {}).get("schedulerName") in OURS:
            group_pods.setdefault(f"{namespace}/{group}", []).append(pod)
        else:
            others.append(pod)
    work: list[dict[str, Any]] = []  # workload documents: a manifest with its arrival and duration
    for job in by_kind.get("Job", ()):
        if not str(job.get("apiVersion", "")).startswith("batch.volcano.sh"):
            continue  # a batch/v1 Job: its pods are replayed through their PodGroup, or as other pods
        start, end = _span(jobs_pods.get(_key(job), []), dumped)
        phase = ((job.get("status") or {}).get("state") or {}).get("phase")
        if phase in FINISHED_JOB and end is None and start is not None:
            end = _time(((job.get("status") or {}).get("state") or {}).get("lastTransitionTime"))
        spec = copy.deepcopy(dict(job.get("spec") or {}))
        spec.pop("volumes", None)  # not simulated; as stored they carry the controller's generated claim names
        manifest = {"apiVersion": JOB_API, "kind": "Job", "metadata": _clean_meta(job), "spec": spec}
        arrival = (_time(job["metadata"].get("creationTimestamp")) or origin) - origin
        work.append({**manifest, "arrival": max(0.0, arrival), "duration": _duration(start, end, dumped)})
    groups = {_key(g): g for g in by_kind.get("PodGroup", ())}
    for key, members in sorted(group_pods.items()):
        group = groups.get(key)
        spec = (group or {}).get("spec") or {}
        namespace, name = key.split("/", 1)
        members.sort(key=lambda p: p["metadata"]["name"])
        tasks = [{"name": f"p{i}", "replicas": 1, "template": _pod_template(p)} for i, p in enumerate(members)]
        manifest = {"apiVersion": JOB_API, "kind": "Job", "metadata": {"name": name, "namespace": namespace},
                    "spec": {"schedulerName": members[0]["spec"].get("schedulerName", "volcano"),
                             "queue": spec.get("queue", "default"),
                             "minAvailable": min(len(members), int(spec.get("minMember", 1) or 1)),
                             "tasks": tasks}}
        stamp = _time(((group or members[0]).get("metadata") or {}).get("creationTimestamp")) or origin
        start, end = _span(members, dumped)
        work.append({**manifest, "arrival": max(0.0, stamp - origin), "duration": _duration(start, end, dumped)})
    for pod in others:  # another scheduler's pods that held a node: the same room, from the start
        status = pod.get("status") or {}
        node = (pod.get("spec") or {}).get("nodeName")
        if not node or status.get("phase") in ("Succeeded", "Failed"):
            continue
        template = _pod_template(pod)
        template["spec"]["schedulerName"] = "volcano-py"
        template["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
        template["spec"].pop("affinity", None)
        meta = pod["metadata"]
        manifest = {"apiVersion": JOB_API, "kind": "Job",
                    "metadata": {"name": f"pinned-{meta['name']}", "namespace": meta.get("namespace", "default")},
                    "spec": {"schedulerName": "volcano-py", "queue": "default", "minAvailable": 1,
                             "tasks": [{"name": "pod", "replicas": 1, "template": template}]}}
        work.append({**manifest, "arrival": 0.0, "duration": _duration(0.0, None, dumped - origin)})
    if not work:
        raise InputError(source, "", "no Volcano Job, PodGroup of ours or bound pod in the dump: nothing to replay")
    warnings = [f"{source}: {kind}: not replayed ({len(by_kind[kind])} in the dump)" for kind in skipped]
    # One object the replay cannot read is left out with its reason, not the whole dump: a cluster holds what
    # its controllers wrote (a Job's generated claim names beside its volumeClaim, say), not only what users did.
    kept = [*queues, *work]
    while True:  # each pass drops the first object the checks refuse, if any (one pass for a clean dump)
        try:
            workload = workload_from_docs(source, kept, "item", warnings)
            break
        except InputError as exc:
            at = re.match(r"item\[(\d+)\]", exc.where)
            if at is None:
                raise
            doc = kept.pop(int(at.group(1)))
            name = _key(doc) if doc.get("kind") != "Queue" else doc["metadata"]["name"]
            warnings.append(f"{source}: {doc.get('kind')} {name}: not replayed: {exc.problem}")
    if not any(doc.get("kind") != "Queue" for doc in kept):
        raise InputError(source, "", "nothing in the dump can be replayed: " + "; ".join(warnings[-3:]))
    cluster = ClusterSpec(nodes, (), classes)  # the queues are the workload's, checked as a file's are
    return cluster, workload, max(0.0, dumped - origin)


def _times(obj: Mapping[str, Any]) -> Iterable[float]:
    """Every timestamp of an object the replay reads: its creation, its pods' starts and ends, its transitions."""
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    raw = [meta.get("creationTimestamp"), status.get("startTime"),
           (status.get("state") or {}).get("lastTransitionTime") if isinstance(status.get("state"), Mapping) else None]
    for container in status.get("containerStatuses") or ():
        state = container.get("state") or {}
        raw.append((state.get("terminated") or {}).get("finishedAt"))
        raw.append((state.get("running") or {}).get("startedAt"))
    for condition in status.get("conditions") or ():
        if isinstance(condition, Mapping):
            raw.append(condition.get("lastTransitionTime"))
    return [t for t in map(_time, raw) if t is not None]
