"""Layer `cache`: a committed gang's DRA claims written before its pods are bound (`GangBind.claims`): each
claim's `status.allocation` (when the cycle allocated it) and its `status.reservedFor` with the gang's pods, as
kube-scheduler's DynamicResources plugin writes them in PreBind. The kubelet starts a pod only when its claims
are allocated and reserved for it.

Each write carries the resourceVersion the decision was made on, so a claim another scheduler allocated or
reserved meanwhile is refused (409) rather than given twice; the gang's pods are then not bound, and the claims
this gang wrote are released (their reservation for the gang's pods removed, an allocation only the gang held
removed), so the next cycle decides again from the cluster as it is. The apiserver's answers go into the store.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace

from scheduler.api.convert import key_of
from scheduler.api.dra import ClaimWrite, Consumer
from scheduler.api.dra_parse import claim_from_object
from scheduler.api.field_parsers import FieldError
from scheduler.api.objects import MutableObj
from scheduler.api.snapshot import GangBind
from scheduler.cache.kube import MERGE_PATCH, TRANSPORT_ERRORS, Kube
from scheduler.cache.store import DRA_API, Stores, resource_version, trim
from scheduler.dra.status import release_patch, status_patch

log = logging.getLogger("volcano_py.cache")


class ClaimWriter:
    def __init__(self, kube: Kube, stores: Stores, may_write: Callable[[], bool]) -> None:
        self.kube = kube
        self.stores = stores
        self.may_write = may_write

    def write(self, gang: GangBind) -> bool:
        """Write the gang's claims in order; at the first that cannot be written, release those written and
        return False (none of the gang's pods is bound)."""
        done: list[tuple[ClaimWrite, tuple[Consumer, ...], object]] = []
        for write in gang.claims:
            if not self.may_write():
                self._release(gang.job, done)
                return False
            try:
                written = self._write(write)
            except TRANSPORT_ERRORS as exc:  # a conflict or network trouble: retried next cycle
                log.warning("gang %s: writing claim %s/%s failed, its pods are not bound: %s", gang.job,
                            write.namespace, write.name, exc)
                written = None
            except Exception:  # noqa: BLE001 - an answer we cannot read: still release what the gang wrote
                log.exception("gang %s: writing claim %s/%s failed, its pods are not bound", gang.job,
                              write.namespace, write.name)
                written = None
            if written is None:
                self._release(gang.job, done)
                return False
            done.append(written)
        return True

    def _path(self, write: ClaimWrite) -> str:
        return f"{DRA_API}/namespaces/{write.namespace}/resourceclaims/{write.name}/status"

    def _write(self, write: ClaimWrite) -> tuple[ClaimWrite, tuple[Consumer, ...], object] | None:
        key = f"{write.namespace}/{write.name}"
        with self.stores.lock:
            raw = self.stores.resource_claims.objects.get(key)
            uids = {c.name: _uid(self.stores.pods.objects.get(f"{write.namespace}/{c.name}"))
                    for c in write.consumers}
        if raw is None or write.template:
            log.warning("claim %s is gone (or not made yet): its pods wait for the next cycle", key)
            return None
        try:
            claim = claim_from_object(raw)
        except FieldError as err:
            log.warning("claim %s cannot be read: %s", key, err)
            return None
        if write.allocation is not None and claim.allocation is not None:
            log.warning("claim %s was allocated meanwhile: its pods wait for the next cycle", key)
            return None
        if any(not uids[c.name] for c in write.consumers if not c.uid):
            log.warning("claim %s: a pod to reserve it for is gone", key)
            return None
        write = replace(write, consumers=tuple(c if c.uid else replace(c, uid=uids[c.name]) for c in write.consumers))
        reserved = tuple(c for c in claim.reserved_for
                         if not any(c.resource == w.resource and c.name == w.name for w in write.consumers))
        body = status_patch(write, reserved)
        body["metadata"] = {"resourceVersion": (raw.get("metadata") or {}).get("resourceVersion")}
        updated = self.kube.request("PATCH", self._path(write), body=body, content_type=MERGE_PATCH)
        self._keep(updated)
        log.info("claim %s: %s for %s", key, "allocated and reserved" if write.allocation else "reserved",
                 ", ".join(c.name for c in write.consumers))
        return write, (*reserved, *write.consumers), (updated.get("metadata") or {}).get("resourceVersion")

    def _release(self, job: str, done: list[tuple[ClaimWrite, tuple[Consumer, ...], object]]) -> None:
        """Undo the gang's writes, each on the version it wrote: a claim changed since (another consumer added)
        is left as it is rather than have reservedFor, which the patch replaces whole, lose that consumer."""
        for write, reserved, version in reversed(done):
            body = release_patch(write, reserved)
            body["metadata"] = {"resourceVersion": version}
            try:
                updated = self.kube.request("PATCH", self._path(write), body=body, content_type=MERGE_PATCH)
            except TRANSPORT_ERRORS as exc:  # the claim controller drops reservations of pods that never run
                log.warning("gang %s: releasing claim %s/%s failed: %s", job, write.namespace, write.name, exc)
                continue
            self._keep(updated)

    def _keep(self, updated: MutableObj) -> None:
        """The apiserver's answer into the store, unless the watch already brought something newer."""
        trim(updated)
        key = key_of(updated)
        with self.stores.lock:
            current = self.stores.resource_claims.objects.get(key)
            if current is None or resource_version(updated) > resource_version(current):
                self.stores.resource_claims.objects[key] = updated


def _uid(pod: MutableObj | None) -> str:
    meta = (pod or {}).get("metadata")
    uid = meta.get("uid") if isinstance(meta, dict) else None
    return uid if isinstance(uid, str) else ""
