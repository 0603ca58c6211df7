"""Layer `controllers`: PodGroups for plain pods (Deployments, StatefulSets, batch Jobs, bare pods).

A pod with one of our schedulerNames and no `scheduling.k8s.io/group-name` annotation gets a PodGroup per
controlling workload, `podgroup-<owner uid>` (a bare pod: `podgroup-<pod uid>`), as Volcano names it. The
annotations `scheduling.volcano.sh/group-min-member` and `scheduling.volcano.sh/queue-name` are read from the
pod (its template's annotations) or else from the owning workload. The PodGroup is owned by the workload (or the
pod), so the garbage collector removes it with them. Pods are never modified: the scheduler's cache finds a
plain pod's PodGroup by the same name (`scheduler.api.convert.plain_group_of`), and a pod that asks for a gang
waits until it exists.

The PodGroup follows its ReplicaSet or StatefulSet, as Volcano's pg controller makes it
(pkg/controllers/podgroup/pg_controller_handler.go addReplicaSet/addStatefulSet): scaled to 0 replicas, the
workload's PodGroup is deleted (so a Deployment's rollout leaves one PodGroup, its new ReplicaSet's); with
replicas, the PodGroup is rebuilt from one of its current pods and replaced where its spec, labels or
annotations differ (a new request, a new group-min-member).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from scheduler.api.convert import (
    MIN_MEMBER_ANNOTATION,
    PLAIN_GROUP_PREFIX,
    QUEUE_NAME_ANNOTATION,
    plain_group_name,
)
from scheduler.api.field_parsers import INT32, BadValueError, integer
from scheduler.api.objects import MutableObj
from scheduler.api.owner_gang import owner_group_name
from scheduler.api.pod import GROUP_NAME_ANNOTATION, PREEMPTABLE_KEY
from scheduler.api.resources import QuantityError, pod_request
from scheduler.cache.kube import KubeError
from scheduler.controllers.client import SCHEDULING, Api, PodGroupConflictError
from scheduler.controllers.timers import Retries, Timers
from scheduler.jobs import keys
from scheduler.jobs.expand import quota_usage, sum_limits

log = logging.getLogger("volcano_py.controllers.podgroup")

REVISION_LABEL = "controller-revision-hash"  # a StatefulSet's pods of its update revision carry it

# Where an owning workload lives, by (apiVersion, kind).
WORKLOADS = {
    ("apps/v1", "ReplicaSet"): "/apis/apps/v1/namespaces/{ns}/replicasets/{name}",
    ("apps/v1", "StatefulSet"): "/apis/apps/v1/namespaces/{ns}/statefulsets/{name}",
    ("batch/v1", "Job"): "/apis/batch/v1/namespaces/{ns}/jobs/{name}",
}


def controller_of(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    return next((r for r in (obj.get("metadata") or {}).get("ownerReferences") or () if r.get("controller")), None)


def needs_podgroup(pod: Mapping[str, Any], scheduler_names: frozenset[str]) -> bool:
    meta = pod.get("metadata") or {}
    if (pod.get("spec") or {}).get("schedulerName") not in scheduler_names:
        return False
    if (meta.get("annotations") or {}).get(GROUP_NAME_ANNOTATION) or meta.get("deletionTimestamp"):
        return False
    owner = controller_of(pod)
    return not (owner and str(owner.get("apiVersion", "")).startswith("batch.volcano.sh/"))


_MIN_MEMBER = integer(0, INT32, text=True)


def _min_member(value: object) -> int:
    """group-min-member as Volcano reads it (getMinMemberFromUpperRes: strconv.ParseInt(v, 10, 32), kept when
    >= 0): ASCII decimal digits in [0, 2^31-1], else 1 (Python's int() would take "1_000", "٣" and 10^12)."""
    try:
        return int(_MIN_MEMBER.parse(value))
    except BadValueError:
        return 1


# Pod annotations and labels Volcano copies onto a plain pod's PodGroup (buildPodGroupFromPod).
POD_ANNOTATIONS_COPIED = (PREEMPTABLE_KEY, "volcano.sh/cooldown-time", "volcano.sh/revocable-zone")
POD_LABELS_COPIED = (PREEMPTABLE_KEY, "volcano.sh/cooldown-time")
JDB_ANNOTATIONS = ("volcano.sh/jdb-min-available", "volcano.sh/jdb-max-unavailable")  # the first one present
INHERITED_PREFIX = "volcano.sh/"  # the workload's annotations inherited by its PodGroup (AnnotationPrefix)


def _metadata_from(pod_meta: Mapping[str, Any], workload_annotations: Mapping[str, str]) -> tuple[dict[str, str],
                                                                                                  dict[str, str]]:
    """The PodGroup's (labels, annotations): the workload's `volcano.sh/` annotations, then the pod's own."""
    pod_annotations = pod_meta.get("annotations") or {}
    pod_labels = pod_meta.get("labels") or {}
    annotations = {k: str(v) for k, v in workload_annotations.items() if k.startswith(INHERITED_PREFIX)}
    annotations.update({k: str(pod_annotations[k]) for k in POD_ANNOTATIONS_COPIED if k in pod_annotations})
    jdb = next((k for k in JDB_ANNOTATIONS if k in pod_annotations), None)
    if jdb is not None:
        annotations[jdb] = str(pod_annotations[jdb])
    labels = {k: str(pod_labels[k]) for k in POD_LABELS_COPIED if k in pod_labels}
    return labels, annotations


def plain_podgroup(pod: Mapping[str, Any], workload_annotations: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The PodGroup for a plain pod (pure). The pod's annotations win over its workload's."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    annotations = {**(workload_annotations or {}), **(meta.get("annotations") or {})}
    min_member = _min_member(annotations.get(MIN_MEMBER_ANNOTATION, 1))
    owner = controller_of(pod)
    ref = ({k: owner[k] for k in ("apiVersion", "kind", "name", "uid") if k in owner} if owner else
           {"apiVersion": "v1", "kind": "Pod", "name": meta.get("name"), "uid": meta.get("uid")})
    group: dict[str, Any] = {"minMember": min_member,
                             "queue": str(annotations.get(QUEUE_NAME_ANNOTATION) or keys.DEFAULT_QUEUE)}
    try:
        if min_member > 0:  # CalTaskRequests of 0 replicas: an empty list, written as none
            total_requests, total_limits = pod_request(spec).scale(min_member), sum_limits([spec]).scale(min_member)
            # The ResourceQuota usage names, as Volcano's pg controller writes them (buildPodGroupFromPod ->
            # pkg/controllers/util/util.go CalTaskRequests): the resourcequota plugin's enqueue gate compares
            # minResources with a quota's hard on the names both spell (`count/pods`, `requests.cpu`, ...).
            group["minResources"] = quota_usage(total_requests, total_limits, min_member)
    except QuantityError:
        pass  # the scheduler reports the bad request on the pod
    if spec.get("priorityClassName"):
        group["priorityClassName"] = spec["priorityClassName"]
    labels, pg_annotations = _metadata_from(meta, workload_annotations or {})
    pg_meta: dict[str, Any] = {"name": plain_group_name(pod), "namespace": meta.get("namespace", "default"),
                               "ownerReferences": [{**ref, "controller": True, "blockOwnerDeletion": False}]}
    if labels:
        pg_meta["labels"] = labels
    if pg_annotations:
        pg_meta["annotations"] = pg_annotations
    return {"apiVersion": keys.PODGROUP_API_VERSION, "kind": "PodGroup", "metadata": pg_meta, "spec": group}


# The spec keys `plain_podgroup` writes: on an update these are replaced, others (set by a user) are kept.
MANAGED_SPEC = ("minMember", "queue", "minResources", "priorityClassName")


def podgroup_update(current: Mapping[str, Any], wanted: Mapping[str, Any]) -> dict[str, Any] | None:
    """`current` with `wanted`'s spec, labels and annotations, or None when they already agree (pure).

    Volcano's shouldUpdateExistingPodGroup replaces the three wholesale; spec keys volcano-py does not manage
    are kept so a user's networkTopology, say, survives."""
    cur_meta, want_meta = current.get("metadata") or {}, wanted.get("metadata") or {}
    cur_spec = dict(current.get("spec") or {})
    spec = {**{k: v for k, v in cur_spec.items() if k not in MANAGED_SPEC}, **wanted["spec"]}
    labels, annotations = want_meta.get("labels") or {}, want_meta.get("annotations") or {}
    if spec == cur_spec and labels == (cur_meta.get("labels") or {}) and annotations == (
            cur_meta.get("annotations") or {}):
        return None
    meta = {**cur_meta, "labels": labels, "annotations": annotations}
    return {**current, "metadata": meta, "spec": spec}


def _template_is_ours(workload: Mapping[str, Any], scheduler_names: frozenset[str]) -> bool:
    template = (workload.get("spec") or {}).get("template") or {}
    annotations = (template.get("metadata") or {}).get("annotations") or {}
    return (template.get("spec") or {}).get("schedulerName") in scheduler_names and not annotations.get(
        GROUP_NAME_ANNOTATION)


def _replicas(workload: Mapping[str, Any]) -> int:
    replicas = (workload.get("spec") or {}).get("replicas")
    return 1 if replicas is None else int(replicas)  # the apiserver defaults it to 1


class PodGroupController:
    def __init__(self, api: Api, scheduler_names: Iterable[str] = (keys.DEFAULT_SCHEDULER,), *,
                 owner_claims: Callable[[Mapping[str, Any]], bool] | None = None):
        """`owner_claims(pod)`: True when the pod's gang is made from its owner chain (controllers/owner_gangs.py):
        then no per-workload PodGroup is made for it."""
        self.api = api
        self.scheduler_names = frozenset(scheduler_names)
        self.owner_claims = owner_claims
        self._lock = threading.Lock()
        self._made: set[str] = set()  # PodGroup keys known to exist
        self.retries = Retries(Timers())  # a failed create runs again (kopf does not retry watch handlers)

    def on_pod(self, kind: str | None, pod: MutableObj) -> None:
        if kind == "DELETED" or not needs_podgroup(pod, self.scheduler_names):
            return
        namespace, name = str(pod["metadata"].get("namespace", "default")), plain_group_name(pod)
        key = f"{namespace}/{name}"
        self.retries.run(key, f"podgroup {key} for plain pods", log, lambda: self._ensure(namespace, name, pod))

    def _ensure(self, namespace: str, name: str, pod: MutableObj) -> None:
        key = f"{namespace}/{name}"
        with self._lock:
            if key in self._made:
                return
        if self._claimed(pod):
            return
        if self.api.get(f"{SCHEDULING}/namespaces/{namespace}/podgroups/{name}") is None:
            podgroup = plain_podgroup(pod, self._workload_annotations(namespace, pod))
            self.api.create(podgroup)
            spec = podgroup["spec"]
            log.info("podgroup %s for plain pods: minMember %s, queue %s", key, spec["minMember"], spec["queue"])
        with self._lock:
            self._made.add(key)

    def on_workload(self, kind: str | None, workload: MutableObj, *, statefulset: bool = False) -> None:
        """A ReplicaSet (or StatefulSet) changed: its PodGroup follows its replicas and its pods' template."""
        meta = workload.get("metadata") or {}
        if kind == "DELETED" or not _template_is_ours(workload, self.scheduler_names):
            return  # a deleted workload's PodGroup goes with it (ownerReference)
        namespace = str(meta.get("namespace", "default"))
        name = f"{PLAIN_GROUP_PREFIX}{meta.get('uid')}"
        if _replicas(workload) == 0:
            if self.api.delete_podgroup(namespace, name):
                log.info("podgroup %s/%s deleted: its workload %s has 0 replicas", namespace, name, meta.get("name"))
            with self._lock:
                self._made.discard(f"{namespace}/{name}")
            return
        pod = self._current_pod(namespace, workload, statefulset)
        if pod is not None and needs_podgroup(pod, self.scheduler_names) and not self._claimed(pod):
            self._create_or_update(namespace, pod)

    def _claimed(self, pod: Mapping[str, Any]) -> bool:
        labels = (pod.get("metadata") or {}).get("labels")
        return bool(self.owner_claims and owner_group_name(labels if isinstance(labels, Mapping) else None)
                    and self.owner_claims(pod))

    def _current_pod(self, namespace: str, workload: MutableObj, statefulset: bool) -> MutableObj | None:
        """One live pod the workload controls (of its update revision, for a StatefulSet), as Volcano takes the
        first pod its selector lists."""
        meta = workload["metadata"]
        labels = dict(((workload.get("spec") or {}).get("selector") or {}).get("matchLabels") or {})
        revision = (workload.get("status") or {}).get("updateRevision")
        if statefulset and revision:
            labels[REVISION_LABEL] = str(revision)
        for pod in self.api.pods(namespace, labels):
            owner = controller_of(pod)
            if owner is not None and owner.get("uid") == meta.get("uid") and not pod["metadata"].get(
                    "deletionTimestamp"):
                return pod
        return None

    def _create_or_update(self, namespace: str, pod: MutableObj) -> None:
        name = plain_group_name(pod)
        for _ in range(3):  # a conflict means another writer moved it: read it again
            wanted = plain_podgroup(pod, self._workload_annotations(namespace, pod))
            current = self.api.get(f"{SCHEDULING}/namespaces/{namespace}/podgroups/{name}")
            if current is None:
                self.api.create(wanted)
                log.info("podgroup %s/%s for plain pods created", namespace, name)
                break
            updated = podgroup_update(current, wanted)
            if updated is None:
                break
            try:
                self.api.replace_podgroup(updated)
            except PodGroupConflictError:
                continue
            log.info("podgroup %s/%s follows its workload: %s", namespace, name, updated["spec"])
            break
        with self._lock:
            self._made.add(f"{namespace}/{name}")

    def on_podgroup(self, kind: str | None, podgroup: MutableObj) -> None:
        if kind == "DELETED":
            meta = podgroup.get("metadata") or {}
            with self._lock:
                self._made.discard(f"{meta.get('namespace')}/{meta.get('name')}")

    def _workload_annotations(self, namespace: str, pod: MutableObj) -> dict[str, str]:
        """The owning workload's annotations (a ReplicaSet's Deployment's too); {} where RBAC forbids reading."""
        try:
            return self._read_workload_annotations(namespace, pod)
        except KubeError as exc:
            log.warning("cannot read the workload of pod %s/%s: %s", namespace, pod["metadata"].get("name"), exc)
            return {}

    def _read_workload_annotations(self, namespace: str, pod: MutableObj) -> dict[str, str]:
        owner = controller_of(pod)
        path = WORKLOADS.get((str((owner or {}).get("apiVersion")), str((owner or {}).get("kind"))))
        if owner is None or path is None:
            return {}
        workload = self.api.get(path.format(ns=namespace, name=owner.get("name"))) or {}
        annotations = dict((workload.get("metadata") or {}).get("annotations") or {})
        parent = controller_of(workload)
        if parent is not None and parent.get("kind") == "Deployment":  # a ReplicaSet's Deployment
            deployment = self.api.get(f"/apis/apps/v1/namespaces/{namespace}/deployments/{parent.get('name')}")
            annotations = {**((deployment or {}).get("metadata") or {}).get("annotations", {}), **annotations}
        return annotations
