"""Layer `cache`: volumes in the Kubernetes adapter.

- `StorageReader`: the snapshot's `Storage`, from the watched PersistentVolumes, PersistentVolumeClaims and
  StorageClasses. They are watched always (one watch each; a cluster has few of them next to its pods), each
  object is read once per resourceVersion and the `Storage` is rebuilt only when one of them changed, so a cycle
  pays nothing for them otherwise. Until all three were listed (or when the scheduler may not list them) there
  is no `Storage`, and pods' claims are not considered, as before volumes were.
- `VolumeBinder`: the claims of a committed gang, bound before any of its pods, as kube-scheduler's volume binder
  binds them (pkg/scheduler/framework/plugins/volumebinding/binder.go `bindAPIUpdate`, with component-helpers'
  `GetBindVolumeToClaim`): a static volume gets the claim in its `claimRef` and `pv.kubernetes.io/bound-by-
  controller`, and kube-controller-manager's PV controller completes the binding; a claim to provision gets
  `volume.kubernetes.io/selected-node`, which the provisioner acts on. Each write carries the resourceVersion the
  decision was made on, so a volume another claim took meanwhile is refused (409) rather than given twice. What
  the apiserver answers goes into the store, so the next cycle sees the claim taken before its watch event.
  Unlike kube-scheduler, the binder does not wait for the PV controller or the provisioner to finish before the
  pods are bound (the kubelet waits for the volume); see docs/volumes.md.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from scheduler.api.convert import key_of
from scheduler.api.objects import MutableObj
from scheduler.api.snapshot import GangBind, VolumeBind
from scheduler.api.volumes import (
    BOUND_BY_CONTROLLER,
    SELECTED_NODE,
    Storage,
    claim_from_object,
    class_from_object,
    volume_from_object,
)
from scheduler.cache.kube import MERGE_PATCH, TRANSPORT_ERRORS, Kube
from scheduler.cache.store import Stores, resource_version, trim

log = logging.getLogger("volcano_py.cache")

Read = Callable[[str, MutableObj, Callable[[MutableObj], Any]], Any]  # ParseCache.read: None when unreadable


class StorageReader:
    def __init__(self, stores: Stores, read: Read) -> None:
        self.stores = stores
        self.read = read
        self._version = -1
        self._storage: Storage | None = None
        self._parsed: dict[tuple[str, str], tuple[str, Any]] = {}  # (kind, key) -> (resourceVersion, value)

    def storage(self) -> Storage | None:
        stores = self.stores
        with stores.lock:
            if not all(w.listed for w in stores.storage):
                return None
            if stores.storage_version == self._version:
                return self._storage
            version = stores.storage_version
            objects = [list(w.objects.values()) for w in stores.storage]
        parsed: dict[tuple[str, str], tuple[str, Any]] = {}
        volumes, claims, classes = (
            self._values(kind, items, parse, parsed)
            for kind, items, parse in zip(
                ("PersistentVolume", "PersistentVolumeClaim", "StorageClass"),
                objects,
                (volume_from_object, claim_from_object, class_from_object),
                strict=True,
            )
        )
        self._parsed = parsed  # what was deleted is forgotten
        self._storage = Storage(
            volumes={v.name: v for v in volumes},
            claims={c.key: c for c in claims},
            classes={c.name: c for c in classes},
        )
        self._version = version
        return self._storage

    def _values(
        self,
        kind: str,
        items: list[MutableObj],
        parse: Callable[[MutableObj], Any],
        parsed: dict[tuple[str, str], tuple[str, Any]],
    ) -> list[Any]:
        out = []
        for obj in items:
            key = (kind, key_of(obj))
            rv = str((obj.get("metadata") or {}).get("resourceVersion") or "")
            cached = self._parsed.get(key)
            value = cached[1] if cached is not None and cached[0] == rv else self.read(kind, obj, parse)
            parsed[key] = (rv, value)
            if value is not None:
                out.append(value)
        return out


class VolumeBinder:
    def __init__(self, kube: Kube, stores: Stores, may_write: Callable[[], bool]) -> None:
        self.kube = kube
        self.stores = stores
        self.may_write = may_write

    def bind(self, gang: GangBind) -> bool:
        """Bind the gang's claims in order; False at the first that could not be bound (its pods are then not
        bound, and the next cycle decides again)."""
        for volume in gang.volumes:
            if not self.may_write():
                return False
            try:
                done = self._bind(volume)
            except TRANSPORT_ERRORS as exc:  # a conflict or network trouble: retried next cycle
                log.warning("gang %s: binding claim %s failed, its pods are not bound: %s", gang.job, volume.claim, exc)
                return False
            if not done:
                return False
        return True

    def _bind(self, bind: VolumeBind) -> bool:
        with self.stores.lock:
            claim = self.stores.claims.objects.get(bind.claim)
            pv = self.stores.volumes.objects.get(bind.volume) if bind.volume else None
        if claim is None or (bind.volume and pv is None):
            log.warning(
                "binding claim %s: %s is gone; retrying next cycle",
                bind.claim,
                "the claim" if claim is None else f"PersistentVolume {bind.volume}",
            )
            return False
        meta = claim.get("metadata") or {}
        if pv is not None:
            return self._bind_static(pv, meta)
        annotations = meta.get("annotations") or {}
        if annotations.get(SELECTED_NODE) == bind.node:
            return True  # asked for already (an earlier cycle, or another gang of the claim)
        # binder.go: AssumePodVolumes sets AnnSelectedNode on the claim, bindAPIUpdate writes the claim.
        body = {"metadata": {"resourceVersion": meta.get("resourceVersion"), "annotations": {SELECTED_NODE: bind.node}}}
        updated = self.kube.request(
            "PATCH",
            f"/api/v1/namespaces/{meta['namespace']}/persistentvolumeclaims/{meta['name']}",
            body=body,
            content_type=MERGE_PATCH,
        )
        log.info("claim %s: provisioning asked for on node %s", bind.claim, bind.node)
        self._keep(self.stores.claims.objects, updated)
        return True

    def _bind_static(self, pv: MutableObj, claim_meta: MutableObj) -> bool:
        ref = (pv.get("spec") or {}).get("claimRef") or {}
        uid = str(claim_meta.get("uid") or "")
        if (ref.get("namespace"), ref.get("name")) == (claim_meta.get("namespace"), claim_meta.get("name")) and (
            not ref.get("uid") or ref.get("uid") == uid
        ):
            return True  # bound or pre-bound to this claim already (IsVolumeBoundToClaim)
        meta = pv.get("metadata") or {}
        claim_ref = {
            "kind": "PersistentVolumeClaim",
            "apiVersion": "v1",
            "namespace": claim_meta.get("namespace"),
            "name": claim_meta.get("name"),
            "uid": uid,
            "resourceVersion": claim_meta.get("resourceVersion"),
        }
        updated = self.kube.request(
            "PATCH",
            f"/api/v1/persistentvolumes/{meta['name']}",
            body={
                "metadata": {
                    "resourceVersion": meta.get("resourceVersion"),
                    "annotations": {BOUND_BY_CONTROLLER: "yes"},
                },
                "spec": {"claimRef": claim_ref},
            },
            content_type=MERGE_PATCH,
        )
        log.info(
            "PersistentVolume %s: bound to claim %s/%s for the PV controller to complete",
            meta["name"],
            claim_meta.get("namespace"),
            claim_meta.get("name"),
        )
        self._keep(self.stores.volumes.objects, updated)
        return True

    def _keep(self, objects: dict[str, MutableObj], updated: MutableObj) -> None:
        """The apiserver's answer into the store, unless the watch already brought something newer."""
        trim(updated)
        key = key_of(updated)
        with self.stores.lock:
            current = objects.get(key)
            if current is None or resource_version(updated) > resource_version(current):
                objects[key] = updated
                self.stores.storage_version += 1
