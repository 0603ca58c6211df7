"""Layer `controllers`: PodGroups for plain pods (Deployments, StatefulSets, batch Jobs, bare pods).

A pod with one of our schedulerNames and no `scheduling.k8s.io/group-name` annotation gets a PodGroup per
controlling workload, `podgroup-<owner uid>` (a bare pod: `podgroup-<pod uid>`), as Volcano names it. The
annotations `scheduling.volcano.sh/group-min-member` and `scheduling.volcano.sh/queue-name` are read from the
pod (its template's annotations) or else from the owning workload. The PodGroup is owned by the workload (or the
pod), so the garbage collector removes it with them. Pods are never modified: the scheduler's cache finds a
plain pod's PodGroup by the same name (`scheduler.api.convert.plain_group_of`), and a pod that asks for a gang
waits until it exists.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from scheduler.api.convert import (
    MIN_MEMBER_ANNOTATION,
    QUEUE_NAME_ANNOTATION,
    plain_group_name,
)
from scheduler.api.pod import GROUP_NAME_ANNOTATION
from scheduler.api.resources import ZERO, QuantityError, pod_request
from scheduler.cache.kube import KubeError, Obj
from scheduler.controllers.client import SCHEDULING, Api
from scheduler.jobs import keys

log = logging.getLogger("volcano_py.controllers.podgroup")

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


def _int(value: object, default: int) -> int:
    try:
        return max(1, int(str(value)))
    except ValueError:
        return default


def plain_podgroup(pod: Mapping[str, Any], workload_annotations: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The PodGroup for a plain pod (pure). The pod's annotations win over its workload's."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    annotations = {**(workload_annotations or {}), **(meta.get("annotations") or {})}
    min_member = _int(annotations.get(MIN_MEMBER_ANNOTATION, 1), 1)
    owner = controller_of(pod)
    ref = ({k: owner[k] for k in ("apiVersion", "kind", "name", "uid") if k in owner} if owner else
           {"apiVersion": "v1", "kind": "Pod", "name": meta.get("name"), "uid": meta.get("uid")})
    group: dict[str, Any] = {"minMember": min_member,
                             "queue": str(annotations.get(QUEUE_NAME_ANNOTATION) or keys.DEFAULT_QUEUE)}
    try:
        request = pod_request(spec)
        total = ZERO
        for _ in range(min_member):
            total = total + request
        minimum = {k: v for k, v in total.to_quantities().items() if k != "pods"}
        if minimum:
            group["minResources"] = minimum
    except QuantityError:
        pass  # the scheduler reports the bad request on the pod
    if spec.get("priorityClassName"):
        group["priorityClassName"] = spec["priorityClassName"]
    return {
        "apiVersion": keys.PODGROUP_API_VERSION, "kind": "PodGroup",
        "metadata": {"name": plain_group_name(pod), "namespace": meta.get("namespace", "default"),
                     "ownerReferences": [{**ref, "controller": True, "blockOwnerDeletion": False}]},
        "spec": group,
    }


class PodGroupController:
    def __init__(self, api: Api, scheduler_names: Iterable[str] = (keys.DEFAULT_SCHEDULER,)):
        self.api = api
        self.scheduler_names = frozenset(scheduler_names)
        self._lock = threading.Lock()
        self._made: set[str] = set()  # PodGroup keys known to exist

    def on_pod(self, kind: str | None, pod: Obj) -> None:
        if kind == "DELETED" or not needs_podgroup(pod, self.scheduler_names):
            return
        namespace = str(pod["metadata"].get("namespace", "default"))
        name = plain_group_name(pod)
        key = f"{namespace}/{name}"
        with self._lock:
            if key in self._made:
                return
        if self.api.get(f"{SCHEDULING}/namespaces/{namespace}/podgroups/{name}") is None:
            podgroup = plain_podgroup(pod, self._workload_annotations(namespace, pod))
            self.api.create(podgroup)
            spec = podgroup["spec"]
            log.info("podgroup %s for plain pods: minMember %s, queue %s", key, spec["minMember"], spec["queue"])
        with self._lock:
            self._made.add(key)

    def on_podgroup(self, kind: str | None, podgroup: Obj) -> None:
        if kind == "DELETED":
            meta = podgroup.get("metadata") or {}
            with self._lock:
                self._made.discard(f"{meta.get('namespace')}/{meta.get('name')}")

    def _workload_annotations(self, namespace: str, pod: Obj) -> dict[str, str]:
        """The owning workload's annotations (a ReplicaSet's Deployment's too); {} where RBAC forbids reading."""
        try:
            return self._read_workload_annotations(namespace, pod)
        except KubeError as exc:
            log.warning("cannot read the workload of pod %s/%s: %s", namespace, pod["metadata"].get("name"), exc)
            return {}

    def _read_workload_annotations(self, namespace: str, pod: Obj) -> dict[str, str]:
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
