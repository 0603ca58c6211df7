"""Layer `sim`: Dynamic Resource Allocation in the in-memory cluster — ResourceSlices, DeviceClasses,
ResourceClaims and ResourceClaimTemplates, with the parts of Kubernetes that the scheduler relies on done at once.

DRA is modelled only when the cluster is given such objects (`InMemoryCluster.add_dra`, a cluster file's
`resourceSlices`, `deviceClasses`, `resourceClaims`, `resourceClaimTemplates`); without them pods' claims are
ignored (the snapshot carries no DRA objects), as before. Each object is read by the parsers the Kubernetes cache
uses (`api/dra_parse.py`): one that cannot be read is refused when it is added, with a ValueError naming it.

What the cluster does in place of the rest of Kubernetes:
- kube-controller-manager's resourceclaim controller: a pod added with a claim from a template gets its own
  ResourceClaim (`<pod>-<claim>`, owned by the pod) and its name in `status.resourceClaimStatuses`, at once; a
  pod whose template does not exist gets none (it waits, with the scheduler's reason); a pod that is gone or
  finished leaves `reservedFor`, and the claim made for it is deleted, which frees its devices. A claim named
  by pods keeps its allocation when its pods are done, as on a cluster (volcano-py does not add the finalizer
  that has the controller deallocate it), until it is deleted;
- the binder's claim writes (`GangBind.claims`, `write`): a claim's allocation and reservedFor, before the
  gang's pods are bound; a write that could not be made on a cluster (the claim gone, or allocated since) is
  refused and the gang's pods are not bound, as the Kubernetes cache does.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from scheduler.api.convert import key_of
from scheduler.api.dra import ClaimWrite, DraObjects, ResourceClaim
from scheduler.api.dra_parse import (
    claim_from_object,
    class_from_object,
    pod_claims_from_object,
    slice_from_object,
    template_from_object,
)
from scheduler.api.field_parsers import FieldError
from scheduler.api.objects import MutableObj
from scheduler.sim.errors import InputError

DRA_KINDS = ("ResourceSlice", "DeviceClass", "ResourceClaim", "ResourceClaimTemplate")
_READERS: dict[str, Callable[[Mapping[str, Any]], Any]] = {
    "ResourceSlice": slice_from_object,
    "DeviceClass": class_from_object,
    "ResourceClaim": claim_from_object,
    "ResourceClaimTemplate": template_from_object,
}
_NAMESPACED = ("ResourceClaim", "ResourceClaimTemplate")


# A cluster file's keys for them (`sim/workload.py`), and the kind each holds.
DRA_KEYS = {"resourceSlices": "ResourceSlice", "deviceClasses": "DeviceClass", "resourceClaims": "ResourceClaim",
            "resourceClaimTemplates": "ResourceClaimTemplate"}


def dra_objects(raw: Mapping[str, Any], kind: str, pools: Mapping[str, list[str]], source: str,
                where: str) -> list[dict[str, Any]]:
    """One manifest of a cluster file, `kind` filled in, checked as the cache reads it (InputError naming file
    and field). A slice whose `spec.nodeName` names a node pool is copied for each node of the pool, named
    `<slice>-<node>`, its pool named after the node."""
    manifest = {"apiVersion": "resource.k8s.io/v1", "kind": kind, **raw}
    if manifest["kind"] != kind:
        raise InputError(source, f"{where}.kind", f"expected {kind}, got {manifest['kind']!r}")
    out = [manifest]
    spec, meta = manifest.get("spec"), manifest.get("metadata")
    node = spec.get("nodeName") if kind == "ResourceSlice" and isinstance(spec, Mapping) else None
    if isinstance(node, str) and node in pools and isinstance(spec, Mapping) and isinstance(meta, Mapping):
        pool = spec.get("pool")
        out = []
        for member in pools[node]:
            out.append({**manifest, "metadata": {**meta, "name": f"{meta.get('name') or node}-{member}"},
                        "spec": {**spec, "nodeName": member,
                                 "pool": {**pool, "name": member} if isinstance(pool, Mapping) else pool}})
    for obj in out:
        try:
            read_dra(obj)
        except ValueError as exc:
            raise InputError(source, where, str(exc)) from None
    return out


def read_dra(obj: Mapping[str, Any]) -> Any:
    """The parsed value of one DRA manifest (its `kind` one of `DRA_KINDS`); ValueError naming why not."""
    kind = obj.get("kind")
    if kind not in _READERS:
        raise ValueError(f"not a DRA object: kind {kind!r} (expected one of {', '.join(DRA_KINDS)})")
    return _READERS[str(kind)](obj)  # FieldError, a ValueError, names the object, the field and the problem


@dataclass(slots=True)
class SimDevices:
    slices: dict[str, Any] = field(default_factory=dict)
    classes: dict[str, Any] = field(default_factory=dict)
    claims: dict[str, ResourceClaim] = field(default_factory=dict)  # namespace/name
    templates: dict[str, Any] = field(default_factory=dict)
    _objects: DraObjects | None = None  # what the snapshot carries, made again after a change

    def add(self, obj: MutableObj) -> str:
        """Add (or replace) one DRA object; its key. ValueError when it cannot be read."""
        manifest = copy.deepcopy(obj)
        meta = manifest.setdefault("metadata", {})
        if manifest.get("kind") in _NAMESPACED:
            meta.setdefault("namespace", "default")
            meta.setdefault("uid", f"uid-{meta.get('namespace')}-{meta.get('name')}")
        value = read_dra(manifest)
        key = key_of(manifest)
        {"ResourceSlice": self.slices, "DeviceClass": self.classes, "ResourceClaim": self.claims,
         "ResourceClaimTemplate": self.templates}[str(manifest["kind"])][key] = value
        self._objects = None
        return key

    def objects(self) -> DraObjects:
        if self._objects is None:
            self._objects = DraObjects(tuple(self.slices.values()), tuple(self.classes.values()),
                                       tuple(self.claims.values()), tuple(self.templates.values()))
        return self._objects

    # ---- the resourceclaim controller -----------------------------------------------------------------
    def make_claims(self, pod: MutableObj) -> None:
        """The pod's claims from templates, made and named in its status (before the pod is read). A pod whose
        claims cannot be read is left as it is: reading it refuses it."""
        try:
            wanted = pod_claims_from_object(pod)
        except FieldError:
            return
        namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        uid = pod["metadata"].get("uid") or f"pod:{name}"
        statuses = pod.setdefault("status", {}).setdefault("resourceClaimStatuses", [])
        for ref in wanted.claims:
            tmpl = self.templates.get(f"{namespace}/{ref.template}") if ref.template else None
            if tmpl is None or wanted.claim_name(ref):
                continue  # named, made already, or its template missing: the pod waits, as on a cluster
            base = claim_name = f"{name}-{ref.name}"[:247]
            n = 0
            while f"{namespace}/{claim_name}" in self.claims:  # the controller's generateName never collides
                n += 1
                claim_name = f"{base}-{n}"
            self.claims[f"{namespace}/{claim_name}"] = ResourceClaim(
                namespace, claim_name, f"uid-{namespace}-{claim_name}", tmpl.spec, owner_pod=uid)
            statuses.append({"name": ref.name, "resourceClaimName": claim_name})
            self._objects = None
        if not statuses:
            del pod["status"]["resourceClaimStatuses"]

    def sweep(self, alive: Iterable[tuple[str, str]]) -> None:
        """Pods gone or finished leave reservedFor; a claim made for such a pod is deleted. `alive`: (key, uid)
        of the pods that exist and are not finished."""
        keys = set()
        owners = set()
        for key, uid in alive:
            keys.add(key)
            owners.add(uid or f"pod:{key.split('/', 1)[1]}")
        for key, claim in list(self.claims.items()):
            reserved = tuple(c for c in claim.reserved_for
                             if c.resource != "pods" or f"{claim.namespace}/{c.name}" in keys)
            if claim.owner_pod and claim.owner_pod not in owners and not reserved:
                del self.claims[key]
                self._objects = None
            elif reserved != claim.reserved_for:
                self.claims[key] = replace(claim, reserved_for=reserved)
                self._objects = None

    # ---- the binder's writes ------------------------------------------------------------------------
    def write(self, writes: Iterable[ClaimWrite], uids: Mapping[str, str]) -> bool:
        """A gang's claim writes, all or none (False: its pods are not bound). `uids`: pod key -> uid."""
        done: dict[str, ResourceClaim] = {}
        for w in writes:
            key = f"{w.namespace}/{w.name}"
            claim = done.get(key) or self.claims.get(key)
            if claim is None or w.template or (w.allocation is not None and claim.allocation is not None):
                return False
            consumers = tuple(c if c.uid else replace(c, uid=uids.get(f"{w.namespace}/{c.name}", ""))
                              for c in w.consumers)
            reserved = (*claim.reserved_for, *(c for c in consumers if c not in claim.reserved_for))
            done[key] = replace(claim, allocation=w.allocation or claim.allocation, reserved_for=reserved)
        self.claims.update(done)
        if done:
            self._objects = None
        return True
