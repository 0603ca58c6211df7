"""Layer `ctl`: the reads `explain`, `job` and `queue` make, and the Commands they create (raw JSON).

Commands are made as vcctl makes them: `generateName: <target>-<action lowercased>-`, the target as both the
controller ownerReference and `target`, in the Job's namespace (a Queue's Commands go to `default`, as
`vcctl queue operate` does), so volcano-py's and Volcano's controllers both execute them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from scheduler.api.objects import MutableObj
from scheduler.api.pod import GROUP_NAME_ANNOTATION
from scheduler.cache.kube import MERGE_PATCH, Kube, KubeError
from scheduler.cli.ctl.explain import Facts
from scheduler.jobs import keys, podgroup_lookup_names

JOBS = "/apis/batch.volcano.sh/v1alpha1"
SCHEDULING = "/apis/scheduling.volcano.sh/v1beta1"
BUS = "/apis/bus.volcano.sh/v1alpha1"
FLOW = "/apis/flow.volcano.sh/v1alpha1"
CORE = "/api/v1"
QUEUE_COMMAND_NAMESPACE = "default"


class NotFoundError(LookupError):
    pass


class MissingCRDError(Exception):
    """The apiserver does not serve a Volcano resource the command needs: its CRD is not installed."""


@dataclass(frozen=True, slots=True)
class Listing:
    items: list[MutableObj]
    resource_version: str  # where a watch of the same path starts


_RESOURCE = re.compile(r"/apis/(?P<group>[^/]+)/(?P<version>[^/]+)/(?:namespaces/[^/]+/)?(?P<plural>[a-z0-9-]+)")
_OBJECT_NOT_FOUND = re.compile(r'\S+ "[^"]*" not found')


def missing_crd(exc: KubeError) -> MissingCRDError | None:
    """A 404 on a Volcano group's path that names no object: the resource type is not served, its CRD is not
    installed. (An object that does not exist is a 404 too, whose Status names it: `jobs... "x" not found`.)"""
    if exc.status != 404:
        return None
    parts = str(exc).split(" ", 2)
    match = _RESOURCE.match(parts[1]) if len(parts) > 1 else None
    if match is None or not match["group"].endswith("volcano.sh"):
        return None
    try:
        status = json.loads(exc.body)
    except ValueError:
        status = None  # "404 page not found": the whole group is not served
    if isinstance(status, dict):
        details = status.get("details")
        if (isinstance(details, dict) and details.get("name")) or _OBJECT_NOT_FOUND.fullmatch(
                str(status.get("message") or "")):
            return None
    crd = f"{match['plural']}.{match['group']}"
    return MissingCRDError(f"the cluster has no {crd} CRD "
                           f"({match['group']}/{match['version']} {match['plural']} is not "
                      "served): install volcano-py's CRDs with `kubectl apply --server-side -f crds/` from a "
                      f"volcano-py clone (this one is crds/{match['group']}_{match['plural']}.yaml), or the Helm "
                      "chart charts/volcano-py, which carries them")


class Client:
    def __init__(self, kube: Kube):
        self.kube = kube

    def get(self, path: str) -> MutableObj | None:
        return self.kube.get_or_none(path)

    def require_served(self, *paths: str) -> None:
        """MissingCRDError when one of these lists is not served: its CRD is not installed (a GET of one object says
        404 either way)."""
        for path in paths:
            try:
                self.kube.request("GET", path, query={"limit": "1"})
            except KubeError as exc:
                crd = missing_crd(exc)
                if crd is not None:
                    raise crd from None
                raise

    def items(self, path: str, query: dict[str, str] | None = None) -> list[MutableObj]:
        return list((self.kube.request("GET", path, query=query) or {}).get("items") or [])

    def listing(self, path: str, selector: str | None = None) -> Listing:
        """A list (of the objects whose labels match `selector`, when given) and its resourceVersion."""
        doc = self.kube.request("GET", path, query={"labelSelector": selector} if selector else None) or {}
        return Listing(list(doc.get("items") or []), str((doc.get("metadata") or {}).get("resourceVersion") or ""))

    def create(self, path: str, body: MutableObj) -> MutableObj:
        return self.kube.request("POST", path, body=body)

    def merge_patch(self, path: str, patch: MutableObj) -> MutableObj:
        return self.kube.request("PATCH", path, body=patch, content_type=MERGE_PATCH)

    def delete(self, path: str) -> bool:
        """DELETE with no options, as vcctl sends it; False when it was not there."""
        return self.kube.delete(path)

    # ---- objects -------------------------------------------------------------------------------------------
    def job(self, namespace: str, name: str) -> MutableObj | None:
        return self.get(f"{JOBS}/namespaces/{namespace}/jobs/{name}")

    def jobs(self, namespace: str | None) -> list[MutableObj]:
        return self.items(f"{JOBS}/namespaces/{namespace}/jobs" if namespace else f"{JOBS}/jobs")

    def podgroup(self, namespace: str, name: str) -> MutableObj | None:
        return self.get(f"{SCHEDULING}/namespaces/{namespace}/podgroups/{name}")

    def podgroups(self) -> list[MutableObj]:
        return self.items(f"{SCHEDULING}/podgroups")

    def pod(self, namespace: str, name: str) -> MutableObj | None:
        return self.get(f"/api/v1/namespaces/{namespace}/pods/{name}")

    def queue(self, name: str) -> MutableObj | None:
        return self.get(f"{SCHEDULING}/queues/{name}")

    def queues(self) -> list[MutableObj]:
        return self.items(f"{SCHEDULING}/queues")

    def priorities(self) -> dict[str, int]:
        try:
            classes = self.items("/apis/scheduling.k8s.io/v1/priorityclasses")
        except KubeError:
            return {}
        return {str(pc["metadata"]["name"]): int(pc.get("value", 0)) for pc in classes}

    def events_about(self, namespace: str, kind: str, name: str) -> list[MutableObj]:
        selector = quote(f"involvedObject.kind={kind},involvedObject.name={name}")
        try:
            return self.items(f"/api/v1/namespaces/{namespace}/events?fieldSelector={selector}")
        except KubeError:
            return []

    def pods(self, namespace: str | None, selector: str | None = None) -> list[MutableObj]:
        path = f"{CORE}/namespaces/{namespace}/pods" if namespace else f"{CORE}/pods"
        return self.items(path, {"labelSelector": selector} if selector else None)

    def events(self, namespace: str) -> list[MutableObj]:
        return self.items(f"{CORE}/namespaces/{namespace}/events")

    def delete_job(self, namespace: str, name: str) -> bool:
        return self.kube.delete(f"{JOBS}/namespaces/{namespace}/jobs/{name}", {"propagationPolicy": "Background"})

    # ---- commands ----------------------------------------------------------------------------------------
    def command(self, namespace: str, target: MutableObj, action: str) -> MutableObj:
        """Create a bus.volcano.sh Command about `target` (a Job or a Queue), as vcctl does."""
        meta = target["metadata"]
        ref = {"apiVersion": target["apiVersion"], "kind": target["kind"], "name": meta["name"],
               "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}
        body: dict[str, Any] = {
            "apiVersion": "bus.volcano.sh/v1alpha1", "kind": "Command",
            "metadata": {"generateName": f"{meta['name']}-{action.lower()}-", "namespace": namespace,
                         "ownerReferences": [ref]},
            "target": ref, "action": action,
        }
        return self.kube.request("POST", f"{BUS}/namespaces/{namespace}/commands", body=body)

    # ---- explain -----------------------------------------------------------------------------------------
    def facts(self, namespace: str, name: str) -> Facts:
        """What explain needs about `name`: a Volcano Job, else a PodGroup, else a pod (its group)."""
        job = self.job(namespace, name)
        target = f"job {namespace}/{name}"
        podgroup_names: tuple[str, ...] = podgroup_lookup_names(job) if job is not None else (name,)
        if job is None:
            podgroup = self.podgroup(namespace, name)
            target = f"podgroup {namespace}/{name}"
            if podgroup is None:
                pod = self.pod(namespace, name)
                if pod is None:
                    self.require_served(f"{JOBS}/namespaces/{namespace}/jobs",
                                        f"{SCHEDULING}/namespaces/{namespace}/podgroups")
                    raise NotFoundError(f"no Job, PodGroup or pod named {name} in namespace {namespace}")
                target = f"pod {namespace}/{name}"
                podgroup_names = (pod_group_name(pod),)
                job_name = ((pod.get("metadata") or {}).get("labels") or {}).get(keys.JOB_NAME)
                job = self.job(namespace, job_name) if job_name else None
        podgroup = self._podgroup_of(namespace, podgroup_names, job)
        podgroup_name = str(podgroup["metadata"]["name"]) if podgroup is not None else podgroup_names[0]
        queue_name = str(((podgroup or job or {}).get("spec") or {}).get("queue") or "default")
        queue = self.queue(queue_name)
        in_queue = [pg for pg in self.podgroups() if str((pg.get("spec") or {}).get("queue") or "default")
                    == queue_name]
        events = self.events_about(namespace, "PodGroup", podgroup_name) if podgroup is not None else []
        evicted = self.evict_events(namespace) if podgroup is not None else []
        return Facts(target=target, namespace=namespace, job=job, podgroup=podgroup, queue=queue,
                     queue_podgroups=in_queue, priorities=self.priorities(), events=events, pod_evictions=evicted)

    def evict_events(self, namespace: str) -> list[MutableObj]:
        """The namespace's `Evict` events on pods (the scheduler's, with the cause annotated: ctl/explain.py)."""
        selector = quote("involvedObject.kind=Pod,reason=Evict")
        try:
            return self.items(f"/api/v1/namespaces/{namespace}/events?fieldSelector={selector}")
        except KubeError:
            return []


    def _podgroup_of(self, namespace: str, names: tuple[str, ...], job: MutableObj | None) -> MutableObj | None:
        """The first of `names` that exists and is not a namesake of another job. A Job's names are
        `<job>-<uid>` then the legacy `<job>` (Volcano's getPodGroupByJob fallback,
        pkg/controllers/job/job_controller_actions.go)."""
        for name in names:
            podgroup = self.podgroup(namespace, name)
            if podgroup is not None and (job is None or _owned_by(podgroup, job)):
                return podgroup
        return None


def pod_group_name(pod: MutableObj) -> str:
    """The PodGroup a pod belongs to: its group-name annotation, else the one the controllers make for plain
    pods (`podgroup-<uid of its controller owner, or its own>`)."""
    meta = pod.get("metadata") or {}
    group = (meta.get("annotations") or {}).get(GROUP_NAME_ANNOTATION)
    if group:
        return str(group)
    owner = next((r for r in meta.get("ownerReferences") or () if r.get("controller")), None)
    return f"podgroup-{(owner or meta).get('uid')}"


def _owned_by(obj: MutableObj, owner: MutableObj) -> bool:
    uid = (owner.get("metadata") or {}).get("uid")
    refs = (obj.get("metadata") or {}).get("ownerReferences") or ()
    return not refs or any(r.get("uid") == uid for r in refs)
