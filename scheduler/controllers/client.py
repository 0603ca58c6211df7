"""Layer `controllers`: the few API calls the controllers make, over `scheduler.cache.kube.Kube` (raw JSON).

Reads return None for a missing object; creates ignore AlreadyExists and deletes ignore NotFound, so every
handler can be re-run after a crash or a duplicate event without harm.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from scheduler.api.objects import MutableObj
from scheduler.cache.kube import MERGE_PATCH, TRANSPORT_ERRORS, Kube, KubeError

log = logging.getLogger("volcano_py.controllers")

JOBS = "/apis/batch.volcano.sh/v1alpha1"
SCHEDULING = "/apis/scheduling.volcano.sh/v1beta1"
BUS = "/apis/bus.volcano.sh/v1alpha1"
FLOW = "/apis/flow.volcano.sh/v1alpha1"
JSON_PATCH = "application/json-patch+json"

# Where each kind the controllers create lives, by apiVersion and kind.
_COLLECTIONS = {
    ("v1", "Pod"): "/api/v1/namespaces/{ns}/pods",
    ("v1", "Service"): "/api/v1/namespaces/{ns}/services",
    ("v1", "ConfigMap"): "/api/v1/namespaces/{ns}/configmaps",
    ("v1", "Secret"): "/api/v1/namespaces/{ns}/secrets",
    ("networking.k8s.io/v1", "NetworkPolicy"): "/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies",
    ("scheduling.volcano.sh/v1beta1", "PodGroup"): SCHEDULING + "/namespaces/{ns}/podgroups",
    ("batch.volcano.sh/v1alpha1", "Job"): JOBS + "/namespaces/{ns}/jobs",  # a CronJob's and a JobFlow's Jobs
}


def namespace_terminating(exc: KubeError) -> bool:
    """A 403 whose cause is `NamespaceTerminating` (creates in a namespace being deleted are refused so)."""
    if exc.status != 403:
        return False
    try:
        causes = (json.loads(exc.body).get("details") or {}).get("causes") or []
    except (ValueError, AttributeError):
        return False
    return any(isinstance(c, dict) and c.get("reason") == "NamespaceTerminating" for c in causes)


class PodGroupConflictError(Exception):
    """The PodGroup changed since it was read (HTTP 409): read it again."""


class Api:
    def __init__(self, kube: Kube):
        self.kube = kube

    # ---- generic ---------------------------------------------------------------------------------------
    def get(self, path: str) -> MutableObj | None:
        return self.kube.get_or_none(path)

    def create(self, obj: Mapping[str, Any]) -> MutableObj | None:
        """Create `obj` in its namespace; None if it already exists."""
        path = _COLLECTIONS[(obj["apiVersion"], obj["kind"])].format(ns=obj["metadata"]["namespace"])
        try:
            return self.kube.request("POST", path, body=obj)
        except KubeError as exc:
            if exc.status == 409:
                return None
            if namespace_terminating(exc):
                # The namespace is on its way out with the Job in it: nothing to create, nothing to retry.
                log.debug("not creating %s %s: namespace %s is terminating", obj["kind"],
                          obj["metadata"].get("name"), obj["metadata"]["namespace"])
                return None
            raise

    def delete(self, path: str, body: Mapping[str, Any] | None = None) -> bool:
        """Delete; False if it was already gone."""
        return self.kube.delete(path, body)

    # ---- jobs and their objects ---------------------------------------------------------------------------
    def job(self, namespace: str, name: str) -> MutableObj | None:
        return self.get(f"{JOBS}/namespaces/{namespace}/jobs/{name}")

    def replace_job_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> MutableObj | None:
        """Write the whole status (a JSON patch `add` replaces it), so counts of vanished tasks disappear. None: the
        Job was deleted since it was read (a JobFlow's retain policy, its namespace going), nothing to write."""
        try:
            return self.kube.request(
                "PATCH", f"{JOBS}/namespaces/{namespace}/jobs/{name}/status",
                body=[{"op": "add", "path": "/status", "value": dict(status)}], content_type=JSON_PATCH,
            )
        except KubeError as exc:
            if exc.status == 404:
                return None
            raise

    def delete_job(self, namespace: str, name: str, uid: str) -> bool:
        body = {"propagationPolicy": "Background", "preconditions": {"uid": uid}}
        return self.delete(f"{JOBS}/namespaces/{namespace}/jobs/{name}", body)

    def set_volume_claim_names(self, namespace: str, name: str, names: Mapping[int, str],
                               resource_version: str) -> MutableObj:
        """Write generated claim names into `spec.volumes[i].volumeClaimName`, if the Job is still at
        `resource_version` (Volcano's controller updates the Job so, job_controller_actions.go)."""
        ops: list[dict[str, Any]] = [{"op": "test", "path": "/metadata/resourceVersion", "value": resource_version}]
        ops += [{"op": "add", "path": f"/spec/volumes/{index}/volumeClaimName", "value": claim}
                for index, claim in sorted(names.items())]
        return self.kube.request("PATCH", f"{JOBS}/namespaces/{namespace}/jobs/{name}", body=ops,
                                 content_type=JSON_PATCH)

    def pvc(self, namespace: str, name: str) -> MutableObj | None:
        return self.get(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/{name}")

    def create_pvc(self, pvc: Mapping[str, Any]) -> MutableObj | None:
        """Create a PersistentVolumeClaim; None if one of that name exists."""
        path = f"/api/v1/namespaces/{pvc['metadata']['namespace']}/persistentvolumeclaims"
        try:
            return self.kube.request("POST", path, body=pvc)
        except KubeError as exc:
            if exc.status == 409:
                return None
            raise

    def pods_of_job(self, namespace: str, job: str) -> list[MutableObj]:
        selector = quote(f"volcano.sh/job-name={job}")
        items = self.kube.request("GET", f"/api/v1/namespaces/{namespace}/pods?labelSelector={selector}")
        return list(items.get("items") or [])

    def delete_pod(self, namespace: str, name: str) -> bool:
        return self.delete(f"/api/v1/namespaces/{namespace}/pods/{name}")

    def podgroup(self, namespace: str, name: str) -> MutableObj | None:
        return self.get(f"{SCHEDULING}/namespaces/{namespace}/podgroups/{name}")

    def patch_podgroup_spec(self, namespace: str, name: str, spec: Mapping[str, Any]) -> MutableObj:
        """A merge patch of the given spec keys (an elastic job's new minMember, minTaskMember, minResources)."""
        return self.kube.request("PATCH", f"{SCHEDULING}/namespaces/{namespace}/podgroups/{name}",
                                 body={"spec": dict(spec)}, content_type=MERGE_PATCH)

    def replace_podgroup(self, podgroup: Mapping[str, Any]) -> MutableObj:
        """PUT the whole PodGroup (its resourceVersion guards against a concurrent writer)."""
        meta = podgroup["metadata"]
        try:
            return self.kube.request("PUT", f"{SCHEDULING}/namespaces/{meta['namespace']}/podgroups/{meta['name']}",
                                     body=dict(podgroup))
        except KubeError as exc:
            if exc.status == 409:
                raise PodGroupConflictError(meta["name"]) from exc
            raise

    def pods(self, namespace: str, labels: Mapping[str, str]) -> list[MutableObj]:
        """The pods of a namespace that carry all `labels`."""
        selector = quote(",".join(f"{k}={v}" for k, v in sorted(labels.items())))
        items = self.kube.request("GET", f"/api/v1/namespaces/{namespace}/pods?labelSelector={selector}")
        return list(items.get("items") or [])

    def patch_configmap_data(self, namespace: str, name: str, data: Mapping[str, Any]) -> MutableObj:
        return self.kube.request("PATCH", f"/api/v1/namespaces/{namespace}/configmaps/{name}",
                                 body={"data": dict(data)}, content_type=MERGE_PATCH)

    def delete_podgroup(self, namespace: str, name: str) -> bool:
        return self.delete(f"{SCHEDULING}/namespaces/{namespace}/podgroups/{name}")

    def jobs(self, namespace: str) -> list[MutableObj]:
        """Every Volcano Job of the namespace (a CronJob's are told by their controller reference, not a label)."""
        items = self.kube.request("GET", f"{JOBS}/namespaces/{namespace}/jobs")
        return list(items.get("items") or [])

    # ---- cronjobs ------------------------------------------------------------------------------------------
    def cronjob(self, namespace: str, name: str) -> MutableObj | None:
        return self.get(f"{JOBS}/namespaces/{namespace}/cronjobs/{name}")

    def replace_cronjob_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> MutableObj:
        """Write the whole status (a JSON patch `add` replaces it), so a key that became empty goes."""
        return self.kube.request(
            "PATCH", f"{JOBS}/namespaces/{namespace}/cronjobs/{name}/status",
            body=[{"op": "add", "path": "/status", "value": dict(status)}], content_type=JSON_PATCH,
        )

    # ---- queues and commands -------------------------------------------------------------------------------
    def queue(self, name: str) -> MutableObj | None:
        return self.get(f"{SCHEDULING}/queues/{name}")

    def create_queue(self, queue: Mapping[str, Any]) -> MutableObj | None:
        """Create a Queue (cluster-scoped); None if one of that name exists."""
        try:
            return self.kube.request("POST", f"{SCHEDULING}/queues", body=queue)
        except KubeError as exc:
            if exc.status == 409:
                return None
            raise

    def patch_queue_status(self, name: str, status: Mapping[str, Any]) -> MutableObj:
        """A merge patch of the given status keys only: `allocated` belongs to the scheduler."""
        return self.kube.request(
            "PATCH", f"{SCHEDULING}/queues/{name}/status", body={"status": dict(status)}, content_type=MERGE_PATCH
        )

    def annotate_queue(self, name: str, annotations: Mapping[str, str]) -> MutableObj:
        """A merge patch of the Queue's annotations (the hierarchy's closed-by-parent mark)."""
        return self.kube.request(
            "PATCH", f"{SCHEDULING}/queues/{name}", body={"metadata": {"annotations": dict(annotations)}},
            content_type=MERGE_PATCH,
        )

    def delete_command(self, namespace: str, name: str) -> bool:
        return self.delete(f"{BUS}/namespaces/{namespace}/commands/{name}")

    # ---- job flows and job templates ---------------------------------------------------------------------------
    def jobflow(self, namespace: str, name: str) -> MutableObj | None:
        return self.get(f"{FLOW}/namespaces/{namespace}/jobflows/{name}")

    def jobtemplate(self, namespace: str, name: str) -> MutableObj | None:
        return self.get(f"{FLOW}/namespaces/{namespace}/jobtemplates/{name}")

    def jobs_with_labels(self, namespace: str, labels: Mapping[str, str]) -> list[MutableObj]:
        """The Volcano Jobs of a namespace that carry all `labels`."""
        selector = quote(",".join(f"{k}={v}" for k, v in sorted(labels.items())))
        items = self.kube.request("GET", f"{JOBS}/namespaces/{namespace}/jobs?labelSelector={selector}")
        return list(items.get("items") or [])

    def replace_jobflow_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> MutableObj:
        """The whole status, as Volcano's UpdateStatus writes it (a JSON patch `add` replaces it)."""
        return self.kube.request(
            "PATCH", f"{FLOW}/namespaces/{namespace}/jobflows/{name}/status",
            body=[{"op": "add", "path": "/status", "value": dict(status)}], content_type=JSON_PATCH,
        )

    def replace_jobtemplate_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> MutableObj:
        return self.kube.request(
            "PATCH", f"{FLOW}/namespaces/{namespace}/jobtemplates/{name}/status",
            body=[{"op": "add", "path": "/status", "value": dict(status)}], content_type=JSON_PATCH,
        )

    def event(self, involved: Mapping[str, Any], type_: str, reason: str, message: str, now: str) -> None:
        """Best effort: a Kubernetes Event about `involved` (an object's manifest)."""
        meta = involved.get("metadata") or {}
        namespace = meta.get("namespace") or "default"
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{meta.get('name')}.", "namespace": namespace},
            "involvedObject": {"apiVersion": involved.get("apiVersion"), "kind": involved.get("kind"),
                               "name": meta.get("name"), "namespace": meta.get("namespace"),
                               "uid": meta.get("uid")},
            "type": type_, "reason": reason, "message": message,
            "source": {"component": "volcano-py-controllers"},
            "firstTimestamp": now, "lastTimestamp": now, "count": 1,
        }
        try:
            self.kube.request("POST", f"/api/v1/namespaces/{namespace}/events", body=body)
        except TRANSPORT_ERRORS as exc:  # an event is best effort
            log.debug("event not written: %s", exc)
